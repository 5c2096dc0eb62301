// The Runs view: runs → iterations → tasks → trajectories, each with its numbers, loaded one
// level at a time (a trajectories file is scanned only when its iteration is expanded), and
// refreshed as runs write (a file watcher on .turnwise/runs, started when the view is first used).
import * as path from 'node:path';
import * as vscode from 'vscode';
import {
  groupByTask,
  listIterations,
  listRuns,
  runRow,
  runsRoot,
  RUNS_DIR,
  TrajectoryScanCache,
  type IterationSummary,
  type RunSummary,
  type TaskSummary,
  type TrajectoryRef,
} from './model/runIndex';
import type { TrajectorySummary } from './model/trajScan';
import { escapeMarkdown, formatSigned, pct } from './model/turnView';

export type RunsNode =
  | { kind: 'run'; run: RunSummary }
  | { kind: 'iteration'; run: RunSummary; it: IterationSummary }
  | { kind: 'task'; run: RunSummary; it: IterationSummary; task: TaskSummary }
  | { kind: 'trajectory'; run: RunSummary; it: IterationSummary; task: TaskSummary; traj: TrajectorySummary }
  | { kind: 'message'; text: string; detail?: string };

const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

const STATE_ICON: Record<string, [string, string?]> = {
  running: ['sync~spin', 'charts.blue'],
  finished: ['pass', 'testing.iconPassed'],
  failed: ['error', 'testing.iconFailed'],
  stopped: ['debug-stop', undefined],
  interrupted: ['warning', 'list.warningForeground'],
  unknown: ['question', undefined],
};

/** Text shown as itself inside a MarkdownString (paths and names may hold `_`, `*`, brackets). */

export function trajectoryRef(n: Extract<RunsNode, { kind: 'trajectory' }>): TrajectoryRef {
  return {
    runDir: n.run.dir,
    iteration: n.it.iteration,
    split: n.task.split,
    trajId: n.traj.trajId,
    offset: n.traj.offset,
    length: n.traj.length,
  };
}

