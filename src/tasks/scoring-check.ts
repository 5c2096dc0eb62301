// A task is only as good as its reward. Before a task is kept (synthesis, `tasks failing`,
// `tasks check`) and once per iteration of a run (the canary), two episodes are scored through
// the very path that scores the agent (tasks/pose.ts, then scoreEpisode in a fresh sandbox):
//   - the no-op: the task posed and nothing done. It must score unresolved, with every
//     fail-to-pass test failing, no tamper flag and no test file found changed;
//   - the reference fix (mutation tasks): the mutation undone. It must score resolved, pass rate
//     1, no tamper flag and no test file found changed.
// What this catches is a scorer or a task that cannot tell a fix from no fix: a report id read
// wrong (every episode "tampered"), a mutated file the scorer restores (every no-op "resolved"),
// a test that fails whatever the code (a task nobody can resolve).
import { formatError, TurnwiseError } from '../core/errors';
import { runWorkers } from '../core/workers';
import { stoppedOr, stopPoint } from '../core/stop';
import { SandboxPool, type PoolSnapshot } from '../sandbox';
import type { RewardComponents, Task } from '../core/schema';
import type { Sandbox } from '../sandbox/types';
import { poseTask, writeReferenceFix } from './pose';
import { scoreEpisode, scoringRestoreSet, type EpisodeScore, type RewardWeights } from './reward';
import { assertWorkspaceHoldsTasks } from './origin';
import { collectOriginals, isTestInfraFile, type ScoringOriginals } from './testfiles';

/** How a task failed the scoring check. */
export type ScoringProblemKind =
  /** The mutated file is one scoring puts back from the snapshot, so no episode can keep the bug. */
  | 'restored-target'
  /** The no-op episode scored resolved. */
  | 'noop-resolved'
  /** A fail-to-pass test passed in the no-op episode. */
  | 'noop-passes'
  /** The reference fix did not score resolved with pass rate 1. */
  | 'reference-unresolved'
  /** An episode that changed no test was flagged as tampered with. */
  | 'tampered'
  /** An episode that changed no test was found to have changed test files or dependencies. */
  | 'tests-edited'
  /** The episode could not be scored (no report, a restore that failed, a timeout). */
  | 'unscorable'
  /** The sandbox failed before scoring (the task could not be posed). */
  | 'sandbox-error';

export const SCORING_PROBLEM_KINDS: readonly ScoringProblemKind[] = [
  'restored-target',
  'noop-resolved',
  'noop-passes',
  'reference-unresolved',
  'tampered',
  'tests-edited',
  'unscorable',
  'sandbox-error',
];

/** One episode of the check, as scored. */
export interface CheckedEpisode {
  resolved: boolean;
  passRate: number | null;
  reward: number | null;
  tampered?: string;
  error?: string;
  /** Test files or dependencies the scorer found changed (and put back). */
  testsChanged?: string[];
  /** The task's tests that did not pass. */
  notPassing: string[];
  /** The task's tests that passed. */
  passing: string[];
  /** The test command ran past the time limit. */
  timedOut?: true;
}

export interface ScoringCheck {
  taskId: string;
  ok: boolean;
  problem?: { kind: ScoringProblemKind; detail: string };
  noop?: CheckedEpisode;
  /** Absent for a task with no reference fix (not a mutation task). */
  reference?: CheckedEpisode;
  durationMs: number;
}

export interface ScoringCheckOptions {
  /** A fresh sandbox of the workspace's snapshot, as an episode gets (disposed here). */
  acquire: (role: 'noop' | 'reference') => Promise<Sandbox>;
  originals: ScoringOriginals;
  /** The run's turn limit (the checked episodes have no turn, so it changes no score; it is recorded as a run's would be). */
  maxTurns?: number;
  weights?: Partial<RewardWeights>;
  /** The test run's time limit. */
  timeoutMs?: number;
  /** Score the two episodes at once (two sandboxes): the canary's choice; validation runs them in turn. */
  parallel?: boolean;
}

function episodeOf(task: Task, s: EpisodeScore): CheckedEpisode {
  const r: RewardComponents = s.reward;
  const changed = [...s.restored.modified, ...s.restored.deleted, ...s.restored.added, ...(s.restored.dependencies ?? [])];
  const num = (x: number) => (Number.isFinite(x) ? x : null);
  const ids = [...new Set([...task.fail_to_pass, ...task.pass_to_pass])];
  const passing = new Set(s.testReport?.passed ?? []);
  return {
    resolved: r.resolved,
    passRate: num(r.passRate),
    reward: num(r.reward),
    ...(r.tampered !== undefined ? { tampered: r.tampered } : {}),
    ...(r.error !== undefined ? { error: r.error } : {}),
    ...(changed.length ? { testsChanged: changed } : {}),
    notPassing: ids.filter((id) => !passing.has(id)),
    passing: ids.filter((id) => passing.has(id)),
    ...(s.testTimedOut ? { timedOut: true as const } : {}),
  };
}

