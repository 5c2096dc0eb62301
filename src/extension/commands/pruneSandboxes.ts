// Prune Sandboxes: `turnwise sandbox prune` removes the sandbox containers Turnwise left behind.
import * as vscode from 'vscode';
import { command } from './context';
import { dockerReachable, workspaceRootOrHome } from './preconditions';

export const pruneSandboxesCommand = command('turnwise.pruneSandboxes', async (ctx) => {
  await dockerReachable('prune sandboxes');
  const r = await ctx.controller.runCommand('removing leftover sandboxes…', ['sandbox', 'prune'], workspaceRootOrHome());
  const removed = (r as { removed?: unknown[] } | undefined)?.removed;
  void vscode.window.showInformationMessage(
    `Turnwise: ${Array.isArray(removed) ? `${removed.length} leftover sandbox(es) removed` : 'leftover sandboxes removed'}.`,
  );
  return r;
});
