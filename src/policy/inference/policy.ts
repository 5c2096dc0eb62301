// The policy at inference time: its ONNX sessions over the weights (a LoRA adapter on top or
// not), the logits and token log-probs of whole rows (scoring), and batched, seeded generation
// over per-sequence KV caches (sequences.ts), its tokens drawn on the host (sampling.ts) or in
// the graph.
import {
  KEEPING_PROVIDERS,
  keepOnDevice,
  toFloat16Bits,
  releaseFromDevice,
  SessionCache,
  toModelProto,
  type ExecutionProviderName,
  type HostTensor,
  type OnnxSession,
  type ort,
  type SessionSettings,
} from '../../onnx';
import { TurnwiseError } from '../../core/errors';
import type { ModelConfig } from '../model/config';
import { packsDecodeWeights } from '../model/memory';
import {
  buildDecodeLoopGraph,
  buildStepGraph,
  fromGraphLayout,
  loraGraphSpecs,
  loraToGraphLayout,
  MASKED,
  SCORE_CHUNK_ROWS,
  weightFeeds,
  halfName,
  quantizedNames,
  type LoraShape,
  type ProductForm,
  type QuantizedForm,
  type StepLogits,
} from '../model/graphs';
import { PRECISION_BITS, quantizeBlocks, rolloutPrecisionFor, type RolloutPrecision } from '../model/quantize';
import type { LoraAdapter } from '../files/lora';
import type { PolicyTokenizer } from '../files/tokenizer';
import { SeededRandom, type PolicyWeights } from '../model/weights';
import { disposeDeviceCache, keepSlots, kvCacheFeeds, newKvCache, writeNewSlots, type KvCache } from './kv-cache';
import { removePackedWeights, writePackedModel, writePackedWeights, type PackedWeights } from './packed-weights';
import { sampleToken, topLogprobs, type TokenLogprob } from './sampling';
import { checkTokenIds, gatherSequences, scatterSequences, Sequence } from './sequences';

export interface GenerateOptions {
  maxNewTokens?: number;
  /** 0 = greedy. Default 1. */
  temperature?: number;
  /** Nucleus sampling mass in (0, 1]. Default 1. */
  topP?: number;
  seed?: number;
  /** Token ids that end a row (default: eos_token_id and <|im_end|> when known). */
  stopIds?: number[];
  /** Use the KV cache (default). `false` recomputes the whole sequence each token (benchmarks, tests). */
  kvCache?: boolean;
}

export interface GeneratedRow {
  /** Sampled token ids, the stop token included when one was sampled. */
  tokenIds: number[];
  /**
   * log π(token) under the sampling distribution softmax(logits / temperature) (before top-p
   * truncation; temperature 0 uses temperature 1), one per token.
   */
  logprobs: number[];
  finishReason: 'stop' | 'length';
  /** With SampleRequest.topLogprobs: per sampled token, the most likely tokens and their log-probs. */
  topLogprobs?: TokenLogprob[][];
}

/** Tokens to append to a sequence and feed to the model now (Policy.extend). */
export interface ExtendRequest {
  seq: Sequence;
  ids?: readonly number[];
}

/** One sequence to continue (Policy.sample). */
export interface SampleRequest {
  seq: Sequence;
  /** Tokens to append first (an observation): fed in the same run as the sampling's first step. */
  ids?: readonly number[];
  /** This row's random stream: the same seed gives the same draws whatever else is in the batch. Default 0. */
  seed?: number;
  /** Default 64; never past max_position_embeddings. */
  maxNewTokens?: number;
  /** 0 = greedy. Default 1. */
  temperature?: number;
  /** Nucleus sampling mass in (0, 1]. Default 1. */
  topP?: number;
  /** Token ids that end the row (default: eos_token_id and <|im_end|> when known). */
  stopIds?: readonly number[];
  /** Also return, per sampled token, this many most likely tokens with their log-probs (GeneratedRow.topLogprobs). */
  topLogprobs?: number;
  /**
   * Called as each token of this row is drawn, before the next is decoded (a server streams it);
   * returning `'stop'` ends the row there, with finishReason 'stop' (a stop string was written).
   */
  onToken?: (token: { id: number; logprob: number; top?: TokenLogprob[] }) => void | 'stop';
}

/** How one row of a sample call draws its tokens. */
interface SamplePlan {
  temperature: number;
  topP: number;
  /** Tokens this call may add to the row. */
  budget: number;
  stop: Set<number>;
  rng: SeededRandom;
  top: number;
  onToken?: SampleRequest['onToken'];
}

/**
 * A sample call regathers its batch once half of the rows are done, if the longest remaining
 * row may still take more than this many tokens (the copy then costs less than the rows saved).
 */
const REGATHER_MIN_STEPS = 4;
/**
 * Decode steps per run ('auto') on a GPU provider that copies the weights in on every run (CUDA:
 * onnxruntime-node's binding takes no CUDA device tensors), in one ONNX Loop, meant to copy them
 * once per 8 tokens. A provider that keeps them on the device (WebGPU, KEEPING_PROVIDERS) runs
 * one step per run: through WebGPU on an H200 a looped step cost the same as a step of its own
 * (docs/experiments/2026-12-04-webgpu-h200.md), and the Loop runs on the CPU provider, so its
 * inputs would be read back to the host.
 */
export const GPU_DECODE_STEPS_PER_RUN = 8;

/** The suffix halfName gives a weight's float16 copy. */
const HALF_SUFFIX = halfName('');

export class Policy {
  readonly config: ModelConfig;
  private feeds: Record<string, HostTensor>;
  private readonly sessions: SessionCache;
  private weightsVersion = 0;
  private readonly packSetting: boolean | undefined;
  private readonly onWarning: ((message: string) => void) | undefined;
  private packs: Promise<boolean> | undefined;
  private precisionSetting: RolloutPrecision | 'auto';
  private precision: Promise<RolloutPrecision> | undefined;
  /**
   * The base weights' files that sessions holding them load, by form: float32 for 'packed', the
   * products' quantized codes and scales for 'int8' and 'int4'. Written on first use, removed when
   * the weights change.
   */
  private heldFiles = new Map<'packed' | QuantizedForm, PackedWeights>();

