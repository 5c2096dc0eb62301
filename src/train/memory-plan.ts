// The memory plan of a training run's settings (policy/model/memory.ts): the row length its episodes
// reach, the episodes in flight, the provider, LoRA or full training; and the update's token cap
// (updateTokensPerStep, 0 = the largest that fits). `turnwise train` refuses a plan over the
// machine's memory before any sandbox starts.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { OBS_PROMPT_CHARS } from '../agent/prompt';
import type { Check } from '../core/doctor';
import { TurnwiseError } from '../core/errors';
import { formatMiB } from '../core/units';
import { getEstimator } from '../credit/registry';
import '../credit/index';
import { readJsonFile } from '../core/fs';
import { autoTriesWebgpu } from '../onnx';
import { adapterBaseDir } from '../policy/files/checkpoint';
import { parameterCount, parseModelConfig, type ModelConfig } from '../policy/model/config';
import { parseLoraConfig } from '../policy/files/lora';
import { rolloutPrecisionFor } from '../policy/model/quantize';
import {
  assertPlanFits,
  autoUpdateTokens,
  availableDeviceMemory,
  availableMemory,
  formatMemoryPlan,
  packsDecodeWeights,
  planMemory,
  samplingPacksWeights,
  type MemoryPlan,
  type MemoryPlanInput,
} from '../policy/model/memory';
import { resolveTrainConfig, TRAIN_DEFAULTS, type TrainConfig } from './config';
import { embeddedModelDir } from './embedded';

/** Tokens of a task's prompt in the estimate of an episode's length. */
const PROMPT_TOKENS = 512;

/**
 * The longest row an episode of these settings trains: the prompt, then per turn an action and an
 * observation (capped at OBS_PROMPT_CHARS characters, at most one token each), within the model's context.
 */
export function runContextTokens(c: Pick<TrainConfig, 'maxTurns' | 'maxActionTokens'>, model: ModelConfig): number {
  return Math.min(model.max_position_embeddings, PROMPT_TOKENS + c.maxTurns * (c.maxActionTokens + OBS_PROMPT_CHARS));
}

export type RunPlanConfig = Pick<
  TrainConfig,
  'maxTurns' | 'maxActionTokens' | 'concurrency' | 'executionProvider' | 'klCoef' | 'updateTokensPerStep' | 'lora'
> &
  Partial<Pick<TrainConfig, 'packDecodeWeights' | 'estimator' | 'rolloutPrecision'>>;

/** The plan's input for a run, without the token cap. */
function planInput(c: RunPlanConfig, model: ModelConfig): Omit<MemoryPlanInput, 'updateTokensPerStep'> {
  // auto: as OnnxSession.create resolves it where CUDA does not load.
  const provider =
    c.executionProvider === 'cuda' || c.executionProvider === 'webgpu'
      ? c.executionProvider
      : c.executionProvider === 'auto' && autoTriesWebgpu()
        ? 'webgpu'
        : 'cpu';
  return {
    config: model,
    provider,
    context: runContextTokens(c, model),
    episodes: c.concurrency,
    klReference: c.klCoef > 0,
    ...(c.estimator && getEstimator(c.estimator).needs ? { teacherPass: true } : {}),
    quantizedDecode: rolloutPrecisionFor(c.rolloutPrecision ?? 'auto', provider, parameterCount(model) * 4).precision,
    ...(c.lora ? { lora: c.lora } : {}),
  };
}

/**
 * The run's memory plan, with its token cap resolved (updateTokensPerStep, or for 0 the largest
 * that fits `limit`), against the memory the run may use (TURNWISE_MEMORY_LIMIT_MB or the machine's).
 * On the CPU, with `packDecodeWeights` auto, a model of PACK_MIN_WEIGHT_BYTES or more packs its
 * decode weights where the plan with their copy fits, and feeds them where only the plan without
 * does; `on` always packs (the plan then has the copy), `off` never.
 */
export function runMemoryPlan(
  c: RunPlanConfig,
  model: ModelConfig,
  env: NodeJS.ProcessEnv = process.env,
): { plan: MemoryPlan; updateTokens: number; limit: { bytes: number; source: string }; lines: string[]; packDecodeWeights: boolean } {
  const limit = availableMemory(env);
  const plain = planInput(c, model);
  const setting = c.packDecodeWeights ?? 'auto';
  // Quantized rollouts hold their own copy in place of the packed one.
  const packable = plain.quantizedDecode === 'float32' && packsDecodeWeights(setting, plain.provider, parameterCount(model) * 4);
  // The cap is chosen without the packed copy, which is released while an update runs.
  const updateTokens = c.updateTokensPerStep > 0 ? c.updateTokensPerStep : autoUpdateTokens(plain, limit.bytes);
  const packed = packable ? planMemory({ ...plain, packedDecode: true, updateTokensPerStep: updateTokens }) : undefined;
  const plan =
    packed && (setting === 'on' || packed.host <= limit.bytes) ? packed : planMemory({ ...plain, updateTokensPerStep: updateTokens });
  return { plan, updateTokens, limit, lines: formatMemoryPlan(plan, limit.bytes), packDecodeWeights: plan.input.packedDecode };
}

