// Small statistics shared by the benchmarks.

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
  const m = mean(xs);
  if (!Number.isFinite(m)) return NaN;
  let s = 0;
  let n = 0;
  for (const x of xs) {
    if (Number.isFinite(x)) {
      s += (x - m) ** 2;
      n++;
    }
  }
  return Math.sqrt(s / n);
}
