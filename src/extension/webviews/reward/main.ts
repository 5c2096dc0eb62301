// Reward panel page: uPlot charts of a run's metrics (updated in place as iterations finish),
// optionally overlaid with a second run, the advantage distribution by component and a
// per-task pass-rate table. Each update's render time is measured and reported to the host.
// The Evaluations view (compare.ts) compares evaluation results files: PASS@(k,T) heatmaps and
// the models' table.
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import './style.css';
import { h, vscodeApi } from '../shared/vscodeApi';
import { CHARTS, chartColumns, type ChartSpec } from '../../model/chartSeries';
import { evaluationsView } from './compare';
import * as msg from './protocol';
import type { AdvantageHistogram, MetricsPoint, PanelView, RewardPanelState, RunEntry, TaskTable } from './protocol';

const vscode = vscodeApi<RewardPanelState>();
const TABLE_COLUMNS = 24;

const state: {
  runs: RunEntry[];
  selected?: string;
  overlay?: string;
  main: MetricsPoint[];
  over?: MetricsPoint[];
  tasks?: TaskTable;
  hist?: AdvantageHistogram | null;
  view?: PanelView;
  evals?: string[];
} = { runs: [], main: [], ...(vscode.getState() ?? {}) };

// ── layout ─────────────────────────────────────────────────────────────────────────────────────
const runSelect = h('select', {
  id: 'run',
  'aria-label': 'run',
  onchange: () => vscode.postMessage(msg.SelectRunCommand.make({ runId: runSelect.value })),
});
const overlaySelect = h('select', {
  id: 'overlay',
  'aria-label': 'overlay run',
  onchange: () => vscode.postMessage(msg.OverlayRunCommand.make({ runId: overlaySelect.value || null })),
});
const statusLine = h('span', { class: 'muted', id: 'status' });
/** Which model the shown run trained, and its adapter. */
const modelLine = h('div', { class: 'muted model-line', id: 'model' });
const grid = h('div', { class: 'grid' });
const histCard = h(
  'section',
  { class: 'card', id: 'chart-advantages' },
  h('h2', {}, 'Advantage distribution by component'),
  h('div', { class: 'plot' }),
);
const tableCard = h('section', { class: 'card wide', id: 'tasks' }, h('h2', {}, 'Pass rate per task'), h('div', { class: 'table-wrap' }));
const empty = h('div', { class: 'empty muted', id: 'empty' });
const viewSelect = h(
  'select',
  {
    id: 'view',
    'aria-label': 'view',
    onchange: () => vscode.postMessage(msg.ShowViewCommand.make({ view: viewSelect.value as PanelView })),
  },
  h('option', { value: 'runs' }, 'Runs'),
  h('option', { value: 'evals' }, 'Evaluations'),
);
const runControls = h(
  'span',
  { class: 'run-controls' },
  h('label', {}, 'Run ', runSelect),
  h('label', {}, 'Overlay ', overlaySelect),
  statusLine,
);
const runsView = h('div', { id: 'runs-view' }, modelLine, empty, grid);
const evals = evaluationsView({
  onSelect: (files) => vscode.postMessage(msg.SelectEvalsCommand.make({ files })),
  onAdd: () => vscode.postMessage(msg.AddEvalFilesCommand.make({})),
});
document
  .getElementById('app')!
  .replaceChildren(h('header', { class: 'toolbar' }, h('label', {}, 'View ', viewSelect), runControls), runsView, evals.el);

function showView(view: PanelView): void {
  state.view = view;
  viewSelect.value = view;
  runControls.hidden = view !== 'runs';
  runsView.hidden = view !== 'runs';
  evals.el.hidden = view !== 'evals';
  document.body.dataset.view = view;
  save();
}

interface Chart {
  spec: ChartSpec;
  el: HTMLElement;
  plot?: uPlot;
  shape?: string;
}
const charts: Chart[] = CHARTS.map((spec) => {
  const el = h('section', { class: 'card', id: `chart-${spec.id}` }, h('h2', {}, spec.title), h('div', { class: 'plot' }));
  grid.append(el);
  return { spec, el };
});
grid.append(histCard, tableCard);

