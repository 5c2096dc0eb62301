// Task sources that need the tests to run: mutation synthesis (SWE-smith style: a mutant is a
// task only if it makes ≥ 1 passing test fail) and the workspace's currently failing tests.
// Validation runs in parallel sandboxes from one snapshot; each sandbox is reused for several
// mutants (write mutant → run → write original back), which is safe because the runners write
// no bytecode or caches (runners.ts) and a sandbox that timed out is replaced.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError } from '../core/errors';
import { SCHEMA, type Task } from '../core/schema';
import { SandboxPool, type PoolSnapshot } from '../sandbox';
import type { Sandbox } from '../sandbox/types';
import { buildInstruction, type FailingTest } from './instruction';
import { taskOrigin } from './origin';
import {
  MUTATION_OPERATORS,
  dedupeCandidates,
  mutationCandidates,
  orderCandidates,
  shuffle,
  type MutationCandidate,
  type MutationOperator,
} from './mutate';
import { seededRandom } from '../core/random';
import { runWorkers } from '../core/workers';
import { stoppedOr, stopPoint } from '../core/stop';
import type { TestReport, TestResult } from './report';
import { runTests, scorableTestIds, type RunTestsResult } from './reward';
import { checkTaskScoring, ScoringCheckError, summarizeScoringChecks, type ScoringCheck, type ScoringCheckSummary } from './scoring-check';
import { commandForTests, detectRunner, type RunnerOverride, type TestRunner } from './runners';
import { pytestNodeFile } from './nodeid';
import { collectOriginals, isMutableSource, languageOfFile, listWorkspaceFiles } from './testfiles';

/** Why a candidate was not kept: what its test run showed, or that its task failed the scoring check (scoring-check.ts). */
export type DropReason = 'no-failing-test' | 'collection-broken' | 'timeout' | 'no-report' | 'sandbox-error' | 'scoring-check';
export const DROP_REASONS: readonly DropReason[] = [
  'no-failing-test',
  'collection-broken',
  'timeout',
  'no-report',
  'sandbox-error',
  'scoring-check',
];

export interface SynthProgress {
  /** What is happening now: the snapshot build, the baseline run of the suite, or validation of mutants. */
  phase: 'snapshot' | 'baseline' | 'validate';
  /** Seconds since the command started (progress is reported at least once a second). */
  elapsedS: number;
  tried: number;
  kept: number;
  dropped: number;
  /** Upper bound on candidates that will be tried. */
  total: number;
}

/** The line that says a synthesis phase has begun (`timeoutS`: the baseline run's limit, when one was given). */
export function synthPhaseText(phase: SynthProgress['phase'], timeoutS?: number): string {
  return phase === 'snapshot'
    ? 'building the workspace snapshot…'
    : phase === 'baseline'
      ? `running the test suite once (baseline${timeoutS !== undefined ? `, timeout ${timeoutS} s` : ''})…`
      : 'validating mutants…';
}

export interface SourceOptions {
  workspace: string;
  override?: RunnerOverride;
  /** An open pool to use (else one is opened and closed here). */
  pool?: SandboxPool;
  /** Run id for container labels when a pool is opened here. */
  run?: string;
  seed?: number;
}

export interface SynthOptions extends SourceOptions {
  /** Most tasks to keep. Default 20. */
  max?: number;
  /** Most candidates to try. Default 5 × max. */
  maxCandidates?: number;
  /** Sandboxes validating in parallel. Default 2. */
  concurrency?: number;
  /** Per-candidate test-run timeout, and the baseline run's too. Default max(10 s, 3 × the baseline run + 5 s); the baseline 300 s. */
  timeoutMs?: number;
  /** Only these operators (tests, targeted runs). */
  operators?: MutationOperator[];
  /** Stop after keeping this many tasks per operator (spreads a small --max over operators). */
  maxPerOperator?: number;
  onProgress?: (p: SynthProgress) => void;
  /**
   * Stops the synthesis: no new mutant is started, the ones under way end, the sandboxes are
   * removed, and a StoppedError (core/stop.ts) is thrown; nothing is returned.
   */
  signal?: AbortSignal;
}

export interface OperatorCounts {
  candidates: number;
  tried: number;
  kept: number;
  dropped: number;
}

