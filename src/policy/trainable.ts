// The policy being trained: one owner of the weights, shared by sampling (Policy, sequences
// addressed by id) and the optimizer (PolicyTrainer), so whatever samples or scores after a
// train() uses the new weights, and a KL reference (the starting weights) for log-probs.
// PolicyWorker runs one of these in a worker thread behind the same PolicyService interface.
import { TurnwiseError } from '../core/errors';
import type { SessionSettings } from '../onnx';
import { loadCheckpoint, saveCheckpoint, zeroOptimizerState } from './files/checkpoint';
import type { OptimizerState } from './files/optimizer-state';
import type { ModelConfig } from './model/config';
import { Policy, type GeneratedRow, type SampleRequest } from './inference/policy';
import type { Sequence } from './inference/sequences';
import { SCORING_ROWS_PER_RUN } from './model/graphs';
import { PolicyTrainer, type StepMetrics } from './training/trainer';
import { initAdapter, saveAdapter, zeroAdapterOptimizer, type LoraAdapter, type LoraConfig } from './files/lora';
import type { PolicyWeights } from './model/weights';
import type { RolloutPrecision } from './model/quantize';

export type SequenceId = number;

/** PolicyTrainer.train's arguments, whatever they grow into. */
export type TrainArgs = Parameters<PolicyTrainer['train']>;

export interface SampleByIdRequest extends Omit<SampleRequest, 'seq'> {
  seq: SequenceId;
}

export interface ExtendByIdRequest {
  seq: SequenceId;
  ids?: readonly number[];
}

export interface LogprobOptions {
  /** The sampling temperature the log-probs are for. Default 1. */
  temperature?: number;
  /** `current` (default): the weights being trained; `reference`: the KL reference weights. */
  model?: 'current' | 'reference';
}

/** What a loaded policy is. */
export interface PolicyInfo {
  config: ModelConfig;
  /** Optimizer updates done so far (the checkpoint's, then counting). */
  step: number;
  /** Execution provider the sessions run on. */
  provider: string;
  /** What the decode steps that draw tokens read the base weights as (SessionSettings.rolloutPrecision). */
  rolloutPrecision: RolloutPrecision;
  /** The tokenizer files, to build the same tokenizer elsewhere (loadTokenizer). */
  tokenizerJson?: Record<string, unknown>;
  tokenizerConfig?: Record<string, unknown>;
}

/** What a trained-and-sampled policy offers, in this thread (TrainablePolicy) or a worker (PolicyWorker). */
export interface PolicyService {
  info(): Promise<PolicyInfo>;
  /** A new sequence (optionally with its first tokens); nothing runs until extend or sample. */
  newSequence(tokens?: readonly number[]): Promise<SequenceId>;
  /** The whole sequence: prompt, observations, sampled tokens. */
  tokens(seq: SequenceId): Promise<number[]>;
  /** Replaces a sequence's tokens by a re-rendered context, keeping the cache of the common prefix. */
  reset(seq: SequenceId, ids: readonly number[]): Promise<void>;
  /** Forgets a sequence and its cache. Unknown ids are ignored. */
  release(seq: SequenceId): Promise<void>;
  /** What sampling reads the base weights as from now on (SessionSettings.rolloutPrecision); the precision it resolved to. */
  setRolloutPrecision(setting: RolloutPrecision | 'auto'): Promise<RolloutPrecision>;
  /** Appends tokens to sequences and runs them now, batched (Policy.extend). */
  extend(requests: readonly ExtendByIdRequest[]): Promise<void>;
  /** Samples continuations of sequences, batched, per-row seeds (Policy.sample). */
  sample(requests: readonly SampleByIdRequest[]): Promise<GeneratedRow[]>;
  /**
   * Per row, log π(token i | tokens before i) at the temperature for i ≥ 1, aligned with the ids
   * (index 0 is 0): what TrainBatch.oldLogp / refLogp take.
   */
  logprobs(rows: readonly (readonly number[])[], options?: LogprobOptions): Promise<Float32Array[]>;
  /** PolicyTrainer.train; sampling and log-probs use the new weights from then on. */
  train(...args: TrainArgs): Promise<StepMetrics[]>;
  saveCheckpoint(dir: string): Promise<void>;
  weights(): Promise<PolicyWeights>;
  optimizerState(): Promise<OptimizerState>;
  dispose(): Promise<void>;
}

