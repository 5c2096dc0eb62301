// The harness a run or an evaluation works on: the sandbox pool with the workspace's snapshot, the
// scoring originals, and the policy behind an action model (a local checkpoint in its action
// format, or an OpenAI-compatible endpoint for evaluation); the rollout options that run
// episodes on it; and the check that a model's context leaves room for an action beside its prompt.
import { TurnwiseError } from '../core/errors';
import type { Task, Trajectory } from '../core/schema';
import { Semaphore } from '../core/workers';
import { ObservationCache } from '../agent/cache';
import { poolProvider } from '../agent/docker';
import { ChatFormat, chatSystemMessage } from '../agent/chat-format';
import { ChatTemplate, templateTokens } from '../agent/chat-template';
import { EndpointActionModel, EndpointClient, type EndpointOptions } from '../agent/endpoint';
import type { ActionModel } from '../agent/types';
import { loadTokenizer } from '../policy/files/tokenizer';
import { PolicyWorker } from '../policy/worker';
import type { PolicyService } from '../policy/trainable';
import { SandboxPool, type PoolSnapshot } from '../sandbox';
import { collectOriginals, type ScoringOriginals } from '../tasks/testfiles';
import { compactCodec, type CompactCodec } from './compact-codec';
import { commandSlotCount, connectRunPool, poolSettings, type SandboxSettings, type TrainConfig } from './config';
import { samplingPacksFolder } from './memory-plan';
import { assertWorkspaceNames } from './resume';
import { CompactActionModel } from './compact-model';
import { ChatActionModel } from './chat-model';
import { modelActionFormat, type ModelActionFormat } from './action-format';

/** Sandboxes, snapshot, policy worker and model adapter of a run or an evaluation. */
export interface Harness {
  pool: SandboxPool;
  snapshot: PoolSnapshot;
  originals: ScoringOriginals;
  policy: PolicyService;
  /** The model's action format: compact (turnwise-tiny's segments, `codec`) or its own chat template (`chat`). */
  actionFormat: ModelActionFormat;
  /** The compact format's codec (compact models only). */
  codec?: CompactCodec;
  /** A chat model's format and the ids that end its replies (chat models only). */
  chat?: { format: ChatFormat; stopIds: readonly number[] };
  /** The action model at the run's sampling settings. */
  model: CompactActionModel | ChatActionModel;
  /** A new action model of this harness's format at other sampling settings (greedy evaluation). */
  actionModel(sampling: { temperature: number; topP: number }): CompactActionModel | ChatActionModel;
  contextTokens: number;
  /** Replayed tool observations for every rollout and evaluation on this harness (none if turned off). */
  observationCache?: ObservationCache;
  /** Command slots shared by every rollout and evaluation on this harness (none: no limit). */
  commandSlots?: Semaphore;
  close(): Promise<void>;
}

