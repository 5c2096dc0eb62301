// Runs the training graphs through src/onnx's Trainer: keeps weights and AdamW moments in graph
// layout between runs, feeds K stacked batches per run (K optimizer steps in one ONNX Loop), and
// converts back to Hugging Face layout for checkpoints. Sessions are cached per shape class
// (loss, batch, seq, kl, entropy, packed) and per K. The learning rate may change every step
// (one rate, one per step, or a schedule of the global step such as warmupCosineLr).
import { TurnwiseError } from '../../core/errors';
import { lossHyper, OPTIMIZER_DEFAULTS, POLICY_LOSSES, type LossHyper, type OptimizerHyper } from '../../core/losses';
import { keepOnDevice, releaseFromDevice, SessionCache, type HostTensor, type SessionSettings } from '../../onnx';
import { disposeDeviceMoments, hostMoments, Trainer, type TrainState } from '../../onnx/training';
import { zeroOptimizerState } from '../files/checkpoint';
import type { OptimizerState } from '../files/optimizer-state';
import { type ModelConfig } from '../model/config';
import { fromGraphLayout, loraFromGraphLayout, loraToGraphLayout, toGraphLayout, weightFeeds, type LoraShape } from '../model/graphs';
import { loraDropoutStepSeed, type LoraAdapter } from '../files/lora';
import {
  batchInputs,
  LORA_DROPOUT_INDEX,
  LORA_DROPOUT_SEED,
  METRICS,
  policyTrainingSpec,
  type LossHyperName,
  type MetricName,
  type TrainGraphOptions,
  type TrainLoss,
} from './graphs';
import type { PolicyWeights } from '../model/weights';

/** One optimizer step's batch: flat row-major [batch, seq] arrays aligned with input_ids. */
export interface TrainBatch {
  inputIds: ArrayLike<number>;
  /** 1 for real tokens, 0 for padding. Default: all 1. Not with segmentIds (0 there is padding). */
  attentionMask?: ArrayLike<number>;
  /**
   * Packed rows: the example each token belongs to, 0 for padding, a positive integer per
   * example (contiguous runs; ids may repeat across rows). A token attends only to earlier
   * tokens of its own example and positions restart at 0 at each example's first token, so a
   * packed row trains exactly like its examples as separate rows. If any batch of a train() call
   * has segmentIds, the others are packed from their attentionMask (one example per row).
   */
  segmentIds?: ArrayLike<number>;
  /**
   * Per-token loss weight (≥ 0): the loss is the weighted token mean Σ w·l / Σ w over the whole
   * batch (sft: Σ w·nll / Σ w). 1 on action tokens, 0 elsewhere for RL; for SFT e.g. 1 on action
   * tokens and 0.3 on prompt tokens. Column 0, padding and each packed example's first token carry
   * no loss whatever the weight (no logit of their own example predicts them).
   */
  lossMask: ArrayLike<number>;
  /**
   * 0/1: the tokens whose mean NLL is reported as the `action_loss` metric.
   * Default: tokens with loss weight ≥ 1.
   */
  actionMask?: ArrayLike<number>;
  advantages?: ArrayLike<number>;
  oldLogp?: ArrayLike<number>;
  refLogp?: ArrayLike<number>;
  /**
   * Per-token weight (≥ 0) of replay tokens: demonstrations trained beside the RL rows, whose
   * weighted mean NLL times replayCoef joins the loss (PPO-ptx). The RL terms read lossMask only,
   * so replay rows carry lossMask 0. Read only when replayCoef ≠ 0; a batch without it has none.
   */
  replayMask?: ArrayLike<number>;
  /**
   * Per-token factor (> 0) on the clip range of the RL loss: the ratio is clipped to
   * [1 − clipLow·s, 1 + clipHigh·s] (a2tgpo's adaptive turn-level clipping). Token losses only
   * (ppo-token); a batch without it has factor 1. The graph takes it when any batch of a call has it.
   */
  clipScale?: ArrayLike<number>;
}

/**
 * Learning rate of a train() call: one rate for all its steps, one per step (length = number
 * of batches), or a function of the global step (optimizer updates done before this one,
 * `PolicyTrainer.step + k` for the call's k-th batch).
 */
