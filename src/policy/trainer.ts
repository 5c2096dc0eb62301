// Runs the training graphs through src/onnx's Trainer: keeps weights and AdamW moments in graph
// layout between runs, feeds K stacked batches per run (K optimizer steps in one ONNX Loop), and
// converts back to Hugging Face layout for checkpoints. Sessions are cached per shape class
// (loss, batch, seq, kl, entropy) and per K.
import { TurnwiseError } from '../core/errors';
import { SessionCache, type HostTensor, type SessionSettings } from '../onnx';
import { Trainer, type TrainState } from '../onnx/training';
import { zeroOptimizerState, type OptimizerState } from './checkpoint';
import { type Qwen2Config } from './config';
import { fromGraphLayout, toGraphLayout } from './graphs';
import { batchInputs, METRICS, policyTrainingSpec, type LossHyperName, type MetricName, type TrainGraphOptions, type TrainLoss } from './training';
import type { PolicyWeights } from './weights';

/** One optimizer step's batch: flat row-major [batch, seq] arrays aligned with input_ids. */
export interface TrainBatch {
  inputIds: ArrayLike<number>;
  /** 1 for real tokens, 0 for right padding. Default: all 1. */
  attentionMask?: ArrayLike<number>;
  /** 1 on action tokens (the tokens whose log-prob is trained), 0 elsewhere; column 0 is ignored. */
  lossMask: ArrayLike<number>;
  advantages?: ArrayLike<number>;
  oldLogp?: ArrayLike<number>;
  refLogp?: ArrayLike<number>;
}

export interface TrainHyper {
  lr: number;
  beta1?: number;
  beta2?: number;
  eps?: number;
  /** Decoupled weight decay, applied to matrices only (not norms or biases). Default 0. */
  weightDecay?: number;
  /** Global gradient-norm clip; ≤ 0 disables. Default 1. */
  maxGradNorm?: number;
  clipLow?: number;
  clipHigh?: number;
  klCoef?: number;
  entCoef?: number;
  /** Sampling temperature the log-probs are computed at. Default 1. */
  temperature?: number;
}

export type StepMetrics = Record<MetricName, number>;

export interface TrainStepOptions {
  loss: TrainLoss;
  batch: number;
  seq: number;
}

export class PolicyTrainer {
  readonly config: Qwen2Config;
  private state: TrainState;
  private readonly cache: SessionCache;
  private readonly trainers = new Map<string, Trainer>();

  constructor(weights: PolicyWeights, optimizer?: OptimizerState, private readonly settings: SessionSettings = {}) {
    this.config = weights.config;
    const opt = optimizer ?? zeroOptimizerState(weights.config);
    const rec = (m: Map<string, Float32Array>) => Object.fromEntries(toGraphLayout(this.config, m));
    this.state = { params: rec(weights.tensors), m: rec(opt.expAvg), v: rec(opt.expAvgSq), step: opt.step };
    this.cache = new SessionCache(settings, 4);
  }

  get step(): number {
    return this.state.step;
  }

  private map(rec: Record<string, Float32Array | Float64Array>): Map<string, Float32Array> {
    return new Map(Object.entries(rec) as [string, Float32Array][]);
  }

  /** Current weights in Hugging Face layout (copies). */
  weights(): PolicyWeights {
    return { config: this.config, tensors: fromGraphLayout(this.config, this.map(this.state.params)) };
  }

  optimizerState(): OptimizerState {
    return { step: this.state.step, expAvg: fromGraphLayout(this.config, this.map(this.state.m)), expAvgSq: fromGraphLayout(this.config, this.map(this.state.v)) };
  }

  /** Weights in graph layout, shared (not copied): for Policy.setGraphWeights. */
  graphWeights(): Map<string, Float32Array> {
    return this.map(this.state.params);
  }

  private trainer(o: TrainGraphOptions): Trainer {
    const key = `${o.loss}|B${o.batch}|T${o.seq}|${o.kl ? 'kl' : ''}|${o.entropy ? 'ent' : ''}|${o.weightDecay === false ? 'nowd' : 'wd'}`;
    let t = this.trainers.get(key);
    if (!t) {
      t = new Trainer(policyTrainingSpec(this.config, o), key, this.settings, this.cache);
      this.trainers.set(key, t);
    }
    return t;
  }