  /** The LoRA adapter's layout when one is on top of the weights (its tensors are in `feeds`). */
  private lora: LoraShape | undefined;

  constructor(
    weights: PolicyWeights,
    readonly tokenizer?: PolicyTokenizer,
    settings: SessionSettings = {},
    adapter?: LoraAdapter,
  ) {
    this.config = weights.config;
    this.feeds = {};
    this.replaceFeeds(weightFeeds(weights));
    // prefill and decode, with and without an adapter, by the logits they return
    this.sessions = new SessionCache(settings, 8);
    this.packSetting = settings.packDecodeWeights;
    this.precisionSetting = settings.rolloutPrecision ?? 'auto';
    this.onWarning = settings.onWarning;
    if (adapter) this.setAdapter(adapter);
  }

  /**
   * Puts a LoRA adapter on top of the base weights (or replaces the one there): its tensors are
   * graph inputs beside the base's, which stay as they are. The first adapter, or one of another
   * layout, rebuilds the graphs.
   */
  setAdapter(adapter: LoraAdapter): void {
    const shape: LoraShape = {
      r: adapter.config.r,
      lora_alpha: adapter.config.lora_alpha,
      use_rslora: adapter.config.use_rslora,
      target_modules: [...adapter.config.target_modules],
    };
    if (JSON.stringify(shape) !== JSON.stringify(this.lora)) {
      void this.sessions.clear();
      this.lora = shape;
    }
    const next: Record<string, HostTensor> = {};
    for (const [name, data] of loraToGraphLayout(this.config, adapter)) {
      const spec = loraGraphSpecs(this.config, shape).find((p) => p.name === name)!;
      next[name] = { dtype: 'float32', dims: spec.shape, data };
    }
    this.replaceFeeds(next);
    this.weightsVersion++;
  }

  /**
   * Sets feeds (weights or adapter tensors), keeping the new arrays on the device where the
   * provider can (keepOnDevice: uploaded once, then never fed from the host again) and letting go
   * of the arrays they replace.
   */
  private replaceFeeds(next: Record<string, HostTensor>): void {
    const old = Object.keys(next)
      .map((k) => this.feeds[k])
      .filter((t): t is HostTensor => t !== undefined);
    keepOnDevice(Object.values(next));
    Object.assign(this.feeds, next);
    releaseFromDevice(old);
  }

  /** Replaces the base weights (an adapter stays on top); sessions are kept, sequence caches recomputed. */
  setWeights(weights: PolicyWeights): void {
    this.replaceFeeds(weightFeeds(weights));
    this.baseChanged();
  }

  /** Replaces the weights with tensors already in graph layout (from the trainer, no copy). */
  setGraphWeights(graphTensors: Map<string, Float32Array>): void {
    // The base weights only: an adapter's tensors (PEFT names) are set through setAdapter.
    this.replaceFeeds(
      Object.fromEntries(Object.entries(this.baseFeeds()).map(([name, t]) => [name, { ...t, data: graphTensors.get(name)! }])),
    );
    this.baseChanged();
  }

  private baseChanged(): void {
    this.weightsVersion++;
    this.dropHalf();
    // Packed sessions hold the old weights: the next draw writes the new ones and packs them again.
    if (this.heldFiles.size > 0) {
      void this.releasePacked();
      this.removeHeldFiles();
    }
  }

  private removeHeldFiles(): void {
    for (const f of this.heldFiles.values()) removePackedWeights(f);
    this.heldFiles.clear();
  }

  /**
   * Releases the sessions that hold packed weights (their copy of the weights), e.g. for the
   * duration of a training step; the next draw creates them again from the weights' file.
   */
  async releasePacked(): Promise<void> {
    await this.sessions.drop((k) => k.includes('|packed'));
  }

  /** Whether this policy's CPU decode steps that draw their tokens hold packed weights (packsDecodeWeights). */
  packsDecodeWeights(): Promise<boolean> {
    return (this.packs ??= this.provider.then((p) =>
      packsDecodeWeights(
        this.packSetting,
        p,
        Object.values(this.baseFeeds()).reduce((n, t) => n + t.data.byteLength, 0),
      ),
    ));
  }

  /**
   * What this policy's CPU decode steps that draw their tokens read the base weights as
   * (SessionSettings.rolloutPrecision, `auto` by rolloutPrecisionFor); float32 on a GPU provider,
   * with one warning when int8 or int4 was asked for.
   */
  rolloutPrecision(): Promise<RolloutPrecision> {
    return (this.precision ??= this.provider.then((p) => {
      const bytes = Object.values(this.baseFeeds()).reduce((n, t) => n + t.data.byteLength, 0);
      const r = rolloutPrecisionFor(this.precisionSetting, p, bytes);
      if (r.note) this.warn(r.note);
      return r.precision;
    }));
  }

  /**
   * Samples at `setting` from the next draw on (a training run's evaluation samples in float32
   * whatever its rollouts do). The sessions holding weights are let go; a quantized one's file
   * stays, so switching back loads it again without quantizing.
   */
  async setRolloutPrecision(setting: RolloutPrecision | 'auto'): Promise<RolloutPrecision> {
    if (setting !== this.precisionSetting) {
      this.precisionSetting = setting;
      this.precision = undefined;
      await this.releasePacked();
    }
    return this.rolloutPrecision();
  }

  private warn(message: string): void {
    (this.onWarning ?? ((m: string) => process.stderr.write(`turnwise: ${m}\n`)))(message);
  }

  /**
   * The decode step that draws its tokens with the base weights held in the session: in float32,
   * packed by ONNX Runtime for its matrix kernel (ProductForm 'packed'), or block-quantized
   * ('int8', 'int4'). The weights go to a file once per weights version (packed-weights.ts), which
   * the session loads; the adapter's tensors are still fed, in float32.
   */
  private heldSession(form: 'packed' | QuantizedForm): Promise<OnnxSession> {
    const lora = this.lora;
    return this.sessions.get(`decode|sample|packed${form === 'packed' ? '' : `|${form}`}${lora ? '' : '|base'}`, () => {
      const g = buildStepGraph(this.config, 'decode', lora, 'sample', form);
      if (form === 'packed')
        return writePackedModel(
          this.heldFile(form, () => this.baseFeeds()),
          g,
        );
      // A quantized graph's products read codes and scales in place of the float weights.
      g.dropUnreadInputs();
      const read = new Set(g.inputs.map((v) => v.name));
      return writePackedModel(
        this.heldFile(form, () => this.quantizedFeeds(form, read)),
        g,
      );
    });
  }