export type LearningRate = number | readonly number[] | ((step: number) => number);

/**
 * Linear warm-up from peak/warmupSteps to peak over the first warmupSteps steps, then cosine
 * decay from peak to floor at totalSteps (and floor after). `step` counts updates done before.
 */
export function warmupCosineLr(o: { peak: number; warmupSteps: number; totalSteps: number; floor?: number }): (step: number) => number {
  const floor = o.floor ?? 0;
  if (!(o.peak >= 0) || !(floor >= 0) || !(o.warmupSteps >= 0) || !(o.totalSteps >= o.warmupSteps)) {
    throw new TurnwiseError(
      'invalid-input',
      `learning-rate schedule: need peak ≥ 0, floor ≥ 0 and 0 ≤ warmupSteps ≤ totalSteps, got ${JSON.stringify(o)}`,
    );
  }
  return (step) => {
    if (step < o.warmupSteps) return (o.peak * (step + 1)) / o.warmupSteps;
    const span = o.totalSteps - o.warmupSteps;
    const progress = span > 0 ? Math.min(1, (step - o.warmupSteps) / span) : 1;
    return floor + (o.peak - floor) * 0.5 * (1 + Math.cos(Math.PI * progress));
  };
}

/**
 * A train() call's settings. Defaults: OPTIMIZER_DEFAULTS and the loss's row of POLICY_LOSSES
 * (core/losses.ts), where each field is documented.
 */
export interface TrainHyper extends Partial<OptimizerHyper>, Partial<LossHyper> {
  lr: LearningRate;
}

export type StepMetrics = Record<MetricName, number>;

export interface TrainStepOptions {
  loss: TrainLoss;
  batch: number;
  seq: number;
  /**
   * Most tokens (rows · seq) read at once. A batch over it is read in micro-batches of
   * max(1, ⌊microBatchTokens / seq⌋) whole rows whose gradients add up to one optimizer step,
   * with the loss's means over the whole batch: the same update as one run of the batch, in the
   * memory of one micro-batch. Unset: each batch in one run (K batches in one Loop run).
   */
  microBatchTokens?: number;
  /** Positions per chunk of the vocabulary head in the training graph (TrainGraphOptions.logitChunkRows; default by size). */
  logitChunkRows?: number;
  /** Recompute the layers in the backward pass (TrainGraphOptions.recomputeLayers; default by size). */
  recomputeLayers?: boolean;
}

/** A LoRA adapter to train instead of the model, with its AdamW state (PEFT keys, PEFT layout) when resumed. */
export interface LoraTraining {
  adapter: LoraAdapter;
  optimizer?: OptimizerState;
  /** Seed of the adapter's dropout masks (with lora_dropout > 0): step n's masks come from (seed, n). Default 0. */
  dropoutSeed?: number;
}

export class PolicyTrainer {
  readonly config: ModelConfig;
  private state: TrainState;
  private readonly cache: SessionCache;
  private readonly trainers = new Map<string, Trainer>();
  /** With LoRA: the adapter's layout, and the base weights fed as frozen inputs (graph layout, made once). */
  private readonly lora:
    { shape: LoraShape; config: LoraAdapter['config']; frozen: Record<string, HostTensor>; dropoutSeed: number } | undefined;
  private readonly base: PolicyWeights | undefined;

