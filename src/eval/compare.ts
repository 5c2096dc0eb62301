// Two evaluations of the same tasks compared episode by episode. Sampled episodes are seeded by
// (evaluation seed, task, k) only, and greedy ones by (evaluation seed, task), so an episode of one
// evaluation and the episode with the same task and seed in another differ only in the policy:
// counting the pairs that went from unresolved to resolved and back says far more than two rates
// of a dozen tasks.
import { CUT_SHORT_MARKER } from '../agent/cache';
import type { MetricsRow } from '../core/events';
import { RunDir } from '../core/run';
import type { Trajectory } from '../core/schema';
import { signFlipP, signTestP } from '../core/stats';

export type EpisodeKind = 'greedy' | 'sampled';

/** Episodes of two evaluations, paired by task and seed. */
export interface PairedChange {
  /** Episodes present in both evaluations (failed episodes are left out). */
  pairs: number;
  /** Unresolved in the first evaluation, resolved in the second. */
  gained: number;
  /** Resolved in the first, unresolved in the second. */
  lost: number;
  /**
   * Two-sided exact sign test on the pairs that changed (McNemar): the chance of a split at least
   * this uneven if the policy change changed nothing. null without a changed pair.
   */
  p_value: number | null;
  /**
   * Each task's net change among its pairs (gained − lost) by task id, for the tasks where it is
   * not 0: a task's sampled episodes share its bug, so they move together.
   */
  task_nets: Record<string, number>;
  /**
   * The sign-flip test by task on task_nets (core/stats signFlipP): each task's pairs counted as
   * one, so one task that flipped all of its samples is one change, not eight. Equal to p_value
   * when every task has one pair (greedy). null without a net change.
   */
  p_value_tasks: number | null;
}

const fmtPValue = (p: number | null) => (p === null ? '—' : p < 0.001 ? p.toExponential(1) : p.toFixed(3));

/**
 * A paired change for a terminal: `+gained −lost of pairs (p …)`, and with `byTask` the test by
 * task beside it (for sampled episodes, several per task; greedy ones have one per task, where the
 * two tests agree).
 */
export function formatPaired(c: PairedChange, o: { byTask?: boolean; prefix?: string } = {}): string {
  const byTask = o.byTask && c.p_value !== null ? `, by task ${fmtPValue(c.p_value_tasks)}` : '';
  return `${o.prefix ?? ''}+${c.gained} −${c.lost} of ${c.pairs} (p ${fmtPValue(c.p_value)}${byTask})`;
}

/** Sampled evaluation episodes carry `evals-` ids, greedy ones `eval-` (train/evaluate.ts). */
export const episodeKind = (t: Trajectory): EpisodeKind => (t.trajId.startsWith('evals-') ? 'sampled' : 'greedy');

const pairKey = (t: Trajectory) => `${t.taskId}:${t.seed}`;

function scored(ts: readonly Trajectory[], kind: EpisodeKind): Map<string, Trajectory> {
  return new Map(ts.filter((t) => !t.failure && episodeKind(t) === kind).map((t) => [pairKey(t), t]));
}

/** The scored episodes of `kind` in `before` that have a twin in `after`, with that twin. */
function twins(before: readonly Trajectory[], after: readonly Trajectory[], kind: EpisodeKind): [was: Trajectory, now: Trajectory][] {
  const b = scored(after, kind);
  return [...scored(before, kind)].flatMap(([key, was]) => {
    const now = b.get(key);
    return now ? [[was, now] as [Trajectory, Trajectory]] : [];
  });
}

function counted(pairs: readonly [Trajectory, Trajectory][]): PairedChange {
  let gained = 0;
  let lost = 0;
  const nets: Record<string, number> = {};
  for (const [was, now] of pairs) {
    const d = +!!now.reward.resolved - +!!was.reward.resolved;
    if (d > 0) gained++;
    if (d < 0) lost++;
    if (d) nets[was.taskId] = (nets[was.taskId] ?? 0) + d;
  }
  return changed(pairs.length, gained, lost, nets);
}

/** A PairedChange from its counts and its tasks' net changes (zero nets dropped). */
function changed(pairs: number, gained: number, lost: number, nets: Record<string, number>): PairedChange {
  const task_nets = Object.fromEntries(Object.entries(nets).filter(([, d]) => d !== 0));
  return { pairs, gained, lost, p_value: signTestP(gained, lost), task_nets, p_value_tasks: signFlipP(Object.values(task_nets)) };
}