  private heldFile(form: 'packed' | QuantizedForm, feeds: () => Record<string, HostTensor>): PackedWeights {
    let file = this.heldFiles.get(form);
    if (!file) this.heldFiles.set(form, (file = writePackedWeights(feeds())));
    return file;
  }

  /**
   * The tensors a quantized decode session holds: each product's weight as codes and scales
   * (quantizeBlocks). The float tensors the graph still reads (the embedding its lookup reads,
   * norms, biases) stay inputs, fed the policy's own arrays: a second float embedding would hold
   * twice the int4 products' bytes at Qwen2.5's vocabulary.
   */
  private quantizedFeeds(form: QuantizedForm, read: ReadonlySet<string>): Record<string, HostTensor> {
    const out: Record<string, HostTensor> = {};
    for (const [name, t] of Object.entries(this.baseFeeds())) {
      const q = quantizedNames(name);
      if (read.has(q.codes)) {
        const [rows, cols] = t.dims;
        const b = quantizeBlocks(t.data as Float32Array, rows, cols, PRECISION_BITS[form]);
        out[q.codes] = { dtype: 'uint8', dims: [rows, b.scales.length / rows, b.codes.length / b.scales.length], data: b.codes };
        out[q.scales] = { dtype: 'float32', dims: [b.scales.length], data: b.scales };
      }
    }
    return out;
  }

  /**
   * The session that holds its weights for a decode step that draws tokens, or undefined where
   * none is made: at rolloutPrecision float16 the half-precision one (halfSession, its weights fed
   * like the float ones), the quantized one at int8 or int4, else the packed one where
   * packsDecodeWeights says so. One that cannot be made (a file not written, a kernel missing)
   * gets one warning, and the policy goes on with the next form: float32 packed, then fed.
   */
  private async heldDecodeSession(): Promise<OnnxSession | undefined> {
    const precision = await this.rolloutPrecision();
    if (precision === 'float16') return this.halfSession(this.keepsCache());
    if (precision !== 'float32') {
      try {
        return await this.heldSession(precision);
      } catch (e) {
        this.precision = Promise.resolve('float32');
        this.dropHeldFile(precision);
        const t = e as TurnwiseError;
        this.warn(`rollouts not quantized to ${precision} (${t.message}${t.hint ? `; ${t.hint}` : ''}); sampling in float32`);
      }
    }
    if (!(await this.packsDecodeWeights())) return undefined;
    try {
      return await this.heldSession('packed');
    } catch (e) {
      this.packs = Promise.resolve(false);
      this.dropHeldFile('packed');
      const t = e as TurnwiseError;
      this.warn(
        `decode weights not packed (${t.message}${t.hint ? `; ${t.hint}` : ''}); decoding with the weights fed, as fast at one row and slower over several`,
      );
      return undefined;
    }
  }

  private dropHeldFile(form: 'packed' | QuantizedForm): void {
    const f = this.heldFiles.get(form);
    if (f) removePackedWeights(f);
    this.heldFiles.delete(form);
  }

  /**
   * The base weights' feeds in graph layout: the arrays every session of this policy is fed (not
   * copies), for a trainer to feed too, so the process holds one copy of the weights.
   */
  baseFeeds(): Record<string, HostTensor> {
    return Object.fromEntries(Object.entries(this.feeds).filter(([k]) => !k.startsWith('base_model.')));
  }

  /** The base weights as PolicyWeights over the same arrays (the graphs take the Hugging Face layout: nothing is copied). */
  baseWeights(): PolicyWeights {
    return {
      config: this.config,
      tensors: fromGraphLayout(this.config, new Map(Object.entries(this.baseFeeds()).map(([k, t]) => [k, t.data as Float32Array]))),
    };
  }

  /** The weight feeds `session` takes as inputs (the same arrays). */
  private feedsOf(session: OnnxSession): Record<string, HostTensor> {
    const names = new Set(session.inputNames);
    const out = Object.fromEntries(Object.entries(this.feeds).filter(([k]) => names.has(k)));
    const half = session.inputNames.filter((n) => n.endsWith(HALF_SUFFIX));
    if (half.length) Object.assign(out, this.halfFeeds(half));
    return out;
  }

  /**
   * The decode step that draws its tokens with half-precision products (ProductForm 'float16'):
   * it reads each product's float16 copy (halfFeeds) and the float32 tensors the rest of the graph
   * needs (the embedding's lookup, norms, biases, the adapter).
   */
  private halfSession(cacheOut = false): Promise<OnnxSession> {
    const lora = this.lora;
    return this.sessions.get(
      `decode|sample|f16${lora ? '' : '|base'}${cacheOut ? '|cacheout' : ''}`,
      () => {
        const g = buildStepGraph(this.config, 'decode', lora, 'sample', 'float16', cacheOut);
        g.dropUnreadInputs();
        return toModelProto(g);
      },
      cacheOut ? this.cacheOutNames() : [],
    );
  }

  /**
   * The float16 copies (halfName → [out, in] half bit patterns) of the product weights `names`
   * stand for, each made on first use once per weights version and kept on the device where the
   * provider can (keepOnDevice).
   */
  private halfFeeds(names: readonly string[]): Record<string, HostTensor> {
    const half = (this.half ??= {});
    const made: HostTensor[] = [];
    for (const n of names) {
      if (half[n]) continue;
      const t = this.feeds[n.slice(0, -HALF_SUFFIX.length)];
      if (!t) throw new TurnwiseError('internal', `a float16 graph reads ${n}, the copy of a weight this policy does not have`);
      made.push((half[n] = { dtype: 'float16', dims: t.dims, data: toFloat16Bits(t.data as Float32Array) }));
    }
    keepOnDevice(made);
    return Object.fromEntries(names.map((n) => [n, half[n]]));
  }
  private half: Record<string, HostTensor> | undefined;

  private dropHalf(): void {
    if (this.half) releaseFromDevice(Object.values(this.half));
    this.half = undefined;
  }

