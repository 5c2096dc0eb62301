// The training run's configuration (`turnwise.json`, CLI flags on top): every field with its
// default and a one-line meaning, validated by name; an unknown field, estimator or loss is an
// error that lists the valid ones. The resolved config is written to the run's config.json.
import { parseLoraConfig, type LoraConfig } from '../policy/files/lora';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { TurnwiseError } from '../core/errors';
import type { RunDir } from '../core/run';
import { LOSS_NAMES, POLICY_LOSSES, RL_LOSS_NAMES, type RlLossName } from '../core/losses';
import { SCHEMA } from '../core/schema';
// The credit index, not the registry: importing it registers the estimators.
import { estimatorNames, getEstimator, resolveParams } from '../credit';
import type { Params } from '../credit/types';
import { DEFAULT_REWARD_WEIGHTS } from '../tasks/reward';
import { parseEngineSpecs, SandboxPool, type EngineSpec } from '../sandbox/pool';
import type { SandboxLimits } from '../sandbox/types';
import { TASK_SAMPLINGS, type TaskSampling } from './task-picking';
import { FAILURE_LABELS } from '../agent/diagnosis';

/** How the policy update weighs action tokens (TrainConfig.lossAggregation). */
export const LOSS_AGGREGATIONS = ['token', 'episode'] as const;
export type LossAggregation = (typeof LOSS_AGGREGATIONS)[number];

