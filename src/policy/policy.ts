// The policy at inference time: full-sequence logits, prefill + KV-cache decode batched across
// episodes (left padding, per-row position ids and masks), and seeded sampling with temperature
// and top-p that returns token ids and their log-probs.
import { SessionCache, toModelProto, type HostTensor, type OnnxSession, type SessionSettings } from '../onnx';
import { TurnwiseError } from '../core/errors';
import { headDim, type Qwen2Config } from './config';
import { buildStepGraph, MASKED, weightFeeds } from './graphs';
import type { PolicyTokenizer } from './tokenizer';
import { SeededRandom, type PolicyWeights } from './weights';

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
}

/**
 * The KV cache of a batch being generated, held on the host in the layout the decode graph reads
 * in place: per layer, keys transposed [B, nkv, d, C] and values [B, nkv, C, d], C the capacity.
 * Each step's new keys and values are written into the next slots; nothing O(C) is copied per step.
 */
interface KvCache {
  capacity: number;
  /** Slots written so far (the same for every row: padding slots are masked, not skipped). */
  filled: number;
  keys: Float32Array[];
  values: Float32Array[];
  /** [B, capacity]: 0 where a slot is filled with a real token, MASKED where unfilled or padding. */
  bias: Float32Array;
  /** Next position id per row (left padding takes none). */
  nextPos: number[];
}

/** Log-softmax of one row in float64, with an optional temperature. */
export function logSoftmax(row: ArrayLike<number>, temperature = 1): Float64Array {
  const n = row.length;
  const out = new Float64Array(n);
  let max = -Infinity;
  for (let i = 0; i < n; i++) max = Math.max(max, row[i] / temperature);
  let z = 0;
  for (let i = 0; i < n; i++) z += Math.exp(row[i] / temperature - max);
  const lz = max + Math.log(z);
  for (let i = 0; i < n; i++) out[i] = row[i] / temperature - lz;
  return out;
}

/** Samples one token id from a logits row; returns the id and its log-prob (see GeneratedRow.logprobs). */
export function sampleToken(row: ArrayLike<number>, temperature: number, topP: number, rng: SeededRandom): { id: number; logprob: number } {
  const lp = logSoftmax(row, temperature > 0 ? temperature : 1);
  if (temperature <= 0) {
    let best = 0;
    for (let i = 1; i < lp.length; i++) if (lp[i] > lp[best]) best = i;
    return { id: best, logprob: lp[best] };
  }
  const order = Array.from(lp.keys()).sort((a, b) => lp[b] - lp[a]);
  let keep = order.length;
  if (topP < 1) {
    let cum = 0;
    for (let k = 0; k < order.length; k++) {
      cum += Math.exp(lp[order[k]]);
      if (cum >= topP) {
        keep = k + 1;
        break;
      }
    }
  }
  let mass = 0;
  for (let k = 0; k < keep; k++) mass += Math.exp(lp[order[k]]);
  let u = rng.next() * mass;
  for (let k = 0; k < keep; k++) {
    u -= Math.exp(lp[order[k]]);
    if (u <= 0) return { id: order[k], logprob: lp[order[k]] };
  }
  const last = order[keep - 1];
  return { id: last, logprob: lp[last] };
}

export class Policy {
  readonly config: Qwen2Config;
  private feeds: Record<string, HostTensor>;
  private readonly sessions: SessionCache;

  constructor(
    weights: PolicyWeights,
    readonly tokenizer?: PolicyTokenizer,
    settings: SessionSettings = {},
  ) {
    this.config = weights.config;
    this.feeds = weightFeeds(weights);
    this.sessions = new SessionCache(settings, 2); // prefill and decode
  }

  /** Replaces the weights (after a training step); sessions are kept. */
  setWeights(weights: PolicyWeights): void {
    this.feeds = weightFeeds(weights);
  }

  /** Replaces the weights with tensors already in graph layout (from the trainer, no copy). */
  setGraphWeights(graphTensors: Map<string, Float32Array>): void {
    for (const [name, t] of Object.entries(this.feeds)) this.feeds[name] = { ...t, data: graphTensors.get(name)! };
  }

  private session(kind: 'prefill' | 'decode'): Promise<OnnxSession> {
    return this.sessions.get(kind, () => toModelProto(buildStepGraph(this.config, kind)));
  }

