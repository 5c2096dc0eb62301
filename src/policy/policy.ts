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

interface KvState {
  past: Record<string, HostTensor>;
  /** [B][S] whether key j of row b is a real token. */
  valid: boolean[][];
  /** Next position id per row. */
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
    this.sessions = new SessionCache(settings, 2);
  }

  /** Replaces the weights (after a training step); sessions are kept. */
  setWeights(weights: PolicyWeights): void {
    this.feeds = weightFeeds(weights);
  }

  /** Replaces the weights with tensors already in graph layout (from the trainer, no copy). */
  setGraphWeights(graphTensors: Map<string, Float32Array>): void {
    for (const [name, t] of Object.entries(this.feeds)) this.feeds[name] = { ...t, data: graphTensors.get(name)! };
  }

  private session(): Promise<OnnxSession> {
    return this.sessions.get('step', () => toModelProto(buildStepGraph(this.config)));
  }

  get provider(): Promise<string> {
    return this.session().then((s) => s.provider);
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

  private emptyPast(b: number): Record<string, HostTensor> {
    const past: Record<string, HostTensor> = {};
    const dims = [b, this.config.num_key_value_heads, 0, headDim(this.config)];
    for (let l = 0; l < this.config.num_hidden_layers; l++) {
      past[`past.${l}.key`] = { dtype: 'float32', dims, data: new Float32Array(0) };
      past[`past.${l}.value`] = { dtype: 'float32', dims, data: new Float32Array(0) };
    }
    return past;
  }

  /** Runs T new tokens per row on top of `state` (a prefill when the cache is empty); returns logits [B,T,V]. */
  private async step(state: KvState, ids: number[][]): Promise<Float32Array> {
    const B = ids.length;
    const T = ids[0].length;
    const P = state.valid[0].length;
    const S = P + T;
    const idArr = new BigInt64Array(B * T);
    const posArr = new BigInt64Array(B * T);
    const bias = new Float32Array(B * T * S);
    for (let b = 0; b < B; b++) {
      for (let i = 0; i < T; i++) idArr[b * T + i] = BigInt(ids[b][i]);
    }
    // Left padding: ids equal to -1 mark padding in a prefill.
    for (let b = 0; b < B; b++) {
      for (let i = 0; i < T; i++) {
        const real = ids[b][i] >= 0;
        if (!real) idArr[b * T + i] = 0n;
        state.valid[b].push(real);
        posArr[b * T + i] = BigInt(state.nextPos[b]);
        if (real) state.nextPos[b]++;
      }
      for (let i = 0; i < T; i++) {
        for (let j = 0; j < S; j++) bias[(b * T + i) * S + j] = j <= P + i && state.valid[b][j] ? 0 : MASKED;
      }
    }
    const session = await this.session();
    const out = await session.run({
      ...this.feeds,
      ...state.past,
      input_ids: { dtype: 'int64', dims: [B, T], data: idArr },
      position_ids: { dtype: 'int64', dims: [B, T], data: posArr },
      attn_bias: { dtype: 'float32', dims: [B, 1, T, S], data: bias },
    });
    for (let l = 0; l < this.config.num_hidden_layers; l++) {
      state.past[`past.${l}.key`] = out[`present.${l}.key`];
      state.past[`past.${l}.value`] = out[`present.${l}.value`];
    }
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
    const state: KvState = { past: this.emptyPast(B), valid: rows.map(() => []), nextPos: rows.map(() => 0) };
    const padded = rows.map((r) => [...new Array(T - r.length).fill(-1), ...r]);
    const all = await this.step(state, padded);
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
    let state: KvState = { past: this.emptyPast(B), valid: prompts.map(() => []), nextPos: prompts.map(() => 0) };
    const seqs = prompts.map((p) => [...new Array(maxLen - p.length).fill(-1), ...p]);
    let logits = await this.step(state, seqs);
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
        logits = await this.step(state, next.map((t) => [t]));
        T = 1;
      } else {
        state = { past: this.emptyPast(B), valid: prompts.map(() => []), nextPos: prompts.map(() => 0) };
        logits = await this.step(state, seqs);
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
