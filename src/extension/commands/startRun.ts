// Start Training Run…: asks what to train on (or takes it from the caller, or turnwise.json),
// checks the model and adapter, writes the launch file and starts `turnwise train` in a CLI child.
import * as path from 'node:path';
import * as vscode from 'vscode';
import { services } from '../lazy';
import { config } from '../config';
import { launchConfig, readBaseConfig, writeLaunchConfig } from '../model/launchConfig';
import { CannotRun } from './cannotRun';
import { command, type CommandContext } from './context';
import { dockerReachable, noActiveRun, workspaceRoot } from './preconditions';
import { checkedLora, checkedModel, pickStartOptions, type StartRunOptions } from './startRunPicks';
import { countLines, TASKS_DIR } from './taskFiles';

/** Makes a task file from a source pick ("synth:" / "failing:"), through the CLI. */
async function materializeTasks(ctx: CommandContext, root: string, tasks: string): Promise<string> {
  if (!tasks.endsWith(':')) return tasks;
  const kind = tasks.slice(0, -1);
  const out = path.join(root, TASKS_DIR, `${kind}.jsonl`);
  await ctx.controller.runCommand(
    kind === 'synth' ? 'synthesizing tasks from the workspace…' : 'collecting failing tests…',
    ['tasks', kind, '--workspace', root, '--out', out],
    root,
  );
  const n = countLines(out);
  if (n === 0) {
    throw new CannotRun(
      kind === 'synth'
        ? 'cannot start a run because no tasks were found: no mutation of the workspace broke one of its tests. Make sure the tests run (set turnwise.tasks.testCommand), or give a task file.'
        : 'cannot start a run because no test of the workspace fails: synthesize tasks instead, or give a task file.',
      [{ title: 'Start Training Run…', command: 'turnwise.startRun' }],
    );
  }
  return out;
}

export const startRunCommand = command('turnwise.startRun', async (ctx, opts?: StartRunOptions) => {
  const root = workspaceRoot('start a run');
  noActiveRun(ctx, 'start a run');
  await dockerReachable('start a run');
  const o = opts && (opts.tasks || opts.config) ? opts : { ...(await pickStartOptions(root, ctx.log)), detach: opts?.detach };
  if (!o || (!o.tasks && !o.config)) return undefined;
  let base: ReturnType<typeof readBaseConfig> | undefined;
  try {
    base = o.config ? readBaseConfig(o.config) : undefined;
  } catch (e) {
    throw new CannotRun(`cannot start a run from ${path.basename(o.config ?? '')}: ${(e as Error).message}`, [
      { title: 'Open turnwise.json', command: 'vscode.open', args: [vscode.Uri.file(o.config ?? root)] },
    ]);
  }
  const tasksFile = o.tasks ? await materializeTasks(ctx, root, o.tasks) : undefined;
  // Every setting reaches the run through one file under .turnwise/ (the CLI's --config).
  const launch = launchConfig({
    workspace: root,
    setting: config.inspect,
    base,
    choices: {
      ...(tasksFile ? { taskSource: 'file' as const, tasksFile } : {}),
      estimator: o.estimator,
      iterations: o.iterations,
      model: o.model,
      lora: o.lora,
    },
  });
  // The model and adapter the run would load, checked before anything starts (picked, set, or from turnwise.json).
  const modelDir = typeof launch.model === 'string' ? launch.model : '';
  const model = modelDir ? checkedModel(modelDir) : undefined;
  // A run from an adapter trains that adapter with its own settings, whatever turnwise.train.lora says; its config.json records them.
  if (model?.adapter) launch.lora = services().adapterLoraBlock(model.adapter);
  checkedLora(launch.lora);
  ctx.log.info(
    `model: ${model ? `${model.dir} (${model.summary})` : 'the embedded turnwise-tiny'}${launch.lora ? `, ${model?.adapter ? 'continuing' : 'training'} a LoRA adapter ${JSON.stringify(launch.lora)}` : ''}`,
  );
  const launchFile = writeLaunchConfig(root, launch);
  ctx.log.info(`launch config: ${launchFile}`);
  noActiveRun(ctx, 'start a run');
  const running = ctx.controller.startTraining(
    `training ${model ? path.basename(model.adapter?.base ?? model.dir) : 'turnwise-tiny'}${launch.lora ? ' + LoRA' : ''} (${String(launch.estimator)}${o.config ? ', turnwise.json' : ''})`,
    ['train', '--config', launchFile],
    root,
  );
  ctx.tree.scheduleRefresh(1000);
  if (o.detach) {
    running.catch(() => {});
    return { started: true, launchFile };
  }
  return running;
});