export class RunsTreeProvider implements vscode.TreeDataProvider<RunsNode>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<RunsNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private watcher: vscode.FileSystemWatcher | undefined;
  private refreshTimer: NodeJS.Timeout | undefined;
  /** Time the last getChildren of each kind took, for the performance check. */
  readonly timings: Record<string, number> = {};

  constructor(readonly scans: TrajectoryScanCache) {}

  workspaceRoots(): string[] {
    return (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === 'file').map((f) => f.uri.fsPath);
  }

  /** Watches .turnwise/runs once the view is first asked for its content. */
  private ensureWatcher(): void {
    if (this.watcher) return;
    this.watcher = vscode.workspace.createFileSystemWatcher(`**/${RUNS_DIR.split(path.sep).join('/')}/**`);
    const onFs = (uri: vscode.Uri) => {
      if (/\.tmp-\d+/.test(uri.fsPath)) return; // an atomic write in progress; its rename follows
      this.scheduleRefresh();
    };
    this.watcher.onDidCreate(onFs);
    this.watcher.onDidChange(onFs);
    this.watcher.onDidDelete(onFs);
  }

  scheduleRefresh(delayMs = 250): void {
    if (this.refreshTimer) return;
    this.refreshTimer = setTimeout(() => {
      this.refreshTimer = undefined;
      this.changed.fire(undefined);
    }, delayMs);
  }

  refresh(): void {
    this.changed.fire(undefined);
  }

  runs(): RunSummary[] {
    return this.workspaceRoots().flatMap((root) => listRuns(runsRoot(root)));
  }

  async getChildren(node?: RunsNode): Promise<RunsNode[]> {
    const t0 = performance.now();
    const kind = node?.kind ?? 'root';
    try {
      return await this.children(node);
    } finally {
      this.timings[kind] = performance.now() - t0;
    }
  }

  private async children(node?: RunsNode): Promise<RunsNode[]> {
    if (!node) {
      this.ensureWatcher();
      return this.runs().map((run) => ({ kind: 'run', run }));
    }
    switch (node.kind) {
      case 'run':
        return listIterations(node.run.dir).map((it) => ({ kind: 'iteration', run: node.run, it }));
      case 'iteration': {
        const out: RunsNode[] = [];
        for (const [split, file] of [
          ['train', node.it.trainFile],
          ['heldout', node.it.heldoutFile],
        ] as const) {
          if (!file) continue;
          const scan = await this.scans.scan(file);
          for (const task of groupByTask(scan.summaries, split)) out.push({ kind: 'task', run: node.run, it: node.it, task });
          if (scan.badLines.length)
            out.push({
              kind: 'message',
              text: `${path.basename(file)}: ${scan.badLines.length} unreadable line(s)`,
              detail: `lines ${scan.badLines.slice(0, 10).join(', ')}`,
            });
        }
        if (out.length === 0)
          out.push({
            kind: 'message',
            text: node.it.iteration === 0 && !node.it.heldoutFile ? 'no episodes recorded' : 'episodes are still running…',
          });
        return out;
      }
      case 'task':
        return node.task.trajectories.map((traj) => ({ kind: 'trajectory', run: node.run, it: node.it, task: node.task, traj }));
      default:
        return [];
    }
  }

  getTreeItem(node: RunsNode): vscode.TreeItem {
    switch (node.kind) {
      case 'run': {
        const r = node.run;
        const row = runRow(r);
        const item = new vscode.TreeItem(row.label, vscode.TreeItemCollapsibleState.Collapsed);
        item.id = `run:${r.dir}`;
        item.description = row.description;
        const [icon, color] = STATE_ICON[r.state] ?? STATE_ICON.unknown;
        item.iconPath = new vscode.ThemeIcon(icon, color ? new vscode.ThemeColor(color) : undefined);
        item.contextValue = `run run-${r.state}`;
        item.resourceUri = vscode.Uri.file(r.dir);
        item.tooltip = new vscode.MarkdownString(
          [
            `**${r.runId}**`,
            '',
            `state: ${r.state}${r.error ? ` — ${r.error.message}` : ''}`,
            `estimator: ${r.estimator ?? '?'}`,
            ...(r.model?.details ?? []).map(escapeMarkdown),
            `folder: \`${r.dir}\``,
          ].join('\n\n'),
        );
        return item;
      }
      case 'iteration': {
        const m = node.it.metrics;
        const item = new vscode.TreeItem(`Iteration ${node.it.iteration}`, vscode.TreeItemCollapsibleState.Collapsed);
        item.id = `it:${node.run.dir}:${node.it.iteration}`;
        const parts: string[] = [];
        const reward = num(m?.['reward/mean']);
        const pass = num(m?.['tests/pass_rate']);
        const hpass = num(m?.['heldout/pass_rate']);
        const resolved = num(m?.['resolved']);
        if (reward !== undefined) parts.push(`reward ${formatSigned(reward, 2)}`);
        if (pass !== undefined) parts.push(`pass ${pct(pass)}`);
        if (resolved !== undefined) parts.push(`resolved ${pct(resolved)}`);
        if (hpass !== undefined) parts.push(`held-out ${pct(hpass)}`);
        if (!m) parts.push('in progress');
        item.description = parts.join(' · ');
        item.iconPath = new vscode.ThemeIcon(m ? 'history' : 'loading~spin');
        item.contextValue = 'iteration';
        return item;
      }
      case 'task': {
        const t = node.task;
        const item = new vscode.TreeItem(t.taskId, vscode.TreeItemCollapsibleState.Collapsed);
        item.id = `task:${node.run.dir}:${node.it.iteration}:${t.split}:${t.taskId}`;
        item.description = `${t.split === 'heldout' ? 'held-out · ' : ''}${t.episodes} ep · ${t.resolved} resolved · reward ${formatSigned(t.meanReward, 2)} · pass ${pct(t.meanPassRate)}`;
        item.iconPath = new vscode.ThemeIcon(
          t.resolved > 0 ? 'pass' : 'circle-large-outline',
          t.resolved > 0 ? new vscode.ThemeColor('testing.iconPassed') : undefined,
        );
        item.contextValue = 'task';
        return item;
      }
      case 'trajectory': {
        const s = node.traj;
        const item = new vscode.TreeItem(s.trajId, vscode.TreeItemCollapsibleState.None);
        item.id = `traj:${node.run.dir}:${node.it.iteration}:${node.task.split}:${s.trajId}`;
        item.description = s.failure
          ? `unscored: ${s.failure}`
          : `reward ${formatSigned(s.reward, 2)} · pass ${pct(s.passRate)} · ${s.turns} turn${s.turns === 1 ? '' : 's'}${s.resolved ? ' · resolved' : ''}${s.tampered ? ' · tampered' : ''}`;
        item.iconPath = new vscode.ThemeIcon(
          s.failure || s.tampered ? 'warning' : s.resolved ? 'pass-filled' : 'debug-stackframe-dot',
          s.resolved ? new vscode.ThemeColor('testing.iconPassed') : undefined,
        );
        item.contextValue = 'trajectory';
        item.command = { command: 'turnwise.openTrajectory', title: 'Open Trajectory', arguments: [node] };
        return item;
      }
      case 'message': {
        const item = new vscode.TreeItem(node.text, vscode.TreeItemCollapsibleState.None);
        item.description = node.detail;
        item.iconPath = new vscode.ThemeIcon('info');
        return item;
      }
    }
  }

  dispose(): void {
    this.watcher?.dispose();
    if (this.refreshTimer) clearTimeout(this.refreshTimer);
    this.changed.dispose();
  }
}
