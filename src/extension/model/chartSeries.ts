// Which charts the reward panel draws and the aligned columns each one gets (uPlot's
// [x, ...ys] layout), from the main run's and the overlay run's metrics. Shared by the
// webview (rendering) and unit tests; no DOM, no vscode.
import { FAILURE_LABELS } from '../../agent/diagnosis';
import type { MetricsPoint } from '../webviews/reward/protocol';

export interface SeriesSpec {
  key: string;
  label: string;
  /** Draw `key ± bandKey` as a band around the line. */
  bandKey?: string;
  /** Left out of a chart when no row has it (metrics only some configs write). */
  optional?: boolean;
}

export interface ChartSpec {
  id: string;
  title: string;
  series: SeriesSpec[];
  /** Fixed y range [0, 1] for rates. */
  unit?: 'rate';
  /** Series drawn on top of each other, each filled down to the one below (the main run only). */
  stacked?: boolean;
}

export const CHARTS: readonly ChartSpec[] = [
  {
    id: 'passRate',
    title: 'Test pass rate',
    unit: 'rate',
    series: [
      { key: 'tests/pass_rate', label: 'train' },
      { key: 'heldout/pass_rate', label: 'held-out' },
    ],
  },
  {
    id: 'resolved',
    title: 'Resolved rate',
    unit: 'rate',
    series: [
      { key: 'resolved', label: 'train' },
      { key: 'heldout/resolved', label: 'held-out' },
      { key: 'heldout/sampled/resolved', label: 'held-out sampled', optional: true },
    ],
  },
  {
    id: 'mixed',
    title: 'Groups with mixed outcomes (some episodes resolved, some not)',
    unit: 'rate',
    series: [
      { key: 'groups/mixed', label: 'with branches', optional: true },
      { key: 'groups/mixed_first', label: 'first episodes', optional: true },
    ],
  },
  { id: 'reward', title: 'Reward (mean ± std)', series: [{ key: 'reward/mean', label: 'reward', bandKey: 'reward/std' }] },
  { id: 'turns', title: 'Turns per episode', series: [{ key: 'turns/mean', label: 'turns' }] },
  { id: 'formatErrors', title: 'Format errors', series: [{ key: 'format_errors', label: 'format errors' }] },
  { id: 'loss', title: 'Policy loss', series: [{ key: 'loss/policy', label: 'loss' }] },
  { id: 'kl', title: 'KL', series: [{ key: 'kl', label: 'KL' }] },
  { id: 'gradNorm', title: 'Grad norm', series: [{ key: 'grad_norm', label: 'grad norm' }] },
  {
    id: 'failures',
    title: 'What went wrong: train episodes with each failure label (stacked; the top is labels per episode)',
    stacked: true,
    series: FAILURE_LABELS.map((l) => ({ key: `failures/${l}`, label: l, optional: true })),
  },
];

export interface ColumnSeries {
  label: string;
  run: 'main' | 'overlay';
  /** 'line', the lower/upper edge of a band around the previous line, or a layer of a stacked chart (its top edge). */
  kind: 'line' | 'lower' | 'upper' | 'stack';
  color: number;
}

export interface ChartColumns {
  x: number[];
  ys: Array<Array<number | null>>;
  series: ColumnSeries[];
  /** Points that have a value (over all series). */
  points: number;
}

/** Columns of one chart, over the union of both runs' iterations. */
export function chartColumns(
  spec: ChartSpec,
  main: readonly MetricsPoint[],
  overlay?: readonly MetricsPoint[],
  names: { main: string; overlay?: string } = { main: 'main' },
): ChartColumns {
  const iters = new Set<number>();
  for (const p of main) iters.add(p.iteration);
  for (const p of overlay ?? []) iters.add(p.iteration);
  const x = [...iters].sort((a, b) => a - b);
  const at = new Map(x.map((it, i) => [it, i]));
  const ys: Array<Array<number | null>> = [];
  const series: ColumnSeries[] = [];
  let points = 0;
  const runs: Array<['main' | 'overlay', readonly MetricsPoint[], string]> = [['main', main, names.main]];
  if (overlay && !spec.stacked) runs.push(['overlay', overlay, names.overlay ?? 'overlay']);
  if (spec.stacked) {
    // Each layer's top: the sum of its value and every layer below (a missing value counts 0 where the row has others).
    const below = new Array<number | null>(x.length).fill(null);
    spec.series.forEach((s, si) => {
      const layer = new Array<number | null>(x.length).fill(null);
      let n = 0;
      for (const p of main) {
        const v = p[s.key];
        if (typeof v !== 'number' || !Number.isFinite(v)) continue;
        const i = at.get(p.iteration)!;
        below[i] = (below[i] ?? 0) + v;
        layer[i] = below[i];
        if (v > 0) n++;
      }
      if (s.optional && n === 0) return;
      points += layer.filter((v) => v !== null).length;
      ys.push(layer.map((v, i) => v ?? below[i]));
      series.push({ label: s.label, run: 'main', kind: 'stack', color: si });
    });
    return { x, ys, series, points };
  }
  for (const [run, rows, name] of runs) {
    spec.series.forEach((s, si) => {
      const col = (key: string, f: (p: MetricsPoint) => number | null) => {
        const c = new Array<number | null>(x.length).fill(null);
        for (const p of rows) {
          const v = p[key];
          if (typeof v === 'number' && Number.isFinite(v)) c[at.get(p.iteration)!] = f(p);
        }
        return c;
      };
      const label = runs.length > 1 || spec.series.length > 1 ? `${s.label}${runs.length > 1 ? ` · ${name}` : ''}` : s.label;
      const line = col(s.key, (p) => p[s.key] as number);
      const n = line.filter((v) => v !== null).length;
      if (s.optional && n === 0) return;
      points += n;
      ys.push(line);
      series.push({ label, run, kind: 'line', color: si });
      if (s.bandKey) {
        const bk = s.bandKey;
        const std = (p: MetricsPoint) => (typeof p[bk] === 'number' && Number.isFinite(p[bk] as number) ? (p[bk] as number) : 0);
        ys.push(col(s.key, (p) => (p[s.key] as number) - std(p)));
        series.push({ label: `${label} − std`, run, kind: 'lower', color: si });
        ys.push(col(s.key, (p) => (p[s.key] as number) + std(p)));
        series.push({ label: `${label} + std`, run, kind: 'upper', color: si });
      }
    });
  }
  return { x, ys, series, points };
}