  get provider(): Promise<string> {
    return this.session('prefill').then((s) => s.provider);
  }

  private checkIds(rows: readonly (readonly number[])[]): void {
    for (const r of rows) {
      for (const id of r) {
        if (!Number.isInteger(id) || id < 0 || id >= this.config.vocab_size) {
          throw new TurnwiseError('invalid-input', `token id ${id} is outside the vocabulary (0..${this.config.vocab_size - 1})`, { hint: 'pass ids the model\'s tokenizer produced' });
        }
      }
      if (r.length > this.config.max_position_embeddings) {
        throw new TurnwiseError('invalid-input', `sequence of ${r.length} tokens exceeds max_position_embeddings ${this.config.max_position_embeddings}`, { hint: 'shorten the prompt' });
      }
    }
  }

  private newCache(B: number, capacity: number): KvCache {
    const { num_hidden_layers: L, num_key_value_heads: nkv } = this.config;
    const n = B * nkv * headDim(this.config) * capacity;
    return {
      capacity,
      filled: 0,
      keys: Array.from({ length: L }, () => new Float32Array(n)),
      values: Array.from({ length: L }, () => new Float32Array(n)),
      bias: new Float32Array(B * capacity).fill(MASKED),
      nextPos: new Array(B).fill(0),
    };
  }

  /**
   * Runs T new tokens per row on top of `cache` (a prefill when it is empty; ids of -1 are left
   * padding) and writes their keys and values into it. Returns logits [B, T, V].
   */
  private async step(cache: KvCache, ids: number[][]): Promise<Float32Array> {
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
    const feeds: Record<string, HostTensor> = {
      ...this.feeds,
      input_ids: { dtype: 'int64', dims: [B, T], data: idArr },
      position_ids: { dtype: 'int64', dims: [B, T], data: posArr },
    };
    const nkv = this.config.num_key_value_heads;
    const d = headDim(this.config);
    const L = this.config.num_hidden_layers;
    let session: OnnxSession;
    if (P === 0) {
      session = await this.session('prefill');
      feeds.attention_mask = { dtype: 'float32', dims: [B, T], data: mask };
      feeds.token_index = { dtype: 'int64', dims: [T], data: BigInt64Array.from({ length: T }, (_, i) => BigInt(i)) };
    } else {
      session = await this.session('decode');
      const bias = new Float32Array(B * T * T);
      for (let b = 0; b < B; b++) for (let i = 0; i < T; i++) for (let j = 0; j < T; j++) bias[(b * T + i) * T + j] = j <= i && mask[b * T + j] ? 0 : MASKED;
      feeds.attn_bias = { dtype: 'float32', dims: [B, 1, T, T], data: bias };
      // Every slot is fed (capacity C): unfilled and padding slots are masked out.
      feeds.cache_bias = { dtype: 'float32', dims: [B, 1, 1, C], data: cache.bias };
      for (let l = 0; l < L; l++) {
        feeds[`cache.${l}.key`] = { dtype: 'float32', dims: [B, nkv, d, C], data: cache.keys[l] };
        feeds[`cache.${l}.value`] = { dtype: 'float32', dims: [B, nkv, C, d], data: cache.values[l] };
      }
    }
    const out = await session.run(feeds);
    for (let l = 0; l < L; l++) {
      const k = out[`new.${l}.key`].data as Float32Array; // [B,nkv,d,T]
      const v = out[`new.${l}.value`].data as Float32Array; // [B,nkv,T,d]
      const K = cache.keys[l];
      const V = cache.values[l];
      for (let r = 0; r < B * nkv * d; r++) K.set(k.subarray(r * T, (r + 1) * T), r * C + P);
      for (let bh = 0; bh < B * nkv; bh++) V.set(v.subarray(bh * T * d, (bh + 1) * T * d), (bh * C + P) * d);
    }
    for (let b = 0; b < B; b++) for (let i = 0; i < T; i++) if (mask[b * T + i]) cache.bias[b * C + P + i] = 0;
    cache.filled = P + T;
    return out.logits.data as Float32Array;
  }

