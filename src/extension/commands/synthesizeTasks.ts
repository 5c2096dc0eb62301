// Synthesize Tasks from Workspace: `turnwise tasks synth` writes .turnwise/tasks/synth.jsonl, the
// bugs made by mutating the workspace's source that its tests catch.
import * as path from 'node:path';
import * as vscode from 'vscode';
import { CannotRun } from './cannotRun';
import { command } from './context';
import { dockerReachable, workspaceRoot } from './preconditions';
import { countLines, TASKS_DIR } from './taskFiles';

export const synthesizeTasksCommand = command('turnwise.synthesizeTasks', async (ctx) => {
  const root = workspaceRoot('synthesize tasks');
  await dockerReachable('synthesize tasks (each candidate bug is checked by running your tests in a sandbox)');
  const out = path.join(root, TASKS_DIR, 'synth.jsonl');
  await ctx.controller.runCommand('synthesizing tasks from the workspace…', ['tasks', 'synth', '--workspace', root, '--out', out], root);
  const n = countLines(out);
  if (n === 0)
    throw new CannotRun(
      'no tasks were synthesized: no mutation of the workspace broke one of its tests. Check that the tests run (turnwise.tasks.testCommand).',
    );
  void vscode.window
    .showInformationMessage(`Turnwise: ${n} task(s) written to ${path.relative(root, out)}.`, 'Start Training Run…', 'Open File')
    .then((c) => {
      if (c === 'Open File') void vscode.window.showTextDocument(vscode.Uri.file(out));
      else if (c) void vscode.commands.executeCommand('turnwise.startRun');
    });
  return { tasks: out, count: n };
});