  /** The adapter's feeds (PEFT names), none without one. */
  private adapterFeeds(): Record<string, HostTensor> {
    return Object.fromEntries(Object.entries(this.feeds).filter(([k]) => k.startsWith('base_model.')));
  }

  /**
   * Counts weight changes. A sequence's cache remembers the version it was computed under;
   * a stale one is recomputed by the next extend or sample, so no old keys meet new weights.
   */
  get version(): number {
    return this.weightsVersion;
  }

  private session(
    kind: 'prefill' | 'decode',
    withAdapter = true,
    logits: StepLogits = 'all',
    products: Exclude<ProductForm, 'packed'> = 'one-row',
    cacheOut = false,
  ): Promise<OnnxSession> {
    const lora = withAdapter ? this.lora : undefined;
    return this.sessions.get(
      `${kind}|${logits}${lora ? '' : '|base'}${products === 'weights-left' ? '|rows' : ''}${cacheOut ? '|cacheout' : ''}`,
      () => toModelProto(buildStepGraph(this.config, kind, lora, logits, products, cacheOut)),
      cacheOut ? this.cacheOutNames() : [],
    );
  }

  /** The outputs of a decode graph built with cacheOut: the whole cache after the step, per layer. */
  private cacheOutNames(): string[] {
    return Array.from({ length: this.config.num_hidden_layers }, (_, l) => [`cache_out.${l}.key`, `cache_out.${l}.value`]).flat();
  }

  /**
   * Decode steps per run when the tokens are drawn in the graph: 'auto' runs one on the CPU
   * provider (it reads the weights in place) and on WebGPU (it keeps them on the device), and
   * GPU_DECODE_STEPS_PER_RUN on CUDA, whose every run copies the weights in from the host.
   */
  decodeStepsPerRun: number | 'auto' = 'auto';
  /** The provider the last run ran on. */
  private ranOn: string | undefined;

  get provider(): Promise<string> {
    return this.session('prefill').then((s) => s.provider);
  }

  private checkIds(rows: readonly (readonly number[])[]): void {
    for (const r of rows) checkTokenIds(this.config, r);
  }

  private newCache(B: number, capacity: number): KvCache {
    return newKvCache(this.config, B, capacity);
  }

  /**
   * Runs T new tokens per row on top of `cache` (a prefill when it is empty; ids of -1 are left
   * padding) and writes their keys and values into it. Returns logits [B, T, V]; with `at`,
   * only row b's logits at its position at[b] ([B, V]), or none ('none': an empty array).
   */
  private async step(cache: KvCache, ids: number[][], withAdapter = true, at?: readonly number[] | 'none'): Promise<Float32Array> {
    const T = ids[0].length;
    // One new token per row: its logits are all there are.
    const want: StepLogits = at === undefined || T === 1 ? 'all' : at === 'none' ? 'none' : 'rows';
    const extra: Record<string, HostTensor> = {};
    if (want === 'rows')
      extra.logits_rows = {
        dtype: 'int64',
        dims: [ids.length],
        data: BigInt64Array.from(at as readonly number[], (t, b) => BigInt(b * T + t)),
      };
    const out = await this.run(cache, ids, withAdapter, want, extra);
    return want === 'none' ? new Float32Array(0) : (out.logits.data as Float32Array);
  }

  /**
   * A decode step of one new token per row whose next tokens are drawn in the graph
   * (sampleRows): temperature[b] (0: greedy) and uniform[b], the row's draw in [0, 1).
   */
  private async draw(
    cache: KvCache,
    ids: number[][],
    temperature: Float32Array,
    uniform: Float32Array,
  ): Promise<{ ids: BigInt64Array; logprobs: Float32Array }> {
    const B = ids.length;
    const out = await this.run(cache, ids, true, 'sample', {
      sample_temperature: { dtype: 'float32', dims: [B], data: temperature },
      sample_uniform: { dtype: 'float32', dims: [B], data: uniform },
    });
    return { ids: out.sampled_ids.data as BigInt64Array, logprobs: out.sampled_logprobs.data as Float32Array };
  }

  /** step's and draw's run: feeds ids on top of the cache, writes their keys and values into it. */
  private async run(
    cache: KvCache,
    ids: number[][],
    withAdapter: boolean,
    want: StepLogits,
    extra: Record<string, HostTensor>,
  ): Promise<Record<string, HostTensor>> {
    const B = ids.length;
    const T = ids[0].length;
    const P = cache.filled;
    const C = cache.capacity;
    if (P + T > C) throw new TurnwiseError('internal', `KV cache of ${C} slots cannot take ${T} more tokens after ${P}`);
    const idArr = new BigInt64Array(B * T);
    const posArr = new BigInt64Array(B * T);
    const mask = new Float32Array(B * T);
    for (let b = 0; b < B; b++) {
      for (let i = 0; i < T; i++) {
        const real = ids[b][i] >= 0;
        idArr[b * T + i] = real ? BigInt(ids[b][i]) : 0n;
        mask[b * T + i] = real ? 1 : 0;
        posArr[b * T + i] = BigInt(cache.nextPos[b]);
        if (real) cache.nextPos[b]++;
      }
    }
    // A decode step that draws its tokens, on the CPU, holds its weights quantized (rolloutPrecision) or, when large, packed.
    const packed = P > 0 && want === 'sample' && withAdapter ? await this.heldDecodeSession() : undefined;
    // Without the adapter, the base's own tensors only (the same arrays: nothing is copied).
    // A session holding its weights is fed the rest: the adapter's, and a quantized one's float tensors.
    const weights = packed ? this.feedsOf(packed) : withAdapter || !this.lora ? this.feeds : this.baseFeeds();
    const feeds: Record<string, HostTensor | ort.Tensor> = {
      ...weights,
      ...extra,
      input_ids: { dtype: 'int64', dims: [B, T], data: idArr },
      position_ids: { dtype: 'int64', dims: [B, T], data: posArr },
    };
    let session: OnnxSession;
    if (P === 0) {
      session = await this.session('prefill', withAdapter, want);
      feeds.attention_mask = { dtype: 'float32', dims: [B, T], data: mask };
      feeds.token_index = { dtype: 'int64', dims: [T], data: BigInt64Array.from({ length: T }, (_, i) => BigInt(i)) };
    } else {
      // Several rows (a batch, or several new tokens) take the products with the weights on the left.
      // Where tensors stay on the device, a drawing step also returns the whole cache there (keepsCache).
      const keep = want === 'sample' && this.keepsCache() && (!packed || packed.outputNames.includes('cache_out.0.key'));
      session = packed ?? (await this.session('decode', withAdapter, want, B * T > 1 ? 'weights-left' : 'one-row', keep));
      const bias = new Float32Array(B * T * T);
      for (let b = 0; b < B; b++)
        for (let i = 0; i < T; i++) for (let j = 0; j < T; j++) bias[(b * T + i) * T + j] = j <= i && mask[b * T + j] ? 0 : MASKED;
      feeds.attn_bias = { dtype: 'float32', dims: [B, 1, T, T], data: bias };
      Object.assign(feeds, kvCacheFeeds(this.config, cache));
      if (keep) {
        feeds.cache_slot = { dtype: 'int64', dims: [1], data: BigInt64Array.of(BigInt(P)) };
        // The device's copy, where it is the cache as it stands; otherwise the host's, copied in once.
        if (cache.device?.filled === P) Object.assign(feeds, cache.device.tensors);
        const { host, device } = await session.runKeeping(feeds);
        disposeDeviceCache(cache);
        cache.device = {
          tensors: Object.fromEntries(Object.entries(device).map(([k, t]) => [k.replace(/^cache_out\./, 'cache.'), t])),
          filled: P + T,
        };
        return this.afterRun(session, cache, host, mask, T);
      }
    }
    return this.afterRun(session, cache, await session.run(feeds), mask, T);
  }

