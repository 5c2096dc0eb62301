// Small statistics shared by the benchmarks and the evaluation comparison.

/** The median (mean of the two middle values for an even count); NaN for an empty list. */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** Mean of the finite values; NaN when there are none. */
export function mean(xs: readonly number[]): number {
  let s = 0;
  let n = 0;
  for (const x of xs) {
    if (Number.isFinite(x)) {
      s += x;
      n++;
    }
  }
  return n ? s / n : NaN;
}

/** Population standard deviation of the finite values; NaN when there are none. */
export function std(xs: readonly number[]): number {
  const { ss, n } = squaredDeviations(xs);
  return n ? Math.sqrt(ss / n) : NaN;
}

/**
 * Sample standard deviation (n − 1, as torch.std) of the finite values; 0 for fewer than two
 * (a group of one episode has no spread to scale by).
 */
export function stdUnbiased(xs: readonly number[]): number {
  const { ss, n } = squaredDeviations(xs);
  return n < 2 ? 0 : Math.sqrt(ss / (n - 1));
}

/** Σ (x − mean)² over the finite values, and how many there are. */
function squaredDeviations(xs: readonly number[]): { ss: number; n: number } {
  const m = mean(xs);
  let ss = 0;
  let n = 0;
  for (const x of xs) {
    if (Number.isFinite(x)) {
      ss += (x - m) ** 2;
      n++;
    }
  }
  return { ss, n };
}

/**
 * Two-sided exact sign-flip (randomization) test on integer differences, one per cluster: under
 * the null each cluster's difference is as likely to have come out with the other sign, so the
 * p-value is the share of the 2^n sign patterns whose |sum| is at least the observed |sum|. With
 * paired episodes clustered by task (d = a task's gained − lost among its pairs), it tells one
 * task that flipped all of its samples from many tasks that moved one each, which the sign test
 * over episodes cannot: a task's samples share its bug, so they are not independent pairs. With
 * every d = ±1 it equals the sign test. Exact by dynamic programming over the reachable sums.
 * null when every difference is 0.
 */
export function signFlipP(diffs: readonly number[]): number | null {
  const d = diffs.filter((x) => x !== 0).map((x) => Math.abs(x));
  if (!d.length) return null;
  if (d.some((x) => !Number.isInteger(x))) throw new Error('signFlipP takes integer differences');
  const observed = Math.abs(diffs.reduce((a, x) => a + x, 0));
  const total = d.reduce((a, x) => a + x, 0);
  // count[s + total]: the share of sign patterns of the clusters so far whose sum is s.
  let count = new Float64Array(2 * total + 1);
  count[total] = 1;
  for (const x of d) {
    const next = new Float64Array(count.length);
    for (let i = 0; i < count.length; i++) {
      if (!count[i]) continue;
      if (i + x < next.length) next[i + x] += count[i] / 2;
      if (i - x >= 0) next[i - x] += count[i] / 2;
    }
    count = next;
  }
  let tail = 0;
  for (let i = 0; i < count.length; i++) if (Math.abs(i - total) >= observed) tail += count[i];
  return Math.min(1, Number(tail.toPrecision(12)));
}

/**
 * Two-sided exact binomial (p = 1/2) test of `a` successes against `b` (the sign test, McNemar's
 * exact test on the pairs that changed); null when both are 0.
 */
export function signTestP(a: number, b: number): number | null {
  const n = a + b;
  if (n === 0) return null;
  const k = Math.min(a, b);
  // P(X ≤ k) for X ~ Binomial(n, 1/2), in logs so large n stays finite.
  let logC = 0;
  let tail = 0;
  for (let i = 0; i <= k; i++) {
    if (i > 0) logC += Math.log(n - i + 1) - Math.log(i);
    tail += Math.exp(logC - n * Math.LN2);
  }
  // Rounded: the summed terms of a tie come to 0.9999999999999999.
  return Math.min(1, Number((2 * tail).toPrecision(12)));
}

/**
 * The unbiased pass@k estimate from n samples of which c succeeded: 1 − C(n−c, k) / C(n, k), the
 * probability that at least one of k drawn without replacement succeeds (computed as a product,
 * so large n does not overflow). NaN when k > n.
 */
export function passAtK(n: number, c: number, k: number): number {
  if (!(Number.isInteger(n) && Number.isInteger(c) && Number.isInteger(k)) || c < 0 || c > n || k < 1) return NaN;
  if (k > n) return NaN;
  if (n - c < k) return 1;
  let fail = 1;
  for (let i = n - c + 1; i <= n; i++) fail *= 1 - k / i;
  return 1 - fail;
}