  /**
   * `graphFeeds`: the same weights already in graph layout (a Policy's baseFeeds()), used as they
   * are: with LoRA they are the frozen base fed every run, without it the starting parameters
   * (never written to: each step's parameters are new arrays). Default: feeds over `weights`' own arrays.
   */
  constructor(
    weights: PolicyWeights,
    optimizer?: OptimizerState,
    private readonly settings: SessionSettings = {},
    lora?: LoraTraining,
    graphFeeds?: Record<string, HostTensor>,
    /**
     * On a provider that keeps tensors (WebGPU): the AdamW moments stay on the device between
     * steps; adapterOptimizerState() and optimizerState() then need syncMoments() first.
     */
    private readonly o: { keepMoments?: boolean } = {},
  ) {
    this.config = weights.config;
    // With LoRA and the weights given as feeds, the weights are read back from them when asked for.
    this.base = graphFeeds && lora ? undefined : weights;
    this.cache = new SessionCache(settings, 4);
    const feeds = graphFeeds ?? weightFeeds(weights);
    if (lora) {
      const c = lora.adapter.config;
      this.lora = {
        shape: { r: c.r, lora_alpha: c.lora_alpha, use_rslora: c.use_rslora, target_modules: [...c.target_modules] },
        config: c,
        frozen: feeds,
        dropoutSeed: lora.dropoutSeed ?? 0,
      };
      // The frozen base is fed to every step: on a GPU provider that keeps tensors, it crosses once.
      keepOnDevice(Object.values(feeds));
      const graph = (m: Map<string, Float32Array>) => Object.fromEntries(loraToGraphLayout(this.config, { config: c, tensors: m }));
      const zeros = () => new Map([...lora.adapter.tensors].map(([k, t]) => [k, new Float32Array(t.length)]));
      const o = lora.optimizer;
      this.state = {
        params: graph(lora.adapter.tensors),
        m: graph(o?.expAvg ?? zeros()),
        v: graph(o?.expAvgSq ?? zeros()),
        step: o?.step ?? 0,
      };
      return;
    }
    this.lora = undefined;
    const opt = optimizer ?? zeroOptimizerState(weights.config);
    const rec = (m: Map<string, Float32Array>) => Object.fromEntries(toGraphLayout(this.config, m));
    const params = Object.fromEntries(Object.entries(feeds).map(([k, t]) => [k, t.data as Float32Array]));
    this.state = { params, m: rec(opt.expAvg), v: rec(opt.expAvgSq), step: opt.step };
  }

  /** Whether this trainer trains a LoRA adapter (the base weights stay as they are). */
  get trainsAdapter(): boolean {
    return this.lora !== undefined;
  }

  /** The adapter being trained, in PEFT layout (copies); undefined without LoRA. */
  adapter(): LoraAdapter | undefined {
    return this.lora ? loraFromGraphLayout(this.config, this.lora.config, this.map(this.state.params)) : undefined;
  }

  /**
   * Reads moments kept on the device (keepMoments) back to the host, for adapterOptimizerState()
   * and optimizerState(); the device copies stay what the next step reads.
   */
  async syncMoments(): Promise<void> {
    if (!this.momentsOnHost()) this.state = await hostMoments(this.state);
  }

  /**
   * Whether the host holds the moments: always without device moments; with them, once read back
   * (a step that keeps them leaves the host's empty).
   */
  private momentsOnHost(): boolean {
    return !this.state.deviceMoments || Object.keys(this.state.m).length > 0;
  }

  private checkMomentsRead(): void {
    if (!this.momentsOnHost())
      throw new TurnwiseError('internal', 'the optimizer moments are on the device and were not read back', {
        hint: 'await syncMoments() before reading the optimizer state',
      });
  }

  /** The adapter's AdamW state (PEFT keys and layout); undefined without LoRA. */
  adapterOptimizerState(): OptimizerState | undefined {
    if (!this.lora) return undefined;
    this.checkMomentsRead();
    const back = (rec: Record<string, Float32Array | Float64Array>) =>
      loraFromGraphLayout(this.config, this.lora!.config, this.map(rec)).tensors;
    return { step: this.state.step, expAvg: back(this.state.m), expAvgSq: back(this.state.v) };
  }

  get step(): number {
    return this.state.step;
  }

  private map(rec: Record<string, Float32Array | Float64Array>): Map<string, Float32Array> {
    return new Map(Object.entries(rec) as [string, Float32Array][]);
  }

  /** Current weights in Hugging Face layout (copies); with LoRA the base, which training never changes. */
  weights(): PolicyWeights {
    if (this.lora)
      return (
        this.base ?? {
          config: this.config,
          tensors: fromGraphLayout(this.config, new Map(Object.entries(this.lora.frozen).map(([k, t]) => [k, t.data as Float32Array]))),
        }
      );
    return { config: this.config, tensors: fromGraphLayout(this.config, this.map(this.state.params)) };
  }