// ── colors from the theme ─────────────────────────────────────────────────────────────────────
const cssVar = (name: string, fallback: string) => getComputedStyle(document.body).getPropertyValue(name).trim() || fallback;
let palette: string[] = [];
let axisColor = '#888';
let gridColor = 'rgba(128,128,128,0.2)';
function readTheme(): void {
  palette = [
    cssVar('--vscode-charts-blue', '#3794ff'),
    cssVar('--vscode-charts-orange', '#d18616'),
    cssVar('--vscode-charts-green', '#89d185'),
    cssVar('--vscode-charts-purple', '#b180d7'),
    cssVar('--vscode-charts-red', '#f14c4c'),
    cssVar('--vscode-charts-yellow', '#cca700'),
  ];
  axisColor = cssVar('--vscode-descriptionForeground', '#888');
  gridColor = cssVar('--vscode-editorWidget-border', 'rgba(128,128,128,0.25)');
}
readTheme();
const withAlpha = (color: string, a: number) => `color-mix(in srgb, ${color} ${Math.round(a * 100)}%, transparent)`;

function plotWidth(el: HTMLElement): number {
  return Math.max(240, (el.querySelector('.plot') as HTMLElement).clientWidth || el.clientWidth - 16);
}

function axes(rate: boolean): uPlot.Axis[] {
  const a: uPlot.Axis = { stroke: axisColor, grid: { stroke: gridColor, width: 1 }, ticks: { stroke: gridColor, width: 1 } };
  // Iterations are whole numbers: integer tick steps only.
  const incrs = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000];
  return [
    { ...a, label: 'iteration', labelSize: 14, incrs, values: (_u: uPlot, vals: number[]) => vals.map((v) => String(Math.round(v))) },
    { ...a, size: 48, values: rate ? (_u: uPlot, vals: number[]) => vals.map((v) => `${Math.round(v * 100)}%`) : undefined },
  ];
}

// ── charts ─────────────────────────────────────────────────────────────────────────────────────
function names() {
  const est = (id?: string) => state.runs.find((r) => r.runId === id)?.estimator ?? id ?? '';
  return { main: est(state.selected), overlay: est(state.overlay) };
}

/** Draws every metrics chart; returns how many points they hold. */
function drawCharts(): number {
  let points = 0;
  for (const c of charts) {
    const cols = chartColumns(c.spec, state.main, state.over, names());
    points += cols.points;
    // A chart of optional series only (the failure labels of a run made before they existed) is left out.
    c.el.hidden = cols.series.length === 0;
    if (c.el.hidden) {
      c.plot?.destroy();
      c.plot = undefined;
      c.shape = undefined;
      continue;
    }
    const shape = JSON.stringify(cols.series.map((s) => [s.label, s.kind, s.run]));
    const data = [cols.x, ...cols.ys] as uPlot.AlignedData;
    if (c.plot && c.shape === shape) {
      c.plot.setData(data);
      continue;
    }
    c.plot?.destroy();
    const series: uPlot.Series[] = [{ label: 'iteration' }];
    const bands: uPlot.Band[] = [];
    cols.series.forEach((s, i) => {
      const color = palette[(s.color + (s.run === 'overlay' ? 3 : 0)) % palette.length];
      const dash = s.run === 'overlay' ? [6, 4] : undefined;
      if (s.kind === 'stack') {
        // A layer: filled down to the layer below (the first one to the axis).
        series.push({
          label: s.label,
          stroke: color,
          width: 1,
          spanGaps: true,
          points: { show: false },
          ...(i === 0 ? { fill: withAlpha(color, 0.5) } : {}),
        });
        if (i > 0) bands.push({ series: [i + 1, i], fill: withAlpha(color, 0.5) });
      } else if (s.kind === 'line')
        series.push({
          label: s.label,
          stroke: color,
          width: 2,
          dash,
          spanGaps: true,
          points: { show: cols.x.length <= 60, size: 5, fill: color },
        });
      // Band edges draw the ± std band; they are not entries of their own in the legend (style.css).
      else
        series.push({
          label: s.label,
          class: 'band-edge',
          stroke: withAlpha(color, 0.35),
          width: 1,
          dash,
          spanGaps: true,
          points: { show: false },
        });
      if (s.kind === 'upper') bands.push({ series: [i + 1, i], fill: withAlpha(color, 0.15) });
    });
    const plotEl = c.el.querySelector('.plot') as HTMLElement;
    plotEl.replaceChildren();
    c.plot = new uPlot(
      {
        width: plotWidth(c.el),
        height: 200,
        series,
        bands,
        axes: axes(c.spec.unit === 'rate'),
        scales: { x: { time: false }, y: c.spec.unit === 'rate' ? { range: [0, 1] } : {} },
        legend: { live: true },
        cursor: { drag: { x: true, y: false } },
      },
      data,
      plotEl,
    );
    c.shape = shape;
  }
  return points;
}

