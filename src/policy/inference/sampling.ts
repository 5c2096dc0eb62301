// Sampling maths over one logits row, on the host: log-softmax, the most likely tokens, and a
// seeded draw with temperature and top-p that returns the token and its log-prob.
import type { SeededRandom } from '../model/weights';

/** A token id and its log-prob under softmax(logits / temperature), before top-p truncation. */
export interface TokenLogprob {
  id: number;
  logprob: number;
}

/** The `k` most likely tokens of a logits row, most likely first, with their log-probs at `temperature` (0: 1). */
export function topLogprobs(row: ArrayLike<number>, k: number, temperature = 1): TokenLogprob[] {
  const lp = logSoftmax(row, temperature > 0 ? temperature : 1);
  const best: TokenLogprob[] = [];
  for (let i = 0; i < lp.length; i++) {
    if (best.length === k && lp[i] <= best[k - 1].logprob) continue;
    let j = best.length < k ? best.length : k - 1;
    while (j > 0 && best[j - 1].logprob < lp[i]) j--;
    best.splice(j, 0, { id: i, logprob: lp[i] });
    if (best.length > k) best.pop();
  }
  return best;
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

/**
 * The first token, in order of log-prob (highest first, ties by lower id), at which the running
 * sum of `p` over `idx[s..e)` reaches `target` (the last one when rounding keeps it short), found
 * by partitioning around pivots instead of sorting: linear in the vocabulary on average, where a
 * sort of 150k ids costs more than a decode step. Reorders `idx[s..e)`.
 */
function crossing(idx: Int32Array, s: number, e: number, target: number, p: Float64Array, lp: Float64Array): number {
  let acc = 0;
  let passed = idx[s];
  while (e - s > 32) {
    const pv = idx[(s + e) >>> 1];
    const lpv = lp[pv];
    let w = s;
    let before = 0;
    for (let r = s; r < e; r++) {
      const i = idx[r];
      if (lp[i] > lpv || (lp[i] === lpv && i < pv)) {
        idx[r] = idx[w];
        idx[w] = i;
        w++;
        before += p[i];
      }
    }
    if (acc + before >= target) {
      e = w;
      continue;
    }
    acc += before;
    if (acc + p[pv] >= target) return pv;
    acc += p[pv];
    passed = pv;
    for (let r = w; r < e; r++) {
      if (idx[r] === pv) {
        idx[r] = idx[w];
        idx[w] = pv;
        break;
      }
    }
    s = w + 1;
  }
  const rest = Array.from(idx.subarray(s, e)).sort((a, b) => lp[b] - lp[a] || a - b);
  for (const i of rest) {
    acc += p[i];
    if (acc >= target) return i;
  }
  return rest.length ? rest[rest.length - 1] : passed;
}

/** Log-prob buckets of sampleToken: the draw sorts only the one bucket its target falls in. */
const SAMPLE_BUCKETS = 4096;

/** sampleToken's arrays, grown to the largest vocabulary seen (sampling runs on one thread). */
let sampleScratch:
  { lp: Float64Array; p: Float64Array; bucket: Uint16Array; mass: Float64Array; count: Int32Array; members: Int32Array } | undefined;

/**
 * Draws one token id from a logits row with temperature and top-p (temperature 0: the most likely
 * token); returns it with its log-prob under softmax(row / temperature), before top-p truncation
 * (temperature 0 takes temperature 1).
 */
export function sampleToken(row: ArrayLike<number>, temperature: number, topP: number, rng: SeededRandom): { id: number; logprob: number } {
  const n = row.length;
  const t = temperature > 0 ? temperature : 1;
  if (!sampleScratch || sampleScratch.lp.length < n) {
    sampleScratch = {
      lp: new Float64Array(n),
      p: new Float64Array(n),
      bucket: new Uint16Array(n),
      mass: new Float64Array(SAMPLE_BUCKETS),
      count: new Int32Array(SAMPLE_BUCKETS),
      members: new Int32Array(n),
    };
  }
  const { lp, p, bucket, mass, count, members } = sampleScratch;
  // The log-softmax, computed as logSoftmax computes it (the log-prob returned is the same number).
  let max = -Infinity;
  for (let i = 0; i < n; i++) max = Math.max(max, row[i] / t);
  let z = 0;
  for (let i = 0; i < n; i++) {
    const e = Math.exp(row[i] / t - max);
    p[i] = e;
    z += e;
  }
  const lz = max + Math.log(z);
  const iz = 1 / z;
  let lo = Infinity;
  for (let i = 0; i < n; i++) {
    const v = row[i] / t - lz;
    lp[i] = v;
    p[i] *= iz;
    if (v < lo && v > -Infinity) lo = v;
  }
  if (temperature <= 0) {
    let best = 0;
    for (let i = 1; i < n; i++) if (lp[i] > lp[best]) best = i;
    return { id: best, logprob: lp[best] };
  }
  // The nucleus is the most likely tokens whose probabilities first sum to ≥ topP; the draw is
  // the first of them, most likely first, at which the running sum passes u·(their mass). Tokens
  // go into buckets by log-prob (a monotone map: a more likely token is never in a later bucket),
  // so the running sum is walked bucket by bucket and only the bucket where it crosses its target
  // is ordered: two linear passes over the vocabulary, where a sort of 150k ids costs more than a
  // decode step.
  const hi = max - lz;
  const scale = hi > lo ? (SAMPLE_BUCKETS - 1) / (hi - lo) : 0;
  mass.fill(0);
  count.fill(0);
  for (let i = 0; i < n; i++) {
    const k = Math.min(SAMPLE_BUCKETS - 1, Math.floor((hi - lp[i]) * scale)) || 0;
    bucket[i] = k;
    mass[k] += p[i];
    count[k]++;
  }
  const before = (i: number, j: number) => lp[i] > lp[j] || (lp[i] === lp[j] && i < j);
  const pick = (target: number): { id: number; cum: number } => {
    let acc = 0;
    let k = 0;
    let last = 0;
    for (; k < SAMPLE_BUCKETS; k++) {
      if (count[k] === 0) continue;
      last = k;
      if (acc + mass[k] >= target) break;
      acc += mass[k];
    }
    if (k === SAMPLE_BUCKETS) {
      // Rounding kept the sum short of the target: the last token in order.
      k = last;
      acc -= mass[last];
      target = Infinity;
    }
    let m = 0;
    for (let i = 0; i < n; i++) if (bucket[i] === k) members[m++] = i;
    const id = crossing(members, 0, m, target - acc, p, lp);
    let cum = acc;
    for (let r = 0; r < m; r++) if (members[r] === id || before(members[r], id)) cum += p[members[r]];
    return { id, cum };
  };
  let id: number;
  if (topP < 1) {
    const edge = pick(topP);
    id = pick(rng.next() * edge.cum).id;
    if (before(edge.id, id)) id = edge.id; // a last-bit rounding past the nucleus' edge
  } else {
    let total = 0;
    for (let k = 0; k < SAMPLE_BUCKETS; k++) total += mass[k];
    id = pick(rng.next() * total).id;
  }
  return { id, logprob: lp[id] };
}
