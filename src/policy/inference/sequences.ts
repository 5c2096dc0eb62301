// Per-sequence KV caches: an episode's conversation grows turn by turn (observation tokens after
// each action) and is never re-prefilled. Each sequence keeps its keys and values on the host; a
// batched call gathers the sequences it serves into one batch cache (kv-cache.ts), runs the step
// graphs and scatters the new slots back (copies per call, not per token). See Policy.extend and
// Policy.sample.
import { TurnwiseError } from '../../core/errors';
import { headDim, type ModelConfig } from '../model/config';
import { newKvCache, type KvCache } from './kv-cache';

/**
 * One growing token sequence (an episode's conversation) with its own KV cache. `tokens` is
 * always the whole sequence: prompt, appended observations and sampled actions. The cache holds
 * the keys and values of the first `cached` tokens, computed under the weights of version
 * `version`; the tokens after them are fed by the next Policy.extend or Policy.sample. The last
 * token is always left for the next sample to feed, since its logits are what sampling needs.
 *
 * Create with Policy.newSequence(); methods here only edit the host state and never run the model.
 */
export class Sequence {
  /** Every token of the sequence. Read-only for callers: edit with append, truncate or reset. */
  readonly tokens: number[] = [];
  /** @internal Leading tokens whose keys and values are in the cache. */
  cached = 0;
  /** @internal Policy weights version the cache was computed with (a stale cache is recomputed). */
  version = -1;
  /** @internal Slots allocated per layer (grows with room to spare up to max_position_embeddings: reserve). */
  capacity = 0;
  /** @internal Per layer, keys [nkv, capacity, d]. */
  keys: Float32Array[] = [];
  /** @internal Per layer, values transposed [nkv, d, capacity]. */
  values: Float32Array[] = [];
  /** @internal Set while a batched call uses the sequence. */
  busy = false;

  /** @internal Use Policy.newSequence(). */
  constructor(
    /** @internal */ readonly owner: object,
    /** @internal */ readonly config: ModelConfig,
  ) {}

  get length(): number {
    return this.tokens.length;
  }

  /** Tokens still to be fed to the model (their keys and values are not cached yet). */
  get pending(): number {
    return this.tokens.length - this.cached;
  }

  /** Appends tokens without running the model: the next extend or sample feeds them. */
  append(ids: readonly number[]): this {
    this.checkFree();
    checkTokenIds(this.config, ids, this.tokens.length);
    for (const id of ids) this.tokens.push(id);
    return this;
  }

  /** Keeps the first `n` tokens (and the cache of those that stay). */
  truncate(n: number): this {
    this.checkFree();
    if (!Number.isInteger(n) || n < 0)
      throw new TurnwiseError('invalid-input', `cannot truncate a sequence to ${n} tokens`, { hint: 'give a whole number ≥ 0' });
    this.restore(n);
    return this;
  }

  /** @internal truncate() for the call that holds the sequence (a failed call undoing itself). */
  restore(n: number): void {
    if (n < this.tokens.length) this.tokens.length = n;
    // The last token stays uncached so that the next sample has logits to draw from.
    this.cached = Math.min(this.cached, Math.max(0, this.tokens.length - 1));
  }

  /**
   * Replaces the tokens by `ids` (a re-rendered context), keeping the cache of the longest
   * common prefix: dropping the oldest turns of a full context recomputes from the first change.
   */
  reset(ids: readonly number[]): this {
    this.checkFree();
    checkTokenIds(this.config, ids, 0);
    let common = 0;
    while (common < ids.length && common < this.tokens.length && ids[common] === this.tokens[common]) common++;
    this.tokens.length = common;
    for (let i = common; i < ids.length; i++) this.tokens.push(ids[i]);
    this.cached = Math.min(this.cached, common, Math.max(0, this.tokens.length - 1));
    return this;
  }

  /** Frees the cache memory (the tokens stay; the next call recomputes the cache). */
  dropCache(): void {
    this.checkFree();
    this.cached = 0;
    this.capacity = 0;
    this.keys = [];
    this.values = [];
  }

  /**
   * A new sequence with the same tokens and a copy of this one's cache: episodes of a group that
   * start from one prompt pay for its prefill once.
   */
  fork(): Sequence {
    this.checkFree();
    const s = new Sequence(this.owner, this.config);
    for (const t of this.tokens) s.tokens.push(t);
    s.cached = this.cached;
    s.version = this.version;
    s.capacity = this.capacity;
    s.keys = this.keys.map((k) => k.slice());
    s.values = this.values.map((v) => v.slice());
    return s;
  }

  private checkFree(): void {
    if (this.busy)
      throw new TurnwiseError('invalid-input', 'this sequence is in use by a running extend or sample call', {
        hint: 'await the call before changing the sequence',
      });
  }