  /**
   * Whether drawing steps keep the batch's KV cache on the device between runs: on a provider
   * that keeps tensors (the last run's), one step per run, float32 or float16 products (the
   * quantized sessions return new slots only).
   */
  private keepsCache(): boolean {
    return this.ranOn !== undefined && KEEPING_PROVIDERS.has(this.ranOn as ExecutionProviderName) && this.resolvedDecodeStepsPerRun() === 1;
  }

  /** A run's new keys and values into the host's cache, their slots unmasked where real. */
  private afterRun(
    session: OnnxSession,
    cache: KvCache,
    out: Record<string, HostTensor>,
    mask: Float32Array,
    T: number,
  ): Record<string, HostTensor> {
    const B = mask.length / T;
    const P = cache.filled;
    const C = cache.capacity;
    this.ranOn = session.provider;
    writeNewSlots(this.config, cache, out, T);
    for (let b = 0; b < B; b++) for (let i = 0; i < T; i++) if (mask[b * T + i]) cache.bias[b * C + P + i] = 0;
    cache.filled = P + T;
    return out;
  }

  /**
   * K decode steps in one run (buildDecodeLoopGraph): row b feeds pending[b] (-1: a finished
   * row, which runs along and is ignored) and draws K tokens, uniform[k·B + b] the draw of its
   * step k. Writes the K fed tokens' keys and values into slots filled..filled+K−1, still
   * masked: keepSlots then unmasks those each row keeps.
   */
  private async drawSteps(
    cache: KvCache,
    pending: readonly number[],
    K: number,
    temperature: Float32Array,
    uniform: Float32Array,
  ): Promise<{ ids: BigInt64Array; logprobs: Float32Array }> {
    const B = pending.length;
    if (cache.filled + K > cache.capacity)
      throw new TurnwiseError('internal', `KV cache of ${cache.capacity} slots cannot take ${K} more tokens after ${cache.filled}`);
    const lora = this.lora;
    const half = (await this.rolloutPrecision()) === 'float16';
    const session = await this.sessions.get(`loop${lora ? '' : '|base'}${half ? '|f16' : B > 1 ? '|rows' : ''}`, () => {
      const g = buildDecodeLoopGraph(this.config, lora, half ? 'float16' : B > 1 ? 'weights-left' : 'one-row');
      if (half) g.dropUnreadInputs();
      return toModelProto(g);
    });
    const out = await session.run({
      ...(half ? this.feedsOf(session) : this.feeds),
      ...kvCacheFeeds(this.config, cache),
      input_ids: { dtype: 'int64', dims: [B, 1], data: BigInt64Array.from(pending, (id) => BigInt(Math.max(0, id))) },
      position_ids: { dtype: 'int64', dims: [B, 1], data: BigInt64Array.from(cache.nextPos, (p) => BigInt(p)) },
      sample_temperature: { dtype: 'float32', dims: [B], data: temperature },
      sample_uniform: { dtype: 'float32', dims: [K, B], data: uniform },
    });
    writeNewSlots(this.config, cache, out, K);
    return { ids: out.sampled_ids.data as BigInt64Array, logprobs: out.sampled_logprobs.data as Float32Array };
  }

  /**
   * Logits at every position of each row ([rows][T·V], float32). Rows of different lengths are
   * left-padded and run as one batch; returned logits cover each row's own tokens only.
   */
  async logits(rows: readonly (readonly number[])[], options: { adapter?: boolean } = {}): Promise<Float32Array[]> {
    this.checkIds(rows);
    const B = rows.length;
    const T = Math.max(...rows.map((r) => r.length));
    const V = this.config.vocab_size;
    const padded = rows.map((r) => [...new Array(T - r.length).fill(-1), ...r]);
    // `adapter: false`: the base model alone, on the same weight tensors (a LoRA run's KL reference).
    const all = await this.step(this.newCache(B, T), padded, options.adapter !== false);
    return rows.map((r, b) => all.slice((b * T + T - r.length) * V, (b + 1) * T * V));
  }

