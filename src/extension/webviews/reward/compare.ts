// The reward panel's evaluations view: evaluation results files to choose from, a PASS@(k,T)
// heatmap per model (k sampled episodes down, a turn budget T across; each cell the probability
// that one of k episodes resolves a task within T actions), the models' table (resolved rate,
// pass rate, turns, format errors, tokens and wall time per episode) and the per-task cells. All
// text from the files goes in as text nodes (no innerHTML); colors through the CSSOM.
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
  ): { models: number; rows: number; heatmaps: { label: string; ks: number; ts: number; cells: number; max: number | null }[] };
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
      { class: 'card', id: 'eval-heatmaps' },
      h('h2', {}, 'PASS@(k,T): one of k sampled episodes resolves the task within T actions'),
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
      table.replaceChildren();
      tasks.replaceChildren();
      return { models: 0, rows: 0, heatmaps: [] };
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
    const t = modelsTable(c);
    table.replaceChildren(t.el);
    tasks.replaceChildren(tasksTable(c));
    return {
      models: c.models.length,
      rows: t.rows,
      heatmaps: maps.map(({ label, ks, ts, cells, max }) => ({ label, ks, ts, cells, max })),
    };
  }

  return { el, setFiles, setComparison };
}