export interface SynthSummary {
  workspace: string;
  runner: string;
  seed: number;
  concurrency: number;
  /** The suite on the unchanged workspace, run twice: `unstable` passed in one run and not the other (or was reported under another id), and is no task's test. */
  baseline: { tests: number; passing: number; failing: number; unstable: number; durationMs: number };
  /** The no-op and reference-fix episodes of each validated mutant, scored as an agent's are. */
  scoring: ScoringCheckSummary;
  /** tried = kept + dropped + surplus (valid mutants found by parallel workers after a limit was reached). */
  candidates: { generated: number; duplicates: number; tried: number; kept: number; dropped: number; surplus: number };
  dropped: Record<DropReason, number>;
  operators: Record<string, OperatorCounts>;
  durationMs: number;
  validationMs: number;
  /** Kept tasks per minute of validation wall time. */
  tasksPerMinute: number;
}

export interface SynthResult {
  tasks: Task[];
  summary: SynthSummary;
  /** The candidate behind each task (same order), for tests and logs. */
  candidates: MutationCandidate[];
}

const hash = (s: string) => createHash('sha256').update(s).digest('hex').slice(0, 12);

async function withPool<T>(opts: SourceOptions, fn: (pool: SandboxPool) => Promise<T>): Promise<T> {
  if (opts.pool) return fn(opts.pool);
  const pool = await SandboxPool.connect({ run: opts.run ?? `tasks-${process.pid}-${Date.now().toString(36)}` });
  try {
    return await fn(pool);
  } finally {
    await pool.close();
  }
}

/** The snapshot tasks of `workspace` run in: its files over the image of the runner's language. */
export async function snapshotFor(pool: SandboxPool, workspace: string, runner: TestRunner): Promise<PoolSnapshot> {
  return pool.snapshot(workspace, { language: runner.language === 'python' ? 'python' : 'javascript' });
}

/** What a synthesis stopped by a signal was doing, by phase. */
const STOPPED_IN: Record<SynthProgress['phase'], string> = {
  snapshot: 'taking the workspace snapshot',
  baseline: "running the workspace's tests",
  validate: 'validating mutants',
};

/** The default timeout of the baseline run (a whole suite) when the user gave none. */
export const DEFAULT_BASELINE_TIMEOUT_MS = 300_000;

/** Runs the whole suite once on the unmodified snapshot. */
async function baselineRun(
  pool: SandboxPool,
  snap: PoolSnapshot,
  runner: TestRunner,
  timeoutMs: number,
): Promise<{ run: RunTestsResult; report: TestReport }> {
  const sb = await pool.acquire(snap, { rollout: 'baseline' });
  try {
    const run = await runTests(
      sb,
      { testCommand: runner.command, reportFormat: runner.reportFormat, runner: runner.kind },
      { timeoutMs, reportPath: runner.reportPath },
    );
    if (run.timedOut) {
      throw new TurnwiseError('test-report', `the test suite of the workspace did not finish within ${Math.round(timeoutMs / 1000)} s`, {
        // The time limit is a flag of `tasks synth`; a run (train) takes its tasks from a file made so.
        hint: 'run the tests by hand to see whether they hang; if they are just slow, make the tasks with a longer limit, `turnwise tasks synth --workspace DIR --timeout SECONDS --out tasks.jsonl`, and train on them with `turnwise train --tasks tasks.jsonl`',
      });
    }
    if (!run.report) {
      throw new TurnwiseError('test-report', `the test suite of the workspace could not be run: ${run.error}`, {
        hint: 'run the tests by hand in the workspace; if they need another command or report format, set the runner override',
      });
    }
    return { run, report: run.report };
  } finally {
    await sb.dispose();
  }
}

/**
 * The tests two baseline reports both say passed (sorted as the first report has them), and the
 * ids only one of them does. An id a report holds more than once (two tests of one title in one
 * file or describe block) names no single test: the reward could not tell which copy a fix made
 * pass, so it is neither passing nor unstable, and no task uses it.
 */