export interface TrainConfig {
  /** The workspace the tasks come from (never modified). */
  workspace: string;
  /** `mutation`: synthesized bugs; `failing-tests`: the currently failing tests; `file`: `tasksFile`. */
  taskSource: 'mutation' | 'failing-tests' | 'file';
  tasksFile?: string;
  /** Most tasks synthesized (mutation source). */
  maxTasks: number;
  /** Fraction of tasks held out for evaluation (never trained on). */
  heldoutFraction: number;
  /**
   * Reuse the tasks a run already made from the same workspace content (snapshot hash), test
   * runner and task settings, kept under ~/.cache/turnwise/tasks (tasks/cache.ts); false makes them again.
   */
  reuseTasks: boolean;
  /** Starting checkpoint; empty: the embedded warm-started turnwise-tiny. */
  model: string;
  iterations: number;
  /** Train tasks sampled per iteration. */
  tasksPerIteration: number;
  /**
   * How an iteration draws its train tasks (train/task-picking.ts). `uniform`: a seeded shuffle.
   * `informative`: a task whose latest groups went alike (all episodes resolved, or none: no
   * signal about the fix) is drawn half as often per such group in a row, down to 1/16.
   */
  taskSampling: TaskSampling;
  /** Rollouts per task (G). */
  groupSize: number;
  /**
   * Episodes per iteration spent on branches (train/branching.ts): after the first groups, tasks
   * whose episodes all ended alike get these as continuations from intermediate turns of their own
   * episodes (the commands before replayed in a fresh sandbox), where the policy was least sure,
   * split by how often each task's earlier branches ended otherwise. 0: none.
   */
  branchEpisodes: number;
  /** Exploration weight of the branch-point rule (an upper confidence bound over a group's states; 0: uncertainty only). */
  branchExploration: number;
  /**
   * Draws a branch's first own turn may take to write an action its group has not written in that
   * state (agent/episode.ts BranchPrefix): a branch that repeats its parent's action mostly repeats
   * its outcome. 0: one draw, whatever it writes.
   */
  branchRedraws: number;
  /**
   * Recovery feedback in training rollouts (agent/episode.ts): a command that repeats one of the
   * episode's that failed gets a line saying so, and a first submit with no passing test since the
   * last edit is answered with a line instead of ending the episode. Held-out evaluations never
   * get it. Off until measured.
   */
  recoveryFeedback: boolean;
  /**
   * Diagnosis-guided reweighting: a turn with a failure label (agent/diagnosis.ts) and a negative
   * advantage has it multiplied by the label's weight here (the largest of its labels'), so the
   * update pushes harder against the named mistakes. {}: off (every weight 1).
   */
  diagnosisWeights: Record<string, number>;
  /**
   * Diagnosis charges: a turn with a failure label in an unresolved episode has the label's
   * charge subtracted from its advantage (the largest of its labels'), whatever the advantage
   * was, so a mistake the group baseline leaves at 0 (a giving-up submit in a group that all
   * failed) is still pushed down. {}: off.
   */
  diagnosisCharges: Record<string, number>;
  /**
   * Weight of the batch term (train/batch-baseline.ts): every turn of an episode gains
   * batchBaseline · (its test score − the iteration's mean) / 0.5, so what resolved is reinforced
   * in groups whose episodes all resolved too, where the group baselines give it nothing. 0: off.
   */
  batchBaseline: number;
  maxTurns: number;
  commandTimeoutMs: number;
  /**
   * Time limit of the test run that scores an episode (and of the reward canary's runs), in
   * milliseconds. A run past it scores as failing: set it well above the suite's time on a loaded
   * machine (`tasks synth` prints the suite's time per run).
   */
  testTimeoutMs: number;
  /** Episodes in flight (sandboxes held) at once. */
  concurrency: number;
  /**
   * Agent commands (and scoring test runs) running at once across the episodes; one that waits for
   * a slot has not started its time limit. 0 (auto): the local machine's cores / sandboxCpus when
   * the sandboxes run on the local engine, no limit on remote engines (say how many they hold).
   */
  commandConcurrency: number;
  /**
   * Milliseconds a batch of action requests that is not full may wait for episodes still running
   * commands (fuller batches cost less model time per action where the cores are busy); 0: a
   * batch goes as soon as the model is free.
   */
  batchWaitMs: number;
  /**
   * Replay the observation of a read-only tool command (`tw-suspects`, `tw-test`) that already ran
   * on an identical workspace in this run instead of running it again (agent/cache.ts). Turn off
   * for a test suite whose output varies between identical runs.
   */
  cacheObservations: boolean;
  estimator: string;
  estimatorParams: Params;
  loss: RlLossName;
  epochs: number;
  minibatches: number;
  /**
   * Most tokens (rows × row length) the update reads at once: a minibatch over it is read in
   * micro-batches of whole rows (at least one) whose gradients add up to one optimizer step, the
   * same step as one pass over the minibatch, in the memory of one micro-batch. 0: the largest
   * of 4096 … 256 tokens that the run's memory plan fits in the machine's memory (policy/model/memory.ts).
   */
  updateTokensPerStep: number;
  lr: number;
  klCoef: number;
  entCoef: number;
  /**
   * Weight of negative advantages in the update (1: as the estimator gave them; 0: only actions
   * that did better than their baseline are reinforced, as in filtered behaviour cloning). The
   * trajectories keep the estimator's advantages.
   */
  negativeAdvantageWeight: number;
  /**
   * How the update weighs action tokens. `token`: every action token of the update counts the
   * same, so an episode's weight grows with its turns and tokens. `episode`: each episode's action
   * tokens share one equal weight (its token mean, then the mean over episodes). Failed episodes
   * run more turns than resolved ones; under `token` the text every action shares (paths, the
   * end-of-turn token) then gets a net push down even where the group's advantages sum to zero.
   */
  lossAggregation: LossAggregation;
  /**
   * Weight of the replay term (PPO-ptx): each update minibatch also carries `replayRows` generated
   * warm-start demonstrations (train/replay.ts), and replayCoef times their weighted mean NLL joins
   * the loss, so RL on a few tasks does not trade away the skills the warm start taught. 0: off.
   */
  replayCoef: number;
  /** Demonstration rows per update minibatch when replayCoef > 0. */
  replayRows: number;
  clipLow: number;
  clipHigh: number;
  temperature: number;
  topP: number;
  /** Tokens an action may take. */
  maxActionTokens: number;
  reward: { efficiency: number; format: number; repeat: number };
  /** Evaluate held-out tasks every N iterations (and at 0 and the last). 0: only at 0 and the end. */
  evalEvery: number;
  /**
   * Extra held-out episodes per task per evaluation, sampled at `temperature` with seeds that stay
   * the same across iterations (common random numbers); 0: greedy episodes only.
   */
  evalSamples: number;
  /**
   * Time budget in minutes, counted from the first RL iteration of each start of the run: once an
   * iteration ends and another as long as the slowest so far, with the evaluation that would end
   * the run, would pass it, that iteration is evaluated and the run stops (state stopped,
   * resumable). 0: none.
   */
  maxMinutes: number;
  /**
   * The run's random seed: rollout sampling, task order per iteration, minibatches, replay draws.
   * Not the held-out evaluations', which draw from taskSeed (train/evaluate.ts evaluationSeed).
   */
  seed: number;
  /**
   * Seed of the task synthesis, of the train / held-out split and of the held-out evaluations'
   * episodes, apart from `seed` so that runs that differ only in `seed` train and evaluate on the
   * same tasks with the same episode seeds (their held-out rates and paired episodes then compare). The embedded policy's demonstrations came from the train split
   * of taskSeed 0.
   */
  taskSeed: number;
  executionProvider: 'auto' | 'cpu' | 'cuda' | 'webgpu';
  /**
   * Whether CPU decode steps hold the weights packed in their session (a second copy of the
   * weights while sampling, faster over several episodes; policy/inference/policy.ts). `auto`: for 256 MB
   * of weights or more, where the run's memory plan with the copy fits (an evaluation's: the
   * weights twice, its episodes' caches and the runtime).
   */
  packDecodeWeights: 'auto' | 'on' | 'off';
  /**
   * What the decode steps of rollouts read the base weights as: float32; on the CPU and WebGPU
   * int8 / int4 blocks quantized once per weights version (policy/model/quantize.ts); on a GPU
   * provider float16 products. Scoring and the update stay float32, and the update corrects for the sampler's
   * difference (samplerRatioCap). `auto`: the measured rule (rolloutPrecisionFor).
   */
  rolloutPrecision: 'auto' | 'float32' | 'float16' | 'int8' | 'int4';
  /**
   * With quantized rollouts: the cap on each action token's importance weight p_float / p_sampler,
   * which multiplies its advantage (truncated importance sampling).
   */
  samplerRatioCap: number;
  /** Docker engine host (empty: DOCKER_HOST or the local socket). */
  dockerHost: string;
  /** More engines, `HOST*CAPACITY` each: sandboxes are spread over all of them (with dockerHost). */
  dockerHosts: string[];
  /** Image the workspace snapshot is layered on (empty: Turnwise's image for the language). */
  sandboxImage: string;
  /** Per-sandbox limits. */
  sandboxMemoryMb: number;
  sandboxCpus: number;
  sandboxPids: number;
  /** Test command override (empty: detected). */
  testCommand: string;
  /**
   * Train a LoRA adapter on the model instead of the model itself (PEFT's fields: r, lora_alpha,
   * target_modules, use_rslora); the run's checkpoints are then adapters over `model`.
   */
  lora?: LoraConfig;
}

