// The test-pass reward panel: uPlot charts of a run's metrics that update as iterations
// finish, a per-task pass-rate table, the advantage distribution by component, switching
// between runs and overlaying a second one. Posts nothing before the page says it is ready;
// restored after a reload from the state the page keeps.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { listIterations, readMetrics, summarizeRun, type TrajectoryScanCache } from './model/runIndex';
import { advantageHistogram, taskTable, toPoints } from './model/rewardData';
import { readTrajectoryAt } from './model/trajScan';
import type { Trajectory } from '../core/schema';
import { webviewHtml } from './webviewHtml';
import {
  AdvantagesNotification,
  ClearOverlayNotification,
  MetricsNotification,
  OverlayRunCommand,
  ReadyCommand,
  RenderedNotification,
  RunsNotification,
  SelectRunCommand,
  TasksNotification,
  type RewardPanelState,
  type RunRole,
} from './webviews/reward/protocol';

export const REWARD_VIEW_TYPE = 'turnwise.rewardPanel';
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

  static get instance(): RewardPanel | undefined {
    return RewardPanel.current;
  }

  static show(extensionUri: vscode.Uri, runs: RunLocator, scans: TrajectoryScanCache, runId?: string): RewardPanel {
    let p = RewardPanel.current;
    if (!p) {
      const panel = vscode.window.createWebviewPanel(REWARD_VIEW_TYPE, 'Turnwise Rewards', vscode.ViewColumn.Active, RewardPanel.options(extensionUri));
      p = new RewardPanel(panel, extensionUri, runs, scans, {});
    } else p.panel.reveal();
    if (runId) p.select(runId);
    else if (!p.state.selected) p.select(path.basename(runs.runDirs()[0] ?? ''));
    return p;
  }

  static options(extensionUri: vscode.Uri): vscode.WebviewPanelOptions & vscode.WebviewOptions {
    return { enableScripts: true, retainContextWhenHidden: true, localResourceRoots: [vscode.Uri.joinPath(extensionUri, 'dist', 'webviews')] };
  }

  static revive(panel: vscode.WebviewPanel, extensionUri: vscode.Uri, runs: RunLocator, scans: TrajectoryScanCache, state: RewardPanelState | undefined): void {
    panel.webview.options = RewardPanel.options(extensionUri);
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
    const asUri = (f: string) => panel.webview.asWebviewUri(vscode.Uri.joinPath(extensionUri, 'dist', 'webviews', f)).toString();
    panel.iconPath = vscode.Uri.joinPath(extensionUri, 'media', 'turnwise.svg');
    panel.webview.html = webviewHtml({ cspSource: panel.webview.cspSource, scriptUri: asUri('reward.js'), styleUris: [asUri('reward.css')], title: 'Turnwise Rewards' });
    this.disposables.push(
      panel.webview.onDidReceiveMessage((m) => this.onMessage(m)),
      panel.onDidDispose(() => this.dispose()),
      this.rendered,
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
    }, 150);
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
    else void this.panel.webview.postMessage(ClearOverlayNotification.make({}));
  }

  get selected(): string | undefined {
    return this.state.selected;
  }

  private sendRuns(): void {
    const runs = this.runs.runDirs().map((d) => {
      const s = summarizeRun(d);
      return { runId: s.runId, state: s.state, estimator: s.estimator, iterations: s.iterations, ...(s.model ? { model: s.model.label, modelDetails: s.model.details } : {}) };
    });
    if (!this.state.selected && runs[0]) this.state.selected = runs[0].runId;
    void this.panel.webview.postMessage(RunsNotification.make({ runs, selected: this.state.selected, overlay: this.state.overlay }));
  }

  private async sendAll(): Promise<void> {
    if (this.state.selected) await this.sendRun(this.state.selected, 'main');
    if (this.state.overlay) await this.sendRun(this.state.overlay, 'overlay');
  }

  private async sendRun(runId: string, role: RunRole): Promise<void> {
    const dir = this.dirOf(runId);
    if (!dir) return;
    const post = (m: unknown) => this.panel.webview.postMessage(m);
    await post(MetricsNotification.make({ runId, role, points: toPoints(readMetrics(dir)) }));
    // The table and histogram read trajectory files: after the charts, so those show first.
    const its = listIterations(dir);
    const byIteration: Array<Parameters<typeof taskTable>[0][number]> = [];
    for (const it of its) {
      if (it.trainFile) byIteration.push({ iteration: it.iteration, split: 'train', summaries: (await this.scans.scan(it.trainFile)).summaries });
      if (it.heldoutFile) byIteration.push({ iteration: it.iteration, split: 'heldout', summaries: (await this.scans.scan(it.heldoutFile)).summaries });
    }
    await post(TasksNotification.make({ runId, role, table: taskTable(byIteration) }));
    await post(AdvantagesNotification.make({ runId, role, histogram: await this.histogram(its) }));
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
    if (ReadyCommand.is(m)) {
      this.ready = true;
      this.sendRuns();
      void this.sendAll();
    } else if (SelectRunCommand.is(m)) this.select(m.params.runId);
    else if (OverlayRunCommand.is(m)) this.overlay(m.params.runId);
    else if (RenderedNotification.is(m)) {
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
      return fs.readdirSync(dir).filter((n) => fs.existsSync(path.join(dir, n, 'config.json'))).map((n) => path.join(dir, n));
    } catch {
      return [];
    }
  });
