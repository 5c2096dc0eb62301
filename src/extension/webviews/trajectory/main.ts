// Trajectory viewer page: a timeline of the turns; j/k or ↓/↑ step through them, d opens the
// diff of the current turn. The host keeps the editor in step with the current turn. A chat
// model's turn shows its whole reply above the command it ran, a format error why nothing ran.
// Everything the model wrote goes in as text nodes (h), never as markup.
import './style.css';
import { h, vscodeApi } from '../shared/vscodeApi';
import * as msg from './protocol';
import type { TrajectoryPanelState, TrajectoryView, TurnRow } from './protocol';
import { FAILURE_LABEL_MEANING, type FailureLabel } from '../../../agent/diagnosis';

const vscode = vscodeApi<TrajectoryPanelState>();
const app = document.getElementById('app')!;
let view: TrajectoryView | undefined;
let current = 0;
const cards = new Map<number, HTMLElement>();

const signed = (x: number | null | undefined, d = 3) =>
  typeof x === 'number' && Number.isFinite(x) ? `${x >= 0 ? '+' : '−'}${Math.abs(x).toFixed(d)}` : '–';
const pct = (x: number | null | undefined) => (typeof x === 'number' && Number.isFinite(x) ? `${Math.round(x * 100)}%` : '–');

function chip(label: string, value: string, cls = ''): HTMLElement {
  return h('span', { class: `chip ${cls}` }, h('span', { class: 'chip-label' }, label), ' ', h('span', { class: 'chip-value' }, value));
}

const FORMAT_LABEL = {
  chat: "chat: the model's own template, one ```bash block per reply",
  compact: "compact: turnwise-tiny's task/agent/obs segments",
} as const;

/** The reply (chat), the command that ran, or why nothing ran. */
function actionParts(t: TurnRow): HTMLElement[] {
  const notRun = t.formatError ? h('div', { class: 'format-error not-run' }, `not run: ${t.formatError}`) : undefined;
  if (t.reply === undefined) return [h('pre', { class: 'action' }, h('code', {}, t.action)), ...(notRun ? [notRun] : [])];
  const reply = [h('div', { class: 'part-label muted' }, 'reply'), h('pre', { class: 'reply' }, t.reply)];
  if (notRun) return [...reply, notRun];
  return [
    ...reply,
    h('div', { class: 'part-label muted' }, t.action === 'submit' ? 'submits' : 'runs'),
    h('pre', { class: 'action' }, h('code', {}, t.action)),
  ];
}

function turnCard(t: TurnRow): HTMLElement {
  const comps = Object.entries(t.advantageComponents ?? {});
  const card = h(
    'section',
    { class: `turn adv-${t.style}`, 'data-turn': t.index, tabindex: -1, onclick: () => select(t.index) },
    h(
      'header',
      {},
      h('span', { class: 'turn-index' }, `Turn ${t.index}`),
      h('span', { class: `adv-badge adv-${t.style}`, title: 'per-turn advantage' }, `A ${signed(t.advantage)}`),
      h('span', { class: `exit ${t.exitCode === 0 ? 'ok' : 'bad'}` }, t.formatError ? 'format error' : `exit ${t.exitCode ?? '–'}`),
      t.cached
        ? h(
            'span',
            {
              class: 'muted replayed',
              title: 'the same read-only command had run on an identical workspace in this run; its output was replayed',
            },
            'replayed',
          )
        : h('span', { class: 'muted duration' }, `${t.durationMs} ms`),
      t.inherited
        ? h(
            'span',
            {
              class: 'muted inherited',
              title:
                'taken from the parent episode of this branch: the command ran again here, the policy did not write it here, and it is trained in the parent',
            },
            'from parent',
          )
        : undefined,
    ),
    ...actionParts(t),
    t.labels?.length
      ? h(
          'div',
          { class: 'labels' },
          ...t.labels.map((l) =>
            h('span', { class: 'chip neg failure-label', 'data-label': l, title: FAILURE_LABEL_MEANING[l as FailureLabel] ?? l }, l),
          ),
        )
      : undefined,
    comps.length
      ? h('div', { class: 'components' }, ...comps.map(([k, v]) => chip(k, signed(v), v > 0 ? 'pos' : v < 0 ? 'neg' : '')))
      : undefined,
    t.intentSignature?.length
      ? h(
          'div',
          { class: 'sig' },
          h('span', { class: 'muted' }, 'intent '),
          ...t.intentSignature.map((s) => h('code', { class: 'token' }, s)),
        )
      : undefined,
    t.editSignature?.length
      ? h('div', { class: 'sig' }, h('span', { class: 'muted' }, 'edits '), ...t.editSignature.map((s) => h('code', { class: 'token' }, s)))
      : undefined,
    t.files.length
      ? h(
          'div',
          { class: 'files' },
          ...t.files.map((f) =>
            h(
              'span',
              { class: 'file' },
              h(
                'a',
                {
                  href: '#',
                  class: 'open-file',
                  title: `open ${f} as it is after the current turn`,
                  onclick: (e: Event) => (
                    e.preventDefault(),
                    e.stopPropagation(),
                    vscode.postMessage(msg.OpenFileCommand.make({ path: f }))
                  ),
                },
                f,
              ),
              h(
                'button',
                {
                  class: 'diff',
                  title: `Show Diff for Turn ${t.index}`,
                  onclick: (e: Event) => (e.stopPropagation(), vscode.postMessage(msg.ShowDiffCommand.make({ index: t.index, path: f }))),
                },
                'Diff',
              ),
            ),
          ),
        )
      : undefined,
    h(
      'details',
      { class: 'observation' },
      h('summary', {}, `observation (${t.observation.split('\n').length} lines)`),
      h('pre', {}, t.observation),
    ),
  );
  return card;
}