/** Refuses a run whose plan exceeds the memory it may use (host, and the device where TURNWISE_DEVICE_MEMORY_LIMIT_MB says). */
export function assertRunFits(
  c: RunPlanConfig,
  model: ModelConfig,
  env: NodeJS.ProcessEnv = process.env,
): { plan: MemoryPlan; updateTokens: number; lines: string[]; packDecodeWeights: boolean } {
  const r = runMemoryPlan(c, model, env);
  assertPlanFits(r.plan, r.limit, r.plan.device > 0 ? availableDeviceMemory(env) : undefined);
  return r;
}

/**
 * Whether a process that samples from the model in `dir` and trains nothing (an evaluation) packs
 * its CPU decode weights: the config's packDecodeWeights, `auto` by what its episodes hold
 * (samplingPacksWeights, against TURNWISE_MEMORY_LIMIT_MB or the machine's memory); `log` gets why
 * a model the size rule would pack is fed.
 */
export function samplingPacksFolder(
  dir: string,
  c: Pick<TrainConfig, 'executionProvider' | 'maxActionTokens' | 'concurrency'> &
    Partial<Pick<TrainConfig, 'packDecodeWeights' | 'maxTurns'>>,
  log?: (m: string) => void,
  env: NodeJS.ProcessEnv = process.env,
): boolean {
  const model = folderModel(dir).config;
  const context = runContextTokens({ maxTurns: c.maxTurns ?? TRAIN_DEFAULTS.maxTurns, maxActionTokens: c.maxActionTokens }, model);
  const d = samplingPacksWeights(
    c.packDecodeWeights ?? 'auto',
    c.executionProvider,
    model,
    { episodes: c.concurrency, context },
    availableMemory(env),
  );
  if (d.note) log?.(d.note);
  return d.pack;
}

const MODEL_JSON = { unreadable: 'the model folder is incomplete', invalid: 'the file is damaged; copy the model folder again' };

/** A model folder's config.json (an adapter folder's: its base's, and its own LoRA block), read without the weights. */
export function folderModel(dir: string): { config: ModelConfig; lora?: TrainConfig['lora'] } {
  const base = adapterBaseDir(dir);
  const modelDir = base ?? dir;
  const file = path.join(modelDir, 'config.json');
  if (!fs.existsSync(file)) throw new TurnwiseError('not-found', `${modelDir} has no config.json`, { hint: 'give a model folder' });
  const config = parseModelConfig(readJsonFile(file, MODEL_JSON), file);
  if (!base) return { config };
  const adapterFile = path.join(dir, 'adapter_config.json');
  return { config, lora: parseLoraConfig(readJsonFile(adapterFile, MODEL_JSON), adapterFile, base) };
}

/**
 * Check Environment's "memory plan" line for the settings a run would start with (`given`: the
 * launch config's fields): the plan's totals and largest parts; a warning with the settings that
 * fit when the run would be refused.
 */
export function memoryPlanCheck(given: Record<string, unknown>, env: NodeJS.ProcessEnv = process.env): Check {
  try {
    const c = resolveTrainConfig(given, 'the settings');
    const m = folderModel(c.model || embeddedModelDir());
    const rc = { ...c, ...(m.lora ? { lora: m.lora } : {}) };
    const r = runMemoryPlan(rc, m.config, env);
    const top = [...r.plan.parts]
      .sort((a, b) => b.bytes - a.bytes)
      .slice(0, 3)
      .map((x) => `${x.name} ${formatMiB(x.bytes)}`)
      .join(', ');
    const device = r.plan.device > 0 ? availableDeviceMemory(env) : undefined;
    const onDevice =
      r.plan.device > 0 ? `; device ${formatMiB(r.plan.device)}${device ? ` of ${formatMiB(device.bytes)} (${device.source})` : ''}` : '';
    const detail = `${formatMiB(r.plan.host)} of ${formatMiB(r.limit.bytes)} (${r.limit.source})${onDevice} at updateTokensPerStep ${r.updateTokens}, ${c.concurrency} episodes in flight × ${r.plan.input.context} tokens, ${rc.lora ? 'LoRA' : 'full training'}; largest: ${top}`;
    try {
      assertRunFits(rc, m.config, env);
    } catch (e) {
      const t = e as TurnwiseError;
      return { name: 'memory plan', status: 'warn', detail: `a run would be refused: ${detail}`, fix: t.hint ?? 'use smaller settings' };
    }
    return { name: 'memory plan', status: 'ok', detail };
  } catch (e) {
    return {
      name: 'memory plan',
      status: 'warn',
      detail: `no plan: ${(e as Error).message}`,
      fix: (e as TurnwiseError).hint ?? 'fix the run settings',
    };
  }
}
