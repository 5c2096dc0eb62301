// Delete Run… (a run's context menu in the Runs view): its folder is deleted from disk, after a
// modal confirmation unless the caller confirmed; a running run is refused.
import * as fs from 'node:fs';
import * as vscode from 'vscode';
import type { RunsNode } from '../../runsView';
import { CannotRun } from '../cannotRun';
import { command } from '../context';

export const runsDeleteCommand = command('turnwise.runs.delete', async (ctx, node?: RunsNode, confirmed?: boolean) => {
  if (!node || node.kind !== 'run') return false;
  if (ctx.controller.current?.progress.runDir === node.run.dir || node.run.state === 'running') {
    throw new CannotRun(`cannot delete ${node.run.runId} because it is running: stop it first.`, [
      { title: 'Stop Run', command: 'turnwise.stopRun' },
    ]);
  }
  if (!confirmed) {
    const ok = await vscode.window.showWarningMessage(
      `Delete run ${node.run.runId}?`,
      { modal: true, detail: `Its folder ${node.run.dir} (trajectories, metrics, checkpoints) is deleted from disk.` },
      'Delete',
    );
    if (ok !== 'Delete') return false;
  }
  await fs.promises.rm(node.run.dir, { recursive: true, force: true });
  ctx.tree.scans.invalidate(node.run.dir);
  ctx.tree.refresh();
  return true;
});
