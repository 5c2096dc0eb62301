// `turnwise tasks synth | failing | check`: tasks from the open workspace (mutation bugs validated
// by its tests, its failing tests) and validation of task files.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError } from '../../core/errors';
import type { ReportFormat, RunnerKind } from '../../core/schema';
import { parseTaskFile, writeTaskFile } from '../../tasks/taskfile';
import { failingTestTasks, synthesizeMutationTasks, type SynthSummary } from '../../tasks/synth';
import type { RunnerOverride } from '../../tasks/runners';
import { optionalNumber, requireString, UsageError, type CliCommand, type OptionSpec, type ParsedArgs } from '../command';
import { ProgressBar } from '../progress';

const RUNNER_OPTIONS: OptionSpec = {
  runner: { type: 'string' },
  'test-command': { type: 'string' },
  'report-format': { type: 'string' },
  'report-path': { type: 'string' },
};
const RUNNER_USAGE = '[--runner pytest|node-test|mocha|jest|go-test] [--test-command CMD --report-format junit-xml|jest-json|go-test-json [--report-path P]]';

function runnerOverride(args: ParsedArgs): RunnerOverride {
  const o: RunnerOverride = {};
  if (typeof args.values.runner === 'string') o.kind = args.values.runner as RunnerKind;
  if (typeof args.values['test-command'] === 'string') o.command = args.values['test-command'];
  if (typeof args.values['report-format'] === 'string') o.reportFormat = args.values['report-format'] as ReportFormat;
  if (typeof args.values['report-path'] === 'string') o.reportPath = args.values['report-path'];
  if (o.command && !o.reportFormat && !o.kind) throw new UsageError('--test-command needs --report-format (or --runner) so the report can be read');
  return o;
}

function workspaceArg(args: ParsedArgs): string {
  const ws = path.resolve(requireString(args, 'workspace'));
  if (!fs.existsSync(ws) || !fs.statSync(ws).isDirectory()) {
    throw new TurnwiseError('not-found', `workspace ${ws} is not a folder`, { hint: 'pass --workspace DIR pointing at a project folder' });
  }
  return ws;
}

function formatSynthSummary(s: SynthSummary, out: string, n: number): string {
  const rows = Object.entries(s.operators)
    .filter(([, c]) => c.candidates > 0)
    .map(([op, c]) => `  ${op.padEnd(18)} ${String(c.candidates).padStart(5)} ${String(c.tried).padStart(6)} ${String(c.kept).padStart(5)} ${String(c.dropped).padStart(8)}`);
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
    `${s.tasksPerMinute.toFixed(1)} validated tasks/min with ${s.concurrency} sandbox(es) in parallel`,
  ].join('\n');
}

export const tasksSynthCommand: CliCommand = {
  name: 'tasks synth',
  summary: 'synthesize bug-fix tasks by AST mutation of the workspace source, kept only when its tests catch them',
  usage: `--workspace DIR --out FILE [--max N] [--seed S] [--concurrency N] [--max-candidates N] [--timeout SECONDS] ${RUNNER_USAGE} [--json]`,
  options: {
    workspace: { type: 'string' },
    out: { type: 'string' },
    max: { type: 'string' },
    seed: { type: 'string' },
    concurrency: { type: 'string' },
    'max-candidates': { type: 'string' },
    timeout: { type: 'string' },
    ...RUNNER_OPTIONS,
  },
  async run(args, io) {
    const workspace = workspaceArg(args);
    const out = path.resolve(requireString(args, 'out'));
    const max = optionalNumber(args, 'max', 20);
    const seed = optionalNumber(args, 'seed', 0);
    const concurrency = optionalNumber(args, 'concurrency', 2);
    if (max < 1 || concurrency < 1) throw new UsageError('--max and --concurrency must be at least 1');
    const maxCandidates = args.values['max-candidates'] !== undefined ? optionalNumber(args, 'max-candidates', 0) : undefined;
    const timeoutS = args.values.timeout !== undefined ? optionalNumber(args, 'timeout', 0) : undefined;
    let bar: ProgressBar | undefined;
    const r = await synthesizeMutationTasks({
      workspace,
      max,
      seed,
      concurrency,
      maxCandidates,
      timeoutMs: timeoutS !== undefined ? timeoutS * 1000 : undefined,
      override: runnerOverride(args),
      onProgress: (p) => {
        bar ??= new ProgressBar('validating mutants', p.total, { json: io.json });
        bar.update(p.tried, `kept ${p.kept}, dropped ${p.dropped}`);
      },
    });
    bar?.done(`kept ${r.tasks.length}`);
    writeTaskFile(out, r.tasks);
    io.out(io.json ? JSON.stringify({ ok: true, out, tasks: r.tasks.length, summary: r.summary }, null, 2) : formatSynthSummary(r.summary, out, r.tasks.length));
    return 0;
  },
};

