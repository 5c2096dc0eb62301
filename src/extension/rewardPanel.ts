// The test-pass reward panel: uPlot charts of a run's metrics that update as iterations
// finish, a per-task pass-rate table, the advantage distribution by component, switching
// between runs and overlaying a second one; and a view comparing evaluation results files
// (`turnwise eval --out`, Evaluate Policy): a PASS@(k,T) heatmap per model and a table of their
// rates, turns, format errors, tokens and wall time. Posts nothing before the page says it is
// ready; restored after a reload from the state the page keeps.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { listIterations, readMetrics, summarizeRun, type TrajectoryScanCache } from './model/runIndex';
import { advantageHistogram, taskTable, toPoints } from './model/rewardData';
import { readTrajectoryAt } from './model/trajScan';
import type { Trajectory } from '../core/schema';
import { loadWebviewApp, webviewPanelOptions } from './webviewPanel';
import { services } from './lazy';
import { comparisonView, listEvalFiles } from './model/evalFiles';
import * as msg from './webviews/reward/protocol';
import type { PanelView, RewardPanelState, RunRole } from './webviews/reward/protocol';

export const REWARD_VIEW_TYPE = 'turnwise.rewardPanel';

/** What the evaluations view reports it drew. */
type EvalRender = Parameters<typeof msg.EvalRenderedNotification.make>[0];
/** Trajectories read for the advantage histogram (the latest iteration's first ones). */
const HISTOGRAM_TRAJECTORIES = 2000;

export interface RunLocator {
  /** Run directories of the workspace, newest first. */
  runDirs(): string[];
}

export class RewardPanel implements vscode.Disposable {
  private static current: RewardPanel | undefined;
  private ready = false;
  private state: RewardPanelState = {};
  private readonly disposables: vscode.Disposable[] = [];
  private watcher: vscode.FileSystemWatcher | undefined;
  private pending: NodeJS.Timeout | undefined;
  /** Last render time the page measured (extension-host tests and the bench read it). */
  lastRender: { ms: number; iterations: number; charts: number; points: number } | undefined;
  private readonly rendered = new vscode.EventEmitter<{ ms: number; iterations: number; charts: number; points: number }>();
  readonly onDidRender = this.rendered.event;
  /** What the evaluations view last drew (its heatmaps' cells; extension-host tests read it). */
  lastEvalRender: EvalRender | undefined;
  private readonly evalRendered = new vscode.EventEmitter<EvalRender>();
  readonly onDidRenderEvaluations = this.evalRendered.event;
  /** Results files added from elsewhere than .turnwise/evals (kept while the panel lives). */
  private readonly extraEvals = new Set<string>();

  static get instance(): RewardPanel | undefined {
    return RewardPanel.current;
  }

  static show(extensionUri: vscode.Uri, runs: RunLocator, scans: TrajectoryScanCache, runId?: string): RewardPanel {
    let p = RewardPanel.current;
    if (!p) {
      const panel = vscode.window.createWebviewPanel(
        REWARD_VIEW_TYPE,
        'Turnwise Rewards',
        vscode.ViewColumn.Active,
        webviewPanelOptions(extensionUri),
      );
      p = new RewardPanel(panel, extensionUri, runs, scans, {});
    } else p.panel.reveal();
    if (runId) p.select(runId);
    else if (!p.state.selected) p.select(path.basename(runs.runDirs()[0] ?? ''));
    return p;
  }

  /** Opens the panel on the evaluations view, with `files` chosen (default: those chosen before, else the newest two). */
  static showEvaluations(extensionUri: vscode.Uri, runs: RunLocator, scans: TrajectoryScanCache, files?: string[]): RewardPanel {
    const p = RewardPanel.show(extensionUri, runs, scans);
    p.showView('evals', files);
    return p;
  }

  static revive(
    panel: vscode.WebviewPanel,
    extensionUri: vscode.Uri,
    runs: RunLocator,
    scans: TrajectoryScanCache,
    state: RewardPanelState | undefined,
  ): void {
    panel.webview.options = webviewPanelOptions(extensionUri);
    new RewardPanel(panel, extensionUri, runs, scans, state ?? {});
  }

  private constructor(
    readonly panel: vscode.WebviewPanel,
    extensionUri: vscode.Uri,
    private readonly runs: RunLocator,
    private readonly scans: TrajectoryScanCache,
    state: RewardPanelState,
  ) {
    RewardPanel.current = this;
    this.state = { ...state };
    loadWebviewApp(panel, extensionUri, 'reward', 'Turnwise Rewards');
    for (const f of this.state.evals ?? []) this.extraEvals.add(f);
    this.disposables.push(
      panel.webview.onDidReceiveMessage((m) => this.onMessage(m)),
      panel.onDidDispose(() => this.dispose()),
      this.rendered,
      this.evalRendered,
    );
    this.watch();
  }