export const TRAIN_DEFAULTS: TrainConfig = {
  workspace: '.',
  taskSource: 'mutation',
  maxTasks: 32,
  heldoutFraction: 0.25,
  reuseTasks: true,
  model: '',
  iterations: 4,
  tasksPerIteration: 6,
  taskSampling: 'uniform',
  groupSize: 4,
  branchEpisodes: 8,
  branchExploration: 1,
  branchRedraws: 0,
  recoveryFeedback: false,
  diagnosisWeights: {},
  diagnosisCharges: {},
  batchBaseline: 0,
  maxTurns: 6,
  commandTimeoutMs: 20_000,
  testTimeoutMs: 120_000,
  concurrency: 8,
  commandConcurrency: 0,
  batchWaitMs: 0,
  cacheObservations: true,
  estimator: 'turnwise',
  estimatorParams: {},
  loss: 'ppo-token',
  epochs: 1,
  minibatches: 4,
  updateTokensPerStep: 0,
  lr: 1e-4,
  klCoef: 0.03,
  entCoef: 0,
  negativeAdvantageWeight: 1,
  lossAggregation: 'token',
  replayCoef: 0,
  replayRows: 4,
  clipLow: 0.2,
  clipHigh: 0.28,
  temperature: 1,
  topP: 1,
  maxActionTokens: 128,
  reward: { ...DEFAULT_REWARD_WEIGHTS },
  evalEvery: 1,
  evalSamples: 0,
  maxMinutes: 0,
  seed: 0,
  taskSeed: 0,
  executionProvider: 'auto',
  packDecodeWeights: 'auto',
  rolloutPrecision: 'auto',
  samplerRatioCap: 2,
  dockerHost: '',
  dockerHosts: [],
  sandboxImage: '',
  sandboxMemoryMb: 2048,
  sandboxCpus: 1,
  sandboxPids: 256,
  testCommand: '',
};

