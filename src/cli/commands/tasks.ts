// `turnwise tasks synth | failing | check | reach`: tasks from the open workspace (mutation bugs
// validated by its tests, its failing tests), validation of task files, and which tasks the
// agent's tools can fix at all.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError } from '../../core/errors';
import { assertWritableOutput, summarizeLineErrors } from '../../core/fs';
import { escapeControlChars } from '../../core/text';
import type { ReportFormat, RunnerKind, Task } from '../../core/schema';
import { checkTaskFile, readTaskFile, writeTaskFile } from '../../tasks/taskfile';
import { stopOnSignals } from '../signals';
import { failingTestTasks, synthesizeMutationTasks, synthPhaseText, type SynthSummary } from '../../tasks/synth';
import { checkTasksInWorkspace, type ScoringCheckSummary } from '../../tasks/scoring-check';
import { RUNNER_KINDS, type RunnerOverride } from '../../tasks/runners';
import {
  listOption,
  numberInRange,
  oneOf,
  requireString,
  seedOption,
  UsageError,
  valueOptions,
  type CliCommand,
  type ParsedArgs,
} from '../command';
import { ProgressBar } from '../progress';
import { RunDir } from '../../core/run';
import { assertWorkspaceHoldsTasks } from '../../tasks/origin';
import { readRunConfig, type TrainConfig } from '../../train/config';
import { REACH_OUTCOME_TEXT, REACH_OUTCOMES, toolsReach, type ReachRow } from '../../train/tools-reach';

const RUNNER_OPTIONS = valueOptions('runner', 'test-command', 'report-format', 'report-path');
const REPORT_FORMATS: readonly string[] = ['junit-xml', 'jest-json', 'go-test-json'] satisfies ReportFormat[];
const RUNNER_USAGE =
  '[--runner pytest|node-test|mocha|jest|go-test] [--test-command CMD --report-format junit-xml|jest-json|go-test-json [--report-path P]]';

function runnerOverride(args: ParsedArgs): RunnerOverride {
  const o: RunnerOverride = {};
  const runner = args.values.runner;
  if (typeof runner === 'string' && !(RUNNER_KINDS as readonly string[]).includes(runner))
    throw new UsageError(`--runner must be one of ${RUNNER_KINDS.join(', ')}, got ${JSON.stringify(runner)}`);
  const format = args.values['report-format'];
  if (typeof format === 'string' && !REPORT_FORMATS.includes(format))
    throw new UsageError(`--report-format must be one of ${REPORT_FORMATS.join(', ')}, got ${JSON.stringify(format)}`);
  if (typeof runner === 'string') o.kind = runner as RunnerKind;
  if (typeof args.values['test-command'] === 'string') o.command = args.values['test-command'];
  if (typeof args.values['report-format'] === 'string') o.reportFormat = args.values['report-format'] as ReportFormat;
  if (typeof args.values['report-path'] === 'string') o.reportPath = args.values['report-path'];
  if (o.command && !o.reportFormat && !o.kind)
    throw new UsageError('--test-command needs --report-format (or --runner) so the report can be read');
  return o;
}

function workspaceArg(args: ParsedArgs): string {
  const ws = path.resolve(requireString(args, 'workspace'));
  if (!fs.existsSync(ws))
    throw new TurnwiseError('not-found', `workspace ${ws} does not exist`, { hint: 'pass --workspace DIR pointing at a project folder' });
  if (!fs.statSync(ws).isDirectory())
    throw new TurnwiseError('invalid-input', `workspace ${ws} is a file, not a folder`, {
      hint: 'pass --workspace DIR pointing at the project folder that holds it',
    });
  return ws;
}