export function stablePassing(a: TestReport, b: TestReport): { passing: string[]; unstable: string[] } {
  const passedIn = (r: TestReport) => {
    const copies = new Map<string, number>();
    for (const t of r.tests) copies.set(t.id, (copies.get(t.id) ?? 0) + 1);
    return new Set(r.tests.filter((t) => t.outcome === 'passed' && copies.get(t.id) === 1).map((t) => t.id));
  };
  const pa = passedIn(a);
  const pb = passedIn(b);
  const passing = [...pa].filter((id) => pb.has(id));
  const unstable = [...new Set([...pa, ...pb])].filter((id) => !(pa.has(id) && pb.has(id))).sort();
  return { passing, unstable };
}

/**
 * The suite run twice on the unmodified snapshot (at once when two sandboxes may run): a test is
 * passing only when both runs report it passed under the same id. One that fails now and then, or
 * whose id changes from run to run (a parameter id holding an object's address, a time), would
 * make a task that even its reference fix cannot resolve every time.
 */
async function stableBaseline(
  pool: SandboxPool,
  snap: PoolSnapshot,
  runner: TestRunner,
  timeoutMs: number,
  concurrency: number,
): Promise<{ run: RunTestsResult; report: TestReport; passing: string[]; unstable: string[] }> {
  const [a, b] =
    concurrency > 1
      ? await Promise.all([baselineRun(pool, snap, runner, timeoutMs), baselineRun(pool, snap, runner, timeoutMs)])
      : [await baselineRun(pool, snap, runner, timeoutMs), await baselineRun(pool, snap, runner, timeoutMs)];
  const { passing, unstable } = stablePassing(a.report, b.report);
  return { ...a, passing, unstable };
}

function failingOf(report: TestReport): TestResult[] {
  return report.tests.filter((t) => t.outcome === 'failed' || t.outcome === 'error');
}

/** What one mutant did to the baseline-passing tests. */
export function classifyMutant(
  baselinePassing: readonly string[],
  run: RunTestsResult,
): { kept: true; failToPass: FailingTest[]; passToPass: string[] } | { kept: false; reason: DropReason; detail?: string } {
  if (run.timedOut) return { kept: false, reason: 'timeout' };
  if (!run.report) return { kept: false, reason: 'no-report', detail: run.error };
  const byId = new Map(run.report.tests.map((t) => [t.id, t]));
  const reported = baselinePassing.filter((id) => byId.has(id));
  if (reported.length === 0) {
    return { kept: false, reason: 'collection-broken', detail: run.report.collectionErrors[0]?.message };
  }
  const collection = run.report.collectionErrors.map((c) => `${c.file ?? ''}: ${c.message}`).join('\n');
  const failToPass: FailingTest[] = [];
  const passToPass: string[] = [];
  for (const id of baselinePassing) {
    const t = byId.get(id);
    if (t?.outcome === 'passed') passToPass.push(id);
    else if (t) failToPass.push({ id, message: t.message });
    else failToPass.push({ id, message: `the test did not run: its file failed to load\n${collection}` });
  }
  if (failToPass.length === 0) return { kept: false, reason: 'no-failing-test' };
  return { kept: true, failToPass, passToPass };
}

/**
 * Lists mutation candidates of a workspace's source files in the runner's language family, leaving
 * out the files scoring puts back from the snapshot (`restored`: the source files the runner
 * configuration loads, collectOriginals), where a bug would be undone before the tests run.
 */
export async function workspaceCandidates(
  workspace: string,
  runner: TestRunner,
  operators?: MutationOperator[],
  restored?: ReadonlyMap<string, unknown>,
  signal?: AbortSignal,
): Promise<MutationCandidate[]> {
  const wantPython = runner.language === 'python';
  const out: MutationCandidate[] = [];
  for (const rel of listWorkspaceFiles(workspace)) {
    if (!isMutableSource(rel) || restored?.has(rel)) continue;
    await stopPoint(signal, 'synthesizing tasks (parsing the workspace for mutants)');
    const lang = languageOfFile(rel)!;
    if ((lang === 'python') !== wantPython) continue;
    let text: string;
    try {
      const st = fs.statSync(path.join(workspace, rel));
      if (st.size > 512 * 1024) continue; // generated or vendored
      text = fs.readFileSync(path.join(workspace, rel), 'utf8');
    } catch {
      continue;
    }
    for (const c of await mutationCandidates(rel, text, lang)) if (!operators || operators.includes(c.operator)) out.push(c);
  }
  return out;
}