export interface TrainableOptions {
  optimizer?: OptimizerState;
  /**
   * Train this LoRA adapter on top of the frozen weights instead of the weights themselves; its
   * AdamW state in `optimizer` (PEFT keys) when resumed. The KL reference is then the starting
   * policy: the base with the adapter off when the adapter starts as the base (every B zero, a
   * fresh one), else the base with a frozen copy of the adapter as it started (`referenceAdapter`).
   */
  adapter?: LoraAdapter;
  /**
   * The adapter the KL reference runs with (a LoRA run resumed: its checkpoint 0's); default: a
   * copy of `adapter` as given, when any of its B tensors is not zero (a warm-started adapter).
   */
  referenceAdapter?: LoraAdapter;
  /** Seed of the adapter's dropout masks (lora_dropout > 0): a run's, so a resume drops what the uninterrupted run would. Default 0. */
  loraDropoutSeed?: number;
  /** KL reference weights (default: the starting weights). */
  reference?: PolicyWeights;
  /** Tokenizer files, written with saveCheckpoint. */
  tokenizerJson?: Record<string, unknown>;
  tokenizerConfig?: Record<string, unknown>;
  settings?: SessionSettings;
}

/** How TrainablePolicy.fromCheckpoint loads a checkpoint (the policy worker passes them on as they are). */
export interface CheckpointOptions {
  referenceDir?: string;
  /** Start a fresh adapter (B = 0) of this configuration on a model folder. */
  lora?: { config: LoraConfig; seed: number };
  /** Seed of the adapter's dropout masks (TrainableOptions.loraDropoutSeed). */
  loraDropoutSeed?: number;
}

export class TrainablePolicy implements PolicyService {
  readonly config: ModelConfig;
  private readonly policy: Policy;
  private trainer: PolicyTrainer | undefined;
  private referencePolicy: Policy | undefined;
  private readonly sequences = new Map<SequenceId, Sequence>();
  private nextId = 1;
  // Calls run one at a time: a train() must not swap the weights under a sample in progress.
  private queue: Promise<unknown> = Promise.resolve();
  private disposed = false;

  /**
   * The starting weights, kept only where they are read again (full training: checkpoints before
   * the first step, the default KL reference). A LoRA policy's base is the sampling policy's own
   * feeds (the graphs take the Hugging Face layout, so they are the same arrays).
   */
  private readonly held: PolicyWeights | undefined;

  /** The adapter the KL reference runs with; undefined: the base alone (or the reference weights). */
  private readonly referenceAdapter: LoraAdapter | undefined;

  constructor(
    start: PolicyWeights,
    private readonly options: TrainableOptions = {},
  ) {
    this.config = start.config;
    // Copied before the policy holds it: training updates the adapter's arrays in place.
    const ref = options.referenceAdapter ?? options.adapter;
    this.referenceAdapter = ref && !adapterIsBase(ref) ? copyAdapter(ref) : undefined;
    this.policy = new Policy(start, undefined, options.settings, options.adapter);
    this.held = options.adapter ? undefined : start;
  }

  private get start(): PolicyWeights {
    return this.held ?? this.policy.baseWeights();
  }

  /**
   * Loads a checkpoint directory (weights, optimizer state, tokenizer); the reference defaults to
   * its weights. An adapter folder loads as its base with the adapter (and the adapter's optimizer
   * state) to train; `lora` puts a fresh adapter (B = 0, so it starts as the model) on a model
   * folder, the start of a LoRA run. The reference of a LoRA policy is its starting policy: with
   * `referenceDir` (a resumed run's checkpoint 0), the adapter that folder holds.
   */
  static fromCheckpoint(dir: string, settings: SessionSettings = {}, options: CheckpointOptions = {}): TrainablePolicy {
    const ck = loadCheckpoint(dir);
    const tok = {
      tokenizerJson: ck.tokenizerJson,
      tokenizerConfig: ck.tokenizerConfig,
      settings,
      ...(options.loraDropoutSeed !== undefined ? { loraDropoutSeed: options.loraDropoutSeed } : {}),
    };
    if (ck.adapter) {
      // Its checkpoints name the base by the folder it was loaded from: a relative name, right
      // beside the adapter's own folder, would not be right beside a run's checkpoints/N.
      const adapter = { ...ck.adapter, config: { ...ck.adapter.config, base_model_name_or_path: ck.dir } };
      // A resumed run's reference is the adapter its checkpoint 0 holds (the one it started with).
      const referenceAdapter = options.referenceDir ? loadCheckpoint(options.referenceDir, { optimizer: false }).adapter : undefined;
      return new TrainablePolicy(ck.weights, {
        adapter,
        ...(referenceAdapter ? { referenceAdapter } : {}),
        ...(ck.adapterOptimizer ? { optimizer: ck.adapterOptimizer } : {}),
        ...tok,
      });
    }
    if (options.lora) {
      const config = { ...options.lora.config, base_model_name_or_path: ck.dir };
      return new TrainablePolicy(ck.weights, { adapter: initAdapter(ck.weights.config, config, options.lora.seed), ...tok });
    }
    const reference = options.referenceDir ? loadCheckpoint(options.referenceDir, { optimizer: false }).weights : undefined;
    return new TrainablePolicy(ck.weights, {
      optimizer: ck.optimizer,
      reference,
      tokenizerJson: ck.tokenizerJson,
      tokenizerConfig: ck.tokenizerConfig,
      settings,
    });
  }

