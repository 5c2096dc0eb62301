// The reward panel's evaluations view: evaluation results files to choose from, the pass curves
// (pass@k against k per turn budget T, every model on one chart, the first file's model dashed as
// the base) with the line that says whether RL sharpened or enlarged, a PASS@(k,T) heatmap per
// model (k sampled episodes down, a turn budget T across; each cell the probability that one of k
// episodes resolves a task within T actions) with its colour scale, the models' table (resolved
// rate, pass rate, turns, format errors, tokens and wall time per episode) and the per-task cells.
// All text from the files goes in as text nodes (no innerHTML); colors through the CSSOM.
import { passChart, passChartNodes, type PassChart, type SvgNode } from '../../../eval/pass-curves';
import { h } from '../shared/vscodeApi';
import type { EvalComparison, EvalFileEntry, PassAtKTTable } from './protocol';

type Summary = NonNullable<EvalComparison['models'][number]['greedy']>;

export interface EvaluationsView {
  el: HTMLElement;
  setFiles(files: EvalFileEntry[], selected: string[]): void;
  /** Draws the comparison; returns what was drawn. */
  setComparison(
    c: EvalComparison | null,
    error?: string,
  ): {
    models: number;
    rows: number;
    heatmaps: { label: string; ks: number; ts: number; cells: number; max: number | null }[];
    curves: number;
    verdicts: string[];
  };
}

const SVG = 'http://www.w3.org/2000/svg';

/** An SVG element built from its description (eval/pass-curves.ts SvgNode); text through textContent only. */
function svgElement(n: SvgNode): SVGElement {
  const el = document.createElementNS(SVG, n.tag);
  for (const [k, v] of Object.entries(n.attrs)) el.setAttribute(k, String(v));
  if (n.text !== undefined) el.textContent = n.text;
  for (const c of n.children ?? []) el.append(svgElement(c));
  return el;
}

/** The pass curves (eval/pass-curves.ts passChart) as an SVG element, coloured by the page's theme where it has no colour of its own. */
function chartSvg(c: PassChart): SVGElement {
  return svgElement({
    tag: 'svg',
    attrs: { id: 'pass-curves', width: c.width, height: c.height, viewBox: `0 0 ${c.width} ${c.height}`, role: 'img' },
    children: [{ tag: 'title', attrs: {}, text: 'pass@k against k, one curve per turn budget T and model' }, ...passChartNodes(c, 'page')],
  });
}

const num = (v: number | null | undefined, d = 3) => (typeof v === 'number' && Number.isFinite(v) ? v.toFixed(d) : '—');
const pctOf = (v: number | null | undefined) => (typeof v === 'number' && Number.isFinite(v) ? `${(v * 100).toFixed(1)}%` : '—');
const heat = (v: number) =>
  `background:color-mix(in srgb, var(--tw-pos) ${Math.round(8 + 80 * Math.max(0, Math.min(1, v)))}%, transparent)`;