/** What `tasks synth` prints after writing its tasks. */
export function formatSynthSummary(s: SynthSummary, out: string, n: number): string {
  const rows = Object.entries(s.operators)
    .filter(([, c]) => c.candidates > 0)
    .map(
      ([op, c]) =>
        `  ${op.padEnd(18)} ${String(c.candidates).padStart(5)} ${String(c.tried).padStart(6)} ${String(c.kept).padStart(5)} ${String(c.dropped).padStart(8)}`,
    );
  const drops = Object.entries(s.dropped)
    .filter(([, v]) => v > 0)
    .map(([k, v]) => `${k} ${v}`)
    .join(', ');
  return [
    `${n} task(s) written to ${out}`,
    `suite: ${s.runner}, ${s.baseline.passing}/${s.baseline.tests} passing, ${(s.baseline.durationMs / 1000).toFixed(1)} s per run`,
    `candidates: ${s.candidates.generated} generated (${s.candidates.duplicates} duplicate diffs removed), ${s.candidates.tried} tried, ${s.candidates.kept} kept, ${s.candidates.dropped} dropped, ${s.candidates.surplus} surplus`,
    `  ${'operator'.padEnd(18)} ${'cands'.padStart(5)} ${'tried'.padStart(6)} ${'kept'.padStart(5)} ${'dropped'.padStart(8)}`,
    ...rows,
    `dropped because: ${drops || 'none'}`,
    ...(s.baseline.failing
      ? [
          `${s.baseline.failing} test(s) fail on the unchanged workspace: no task uses them, and the agent's tw-test and tw-suspects do not count them`,
        ]
      : []),
    ...(s.baseline.unstable ? [`${s.baseline.unstable} test(s) passed in only one of two runs of the suite: no task uses them`] : []),
    ...scoringLines(s.scoring),
    `${s.tasksPerMinute.toFixed(1)} validated tasks/min with ${s.concurrency} sandbox(es) in parallel`,
  ].join('\n');
}

/** The scoring check's lines of a summary: how many tasks it passed, why the others failed, and a repository-level problem first. */
function scoringLines(s: ScoringCheckSummary): string[] {
  const failed = Object.entries(s.failed);
  return [
    ...(s.repositoryProblem ? [`REPOSITORY PROBLEM: ${escapeControlChars(s.repositoryProblem)}`] : []),
    `scoring check (the no-op and the reference fix scored as an agent's episode): ${s.passed} of ${s.checked} passed${failed.length ? `; failed: ${failed.map(([k, n]) => `${k} ${n}`).join(', ')}` : ''}`,
    ...Object.entries(s.firstDetail).map(([k, d]) => `  ${k}: ${escapeControlChars(d.split('\n')[0]).slice(0, 400)}`),
  ];
}

/** The options `tasks synth` and `tasks failing` share (read by commonTaskArgs). */
const COMMON_TASK_OPTIONS = { ...valueOptions('workspace', 'out', 'seed'), ...RUNNER_OPTIONS };

/** Everything `tasks synth` and `tasks failing` share, checked before any sandbox starts. */
function commonTaskArgs(args: ParsedArgs): { workspace: string; out: string; seed: number; override: RunnerOverride } {
  const workspace = workspaceArg(args);
  const out = path.resolve(requireString(args, 'out'));
  assertWritableOutput(out);
  return { workspace, out, seed: seedOption(args), override: runnerOverride(args) };
}