const list = (ids: readonly string[], n = 3) => `${ids.slice(0, n).join(', ')}${ids.length > n ? `, … (${ids.length} in all)` : ''}`;

/** The first thing wrong with a checked episode that changed nothing but (for the reference) the bug. */
function commonProblem(e: CheckedEpisode, what: string): ScoringCheck['problem'] {
  if (e.tampered !== undefined)
    return { kind: 'tampered', detail: `the ${what} was flagged as tampered with: ${e.tampered.split('\n')[0]}` };
  if (e.testsChanged)
    return {
      kind: 'tests-edited',
      detail: `the ${what} changed no test, yet scoring found test files or dependencies changed and put them back: ${list(e.testsChanged)}`,
    };
  if (e.error !== undefined || e.passRate === null)
    return {
      kind: 'unscorable',
      detail: `the ${what} could not be scored: ${(e.error ?? 'no pass rate').split('\n').slice(0, 4).join(' ')}`,
    };
  return undefined;
}

/** What is wrong with a no-op episode's score, if anything. */
export function noopProblem(task: Task, e: CheckedEpisode): ScoringCheck['problem'] {
  const common = commonProblem(e, 'no-op episode');
  if (common) return common;
  if (e.resolved)
    return { kind: 'noop-resolved', detail: `the no-op episode (the task posed, nothing done) scored resolved, pass rate ${e.passRate}` };
  const f2pPassing = task.fail_to_pass.filter((id) => e.passing.includes(id));
  if (f2pPassing.length) return { kind: 'noop-passes', detail: `fail-to-pass test(s) passed in the no-op episode: ${list(f2pPassing)}` };
  return undefined;
}

/** What is wrong with a reference-fix episode's score, if anything. */
export function referenceProblem(e: CheckedEpisode): ScoringCheck['problem'] {
  const common = commonProblem(e, 'reference fix');
  if (common) return common;
  if (!e.resolved || e.passRate !== 1)
    return {
      kind: 'reference-unresolved',
      detail: `the reference fix (the mutation undone) scored pass rate ${e.passRate}, not resolved; not passing: ${list(e.notPassing)}`,
    };
  return undefined;
}

/**
 * A mutation task whose file scoring puts back from the snapshot: a test file by name, or a source
 * file the runner configuration loads (collectOriginals). Its bug is gone before the tests run.
 */
export function restoredTarget(task: Task, originals: ScoringOriginals): string | undefined {
  const f = task.mutation?.file;
  if (f === undefined || !scoringRestoreSet(originals, task).covers(f)) return undefined;
  return `${f}, the file the mutation changes, is put back from the snapshot before scoring (${isTestInfraFile(f) ? 'it is test infrastructure by its name or folder' : 'the runner configuration loads it'}), so the bug never reaches the tests`;
}

async function scoreOne(o: ScoringCheckOptions, task: Task, role: 'noop' | 'reference'): Promise<CheckedEpisode> {
  const sb = await o.acquire(role);
  try {
    await poseTask(sb, task);
    if (role === 'reference') await writeReferenceFix(sb, task);
    const s = await scoreEpisode(sb, task, {
      originals: o.originals,
      turns: 0,
      maxTurns: o.maxTurns ?? 1,
      formatError: false,
      weights: o.weights,
      timeoutMs: o.timeoutMs,
    });
    return episodeOf(task, s);
  } finally {
    await sb.dispose().catch(() => undefined);
  }
}

/** Scores the task's no-op episode and, for a mutation task, its reference fix; says what is wrong, if anything. */
export async function checkTaskScoring(task: Task, o: ScoringCheckOptions): Promise<ScoringCheck> {
  const t0 = Date.now();
  const done = (c: Omit<ScoringCheck, 'taskId' | 'durationMs'>): ScoringCheck => ({ taskId: task.id, ...c, durationMs: Date.now() - t0 });
  const target = restoredTarget(task, o.originals);
  if (target) return done({ ok: false, problem: { kind: 'restored-target', detail: target } });
  let noop: CheckedEpisode;
  let reference: CheckedEpisode | undefined;
  try {
    if (o.parallel && task.mutation) [noop, reference] = await Promise.all([scoreOne(o, task, 'noop'), scoreOne(o, task, 'reference')]);
    else {
      noop = await scoreOne(o, task, 'noop');
      const early = noopProblem(task, noop);
      if (early) return done({ ok: false, problem: early, noop });
      if (task.mutation) reference = await scoreOne(o, task, 'reference');
    }
  } catch (e) {
    return done({ ok: false, problem: { kind: 'sandbox-error', detail: formatError(e) } });
  }
  const problem = noopProblem(task, noop) ?? (reference ? referenceProblem(reference) : undefined);
  return done({ ok: problem === undefined, ...(problem ? { problem } : {}), noop, ...(reference ? { reference } : {}) });
}