  /**
   * Logits at every position of each row ([rows][T·V], float32). Rows of different lengths are
   * left-padded and run as one batch; returned logits cover each row's own tokens only.
   */
  async logits(rows: readonly (readonly number[])[]): Promise<Float32Array[]> {
    this.checkIds(rows);
    const B = rows.length;
    const T = Math.max(...rows.map((r) => r.length));
    const V = this.config.vocab_size;
    const padded = rows.map((r) => [...new Array(T - r.length).fill(-1), ...r]);
    const all = await this.step(this.newCache(B, T), padded);
    return rows.map((r, b) => all.slice((b * T + T - r.length) * V, (b + 1) * T * V));
  }

  /** Samples continuations of token-id prompts, batched, with a KV cache. */
  async generateIds(prompts: readonly (readonly number[])[], options: GenerateOptions = {}): Promise<GeneratedRow[]> {
    this.checkIds(prompts);
    if (prompts.some((p) => p.length === 0)) throw new TurnwiseError('invalid-input', 'an empty prompt cannot be continued', { hint: 'give at least one token' });
    const maxNew = options.maxNewTokens ?? 64;
    const temperature = options.temperature ?? 1;
    const topP = options.topP ?? 1;
    if (!(topP > 0 && topP <= 1)) throw new TurnwiseError('invalid-input', `top-p must be in (0, 1], got ${topP}`);
    if (!(temperature >= 0)) throw new TurnwiseError('invalid-input', `temperature must be ≥ 0, got ${temperature}`);
    const stop = new Set(options.stopIds ?? this.defaultStopIds());
    const B = prompts.length;
    // One generator per row, so a row's sample depends on the seed, its index and its own
    // logits only: not on how many draws the other rows of the batch took before it stopped.
    const seed = (options.seed ?? 0) >>> 0;
    const rngs = prompts.map((_, b) => new SeededRandom((seed + Math.imul(b, 0x632be5ab)) >>> 0));
    const V = this.config.vocab_size;
    const maxLen = Math.max(...prompts.map((p) => p.length));
    const budget = Math.min(maxNew, this.config.max_position_embeddings - maxLen);
    const rows: GeneratedRow[] = prompts.map(() => ({ tokenIds: [], logprobs: [], finishReason: 'length' }));
    const done = new Array(B).fill(false);
    const kv = options.kvCache ?? true;
    const seqs = prompts.map((p) => [...new Array(maxLen - p.length).fill(-1), ...p]);
    // Room for the prompt and every sampled token but the last (it is never fed back).
    const cache = this.newCache(B, kv ? maxLen + Math.max(0, budget - 1) : maxLen);
    let logits = await this.step(cache, seqs);
    let T = maxLen;
    for (let n = 0; n < budget; n++) {
      const next: number[] = [];
      for (let b = 0; b < B; b++) {
        if (done[b]) {
          next.push(this.config.pad_token_id ?? 0);
          continue;
        }
        const row = logits.subarray((b * T + T - 1) * V, (b * T + T) * V);
        const { id, logprob } = sampleToken(row, temperature, topP, rngs[b]);
        rows[b].tokenIds.push(id);
        rows[b].logprobs.push(logprob);
        if (stop.has(id)) {
          done[b] = true;
          rows[b].finishReason = 'stop';
        }
        next.push(id);
      }
      if (done.every(Boolean) || n === budget - 1) break;
      for (let b = 0; b < B; b++) seqs[b].push(next[b]);
      if (kv) {
        logits = await this.step(cache, next.map((t) => [t]));
        T = 1;
      } else {
        logits = await this.step(this.newCache(B, seqs[0].length), seqs);
        T = seqs[0].length;
      }
    }
    return rows;
  }

  /** Text in, text out, through the tokenizer. */
  async generate(prompts: readonly string[], options: GenerateOptions = {}): Promise<(GeneratedRow & { text: string })[]> {
    const tok = this.tokenizer ?? (() => { throw new TurnwiseError('internal', 'this policy has no tokenizer'); })();
    const rows = await this.generateIds(prompts.map((p) => tok.encode(p)), options);
    return rows.map((r) => ({ ...r, text: tok.decode(r.tokenIds, true) }));
  }

  private defaultStopIds(): number[] {
    const ids: number[] = [];
    if (this.config.eos_token_id !== undefined) ids.push(this.config.eos_token_id);
    const imEnd = this.tokenizer?.tokenId('<|im_end|>');
    if (imEnd !== undefined) ids.push(imEnd);
    return ids;
  }

  async dispose(): Promise<void> {
    await this.sessions.clear();
  }
}