export const tasksSynthCommand: CliCommand = {
  name: 'tasks synth',
  summary: 'synthesize bug-fix tasks by AST mutation of the workspace source, kept only when its tests catch them',
  usage: `--workspace DIR --out FILE [--max N] [--seed S] [--concurrency N] [--max-candidates N] [--timeout SECONDS] ${RUNNER_USAGE} [--json]`,
  options: { ...COMMON_TASK_OPTIONS, ...valueOptions('max', 'concurrency', 'max-candidates', 'timeout') },
  async run(args, io) {
    const { workspace, out, seed, override } = commonTaskArgs(args);
    const max = numberInRange(args, 'max', 20, { min: 1, integer: true });
    const concurrency = numberInRange(args, 'concurrency', 2, { min: 1, max: 64, integer: true });
    const maxCandidates =
      args.values['max-candidates'] !== undefined ? numberInRange(args, 'max-candidates', 0, { min: 1, integer: true }) : undefined;
    // 0 or less would drop every mutant as a timeout after the whole run.
    const timeoutS =
      args.values.timeout !== undefined ? numberInRange(args, 'timeout', 0, { min: 0, minExclusive: true, max: 86_400 }) : undefined;
    let bar: ProgressBar | undefined;
    let phase = '';
    const { signal, dispose } = stopOnSignals(
      io,
      `stopping once the mutants under test are done (containers removed, nothing written to ${out})`,
    );
    const r = await synthesizeMutationTasks({
      workspace,
      max,
      seed,
      concurrency,
      maxCandidates,
      timeoutMs: timeoutS !== undefined ? timeoutS * 1000 : undefined,
      override,
      signal,
      onProgress: (p) => {
        if (p.phase !== phase) {
          phase = p.phase;
          if (!io.json) io.err(synthPhaseText(p.phase, timeoutS));
        }
        if (p.phase !== 'validate') return;
        bar ??= new ProgressBar('validating mutants', p.total, { json: io.json });
        bar.update(p.tried, `kept ${p.kept}, dropped ${p.dropped}`);
      },
    }).finally(dispose);
    bar?.done(`kept ${r.tasks.length}`);
    if (r.tasks.length > 0) writeTaskFile(out, r.tasks);
    const summary = formatSynthSummary(r.summary, out, r.tasks.length);
    io.out(
      io.json
        ? JSON.stringify({ ok: true, out: r.tasks.length > 0 ? out : null, tasks: r.tasks.length, summary: r.summary }, null, 2)
        : r.tasks.length > 0
          ? summary
          : summary.replace(/^0 task\(s\) written to .*$/m, `no mutant made a test fail: nothing written (${out} left as it was)`),
    );
    return 0;
  },
};

export const tasksFailingCommand: CliCommand = {
  name: 'tasks failing',
  summary: "turn the workspace's currently failing tests into tasks (one per test file)",
  usage: `--workspace DIR --out FILE [--seed S] [--pass-to-pass N] ${RUNNER_USAGE} [--json]`,
  options: { ...COMMON_TASK_OPTIONS, ...valueOptions('pass-to-pass') },
  async run(args, io) {
    const { workspace, out, seed, override } = commonTaskArgs(args);
    const passToPassSample = numberInRange(args, 'pass-to-pass', 20, { min: 0, integer: true });
    if (!io.json) io.err('running the test suite in a sandbox…');
    const { signal, dispose } = stopOnSignals(io, `stopping (containers removed, nothing written to ${out})`);
    const { tasks, summary } = await failingTestTasks({ workspace, seed, passToPassSample, override, signal }).finally(dispose);
    // Nothing to write is not an empty file: an existing --out (earlier tasks) is kept.
    if (tasks.length > 0) writeTaskFile(out, tasks);
    if (io.json) io.out(JSON.stringify({ ok: true, out: tasks.length > 0 ? out : null, tasks: tasks.length, summary }, null, 2));
    else {
      io.out(
        [
          tasks.length > 0
            ? `${tasks.length} task(s) written to ${out}`
            : `no test fails: nothing written (${out} left as it was); try \`turnwise tasks synth\``,
          `suite: ${summary.runner}, ${summary.tests} tests: ${summary.passing} passing, ${summary.failing} failing${summary.unstable ? `, ${summary.unstable} passing in only one of two runs (no task uses them)` : ''}`,
          ...summary.collectionErrors.map(
            (c) => `  could not load ${c.file ?? '?'} (no task made for it): ${escapeControlChars(c.message.split('\n').slice(-1)[0])}`,
          ),
          ...scoringLines(summary.scoring),
        ].join('\n'),
      );
    }
    return 0;
  },
};