/**
 * The demo's settings (`turnwise demo`, and `bench learn`, which compares estimators on them):
 * sized to stay well inside the 20 minutes the demo may take on 2 CPU cores (about 2 min per
 * iteration there, held-out evaluation included).
 */
export const DEMO_SETTINGS: Partial<TrainConfig> = {
  maxTasks: 32,
  heldoutFraction: 0.25,
  iterations: 4,
  tasksPerIteration: 6,
  groupSize: 4,
  maxTurns: 6,
  concurrency: 6,
  estimator: 'turnwise',
  minibatches: 4,
  // 8 held-out tasks move the greedy rate in steps of 12.5%: 2 sampled episodes each as well
  // (4 would take the demo to about 20 minutes on 2 cores).
  evalSamples: 2,
};

const bad = (msg: string, hint: string) => new TurnwiseError('invalid-input', msg, { hint });

function checkNumber(key: string, v: unknown, lo: number, hi: number, integer = false): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < lo || v > hi || (integer && !Number.isInteger(v))) {
    throw bad(
      `config field "${key}" must be ${integer ? 'an integer' : 'a number'} in [${lo}, ${hi}], got ${JSON.stringify(v)}`,
      `fix "${key}" in the config`,
    );
  }
  return v;
}

/**
 * Overlays `given` (parsed turnwise.json and flags) on the defaults and validates every field.
 * `source` names where the values came from, for messages.
 */
export function resolveTrainConfig(given: Record<string, unknown>, source = 'the config'): TrainConfig {
  try {
    return resolveFields(given, source);
  } catch (e) {
    // Every message names where the bad value is (a run's config.json, turnwise.json, the flags).
    if (e instanceof TurnwiseError && !e.message.includes(source))
      throw new TurnwiseError(e.code, `${source}: ${e.message}`, { hint: e.hint, cause: e });
    throw e;
  }
}

