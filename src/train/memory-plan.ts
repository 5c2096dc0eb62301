// The memory plan of a training run's settings (policy/memory.ts): the row length its episodes
// reach, the episodes in flight, the provider, LoRA or full training; and the update's token cap
// (updateTokensPerStep, 0 = the largest that fits). `turnwise train` refuses a plan over the
// machine's memory before any sandbox starts.
import { OBS_PROMPT_CHARS } from '../agent/prompt';
import type { ModelConfig } from '../policy/config';
import { assertPlanFits, autoUpdateTokens, availableDeviceMemory, availableMemory, formatMemoryPlan, planMemory, type MemoryPlan, type MemoryPlanInput } from '../policy/memory';
import type { TrainConfig } from './config';

/** Tokens of a task's prompt in the estimate of an episode's length. */
const PROMPT_TOKENS = 512;

/**
 * The longest row an episode of these settings trains: the prompt, then per turn an action and an
 * observation (capped at OBS_PROMPT_CHARS characters, at most one token each), within the model's context.
 */
export function runContextTokens(c: Pick<TrainConfig, 'maxTurns' | 'maxActionTokens'>, model: ModelConfig): number {
  return Math.min(model.max_position_embeddings, PROMPT_TOKENS + c.maxTurns * (c.maxActionTokens + OBS_PROMPT_CHARS));
}

export type RunPlanConfig = Pick<TrainConfig, 'maxTurns' | 'maxActionTokens' | 'concurrency' | 'executionProvider' | 'klCoef' | 'updateTokensPerStep' | 'lora'>;

/** The plan's input for a run, without the token cap. */
function planInput(c: RunPlanConfig, model: ModelConfig): Omit<MemoryPlanInput, 'updateTokensPerStep'> {
  return {
    config: model,
    provider: c.executionProvider === 'cuda' || c.executionProvider === 'webgpu' ? c.executionProvider : 'cpu',
    context: runContextTokens(c, model),
    episodes: c.concurrency,
    klReference: c.klCoef > 0,
    ...(c.lora ? { lora: c.lora } : {}),
  };
}

/**
 * The run's memory plan, with its token cap resolved (updateTokensPerStep, or for 0 the largest
 * that fits `limit`), against the memory the run may use (TURNWISE_MEMORY_LIMIT_MB or the machine's).
 */
export function runMemoryPlan(c: RunPlanConfig, model: ModelConfig, env: NodeJS.ProcessEnv = process.env): { plan: MemoryPlan; updateTokens: number; limit: { bytes: number; source: string }; lines: string[] } {
  const limit = availableMemory(env);
  const input = planInput(c, model);
  const updateTokens = c.updateTokensPerStep > 0 ? c.updateTokensPerStep : autoUpdateTokens(input, limit.bytes);
  const plan = planMemory({ ...input, updateTokensPerStep: updateTokens });
  return { plan, updateTokens, limit, lines: formatMemoryPlan(plan, limit.bytes) };
}

/** Refuses a run whose plan exceeds the memory it may use (host, and the device where TURNWISE_DEVICE_MEMORY_LIMIT_MB says). */
export function assertRunFits(c: RunPlanConfig, model: ModelConfig, env: NodeJS.ProcessEnv = process.env): { plan: MemoryPlan; updateTokens: number; lines: string[] } {
  const r = runMemoryPlan(c, model, env);
  assertPlanFits(r.plan, r.limit, availableDeviceMemory(env));
  return r;
}