function drawHistogram(): void {
  const plotEl = histCard.querySelector('.plot') as HTMLElement;
  const hst = state.hist;
  plotEl.replaceChildren();
  if (!hst) {
    plotEl.append(h('div', { class: 'muted' }, 'no per-turn advantages recorded yet'));
    return;
  }
  const centers = hst.edges.slice(0, -1).map((e, i) => (e + hst.edges[i + 1]) / 2);
  const comps = Object.keys(hst.counts);
  const bars = uPlot.paths.bars!({ size: [0.9 / Math.max(1, comps.length), 100], align: 0 });
  new uPlot(
    {
      width: plotWidth(histCard),
      height: 200,
      title: undefined,
      series: [
        { label: 'advantage' },
        ...comps.map((k, i) => ({
          label: k,
          stroke: palette[i % palette.length],
          fill: withAlpha(palette[i % palette.length], 0.45),
          paths: bars,
          points: { show: false },
        })),
      ],
      axes: [
        {
          stroke: axisColor,
          grid: { stroke: gridColor, width: 1 },
          label: `advantage (iteration ${hst.iteration}, ${hst.turns} turns)`,
          labelSize: 14,
          values: (_u: uPlot, v: number[]) => v.map((x) => x.toFixed(2)),
        },
        { stroke: axisColor, grid: { stroke: gridColor, width: 1 }, size: 48 },
      ],
      scales: { x: { time: false } },
    },
    [centers, ...comps.map((k) => hst.counts[k])] as uPlot.AlignedData,
    plotEl,
  );
}

function drawTable(): void {
  const wrap = tableCard.querySelector('.table-wrap') as HTMLElement;
  const t = state.tasks;
  if (!t || t.rows.length === 0) {
    wrap.replaceChildren(h('div', { class: 'muted' }, 'no scored episodes yet'));
    return;
  }
  const first = Math.max(0, t.iterations.length - TABLE_COLUMNS);
  const its = t.iterations.slice(first);
  const cell = (v: number | null) =>
    h(
      'td',
      {
        class: 'rate',
        style:
          v === null ? undefined : `background:${withAlpha(v >= 0.5 ? 'var(--tw-pos)' : 'var(--tw-neg)', 0.15 + 0.5 * Math.abs(v - 0.5))}`,
        title: v === null ? 'no episode' : `${(v * 100).toFixed(1)}%`,
      },
      v === null ? '' : `${Math.round(v * 100)}`,
    );
  wrap.replaceChildren(
    h(
      'table',
      {},
      h('thead', {}, h('tr', {}, h('th', {}, 'task'), ...its.map((i) => h('th', {}, String(i))))),
      h(
        'tbody',
        {},
        ...t.rows.map((r) =>
          h(
            'tr',
            {},
            h('th', { class: 'task', title: r.taskId }, r.split === 'heldout' ? `${r.taskId} (held-out)` : r.taskId),
            ...r.passRates.slice(first).map(cell),
          ),
        ),
      ),
    ),
    first > 0 ? h('div', { class: 'muted' }, `last ${TABLE_COLUMNS} of ${t.iterations.length} iterations`) : '',
  );
}

