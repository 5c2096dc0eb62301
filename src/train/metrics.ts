// The episode figures of a run's metrics rows (train and held-out: reward, pass rate, resolved
// rate, turns, format errors, failed and tampered episodes), and the rows' JSON form.
import type { Trajectory } from '../core/schema';
import { mean, std } from '../core/stats';

/** The episode figures of an iteration's metrics row (train/ or eval/ by `prefix`). */
export function episodeMetrics(prefix: string, trajs: readonly Trajectory[]): Record<string, number> {
  const scored = trajs.filter((t) => !t.failure && Number.isFinite(t.reward.reward));
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
  };
  return m;
}

/** NaN is not JSON: metrics keep null for "no value". */
export function jsonSafe(m: Record<string, number>): Record<string, number | null> {
  return Object.fromEntries(Object.entries(m).map(([k, v]) => [k, Number.isFinite(v) ? v : null]));
}