export async function openHarness(o: {
  runId: string;
  workspace: string;
  language: string;
  checkpoint: string;
  referenceDir?: string;
  /** Start a LoRA adapter (B = 0) on the checkpoint's model: a new LoRA run's first harness. */
  lora?: { config: NonNullable<TrainConfig['lora']>; seed: number };
  /** Seed of a LoRA run's dropout masks (the run's, on every harness, so a resume drops the same elements). */
  loraDropoutSeed?: number;
  config: SandboxSettings &
    Pick<
      TrainConfig,
      'executionProvider' | 'maxActionTokens' | 'temperature' | 'topP' | 'concurrency' | 'cacheObservations' | 'commandConcurrency'
    > &
    Partial<Pick<TrainConfig, 'packDecodeWeights' | 'maxTurns' | 'rolloutPrecision'>>;
  pool?: SandboxPool;
  /**
   * Whether CPU decode steps pack the weights (SessionSettings.packDecodeWeights): a training run's
   * memory plan decides. Default: the config's packDecodeWeights, `auto` by what sampling alone
   * holds (samplingPacksFolder).
   */
  packDecodeWeights?: boolean;
  onLog?: (m: string) => void;
}): Promise<Harness> {
  assertWorkspaceNames(o.workspace);
  // A model that cannot write actions in either format is refused before a sandbox starts.
  const actionFormat = modelActionFormat(o.checkpoint);
  const ps = poolSettings(o.config);
  const pool = o.pool ?? (await connectRunPool(o.runId, o.config));
  const policy = new PolicyWorker({ onWarning: (m) => o.onLog?.(m) });
  try {
    const snapshot = await pool.snapshot(o.workspace, { language: o.language, ...(ps.baseImage ? { baseImage: ps.baseImage } : {}) });
    pool.warm(snapshot, Math.min(o.config.concurrency, 8));
    const info = await (policy as PolicyWorker).loadCheckpoint(
      o.checkpoint,
      {
        provider: o.config.executionProvider,
        packDecodeWeights: o.packDecodeWeights ?? samplingPacksFolder(o.checkpoint, o.config, o.onLog),
        rolloutPrecision: o.config.rolloutPrecision ?? 'auto',
      },
      {
        ...(o.referenceDir ? { referenceDir: o.referenceDir } : {}),
        ...(o.lora ? { lora: o.lora } : {}),
        ...(o.loraDropoutSeed !== undefined ? { loraDropoutSeed: o.loraDropoutSeed } : {}),
      },
    );
    if (!info.tokenizerJson)
      throw new TurnwiseError('invalid-file', `${o.checkpoint} has no tokenizer.json`, {
        hint: 'use a checkpoint written by Turnwise or a Hugging Face model folder',
      });
    const tokenizer = loadTokenizer(info.tokenizerJson, info.tokenizerConfig);
    const contextTokens = info.config.max_position_embeddings;
    checkActionRoom(contextTokens, o.config.maxActionTokens, o.checkpoint);
    const slots = commandSlotCount(o.config);
    let codec: CompactCodec | undefined;
    let chat: Harness['chat'];
    let actionModel: Harness['actionModel'];
    if (actionFormat.kind === 'chat') {
      const template = new ChatTemplate(actionFormat.template, actionFormat.source, templateTokens(info.tokenizerConfig));
      const format = new ChatFormat({ template, tokenizer, contextTokens, maxActionTokens: o.config.maxActionTokens });
      const eos = info.config.eos_token_ids ?? (info.config.eos_token_id !== undefined ? [info.config.eos_token_id] : []);
      // Episodes bring their task's system message; this one only stands in for a request without one.
      const system = chatSystemMessage({ language: o.language as Task['language'], testCommand: '' });
      actionModel = (s) => new ChatActionModel(policy, format, system, { maxActionTokens: o.config.maxActionTokens, ...s }, eos);
      chat = { format, stopIds: (actionModel({ temperature: 0, topP: 1 }) as ChatActionModel).stopIds };
    } else {
      const c = compactCodec(tokenizer);
      codec = c;
      actionModel = (s) => new CompactActionModel(policy, c, { contextTokens, maxActionTokens: o.config.maxActionTokens, ...s });
    }
    const model = actionModel({ temperature: o.config.temperature, topP: o.config.topP });
    return {
      pool,
      snapshot,
      originals: collectOriginals(o.workspace),
      policy,
      actionFormat,
      ...(codec ? { codec } : {}),
      ...(chat ? { chat } : {}),
      model,
      actionModel,
      contextTokens,
      // One snapshot per harness, so a tree id names the same workspace for every episode on it.
      ...(o.config.cacheObservations ? { observationCache: new ObservationCache() } : {}),
      ...(slots !== undefined ? { commandSlots: new Semaphore(slots) } : {}),
      close: async () => {
        await policy.dispose().catch(() => undefined);
        if (!o.pool) await pool.close();
      },
    };
  } catch (e) {
    await policy.dispose().catch(() => undefined);
    if (!o.pool) await pool.close().catch(() => undefined);
    throw e;
  }
}

