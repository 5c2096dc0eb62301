// The trajectory viewer's webview: a timeline of the turns (command, observation, exit code,
// reward, advantage and its components, signatures), next/previous turn from the keyboard;
// it drives TrajectoryEditors, which keeps the editor in step. Restored after a reload.
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { TrajectoryRef } from './model/runIndex';
import { trajectoryActionFormat } from './model/runModel';
import { trajectoryView } from './model/trajectoryView';
import { changedFiles } from './model/blame';
import { refKey, type TrajectoryEditors } from './trajectoryEditor';
import { loadWebviewApp, webviewPanelOptions } from './webviewPanel';
import * as msg from './webviews/trajectory/protocol';
import type { TrajectoryPanelState, TrajectoryView } from './webviews/trajectory/protocol';

export const TRAJECTORY_VIEW_TYPE = 'turnwise.trajectory';
export class TrajectoryPanel implements vscode.Disposable {
  private static current: TrajectoryPanel | undefined;
  private ready = false;
  private readonly disposables: vscode.Disposable[] = [];

  static get instance(): TrajectoryPanel | undefined {
    return TrajectoryPanel.current;
  }

  /** Opens (or reuses) the viewer on `ref`, at `turn` (default: the first). */
  static async show(extensionUri: vscode.Uri, editors: TrajectoryEditors, ref: TrajectoryRef, turn?: number): Promise<TrajectoryPanel> {
    // The file goes to the first editor group, the timeline beside it: opened in that order so
    // the timeline never ends up as a hidden tab behind the file.
    const traj = await editors.activate(ref, turn);
    const a = editors.active!;
    const file = traj.turns.find((t) => t.index === a.turn)?.edits?.[0]?.path ?? changedFiles(traj)[0];
    if (file) await editors.openFile(file, vscode.ViewColumn.One, false);
    let p = TrajectoryPanel.current;
    if (!p) {
      const panel = vscode.window.createWebviewPanel(
        TRAJECTORY_VIEW_TYPE,
        'Trajectory',
        { viewColumn: vscode.ViewColumn.Two, preserveFocus: false },
        webviewPanelOptions(extensionUri),
      );
      p = new TrajectoryPanel(panel, extensionUri, editors);
    } else p.panel.reveal(vscode.ViewColumn.Two, false);
    p.ref = ref;
    p.panel.title = `Trajectory ${traj.trajId}`;
    if (p.ready) p.post();
    return p;
  }

  /** Restores a viewer after a reload (WebviewPanelSerializer). */
  static async revive(
    panel: vscode.WebviewPanel,
    extensionUri: vscode.Uri,
    editors: TrajectoryEditors,
    state: TrajectoryPanelState | undefined,
  ): Promise<void> {
    panel.webview.options = webviewPanelOptions(extensionUri);
    const p = new TrajectoryPanel(panel, extensionUri, editors);
    const ref = state?.ref as TrajectoryRef | undefined;
    if (ref && typeof ref.runDir === 'string') {
      try {
        await p.open(ref, state?.turn);
      } catch (e) {
        void vscode.window.showWarningMessage(`Turnwise: cannot restore the trajectory viewer: ${(e as Error).message}`);
      }
    }
  }

  private ref: TrajectoryRef | undefined;

  private constructor(
    readonly panel: vscode.WebviewPanel,
    private readonly extensionUri: vscode.Uri,
    private readonly editors: TrajectoryEditors,
  ) {
    TrajectoryPanel.current = this;
    loadWebviewApp(panel, extensionUri, 'trajectory', 'Trajectory');
    this.disposables.push(
      panel.webview.onDidReceiveMessage((m) => this.onMessage(m)),
      panel.onDidDispose(() => this.dispose()),
      editors.onDidChangeTurn((index) => {
        if (this.ready) void panel.webview.postMessage(msg.CurrentTurnNotification.make({ index }));
      }),
    );
  }

  private async open(ref: TrajectoryRef, turn?: number): Promise<void> {
    const traj = await this.editors.activate(ref, turn);
    this.ref = ref;
    this.panel.title = `Trajectory ${traj.trajId}`;
    if (this.ready) this.post();
    const file = changedFiles(traj)[0];
    const a = this.editors.active!;
    const turnFile = traj.turns.find((t) => t.index === a.turn)?.edits?.[0]?.path ?? file;
    if (turnFile) await this.editors.openFile(turnFile, vscode.ViewColumn.One);
  }

  private post(): void {
    const a = this.editors.active;
    if (!a || !this.ref || refKey(a.ref) !== refKey(this.ref)) return;
    const view = trajectoryView(a.traj, trajectoryActionFormat(a.ref.runDir, a.traj));
    this.lastView = view;
    void this.panel.webview.postMessage(
      msg.ShowTrajectoryNotification.make({ view, current: a.turn, state: { ref: this.ref, turn: a.turn } }),
    );
  }

  private async onMessage(m: unknown): Promise<void> {
    if (msg.ReadyCommand.is(m)) {
      this.ready = true;
      this.post();
    } else if (msg.SelectTurnCommand.is(m)) {
      await this.editors.setTurn(m.params.index);
    } else if (msg.ShowDiffCommand.is(m)) {
      if (this.ref) await this.editors.showDiff(this.ref, m.params.index, m.params.path);
    } else if (msg.OpenFileCommand.is(m)) {
      await this.editors.openFile(m.params.path);
    }
  }

  /** The view last sent to the webview (the extension-host tests read it). */
  lastView: TrajectoryView | undefined;

  get webviewReady(): boolean {
    return this.ready;
  }

  dispose(): void {
    if (TrajectoryPanel.current === this) TrajectoryPanel.current = undefined;
    for (const d of this.disposables) d.dispose();
    this.panel.dispose();
  }
}

export const trajectoryTitle = (ref: TrajectoryRef) => `${path.basename(ref.runDir)} · iteration ${ref.iteration} · ${ref.trajId}`;