function mutationTask(workspace: string, c: MutationCandidate, runner: TestRunner, failToPass: FailingTest[], passToPass: string[]): Task {
  return {
    schema: SCHEMA.task,
    id: `mut-${c.key}`,
    source: 'mutation',
    instruction: buildInstruction(failToPass, { hideFiles: [c.file] }),
    language: c.language,
    testCommand: runner.command,
    reportFormat: runner.reportFormat,
    runner: runner.kind,
    fail_to_pass: failToPass.map((f) => f.id),
    pass_to_pass: passToPass,
    mutation: {
      file: c.file,
      nodeKind: c.nodeKind,
      operator: c.operator,
      ...(c.enclosing ? { enclosing: c.enclosing } : {}),
      span: { start: c.start, end: c.end, text: c.original },
      replacement: c.replacement,
    },
    origin: taskOrigin(workspace, [c.file]),
  };
}

/** Puts a validation sandbox's workspace back to the snapshot's commit (tracked and untracked files). */
export const RESET_WORKSPACE = 'git reset -q --hard && git clean -fdq';

/** Mutation synthesis: candidates from tree-sitter, validated by the workspace's own tests. */
export async function synthesizeMutationTasks(opts: SynthOptions): Promise<SynthResult> {
  const t0 = Date.now();
  const seed = opts.seed ?? 0;
  const max = opts.max ?? 20;
  const concurrency = Math.max(1, opts.concurrency ?? 2);
  const runner = detectRunner(opts.workspace, opts.override);
  if (runner.language === 'go') {
    throw new TurnwiseError('invalid-input', 'mutation synthesis supports Python, JavaScript and TypeScript workspaces, not Go (yet)', {
      hint: 'use `turnwise tasks failing` or a task file for Go projects',
    });
  }
  const originals = collectOriginals(opts.workspace);
  const all = await workspaceCandidates(opts.workspace, runner, opts.operators, originals.tests, opts.signal);
  const { kept: unique, duplicates } = dedupeCandidates(all);
  const ordered = orderCandidates(unique, seed);
  const maxCandidates = Math.min(ordered.length, opts.maxCandidates ?? max * 5);

  const operators: Record<string, OperatorCounts> = {};
  for (const op of MUTATION_OPERATORS) operators[op] = { candidates: 0, tried: 0, kept: 0, dropped: 0 };
  for (const c of unique) operators[c.operator].candidates++;
  const dropped = Object.fromEntries(DROP_REASONS.map((r) => [r, 0])) as Record<DropReason, number>;

  // Progress from the first second: the snapshot and the baseline can take minutes, and a
  // silent terminal looks hung.
  let phase: SynthProgress['phase'] = 'snapshot';
  let progress: Omit<SynthProgress, 'phase' | 'elapsedS'> = { tried: 0, kept: 0, dropped: 0, total: maxCandidates };
  const emit = () => opts.onProgress?.({ phase, elapsedS: Math.round((Date.now() - t0) / 1000), ...progress });
  const ticker = opts.onProgress ? setInterval(emit, 1000) : undefined;
  ticker?.unref();
  emit();
  // What a stop names: the phase under way, and `detail`.
  const stoppedWhile = (detail = '') => `synthesizing tasks (${STOPPED_IN[phase]}${detail})`;
  try {
    return await synthInPool();
  } catch (e) {
    throw stoppedOr(e, opts.signal, stoppedWhile());
  } finally {
    clearInterval(ticker);
  }
  async function synthInPool(): Promise<SynthResult> {
    return withPool(opts, async (pool) => {
      const snap = await snapshotFor(pool, opts.workspace, runner);
      await stopPoint(opts.signal, stoppedWhile());
      phase = 'baseline';
      emit();
      const base = await stableBaseline(pool, snap, runner, opts.timeoutMs ?? DEFAULT_BASELINE_TIMEOUT_MS, concurrency);
      await stopPoint(opts.signal, stoppedWhile());
      phase = 'validate';
      const allPassing = base.passing;
      // Doctests of the code under test are not scored (the agent could edit them): scorableTestIds.
      const passing = scorableTestIds(allPassing, runner.kind);
      const baseline = {
        tests: base.report.tests.length,
        passing: passing.length,
        failing: failingOf(base.report).length,
        unstable: base.unstable.length,
        durationMs: base.run.durationMs,
      };
      if (passing.length === 0) {
        const outside = allPassing.length - passing.length;
        const loadError = base.report.collectionErrors[0];
        const unstable = base.unstable.length ? `; ${base.unstable.length} passed in only one of two runs of the suite` : '';
        throw new TurnwiseError(
          'invalid-input',
          `no test passes in ${opts.workspace} (${base.report.tests.length} tests ran${outside ? `; ${outside} passing doctest(s) of the code under test are not scored, since an agent could edit them` : ''}${unstable}${loadError ? `; ${base.report.collectionErrors.length} test file(s) could not be loaded, the first ${loadError.file ?? ''}: ${loadError.message.split('\n').slice(-1)[0]}` : ''}), so no mutant can be validated`,
          {
            hint: outside
              ? 'tasks need tests in test files (test_*.py, *_test.py, a tests/ folder): they are restored before scoring'
              : loadError
                ? 'run the tests by hand in the workspace: a test file that cannot be imported (a missing dependency, a plugin the configuration asks for) must load in the sandbox image, or set the runner override'
                : 'fix the suite first, or use `turnwise tasks failing` to make tasks from the failing tests',
          },
        );
      }
      const timeoutMs = opts.timeoutMs ?? Math.max(10_000, 3 * base.run.durationMs + 5_000);
      const tV = Date.now();

      // Valid mutants as they complete; the kept ones are chosen at the end in candidate order,
      // so parallel workers keep exactly what a sequential run would (same seed, same tasks).
      const valid: Array<{ index: number; c: MutationCandidate; task: Task }> = [];
      const checks: Array<{ index: number; check: ScoringCheck }> = [];
      let next = 0;
      let tried = 0;
      let droppedN = 0;
      const validPerOp = new Map<string, number>();
      const countsTowardsLimit = () =>
        opts.maxPerOperator === undefined
          ? valid.length
          : [...validPerOp.values()].reduce((a, n) => a + Math.min(n, opts.maxPerOperator!), 0);
      const report = () => {
        progress = { tried, kept: Math.min(max, countsTowardsLimit()), dropped: droppedN, total: maxCandidates };
        emit();
      };
      const done = () => countsTowardsLimit() >= max || next >= maxCandidates;
      const nextCandidate = (): { c: MutationCandidate; index: number } | undefined => {
        while (!done()) {
          const index = next++;
          const c = ordered[index];
          if (opts.maxPerOperator !== undefined && (validPerOp.get(c.operator) ?? 0) >= opts.maxPerOperator) continue;
          return { c, index };
        }
        return undefined;
      };

      // One sandbox per worker, reused from mutant to mutant while it resets cleanly.
      const held: Array<Sandbox | undefined> = [];
      report();
      try {
        await runWorkers(
          concurrency,
          nextCandidate,
          async ({ c, index }, w) => {
            const sb = (held[w] ??= await pool.acquire(snap, { rollout: `validate-${w}` }));
            let run: RunTestsResult | undefined;
            let sandboxError: string | undefined;
            try {
              await sb.writeFile(c.file, c.mutatedSource);
              run = await runTests(
                sb,
                { testCommand: runner.command, reportFormat: runner.reportFormat, runner: runner.kind },
                { timeoutMs, reportPath: runner.reportPath },
              );
            } catch (e) {
              sandboxError = (e as Error).message;
            }
            // The sandbox is reused for the next mutant only when it is back to the snapshot: the
            // mutated file, and anything this run wrote or deleted (the snapshot is a committed git
            // repo; ignored files such as node_modules are kept, so no -x).
            const reset =
              run?.timedOut || sandboxError ? undefined : await sb.exec(RESET_WORKSPACE, { timeoutMs: 60_000 }).catch(() => undefined);
            if (reset?.exitCode !== 0) {
              // Leftover processes, a dead container or a workspace that could not be reset: never reuse it.
              await sb.dispose().catch(() => undefined);
              held[w] = undefined;
            }
            const verdict = run ? classifyMutant(passing, run) : ({ kept: false, reason: 'sandbox-error', detail: sandboxError } as const);
            // A mutant its tests catch becomes a task only when its reward tells the truth: the no-op
            // and the reference fix scored as an agent's episode is (fresh sandboxes, one at a time).
            let check: ScoringCheck | undefined;
            const task = verdict.kept ? mutationTask(opts.workspace, c, runner, verdict.failToPass, verdict.passToPass) : undefined;
            if (task) {
              check = await checkTaskScoring(task, {
                acquire: (role) => pool.acquire(snap, { rollout: `check-${role}-${w}` }),
                originals,
                timeoutMs,
              });
              checks.push({ index, check });
            }
            tried++;
            operators[c.operator].tried++;
            if (check && !check.ok) {
              dropped['scoring-check']++;
              droppedN++;
              operators[c.operator].dropped++;
            } else if (task) {
              valid.push({ index, c, task });
              validPerOp.set(c.operator, (validPerOp.get(c.operator) ?? 0) + 1);
            } else if (!verdict.kept) {
              dropped[verdict.reason]++;
              droppedN++;
              operators[c.operator].dropped++;
            }
            report();
          },
          opts.signal,
        );
      } finally {
        await Promise.all(held.map((sb) => sb?.dispose().catch(() => undefined)));
      }
      await stopPoint(opts.signal, stoppedWhile(`: ${tried} tried, ${valid.length} valid`));
      const validationMs = Date.now() - tV;
      const chosen: typeof valid = [];
      const chosenPerOp = new Map<string, number>();
      for (const v of valid.sort((x, y) => x.index - y.index)) {
        if (chosen.length >= max) break;
        const n = chosenPerOp.get(v.c.operator) ?? 0;
        if (opts.maxPerOperator !== undefined && n >= opts.maxPerOperator) continue;
        chosenPerOp.set(v.c.operator, n + 1);
        operators[v.c.operator].kept++;
        chosen.push(v);
      }
      const tasks = chosen.map((v) => v.task);
      const surplus = valid.length - chosen.length;
      const scoring = summarizeScoringChecks(checks.sort((x, y) => x.index - y.index).map((x) => x.check));
      if (tasks.length === 0 && scoring.checked > scoring.passed) {
        // Mutants the tests catch, none of whose rewards can be trusted: a run here would learn from
        // a reward that cannot tell a fix from no fix. Refused with the reason, never written.
        const kinds = Object.entries(scoring.failed)
          .map(([k, n]) => `${k} ${n}`)
          .join(', ');
        throw new ScoringCheckError(
          `no task of ${opts.workspace} passes the scoring check (${kinds}): ${scoring.repositoryProblem ?? Object.values(scoring.firstDetail)[0]}`,
          scoring,
          'run the no-op and the reference fix of one task with `turnwise tasks check FILE --workspace DIR` to see its scores; a test that fails on the unchanged code, a runner configuration that needs a plugin the sandbox lacks, or a custom test command whose report names the tests otherwise are the usual causes',
        );
      }
      return {
        tasks,
        candidates: chosen.map((v) => v.c),
        summary: {
          workspace: opts.workspace,
          runner: runner.kind,
          seed,
          concurrency,
          baseline,
          candidates: { generated: all.length, duplicates, tried, kept: tasks.length, dropped: droppedN, surplus },
          scoring,
          dropped,
          operators,
          durationMs: Date.now() - t0,
          validationMs,
          tasksPerMinute: validationMs > 0 ? (tasks.length * 60_000) / validationMs : 0,
        },
      };
    });
  }
}