/** What the checks of many tasks say together: counts per problem, the first detail of each, and a repository-level problem. */
export interface ScoringCheckSummary {
  checked: number;
  passed: number;
  failed: Partial<Record<ScoringProblemKind, number>>;
  /** The first detail seen for each kind of problem. */
  firstDetail: Partial<Record<ScoringProblemKind, string>>;
  /** Every task that failed, with its reason (the first 200). */
  rejected: Array<{ taskId: string; kind: ScoringProblemKind; detail: string }>;
  /**
   * Set when most checked tasks fail the same way (at least half of them, and at least two): a
   * problem of the repository or of the scorer on it, not of single tasks.
   */
  repositoryProblem?: string;
}

export function summarizeScoringChecks(checks: readonly ScoringCheck[]): ScoringCheckSummary {
  const failed: ScoringCheckSummary['failed'] = {};
  const firstDetail: ScoringCheckSummary['firstDetail'] = {};
  for (const c of checks) {
    if (!c.problem) continue;
    failed[c.problem.kind] = (failed[c.problem.kind] ?? 0) + 1;
    firstDetail[c.problem.kind] ??= `${c.taskId}: ${c.problem.detail}`;
  }
  const top = (Object.entries(failed) as Array<[ScoringProblemKind, number]>).sort((a, b) => b[1] - a[1])[0];
  const rejected = checks
    .filter((c) => c.problem)
    .slice(0, 200)
    .map((c) => ({ taskId: c.taskId, kind: c.problem!.kind, detail: c.problem!.detail }));
  const s: ScoringCheckSummary = { checked: checks.length, passed: checks.filter((c) => c.ok).length, failed, firstDetail, rejected };
  if (top && top[1] >= 2 && top[1] * 2 >= checks.length) {
    s.repositoryProblem = `${top[1]} of ${checks.length} tasks fail the scoring check the same way (${top[0]}), so the reward cannot be trusted on this repository; the first: ${firstDetail[top[0]]}`;
  }
  return s;
}

export interface WorkspaceCheckOptions {
  workspace: string;
  /** An open pool (else one is opened and closed here). */
  pool?: SandboxPool;
  /** Run id for container labels when a pool is opened here. */
  run?: string;
  /** Tasks checked at once (each holds one sandbox at a time). Default 2. */
  concurrency?: number;
  timeoutMs?: number;
  onProgress?: (done: number, total: number, last: ScoringCheck) => void;
  /** Stops before the next task: the sandboxes are removed and a StoppedError is thrown. */
  signal?: AbortSignal;
}

/**
 * The scoring check of tasks read from a file, in sandboxes of the workspace they were made from:
 * refused first when the workspace no longer holds their files as the tasks saw them.
 */
export async function checkTasksInWorkspace(
  tasks: readonly Task[],
  o: WorkspaceCheckOptions,
): Promise<{ checks: ScoringCheck[]; summary: ScoringCheckSummary }> {
  assertWorkspaceHoldsTasks(tasks, o.workspace, 'the task file');
  const originals = collectOriginals(o.workspace);
  const pool = o.pool ?? (await SandboxPool.connect({ run: o.run ?? `tasks-check-${process.pid}-${Date.now().toString(36)}` }));
  try {
    const snaps = new Map<string, Promise<PoolSnapshot>>();
    const snapOf = (language: Task['language']) => {
      const image = language === 'python' ? 'python' : 'javascript';
      if (!snaps.has(image)) snaps.set(image, pool.snapshot(o.workspace, { language: image }));
      return snaps.get(image)!;
    };
    const checks: ScoringCheck[] = [];
    const queue = tasks.map((task, i) => ({ task, i }));
    let done = 0;
    await runWorkers(
      Math.max(1, o.concurrency ?? 2),
      () => queue.shift(),
      async ({ task, i }, w) => {
        await stopPoint(o.signal, `checking how the tasks score (${done} of ${tasks.length} checked)`);
        const snap = await snapOf(task.language);
        checks[i] = await checkTaskScoring(task, {
          acquire: (role) => pool.acquire(snap, { rollout: `check-${role}-${w}` }),
          originals,
          timeoutMs: o.timeoutMs,
        });
        o.onProgress?.(++done, tasks.length, checks[i]);
      },
    );
    return { checks, summary: summarizeScoringChecks(checks) };
  } catch (e) {
    throw stoppedOr(e, o.signal, 'checking how the tasks score');
  } finally {
    if (!o.pool) await pool.close();
  }
}

/** A workspace refused because none of its tasks passes the scoring check: the check's summary comes with the reason. */
export class ScoringCheckError extends TurnwiseError {
  constructor(
    message: string,
    readonly summary: ScoringCheckSummary,
    hint: string,
  ) {
    super('test-report', message, { hint });
  }
}
