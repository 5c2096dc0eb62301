// PASS@(k,T): the probability that at least one of k sampled episodes of a task resolves it
// within T turns, for every k up to the samples drawn and every T up to the turn limit, averaged
// over tasks (the unbiased pass@k estimator over each task's n samples, core/stats passAtK). It
// tells a model that is more reliable (pass@1 up, the curve flat in k) from one that can do more
// (the curve rising at large k and T). An episode counts as resolved within T turns when it ended
// resolved after at most T actions (its tests are scored once, at the end).
import type { MetricsRow } from '../core/events';
import { RunDir } from '../core/run';
import { mean, passAtK } from '../core/stats';

/** pass_at_k_t[k][T] for k = 1..n (the fewest samples any task has) and T = 1..maxTurns. */
export type PassAtKT = Record<string, Record<string, number>>;

/** Actions an episode took (its turns less a final submit). */
export function actionsOf(t: { turns: readonly { action: string }[] }): number {
  return t.turns.filter((u) => u.action !== 'submit').length;
}

/**
 * PASS@(k,T) over sampled episodes grouped by task. Episodes that failed (no score) count as not
 * resolved. Empty when there are no samples.
 */
/** The fields of an episode PASS@(k,T) reads. */
export interface PassEpisode {
  taskId: string;
  turns: readonly { action: string }[];
  reward: { resolved: boolean };
  failure?: string;
}

export function passAtKT(sampled: readonly PassEpisode[], maxTurns: number): PassAtKT {
  const byTask = new Map<string, { resolvedAt: number[]; n: number }>();
  for (const t of sampled) {
    const e = byTask.get(t.taskId) ?? { resolvedAt: [], n: 0 };
    e.n++;
    if (!t.failure && t.reward.resolved) e.resolvedAt.push(actionsOf(t));
    byTask.set(t.taskId, e);
  }
  if (byTask.size === 0) return {};
  const n = Math.min(...[...byTask.values()].map((e) => e.n));
  const out: PassAtKT = {};
  for (let k = 1; k <= n; k++) {
    const row: Record<string, number> = {};
    for (let T = 1; T <= maxTurns; T++) {
      let sum = 0;
      for (const e of byTask.values()) sum += passAtK(e.n, e.resolvedAt.filter((a) => a <= T).length, k);
      row[String(T)] = sum / byTask.size;
    }
    out[String(k)] = row;
  }
  return out;
}

/** PASS@(k,T) of the sampled episodes among `episodes` (evaluation ids `evals-…`), T up to their turn limit; null without any. */
export function sampledPassAtKT(
  episodes: readonly (PassEpisode & { trajId: string; reward: { resolved: boolean; maxTurns: number } })[],
): PassAtKT | null {
  const sampled = episodes.filter((t) => t.trajId.startsWith('evals-'));
  if (sampled.length === 0) return null;
  return passAtKT(sampled, Math.max(...sampled.map((t) => t.reward.maxTurns)));
}

/** PASS@(k,T) of a run's first and last held-out evaluations (their sampled episodes); undefined when it sampled none. */
export function runPassAtKT(runDir: string, metrics: readonly MetricsRow[]): { first: PassAtKT | null; last: PassAtKT | null } | undefined {
  const evals = metrics.filter((m) => typeof m['heldout/resolved'] === 'number').map((m) => m.iteration);
  if (evals.length === 0) return undefined;
  const run = RunDir.open(runDir);
  const first = sampledPassAtKT(run.readTrajectories(evals[0], 'heldout'));
  const last = sampledPassAtKT(run.readTrajectories(evals[evals.length - 1], 'heldout'));
  return first || last ? { first, last } : undefined;
}

/**
 * Point-by-point mean of several PASS@(k,T) tables (over seeds), on the k and T every table has;
 * null when there are none.
 */
export function meanPassAtKT(tables: readonly (PassAtKT | null | undefined)[]): PassAtKT | null {
  const ts = tables.filter((t): t is PassAtKT => !!t && Object.keys(t).length > 0);
  if (ts.length === 0) return null;
  const out: PassAtKT = {};
  for (const k of Object.keys(ts[0]).filter((k) => ts.every((t) => t[k]))) {
    const row: Record<string, number> = {};
    for (const T of Object.keys(ts[0][k]).filter((T) => ts.every((t) => typeof t[k][T] === 'number')))
      row[T] = Math.round(mean(ts.map((t) => t[k][T])) * 1e4) / 1e4;
    out[k] = row;
  }
  return out;
}

/** The corners a reader compares first: k = 1 and the largest k, each at the largest T. */
export function passAtKTCorners(p: PassAtKT | null | undefined): { k: number; T: number; value: number }[] {
  if (!p) return [];
  const ks = Object.keys(p)
    .map(Number)
    .sort((a, b) => a - b);
  if (!ks.length) return [];
  const Ts = Object.keys(p[String(ks[0])])
    .map(Number)
    .sort((a, b) => a - b);
  if (!Ts.length) return [];
  const T = Ts[Ts.length - 1];
  return [...new Set([ks[0], ks[ks.length - 1]])].map((k) => ({ k, T, value: p[String(k)][String(T)] }));
}