  /**
   * @internal Grows the cache to hold at least `slots` slots, keeping the cached ones: to a quarter
   * more (64 slots at least) or double, whichever is more. A cache that held its prompt exactly grew
   * again at the first sampled tokens, a fresh allocation and copy per layer per sequence: at 8 rows
   * of the 0.5B shape after 1,024 tokens, int4, the host time per decode step went 27 → 16 ms with
   * the room (profile-decode.ts).
   */
  reserve(slots: number): void {
    if (slots <= this.capacity) return;
    const c = this.config;
    const nkv = c.num_key_value_heads;
    const d = headDim(c);
    const cap = Math.min(c.max_position_embeddings, Math.max(slots + Math.max(64, slots >> 2), 2 * this.capacity));
    const keys: Float32Array[] = [];
    const values: Float32Array[] = [];
    for (let l = 0; l < c.num_hidden_layers; l++) {
      const k = new Float32Array(nkv * cap * d);
      const v = new Float32Array(nkv * d * cap);
      if (this.cached > 0) {
        for (let h = 0; h < nkv; h++)
          k.set(this.keys[l].subarray(h * this.capacity * d, (h * this.capacity + this.cached) * d), h * cap * d);
        for (let r = 0; r < nkv * d; r++) v.set(this.values[l].subarray(r * this.capacity, r * this.capacity + this.cached), r * cap);
      }
      keys.push(k);
      values.push(v);
    }
    this.keys = keys;
    this.values = values;
    this.capacity = cap;
  }
}

/** Refuses ids outside the vocabulary, or more tokens than the context holds after `already`. */
export function checkTokenIds(c: ModelConfig, ids: readonly number[], already = 0): void {
  for (const id of ids) {
    if (!Number.isInteger(id) || id < 0 || id >= c.vocab_size) {
      throw new TurnwiseError('invalid-input', `token id ${id} is outside the vocabulary (0..${c.vocab_size - 1})`, {
        hint: "pass ids the model's tokenizer produced",
      });
    }
  }
  if (already + ids.length > c.max_position_embeddings) {
    throw new TurnwiseError(
      'invalid-input',
      `sequence of ${already + ids.length} tokens exceeds max_position_embeddings ${c.max_position_embeddings}`,
      {
        hint: already > 0 ? 'the context is full: re-render a shorter context and Sequence.reset() to it' : 'shorten the prompt',
      },
    );
  }
}

/**
 * A batch cache of capacity `capacity` holding each sequence's cached slots at the start of its
 * row (row b: slots 0..cached−1, the rest masked until written). Positions continue per row.
 */
export function gatherSequences(c: ModelConfig, seqs: readonly Sequence[], capacity: number): KvCache {
  const B = seqs.length;
  const cache = newKvCache(c, B, capacity);
  const nkv = c.num_key_value_heads;
  const d = headDim(c);
  const C = capacity;
  seqs.forEach((s, b) => {
    const n = s.cached;
    cache.nextPos[b] = n;
    if (n === 0) return;
    for (let l = 0; l < c.num_hidden_layers; l++) {
      const K = cache.keys[l];
      const V = cache.values[l];
      for (let h = 0; h < nkv; h++) K.set(s.keys[l].subarray(h * s.capacity * d, (h * s.capacity + n) * d), (b * nkv + h) * C * d);
      for (let r = 0; r < nkv * d; r++) V.set(s.values[l].subarray(r * s.capacity, r * s.capacity + n), (b * nkv * d + r) * C);
    }
    cache.bias.fill(0, b * C, b * C + n);
  });
  cache.filled = Math.max(0, ...seqs.map((s) => s.cached));
  return cache;
}

/**
 * Copies the real slots a call wrote into the batch cache (from slot `from` on, in order) to the
 * end of each sequence's cache, and marks them cached under weights `version`.
 */
export function scatterSequences(c: ModelConfig, cache: KvCache, seqs: readonly Sequence[], from: number, version: number): void {
  const nkv = c.num_key_value_heads;
  const d = headDim(c);
  const C = cache.capacity;
  seqs.forEach((s, b) => {
    // Runs of consecutive real slots: the fed tokens, then one slot per decode step.
    const runs: [number, number][] = [];
    for (let i = from; i < cache.filled; i++) {
      if (cache.bias[b * C + i] !== 0) continue;
      const last = runs[runs.length - 1];
      if (last && last[1] === i) last[1] = i + 1;
      else runs.push([i, i + 1]);
    }
    const added = runs.reduce((n, [a, e]) => n + e - a, 0);
    s.reserve(s.cached + added);
    let at = s.cached;
    for (const [a, e] of runs) {
      const n = e - a;
      for (let l = 0; l < c.num_hidden_layers; l++) {
        const K = cache.keys[l];
        const V = cache.values[l];
        for (let h = 0; h < nkv; h++)
          s.keys[l].set(K.subarray(((b * nkv + h) * C + a) * d, ((b * nkv + h) * C + e) * d), (h * s.capacity + at) * d);
        for (let r = 0; r < nkv * d; r++)
          s.values[l].set(V.subarray((b * nkv * d + r) * C + a, (b * nkv * d + r) * C + e), r * s.capacity + at);
      }
      at += n;
    }
    s.cached = at;
    s.version = version;
  });
}
