// How the `turnwise.*` settings reach a training run: one table from every field of the CLI's
// TrainConfig to the setting that holds it (or to the Start command, which picks tasks), and the
// launch file written under <workspace>/.turnwise/ and passed to `turnwise train --config`.
// Plain Node (no vscode): unit-tested in test/unit/extension/.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { TrainConfig } from '../../train/config';

/** A TrainConfig field, with the reward weights spelled out (they are one object in the config). */
export type ConfigPath = Exclude<keyof TrainConfig, 'reward'> | `reward.${keyof TrainConfig['reward'] & string}`;

/** Fields the Start Training Run command sets from its quick picks, never from a setting. */
export const FROM_COMMAND = 'command';

/**
 * The setting (under `turnwise.`) that holds each config field. Typed over every field, so a
 * field added to TrainConfig does not compile here until it has a setting or is marked
 * FROM_COMMAND; package.json's settings are checked against this table by the unit tests.
 */
export const SETTING_FOR_FIELD: { readonly [K in ConfigPath]: string } = {
  workspace: FROM_COMMAND,
  taskSource: FROM_COMMAND,
  tasksFile: FROM_COMMAND,
  maxTasks: 'tasks.maxTasks',
  heldoutFraction: 'tasks.heldoutFraction',
  taskSeed: 'tasks.taskSeed',
  reuseTasks: 'tasks.reuseTasks',
  testCommand: 'tasks.testCommand',
  model: 'train.model',
  lora: 'train.lora',
  iterations: 'train.iterations',
  tasksPerIteration: 'train.tasksPerIteration',
  taskSampling: 'train.taskSampling',
  groupSize: 'train.groupSize',
  branchEpisodes: 'train.branchEpisodes',
  branchExploration: 'train.branchExploration',
  branchRedraws: 'train.branchRedraws',
  recoveryFeedback: 'train.recoveryFeedback',
  diagnosisWeights: 'train.diagnosisWeights',
  diagnosisCharges: 'train.diagnosisCharges',
  batchBaseline: 'train.batchBaseline',
  maxTurns: 'train.maxTurns',
  estimator: 'train.estimator',
  estimatorParams: 'train.estimatorParams',
  loss: 'train.loss',
  lossAggregation: 'train.lossAggregation',
  epochs: 'train.epochs',
  minibatches: 'train.minibatches',
  updateTokensPerStep: 'train.updateTokensPerStep',
  lr: 'train.learningRate',
  klCoef: 'train.klCoef',
  negativeAdvantageWeight: 'train.negativeAdvantageWeight',
  replayCoef: 'train.replayCoef',
  replayRows: 'train.replayRows',
  entCoef: 'train.entCoef',
  clipLow: 'train.clipLow',
  clipHigh: 'train.clipHigh',
  evalEvery: 'train.evalEvery',
  evalSamples: 'train.evalSamples',
  maxMinutes: 'train.maxMinutes',
  seed: 'train.seed',
  temperature: 'policy.temperature',
  topP: 'policy.topP',
  maxActionTokens: 'policy.maxActionTokens',
  executionProvider: 'executionProvider',
  packDecodeWeights: 'packDecodeWeights',
  rolloutPrecision: 'rolloutPrecision',
  samplerRatioCap: 'samplerRatioCap',
  'reward.efficiency': 'reward.efficiencyPenalty',
  'reward.format': 'reward.formatPenalty',
  'reward.repeat': 'reward.repeatPenalty',
  commandTimeoutMs: 'sandbox.commandTimeoutMs',
  testTimeoutMs: 'sandbox.testTimeoutMs',
  concurrency: 'sandbox.concurrency',
  commandConcurrency: 'sandbox.commandConcurrency',
  batchWaitMs: 'policy.batchWaitMs',
  cacheObservations: 'sandbox.cacheObservations',
  dockerHost: 'docker.host',
  dockerHosts: 'docker.hosts',
  sandboxImage: 'sandbox.image',
  sandboxMemoryMb: 'sandbox.memoryMb',
  sandboxCpus: 'sandbox.cpus',
  sandboxPids: 'sandbox.pids',
};

/** [setting key without `turnwise.`, config field] for every field a setting holds. */
export function settingFields(): Array<[setting: string, field: ConfigPath]> {
  return (Object.entries(SETTING_FOR_FIELD) as Array<[ConfigPath, string]>).filter(([, s]) => s !== FROM_COMMAND).map(([f, s]) => [s, f]);
}

/** One setting as VS Code's `inspect()` sees it: its default, and the value the user set (any scope). */
export interface SettingValue {
  defaultValue: unknown;
  /** undefined when the user set nothing (the default applies). */
  userValue: unknown;
}

export interface LaunchChoices {
  taskSource?: TrainConfig['taskSource'];
  tasksFile?: string;
  estimator?: string;
  iterations?: number;
  /** The model folder picked; '' for the embedded turnwise-tiny. */
  model?: string;
  /** The LoRA block picked; null to train the whole model. */
  lora?: Record<string, unknown> | null;
}

export interface LaunchConfigInput {
  /** The workspace folder the run trains on. */
  workspace: string;
  /** Reads one setting by its key under `turnwise.`. */
  setting: (key: string) => SettingValue;
  /** The workspace's turnwise.json, when the user chose it: its path and parsed content. */
  base?: { file: string; values: Record<string, unknown> };
  /** What the quick picks chose. */
  choices?: LaunchChoices;
}

const isSet = (v: unknown) => v !== undefined && v !== null;