/** What an evaluation needs of a harness: sandboxes, the scoring originals and an action model. */
export type EvalHarness = Pick<Harness, 'pool' | 'snapshot' | 'originals' | 'observationCache' | 'commandSlots'> & {
  model: ActionModel;
  actionModel(sampling: { temperature: number; topP: number }): ActionModel;
  close(): Promise<void>;
};

/**
 * An evaluation harness whose agent is an OpenAI-compatible endpoint (agent/endpoint.ts): the same
 * sandboxes and scoring as a local model's, the model behind the server. The server is asked for
 * its model list before any sandbox starts, so a wrong URL, name or key fails first.
 */
export async function openEndpointHarness(o: {
  runId: string;
  workspace: string;
  language: string;
  endpoint: Omit<EndpointOptions, 'temperature' | 'topP'>;
  config: Parameters<typeof openHarness>[0]['config'];
  onLog?: (m: string) => void;
}): Promise<EvalHarness & { modelName: string }> {
  assertWorkspaceNames(o.workspace);
  const client = new EndpointClient(o.endpoint);
  const actionModel = (s: { temperature: number; topP: number }) =>
    new EndpointActionModel(client, { maxTokens: o.endpoint.maxTokens ?? 512, ...s });
  const model = actionModel({ temperature: o.config.temperature, topP: o.config.topP });
  const modelName = await model.modelName();
  const ps = poolSettings(o.config);
  const pool = await connectRunPool(o.runId, o.config);
  try {
    const snapshot = await pool.snapshot(o.workspace, { language: o.language, ...(ps.baseImage ? { baseImage: ps.baseImage } : {}) });
    pool.warm(snapshot, Math.min(o.config.concurrency, 8));
    const slots = commandSlotCount(o.config);
    return {
      pool,
      snapshot,
      originals: collectOriginals(o.workspace),
      modelName,
      // The chosen name for every request, so each model object need not ask the server again.
      model,
      actionModel: (s) => {
        const m = actionModel(s);
        void m.modelName();
        return m;
      },
      ...(o.config.cacheObservations ? { observationCache: new ObservationCache() } : {}),
      ...(slots !== undefined ? { commandSlots: new Semaphore(slots) } : {}),
      close: () => pool.close(),
    };
  } catch (e) {
    await pool.close().catch(() => undefined);
    throw e;
  }
}

/** The options of runRollouts that run episodes on a harness with a run's settings. */
export function rolloutOptions(
  harness: EvalHarness,
  c: TrainConfig,
  checkpoint: string,
  iteration: number,
  signal?: AbortSignal,
  onEpisode?: (t: Trajectory) => void,
) {
  return {
    provider: poolProvider(harness.pool, harness.snapshot),
    model: harness.model,
    checkpoint,
    originals: harness.originals,
    concurrency: c.concurrency,
    maxBatch: c.concurrency,
    batchWaitMs: c.batchWaitMs,
    maxTurns: c.maxTurns,
    commandTimeoutMs: c.commandTimeoutMs,
    testTimeoutMs: c.testTimeoutMs,
    rewardWeights: c.reward,
    iteration,
    signal,
    onEpisode,
    observationCache: harness.observationCache,
    commandSlots: harness.commandSlots,
  };
}

/**
 * Refuses a model whose context leaves too little room for a prompt beside an action of
 * maxActionTokens: half the context at most (the prompt gets the rest).
 */
export function checkActionRoom(contextTokens: number, maxActionTokens: number, modelDir: string): void {
  if (maxActionTokens <= contextTokens / 2) return;
  throw new TurnwiseError(
    'invalid-input',
    `maxActionTokens ${maxActionTokens} leaves no room for the prompt: ${modelDir} has a context of ${contextTokens} tokens (max_position_embeddings)`,
    {
      hint: `set "maxActionTokens" to at most ${Math.floor(contextTokens / 2)} in turnwise.json (it is the longest action the policy writes), or use a model with a longer context`,
    },
  );
}
