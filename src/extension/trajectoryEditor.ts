// The editor side of the trajectory viewer: virtual documents (`turnwise-traj:`) holding the
// files an episode changed, built from the turns' recorded `edits` (never the user's files);
// decorations coloring each line by the advantage of the turn that last wrote it; a hover with
// that turn's command and advantage; a CodeLens per turn, and one opening its diff ("Show Diff for Turn N").
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { Trajectory } from '../core/schema';
import { blame, changedFiles, firstLineByTurn, textAt, turnsTouching } from './model/blame';
import { loadTrajectory, type TrajectoryRef, type TrajectoryScanCache } from './model/runIndex';
import {
  ADVANTAGE_STYLES,
  advantageScale,
  advantageStyle,
  formatSigned,
  turnHoverMarkdown,
  turnLensTitle,
  turnLensTooltip,
  DIFF_LENS_TITLE,
  type AdvantageStyle,
} from './model/turnView';

export const SCHEME = 'turnwise-traj';

/** What a turnwise-traj URI names: a file of a trajectory, after a turn, before it, or "now". */
export interface TrajDocQuery {
  ref: TrajectoryRef;
  path: string;
  /** 'current': follows the viewer's current turn; otherwise the state around turn `turn`. */
  view: 'current' | 'before' | 'after';
  turn?: number;
}

export const refKey = (r: Pick<TrajectoryRef, 'runDir' | 'iteration' | 'split' | 'trajId'>) =>
  `${r.runDir}|${r.iteration}|${r.split}|${r.trajId}`;

export function trajDocUri(q: TrajDocQuery): vscode.Uri {
  const p = new URLSearchParams({
    run: q.ref.runDir,
    it: String(q.ref.iteration),
    split: q.ref.split,
    traj: q.ref.trajId,
    off: String(q.ref.offset),
    len: String(q.ref.length),
    view: q.view,
  });
  if (q.turn !== undefined) p.set('turn', String(q.turn));
  // The path keeps the file's name and extension (tab title, language mode); the view part keeps
  // before/after documents of the same file apart.
  const prefix = q.view === 'current' ? '' : `/turn-${q.turn}-${q.view}`;
  return vscode.Uri.from({ scheme: SCHEME, path: `${prefix}/${q.path.replace(/^\/+/, '')}`, query: p.toString() });
}