function render(): void {
  if (!view) return;
  const r = view.reward;
  cards.clear();
  const turns = view.turns.map((t) => {
    const c = turnCard(t);
    cards.set(t.index, c);
    return c;
  });
  app.replaceChildren(
    h(
      'header',
      { class: 'summary' },
      h('h1', {}, view.title),
      h('div', { class: 'muted' }, `${view.split ?? 'train'} · iteration ${view.iteration ?? '?'} · checkpoint ${view.checkpoint}`),
      view.branch
        ? h(
            'div',
            { class: 'muted branch', id: 'branch' },
            `a branch of ${view.branch.parent}: its first ${view.branch.at} turn(s) taken from it, ${view.branch.shared} with the same observation`,
          )
        : undefined,
      h(
        'div',
        { class: 'chips' },
        chip('reward', signed(r.reward), (r.reward ?? 0) >= 0 ? 'pos' : 'neg'),
        chip('pass rate', pct(r.passRate)),
        chip('resolved', r.resolved ? 'yes' : 'no', r.resolved ? 'pos' : ''),
        chip('turns', String(r.turns)),
        view.actionFormat ? chip('format', FORMAT_LABEL[view.actionFormat], 'format') : undefined,
        view.tests ? chip('tests', `${view.tests.passed} passed · ${view.tests.failed} failed`) : undefined,
        r.efficiencyPenalty ? chip('efficiency penalty', signed(-r.efficiencyPenalty)) : undefined,
        r.formatPenalty ? chip('format penalty', signed(-r.formatPenalty), 'neg') : undefined,
        r.repeatPenalty ? chip(`repeated turns: ${r.repeats}`, signed(-r.repeatPenalty), 'neg') : undefined,
        r.testsEdited ? chip('tests edited', 'undone before scoring') : undefined,
        r.tampered !== undefined ? chip('tampered', 'reward 0', 'neg') : undefined,
      ),
      r.tampered !== undefined
        ? h('div', { class: 'format-error tampered' }, `tampered with the tests, so the reward is 0:\n${r.tampered}`)
        : undefined,
      view.failure ? h('div', { class: 'format-error' }, `unscored: ${view.failure}`) : undefined,
      h('div', { class: 'hint muted' }, 'j/k or ↓/↑: next/previous turn · d: diff of the turn · o: observation'),
    ),
    h('main', { class: 'timeline', role: 'list' }, ...turns),
  );
  markCurrent(false);
}

function markCurrent(scroll = true): void {
  for (const [i, c] of cards) {
    const on = i === current;
    c.classList.toggle('current', on);
    c.setAttribute('aria-current', on ? 'step' : 'false');
    const d = c.querySelector('details');
    if (d && on) d.open = true;
  }
  const el = cards.get(current);
  if (el && scroll) el.scrollIntoView({ block: 'nearest' });
  document.body.dataset.currentTurn = String(current);
}

function select(index: number): void {
  if (!view || !view.turns.some((t) => t.index === index)) return;
  current = index;
  markCurrent();
  const s = vscode.getState() ?? {};
  vscode.setState({ ...s, turn: index });
  vscode.postMessage(msg.SelectTurnCommand.make({ index }));
}

function step(delta: number): void {
  if (!view) return;
  const i = view.turns.findIndex((t) => t.index === current);
  const next = view.turns[Math.max(0, Math.min(view.turns.length - 1, i + delta))];
  if (next) select(next.index);
}

window.addEventListener('keydown', (e) => {
  if (e.altKey || e.ctrlKey || e.metaKey) return;
  if (e.key === 'ArrowDown' || e.key === 'j' || e.key === 'n') step(1);
  else if (e.key === 'ArrowUp' || e.key === 'k' || e.key === 'p') step(-1);
  else if (e.key === 'Home') step(-1e9);
  else if (e.key === 'End') step(1e9);
  else if (e.key === 'd') {
    const t = view?.turns.find((x) => x.index === current);
    if (t?.files[0]) vscode.postMessage(msg.ShowDiffCommand.make({ index: t.index, path: t.files[0] }));
    else return;
  } else if (e.key === 'o') {
    const d = cards.get(current)?.querySelector('details');
    if (d) d.open = !d.open;
  } else return;
  e.preventDefault();
});

window.addEventListener('message', (e: MessageEvent) => {
  const m = e.data as unknown;
  if (msg.ShowTrajectoryNotification.is(m)) {
    view = m.params.view;
    current = m.params.current;
    vscode.setState(m.params.state);
    render();
    cards.get(current)?.scrollIntoView({ block: 'nearest' });
  } else if (msg.CurrentTurnNotification.is(m)) {
    current = m.params.index;
    vscode.setState({ ...(vscode.getState() ?? {}), turn: current });
    markCurrent();
  }
});

app.textContent = 'Loading trajectory…';
vscode.postMessage(msg.ReadyCommand.make({}));
