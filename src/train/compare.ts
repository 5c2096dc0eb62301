// Two evaluations of the same tasks compared episode by episode. Sampled episodes are seeded by
// (evaluation seed, task, k) only, and greedy ones by the task, so an episode of one evaluation and
// the episode with the same task and seed in another differ only in the policy: counting the pairs
// that went from unresolved to resolved and back says far more than two rates of a dozen tasks.
import { CUT_SHORT_MARKER } from '../agent/cache';
import type { Trajectory } from '../core/schema';
import { signTestP } from '../core/stats';

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
}

/** Sampled evaluation episodes carry `evals-` ids, greedy ones `eval-` (train/run.ts). */
export const episodeKind = (t: Trajectory): EpisodeKind => (t.trajId.startsWith('evals-') ? 'sampled' : 'greedy');

const pairKey = (t: Trajectory) => `${t.taskId}:${t.seed}`;

function scored(ts: readonly Trajectory[], kind: EpisodeKind): Map<string, Trajectory> {
  return new Map(ts.filter((t) => !t.failure && episodeKind(t) === kind).map((t) => [pairKey(t), t]));
}

/** How episodes of `kind` changed from `before` to `after`. */
export function pairedChange(before: readonly Trajectory[], after: readonly Trajectory[], kind: EpisodeKind): PairedChange {
  const a = scored(before, kind);
  const b = scored(after, kind);
  let pairs = 0;
  let gained = 0;
  let lost = 0;
  for (const [key, was] of a) {
    const now = b.get(key);
    if (now === undefined) continue;
    pairs++;
    if (!was.reward.resolved && now.reward.resolved) gained++;
    if (was.reward.resolved && !now.reward.resolved) lost++;
  }
  return { pairs, gained, lost, p_value: signTestP(gained, lost) };
}

/** Sums paired changes (over seeds, runs or kinds) and tests the sum. */
export function sumPaired(parts: readonly PairedChange[]): PairedChange {
  const pairs = parts.reduce((x, p) => x + p.pairs, 0);
  const gained = parts.reduce((x, p) => x + p.gained, 0);
  const lost = parts.reduce((x, p) => x + p.lost, 0);
  return { pairs, gained, lost, p_value: signTestP(gained, lost) };
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
  const tasks: TaskChange[] = [];
  const index = new Map<string, TaskChange>();
  let pairedBefore = 0;
  let pairedAfter = 0;
  for (const kind of ['greedy', 'sampled'] as const) {
    const a = scored(before, kind);
    const b = scored(after, kind);
    for (const [key, was] of a) {
      const now = b.get(key);
      if (now === undefined) continue;
      pairedBefore++;
      pairedAfter++;
      const id = `${kind}:${was.taskId}`;
      let row = index.get(id);
      if (!row) {
        row = { taskId: was.taskId, kind, pairs: 0, before: 0, after: 0, gained: 0, lost: 0 };
        index.set(id, row);
        tasks.push(row);
      }
      row.pairs++;
      if (was.reward.resolved) row.before++;
      if (now.reward.resolved) row.after++;
      if (!was.reward.resolved && now.reward.resolved) row.gained++;
      if (was.reward.resolved && !now.reward.resolved) row.lost++;
    }
  }
  return {
    greedy: pairedChange(before, after, 'greedy'),
    sampled: pairedChange(before, after, 'sampled'),
    tasks,
    unpaired: { before: before.length - pairedBefore, after: after.length - pairedAfter },
    cut_short: { before: cutShortCount(before), after: cutShortCount(after) },
  };
}
