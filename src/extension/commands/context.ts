// What a command is: its id (as package.json contributes it) and its handler, which gets the
// CommandContext, what every command shares, and then whatever the caller passed to
// executeCommand (a Runs view node, options, a turn…).
import type * as vscode from 'vscode';
import type { RunController } from '../runController';
import type { RunsTreeProvider } from '../runsView';
import type { TrajectoryEditors } from '../trajectoryEditor';
import type { CommandId } from './ids';

export interface CommandContext {
  extensionUri: vscode.Uri;
  log: vscode.LogOutputChannel;
  controller: RunController;
  tree: RunsTreeProvider;
  editors: TrajectoryEditors;
  /** The run folders of the workspace's folders (what the reward panel lists). */
  runDirs: () => string[];
  /** The workspace's memory (the last endpoint Evaluate Policy was given: URL, model and the key's variable name, never a key). */
  workspaceState?: vscode.Memento;
}

export interface Command<Id extends CommandId = CommandId> {
  readonly id: Id;
  /** The arguments are the caller's, unchecked: each handler declares what it accepts. */
  readonly run: (ctx: CommandContext, ...args: never[]) => Promise<unknown>;
}

/** A command: its id and its handler. */
export function command<Id extends CommandId>(id: Id, run: Command<Id>['run']): Command<Id> {
  return { id, run };
}