  optimizerState(): OptimizerState {
    if (this.lora)
      throw new TurnwiseError('internal', 'a LoRA trainer has no optimizer state for the base weights', {
        hint: 'read adapterOptimizerState()',
      });
    this.checkMomentsRead();
    return {
      step: this.state.step,
      expAvg: fromGraphLayout(this.config, this.map(this.state.m)),
      expAvgSq: fromGraphLayout(this.config, this.map(this.state.v)),
    };
  }

  /** Weights in graph layout, shared (not copied): for Policy.setGraphWeights. Not for LoRA (use adapter()). */
  graphWeights(): Map<string, Float32Array> {
    if (this.lora) throw new TurnwiseError('internal', 'a LoRA trainer does not change the base weights', { hint: 'read adapter()' });
    return this.map(this.state.params);
  }

  private trainer(o: TrainGraphOptions): Trainer {
    const key = `${o.loss}|B${o.batch}|T${o.seq}|${o.kl ? 'kl' : ''}|${o.entropy ? 'ent' : ''}|${o.weightDecay === false ? 'nowd' : 'wd'}|${o.packed ? 'packed' : ''}|${o.replay ? 'replay' : ''}|${o.clipScale ? 'clipscale' : ''}|${o.lora ? `lora${JSON.stringify(o.lora)}|drop${o.loraDropout ?? 0}` : ''}`;
    let t = this.trainers.get(key);
    if (!t) {
      t = new Trainer(
        { ...policyTrainingSpec(this.config, o), lrPerStep: true },
        key,
        this.settings,
        this.cache,
        this.o.keepMoments ?? false,
      );
      this.trainers.set(key, t);
    }
    return t;
  }