  private dirOf(runId: string | undefined): string | undefined {
    if (!runId) return undefined;
    return this.runs.runDirs().find((d) => path.basename(d) === runId);
  }

  /** Live updates: metrics.jsonl of any run changes → the shown runs are sent again. */
  private watch(): void {
    this.watcher = vscode.workspace.createFileSystemWatcher('**/.turnwise/runs/*/{metrics.jsonl,status.json}');
    const on = (uri: vscode.Uri) => {
      const runId = path.basename(path.dirname(uri.fsPath));
      if (runId !== this.state.selected && runId !== this.state.overlay) {
        this.scheduleSend(['list']);
        return;
      }
      this.scheduleSend(['list', 'data']);
    };
    this.watcher.onDidChange(on);
    this.watcher.onDidCreate(on);
    this.disposables.push(this.watcher);
    // A results file written or removed: the evaluations list again.
    const evals = vscode.workspace.createFileSystemWatcher('**/.turnwise/evals/*.jsonl');
    const again = () => this.state.view === 'evals' && this.scheduleSend(['evals']);
    evals.onDidChange(again);
    evals.onDidCreate(again);
    evals.onDidDelete(again);
    this.disposables.push(evals);
  }

  private scheduled = new Set<string>();
  private scheduleSend(what: string[]): void {
    for (const w of what) this.scheduled.add(w);
    if (this.pending) return;
    this.pending = setTimeout(() => {
      this.pending = undefined;
      const w = new Set(this.scheduled);
      this.scheduled.clear();
      if (w.has('list')) this.sendRuns();
      if (w.has('data')) void this.sendAll();
      if (w.has('evals')) this.sendEvals();
    }, 150);
  }

  get view(): PanelView {
    return this.state.view ?? 'runs';
  }

  /** Switches the panel to `view`; for the evaluations view, `files` become the chosen ones. */
  showView(view: PanelView, files?: string[]): void {
    this.state.view = view;
    if (files) {
      for (const f of files) this.extraEvals.add(path.resolve(f));
      this.state.evals = files.map((f) => path.resolve(f));
    }
    if (!this.ready) return;
    void this.panel.webview.postMessage(msg.ViewNotification.make({ view }));
    if (view === 'evals') this.sendEvals();
  }

  /** Chooses the results files to compare (absolute paths). */
  selectEvaluations(files: string[]): void {
    this.state.evals = files.map((f) => path.resolve(f));
    if (this.ready) this.sendEvals();
  }

  get selectedEvaluations(): string[] {
    return [...(this.state.evals ?? [])];
  }

  private roots(): string[] {
    return (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === 'file').map((f) => f.uri.fsPath);
  }

  /** The results files, then the comparison of the chosen ones. */
  private sendEvals(): void {
    const files = listEvalFiles(this.roots(), [...this.extraEvals]);
    const known = new Set(files.map((f) => f.file));
    // The newest two, the first time: the comparison shows something at once.
    if (this.state.evals === undefined)
      this.state.evals = files
        .filter((f) => f.kind !== 'episodes')
        .slice(0, 2)
        .map((f) => f.file);
    const selected = this.state.evals.filter((f) => known.has(f));
    void this.panel.webview.postMessage(msg.EvalFilesNotification.make({ files, selected }));
    if (selected.length === 0) {
      void this.panel.webview.postMessage(
        msg.EvalComparisonNotification.make({
          comparison: null,
          error: files.length
            ? 'Choose one or more results files to compare.'
            : 'No evaluation results yet: run "Turnwise: Evaluate Policy" (or `turnwise eval --out FILE`), or add a results file.',
        }),
      );
      return;
    }
    try {
      // Files of other tasks or seeds are compared on the episodes they share; the notes say so.
      const report = services().evalReport(selected, { intersect: true });
      void this.panel.webview.postMessage(msg.EvalComparisonNotification.make({ comparison: comparisonView(report) }));
    } catch (e) {
      void this.panel.webview.postMessage(
        msg.EvalComparisonNotification.make({ comparison: null, error: e instanceof Error ? e.message : String(e) }),
      );
    }
  }

  private async addEvaluations(): Promise<void> {
    const picked = await vscode.window.showOpenDialog({
      title: 'Compare evaluation results files',
      canSelectMany: true,
      filters: { 'Evaluation results': ['jsonl'] },
      defaultUri: this.roots()[0] ? vscode.Uri.file(this.roots()[0]) : undefined,
    });
    if (!picked?.length) return;
    const files = picked.map((u) => u.fsPath);
    for (const f of files) this.extraEvals.add(path.resolve(f));
    this.selectEvaluations([...new Set([...(this.state.evals ?? []), ...files.map((f) => path.resolve(f))])]);
  }