/** How episodes of `kind` changed from `before` to `after`. */
export function pairedChange(before: readonly Trajectory[], after: readonly Trajectory[], kind: EpisodeKind): PairedChange {
  return counted(twins(before, after, kind));
}

/**
 * Sums paired changes (over seeds, runs or repositories) and tests the sum; a task in several
 * parts (the same task under two seeds) is one task, its nets added.
 */
export function sumPaired(parts: readonly PairedChange[]): PairedChange {
  const nets: Record<string, number> = {};
  for (const p of parts) for (const [id, d] of Object.entries(p.task_nets ?? {})) nets[id] = (nets[id] ?? 0) + d;
  return changed(
    parts.reduce((x, p) => x + p.pairs, 0),
    parts.reduce((x, p) => x + p.gained, 0),
    parts.reduce((x, p) => x + p.lost, 0),
    nets,
  );
}

/** A run's first and last held-out evaluations, paired (see pairedChange). */
export function runPairedChange(
  runDir: string,
  metrics: readonly MetricsRow[],
): { greedy: PairedChange; sampled: PairedChange; last_eval: number } | undefined {
  const evals = metrics.filter((m) => typeof m['heldout/resolved'] === 'number').map((m) => m.iteration);
  if (evals.length < 2) return undefined;
  const run = RunDir.open(runDir);
  const first = run.readTrajectories(evals[0], 'heldout');
  const lastIt = evals[evals.length - 1];
  const last = run.readTrajectories(lastIt, 'heldout');
  return { greedy: pairedChange(first, last, 'greedy'), sampled: pairedChange(first, last, 'sampled'), last_eval: lastIt };
}

/** One task's paired episodes. */
export interface TaskChange {
  taskId: string;
  kind: EpisodeKind;
  pairs: number;
  /** Resolved episodes among the pairs, before and after. */
  before: number;
  after: number;
  gained: number;
  lost: number;
}

/** What `turnwise eval --compare` reports. */
export interface EvalComparison {
  greedy: PairedChange;
  sampled: PairedChange;
  /** Every task with a pair, greedy and sampled apart, in the order the first evaluation has them. */
  tasks: TaskChange[];
  /** Episodes with no twin on the other side (another task set, seed or sample count). */
  unpaired: { before: number; after: number };
  /**
   * Observations in which `tw-suspects` said its ranking was cut short by the clock: such an answer
   * depends on the machine's load, so a pair that differs because of it is not the policy's doing.
   */
  cut_short: { before: number; after: number };
}

/** Observations that carry tw-suspects' cut-short line. */
export function cutShortCount(ts: readonly Trajectory[]): number {
  return ts.reduce((n, t) => n + t.turns.filter((x) => x.observation.includes(CUT_SHORT_MARKER)).length, 0);
}

export function compareEvaluations(before: readonly Trajectory[], after: readonly Trajectory[]): EvalComparison {
  const pairs = { greedy: twins(before, after, 'greedy'), sampled: twins(before, after, 'sampled') };
  const tasks: TaskChange[] = [];
  for (const kind of ['greedy', 'sampled'] as const) {
    // Per task, in the order the first evaluation has them.
    const byTask = new Map<string, [Trajectory, Trajectory][]>();
    for (const pair of pairs[kind]) byTask.set(pair[0].taskId, [...(byTask.get(pair[0].taskId) ?? []), pair]);
    for (const [taskId, ps] of byTask) {
      const { gained, lost } = counted(ps);
      tasks.push({
        taskId,
        kind,
        pairs: ps.length,
        before: ps.filter(([was]) => was.reward.resolved).length,
        after: ps.filter(([, now]) => now.reward.resolved).length,
        gained,
        lost,
      });
    }
  }
  const paired = pairs.greedy.length + pairs.sampled.length;
  return {
    greedy: counted(pairs.greedy),
    sampled: counted(pairs.sampled),
    tasks,
    unpaired: { before: before.length - paired, after: after.length - paired },
    cut_short: { before: cutShortCount(before), after: cutShortCount(after) },
  };
}