  /**
   * One optimizer step per batch, all in one session run (an ONNX Loop when there are several).
   * The KL, entropy and replay terms are in the graph only when klCoef / entCoef / replayCoef are
   * non-zero, the weight decay multiply only when weightDecay is.
   */
  async train(o: TrainStepOptions, batches: readonly TrainBatch[], hyper: TrainHyper): Promise<StepMetrics[]> {
    const { batch: B, seq: T } = o;
    const K = batches.length;
    if (K === 0) return [];
    if (T > this.config.max_position_embeddings)
      throw new TurnwiseError('invalid-input', `seq ${T} exceeds max_position_embeddings ${this.config.max_position_embeddings}`, {
        hint: 'truncate the batch',
      });
    const lh = lossHyper(o.loss, hyper);
    const graphOpts: TrainGraphOptions = {
      loss: o.loss,
      batch: B,
      seq: T,
      kl: lh.klCoef !== 0,
      entropy: lh.entCoef !== 0,
      replay: lh.replayCoef !== 0,
      weightDecay: (hyper.weightDecay ?? OPTIMIZER_DEFAULTS.weightDecay) !== 0,
      packed: batches.some((b) => b.segmentIds !== undefined),
      clipScale: batches.some((b) => b.clipScale !== undefined),
      ...(o.logitChunkRows !== undefined ? { logitChunkRows: o.logitChunkRows } : {}),
      ...(o.recomputeLayers !== undefined ? { recomputeLayers: o.recomputeLayers } : {}),
      ...(this.lora ? { lora: this.lora.shape, loraDropout: this.lora.config.lora_dropout } : {}),
    };
    if (graphOpts.clipScale && POLICY_LOSSES[o.loss].meanOver !== 'tokens')
      throw new TurnwiseError('invalid-input', `${o.loss} clips one ratio per row, so it cannot take a clip factor per token`, {
        hint: 'use ppo-token with an estimator that scales the clip per turn (a2tgpo), or another estimator',
      });
    const lrs = this.learningRates(hyper.lr, K);
    if (graphOpts.packed && !POLICY_LOSSES[o.loss].packable) {
      throw new TurnwiseError('invalid-input', `${o.loss} takes one ratio per row, so it cannot train packed rows`, {
        hint: 'give each turn its own row (no segmentIds), or use ppo-token',
      });
    }
    const lead = K > 1 ? [K] : [];
    const n = B * T;
    const ids = new BigInt64Array(K * n);
    batches.forEach((b, k) => {
      if (b.inputIds.length !== n)
        throw new TurnwiseError('invalid-input', `inputIds has length ${b.inputIds.length}, expected batch·seq = ${n}`);
      for (let i = 0; i < n; i++) {
        const id = b.inputIds[i];
        if (!Number.isInteger(id) || id < 0 || id >= this.config.vocab_size)
          throw new TurnwiseError('invalid-input', `token id ${id} is outside the vocabulary (0..${this.config.vocab_size - 1})`);
        ids[k * n + i] = BigInt(id);
      }
    });
    // Packed: per batch, the tokens that can carry loss (real, not an example's first token).
    const layouts = graphOpts.packed ? batches.map((b) => packedLayout(b, B, T)) : undefined;
    const stack = (
      name: string,
      get: (b: TrainBatch) => ArrayLike<number> | undefined,
      fill?: number,
      onlyLossTokens = false,
    ): HostTensor => {
      const out = new Float32Array(K * n);
      batches.forEach((b, k) => {
        const a = get(b);
        if (a === undefined) {
          if (fill === undefined) throw new TurnwiseError('invalid-input', `${o.loss} training needs ${name} in every batch`);
          out.fill(fill, k * n, (k + 1) * n);
          return;
        }
        if (a.length !== n) throw new TurnwiseError('invalid-input', `${name} has length ${a.length}, expected batch·seq = ${n}`);
        out.set(a, k * n);
        if (onlyLossTokens && layouts) for (let i = 0; i < n; i++) if (!layouts[k].lossTokens[i]) out[k * n + i] = 0;
      });
      return { dtype: 'float32', dims: [...lead, B, T], data: out };
    };
    // With LoRA the base weights go in as frozen inputs: the same tensors every run, never copied.
    const feeds: Record<string, HostTensor> = {
      ...(this.lora?.frozen ?? {}),
      input_ids: { dtype: 'int64', dims: [...lead, B, T], data: ids },
    };
    if (layouts) {
      const cat = (get: (l: PackedLayout) => BigInt64Array): HostTensor => {
        const out = new BigInt64Array(K * n);
        layouts.forEach((l, k) => out.set(get(l), k * n));
        return { dtype: 'int64', dims: [...lead, B, T], data: out };
      };
      feeds.segment_ids = cat((l) => l.segments);
      feeds.position_ids = cat((l) => l.positions);
    } else feeds.attention_mask = stack('attentionMask', (b) => b.attentionMask, 1);
    for (const b of batches) {
      for (const [name, a] of [
        ['lossMask', b.lossMask],
        ['replayMask', b.replayMask],
        ['clipScale', b.clipScale],
      ] as const) {
        if (a === undefined) continue;
        if (a.length !== n) throw new TurnwiseError('invalid-input', `${name} has length ${a.length}, expected batch·seq = ${n}`);
        for (let i = 0; i < n; i++) {
          const w = a[i];
          if (!(w >= 0) || !Number.isFinite(w))
            throw new TurnwiseError('invalid-input', `${name} holds ${w} at ${i}: loss weights must be finite and ≥ 0`);
        }
      }
    }
    const getters: Record<string, (b: TrainBatch) => ArrayLike<number> | undefined> = {
      action_mask: (b) => b.actionMask ?? Float32Array.from(b.lossMask, (w) => (w >= 1 ? 1 : 0)),
      loss_mask: (b) => b.lossMask,
      advantages: (b) => b.advantages,
      old_logp: (b) => b.oldLogp,
      ref_logp: (b) => b.refLogp,
      replay_mask: (b) => b.replayMask,
      clip_scale: (b) => b.clipScale,
    };
    const weightInputs = new Set(['loss_mask', 'action_mask', 'replay_mask']);
    for (const name of batchInputs(graphOpts))
      feeds[name] = stack(name, getters[name], name === 'replay_mask' ? 0 : name === 'clip_scale' ? 1 : undefined, weightInputs.has(name));
    const opt = { ...OPTIMIZER_DEFAULTS, ...definedOnly(hyper) };
    const temperature = opt.temperature;
    if (!(temperature > 0) || !Number.isFinite(temperature)) {
      // The training graph divides the logits by it; 0 (greedy sampling) has no log-probs to train on.
      throw new TurnwiseError('invalid-input', `training temperature must be a finite number > 0, got ${temperature}`, {
        hint: 'use the temperature the rollouts were sampled at; greedy (0) rollouts carry no sampling log-probs, train them at 1',
      });
    }
    const lossFeeds: Record<LossHyperName, number> = {
      clip_low: lh.clipLow,
      clip_high: lh.clipHigh,
      kl_coef: lh.klCoef,
      ent_coef: lh.entCoef,
      replay_coef: lh.replayCoef,
      temperature,
    };
    for (const [k, x] of Object.entries(lossFeeds)) feeds[k] = { dtype: 'float32', dims: lead, data: new Float32Array(K).fill(x) };
    // Dropout masks from the run's seed and each step's global number: a resume drops the same elements.
    if (this.lora && this.lora.config.lora_dropout > 0) {
      const seeds = BigInt64Array.from({ length: K }, (_, k) => BigInt(loraDropoutStepSeed(this.lora!.dropoutSeed, this.state.step + k)));
      feeds[LORA_DROPOUT_SEED] = { dtype: 'int64', dims: lead, data: seeds };
      // Each token's place in its step's batch: micro-batches hash the elements the whole batch would.
      const index = new BigInt64Array(K * n);
      for (let k = 0; k < K; k++) for (let i = 0; i < n; i++) index[k * n + i] = BigInt(i);
      feeds[LORA_DROPOUT_INDEX] = { dtype: 'int64', dims: [...lead, B, T], data: index };
    }
    const optHyper = { beta1: opt.beta1, beta2: opt.beta2, eps: opt.eps, weight_decay: opt.weightDecay, max_grad_norm: opt.maxGradNorm };
    const cap = o.microBatchTokens;
    if (cap !== undefined && !(Number.isInteger(cap) && cap >= 1))
      throw new TurnwiseError('invalid-input', `microBatchTokens must be a positive integer, got ${cap}`);
    const rows: StepMetrics[] = [];
    if (cap !== undefined && B * T > cap) {
      // Micro-batches of whole rows, the last one padded with rows that carry no loss.
      const rb = Math.max(1, Math.floor(cap / T));
      const M = Math.ceil(B / rb);
      const trainer = this.trainer({ ...graphOpts, batch: rb });
      const perRow = new Set(['input_ids', 'attention_mask', 'segment_ids', 'position_ids', LORA_DROPOUT_INDEX, ...batchInputs(graphOpts)]);
      for (let k = 0; k < K; k++) {
        const mf: Record<string, HostTensor> = { ...(this.lora?.frozen ?? {}) };
        for (const [name, t] of Object.entries(feeds)) {
          if (this.lora?.frozen[name]) continue;
          if (perRow.has(name)) mf[name] = microBatches(t, k * n, B, T, rb, M, name === 'attention_mask');
          else {
            // A per-step scalar ([K] when K steps are stacked): this step's value.
            const at = t.dims.length ? k : 0;
            mf[name] = { dtype: t.dtype, dims: [], data: (t.data as Float32Array).subarray(at, at + 1) };
          }
        }
        const { state, metrics } = await trainer.accumulatedStep(this.state, mf, { lr: lrs[k], ...optHyper });
        this.state = state;
        const row = {} as StepMetrics;
        for (const name of METRICS) row[name] = metrics[name][0];
        rows.push(row);
      }
      return rows;
    }
    const { state, metrics } = await this.trainer(graphOpts).step(this.state, feeds, { lr: lrs, ...optHyper }, K);
    this.state = state;
    for (let k = 0; k < K; k++) {
      const row = {} as StepMetrics;
      for (const name of METRICS) row[name] = metrics[name][k];
      rows.push(row);
    }
    return rows;
  }