/**
 * The config a run starts with, every field present. Layers, lowest first: each setting's
 * default (the same as the CLI's TRAIN_DEFAULTS), turnwise.json when chosen, the settings the
 * user set, then the quick picks. Paths are absolute (the file lives under .turnwise/).
 */
export function launchConfig(input: LaunchConfigInput): Record<string, unknown> {
  const base = input.base ? resolveBasePaths(input.base.file, input.base.values) : {};
  const out: Record<string, unknown> = {};
  const reward: Record<string, unknown> = { ...((base.reward as Record<string, unknown> | undefined) ?? {}) };
  for (const [key, field] of settingFields()) {
    const s = input.setting(key);
    const fromBase = field.startsWith('reward.') ? reward[field.slice('reward.'.length)] : base[field];
    const v = isSet(s.userValue) ? s.userValue : isSet(fromBase) ? fromBase : s.defaultValue;
    if (field.startsWith('reward.')) reward[field.slice('reward.'.length)] = v;
    else out[field] = v;
  }
  out.reward = reward;
  out.workspace = typeof base.workspace === 'string' ? base.workspace : input.workspace;
  out.taskSource = base.taskSource ?? 'mutation';
  if (typeof base.tasksFile === 'string') out.tasksFile = base.tasksFile;
  const c = input.choices ?? {};
  if (c.taskSource) out.taskSource = c.taskSource;
  if (c.tasksFile) out.tasksFile = path.resolve(input.workspace, c.tasksFile);
  if (out.taskSource !== 'file') delete out.tasksFile;
  if (c.estimator && c.estimator !== out.estimator) {
    // The parameters set are those of the other estimator (which refuses unknown names): the
    // estimator picked for this run starts from its own defaults.
    out.estimator = c.estimator;
    out.estimatorParams = {};
  }
  if (c.iterations !== undefined) out.iterations = c.iterations;
  if (c.model !== undefined) out.model = c.model;
  if (c.lora !== undefined) out.lora = c.lora;
  if (typeof out.model === 'string' && out.model) out.model = path.resolve(input.workspace, out.model);
  return out;
}

/** turnwise.json's paths are relative to its folder (as the CLI reads them). */
function resolveBasePaths(file: string, values: Record<string, unknown>): Record<string, unknown> {
  const v = { ...values };
  for (const k of ['workspace', 'tasksFile', 'model']) {
    if (typeof v[k] === 'string' && v[k] !== '' && !path.isAbsolute(v[k] as string))
      v[k] = path.resolve(path.dirname(file), v[k] as string);
  }
  delete v.schema;
  return v;
}

/** Where launch files go: the run state folder of the workspace, never among the user's files. */
export function launchDir(workspace: string): string {
  return path.join(workspace, '.turnwise');
}

/** Launch files kept per workspace: a run copies its whole config into its run directory, so older ones are only history. */
export const LAUNCH_FILES_KEPT = 20;

/**
 * Writes the launch config to <workspace>/.turnwise/launch-<time>.json (temp file + rename) and
 * returns its path. `now` names the file; a second launch in the same second gets a suffix.
 * Launch files beyond the newest LAUNCH_FILES_KEPT are removed.
 */
export function writeLaunchConfig(workspace: string, cfg: Record<string, unknown>, now = new Date(), keep = LAUNCH_FILES_KEPT): string {
  const dir = launchDir(workspace);
  fs.mkdirSync(dir, { recursive: true });
  const stamp = now.toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
  // Same second: the next suffix after the highest in use (not the first free one, which pruning
  // may have freed: the file would sort before its elders and be pruned at once).
  const taken = launchFiles(dir)
    .filter((f) => f.stamp === stamp)
    .map((f) => f.n);
  const next = taken.length ? Math.max(...taken) + 1 : 1;
  const file = path.join(dir, next === 1 ? `launch-${stamp}.json` : `launch-${stamp}-${next}.json`);
  const tmp = `${file}.tmp-${process.pid}`;
  fs.writeFileSync(tmp, `${JSON.stringify(cfg, null, 2)}\n`);
  fs.renameSync(tmp, file);
  pruneLaunchFiles(dir, keep);
  return file;
}

/** The launch files of `dir`, oldest first: by time stamp, then a same-second file's suffix (the base counts as 1). */
function launchFiles(dir: string): { name: string; stamp: string; n: number }[] {
  return fs
    .readdirSync(dir)
    .flatMap((name) => {
      const m = /^launch-(\d{8}-\d{6})(?:-(\d+))?\.json$/.exec(name);
      return m ? [{ name, stamp: m[1], n: Number(m[2] ?? 1) }] : [];
    })
    .sort((a, b) => (a.stamp < b.stamp ? -1 : a.stamp > b.stamp ? 1 : a.n - b.n));
}

/** Removes all but the newest `keep` launch files of `dir`. */
function pruneLaunchFiles(dir: string, keep: number): void {
  const files = launchFiles(dir);
  for (const f of files.slice(0, Math.max(0, files.length - keep))) fs.rmSync(path.join(dir, f.name), { force: true });
}

/** Parses the workspace's turnwise.json for launchConfig's `base`; the error names the file. */
export function readBaseConfig(file: string): { file: string; values: Record<string, unknown> } {
  const text = fs.readFileSync(file, 'utf8');
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new Error(`${file} is not valid JSON (${(e as Error).message}): fix it, or choose tasks, estimator and iterations instead`, {
      cause: e,
    });
  }
  if (!v || typeof v !== 'object' || Array.isArray(v)) throw new Error(`${file} must hold one JSON object`);
  return { file, values: v as Record<string, unknown> };
}
