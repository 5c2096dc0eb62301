// What commands check before they start: an open folder, no run already going, Docker reachable.
// Each throws CannotRun saying why the command cannot run and what to do.
import * as vscode from 'vscode';
import { services } from '../lazy';
import { config } from '../config';
import { CannotRun } from './cannotRun';
import type { CommandContext } from './context';

/** The first local workspace folder; `what` is what the command would do ("start a run"). */
export function workspaceRoot(what: string): string {
  const f = (vscode.workspace.workspaceFolders ?? []).find((x) => x.uri.scheme === 'file');
  if (!f)
    throw new CannotRun(`cannot ${what} because no folder is open: open the repository to train on (File › Open Folder…).`, [
      { title: 'Open Folder…', command: 'vscode.openFolder' },
    ]);
  return f.uri.fsPath;
}

/** The first local workspace folder, or the home folder for commands that need none. */
export function workspaceRootOrHome(): string {
  return (vscode.workspace.workspaceFolders ?? []).find((x) => x.uri.scheme === 'file')?.uri.fsPath ?? process.env.HOME ?? '/';
}

export function noActiveRun(ctx: CommandContext, what: string): void {
  const a = ctx.controller.current;
  if (a) {
    throw new CannotRun(
      `cannot ${what} because a run is already going (${a.progress.runId ?? a.label}): stop it first, or wait for it to finish.`,
      [
        { title: 'Stop Run', command: 'turnwise.stopRun' },
        { title: 'Show Log', command: 'turnwise.showLog' },
      ],
    );
  }
}

export async function dockerReachable(what: string): Promise<void> {
  const { connectEngine, engineInfo } = services();
  try {
    const { docker, target } = connectEngine(config.dockerHost(), { requestTimeoutMs: 4000 });
    await engineInfo(docker, target, 4000);
  } catch (e) {
    const hint = (e as { hint?: string }).hint;
    throw new CannotRun(`cannot ${what} because Docker is not reachable: ${(e as Error).message}${hint ? ` — ${hint}` : ''}`, [
      { title: 'Check Environment', command: 'turnwise.checkEnvironment' },
      { title: 'Docker Settings', command: 'workbench.action.openSettings', args: ['turnwise.docker'] },
    ]);
  }
}