  private serial<T>(f: () => Promise<T> | T): Promise<T> {
    const run = this.queue.then(() => {
      if (this.disposed) throw new TurnwiseError('internal', 'this policy was disposed', { hint: 'load the policy again' });
      return f();
    });
    this.queue = run.catch(() => undefined);
    return run;
  }

  private seq(id: SequenceId): Sequence {
    const s = this.sequences.get(id);
    if (!s)
      throw new TurnwiseError('invalid-input', `no sequence ${id}: never created here, or released`, {
        hint: 'create sequences with newSequence() and release each once',
      });
    return s;
  }

  info(): Promise<PolicyInfo> {
    return this.serial(async () => ({
      config: this.config,
      step: this.trainer?.step ?? this.options.optimizer?.step ?? 0,
      provider: await this.policy.provider,
      rolloutPrecision: await this.policy.rolloutPrecision(),
      tokenizerJson: this.options.tokenizerJson,
      tokenizerConfig: this.options.tokenizerConfig,
    }));
  }

  setRolloutPrecision(setting: RolloutPrecision | 'auto'): Promise<RolloutPrecision> {
    return this.serial(() => this.policy.setRolloutPrecision(setting));
  }

  newSequence(tokens: readonly number[] = []): Promise<SequenceId> {
    return this.serial(() => {
      const s = this.policy.newSequence(tokens);
      const id = this.nextId++;
      this.sequences.set(id, s);
      return id;
    });
  }

  tokens(seq: SequenceId): Promise<number[]> {
    return this.serial(() => [...this.seq(seq).tokens]);
  }

  reset(seq: SequenceId, ids: readonly number[]): Promise<void> {
    return this.serial(() => void this.seq(seq).reset(ids));
  }

  release(seq: SequenceId): Promise<void> {
    return this.serial(() => void this.sequences.delete(seq));
  }

  extend(requests: readonly ExtendByIdRequest[]): Promise<void> {
    return this.serial(() => this.policy.extend(requests.map((r) => ({ seq: this.seq(r.seq), ids: r.ids }))));
  }

  sample(requests: readonly SampleByIdRequest[]): Promise<GeneratedRow[]> {
    return this.serial(() => this.policy.sample(requests.map((r) => ({ ...r, seq: this.seq(r.seq) }))));
  }

  logprobs(rows: readonly (readonly number[])[], options: LogprobOptions = {}): Promise<Float32Array[]> {
    return this.serial(async () => {
      const temperature = options.temperature ?? 1;
      if (!(temperature > 0) || !Number.isFinite(temperature))
        throw new TurnwiseError('invalid-input', `log-prob temperature must be a finite number > 0, got ${temperature}`);
      // A LoRA policy's reference is its starting policy: a fresh adapter's is its base, the adapter
      // off (the same weight tensors, no second copy); a warm-started adapter's is the base with
      // the adapter as it started, in a policy of its own over the same base arrays.
      const baseOnly = options.model === 'reference' && !!this.options.adapter && !this.options.reference && !this.referenceAdapter;
      const policy =
        options.model === 'reference' && !baseOnly
          ? (this.referencePolicy ??= new Policy(
              this.options.reference ?? this.start,
              undefined,
              this.options.settings,
              this.referenceAdapter,
            ))
          : this.policy;
      const out: Float32Array[] = rows.map((r) => new Float32Array(r.length));
      // Rows of similar length run together, so little of each run is padding.
      const order = rows
        .map((_, i) => i)
        .filter((i) => rows[i].length > 1)
        .sort((a, b) => rows[a].length - rows[b].length);
      for (let k = 0; k < order.length; k += SCORING_ROWS_PER_RUN) {
        const chunk = order.slice(k, k + SCORING_ROWS_PER_RUN);
        const lps = await policy.tokenLogprobs(
          chunk.map((i) => rows[i]),
          { temperature, ...(baseOnly ? { adapter: false } : {}) },
        );
        chunk.forEach((i, j) => out[i].set(lps[j]));
      }
      return out;
    });
  }

