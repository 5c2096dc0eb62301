// The Turnwise commands. Each checks first whether it can run here and, when it cannot, says
// why and what to do (no folder open, a run already going, Docker unreachable…); the
// `when` clauses in package.json hide them from the palette where they make no sense.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { formatError } from '../core/errors';
import { services } from './lazy';
import { config, ESTIMATORS, type Estimator } from './config';
import { launchConfig, readBaseConfig, writeLaunchConfig } from './model/launchConfig';
import { resolveModelSetting } from './model/runModel';
import { listIterations, listRuns, runsRoot, type RunSummary, type TrajectoryRef } from './model/runIndex';
import { formatSigned, pct } from './model/turnView';
import { CommandCancelled, type RunController } from './runController';
import { trajectoryRef, type RunsNode, type RunsTreeProvider } from './runsView';
import type { TrajectoryEditors } from './trajectoryEditor';
import { TrajectoryPanel } from './trajectoryPanel';
import { RewardPanel } from './rewardPanel';
import { endpointUrlProblem, evalOutFile, keyEnvProblem } from './model/evalFiles';

export interface CommandContext {
  extensionUri: vscode.Uri;
  log: vscode.LogOutputChannel;
  controller: RunController;
  tree: RunsTreeProvider;
  editors: TrajectoryEditors;
  runDirs: () => string[];
  checkEnvironment: () => Promise<unknown>;
  /** The workspace's memory (the last endpoint Evaluate Policy was given: URL, model and the key's variable name, never a key). */
  workspaceState?: vscode.Memento;
}

/** What Evaluate Policy remembers of an endpoint: its URL, model and the name of the key's variable. */
interface RememberedEndpoint {
  url: string;
  model: string;
  keyEnv: string;
}
const ENDPOINT_KEY = 'turnwise.eval.endpoint';
const SAMPLES_KEY = 'turnwise.eval.samples';

/** A command that cannot run: the message says why and what to do; actions are offered as buttons. */
export class CannotRun extends Error {
  constructor(
    message: string,
    readonly actions: Array<{ title: string; command: string; args?: unknown[] }> = [],
  ) {
    super(message);
  }
}

const TASKS_DIR = path.join('.turnwise', 'tasks');

function workspaceRoot(what: string): string {
  const f = (vscode.workspace.workspaceFolders ?? []).find((x) => x.uri.scheme === 'file');
  if (!f) throw new CannotRun(`cannot ${what} because no folder is open: open the repository to train on (File › Open Folder…).`, [{ title: 'Open Folder…', command: 'vscode.openFolder' }]);
  return f.uri.fsPath;
}

function noActiveRun(ctx: CommandContext, what: string): void {
  const a = ctx.controller.current;
  if (a) {
    throw new CannotRun(`cannot ${what} because a run is already going (${a.progress.runId ?? a.label}): stop it first, or wait for it to finish.`, [
      { title: 'Stop Run', command: 'turnwise.stopRun' },
      { title: 'Show Log', command: 'turnwise.showLog' },
    ]);
  }
}