  /** The K rates of the next K steps. */
  private learningRates(lr: LearningRate, K: number): number[] {
    const out =
      typeof lr === 'number'
        ? new Array<number>(K).fill(lr)
        : typeof lr === 'function'
          ? Array.from({ length: K }, (_, k) => lr(this.state.step + k))
          : Array.from(lr);
    if (out.length !== K)
      throw new TurnwiseError('invalid-input', `got ${out.length} learning rates for ${K} batches`, {
        hint: 'pass one rate, one per batch, or a schedule function',
      });
    for (const x of out)
      if (!(x >= 0) || !Number.isFinite(x)) throw new TurnwiseError('invalid-input', `learning rate ${x} is not a finite number ≥ 0`);
    return out;
  }

  async dispose(): Promise<void> {
    disposeDeviceMoments(this.state);
    this.state = { ...this.state, deviceMoments: undefined };
    await this.cache.clear();
    if (this.lora && !this.disposed) releaseFromDevice(Object.values(this.lora.frozen));
    this.disposed = true;
  }
  private disposed = false;
}

interface PackedLayout {
  segments: BigInt64Array;
  positions: BigInt64Array;
  /** 1 where a token can carry loss: real and not the first token of its example. */
  lossTokens: Uint8Array;
}

/**
 * Segment ids, restarting position ids and loss-carrying tokens of a packed batch. Segments must
 * be contiguous within a row (an id that comes back after another would join two examples).
 * A batch without segmentIds is one example per row, its padding from attentionMask.
 */
