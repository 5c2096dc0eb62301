// Small numeric helpers shared by the estimators: robust location/scale, bounded squashing,
// token-level edit distance and union-find. Pure and allocation-light: they run per batch.

/** b · tanh(x / b): a smooth clip to (−b, b) that is the identity near 0. */
export function tanhB(x: number, b: number): number {
  return b * Math.tanh(x / b);
}

/** Lower median: the ⌈n/2⌉-th smallest value, as torch.median. NaN for an empty list. */
export function lowerMedian(xs: readonly number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.ceil(s.length / 2) - 1];
}

/**
 * Robust standardization used by A³ for the backbone and the residual:
 * center = lower median, scale = max(1.4826 · median|x − center|, 0.5) + ε, out = tanhB((x − center)/scale, bound).
 */
export function robustSquash(xs: readonly number[], eps: number, bound = 1.0): number[] {
  if (xs.length === 0) return [];
  const center = lowerMedian(xs);
  const mad = lowerMedian(xs.map((x) => Math.abs(x - center)));
  const scale = Math.max(1.4826 * mad, 0.5) + eps;
  return xs.map((x) => tanhB((x - center) / scale, bound));
}

let rowA = new Int32Array(64);
let rowB = new Int32Array(64);

/** Levenshtein distance between two token sequences (tokens already interned as integers). */
export function levenshtein(a: ArrayLike<number>, b: ArrayLike<number>): number {
  const n = a.length;
  const m = b.length;
  if (n === 0) return m;
  if (m === 0) return n;
  if (rowA.length < m + 1) {
    rowA = new Int32Array(2 * (m + 1));
    rowB = new Int32Array(2 * (m + 1));
  }
  let prev = rowA;
  let cur = rowB;
  for (let j = 0; j <= m; j++) prev[j] = j;
  for (let i = 1; i <= n; i++) {
    cur[0] = i;
    const ai = a[i - 1];
    for (let j = 1; j <= m; j++) {
      const sub = prev[j - 1] + (ai === b[j - 1] ? 0 : 1);
      const del = prev[j] + 1;
      const ins = cur[j - 1] + 1;
      cur[j] = sub < del ? (sub < ins ? sub : ins) : del < ins ? del : ins;
    }
    const t = prev;
    prev = cur;
    cur = t;
  }
  return prev[m];
}

/**
 * The full Levenshtein table of a and b, (n+1)×(m+1) row-major: entry [i, j] is the distance
 * between the prefixes a[:i] and b[:j], so one table answers every prefix pair.
 */
export function levenshteinTable(a: ArrayLike<number>, b: ArrayLike<number>): Int32Array {
  const n = a.length;
  const m = b.length;
  const w = m + 1;
  const d = new Int32Array((n + 1) * w);
  for (let j = 0; j <= m; j++) d[j] = j;
  for (let i = 1; i <= n; i++) {
    d[i * w] = i;
    const ai = a[i - 1];
    for (let j = 1; j <= m; j++) {
      const sub = d[(i - 1) * w + j - 1] + (ai === b[j - 1] ? 0 : 1);
      const del = d[(i - 1) * w + j] + 1;
      const ins = d[i * w + j - 1] + 1;
      d[i * w + j] = sub < del ? (sub < ins ? sub : ins) : del < ins ? del : ins;
    }
  }
  return d;
}

/** Levenshtein over tokens divided by max(len a, len b, 1): the signature distance of docs/credit-assignment.md "Intent signature". */
export function signatureDistance(a: ArrayLike<number>, b: ArrayLike<number>): number {
  return levenshtein(a, b) / Math.max(a.length, b.length, 1);
}

/** Interns string tokens as small integers so distances compare numbers, not strings. */
export class TokenInterner {
  private readonly ids = new Map<string, number>();
  intern(tokens: readonly string[]): Int32Array {
    const out = new Int32Array(tokens.length);
    for (let i = 0; i < tokens.length; i++) {
      let id = this.ids.get(tokens[i]);
      if (id === undefined) {
        id = this.ids.size;
        this.ids.set(tokens[i], id);
      }
      out[i] = id;
    }
    return out;
  }
}

export class UnionFind {
  private readonly parent: Int32Array;
  components: number;
  constructor(n: number) {
    this.parent = new Int32Array(n);
    for (let i = 0; i < n; i++) this.parent[i] = i;
    this.components = n;
  }
  find(i: number): number {
    let r = i;
    while (this.parent[r] !== r) r = this.parent[r];
    while (this.parent[i] !== r) {
      const next = this.parent[i];
      this.parent[i] = r;
      i = next;
    }
    return r;
  }
  /** Returns true when a and b were in different components. */
  union(a: number, b: number): boolean {
    const ra = this.find(a);
    const rb = this.find(b);
    if (ra === rb) return false;
    // the smaller root wins so labels do not depend on merge order
    if (ra < rb) this.parent[rb] = ra;
    else this.parent[ra] = rb;
    this.components--;
    return true;
  }
  /** Component labels 0, 1, … in order of each component's first member. */
  labels(): number[] {
    const n = this.parent.length;
    const byRoot = new Map<number, number>();
    const out: number[] = new Array(n);
    for (let i = 0; i < n; i++) {
      const r = this.find(i);
      let l = byRoot.get(r);
      if (l === undefined) {
        l = byRoot.size;
        byRoot.set(r, l);
      }
      out[i] = l;
    }
    return out;
  }
}