async function dockerReachable(what: string): Promise<void> {
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

/** Wraps a command body: CannotRun becomes a warning with its buttons, other errors an error message. */
function guarded<A extends unknown[], R>(ctx: CommandContext, fn: (...args: A) => Promise<R>): (...args: A) => Promise<R | undefined> {
  return async (...args: A) => {
    try {
      return await fn(...args);
    } catch (e) {
      if (e instanceof CommandCancelled) {
        ctx.log.info(e.message);
        return undefined;
      }
      if (e instanceof CannotRun) {
        ctx.log.warn(e.message);
        void vscode.window.showWarningMessage(`Turnwise: ${e.message}`, ...e.actions.map((a) => a.title)).then((choice) => {
          const a = e.actions.find((x) => x.title === choice);
          if (a) void vscode.commands.executeCommand(a.command, ...(a.args ?? []));
        });
        return undefined;
      }
      const hint = (e as { hint?: string }).hint;
      ctx.log.error(`${formatError(e)}${hint ? ` (${hint})` : ''}`);
      void vscode.window.showErrorMessage(`Turnwise: ${(e as Error).message}${hint ? ` — ${hint}` : ''}`, 'Show Log').then((c) => c && ctx.log.show());
      return undefined;
    }
  };
}

export interface StartRunOptions {
  /** A task file (skips the task-source pick). */
  tasks?: string;
  estimator?: Estimator;
  iterations?: number;
  /** Use the workspace's turnwise.json. */
  config?: string;
  /** Return once the run has started instead of when it ends. */
  detach?: boolean;
  /** The model folder to train; '' for the embedded turnwise-tiny (default: the setting). */
  model?: string;
  /** A LoRA block (PEFT fields) to train an adapter, null for the whole model (default: the setting). */
  lora?: Record<string, unknown> | null;
}

type CheckedModel = ReturnType<ReturnType<typeof services>['checkModelFolder']>;

const modelRefusal = (e: { message: string; fix: string }) =>
  new CannotRun(`cannot start a run on this model folder: ${e.message}. To fix: ${e.fix}.`, [
    { title: 'Start Training Run…', command: 'turnwise.startRun' },
    { title: 'Model Setting', command: 'workbench.action.openSettings', args: ['turnwise.train.model'] },
  ]);

/**
 * The picked model folder, checked from its headers (an adapter folder with its base); a folder
 * that is not a model is refused with what to pick instead.
 */
function checkedModel(dir: string): CheckedModel {
  const { checkModelFolder, ModelRefused } = services();
  try {
    return checkModelFolder(dir);
  } catch (e) {
    if (!(e instanceof ModelRefused)) throw e;
    throw modelRefusal(e);
  }
}

/**
 * checkedModel for a folder the user just picked: an adapter whose named base is not here asks
 * for the base folder, and runs from a copy of the adapter naming it (adapterOnBase); undefined
 * when the user cancels that question.
 */
async function pickedModel(dir: string, root: string, log: CommandContext['log']): Promise<CheckedModel | undefined> {
  const { AdapterNeedsBase, adapterOnBase, checkModelFolder, ModelRefused } = services();
  try {
    return checkModelFolder(dir);
  } catch (need) {
    if (!(need instanceof AdapterNeedsBase)) throw need instanceof ModelRefused ? modelRefusal(need) : need;
    const base = await vscode.window.showOpenDialog({
      title: `Base model of the adapter ${path.basename(need.adapterDir)}${need.named ? ` (it names ${need.named})` : ''}`,
      canSelectFiles: false,
      canSelectFolders: true,
      canSelectMany: false,
      openLabel: 'Use as Base Model',
      defaultUri: vscode.Uri.file(root),
    });
    if (!base?.[0]) return undefined;
    try {
      const m = adapterOnBase(need.adapterDir, base[0].fsPath, root);
      log.info(`the adapter ${need.adapterDir} runs over ${m.adapter!.base}, from a copy naming that base: ${m.dir}`);
      return m;
    } catch (err) {
      if (!(err instanceof ModelRefused)) throw err;
      throw modelRefusal(err);
    }
  }
}

function checkedLora(value: unknown): ReturnType<ReturnType<typeof services>['checkLoraSetting']> {
  const { checkLoraSetting, ModelRefused } = services();
  try {
    return checkLoraSetting(value);
  } catch (e) {
    if (!(e instanceof ModelRefused)) throw e;
    throw new CannotRun(`cannot start a run with this LoRA block: ${e.message}. To fix: ${e.fix}.`, [{ title: 'LoRA Setting', command: 'workbench.action.openSettings', args: ['turnwise.train.lora'] }]);
  }
}

/** The default adapter offered when turnwise.train.lora holds none (PEFT field names). */
const DEFAULT_LORA = { r: 16, lora_alpha: 32, target_modules: 'all-linear' };

/** Remembers a pick as a workspace setting; the embedded model / whole model clears it (then a default applies). */
async function remember(key: string, value: unknown, cleared: unknown): Promise<void> {
  const sec = vscode.workspace.getConfiguration('turnwise');
  const target = vscode.workspace.workspaceFolders?.length ? vscode.ConfigurationTarget.Workspace : vscode.ConfigurationTarget.Global;
  if (JSON.stringify(value) === JSON.stringify(cleared)) {
    if (JSON.stringify(sec.get(key) ?? cleared) === JSON.stringify(cleared)) return;
    await sec.update(key, undefined, target);
    // A value set in a wider scope still applies: say "cleared" explicitly here.
    if (JSON.stringify(vscode.workspace.getConfiguration('turnwise').get(key) ?? cleared) !== JSON.stringify(cleared)) await sec.update(key, cleared, target);
    return;
  }
  if (JSON.stringify(sec.get(key)) !== JSON.stringify(value)) await sec.update(key, value, target);
}

/**
 * Step 2 of Start Training Run: the embedded turnwise-tiny, a model folder or a LoRA adapter
 * folder (remembered as turnwise.train.model); '' for the embedded one.
 */
async function pickModel(root: string, step: string, log: CommandContext['log']): Promise<{ dir: string; model?: CheckedModel } | undefined> {
  const current = resolveModelSetting(root, config.model());
  type Item = vscode.QuickPickItem & { value: 'embedded' | 'current' | 'folder' };
  const items: Item[] = [
    { label: '$(package) Embedded turnwise-tiny', description: `3.2M parameters, Turnwise's own${current ? '' : ' · turnwise.train.model'}`, value: 'embedded' },
    ...(current ? [{ label: `$(folder) ${path.basename(current)}`, description: `${current} · turnwise.train.model`, value: 'current' as const }] : []),
    { label: '$(folder-opened) Model folder…', description: 'a Hugging Face checkpoint (Qwen2, Llama), a Turnwise model, or a LoRA adapter to train further', value: 'folder' },
  ];
  if (current) items.unshift(items.splice(1, 1)[0]);
  const pick = await vscode.window.showQuickPick(items, { title: `Start Training Run (${step}): model`, placeHolder: 'Which model does the run train?' });
  if (!pick) return undefined;
  let model: CheckedModel | undefined;
  if (pick.value === 'current') model = await pickedModel(current, root, log);
  else if (pick.value === 'folder') {
    const picked = await vscode.window.showOpenDialog({
      title: 'Model folder (config.json, safetensors weights, tokenizer.json), or a LoRA adapter folder (adapter_config.json)',
      canSelectFiles: false,
      canSelectFolders: true,
      canSelectMany: false,
      openLabel: 'Train This Model',
      defaultUri: vscode.Uri.file(current || root),
    });
    if (!picked?.[0]) return undefined;
    model = await pickedModel(picked[0].fsPath, root, log);
  }
  if (pick.value !== 'embedded' && !model) return undefined;
  const dir = model?.dir ?? '';
  await remember('train.model', dir, '');
  return { dir, ...(model ? { model } : {}) };
}

/** Step 3: train the whole model, or a LoRA adapter on it (the block remembered as turnwise.train.lora). */
async function pickLora(step: string): Promise<Record<string, unknown> | null | undefined> {
  const set = config.lora();
  const block = set ?? DEFAULT_LORA;
  const l = checkedLora(block)!;
  const mods = l.target_modules.length === 7 ? 'all linear projections' : l.target_modules.join(', ');
  const items = [
    { label: '$(symbol-class) Whole model', description: `every weight trained; checkpoints are model folders${set ? '' : ' · turnwise.train.lora'}`, value: null },
    { label: '$(layers) LoRA adapter', description: `r ${l.r}, lora_alpha ${l.lora_alpha}, ${mods}${set ? ' · turnwise.train.lora' : ''}`, detail: 'only the adapter is trained, the model stays frozen; checkpoints are PEFT adapters (megabytes)', value: block },
  ];
  if (set) items.reverse();
  const pick = await vscode.window.showQuickPick(items, { title: `Start Training Run (${step}): adapter`, placeHolder: 'Train the whole model, or a LoRA adapter on it?' });
  if (!pick) return undefined;
  await remember('train.lora', pick.value, null);
  return pick.value;
}

async function pickStartOptions(root: string, log: CommandContext['log']): Promise<StartRunOptions | undefined> {
  const cfgFile = path.join(root, 'turnwise.json');
  if (fs.existsSync(cfgFile)) {
    const use = await vscode.window.showQuickPick(
      [
        { label: '$(file) Use turnwise.json', description: 'the workspace\'s run configuration', value: 'config' },
        { label: '$(settings) Choose tasks, estimator and iterations…', value: 'pick' },
      ],
      { title: 'Start Training Run', placeHolder: 'How should the run be configured?' },
    );
    if (!use) return undefined;
    if (use.value === 'config') return { config: cfgFile };
  }
  const synthFile = path.join(root, TASKS_DIR, 'synth.jsonl');
  const sources = [
    { label: '$(beaker) Synthesize bugs from the workspace', description: 'tree-sitter mutations your tests catch', value: 'synth' },
    { label: '$(testing-failed-icon) Failing tests of the workspace', description: 'one task per currently failing test', value: 'failing' },
    ...(fs.existsSync(synthFile) ? [{ label: '$(history) Tasks synthesized earlier', description: path.relative(root, synthFile), value: 'previous' }] : []),
    { label: '$(file) Task file (JSONL)…', value: 'file' },
  ];
  const source = await vscode.window.showQuickPick(sources, { title: 'Start Training Run (1/5): tasks', placeHolder: 'Where do the tasks come from?' });
  if (!source) return undefined;
  let tasks: string | undefined;
  if (source.value === 'previous') tasks = synthFile;
  else if (source.value === 'file') {
    const picked = await vscode.window.showOpenDialog({ title: 'Task file', canSelectMany: false, filters: { 'Task files': ['jsonl'] }, defaultUri: vscode.Uri.file(root) });
    if (!picked?.[0]) return undefined;
    tasks = picked[0].fsPath;
  } else tasks = `${source.value}:`;
  const picked = await pickModel(root, '2/5', log);
  if (picked === undefined) return undefined;
  const model = picked.dir;
  // An adapter picked as the model trains further with its own settings: no adapter step.
  const adapter = picked.model?.adapter;
  const lora = adapter ? services().adapterLoraBlock(adapter) : await pickLora('3/5');
  if (lora === undefined) return undefined;
  const current = config.estimator();
  const est = await vscode.window.showQuickPick(
    ESTIMATORS.map((e) => ({ label: e, description: e === current ? 'turnwise.train.estimator' : undefined, picked: e === current })),
    { title: 'Start Training Run (4/5): advantage estimator', placeHolder: `Estimator (setting: ${current})` },
  );
  if (!est) return undefined;
  const defIters = config.iterations();
  const iterItems = [...new Set([1, 3, defIters, 10, 30])].sort((a, b) => a - b).map((n) => ({ label: String(n), description: n === defIters ? 'turnwise.train.iterations' : undefined }));
  const iters = await vscode.window.showQuickPick([...iterItems, { label: 'Other…', description: undefined }], { title: 'Start Training Run (5/5): iterations' });
  if (!iters) return undefined;
  let iterations = Number(iters.label);
  if (iters.label === 'Other…') {
    const v = await vscode.window.showInputBox({ title: 'Iterations', value: String(defIters), validateInput: (s) => (/^[1-9]\d*$/.test(s.trim()) ? undefined : 'a whole number ≥ 1') });
    if (!v) return undefined;
    iterations = Number(v);
  }
  return { tasks, estimator: est.label as Estimator, iterations, model, lora };
}

export function registerCommands(ctx: CommandContext): vscode.Disposable[] {
  const { controller } = ctx;
  const reg = <A extends unknown[]>(id: string, fn: (...args: A) => Promise<unknown>) => vscode.commands.registerCommand(id, guarded(ctx, fn));

  /** Makes a task file from a source pick ("synth:" / "failing:"), through the CLI. */
  const materializeTasks = async (root: string, tasks: string): Promise<string> => {
    if (!tasks.endsWith(':')) return tasks;
    const kind = tasks.slice(0, -1);
    const out = path.join(root, TASKS_DIR, `${kind}.jsonl`);
    await controller.runCommand(kind === 'synth' ? 'synthesizing tasks from the workspace…' : 'collecting failing tests…', ['tasks', kind, '--workspace', root, '--out', out], root);
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
  };

  const startRun = async (opts?: StartRunOptions) => {
    const root = workspaceRoot('start a run');
    noActiveRun(ctx, 'start a run');
    await dockerReachable('start a run');
    const o = opts && (opts.tasks || opts.config) ? opts : { ...(await pickStartOptions(root, ctx.log)), detach: opts?.detach };
    if (!o || (!o.tasks && !o.config)) return undefined;
    let base: ReturnType<typeof readBaseConfig> | undefined;
    try {
      base = o.config ? readBaseConfig(o.config) : undefined;
    } catch (e) {
      throw new CannotRun(`cannot start a run from ${path.basename(o.config ?? '')}: ${(e as Error).message}`, [{ title: 'Open turnwise.json', command: 'vscode.open', args: [vscode.Uri.file(o.config ?? root)] }]);
    }
    const tasksFile = o.tasks ? await materializeTasks(root, o.tasks) : undefined;
    // Every setting reaches the run through one file under .turnwise/ (the CLI's --config).
    const launch = launchConfig({
      workspace: root,
      setting: config.inspect,
      base,
      choices: { ...(tasksFile ? { taskSource: 'file' as const, tasksFile } : {}), estimator: o.estimator, iterations: o.iterations, model: o.model, lora: o.lora },
    });
    // The model and adapter the run would load, checked before anything starts (picked, set, or from turnwise.json).
    const modelDir = typeof launch.model === 'string' ? launch.model : '';
    const model = modelDir ? checkedModel(modelDir) : undefined;
    // A run from an adapter trains that adapter with its own settings, whatever turnwise.train.lora says; its config.json records them.
    if (model?.adapter) launch.lora = services().adapterLoraBlock(model.adapter);
    checkedLora(launch.lora);
    ctx.log.info(`model: ${model ? `${model.dir} (${model.summary})` : 'the embedded turnwise-tiny'}${launch.lora ? `, ${model?.adapter ? 'continuing' : 'training'} a LoRA adapter ${JSON.stringify(launch.lora)}` : ''}`);
    const launchFile = writeLaunchConfig(root, launch);
    ctx.log.info(`launch config: ${launchFile}`);
    noActiveRun(ctx, 'start a run');
    const running = controller.startTraining(`training ${model ? path.basename(model.adapter?.base ?? model.dir) : 'turnwise-tiny'}${launch.lora ? ' + LoRA' : ''} (${String(launch.estimator)}${o.config ? ', turnwise.json' : ''})`, ['train', '--config', launchFile], root);
    ctx.tree.scheduleRefresh(1000);
    if (o.detach) {
      running.catch(() => {});
      return { started: true, launchFile };
    }
    return running;
  };

  const pickRun = async (filter: (r: RunSummary) => boolean, title: string, none: string): Promise<RunSummary | undefined> => {
    const root = workspaceRoot(title.toLowerCase());
    const runs = listRuns(runsRoot(root)).filter(filter);
    if (runs.length === 0) throw new CannotRun(none, [{ title: 'Start Training Run…', command: 'turnwise.startRun' }]);
    const pick = await vscode.window.showQuickPick(
      runs.map((r) => ({ label: r.runId, description: `${r.state}${r.lastCompleteIteration !== undefined ? ` · ${r.lastCompleteIteration}/${r.iterations ?? '?'} it` : ''}`, run: r })),
      { title },
    );
    return pick?.run;
  };

  const resumeRun = async (arg?: RunsNode | string) => {
    const root = workspaceRoot('resume a run');
    noActiveRun(ctx, 'resume a run');
    let dir: string | undefined;
    if (typeof arg === 'string') dir = arg;
    else if (arg && arg.kind === 'run') dir = arg.run.dir;
    else dir = (await pickRun((r) => r.state !== 'finished' && r.state !== 'running', 'Resume Run', 'there is no run to resume: every run of this workspace finished (or none was started).'))?.dir;
    if (!dir) return undefined;
    await dockerReachable('resume a run');
    // A resume takes the run's own workspace and settings from its config.json (the CLI refuses --workspace with it).
    return controller.startTraining(`resuming ${path.basename(dir)}`, ['train', '--resume', dir], root);
  };

  const openTrajectory = async (arg?: RunsNode | TrajectoryRef, turn?: number) => {
    let ref: TrajectoryRef | undefined;
    if (arg && 'kind' in arg && arg.kind === 'trajectory') ref = trajectoryRef(arg);
    else if (arg && 'trajId' in arg) ref = arg;
    else {
      const run = await pickRun(() => true, 'Open Trajectory: run', 'there are no runs in this workspace yet.');
      if (!run) return undefined;
      const its = listIterations(run.dir).filter((i) => i.trainFile || i.heldoutFile);
      const it = await vscode.window.showQuickPick(
        [...its].reverse().map((i) => ({ label: `Iteration ${i.iteration}`, description: i.metrics ? `pass ${pct(i.metrics['tests/pass_rate'] as number)} · reward ${formatSigned(i.metrics['reward/mean'] as number, 2)}` : 'in progress', it: i })),
        { title: 'Open Trajectory: iteration' },
      );
      if (!it) return undefined;
      const items: Array<vscode.QuickPickItem & { ref: TrajectoryRef }> = [];
      for (const [split, file] of [['train', it.it.trainFile], ['heldout', it.it.heldoutFile]] as const) {
        if (!file) continue;
        for (const s of (await ctx.tree.scans.scan(file)).summaries) {
          items.push({
            label: s.trajId,
            description: `${s.taskId}${split === 'heldout' ? ' (held-out)' : ''}`,
            detail: s.failure ? `unscored: ${s.failure}` : `reward ${formatSigned(s.reward, 2)} · pass ${pct(s.passRate)} · ${s.turns} turns${s.resolved ? ' · resolved' : ''}${s.tampered ? ' · tampered' : ''}`,
            ref: { runDir: run.dir, iteration: it.it.iteration, split, trajId: s.trajId, offset: s.offset, length: s.length },
          });
        }
      }
      const t = await vscode.window.showQuickPick(items, { title: 'Open Trajectory', matchOnDescription: true, matchOnDetail: true });
      ref = t?.ref;
    }
    if (!ref) return undefined;
    await TrajectoryPanel.show(ctx.extensionUri, ctx.editors, ref, turn);
    void vscode.commands.executeCommand('setContext', 'turnwise.trajectoryOpen', true);
    return ref;
  };

  const showRewardPanel = async (arg?: RunsNode | string) => {
    workspaceRoot('show the reward panel');
    const runId = typeof arg === 'string' ? arg : arg && 'run' in arg ? arg.run.runId : undefined;
    const panel = RewardPanel.show(ctx.extensionUri, { runDirs: ctx.runDirs }, ctx.tree.scans, runId);
    return { selected: panel.selected };
  };

  const synthesizeTasks = async () => {
    const root = workspaceRoot('synthesize tasks');
    await dockerReachable('synthesize tasks (each candidate bug is checked by running your tests in a sandbox)');
    const out = path.join(root, TASKS_DIR, 'synth.jsonl');
    await controller.runCommand('synthesizing tasks from the workspace…', ['tasks', 'synth', '--workspace', root, '--out', out], root);
    const n = countLines(out);
    if (n === 0) throw new CannotRun('no tasks were synthesized: no mutation of the workspace broke one of its tests. Check that the tests run (turnwise.tasks.testCommand).');
    void vscode.window.showInformationMessage(`Turnwise: ${n} task(s) written to ${path.relative(root, out)}.`, 'Start Training Run…', 'Open File').then((c) => {
      if (c === 'Open File') void vscode.window.showTextDocument(vscode.Uri.file(out));
      else if (c) void vscode.commands.executeCommand('turnwise.startRun');
    });
    return { tasks: out, count: n };
  };

  /** The endpoint to evaluate: the URL, the model (empty: the server's one) and the key's variable (empty: none). */
  const askEndpoint = async (last: RememberedEndpoint | undefined): Promise<RememberedEndpoint | undefined> => {
    const steps: { field: keyof RememberedEndpoint; title: string; prompt: string; placeHolder: string; validateInput?: (v: string) => string | undefined }[] = [
      { field: 'url', title: 'endpoint URL', prompt: 'An OpenAI-compatible server: vLLM, SGLang, llama.cpp, Ollama, a hosted API, or `turnwise serve`', placeHolder: 'http://127.0.0.1:8000/v1', validateInput: (v) => endpointUrlProblem(v) },
      { field: 'model', title: 'model', prompt: 'The model to ask the server for; empty: the one model the server lists', placeHolder: 'e.g. Qwen/Qwen2.5-Coder-7B-Instruct' },
      {
        field: 'keyEnv',
        title: 'API key variable',
        prompt: 'The name of the environment variable that holds the API key (the key itself is never asked for or stored); empty: a server that needs no key',
        placeHolder: 'e.g. OPENAI_API_KEY',
        validateInput: (v) => keyEnvProblem(v.trim(), process.env),
      },
    ];
    const answer: RememberedEndpoint = { url: '', model: '', keyEnv: '' };
    for (const [i, { field, title, ...box }] of steps.entries()) {
      const v = await vscode.window.showInputBox({ ...box, title: `Evaluate Policy: ${title} (${i + 1}/${steps.length})`, value: last?.[field] ?? '', ignoreFocusOut: true });
      if (v === undefined) return undefined;
      answer[field] = v.trim();
    }
    return answer;
  };

  const evaluatePolicy = async () => {
    const root = workspaceRoot('evaluate a policy');
    await dockerReachable('evaluate a policy');
    type Pick = vscode.QuickPickItem & ({ kind?: undefined; dir: string } | { kind?: undefined; endpoint: 'new' | 'last' });
    const checkpoints: Pick[] = [];
    for (const r of listRuns(runsRoot(root))) {
      const cdir = path.join(r.dir, 'checkpoints');
      let names: string[] = [];
      try {
        names = fs.readdirSync(cdir).filter((n) => /^\d+$/.test(n));
      } catch {
        continue;
      }
      for (const n of names.sort((a, b) => Number(b) - Number(a))) {
        const adapter = fs.existsSync(path.join(cdir, n, 'adapter_config.json'));
        checkpoints.push({ label: `${r.runId} · checkpoint ${n}`, description: [r.model?.label, adapter ? 'LoRA adapter' : undefined].filter(Boolean).join(' · ') || undefined, dir: path.join(cdir, n) });
      }
    }
    const memo = ctx.workspaceState;
    const last = memo?.get<RememberedEndpoint>(ENDPOINT_KEY);
    const endpoints: Pick[] = [
      ...(last ? [{ label: `$(cloud) ${last.model || "the server's model"} at ${last.url}`, description: last.keyEnv ? `key in $${last.keyEnv}` : 'no key', detail: 'the endpoint used last', endpoint: 'last' as const }] : []),
      { label: '$(cloud) Endpoint…', description: 'an OpenAI-compatible server: vLLM, SGLang, llama.cpp, Ollama, a hosted API, turnwise serve', endpoint: 'new' as const },
    ];
    const items: (Pick | vscode.QuickPickItem)[] = [
      ...endpoints,
      { label: checkpoints.length ? 'checkpoints' : 'no checkpoint yet: start a training run to evaluate one', kind: vscode.QuickPickItemKind.Separator },
      ...checkpoints,
    ];
    const picked = (await vscode.window.showQuickPick(items, { title: 'Evaluate Policy: a checkpoint or an endpoint' })) as Pick | undefined;
    if (!picked) return undefined;
    let target: { args: string[]; label: string };
    if ('endpoint' in picked) {
      let ep = picked.endpoint === 'last' ? last : await askEndpoint(last);
      if (!ep) return undefined;
      // The variable must be there now: the evaluation reads the key from the same environment.
      const problem = keyEnvProblem(ep.keyEnv, process.env);
      if (problem) {
        ep = await askEndpoint(ep);
        if (!ep) return undefined;
      }
      await memo?.update(ENDPOINT_KEY, ep);
      target = {
        args: ['--endpoint', ep.url, ...(ep.model ? ['--endpoint-model', ep.model] : []), ...(ep.keyEnv ? ['--endpoint-key-env', ep.keyEnv] : [])],
        label: `${ep.model || 'endpoint'}@${(() => {
          try {
            return new URL(ep.url).host;
          } catch {
            return 'server';
          }
        })()}`,
      };
    } else {
      target = { args: ['--model', picked.dir], label: picked.label.replace(' · checkpoint ', '-ckpt') };
    }
    // Sampled episodes per task for PASS@(k,T), the last choice first.
    const lastSamples = memo?.get<number>(SAMPLES_KEY) ?? 4;
    const sampleItems = [4, 8, 16, 2, 0]
      .sort((a, b) => (a === lastSamples ? -1 : b === lastSamples ? 1 : 0))
      .map((n) => ({ label: n ? `${n} sampled episodes per task` : 'Greedy only', description: n ? `PASS@(k,T) for k up to ${n}, besides the greedy episode` : 'one greedy episode per task; no PASS@(k,T)', n }));
    const samples = await vscode.window.showQuickPick(sampleItems, { title: 'Evaluate Policy: sampled episodes' });
    if (!samples) return undefined;
    await memo?.update(SAMPLES_KEY, samples.n);
    const synth = path.join(root, TASKS_DIR, 'synth.jsonl');
    const tasksPick = await vscode.window.showOpenDialog({ title: 'Evaluate Policy: task file', canSelectMany: false, filters: { 'Task files': ['jsonl'] }, defaultUri: vscode.Uri.file(fs.existsSync(synth) ? synth : root) });
    if (!tasksPick?.[0]) return undefined;
    // One results file per evaluation, where the reward panel's comparison finds it.
    const out = evalOutFile(root, target.label);
    const result = await controller.runCommand<{ resolved?: number; sampled?: { resolved?: number } }>(
      'evaluating…',
      ['eval', '--tasks', tasksPick[0].fsPath, ...target.args, ...(samples.n ? ['--samples', String(samples.n)] : []), '--out', out],
      root,
    );
    ctx.log.info(`evaluation: ${JSON.stringify(result)}`);
    const rel = path.relative(root, out);
    void vscode.window
      .showInformationMessage(`Turnwise: evaluation finished: resolved ${pct(result?.resolved)}${result?.sampled ? `, sampled ${pct(result.sampled.resolved)}` : ''}; results in ${rel}.`, 'Compare Evaluations', 'Show Log')
      .then((c) => {
        if (c === 'Compare Evaluations') void vscode.commands.executeCommand('turnwise.compareEvaluations', [out, ...(RewardPanel.instance?.selectedEvaluations ?? [])]);
        else if (c === 'Show Log') ctx.log.show(true);
      });
    return { ...result, out };
  };

  /** The reward panel's evaluations view: results files compared (a PASS@(k,T) heatmap per model). */
  const compareEvaluations = async (files?: string[]) => {
    workspaceRoot('compare evaluations');
    const chosen = Array.isArray(files) ? [...new Set(files.filter((f) => typeof f === 'string').map((f) => path.resolve(f)))] : undefined;
    const panel = RewardPanel.showEvaluations(ctx.extensionUri, { runDirs: ctx.runDirs }, ctx.tree.scans, chosen);
    return { view: panel.view, selected: panel.selectedEvaluations };
  };

  return [
    reg('turnwise.startRun', startRun),
    reg('turnwise.stopRun', async () => {
      if (!(await controller.stop())) throw new CannotRun('there is no run to stop: no training run is going in this window.');
      return true;
    }),
    reg('turnwise.resumeRun', resumeRun),
    reg('turnwise.synthesizeTasks', synthesizeTasks),
    reg('turnwise.evaluatePolicy', evaluatePolicy),
    reg('turnwise.compareEvaluations', compareEvaluations),
    reg('turnwise.buildImages', async () => {
      await dockerReachable('build the sandbox images');
      const r = await controller.runCommand('building sandbox images…', ['images', 'build'], workspaceRootOrHome());
      void vscode.window.showInformationMessage('Turnwise: sandbox images are ready.');
      return r;
    }),
    reg('turnwise.pruneSandboxes', async () => {
      await dockerReachable('prune sandboxes');
      const r = await controller.runCommand('removing leftover sandboxes…', ['sandbox', 'prune'], workspaceRootOrHome());
      const removed = (r as { removed?: unknown[] } | undefined)?.removed;
      void vscode.window.showInformationMessage(`Turnwise: ${Array.isArray(removed) ? `${removed.length} leftover sandbox(es) removed` : 'leftover sandboxes removed'}.`);
      return r;
    }),
    reg('turnwise.openTrajectory', openTrajectory),
    reg('turnwise.showRewardPanel', showRewardPanel),
    reg('turnwise.checkEnvironment', ctx.checkEnvironment),
    reg('turnwise.showLog', async () => ctx.log.show()),
    // Runs view
    reg('turnwise.runs.refresh', async () => ctx.tree.refresh()),
    reg('turnwise.runs.revealFolder', async (node?: RunsNode) => {
      if (!node || !('run' in node)) return;
      await vscode.commands.executeCommand('revealFileInOS', vscode.Uri.file(node.run.dir)).then(undefined, () => vscode.commands.executeCommand('revealInExplorer', vscode.Uri.file(node.run.dir)));
    }),
    reg('turnwise.runs.delete', async (node?: RunsNode, confirmed?: boolean) => {
      if (!node || node.kind !== 'run') return false;
      if (ctx.controller.current?.progress.runDir === node.run.dir || node.run.state === 'running') {
        throw new CannotRun(`cannot delete ${node.run.runId} because it is running: stop it first.`, [{ title: 'Stop Run', command: 'turnwise.stopRun' }]);
      }
      if (!confirmed) {
        const ok = await vscode.window.showWarningMessage(`Delete run ${node.run.runId}?`, { modal: true, detail: `Its folder ${node.run.dir} (trajectories, metrics, checkpoints) is deleted from disk.` }, 'Delete');
        if (ok !== 'Delete') return false;
      }
      await fs.promises.rm(node.run.dir, { recursive: true, force: true });
      ctx.tree.scans.invalidate(node.run.dir);
      ctx.tree.refresh();
      return true;
    }),
    // Trajectory viewer
    reg('turnwise.trajectory.nextTurn', async () => ctx.editors.step(1)),
    reg('turnwise.trajectory.previousTurn', async () => ctx.editors.step(-1)),
    reg('turnwise.trajectory.goToTurn', async (index: number) => ctx.editors.setTurn(index)),
    reg('turnwise.trajectory.showDiff', async (ref: TrajectoryRef, turn: number, file: string) => ctx.editors.showDiff(ref, turn, file)),
  ];
}

function workspaceRootOrHome(): string {
  return (vscode.workspace.workspaceFolders ?? []).find((x) => x.uri.scheme === 'file')?.uri.fsPath ?? process.env.HOME ?? '/';
}

function countLines(file: string): number {
  try {
    return fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.trim()).length;
  } catch {
    return 0;
  }
}