function resolveFields(given: Record<string, unknown>, source: string): TrainConfig {
  if (given === null || typeof given !== 'object' || Array.isArray(given))
    throw bad(`${source} must be a JSON object`, 'see docs/configuration.md for the fields of turnwise.json');
  // tasksFile and lora are the optional fields (no default), so they are not among TRAIN_DEFAULTS' keys.
  const known = new Set([...Object.keys(TRAIN_DEFAULTS), 'tasksFile', 'lora']);
  const unknown = Object.keys(given).filter((k) => !known.has(k) && k !== 'schema' && given[k] !== undefined);
  if (unknown.length) {
    throw bad(
      `${source} has unknown field${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => JSON.stringify(k)).join(', ')}`,
      `valid fields: ${[...known].join(', ')}`,
    );
  }
  const c = { ...TRAIN_DEFAULTS, ...Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined)) } as TrainConfig;
  if (given.lora === null) delete c.lora;
  else if (given.lora !== undefined) c.lora = parseLoraConfig(given.lora, `${source} field "lora"`);
  c.reward = { ...DEFAULT_REWARD_WEIGHTS, ...((given.reward as object) ?? {}) };
  for (const k of Object.keys(c.reward))
    if (!(k in DEFAULT_REWARD_WEIGHTS))
      throw bad(`${source}: unknown reward field "${k}"`, `valid: ${Object.keys(DEFAULT_REWARD_WEIGHTS).join(', ')}`);
  for (const k of ['workspace', 'model', 'dockerHost', 'testCommand', 'sandboxImage'] as const)
    if (typeof c[k] !== 'string') throw bad(`config field "${k}" must be a string`, `fix "${k}"`);
  if (!Array.isArray(c.dockerHosts) || c.dockerHosts.some((h) => typeof h !== 'string'))
    throw bad('config field "dockerHosts" must be a list of strings', 'e.g. ["ssh://me@box*16"]');
  for (const k of ['cacheObservations', 'reuseTasks'] as const)
    if (typeof c[k] !== 'boolean') throw bad(`config field "${k}" must be true or false, got ${JSON.stringify(c[k])}`, `fix "${k}"`);
  checkNumber('sandboxMemoryMb', c.sandboxMemoryMb, 64, 1024 * 1024, true);
  checkNumber('sandboxCpus', c.sandboxCpus, 0.1, 1024);
  checkNumber('sandboxPids', c.sandboxPids, 16, 1_000_000, true);
  if (!['mutation', 'failing-tests', 'file'].includes(c.taskSource))
    throw bad(`config field "taskSource" must be mutation, failing-tests or file, got ${JSON.stringify(c.taskSource)}`, 'fix "taskSource"');
  if (c.tasksFile !== undefined && typeof c.tasksFile !== 'string')
    throw bad('config field "tasksFile" must be a string', 'fix "tasksFile"');
  if (c.taskSource === 'file' && !c.tasksFile)
    throw bad('taskSource "file" needs "tasksFile"', 'set "tasksFile" to a JSONL task file (`turnwise tasks synth --out`)');
  checkNumber('maxTasks', c.maxTasks, 1, 10_000, true);
  checkNumber('heldoutFraction', c.heldoutFraction, 0, 0.9);
  checkNumber('iterations', c.iterations, 0, 100_000, true);
  checkNumber('tasksPerIteration', c.tasksPerIteration, 1, 10_000, true);
  checkNumber('groupSize', c.groupSize, 1, 256, true);
  checkNumber('branchEpisodes', c.branchEpisodes, 0, 100_000, true);
  checkNumber('branchExploration', c.branchExploration, 0, 100);
  checkNumber('branchRedraws', c.branchRedraws, 0, 64, true);
  if (typeof c.recoveryFeedback !== 'boolean')
    throw bad(`config field "recoveryFeedback" must be true or false, got ${JSON.stringify(c.recoveryFeedback)}`, 'fix "recoveryFeedback"');
  // Failure label → number maps: diagnosisWeights (multiplied in) and diagnosisCharges (subtracted).
  for (const [field, max, example] of [
    ['diagnosisWeights', 100, '{"repeated-failed-action": 2}'],
    ['diagnosisCharges', 10, '{"submit-without-pass": 0.5}'],
  ] as const) {
    const m = c[field];
    if (typeof m !== 'object' || m === null || Array.isArray(m))
      throw bad(
        `config field "${field}" must be an object of failure label → ${field === 'diagnosisWeights' ? 'weight' : 'charge'}`,
        `e.g. ${example}`,
      );
    for (const [k, v] of Object.entries(m)) {
      if (!(FAILURE_LABELS as readonly string[]).includes(k))
        throw bad(`config field "${field}" names an unknown failure label ${JSON.stringify(k)}`, `labels: ${FAILURE_LABELS.join(', ')}`);
      checkNumber(`${field}.${k}`, v, 0, max);
    }
  }
  checkNumber('batchBaseline', c.batchBaseline, 0, 10);
  checkNumber('maxTurns', c.maxTurns, 1, 100, true);
  checkNumber('commandTimeoutMs', c.commandTimeoutMs, 100, 3_600_000, true);
  checkNumber('testTimeoutMs', c.testTimeoutMs, 1_000, 3_600_000, true);
  checkNumber('concurrency', c.concurrency, 1, 256, true);
  checkNumber('commandConcurrency', c.commandConcurrency, 0, 4096, true);
  checkNumber('epochs', c.epochs, 1, 100, true);
  checkNumber('minibatches', c.minibatches, 1, 1000, true);
  checkNumber('updateTokensPerStep', c.updateTokensPerStep, 0, 1_048_576, true);
  if (c.updateTokensPerStep > 0 && c.updateTokensPerStep < 64)
    throw bad(
      `config field "updateTokensPerStep" must be 0 (from the memory plan) or at least 64 tokens, got ${c.updateTokensPerStep}`,
      'fix "updateTokensPerStep" (e.g. 2048, or 0)',
    );
  checkNumber('lr', c.lr, 0, 1);
  checkNumber('klCoef', c.klCoef, 0, 100);
  checkNumber('entCoef', c.entCoef, 0, 100);
  checkNumber('negativeAdvantageWeight', c.negativeAdvantageWeight, 0, 1);
  checkNumber('replayCoef', c.replayCoef, 0, 100);
  checkNumber('replayRows', c.replayRows, 1, 256, true);
  if (!(TASK_SAMPLINGS as readonly string[]).includes(c.taskSampling))
    throw bad(
      `config field "taskSampling" must be ${TASK_SAMPLINGS.join(' or ')}, got ${JSON.stringify(c.taskSampling)}`,
      'fix "taskSampling"',
    );
  if (!(LOSS_AGGREGATIONS as readonly string[]).includes(c.lossAggregation))
    throw bad(
      `config field "lossAggregation" must be ${LOSS_AGGREGATIONS.join(' or ')}, got ${JSON.stringify(c.lossAggregation)}`,
      'fix "lossAggregation"',
    );
  checkNumber('clipLow', c.clipLow, 0, 1);
  checkNumber('clipHigh', c.clipHigh, 0, 10);
  checkNumber('temperature', c.temperature, 0.01, 10);
  checkNumber('topP', c.topP, 0.01, 1);
  checkNumber('maxActionTokens', c.maxActionTokens, 8, 512, true);
  checkNumber('evalEvery', c.evalEvery, 0, 100_000, true);
  checkNumber('evalSamples', c.evalSamples, 0, 64, true);
  checkNumber('maxMinutes', c.maxMinutes, 0, 1_000_000);
  checkNumber('batchWaitMs', c.batchWaitMs, 0, 60_000, true);
  checkNumber('seed', c.seed, 0, 2 ** 32 - 1, true);
  checkNumber('taskSeed', c.taskSeed, 0, 2 ** 32 - 1, true);
  checkNumber('reward.efficiency', c.reward.efficiency, 0, 10);
  checkNumber('reward.format', c.reward.format, 0, 10);
  checkNumber('reward.repeat', c.reward.repeat, 0, 10);
  checkNumber('samplerRatioCap', c.samplerRatioCap, 1, 100);
  if (!['auto', 'float32', 'float16', 'int8', 'int4'].includes(c.rolloutPrecision))
    throw bad(
      `config field "rolloutPrecision" must be auto, float32, float16, int8 or int4, got ${JSON.stringify(c.rolloutPrecision)}`,
      'fix "rolloutPrecision"',
    );
  if (!['auto', 'on', 'off'].includes(c.packDecodeWeights))
    throw bad(
      `config field "packDecodeWeights" must be auto, on or off, got ${JSON.stringify(c.packDecodeWeights)}`,
      'fix "packDecodeWeights"',
    );
  if (!['auto', 'cpu', 'cuda', 'webgpu'].includes(c.executionProvider))
    throw bad(
      `config field "executionProvider" must be auto, cpu, cuda or webgpu, got ${JSON.stringify(c.executionProvider)}`,
      'fix "executionProvider"',
    );
  if (!estimatorNames().includes(c.estimator))
    throw bad(`unknown estimator ${JSON.stringify(c.estimator)}`, `use one of: ${estimatorNames().join(', ')}`);
  if (typeof c.estimatorParams !== 'object' || c.estimatorParams === null || Array.isArray(c.estimatorParams))
    throw bad('config field "estimatorParams" must be an object', 'e.g. {"scale": "none"}');
  resolveParams(getEstimator(c.estimator), c.estimatorParams); // throws naming an unknown parameter
  if (!(RL_LOSS_NAMES as readonly string[]).includes(c.loss)) {
    throw bad(
      `unknown RL loss ${JSON.stringify(c.loss)}${(LOSS_NAMES as readonly string[]).includes(c.loss) ? ' (that loss is for the warm start only)' : ''}`,
      `use one of: ${RL_LOSS_NAMES.join(', ')}`,
    );
  }
  if (c.estimator === 'a2tgpo' && POLICY_LOSSES[c.loss].meanOver !== 'tokens')
    throw bad(
      `estimator a2tgpo scales the clip range per turn, which the loss ${c.loss} (one ratio per turn) cannot take`,
      'use loss ppo-token with a2tgpo, or another estimator',
    );
  return c;
}