  /**
   * Each row's token log-probs at `temperature` (out[t] = log π(row[t] | row[..t]); out[0] = 0),
   * computed in the graph: the head runs over chunks of positions and only the target's log-prob
   * comes out, so scoring never holds the rows' [T, V] logits (at 150k words, 600 MB a row of
   * 1,024 tokens). `adapter: false`: the base model alone.
   */
  async tokenLogprobs(rows: readonly (readonly number[])[], o: { adapter?: boolean; temperature?: number } = {}): Promise<Float32Array[]> {
    this.checkIds(rows);
    const out = rows.map((r) => new Float32Array(r.length));
    const T = Math.max(0, ...rows.map((r) => r.length));
    if (T < 2) return out;
    const B = rows.length;
    const temperature = o.temperature ?? 1;
    if (!(temperature > 0) || !Number.isFinite(temperature))
      throw new TurnwiseError('invalid-input', `temperature must be a finite number > 0, got ${temperature}`);
    const ids = new BigInt64Array(B * T);
    const pos = new BigInt64Array(B * T);
    const mask = new Float32Array(B * T);
    const at: number[] = [];
    const targets: number[] = [];
    rows.forEach((r, b) => {
      const pad = T - r.length; // left padding, as the prefill takes it
      r.forEach((id, t) => {
        ids[b * T + pad + t] = BigInt(id);
        pos[b * T + pad + t] = BigInt(t);
        mask[b * T + pad + t] = 1;
        if (t > 0) {
          at.push(b * T + pad + t - 1);
          targets.push(id);
        }
      });
    });
    const n = at.length;
    const M = Math.ceil(n / SCORE_CHUNK_ROWS) * SCORE_CHUNK_ROWS; // padded with position 0, token 0
    const withAdapter = o.adapter !== false;
    const session = await this.session('prefill', withAdapter, 'logprobs');
    const res = await session.run({
      ...(withAdapter || !this.lora ? this.feeds : this.baseFeeds()),
      input_ids: { dtype: 'int64', dims: [B, T], data: ids },
      position_ids: { dtype: 'int64', dims: [B, T], data: pos },
      attention_mask: { dtype: 'float32', dims: [B, T], data: mask },
      token_index: { dtype: 'int64', dims: [T], data: BigInt64Array.from({ length: T }, (_, i) => BigInt(i)) },
      logprob_rows: { dtype: 'int64', dims: [M], data: BigInt64Array.from({ length: M }, (_, i) => BigInt(i < n ? at[i] : 0)) },
      logprob_targets: { dtype: 'int64', dims: [M], data: BigInt64Array.from({ length: M }, (_, i) => BigInt(i < n ? targets[i] : 0)) },
      temperature: { dtype: 'float32', dims: [], data: Float32Array.of(temperature) },
    });
    const lp = res.logprobs.data as Float32Array;
    let k = 0;
    rows.forEach((r, b) => {
      for (let t = 1; t < r.length; t++) out[b][t] = lp[k++];
    });
    return out;
  }

  /** A new, empty sequence with its own KV cache (see Sequence, extend, sample). */
  newSequence(tokens: readonly number[] = []): Sequence {
    return new Sequence(this, this.config).append(tokens);
  }

  /** Marks the sequences busy for one call, after checking they belong here and appear once. */
  private claim(seqs: readonly Sequence[]): () => void {
    const seen = new Set<Sequence>();
    for (const s of seqs) {
      if (s.owner !== this)
        throw new TurnwiseError('invalid-input', 'this sequence belongs to another policy', {
          hint: 'create sequences with the policy that runs them',
        });
      if (s.busy)
        throw new TurnwiseError('invalid-input', 'this sequence is in use by a running extend or sample call', {
          hint: 'await the call before using the sequence again',
        });
      if (seen.has(s))
        throw new TurnwiseError('invalid-input', 'a sequence appears twice in one call', { hint: 'give each sequence once per call' });
      seen.add(s);
    }
    for (const s of seqs) {
      s.busy = true;
      // A cache computed under older weights is recomputed from the start.
      if (s.version !== this.weightsVersion) s.cached = 0;
    }
    return () => seqs.forEach((s) => (s.busy = false));
  }

  /**
   * Runs `rows` (token ids, -1 = padding) for `seqs` on top of their caches in one batched run
   * with room for `extra` more decode slots; returns the batch cache and the logits of each
   * row's last token [B, V] (none when `logits` is false).
   */
  private async feedSequences(
    seqs: readonly Sequence[],
    rows: number[][],
    extra: number,
    logits = true,
  ): Promise<{ cache: KvCache; logits: Float32Array; from: number }> {
    const T = Math.max(...rows.map((r) => r.length));
    const padded = rows.map((r) => (r.length < T ? [...r, ...new Array(T - r.length).fill(-1)] : r));
    const from = Math.max(...seqs.map((s) => s.cached));
    const cache = gatherSequences(this.config, seqs, from + T + extra);
    const out = await this.step(cache, padded, true, logits ? rows.map((r) => r.length - 1) : 'none');
    return { cache, logits: out, from };
  }

  /**
   * Appends `ids` to each sequence and feeds them now, all sequences in one batched run (ragged:
   * rows are padded, positions continue per sequence). The last token of each sequence is left
   * for the next sample to feed. Validates every request before changing any sequence.
   */
  async extend(requests: readonly ExtendRequest[]): Promise<void> {
    for (const r of requests) checkTokenIds(this.config, r.ids ?? [], r.seq.length);
    const release = this.claim(requests.map((r) => r.seq));
    const lengths = requests.map((r) => r.seq.length);
    try {
      for (const r of requests) for (const id of r.ids ?? []) r.seq.tokens.push(id);
      const seqs = requests.map((r) => r.seq).filter((s) => s.length - 1 > s.cached);
      if (seqs.length === 0) return;
      const rows = seqs.map((s) => s.tokens.slice(s.cached, s.length - 1));
      const { cache, from } = await this.feedSequences(seqs, rows, 0, false);
      scatterSequences(this.config, cache, seqs, from, this.weightsVersion);
    } catch (e) {
      requests.forEach((r, i) => r.seq.restore(lengths[i]));
      throw e;
    } finally {
      release();
    }
  }