  /**
   * One optimizer step per batch, all in one session run (an ONNX Loop when there are several).
   * The KL and entropy terms are in the graph only when klCoef / entCoef are non-zero, the weight
   * decay multiply only when weightDecay is.
   */
  async train(o: TrainStepOptions, batches: readonly TrainBatch[], hyper: TrainHyper): Promise<StepMetrics[]> {
    const { batch: B, seq: T } = o;
    const K = batches.length;
    if (K === 0) return [];
    if (T > this.config.max_position_embeddings) throw new TurnwiseError('invalid-input', `seq ${T} exceeds max_position_embeddings ${this.config.max_position_embeddings}`, { hint: 'truncate the batch' });
    const graphOpts: TrainGraphOptions = {
      loss: o.loss,
      batch: B,
      seq: T,
      kl: (hyper.klCoef ?? 0) !== 0,
      entropy: (hyper.entCoef ?? 0) !== 0,
      weightDecay: (hyper.weightDecay ?? 0) !== 0,
    };
    const lead = K > 1 ? [K] : [];
    const n = B * T;
    const ids = new BigInt64Array(K * n);
    batches.forEach((b, k) => {
      if (b.inputIds.length !== n) throw new TurnwiseError('invalid-input', `inputIds has length ${b.inputIds.length}, expected batch·seq = ${n}`);
      for (let i = 0; i < n; i++) {
        const id = b.inputIds[i];
        if (!Number.isInteger(id) || id < 0 || id >= this.config.vocab_size) throw new TurnwiseError('invalid-input', `token id ${id} is outside the vocabulary (0..${this.config.vocab_size - 1})`);
        ids[k * n + i] = BigInt(id);
      }
    });
    const stack = (name: string, get: (b: TrainBatch) => ArrayLike<number> | undefined, fill?: number): HostTensor => {
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
      });
      return { dtype: 'float32', dims: [...lead, B, T], data: out };
    };
    const feeds: Record<string, HostTensor> = {
      input_ids: { dtype: 'int64', dims: [...lead, B, T], data: ids },
      attention_mask: stack('attentionMask', (b) => b.attentionMask, 1),
    };
    const getters: Record<string, (b: TrainBatch) => ArrayLike<number> | undefined> = {
      loss_mask: (b) => b.lossMask,
      advantages: (b) => b.advantages,
      old_logp: (b) => b.oldLogp,
      ref_logp: (b) => b.refLogp,
    };
    for (const name of batchInputs(graphOpts)) feeds[name] = stack(name, getters[name]);
    const temperature = hyper.temperature ?? 1;
    if (!(temperature > 0) || !Number.isFinite(temperature)) {
      // The training graph divides the logits by it; 0 (greedy sampling) has no log-probs to train on.
      throw new TurnwiseError('invalid-input', `training temperature must be a finite number > 0, got ${temperature}`, {
        hint: 'use the temperature the rollouts were sampled at; greedy (0) rollouts carry no sampling log-probs, train them at 1',
      });
    }
    const lossHyper: Record<LossHyperName, number> = {
      clip_low: hyper.clipLow ?? 0.2,
      clip_high: hyper.clipHigh ?? 0.2,
      kl_coef: hyper.klCoef ?? 0,
      ent_coef: hyper.entCoef ?? 0,
      temperature,
    };
    for (const [k, x] of Object.entries(lossHyper)) feeds[k] = { dtype: 'float32', dims: lead, data: new Float32Array(K).fill(x) };
    const { state, metrics } = await this.trainer(graphOpts).step(
      this.state,
      feeds,
      { lr: hyper.lr, beta1: hyper.beta1 ?? 0.9, beta2: hyper.beta2 ?? 0.999, eps: hyper.eps ?? 1e-8, weight_decay: hyper.weightDecay ?? 0, max_grad_norm: hyper.maxGradNorm ?? 1 },
      K,
    );
    this.state = state;
    const rows: StepMetrics[] = [];
    for (let k = 0; k < K; k++) {
      const row = {} as StepMetrics;
      for (const name of METRICS) row[name] = metrics[name][k];
      rows.push(row);
    }
    return rows;
  }

  async dispose(): Promise<void> {
    await this.cache.clear();
  }
}
