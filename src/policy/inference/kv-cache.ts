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

/** An empty cache of `capacity` slots for B rows, every slot masked. */
export function newKvCache(c: ModelConfig, B: number, capacity: number): KvCache {
  const n = B * c.num_key_value_heads * headDim(c) * capacity;
  return {
    capacity,
    filled: 0,
    keys: Array.from({ length: c.num_hidden_layers }, () => new Float32Array(n)),
    values: Array.from({ length: c.num_hidden_layers }, () => new Float32Array(n)),
    bias: new Float32Array(B * capacity).fill(MASKED),
    nextPos: new Array(B).fill(0),
  };
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