export const tasksCheckCommand: CliCommand = {
  name: 'tasks check',
  summary:
    "validate a task file (JSONL): every invalid line with its number and reason; with --workspace, score each task's no-op and reference fix in sandboxes",
  usage: 'FILE [--workspace DIR [--concurrency N] [--timeout SECONDS]] [--json]',
  allowPositionals: true,
  options: valueOptions('workspace', 'concurrency', 'timeout'),
  async run(args, io) {
    if (args.positionals.length !== 1) throw new UsageError('give exactly one task file');
    const workspace = args.values.workspace !== undefined ? workspaceArg(args) : undefined;
    const concurrency = numberInRange(args, 'concurrency', 2, { min: 1, max: 64, integer: true });
    const timeoutS =
      args.values.timeout !== undefined ? numberInRange(args, 'timeout', 0, { min: 0, minExclusive: true, max: 86_400 }) : undefined;
    const c = checkTaskFile(path.resolve(args.positionals[0]));
    if (c.ok && workspace) {
      // Every task through the scoring path: its no-op must score unresolved, its reference fix resolved.
      const tasks = readTaskFile(c.file);
      if (!io.json)
        io.err(`scoring ${tasks.length} task(s) in sandboxes of ${workspace}: each one's no-op, and its reference fix where it has one…`);
      const bar = new ProgressBar('scoring check', tasks.length, { json: io.json });
      const { signal, dispose } = stopOnSignals(io, 'stopping (containers removed)');
      const r = await checkTasksInWorkspace(tasks, {
        workspace,
        concurrency,
        timeoutMs: timeoutS !== undefined ? timeoutS * 1000 : undefined,
        onProgress: (done, _n, last) => bar.update(done, last.ok ? `${last.taskId} ok` : `${last.taskId} ${last.problem?.kind}`),
        signal,
      }).finally(dispose);
      bar.done(`${r.summary.passed} of ${r.summary.checked} passed`);
      if (io.json) io.out(JSON.stringify({ ...c, scoring: r.summary, checks: r.checks }, null, 2));
      else {
        io.out(
          [
            `${c.file}: ${c.valid} valid task(s), scored in sandboxes of ${workspace}`,
            ...r.checks
              .filter((x) => !x.ok)
              .map((x) => `  ${x.taskId}: ${x.problem?.kind}: ${escapeControlChars(x.problem?.detail.split('\n')[0] ?? '').slice(0, 400)}`),
            ...scoringLines(r.summary),
          ].join('\n'),
        );
      }
      return r.summary.passed === r.summary.checked ? 0 : 1;
    }
    if (io.json) {
      io.out(JSON.stringify(c, null, 2));
    } else if (c.ok) {
      io.out(
        `${c.file}: ${c.valid} valid task(s) (${Object.entries(c.bySource)
          .map(([k, v]) => `${k} ${v}`)
          .join(
            ', ',
          )}), ${c.madeFrom.length ? `made from ${c.madeFrom.join(', ')}` : 'no workspace recorded (an older task file)'}; not scored (give --workspace DIR to score each task's no-op and reference fix in sandboxes)`,
      );
    } else if (c.errors.length === 0) {
      io.out(`${c.file}: no tasks in the file`);
    } else {
      io.out(
        [
          `${c.file}: ${c.invalidLines} invalid line(s); nothing will run until they are fixed`,
          ...summarizeLineErrors(c.file, c.errors, 200),
        ].join('\n'),
      );
    }
    return c.ok ? 0 : 1;
  },
};

// `tasks reach`: which tasks the agent's numbered tools can fix at all (src/train/tools-reach.ts),
// from a task file and its workspace, or from a run's split with the run's own settings.
const rowText = (r: ReachRow) =>
  `  ${r.taskId}  ${r.file ? `${r.file}:${r.line}` : '—'}  suspect ${r.suspect ?? '—'}  variant ${r.variant ?? '—'}  ${r.outcome}${r.cutShort ? ' (tw-suspects cut short by the clock)' : ''}`;

