// Start Training Run…'s questions (tasks, model, adapter, estimator, iterations), and the checks
// of the model and LoRA block a run would load, which refuse what cannot be trained with what to
// pick instead. The model and adapter picks are remembered as turnwise.train.model and .lora.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { services } from '../lazy';
import { config, ESTIMATORS, type Estimator } from '../config';
import { resolveModelSetting } from '../model/runModel';
import { CannotRun } from './cannotRun';
import type { CommandContext } from './context';
import { TASKS_DIR } from './taskFiles';

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
export function checkedModel(dir: string): CheckedModel {
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

export function checkedLora(value: unknown): ReturnType<ReturnType<typeof services>['checkLoraSetting']> {
  const { checkLoraSetting, ModelRefused } = services();
  try {
    return checkLoraSetting(value);
  } catch (e) {
    if (!(e instanceof ModelRefused)) throw e;
    throw new CannotRun(`cannot start a run with this LoRA block: ${e.message}. To fix: ${e.fix}.`, [
      { title: 'LoRA Setting', command: 'workbench.action.openSettings', args: ['turnwise.train.lora'] },
    ]);
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
    if (JSON.stringify(vscode.workspace.getConfiguration('turnwise').get(key) ?? cleared) !== JSON.stringify(cleared))
      await sec.update(key, cleared, target);
    return;
  }
  if (JSON.stringify(sec.get(key)) !== JSON.stringify(value)) await sec.update(key, value, target);
}

/**
 * Step 2 of Start Training Run: the embedded turnwise-tiny, a model folder or a LoRA adapter
 * folder (remembered as turnwise.train.model); '' for the embedded one.
 */
async function pickModel(
  root: string,
  step: string,
  log: CommandContext['log'],
): Promise<{ dir: string; model?: CheckedModel } | undefined> {
  const current = resolveModelSetting(root, config.model());
  type Item = vscode.QuickPickItem & { value: 'embedded' | 'current' | 'folder' };
  const items: Item[] = [
    {
      label: '$(package) Embedded turnwise-tiny',
      description: `3.2M parameters, Turnwise's own${current ? '' : ' · turnwise.train.model'}`,
      value: 'embedded',
    },
    ...(current
      ? [{ label: `$(folder) ${path.basename(current)}`, description: `${current} · turnwise.train.model`, value: 'current' as const }]
      : []),
    {
      label: '$(folder-opened) Model folder…',
      description: 'a Hugging Face checkpoint (Qwen2, Llama), a Turnwise model, or a LoRA adapter to train further',
      value: 'folder',
    },
  ];
  if (current) items.unshift(items.splice(1, 1)[0]);
  const pick = await vscode.window.showQuickPick(items, {
    title: `Start Training Run (${step}): model`,
    placeHolder: 'Which model does the run train?',
  });
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
    {
      label: '$(symbol-class) Whole model',
      description: `every weight trained; checkpoints are model folders${set ? '' : ' · turnwise.train.lora'}`,
      value: null,
    },
    {
      label: '$(layers) LoRA adapter',
      description: `r ${l.r}, lora_alpha ${l.lora_alpha}, ${mods}${set ? ' · turnwise.train.lora' : ''}`,
      detail: 'only the adapter is trained, the model stays frozen; checkpoints are PEFT adapters (megabytes)',
      value: block,
    },
  ];
  if (set) items.reverse();
  const pick = await vscode.window.showQuickPick(items, {
    title: `Start Training Run (${step}): adapter`,
    placeHolder: 'Train the whole model, or a LoRA adapter on it?',
  });
  if (!pick) return undefined;
  await remember('train.lora', pick.value, null);
  return pick.value;
}

/** Start Training Run…'s questions: turnwise.json, or tasks, model, adapter, estimator and iterations; undefined when the user cancels. */
export async function pickStartOptions(root: string, log: CommandContext['log']): Promise<StartRunOptions | undefined> {
  const cfgFile = path.join(root, 'turnwise.json');
  if (fs.existsSync(cfgFile)) {
    const use = await vscode.window.showQuickPick(
      [
        { label: '$(file) Use turnwise.json', description: "the workspace's run configuration", value: 'config' },
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
    {
      label: '$(testing-failed-icon) Failing tests of the workspace',
      description: 'one task per currently failing test',
      value: 'failing',
    },
    ...(fs.existsSync(synthFile)
      ? [{ label: '$(history) Tasks synthesized earlier', description: path.relative(root, synthFile), value: 'previous' }]
      : []),
    { label: '$(file) Task file (JSONL)…', value: 'file' },
  ];
  const source = await vscode.window.showQuickPick(sources, {
    title: 'Start Training Run (1/5): tasks',
    placeHolder: 'Where do the tasks come from?',
  });
  if (!source) return undefined;
  let tasks: string | undefined;
  if (source.value === 'previous') tasks = synthFile;
  else if (source.value === 'file') {
    const picked = await vscode.window.showOpenDialog({
      title: 'Task file',
      canSelectMany: false,
      filters: { 'Task files': ['jsonl'] },
      defaultUri: vscode.Uri.file(root),
    });
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
  const iterItems = [...new Set([1, 3, defIters, 10, 30])]
    .sort((a, b) => a - b)
    .map((n) => ({ label: String(n), description: n === defIters ? 'turnwise.train.iterations' : undefined }));
  const iters = await vscode.window.showQuickPick([...iterItems, { label: 'Other…', description: undefined }], {
    title: 'Start Training Run (5/5): iterations',
  });
  if (!iters) return undefined;
  let iterations = Number(iters.label);
  if (iters.label === 'Other…') {
    const v = await vscode.window.showInputBox({
      title: 'Iterations',
      value: String(defIters),
      validateInput: (s) => (/^[1-9]\d*$/.test(s.trim()) ? undefined : 'a whole number ≥ 1'),
    });
    if (!v) return undefined;
    iterations = Number(v);
  }
  return { tasks, estimator: est.label as Estimator, iterations, model, lora };
}