export function parseTrajDocUri(uri: vscode.Uri): TrajDocQuery | undefined {
  if (uri.scheme !== SCHEME) return undefined;
  const p = new URLSearchParams(uri.query);
  const view = p.get('view');
  if (view !== 'current' && view !== 'before' && view !== 'after') return undefined;
  const turn = p.get('turn');
  const prefix = view === 'current' ? '' : `/turn-${turn}-${view}`;
  const filePath = uri.path.startsWith(prefix + '/') ? uri.path.slice(prefix.length + 1) : uri.path.replace(/^\//, '');
  return {
    ref: {
      runDir: p.get('run') ?? '',
      iteration: Number(p.get('it')),
      split: p.get('split') === 'heldout' ? 'heldout' : 'train',
      trajId: p.get('traj') ?? '',
      offset: Number(p.get('off')),
      length: Number(p.get('len')),
    },
    path: filePath,
    view,
    turn: turn === null ? undefined : Number(turn),
  };
}

/** Where the decorations of one document go: lines per style, and the lines of the current turn. */
export interface DocDecorations {
  upTo: number;
  byStyle: Record<AdvantageStyle, number[]>;
  current: number[];
  lineTurns: Array<number | undefined>;
}

const COLOR: Record<AdvantageStyle, string | undefined> = {
  positiveStrong: 'turnwise.advantage.positiveStrongBackground',
  positive: 'turnwise.advantage.positiveBackground',
  neutral: 'turnwise.advantage.neutralBackground',
  negative: 'turnwise.advantage.negativeBackground',
  negativeStrong: 'turnwise.advantage.negativeStrongBackground',
  unscored: undefined,
};

export class TrajectoryEditors
  implements vscode.TextDocumentContentProvider, vscode.CodeLensProvider, vscode.HoverProvider, vscode.Disposable
{
  private readonly cache = new Map<string, Promise<Trajectory>>();
  /** The viewer's trajectory and turn. */
  active: { ref: TrajectoryRef; traj: Trajectory; turn: number } | undefined;
  private readonly docChanged = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.docChanged.event;
  private readonly lensChanged = new vscode.EventEmitter<void>();
  readonly onDidChangeCodeLenses = this.lensChanged.event;
  private readonly turnChanged = new vscode.EventEmitter<number>();
  /** Fires when the current turn changes (the webview follows). */
  readonly onDidChangeTurn = this.turnChanged.event;
  private readonly types: Record<AdvantageStyle, vscode.TextEditorDecorationType>;
  private readonly currentType: vscode.TextEditorDecorationType;
  private readonly disposables: vscode.Disposable[] = [];
  /** Last decorations set per document (the extension-host tests read them). */
  readonly applied = new Map<string, DocDecorations>();

  constructor(private readonly scans: TrajectoryScanCache) {
    const make = (s: AdvantageStyle) => {
      const color = COLOR[s];
      return vscode.window.createTextEditorDecorationType({
        isWholeLine: true,
        backgroundColor: color ? new vscode.ThemeColor(color) : undefined,
        overviewRulerColor: color ? new vscode.ThemeColor(color) : undefined,
        overviewRulerLane: vscode.OverviewRulerLane.Left,
      });
    };
    this.types = Object.fromEntries(ADVANTAGE_STYLES.map((s) => [s, make(s)])) as Record<AdvantageStyle, vscode.TextEditorDecorationType>;
    this.currentType = vscode.window.createTextEditorDecorationType({
      isWholeLine: true,
      borderColor: new vscode.ThemeColor('turnwise.currentTurnBorder'),
      borderStyle: 'solid',
      borderWidth: '0 0 0 3px',
    });
    this.disposables.push(
      vscode.window.onDidChangeVisibleTextEditors(() => this.decorateVisible()),
      vscode.workspace.onDidChangeTextDocument((e) => {
        if (e.document.uri.scheme === SCHEME) this.decorateVisible();
      }),
    );
  }

  async load(ref: TrajectoryRef): Promise<Trajectory> {
    const key = refKey(ref);
    if (this.active && refKey(this.active.ref) === key) return this.active.traj;
    let p = this.cache.get(key);
    if (!p) {
      p = loadTrajectory(ref, this.scans);
      this.cache.set(key, p);
      p.catch(() => this.cache.delete(key));
      if (this.cache.size > 20) this.cache.delete(this.cache.keys().next().value!);
    }
    return p;
  }

  /** Makes `traj` the viewer's trajectory at `turn`. */
  async activate(ref: TrajectoryRef, turn?: number): Promise<Trajectory> {
    const traj = await this.load(ref);
    const first = traj.turns[0]?.index ?? 0;
    this.active = { ref, traj, turn: turn ?? first };
    this.refreshDocs();
    return traj;
  }

  /** Moves the viewer to `turn`: the "current" documents change, decorations and lenses follow. */
  async setTurn(turn: number, opts: { reveal?: boolean } = {}): Promise<void> {
    const a = this.active;
    if (!a) return;
    const indexes = a.traj.turns.map((t) => t.index);
    if (!indexes.includes(turn)) return;
    a.turn = turn;
    this.refreshDocs();
    this.turnChanged.fire(turn);
    if (opts.reveal !== false) {
      const edited = a.traj.turns.find((t) => t.index === turn)?.edits?.[0]?.path;
      const shown = this.visibleCurrentPaths();
      if (edited && !shown.includes(edited)) await this.openFile(edited);
      else if (edited) this.revealCurrentLines(edited);
    }
  }

  step(delta: 1 | -1): Promise<void> {
    const a = this.active;
    if (!a) return Promise.resolve();
    const i = a.traj.turns.findIndex((t) => t.index === a.turn);
    const next = a.traj.turns[Math.min(a.traj.turns.length - 1, Math.max(0, i + delta))];
    return this.setTurn(next.index);
  }

  private visibleCurrentPaths(): string[] {
    return vscode.window.visibleTextEditors.flatMap((e) => {
      const q = parseTrajDocUri(e.document.uri);
      return q && q.view === 'current' && this.active && refKey(q.ref) === refKey(this.active.ref) ? [q.path] : [];
    });
  }

  private refreshDocs(): void {
    for (const doc of vscode.workspace.textDocuments) {
      const q = parseTrajDocUri(doc.uri);
      if (q?.view === 'current') this.docChanged.fire(doc.uri);
    }
    this.lensChanged.fire();
    this.decorateVisible();
  }

  /** Opens `path` as it is after the current turn, in the first editor column. */
  async openFile(filePath: string, column = vscode.ViewColumn.One, preserveFocus = true): Promise<vscode.TextEditor | undefined> {
    const a = this.active;
    if (!a) return undefined;
    const uri = trajDocUri({ ref: a.ref, path: filePath, view: 'current' });
    const doc = await vscode.workspace.openTextDocument(uri);
    const editor = await vscode.window.showTextDocument(doc, { viewColumn: column, preview: true, preserveFocus });
    this.decorate(editor);
    this.revealCurrentLines(filePath);
    return editor;
  }

  private revealCurrentLines(filePath: string): void {
    for (const e of vscode.window.visibleTextEditors) {
      const q = parseTrajDocUri(e.document.uri);
      if (!q || q.path !== filePath) continue;
      const d = this.applied.get(e.document.uri.toString());
      const line = d?.current[0];
      if (line !== undefined) e.revealRange(new vscode.Range(line, 0, line, 0), vscode.TextEditorRevealType.InCenterIfOutsideViewport);
    }
  }

  async showDiff(ref: TrajectoryRef, turn: number, filePath: string): Promise<void> {
    const traj = await this.load(ref);
    const before = trajDocUri({ ref, path: filePath, view: 'before', turn });
    const after = trajDocUri({ ref, path: filePath, view: 'after', turn });
    await vscode.commands.executeCommand('vscode.diff', before, after, `${path.basename(filePath)} · turn ${turn} (${traj.trajId})`, {
      preview: true,
    });
  }

  /** Which turn a document shows the state after. */
  private upToFor(q: TrajDocQuery, traj: Trajectory): number {
    if (q.view === 'current') {
      if (this.active && refKey(this.active.ref) === refKey(q.ref)) return this.active.turn;
      return traj.turns[traj.turns.length - 1]?.index ?? 0;
    }
    return q.view === 'after' ? q.turn! : q.turn! - 1;
  }

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const q = parseTrajDocUri(uri);
    if (!q) return '';
    const traj = await this.load(q.ref);
    const text = textAt(traj, q.path, this.upToFor(q, traj), 'after');
    if (text === undefined) return `(Turnwise: the text of ${q.path} was not recorded for this turn: it was over the size cap)\n`;
    return text ?? '';
  }

  /** Decorations for a turnwise-traj document (undefined for other documents). */
  async decorationsFor(uri: vscode.Uri): Promise<DocDecorations | undefined> {
    const q = parseTrajDocUri(uri);
    if (!q) return undefined;
    const traj = await this.load(q.ref);
    const upTo = this.upToFor(q, traj);
    const b = blame(traj, q.path, upTo);
    const byStyle = Object.fromEntries(ADVANTAGE_STYLES.map((s) => [s, [] as number[]])) as Record<AdvantageStyle, number[]>;
    if (!b) return { upTo, byStyle, current: [], lineTurns: [] };
    const scale = advantageScale(traj);
    const adv = new Map(traj.turns.map((t) => [t.index, t.advantage]));
    b.lineTurns.forEach((t, line) => {
      if (t === undefined) return;
      byStyle[advantageStyle(adv.get(t), scale)].push(line);
    });
    const current = b.currentRanges.flatMap(([s, e]) => Array.from({ length: e - s }, (_, i) => s + i));
    return { upTo, byStyle, current, lineTurns: b.lineTurns };
  }

  private decorateVisible(): void {
    for (const e of vscode.window.visibleTextEditors) if (e.document.uri.scheme === SCHEME) void this.decorate(e);
  }

  private async decorate(editor: vscode.TextEditor): Promise<void> {
    const d = await this.decorationsFor(editor.document.uri);
    if (!d) return;
    const q = parseTrajDocUri(editor.document.uri)!;
    const traj = await this.load(q.ref);
    const lineCount = editor.document.lineCount;
    const range = (l: number) => new vscode.Range(l, 0, l, 0);
    // Every type is set on each update: [] clears what an earlier turn left.
    for (const s of ADVANTAGE_STYLES) editor.setDecorations(this.types[s], d.byStyle[s].filter((l) => l < lineCount).map(range));
    const turn = traj.turns.find((t) => t.index === d.upTo);
    const label = turn ? `  ◀ turn ${turn.index} · A ${formatSigned(turn.advantage)}` : '';
    editor.setDecorations(
      this.currentType,
      d.current
        .filter((l) => l < lineCount)
        .map((l, i) => ({
          range: range(l),
          renderOptions:
            i === 0
              ? { after: { contentText: label, color: new vscode.ThemeColor('editorCodeLens.foreground'), fontStyle: 'italic' } }
              : undefined,
        })),
    );
    this.applied.set(editor.document.uri.toString(), d);
  }

  async provideCodeLenses(doc: vscode.TextDocument): Promise<vscode.CodeLens[]> {
    const q = parseTrajDocUri(doc.uri);
    if (!q) return [];
    const traj = await this.load(q.ref);
    const upTo = this.upToFor(q, traj);
    const b = blame(traj, q.path, upTo);
    const first = b ? firstLineByTurn(b) : new Map<number, number>();
    const lenses: vscode.CodeLens[] = [];
    for (const turn of turnsTouching(traj, q.path)) {
      if (turn.index > upTo) continue;
      const line = Math.min(first.get(turn.index) ?? 0, Math.max(0, doc.lineCount - 1));
      const range = new vscode.Range(line, 0, line, 0);
      lenses.push(
        new vscode.CodeLens(range, {
          title: turnLensTitle(turn),
          command: 'turnwise.trajectory.goToTurn',
          arguments: [turn.index],
          tooltip: turnLensTooltip(turn),
        }),
        new vscode.CodeLens(range, {
          title: DIFF_LENS_TITLE,
          command: 'turnwise.trajectory.showDiff',
          arguments: [q.ref, turn.index, q.path],
          tooltip: `Show Diff for Turn ${turn.index}`,
        }),
      );
    }
    return lenses;
  }

  async provideHover(doc: vscode.TextDocument, pos: vscode.Position): Promise<vscode.Hover | undefined> {
    const d = await this.decorationsFor(doc.uri);
    const t = d?.lineTurns[pos.line];
    if (t === undefined) return undefined;
    const q = parseTrajDocUri(doc.uri)!;
    const traj = await this.load(q.ref);
    const turn = traj.turns.find((x) => x.index === t);
    if (!turn) return undefined;
    const md = new vscode.MarkdownString(turnHoverMarkdown(turn, traj));
    return new vscode.Hover(md, new vscode.Range(pos.line, 0, pos.line, doc.lineAt(pos.line).text.length));
  }

  /** Files the active trajectory changed. */
  files(): string[] {
    return this.active ? changedFiles(this.active.traj) : [];
  }

  dispose(): void {
    for (const t of Object.values(this.types)) t.dispose();
    this.currentType.dispose();
    this.docChanged.dispose();
    this.lensChanged.dispose();
    this.turnChanged.dispose();
    for (const d of this.disposables) d.dispose();
  }
}
