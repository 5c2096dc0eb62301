// The KV cache of a batch, as the step graphs read and write it: its layout on the host, the
// feeds a decode step takes from it, and the keys and values a run returns written into it.
import type { HostTensor, ort } from '../../onnx';
import { headDim, type ModelConfig } from '../model/config';
import { MASKED } from '../model/graphs';

/**
 * The KV cache of a batch, held on the host in the layout the decode graph reads in place: per
 * layer, keys [B, nkv, C, d] and values transposed [B, nkv, d, C], C the capacity. Each step's
 * new keys and values are written into the next slots; nothing O(C) is copied per step.
 */
export interface KvCache {
  capacity: number;
  /** Slots written so far (the same for every row: padding slots are masked, not skipped). */
  filled: number;
  keys: Float32Array[];
  values: Float32Array[];
  /** [B, capacity]: 0 where a slot is filled with a real token, MASKED where unfilled or padding. */
  bias: Float32Array;
  /** Next position id per row (padding takes none). */
  nextPos: number[];
  /**
   * On a provider that keeps tensors on the device: the cache's keys and values there, by feed
   * name, as they were after `filled` slots (a step that finds `filled` moved on feeds the host's
   * instead). Dispose with disposeDeviceCache.
   */
  device?: { tensors: Record<string, ort.Tensor>; filled: number };
}

/** Frees the cache's device copy, if it has one. */
export function disposeDeviceCache(cache: KvCache): void {
  if (!cache.device) return;
  for (const t of Object.values(cache.device.tensors)) t.dispose();
  cache.device = undefined;
}

/**
 * An empty cache of `capacity` slots for B rows, every slot masked. Its keys and values are zero,
 * or, taken from `pool`, whatever an earlier call left there (`reused`): the caller overwrites or
 * zeroes every slot (gatherSequences zeroes each row's slots past what it copies), since a masked
 * slot's key still enters the softmax, where a NaN from a broken earlier run would spread.
 */
export function newKvCache(c: ModelConfig, B: number, capacity: number, pool?: KvBufferPool): KvCache & { reused: boolean } {
  const n = B * c.num_key_value_heads * headDim(c) * capacity;
  let reused = false;
  const take = () => {
    if (!pool) return new Float32Array(n);
    const t = pool.take(n);
    reused ||= !t.fresh;
    return t.array;
  };
  return {
    capacity,
    filled: 0,
    keys: Array.from({ length: c.num_hidden_layers }, take),
    values: Array.from({ length: c.num_hidden_layers }, take),
    bias: new Float32Array(B * capacity).fill(MASKED),
    nextPos: new Array(B).fill(0),
    reused,
  };
}

/** Room a pooled buffer is allocated with beyond what it was asked for: contexts grow turn by turn. */
const POOL_GROWTH = 1.25;

/**
 * The buffers of batch caches, kept from one call to the next. A batch cache of 8 rows at the
 * Qwen2.5-0.5B shape and 1,024 tokens is 200 MB; allocated afresh for every call, each of its pages
 * costs a fault and the kernel's zeroing on first touch, which was most of the host time of a
 * sampling call outside its runs. A buffer is allocated with room to grow, taken back when the
 * call ends, and handed to a later call it fits. At most `maxFree` buffers wait (one cache's: two
 * per layer); memory the plan counts anyway (memory.ts: the batched cache of every episode).
 */
export class KvBufferPool {
  private free: ArrayBuffer[] = [];
  constructor(private readonly maxFree: number) {}

  /** A Float32Array of exactly `floats` elements: a free buffer it fits (the smallest), or a new one. */
  take(floats: number): { array: Float32Array; fresh: boolean } {
    let best = -1;
    for (let i = 0; i < this.free.length; i++)
      if (this.free[i].byteLength >= 4 * floats && (best < 0 || this.free[i].byteLength < this.free[best].byteLength)) best = i;
    if (best >= 0) return { array: new Float32Array(this.free.splice(best, 1)[0], 0, floats), fresh: false };
    return { array: new Float32Array(new ArrayBuffer(4 * Math.ceil(floats * POOL_GROWTH)), 0, floats), fresh: true };
  }

  /** Takes back a cache's keys and values (the cache must not be used after). */
  give(cache: Pick<KvCache, 'keys' | 'values'>): void {
    for (const a of [...cache.keys, ...cache.values]) if (a.byteOffset === 0) this.free.push(a.buffer as ArrayBuffer);
    cache.keys = [];
    cache.values = [];
    if (this.free.length > this.maxFree) this.free = this.free.sort((a, b) => b.byteLength - a.byteLength).slice(0, this.maxFree);
  }

  /** Drops every waiting buffer. */
  clear(): void {
    this.free = [];
  }

  /** Bytes waiting in the pool. */
  get freeBytes(): number {
    return this.free.reduce((n, b) => n + b.byteLength, 0);
  }
}

/** The cache as a decode graph takes it. Every slot is fed (capacity C): unfilled and padding slots are masked out. */
export function kvCacheFeeds(c: ModelConfig, cache: KvCache): Record<string, HostTensor> {
  const B = cache.nextPos.length;
  const C = cache.capacity;
  const nkv = c.num_key_value_heads;
  const d = headDim(c);
  const feeds: Record<string, HostTensor> = { cache_bias: { dtype: 'float32', dims: [B, 1, 1, C], data: cache.bias } };
  for (let l = 0; l < c.num_hidden_layers; l++) {
    feeds[`cache.${l}.key`] = { dtype: 'float32', dims: [B, nkv, C, d], data: cache.keys[l] };
    feeds[`cache.${l}.value`] = { dtype: 'float32', dims: [B, nkv, d, C], data: cache.values[l] };
  }
  return feeds;
}

/** Writes a run's new keys and values (T per row) into slots filled.. of the cache; their slots stay masked. */
export function writeNewSlots(c: ModelConfig, cache: KvCache, out: Record<string, HostTensor>, T: number): void {
  const B = cache.nextPos.length;
  const P = cache.filled;
  const C = cache.capacity;
  const nkv = c.num_key_value_heads;
  const d = headDim(c);
  for (let l = 0; l < c.num_hidden_layers; l++) {
    const k = out[`new.${l}.key`].data as Float32Array; // [B,nkv,T,d]
    const v = out[`new.${l}.value`].data as Float32Array; // [B,nkv,d,T]
    const K = cache.keys[l];
    const V = cache.values[l];
    for (let bh = 0; bh < B * nkv; bh++) K.set(k.subarray(bh * T * d, (bh + 1) * T * d), (bh * C + P) * d);
    if (T === 1) {
      // A decode step: one number per value row, written directly. A subarray and a set per
      // number took 6-7 ms per step at 8 rows of the Qwen2.5-0.5B shape (24,576 calls), 3% of the step.
      for (let r = 0; r < B * nkv * d; r++) V[r * C + P] = v[r];
    } else for (let r = 0; r < B * nkv * d; r++) V.set(v.subarray(r * T, (r + 1) * T), r * C + P);
  }
}

/**
 * After a run of K decode steps wrote K slots from `from` (all masked): row b keeps its first
 * kept[b] of them (the tokens it fed that are its own: the pending token, then all but the last
 * of those it kept), the rest stay masked.
 */
export function keepSlots(cache: KvCache, from: number, K: number, kept: readonly number[]): void {
  const C = cache.capacity;
  kept.forEach((n, b) => {
    cache.bias.fill(0, b * C + from, b * C + from + n);
    cache.nextPos[b] += n;
  });
  cache.filled = from + K;
}