export interface FailingOptions extends SourceOptions {
  /** Passing tests sampled as pass-to-pass per task. Default 20. */
  passToPassSample?: number;
  timeoutMs?: number;
  /** Stops between the suite's runs and the scoring checks: the sandboxes are removed and a StoppedError is thrown. */
  signal?: AbortSignal;
}

export interface FailingSummary {
  workspace: string;
  runner: string;
  tests: number;
  passing: number;
  failing: number;
  collectionErrors: Array<{ file?: string; message: string }>;
  /** Tests that passed in one of the two runs of the suite and not in the other: no task's test. */
  unstable: number;
  tasks: number;
  /** Each task's no-op episode, scored as an agent's is: a task whose failing tests pass, or that scores wrong, is dropped. */
  scoring: ScoringCheckSummary;
  durationMs: number;
}

/** The workspace's failing tests, one task per test file: "make these pass without changing the tests". */
export async function failingTestTasks(opts: FailingOptions): Promise<{ tasks: Task[]; summary: FailingSummary }> {
  const t0 = Date.now();
  const runner = detectRunner(opts.workspace, opts.override);
  const sample = opts.passToPassSample ?? 20;
  const originals = collectOriginals(opts.workspace);
  let doing = 'taking the workspace snapshot';
  const stop = () => stopPoint(opts.signal, `collecting failing tests (${doing})`);
  return withPool(opts, async (pool) => {
    const snap = await snapshotFor(pool, opts.workspace, runner);
    await stop();
    doing = "running the workspace's tests";
    const timeoutMs = opts.timeoutMs ?? DEFAULT_BASELINE_TIMEOUT_MS;
    const base = await stableBaseline(pool, snap, runner, timeoutMs, 2);
    await stop();
    doing = 'checking how the tasks score';
    const report = base.report;
    const unstable = new Set(base.unstable);
    const scorable = new Set(
      scorableTestIds(
        report.tests.map((t) => t.id),
        runner.kind,
      ),
    );
    // A test that failed in one run and passed in the other is no task: its fix would be luck.
    const failing = failingOf(report).filter((t) => scorable.has(t.id) && !unstable.has(t.id));
    const passing = base.passing.filter((id) => scorable.has(id));
    const byFile = new Map<string, TestResult[]>();
    for (const t of failing) {
      const f = runner.kind === 'pytest' ? pytestNodeFile(t.id) : (t.file ?? t.id.split('::')[0]);
      byFile.set(f, [...(byFile.get(f) ?? []), t]);
    }
    const rand = seededRandom(opts.seed ?? 0);
    const tasks: Task[] = [];
    for (const [file, tests] of [...byFile].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
      const p2p = shuffle(passing, rand).slice(0, sample).sort();
      const f2p = tests.map((t) => t.id);
      tasks.push({
        schema: SCHEMA.task,
        id: `fail-${hash(`${file}\0${f2p.join('\0')}`)}`,
        source: 'failing-tests',
        instruction: buildInstruction(tests.map((t) => ({ id: t.id, message: t.message }))),
        language: runner.language,
        testCommand: commandForTests(runner, [...f2p, ...p2p]),
        reportFormat: runner.reportFormat,
        runner: runner.kind,
        fail_to_pass: f2p,
        pass_to_pass: p2p,
        origin: taskOrigin(opts.workspace, [file]),
      });
    }
    // Each task's no-op episode through the scoring path: its failing tests must still fail there.
    const checks: ScoringCheck[] = [];
    const queue = tasks.map((task, i) => ({ task, i }));
    await runWorkers(
      2,
      () => queue.shift(),
      async ({ task, i }, w) => {
        await stop();
        checks[i] = await checkTaskScoring(task, {
          acquire: (role) => pool.acquire(snap, { rollout: `check-${role}-${w}` }),
          originals,
          timeoutMs,
        });
      },
    );
    const scoring = summarizeScoringChecks(checks);
    const kept = tasks.filter((_, i) => checks[i].ok);
    if (kept.length === 0 && tasks.length > 0) {
      throw new ScoringCheckError(
        `no failing-test task of ${opts.workspace} passes the scoring check: ${scoring.repositoryProblem ?? Object.values(scoring.firstDetail)[0]}`,
        scoring,
        'the failing tests must fail in a sandbox episode that changes nothing and the report must name them as the suite does; run `turnwise tasks check FILE --workspace DIR` on a task file to see the scores',
      );
    }
    return {
      tasks: kept,
      summary: {
        workspace: opts.workspace,
        runner: runner.kind,
        tests: report.tests.length,
        passing: passing.length,
        failing: failing.length,
        collectionErrors: report.collectionErrors,
        unstable: unstable.size,
        tasks: kept.length,
        scoring,
        durationMs: Date.now() - t0,
      },
    };
  }).catch((e: unknown) => {
    throw stoppedOr(e, opts.signal, `collecting failing tests (${doing})`);
  });
}
