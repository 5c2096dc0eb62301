// Reveal Run Folder (a run's context menu in the Runs view): in the OS file manager, or else in
// the Explorer.
import * as vscode from 'vscode';
import type { RunsNode } from '../../runsView';
import { command } from '../context';

export const runsRevealFolderCommand = command('turnwise.runs.revealFolder', async (_ctx, node?: RunsNode) => {
  if (!node || !('run' in node)) return;
  await vscode.commands
    .executeCommand('revealFileInOS', vscode.Uri.file(node.run.dir))
    .then(undefined, () => vscode.commands.executeCommand('revealInExplorer', vscode.Uri.file(node.run.dir)));
});