  train(...args: TrainArgs): Promise<StepMetrics[]> {
    return this.serial(async () => {
      // The trainer feeds the sampling policy's own weight arrays: one copy of the weights in the process.
      this.trainer ??= this.options.adapter
        ? new PolicyTrainer(
            this.start,
            undefined,
            this.options.settings,
            { adapter: this.options.adapter, optimizer: this.options.optimizer, dropoutSeed: this.options.loraDropoutSeed },
            this.policy.baseFeeds(),
            { keepMoments: true },
          )
        : new PolicyTrainer(this.start, this.options.optimizer, this.options.settings, undefined, this.policy.baseFeeds(), {
            keepMoments: true,
          });
      // The decode session's packed copy of the weights is not held through the step (the step's
      // peak is the weights once, its state and activations); the next draw packs them again.
      await this.policy.releasePacked();
      const metrics = await this.trainer.train(...args);
      // The trainer owns the weights (or the adapter); sampling reads them, and sequence caches
      // computed under the old ones are recomputed on their next call.
      if (this.trainer.trainsAdapter) this.policy.setAdapter(this.trainer.adapter()!);
      else this.policy.setGraphWeights(this.trainer.graphWeights());
      return metrics;
    });
  }

  private currentWeights(): PolicyWeights {
    return this.trainer ? this.trainer.weights() : this.start;
  }

  private currentOptimizer(): OptimizerState {
    if (this.options.adapter)
      return this.trainer?.adapterOptimizerState() ?? this.options.optimizer ?? zeroAdapterOptimizer(this.options.adapter);
    return this.trainer ? this.trainer.optimizerState() : (this.options.optimizer ?? zeroOptimizerState(this.config));
  }

  /** The adapter being trained (PEFT layout); undefined for a policy that trains its weights. */
  adapter(): Promise<LoraAdapter | undefined> {
    return this.serial(() => this.trainer?.adapter() ?? this.options.adapter);
  }

  saveCheckpoint(dir: string): Promise<void> {
    return this.serial(async () => {
      await this.trainer?.syncMoments();
      // A LoRA checkpoint is the adapter and its optimizer state: megabytes, not a copy of the base.
      if (this.options.adapter)
        return saveAdapter(dir, this.trainer?.adapter() ?? this.options.adapter, this.config, this.currentOptimizer());
      if (!this.options.tokenizerJson)
        throw new TurnwiseError('internal', 'this policy was built without its tokenizer files, so it cannot be saved as a checkpoint', {
          hint: 'load it from a checkpoint directory, or pass tokenizerJson',
        });
      saveCheckpoint(dir, {
        weights: this.currentWeights(),
        optimizer: this.currentOptimizer(),
        tokenizerJson: this.options.tokenizerJson,
        tokenizerConfig: this.options.tokenizerConfig,
      });
    });
  }

  weights(): Promise<PolicyWeights> {
    return this.serial(() => this.currentWeights());
  }

  optimizerState(): Promise<OptimizerState> {
    return this.serial(async () => {
      await this.trainer?.syncMoments();
      return this.currentOptimizer();
    });
  }

  dispose(): Promise<void> {
    return this.serial(async () => {
      this.disposed = true;
      this.sequences.clear();
      await this.policy.dispose();
      await this.referencePolicy?.dispose();
      await this.trainer?.dispose();
    });
  }
}

/** Whether an adapter changes nothing: every B tensor zero (a fresh adapter, PEFT's initialization). */
export function adapterIsBase(a: LoraAdapter): boolean {
  for (const [name, t] of a.tensors) if (/lora_B/.test(name) && t.some((x) => x !== 0)) return false;
  return true;
}

function copyAdapter(a: LoraAdapter): LoraAdapter {
  return { config: { ...a.config }, tensors: new Map([...a.tensors].map(([k, v]) => [k, Float32Array.from(v)])) };
}