function packedLayout(b: TrainBatch, B: number, T: number): PackedLayout {
  const n = B * T;
  if (b.segmentIds && b.attentionMask) {
    throw new TurnwiseError('invalid-input', 'a batch has both segmentIds and attentionMask', {
      hint: 'segment id 0 marks padding: drop attentionMask',
    });
  }
  const src = b.segmentIds ?? b.attentionMask;
  if (src && src.length !== n)
    throw new TurnwiseError(
      'invalid-input',
      `${b.segmentIds ? 'segmentIds' : 'attentionMask'} has length ${src.length}, expected batch·seq = ${n}`,
    );
  const segments = new BigInt64Array(n);
  const positions = new BigInt64Array(n);
  const lossTokens = new Uint8Array(n);
  for (let r = 0; r < B; r++) {
    const seen = new Set<number>();
    let prev = 0;
    let pos = 0;
    for (let t = 0; t < T; t++) {
      const i = r * T + t;
      const s = src ? src[i] : 1;
      if (!Number.isInteger(s) || s < 0)
        throw new TurnwiseError('invalid-input', `segment id ${s} at row ${r}, token ${t}: segment ids are integers ≥ 0 (0 = padding)`);
      if (s !== 0 && s !== prev) {
        if (seen.has(s))
          throw new TurnwiseError('invalid-input', `segment ${s} of row ${r} is not contiguous (it resumes at token ${t})`, {
            hint: 'give each packed example its own id',
          });
        seen.add(s);
        pos = 0;
      }
      segments[i] = BigInt(s);
      positions[i] = BigInt(s === 0 ? 0 : pos++);
      lossTokens[i] = s !== 0 && s === prev ? 1 : 0;
      prev = s;
    }
  }
  return { segments, positions, lossTokens };
}

/**
 * Rows [at, at + B·T) of a [.., B, T] feed as M micro-batches of rb rows, [M, rb, T]; the rows
 * past B are padding: zeros (no token, no loss), with one attended token where `attended`.
 */
function microBatches(t: HostTensor, at: number, B: number, T: number, rb: number, M: number, attended: boolean): HostTensor {
  const src = t.data as Float32Array | BigInt64Array;
  const out = src instanceof BigInt64Array ? new BigInt64Array(M * rb * T) : new Float32Array(M * rb * T);
  out.set(src.subarray(at, at + B * T) as never);
  if (attended) for (let r = B; r < M * rb; r++) (out as Float32Array)[r * T] = 1;
  return { dtype: t.dtype, dims: [M, rb, T], data: out };
}

/** The fields of `o` that are not undefined (so spreading it over defaults keeps the defaults). */
function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, x]) => x !== undefined)) as Partial<T>;
}