function drawSelectors(): void {
  const opt = (r: RunEntry, sel?: string) => h('option', { value: r.runId, selected: r.runId === sel }, `${r.runId} (${r.state})`);
  runSelect.replaceChildren(...state.runs.map((r) => opt(r, state.selected)));
  overlaySelect.replaceChildren(
    h('option', { value: '' }, '(none)'),
    ...state.runs.filter((r) => r.runId !== state.selected).map((r) => opt(r, state.overlay)),
  );
  const shown = state.runs.find((r) => r.runId === state.selected);
  const over = state.runs.find((r) => r.runId === state.overlay);
  const line = (r: RunEntry) => (r.modelDetails?.length ? r.modelDetails.join(' · ') : 'model: not recorded in its config.json');
  modelLine.replaceChildren(
    ...(shown ? [h('div', { class: 'main' }, line(shown))] : []),
    ...(over ? [h('div', { class: 'overlay' }, `overlay ${over.runId}: ${line(over)}`)] : []),
  );
  modelLine.hidden = !shown;
  empty.textContent = state.runs.length ? '' : 'No runs in this workspace yet. Start one with "Turnwise: Start Training Run…".';
  empty.hidden = state.runs.length > 0;
}

function update(): void {
  const t0 = performance.now();
  const points = drawCharts();
  const ms = performance.now() - t0;
  const iterations = state.main.length;
  const last = state.main[state.main.length - 1];
  statusLine.textContent = `${iterations} iteration(s)${last ? ` · last: ${last.iteration}` : ''} · drawn in ${ms.toFixed(1)} ms`;
  document.body.dataset.points = String(points);
  document.body.dataset.iterations = String(iterations);
  vscode.postMessage(msg.RenderedNotification.make({ ms, iterations, charts: charts.length, points }));
}

function save(): void {
  vscode.setState({ selected: state.selected, overlay: state.overlay, view: state.view, evals: state.evals });
}

window.addEventListener('message', (e: MessageEvent) => {
  const m = e.data as unknown;
  if (msg.RunsNotification.is(m)) {
    const changedMain = m.params.selected !== state.selected;
    state.runs = m.params.runs;
    state.selected = m.params.selected;
    state.overlay = m.params.overlay;
    if (changedMain) state.main = [];
    if (!state.overlay) state.over = undefined;
    drawSelectors();
    save();
  } else if (msg.MetricsNotification.is(m)) {
    if (m.params.role === 'main' && m.params.runId === state.selected) state.main = m.params.points;
    else if (m.params.role === 'overlay' && m.params.runId === state.overlay) state.over = m.params.points;
    else return;
    update();
  } else if (msg.TasksNotification.is(m)) {
    if (m.params.role === 'main' && m.params.runId === state.selected) {
      state.tasks = m.params.table;
      drawTable();
    }
  } else if (msg.AdvantagesNotification.is(m)) {
    if (m.params.role === 'main' && m.params.runId === state.selected) {
      state.hist = m.params.histogram;
      drawHistogram();
    }
  } else if (msg.ViewNotification.is(m)) {
    showView(m.params.view);
  } else if (msg.EvalFilesNotification.is(m)) {
    state.evals = m.params.selected;
    evals.setFiles(m.params.files, m.params.selected);
    save();
  } else if (msg.EvalComparisonNotification.is(m)) {
    const t0 = performance.now();
    const drawn = evals.setComparison(m.params.comparison, m.params.error);
    const ms = performance.now() - t0;
    document.body.dataset.heatmapCells = String(drawn.heatmaps.reduce((a, x) => a + x.cells, 0));
    vscode.postMessage(msg.EvalRenderedNotification.make({ ms, ...drawn }));
  } else if (msg.ClearOverlayNotification.is(m)) {
    state.over = undefined;
    state.overlay = undefined;
    update();
    save();
  }
});

new ResizeObserver(() => {
  for (const c of charts) c.plot?.setSize({ width: plotWidth(c.el), height: 200 });
}).observe(grid);
// A theme change: colors are read again and the charts rebuilt.
new MutationObserver(() => {
  readTheme();
  for (const c of charts) c.shape = undefined;
  update();
  drawHistogram();
}).observe(document.body, { attributes: true, attributeFilter: ['class'] });

drawSelectors();
showView(state.view ?? 'runs');
vscode.postMessage(msg.ReadyCommand.make({}));
