// Data of the reward panel, built on the host from a run directory (pure builders over rows,
// no I/O here): metrics as numbers, the per-task pass-rate table, and the advantage
// histogram by component. Plain Node (no vscode): unit-tested.
import type { MetricsRow } from '../../core/events';
import type { Trajectory } from '../../core/schema';
import type { AdvantageHistogram, MetricsPoint, TaskTable } from '../webviews/reward/protocol';
import type { TrajectorySummary } from './trajScan';

export function toPoints(rows: readonly MetricsRow[]): MetricsPoint[] {
  return rows.map((r) => {
    const p: MetricsPoint = { iteration: r.iteration };
    for (const [k, v] of Object.entries(r)) {
      if (k === 'iteration' || k === 'schema') continue;
      if (typeof v === 'number') p[k] = Number.isFinite(v) ? v : null;
      else if (v === null) p[k] = null;
    }
    return p;
  });
}

/** Mean pass rate of each task per iteration (train and held-out rows apart). */
export function taskTable(
  byIteration: ReadonlyArray<{ iteration: number; split: 'train' | 'heldout'; summaries: readonly TrajectorySummary[] }>,
): TaskTable {
  const iterations = [...new Set(byIteration.map((b) => b.iteration))].sort((a, b) => a - b);
  const col = new Map(iterations.map((it, i) => [it, i]));
  const rows = new Map<string, { taskId: string; split: 'train' | 'heldout'; sums: number[]; ns: number[] }>();
  for (const b of byIteration) {
    for (const s of b.summaries) {
      if (s.passRate === null) continue;
      const key = `${b.split}\u0000${s.taskId}`;
      let row = rows.get(key);
      if (!row) rows.set(key, (row = { taskId: s.taskId, split: b.split, sums: iterations.map(() => 0), ns: iterations.map(() => 0) }));
      const c = col.get(b.iteration)!;
      row.sums[c] += s.passRate;
      row.ns[c] += 1;
    }
  }
  return {
    iterations,
    rows: [...rows.values()]
      .sort((a, b) => (a.split === b.split ? a.taskId.localeCompare(b.taskId) : a.split === 'train' ? -1 : 1))
      .map((r) => ({ taskId: r.taskId, split: r.split, passRates: r.sums.map((s, i) => (r.ns[i] ? s / r.ns[i] : null)) })),
  };
}

/** Histogram of per-turn advantages ("total") and of each named component, on shared bins. */
export function advantageHistogram(
  trajectories: readonly Pick<Trajectory, 'turns'>[],
  iteration: number,
  bins = 21,
): AdvantageHistogram | null {
  const values: Record<string, number[]> = { total: [] };
  let turns = 0;
  for (const t of trajectories) {
    for (const turn of t.turns) {
      if (typeof turn.advantage !== 'number' || !Number.isFinite(turn.advantage)) continue;
      turns++;
      values.total.push(turn.advantage);
      for (const [k, v] of Object.entries(turn.advantageComponents ?? {})) {
        if (!Number.isFinite(v)) continue;
        (values[k] ??= []).push(v);
      }
    }
  }
  if (turns === 0) return null;
  let max = 0;
  for (const vs of Object.values(values)) for (const v of vs) max = Math.max(max, Math.abs(v));
  if (max === 0) max = 1;
  const width = (2 * max) / bins;
  const edges = Array.from({ length: bins + 1 }, (_, i) => -max + i * width);
  const counts: Record<string, number[]> = {};
  for (const [k, vs] of Object.entries(values)) {
    const c = new Array<number>(bins).fill(0);
    for (const v of vs) c[Math.min(bins - 1, Math.max(0, Math.floor((v + max) / width)))]++;
    counts[k] = c;
  }
  return { iteration, edges, counts, turns };
}