  /**
   * Samples a continuation of each sequence, all in one batch: the first run feeds each
   * sequence's uncached tokens (ragged), then one token per row per run. A row's draws come from
   * its own seed only, so a sequence gives the same tokens alone or batched with any others.
   * The sampled tokens are appended to each sequence; its cache follows.
   */
  async sample(requests: readonly SampleRequest[]): Promise<GeneratedRow[]> {
    const out: GeneratedRow[] = requests.map(() => ({ tokenIds: [], logprobs: [], finishReason: 'length' }));
    const maxPos = this.config.max_position_embeddings;
    const plans = requests.map((r) => {
      const temperature = r.temperature ?? 1;
      const topP = r.topP ?? 1;
      if (!(topP > 0 && topP <= 1)) throw new TurnwiseError('invalid-input', `top-p must be in (0, 1], got ${topP}`);
      if (!(temperature >= 0)) throw new TurnwiseError('invalid-input', `temperature must be ≥ 0, got ${temperature}`);
      checkTokenIds(this.config, r.ids ?? [], r.seq.length);
      const length = r.seq.length + (r.ids?.length ?? 0);
      if (length === 0)
        throw new TurnwiseError('invalid-input', 'an empty sequence cannot be continued', { hint: 'give at least one token' });
      const maxNew = r.maxNewTokens ?? 64;
      if (!(Number.isInteger(maxNew) && maxNew >= 0))
        throw new TurnwiseError('invalid-input', `maxNewTokens must be a whole number ≥ 0, got ${maxNew}`);
      const plan: SamplePlan = {
        temperature,
        topP,
        budget: Math.min(maxNew, maxPos - length),
        stop: new Set(r.stopIds ?? this.defaultStopIds()),
        rng: new SeededRandom((r.seed ?? 0) >>> 0),
        top: r.topLogprobs ?? 0,
        ...(r.onToken ? { onToken: r.onToken } : {}),
      };
      if (!(Number.isInteger(plan.top) && plan.top >= 0))
        throw new TurnwiseError('invalid-input', `topLogprobs must be a whole number ≥ 0, got ${plan.top}`);
      return plan;
    });
    const release = this.claim(requests.map((r) => r.seq));
    const lengths = requests.map((r) => r.seq.length);
    try {
      for (const r of requests) for (const id of r.ids ?? []) r.seq.tokens.push(id);
      let active = requests.map((_, i) => i).filter((i) => plans[i].budget > 0);
      // Rounds: a batch runs until every row is done or half of them are; then the rows still
      // going are gathered into a smaller batch, so finished rows stop costing compute.
      while (active.length > 0)
        active = await this.sampleRound(
          active.map((i) => ({ seq: requests[i].seq, plan: plans[i], out: out[i] })),
          active,
        );
      return out;
    } catch (e) {
      // A failed call leaves every sequence as it was (its cache may keep valid slots).
      requests.forEach((r, i) => r.seq.restore(lengths[i]));
      throw e;
    } finally {
      release();
    }
  }

  /**
   * One batch of a sample call: feeds each row's uncached tokens, then decodes one token per
   * row per run. Sampled tokens join their sequence as they are drawn. Returns the indices
   * (from `ids`) of the rows that still have tokens to sample when the round stops early.
   */
  private async sampleRound(rows: { seq: Sequence; plan: SamplePlan; out: GeneratedRow }[], ids: number[]): Promise<number[]> {
    const seqs = rows.map((r) => r.seq);
    const fed = seqs.map((s) => s.tokens.slice(s.cached));
    const remaining = (r: (typeof rows)[number]) => r.plan.budget - r.out.tokenIds.length;
    // Room for the fed tokens and every sampled token but the last (it is fed by the next call).
    const steps = Math.max(...rows.map(remaining));
    const first = await this.feedSequences(seqs, fed, steps - 1);
    try {
      return await this.drawRound(rows, ids, first);
    } finally {
      // The round's cache on the device (keepsCache) goes with the round; the host's stays in the sequences.
      disposeDeviceCache(first.cache);
    }
  }

  /** sampleRound's draws, after its tokens were fed. */
  private async drawRound(
    rows: { seq: Sequence; plan: SamplePlan; out: GeneratedRow }[],
    ids: number[],
    first: Awaited<ReturnType<Policy['feedSequences']>>,
  ): Promise<number[]> {
    const seqs = rows.map((r) => r.seq);
    const remaining = (r: (typeof rows)[number]) => r.plan.budget - r.out.tokenIds.length;
    const { cache, from } = first;
    let logits: Float32Array | undefined = first.logits; // [B, V]: each row's last token
    let drawn: { ids: BigInt64Array; logprobs: Float32Array; K: number } | undefined;
    const V = this.config.vocab_size;
    const B = rows.length;
    const done = rows.map(() => false);
    // Rows that need no more than a token and its log-prob (no nucleus, no top log-probs) have
    // their later tokens drawn in the graph: only two numbers per row come back from a step,
    // and on CUDA several steps run in one run (decodeStepsPerRun).
    const inGraph = rows.every((r) => r.plan.topP === 1 && r.plan.top === 0);
    const perRun = inGraph ? this.resolvedDecodeStepsPerRun() : 1;
    const temperature = Float32Array.from(rows, (r) => r.plan.temperature);
    // Takes row b's next token; true when the row is done.
    const accept = (r: (typeof rows)[number], b: number, id: number, logprob: number, row?: Float32Array): boolean => {
      r.out.tokenIds.push(id);
      r.out.logprobs.push(logprob);
      r.seq.tokens.push(id);
      const top = r.plan.top > 0 && row ? topLogprobs(row, r.plan.top, r.plan.temperature) : undefined;
      if (top) (r.out.topLogprobs ??= []).push(top);
      if (r.plan.onToken?.({ id, logprob, ...(top ? { top } : {}) }) === 'stop' || r.plan.stop.has(id)) {
        r.out.finishReason = 'stop';
        done[b] = true;
      } else if (remaining(r) <= 0) done[b] = true;
      return done[b];
    };
    for (;;) {
      let next: number[][];
      if (drawn && drawn.K > 1) {
        // K tokens per row, in order, up to the row's stop: it keeps the slots of the tokens it fed.
        const kept = rows.map(() => 0);
        next = rows.map((r, b) => {
          if (done[b]) return [-1];
          let id = -1;
          for (let k = 0; k < drawn!.K; k++) {
            id = Number(drawn!.ids[k * B + b]);
            kept[b]++;
            if (accept(r, b, id, drawn!.logprobs[k * B + b])) break;
          }
          return done[b] ? [-1] : [id];
        });
        keepSlots(cache, cache.filled, drawn.K, kept);
      } else {
        next = rows.map((r, b) => {
          if (done[b]) return [-1];
          const row = logits?.subarray(b * V, (b + 1) * V);
          const { id, logprob } = row
            ? sampleToken(row, r.plan.temperature, r.plan.topP, r.plan.rng)
            : { id: Number(drawn!.ids[b]), logprob: drawn!.logprobs[b] };
          return accept(r, b, id, logprob, row) ? [-1] : [id];
        });
      }
      const going = rows.map((r, b) => (done[b] ? -1 : b)).filter((b) => b >= 0);
      const worthRegathering = going.length <= rows.length / 2 && Math.max(...going.map((b) => remaining(rows[b]))) > REGATHER_MIN_STEPS;
      if (going.length === 0 || worthRegathering) {
        scatterSequences(this.config, cache, seqs, from, this.weightsVersion);
        return going.map((b) => ids[b]);
      }
      if (!inGraph) {
        logits = await this.step(cache, next);
        continue;
      }
      // One draw per sampled token, as sampleToken takes it (greedy rows take none), in step order.
      const K = Math.min(perRun, Math.max(...going.map((b) => remaining(rows[b]))));
      const uniform = new Float32Array(K * B);
      for (let k = 0; k < K; k++) rows.forEach((r, b) => (uniform[k * B + b] = !done[b] && r.plan.temperature > 0 ? r.plan.rng.next() : 0));
      logits = undefined;
      drawn =
        K > 1
          ? {
              ...(await this.drawSteps(
                cache,
                next.map((n) => n[0]),
                K,
                temperature,
                uniform,
              )),
              K,
            }
          : { ...(await this.draw(cache, next, temperature, uniform)), K };
    }
  }