export const tasksFailingCommand: CliCommand = {
  name: 'tasks failing',
  summary: "turn the workspace's currently failing tests into tasks (one per test file)",
  usage: `--workspace DIR --out FILE [--seed S] [--pass-to-pass N] ${RUNNER_USAGE} [--json]`,
  options: { workspace: { type: 'string' }, out: { type: 'string' }, seed: { type: 'string' }, 'pass-to-pass': { type: 'string' }, ...RUNNER_OPTIONS },
  async run(args, io) {
    const workspace = workspaceArg(args);
    const out = path.resolve(requireString(args, 'out'));
    if (!io.json) io.err('running the test suite in a sandbox…');
    const { tasks, summary } = await failingTestTasks({
      workspace,
      seed: optionalNumber(args, 'seed', 0),
      passToPassSample: optionalNumber(args, 'pass-to-pass', 20),
      override: runnerOverride(args),
    });
    writeTaskFile(out, tasks);
    if (io.json) io.out(JSON.stringify({ ok: true, out, tasks: tasks.length, summary }, null, 2));
    else {
      io.out(
        [
          `${tasks.length} task(s) written to ${out}`,
          `suite: ${summary.runner}, ${summary.tests} tests: ${summary.passing} passing, ${summary.failing} failing`,
          ...summary.collectionErrors.map((c) => `  could not load ${c.file ?? '?'} (no task made for it): ${c.message.split('\n').slice(-1)[0]}`),
          ...(tasks.length === 0 ? ['no failing tests: nothing to fix (try `turnwise tasks synth`)'] : []),
        ].join('\n'),
      );
    }
    return 0;
  },
};

export const tasksCheckCommand: CliCommand = {
  name: 'tasks check',
  summary: 'validate a task file (JSONL): every invalid line with its number and reason',
  usage: 'FILE [--json]',
  allowPositionals: true,
  async run(args, io) {
    if (args.positionals.length !== 1) throw new UsageError('give exactly one task file');
    const file = path.resolve(args.positionals[0]);
    let text: string;
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch (e) {
      throw new TurnwiseError('not-found', `cannot read task file ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, { hint: 'check the path' });
    }
    const { tasks, errors } = parseTaskFile(text);
    const ok = errors.length === 0 && tasks.length > 0;
    const bySource: Record<string, number> = {};
    for (const t of tasks) bySource[t.source] = (bySource[t.source] ?? 0) + 1;
    if (io.json) {
      io.out(JSON.stringify({ ok, file, valid: tasks.length, invalidLines: new Set(errors.map((e) => e.line)).size, bySource, errors }, null, 2));
    } else if (ok) {
      io.out(`${file}: ${tasks.length} valid task(s) (${Object.entries(bySource).map(([k, v]) => `${k} ${v}`).join(', ')})`);
    } else if (errors.length === 0) {
      io.out(`${file}: no tasks in the file`);
    } else {
      io.out([`${file}: ${new Set(errors.map((e) => e.line)).size} invalid line(s); nothing will run until they are fixed`, ...errors.map((e) => `  ${file}:${e.line}: ${e.reason}`)].join('\n'));
    }
    return ok ? 0 : 1;
  },
};

export const tasksCommands: CliCommand[] = [tasksCheckCommand, tasksFailingCommand, tasksSynthCommand];