/** Reads turnwise.json (or another file) as the `given` part of resolveTrainConfig. */
export function readConfigFile(file: string): Record<string, unknown> {
  let text: string;
  try {
    if (fs.statSync(file).isDirectory()) throw bad(`${file} is a folder, not a config file`, 'pass the path of turnwise.json');
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    if (e instanceof TurnwiseError) throw e;
    throw new TurnwiseError('not-found', `cannot read the config ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, {
      hint: 'check the path of --config',
    });
  }
  // A byte-order mark (some Windows editors write one) is not part of the JSON.
  text = text.replace(/^\uFEFF/, '');
  try {
    const v = JSON.parse(text) as Record<string, unknown>;
    for (const k of ['workspace', 'tasksFile'])
      if (v && typeof v === 'object' && typeof v[k] === 'string' && !path.isAbsolute(v[k] as string))
        v[k] = path.resolve(path.dirname(file), v[k] as string);
    return v;
  } catch (e) {
    throw new TurnwiseError('invalid-file', `${file} is not valid JSON: ${(e as Error).message}`, { hint: 'fix the JSON syntax' });
  }
}

/** The settings that say where sandboxes run and what each may use. */
export type SandboxSettings = Pick<
  TrainConfig,
  'dockerHost' | 'dockerHosts' | 'sandboxMemoryMb' | 'sandboxCpus' | 'sandboxPids' | 'sandboxImage'
>;

/** The sandbox pool a config asks for: engines (TURNWISE_DOCKER_ENGINES wins), limits, image. */
export function poolSettings(c: SandboxSettings): {
  engines?: EngineSpec[];
  limits: SandboxLimits;
  baseImage?: string;
} {
  const listed = [...(c.dockerHost ? [c.dockerHost] : []), ...c.dockerHosts];
  const engines =
    parseEngineSpecs(process.env.TURNWISE_DOCKER_ENGINES) ?? (listed.length ? parseEngineSpecs(listed.join(', ')) : undefined);
  return {
    ...(engines ? { engines } : {}),
    limits: { memoryBytes: c.sandboxMemoryMb * 1024 ** 2, nanoCpus: Math.round(c.sandboxCpus * 1e9), pidsLimit: c.sandboxPids },
    ...(c.sandboxImage ? { baseImage: c.sandboxImage } : {}),
  };
}

/**
 * Command slots of a run (TrainConfig.commandConcurrency): the number given, or for 0 the local
 * machine's cores over sandboxCpus when the sandboxes run on the local engine; undefined (no
 * limit) for 0 with remote engines, whose cores this machine cannot see.
 */
export function commandSlotCount(
  c: Pick<TrainConfig, 'commandConcurrency'> & Parameters<typeof poolSettings>[0],
  cores = os.availableParallelism(),
): number | undefined {
  if (c.commandConcurrency > 0) return c.commandConcurrency;
  // An engine without a host is DOCKER_HOST's, or the local socket.
  const remote = (host: string | undefined) => !!host && !/^(unix|npipe):\/\//.test(host);
  const engines = poolSettings(c).engines ?? [{}];
  if (engines.some((e) => remote(e.host || process.env.DOCKER_HOST))) return undefined;
  return Math.max(1, Math.floor(cores / Math.max(c.sandboxCpus, 0.01)));
}

/** The sandbox pool of a run (or a benchmark) as its config asks: poolSettings' engines and limits. */
export function connectRunPool(run: string, c: SandboxSettings): Promise<SandboxPool> {
  const ps = poolSettings(c);
  return SandboxPool.connect({ run, ...(ps.engines ? { engines: ps.engines } : {}), limits: ps.limits });
}

/** What config.json of a run holds. */
export function runConfigRecord(c: TrainConfig, extra: Record<string, unknown>): Record<string, unknown> {
  return { schema: SCHEMA.runConfig, ...c, ...extra };
}

/** A run's own config.json, checked as a turnwise.json is (the fields the run added left out). */
export function readRunConfig(run: RunDir): TrainConfig {
  const raw = run.readConfig<Record<string, unknown>>();
  const file = run.file('config.json');
  if (!raw || typeof raw !== 'object' || Array.isArray(raw))
    throw new TurnwiseError('invalid-file', `${file} is not a run configuration (a JSON object)`, {
      hint: 'restore it from a backup of the run directory; nothing was changed',
    });
  const { schema: _s, runId, startModel: _m, createdAt: _c, actionFormat: _f, ...given } = raw;
  // A run made before branching existed goes on as it was played.
  if (!('branchEpisodes' in given)) given.branchEpisodes = 0;
  // One made before a branch's first turn was drawn again keeps one draw.
  if (!('branchRedraws' in given)) given.branchRedraws = 0;
  if (typeof runId === 'string' && runId !== run.runId) {
    throw new TurnwiseError('invalid-file', `${file} is the configuration of run ${runId}, not of ${run.runId}`, {
      hint: "restore this run's own config.json from a backup; nothing was changed",
    });
  }
  return resolveTrainConfig(given, file);
}
