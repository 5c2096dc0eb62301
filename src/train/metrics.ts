// The episode figures of a run's metrics rows (train and held-out: reward, pass rate, resolved
// rate, turns, format errors, failed and tampered episodes, how much a group's episodes differ,
// the share of episodes with each failure label),
// and the rows' JSON form.
import { failureBreakdown } from '../agent/diagnosis';
import type { Trajectory } from '../core/schema';
import { isScored } from '../core/trajectory';
import { mean, std } from '../core/stats';

/** The episode figures of an iteration's metrics row (train/ or eval/ by `prefix`). */
export function episodeMetrics(prefix: string, trajs: readonly Trajectory[]): Record<string, number> {
  const scored = trajs.filter(isScored);
  const turns = trajs.flatMap((t) => t.turns);
  const m: Record<string, number> = {
    [`${prefix}reward/mean`]: mean(scored.map((t) => t.reward.reward)),
    [`${prefix}reward/std`]: scored.length > 1 ? std(scored.map((t) => t.reward.reward)) : 0,
    [`${prefix}pass_rate`]: mean(scored.map((t) => t.reward.passRate)),
    [`${prefix}resolved`]: scored.length ? scored.filter((t) => t.reward.resolved).length / scored.length : NaN,
    [`${prefix}turns/mean`]: mean(trajs.filter((t) => !t.failure).map((t) => t.turns.length)),
    [`${prefix}format_errors`]: turns.length ? turns.filter((t) => t.formatError).length / turns.length : 0,
    [`${prefix}episodes`]: trajs.length,
    [`${prefix}episodes/failed`]: trajs.filter((t) => t.failure).length,
    [`${prefix}episodes/tampered`]: trajs.filter((t) => t.reward.tampered !== undefined).length,
    [`${prefix}distinct`]: actionDiversity(trajs),
  };
  // What went wrong: per failure label, the share of scored episodes that show it (agent/diagnosis.ts).
  for (const [label, share] of Object.entries(failureBreakdown(scored))) m[`${prefix}failures/${label}`] = share;
  return m;
}

/**
 * How far a group's episodes differ: per group of two or more episodes (a task's rollouts, or a
 * held-out task's sampled episodes), (distinct action sequences − 1) / (episodes − 1), averaged
 * over the groups. 1 when every episode of a group took its own path, 0 when all took the same;
 * NaN with no such group (greedy evaluation). A run whose policy has narrowed to one sequence
 * per task has nothing left to compare, whatever its rewards.
 */
export function actionDiversity(trajs: readonly Trajectory[]): number {
  const groups = new Map<string, string[]>();
  for (const t of trajs) {
    if (t.failure) continue;
    // The actions as written; JSON keeps a sequence's boundaries whatever the commands contain.
    const key = JSON.stringify(t.turns.map((x) => x.action));
    (groups.get(t.groupId) ?? groups.set(t.groupId, []).get(t.groupId)!).push(key);
  }
  const shares = [...groups.values()].filter((seqs) => seqs.length > 1).map((seqs) => (new Set(seqs).size - 1) / (seqs.length - 1));
  return shares.length ? mean(shares) : NaN;
}

/** NaN is not JSON: metrics keep null for "no value". */
export function jsonSafe(m: Record<string, number>): Record<string, number | null> {
  return Object.fromEntries(Object.entries(m).map(([k, v]) => [k, Number.isFinite(v) ? v : null]));
}
