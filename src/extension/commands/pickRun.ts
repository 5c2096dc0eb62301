// The run quick pick of Resume Run and Open Trajectory.
import * as vscode from 'vscode';
import { listRuns, runsRoot, type RunSummary } from '../model/runIndex';
import { CannotRun } from './cannotRun';
import { workspaceRoot } from './preconditions';

/** A run of the workspace that `filter` keeps, picked by the user; `none` is said when there is none. */
export async function pickRun(filter: (r: RunSummary) => boolean, title: string, none: string): Promise<RunSummary | undefined> {
  const root = workspaceRoot(title.toLowerCase());
  const runs = listRuns(runsRoot(root)).filter(filter);
  if (runs.length === 0) throw new CannotRun(none, [{ title: 'Start Training Run…', command: 'turnwise.startRun' }]);
  const pick = await vscode.window.showQuickPick(
    runs.map((r) => ({
      label: r.runId,
      description: `${r.state}${r.lastCompleteIteration !== undefined ? ` · ${r.lastCompleteIteration}/${r.iterations ?? '?'} it` : ''}`,
      run: r,
    })),
    { title },
  );
  return pick?.run;
}