export function evaluationsView(o: { onSelect: (files: string[]) => void; onAdd: () => void }): EvaluationsView {
  const list = h('div', { class: 'eval-files', id: 'eval-files' });
  const message = h('div', { class: 'muted', id: 'eval-message' });
  const notes = h('div', { class: 'eval-notes', id: 'eval-notes' });
  const heatmaps = h('div', { class: 'heatmaps', id: 'heatmaps' });
  const curves = h('div', { class: 'curves', id: 'curves' });
  const verdicts = h('div', { class: 'verdicts', id: 'verdicts' });
  // The heatmap's colour scale: the cells' colour at 0, 25, 50, 75 and 100%.
  const scale = h(
    'div',
    { class: 'hm-scale', id: 'hm-scale' },
    h('span', { class: 'muted' }, 'scale'),
    ...[0, 0.25, 0.5, 0.75, 1].map((v) => h('span', { class: 'hm-swatch', style: heat(v), 'data-value': v }, `${v * 100}%`)),
  );
  const table = h('div', { class: 'table-wrap', id: 'eval-table' });
  const tasks = h('div', { class: 'table-wrap', id: 'eval-tasks' });
  const el = h(
    'div',
    { class: 'evals', id: 'evals' },
    h(
      'section',
      { class: 'card' },
      h('h2', {}, 'Evaluation results files'),
      list,
      h('button', { id: 'eval-add', onclick: () => o.onAdd() }, 'Add results file…'),
    ),
    message,
    notes,
    h(
      'section',
      { class: 'card', id: 'eval-curves' },
      h('h2', {}, 'Pass curves: pass@k against k for each turn budget T (the first file dashed, as the base)'),
      verdicts,
      curves,
    ),
    h(
      'section',
      { class: 'card', id: 'eval-heatmaps' },
      h('h2', {}, 'PASS@(k,T): one of k sampled episodes resolves the task within T actions'),
      scale,
      heatmaps,
    ),
    h('section', { class: 'card', id: 'eval-models' }, h('h2', {}, 'Models, per episode'), table),
    h('section', { class: 'card', id: 'eval-per-task' }, h('h2', {}, 'Per task'), tasks),
  );

  let checked: string[] = [];
  function setFiles(files: EvalFileEntry[], selected: string[]): void {
    checked = [...selected];
    if (files.length === 0) {
      list.replaceChildren(h('div', { class: 'muted' }, 'No results files in .turnwise/evals yet.'));
      return;
    }
    list.replaceChildren(
      ...files.map((f) => {
        const box = h('input', {
          type: 'checkbox',
          'data-file': f.file,
          checked: selected.includes(f.file),
          onchange: (e: Event) => {
            const on = (e.target as HTMLInputElement).checked;
            checked = on ? [...checked.filter((x) => x !== f.file), f.file] : checked.filter((x) => x !== f.file);
            o.onSelect(checked);
          },
        });
        const what = [
          f.kind === 'episodes' ? 'episodes file' : `${f.tasks} task(s)`,
          f.samples ? `${f.samples} sample(s) per task` : 'greedy only',
          f.seed !== null ? `seed ${f.seed}` : '',
          f.createdAt ? f.createdAt.replace('T', ' ').slice(0, 16) : '',
          f.complete ? '' : 'stopped early',
        ]
          .filter(Boolean)
          .join(' · ');
        return h(
          'label',
          { class: 'eval-file', title: f.file },
          box,
          h('span', { class: 'eval-label' }, f.label),
          h('span', { class: 'muted' }, ` ${f.name} — ${what}`),
        );
      }),
    );
  }

  function heatmap(label: string, p: PassAtKTTable | null, maxTurns: number) {
    if (!p || Object.keys(p).length === 0) {
      return {
        el: h(
          'div',
          { class: 'heatmap-card' },
          h('h3', {}, label),
          h('div', { class: 'muted' }, 'no sampled episodes: evaluate with samples (--samples K) for PASS@(k,T)'),
        ),
        ks: 0,
        ts: 0,
        cells: 0,
        max: null,
      };
    }
    const ks = Object.keys(p)
      .map(Number)
      .sort((a, b) => a - b);
    const ts = Object.keys(p[String(ks[0])])
      .map(Number)
      .sort((a, b) => a - b);
    let cells = 0;
    let max: number | null = null;
    const rows = ks.map((k) =>
      h(
        'tr',
        {},
        h('th', { scope: 'row' }, `k=${k}`),
        ...ts.map((T) => {
          const v = p[String(k)]?.[String(T)];
          if (typeof v !== 'number') return h('td', { class: 'hm-cell empty' }, '');
          cells++;
          max = max === null ? v : Math.max(max, v);
          return h(
            'td',
            {
              class: 'hm-cell',
              'data-k': k,
              'data-t': T,
              'data-value': v.toFixed(4),
              title: `k=${k}, T=${T}: ${pctOf(v)}`,
              style: heat(v),
            },
            String(Math.round(v * 100)),
          );
        }),
      ),
    );
    const el = h(
      'div',
      { class: 'heatmap-card', 'data-model': label },
      h('h3', {}, label),
      h(
        'table',
        { class: 'heatmap' },
        h('thead', {}, h('tr', {}, h('th', {}, 'k \\ T'), ...ts.map((T) => h('th', {}, String(T))))),
        h('tbody', {}, ...rows),
      ),
      h(
        'div',
        { class: 'muted' },
        `T: actions, up to the turn limit ${maxTurns}; k: sampled episodes, up to the fewest any task has; values in %`,
      ),
    );
    return { el, ks: ks.length, ts: ts.length, cells, max };
  }

  function modelsTable(c: EvalComparison): { el: HTMLElement; rows: number } {
    const head = [
      'model',
      'kind',
      'episodes',
      'resolved',
      'pass rate',
      'turns',
      'format errors',
      'format error rate',
      'tokens',
      'wall s',
      'failed',
    ];
    const rows: HTMLElement[] = [];
    for (const kind of ['greedy', 'sampled'] as const) {
      for (const m of c.models) {
        const s: Summary | null = m[kind];
        if (!s) continue;
        rows.push(
          h(
            'tr',
            { 'data-model': m.label, 'data-kind': kind },
            h('th', { class: 'task', title: m.file }, m.label),
            h('td', {}, kind),
            h('td', {}, String(s.episodes)),
            h('td', { class: 'rate' }, pctOf(s.resolved)),
            h('td', {}, num(s.pass_rate, 2)),
            h('td', {}, num(s['turns/mean'], 1)),
            h('td', {}, num(s['format_errors/mean'], 2)),
            h('td', {}, pctOf(s.format_error_rate)),
            h('td', {}, num(s['tokens/mean'], 0)),
            h('td', {}, num(s['wall_s/mean'], 1)),
            h('td', {}, String(s.failed)),
          ),
        );
      }
    }
    return {
      el: h('table', { id: 'eval-models-table' }, h('thead', {}, h('tr', {}, ...head.map((x) => h('th', {}, x)))), h('tbody', {}, ...rows)),
      rows: rows.length,
    };
  }

  function tasksTable(c: EvalComparison): HTMLElement {
    return h(
      'table',
      {},
      h('thead', {}, h('tr', {}, h('th', {}, 'task'), ...c.models.map((m) => h('th', { title: m.file }, m.label)))),
      h(
        'tbody',
        {},
        ...c.per_task.map((t) =>
          h(
            'tr',
            {},
            h('th', { class: 'task', title: t.taskId }, t.taskId),
            ...t.models.map((cell) => {
              const g = cell.greedy;
              const mark = g ? (g.failed ? '!' : g.resolved ? '✓' : '✗') : '';
              const text = [
                g ? `${mark} ${num(g.pass_rate, 2)}` : '',
                cell.sampledEpisodes ? `${cell.sampledResolved}/${cell.sampledEpisodes}` : '',
              ]
                .filter(Boolean)
                .join('  ');
              const share = cell.sampledEpisodes ? cell.sampledResolved / cell.sampledEpisodes : (g?.resolved ?? null);
              return h(
                'td',
                {
                  class: 'rate',
                  style: share === null ? undefined : heat(share),
                  title: 'greedy: resolved and pass rate; sampled: resolved of episodes',
                },
                text,
              );
            }),
          ),
        ),
      ),
    );
  }

  function setComparison(c: EvalComparison | null, error?: string) {
    message.textContent = error ?? '';
    message.hidden = !error;
    if (!c) {
      notes.replaceChildren();
      heatmaps.replaceChildren();
      curves.replaceChildren();
      verdicts.replaceChildren();
      table.replaceChildren();
      tasks.replaceChildren();
      return { models: 0, rows: 0, heatmaps: [], curves: 0, verdicts: [] };
    }
    notes.replaceChildren(
      h(
        'div',
        {},
        `${c.models.length} model(s) on ${c.tasks.length} task(s): ${c.episodes.greedy} greedy and ${c.episodes.sampled} sampled episode(s) each${c.intersection ? ' (the episodes all chosen files share)' : ''}`,
      ),
      ...c.notes.map((n) => h('div', { class: c.intersection ? 'warn' : 'muted' }, n)),
    );
    const maps = c.models.map((m) => ({ label: m.label, ...heatmap(m.label, m.pass_at_k_t, m.maxTurns) }));
    heatmaps.replaceChildren(...maps.map((m) => m.el));
    const chart = passChart(c.models.map((m) => ({ label: m.label, p: m.pass_at_k_t })));
    curves.replaceChildren(
      chart.series.length
        ? chartSvg(chart)
        : h('div', { class: 'muted' }, 'no sampled episodes: evaluate with samples (--samples K) to draw pass curves'),
    );
    const lines = c.boundary.map((b) => `${b.model} against ${b.base}: ${b.line}`);
    verdicts.replaceChildren(...c.boundary.map((b, i) => h('div', { class: `verdict ${b.kind}`, 'data-kind': b.kind }, lines[i])));
    const t = modelsTable(c);
    table.replaceChildren(t.el);
    tasks.replaceChildren(tasksTable(c));
    return {
      models: c.models.length,
      rows: t.rows,
      heatmaps: maps.map(({ label, ks, ts, cells, max }) => ({ label, ks, ts, cells, max })),
      curves: chart.series.length,
      verdicts: lines,
    };
  }

  return { el, setFiles, setComparison };
}