export const tasksReachCommand: CliCommand = {
  name: 'tasks reach',
  summary:
    "which tasks the agent's numbered tools can fix at all: per task, an episode that runs tw-suspects -n and applies the tw-cands variant restoring the mutated line, scored by the reward (the ceiling of tw-apply for any policy)",
  usage: 'FILE --workspace DIR | --run RUN [--split heldout|train] [--runs DIR]; then [--ids A,B] [--concurrency N] [--json]',
  allowPositionals: true,
  options: valueOptions('workspace', 'run', 'split', 'runs', 'ids', 'concurrency'),
  async run(args, io) {
    const v = args.values;
    let tasks: Task[];
    let workspace: string;
    let config: Partial<TrainConfig> = {};
    if (typeof v.run === 'string') {
      if (args.positionals.length || v.workspace !== undefined)
        throw new UsageError('--run takes the tasks and the workspace from the run; give no task file or --workspace');
      const run = RunDir.open(v.run, typeof v.runs === 'string' ? path.resolve(v.runs) : undefined);
      const split = oneOf(args, 'split', ['heldout', 'train'] as const, 'heldout');
      config = readRunConfig(run);
      const ids = new Set(run.readSplits()[split]);
      tasks = run.readTasks().filter((t) => ids.has(t.id));
      workspace = path.resolve(config.workspace!);
    } else {
      for (const k of ['split', 'runs']) if (v[k] !== undefined) throw new UsageError(`--${k} goes with --run RUN`);
      if (args.positionals.length !== 1) throw new UsageError('give one task file (or --run RUN)');
      if (typeof v.workspace !== 'string') throw new UsageError('give --workspace DIR, the folder the tasks were made from');
      tasks = readTaskFile(path.resolve(args.positionals[0]));
      workspace = workspaceArg(args);
    }
    const wanted: readonly string[] = listOption(args, 'ids', [] as string[]);
    if (wanted.length) {
      const unknown = wanted.filter((id) => !tasks.some((t) => t.id === id));
      if (unknown.length)
        throw new TurnwiseError(
          'invalid-input',
          `no task ${unknown.map((id) => JSON.stringify(id)).join(', ')} among the ${tasks.length} given`,
          {
            hint: 'give --ids from the task file (or the run split)',
          },
        );
      tasks = tasks.filter((t) => wanted.includes(t.id));
    }
    if (!tasks.length)
      throw new TurnwiseError('invalid-input', 'no task to check', {
        hint: 'give a task file with tasks, or a run whose split holds some',
      });
    assertWorkspaceHoldsTasks(tasks, workspace, typeof v.run === 'string' ? `run ${v.run}` : args.positionals[0]);
    const bar = new ProgressBar('tools reach', tasks.length, { json: io.json });
    const r = await toolsReach(tasks, {
      workspace,
      config,
      concurrency: numberInRange(args, 'concurrency', 2, { min: 1, max: 64, integer: true }),
      onProgress: (done, _n, row) => bar.update(done, `${row.taskId} ${row.outcome}`),
    });
    bar.done(`${r.summary.outcomes.resolved} of ${r.summary.tasks} resolved`);
    if (io.json) {
      io.out(JSON.stringify({ workspace, ...r }, null, 2));
      return 0;
    }
    const s = r.summary;
    io.out(
      [
        `${s.tasks} task(s) in ${workspace}: ${s.outcomes.resolved} resolved by tw-suspects -n then the right tw-apply (the ceiling of the numbered tools); the line shown among the suspects in ${s.suspected}, a variant restoring it in ${s.withVariant}`,
        ...REACH_OUTCOMES.filter((k) => s.outcomes[k] > 0).map((k) => `  ${String(s.outcomes[k]).padStart(4)}  ${REACH_OUTCOME_TEXT[k]}`),
        ...(s.cutShort
          ? [`  tw-suspects was cut short by the clock in ${s.cutShort} episode(s): run again on an idle machine before reading its misses`]
          : []),
        ...r.rows.map(rowText),
      ].join('\n'),
    );
    return 0;
  },
};