  /** Decode steps per run when tokens are drawn in the graph: decodeStepsPerRun, or by the provider runs ran on. */
  resolvedDecodeStepsPerRun(): number {
    const n =
      this.decodeStepsPerRun === 'auto'
        ? this.ranOn === undefined || this.ranOn === 'cpu' || KEEPING_PROVIDERS.has(this.ranOn as ExecutionProviderName)
          ? 1
          : GPU_DECODE_STEPS_PER_RUN
        : this.decodeStepsPerRun;
    if (!(Number.isInteger(n) && n >= 1))
      throw new TurnwiseError('invalid-input', `decodeStepsPerRun must be a whole number ≥ 1 or 'auto', got ${n}`);
    return n;
  }

  /** Samples continuations of token-id prompts, batched, with a KV cache (one sequence per prompt). */
  async generateIds(prompts: readonly (readonly number[])[], options: GenerateOptions = {}): Promise<GeneratedRow[]> {
    this.checkIds(prompts);
    if (prompts.some((p) => p.length === 0))
      throw new TurnwiseError('invalid-input', 'an empty prompt cannot be continued', { hint: 'give at least one token' });
    const maxNew = options.maxNewTokens ?? 64;
    const temperature = options.temperature ?? 1;
    const topP = options.topP ?? 1;
    if (!(topP > 0 && topP <= 1)) throw new TurnwiseError('invalid-input', `top-p must be in (0, 1], got ${topP}`);
    if (!(temperature >= 0)) throw new TurnwiseError('invalid-input', `temperature must be ≥ 0, got ${temperature}`);
    const stopIds = options.stopIds ?? this.defaultStopIds();
    // One generator per row, so a row's sample depends on the seed, its index and its own
    // logits only: not on how many draws the other rows of the batch took before it stopped.
    const seed = (options.seed ?? 0) >>> 0;
    const rowSeed = (b: number) => (seed + Math.imul(b, 0x632be5ab)) >>> 0;
    const maxLen = Math.max(...prompts.map((p) => p.length));
    // One budget for the whole batch: what the longest prompt leaves of the context.
    const budget = Math.min(maxNew, this.config.max_position_embeddings - maxLen);
    if (options.kvCache ?? true) {
      return this.sample(
        prompts.map((p, b) => ({ seq: this.newSequence(p), seed: rowSeed(b), maxNewTokens: budget, temperature, topP, stopIds })),
      );
    }
    // Without a cache: the whole left-padded batch is recomputed for every token.
    const stop = new Set(stopIds);
    const B = prompts.length;
    const rngs = prompts.map((_, b) => new SeededRandom(rowSeed(b)));
    const V = this.config.vocab_size;
    const rows: GeneratedRow[] = prompts.map(() => ({ tokenIds: [], logprobs: [], finishReason: 'length' }));
    const done = new Array(B).fill(false);
    const seqs = prompts.map((p) => [...new Array(maxLen - p.length).fill(-1), ...p]);
    for (let n = 0; n < budget; n++) {
      const T = seqs[0].length;
      const logits = await this.step(this.newCache(B, T), seqs);
      for (let b = 0; b < B; b++) {
        if (done[b]) {
          seqs[b].push(this.config.pad_token_id ?? 0);
          continue;
        }
        const { id, logprob } = sampleToken(logits.subarray((b * T + T - 1) * V, (b * T + T) * V), temperature, topP, rngs[b]);
        rows[b].tokenIds.push(id);
        rows[b].logprobs.push(logprob);
        if (stop.has(id)) {
          done[b] = true;
          rows[b].finishReason = 'stop';
        }
        seqs[b].push(id);
      }
      if (done.every(Boolean)) break;
    }
    return rows;
  }

  /** Text in, text out, through the tokenizer. */
  async generate(prompts: readonly string[], options: GenerateOptions = {}): Promise<(GeneratedRow & { text: string })[]> {
    const tok =
      this.tokenizer ??
      (() => {
        throw new TurnwiseError('internal', 'this policy has no tokenizer');
      })();
    const rows = await this.generateIds(
      prompts.map((p) => tok.encode(p)),
      options,
    );
    return rows.map((r) => ({ ...r, text: tok.decode(r.tokenIds, true) }));
  }

  private defaultStopIds(): number[] {
    const ids = new Set<number>(this.config.eos_token_ids ?? []);
    if (this.config.eos_token_id !== undefined) ids.add(this.config.eos_token_id);
    const imEnd = this.tokenizer?.tokenId('<|im_end|>');
    if (imEnd !== undefined) ids.add(imEnd);
    return [...ids];
  }

  async dispose(): Promise<void> {
    await this.sessions.clear();
    this.removeHeldFiles();
    // Released once: a second dispose finds nothing held.
    if (!this.disposed) releaseFromDevice(Object.values(this.feeds));
    this.dropHalf();
    this.disposed = true;
  }
  private disposed = false;
}