  /** Shows `runId` (keeps the overlay unless it is the same run). */
  select(runId: string): void {
    this.state.selected = runId || undefined;
    if (this.state.overlay === runId) this.state.overlay = undefined;
    if (this.ready) {
      this.sendRuns();
      void this.sendAll();
    }
  }

  overlay(runId: string | null): void {
    this.state.overlay = runId ?? undefined;
    if (!this.ready) return;
    this.sendRuns();
    if (runId) void this.sendRun(runId, 'overlay');
    else void this.panel.webview.postMessage(msg.ClearOverlayNotification.make({}));
  }

  get selected(): string | undefined {
    return this.state.selected;
  }

  private sendRuns(): void {
    const runs = this.runs.runDirs().map((d) => {
      const s = summarizeRun(d);
      return {
        runId: s.runId,
        state: s.state,
        estimator: s.estimator,
        iterations: s.iterations,
        ...(s.model ? { model: s.model.label, modelDetails: s.model.details } : {}),
      };
    });
    if (!this.state.selected && runs[0]) this.state.selected = runs[0].runId;
    void this.panel.webview.postMessage(msg.RunsNotification.make({ runs, selected: this.state.selected, overlay: this.state.overlay }));
  }

  private async sendAll(): Promise<void> {
    if (this.state.selected) await this.sendRun(this.state.selected, 'main');
    if (this.state.overlay) await this.sendRun(this.state.overlay, 'overlay');
  }

  private async sendRun(runId: string, role: RunRole): Promise<void> {
    const dir = this.dirOf(runId);
    if (!dir) return;
    const post = (m: unknown) => this.panel.webview.postMessage(m);
    await post(msg.MetricsNotification.make({ runId, role, points: toPoints(readMetrics(dir)) }));
    // The table and histogram read trajectory files: after the charts, so those show first.
    const its = listIterations(dir);
    const byIteration: Array<Parameters<typeof taskTable>[0][number]> = [];
    for (const it of its) {
      if (it.trainFile)
        byIteration.push({ iteration: it.iteration, split: 'train', summaries: (await this.scans.scan(it.trainFile)).summaries });
      if (it.heldoutFile)
        byIteration.push({ iteration: it.iteration, split: 'heldout', summaries: (await this.scans.scan(it.heldoutFile)).summaries });
    }
    await post(msg.TasksNotification.make({ runId, role, table: taskTable(byIteration) }));
    await post(msg.AdvantagesNotification.make({ runId, role, histogram: await this.histogram(its) }));
  }

  private async histogram(its: ReturnType<typeof listIterations>): Promise<ReturnType<typeof advantageHistogram>> {
    for (const it of [...its].reverse()) {
      if (!it.trainFile) continue;
      const scan = await this.scans.scan(it.trainFile);
      const trajs: Trajectory[] = [];
      for (const s of scan.summaries.slice(0, HISTOGRAM_TRAJECTORIES)) {
        try {
          trajs.push(await readTrajectoryAt(it.trainFile, s.offset, s.length));
        } catch {
          // a line rewritten since the scan: skipped
        }
      }
      const h = advantageHistogram(trajs, it.iteration);
      if (h) return h;
    }
    return null;
  }

  private onMessage(m: unknown): void {
    if (msg.ReadyCommand.is(m)) {
      this.ready = true;
      this.sendRuns();
      void this.sendAll();
      if (this.state.view === 'evals') this.showView('evals');
    } else if (msg.ShowViewCommand.is(m)) this.showView(m.params.view);
    else if (msg.SelectEvalsCommand.is(m)) this.selectEvaluations(m.params.files);
    else if (msg.AddEvalFilesCommand.is(m)) void this.addEvaluations();
    else if (msg.EvalRenderedNotification.is(m)) {
      this.lastEvalRender = m.params;
      this.evalRendered.fire(m.params);
    } else if (msg.SelectRunCommand.is(m)) this.select(m.params.runId);
    else if (msg.OverlayRunCommand.is(m)) this.overlay(m.params.runId);
    else if (msg.RenderedNotification.is(m)) {
      this.lastRender = m.params;
      this.rendered.fire(m.params);
    }
  }

  dispose(): void {
    if (RewardPanel.current === this) RewardPanel.current = undefined;
    if (this.pending) clearTimeout(this.pending);
    for (const d of this.disposables) d.dispose();
    this.panel.dispose();
  }
}

export const runDirsOf = (roots: string[]) => (): string[] =>
  roots.flatMap((r) => {
    const dir = path.join(r, '.turnwise', 'runs');
    try {
      return fs
        .readdirSync(dir)
        .filter((n) => fs.existsSync(path.join(dir, n, 'config.json')))
        .map((n) => path.join(dir, n));
    } catch {
      return [];
    }
  });
