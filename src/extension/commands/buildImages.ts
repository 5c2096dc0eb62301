// Build Sandbox Images: `turnwise images build`.
import * as vscode from 'vscode';
import { command } from './context';
import { dockerReachable, workspaceRootOrHome } from './preconditions';

export const buildImagesCommand = command('turnwise.buildImages', async (ctx) => {
  await dockerReachable('build the sandbox images');
  const r = await ctx.controller.runCommand('building sandbox images…', ['images', 'build'], workspaceRootOrHome());
  void vscode.window.showInformationMessage('Turnwise: sandbox images are ready.');
  return r;
});
