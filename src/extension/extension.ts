// VS Code entry point: a thin activate() that builds the pieces and registers them. Activation
// happens on the first command or view (package.json lists no eager activation event) and does
// no I/O: the Runs view reads and watches .turnwise/runs when it is first shown; the training
// and Docker code is loaded when a command needs it. Everything heavy runs in CLI children.
import { loadStart } from './loadClock';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { formatError } from '../core/errors';
import { RunDir } from '../core/run';
import { registerCommands } from './commands';
import { runEnvironmentCheck } from './commands/checkEnvironment';
import { services, servicesLoaded } from './lazy';
import { runsRoot, TrajectoryScanCache } from './model/runIndex';
import { REWARD_VIEW_TYPE, RewardPanel } from './rewardPanel';
import type { RewardPanelState } from './webviews/reward/protocol';
import type { TrajectoryPanelState } from './webviews/trajectory/protocol';
import { RunController } from './runController';
import { RunsTreeProvider } from './runsView';
import { SCHEME, TrajectoryEditors } from './trajectoryEditor';
import { TRAJECTORY_VIEW_TYPE, TrajectoryPanel } from './trajectoryPanel';

let log: vscode.LogOutputChannel | undefined;
let controller: RunController | undefined;

export function activate(context: vscode.ExtensionContext) {
  const t0 = performance.now();
  try {
    return activateInner(context, t0);
  } catch (e) {
    // VS Code swallows activation errors: say it where the user looks.
    void vscode.window.showErrorMessage(`Turnwise failed to start: ${formatError(e)}`);
    throw e;
  }
}

function activateInner(context: vscode.ExtensionContext, t0: number) {
  log = vscode.window.createOutputChannel('Turnwise', { log: true });
  const out = log;
  const subs = context.subscriptions;
  subs.push(out);
  const scans = new TrajectoryScanCache();
  const tree = new RunsTreeProvider(scans);
  const treeView = vscode.window.createTreeView('turnwise.runs', { treeDataProvider: tree, showCollapseAll: true });
  const editors = new TrajectoryEditors(scans);
  controller = new RunController(context.extensionPath, out);
  const ctrl = controller;
  const runDirs = () => tree.workspaceRoots().flatMap((root) => RunDir.list(runsRoot(root)).map((id) => path.join(runsRoot(root), id)));
  const checkEnvironment = () => runEnvironmentCheck(out);
  subs.push(
    tree,
    treeView,
    editors,
    ctrl,
    vscode.workspace.registerTextDocumentContentProvider(SCHEME, editors),
    vscode.languages.registerCodeLensProvider({ scheme: SCHEME }, editors),
    vscode.languages.registerHoverProvider({ scheme: SCHEME }, editors),
    ...registerCommands({
      extensionUri: context.extensionUri,
      log: out,
      controller: ctrl,
      tree,
      editors,
      runDirs,
      workspaceState: context.workspaceState,
    }),
    vscode.window.registerWebviewPanelSerializer(REWARD_VIEW_TYPE, {
      deserializeWebviewPanel: async (panel, state) =>
        RewardPanel.revive(panel, context.extensionUri, { runDirs }, scans, state as RewardPanelState | undefined),
    }),
    vscode.window.registerWebviewPanelSerializer(TRAJECTORY_VIEW_TYPE, {
      deserializeWebviewPanel: async (panel, state) => {
        await TrajectoryPanel.revive(panel, context.extensionUri, editors, state as TrajectoryPanelState | undefined);
        void vscode.commands.executeCommand('setContext', 'turnwise.trajectoryOpen', true);
      },
    }),
    // The Runs view and the reward panel follow the active run at once, not only through the watcher.
    ctrl.onEvent((e) => {
      if (e.type === 'iteration-finished' || e.type === 'run-started' || e.type.startsWith('run-')) tree.scheduleRefresh();
    }),
  );
  const activationMs = performance.now() - t0;
  /** From the first line of the bundle to the end of activate(). */
  const loadAndActivateMs = performance.now() - loadStart;
  out.info(
    `Turnwise ${context.extension.packageJSON.version} activated in ${loadAndActivateMs.toFixed(1)} ms (activate() ${activationMs.toFixed(1)} ms)`,
  );
  // What extension-host tests reach through the extension's exports.
  return {
    checkEnvironment,
    activationMs,
    loadAndActivateMs,
    runsTree: tree,
    trajectories: editors,
    controller: ctrl,
    rewardPanel: () => RewardPanel.instance,
    trajectoryPanel: () => TrajectoryPanel.instance,
  };
}

export async function deactivate(): Promise<void> {
  // A run going in this window is stopped cleanly (the CLI removes its containers), and
  // sandboxes this extension host holds itself are removed.
  await controller?.stopAll(4000);
  // Only when the services were loaded: nothing else can hold sandboxes.
  if (servicesLoaded()) await services().disposeAllSandboxes(3000);
  log = undefined;
}
