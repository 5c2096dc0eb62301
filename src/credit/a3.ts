// A³ (Action Advantage Assignment) as its authors released it (docs/credit-assignment.md): a
// robust episode backbone, an intent residual from clustering the rollouts' bash signatures per
// (task, turn, scope), and a tree margin over states where rollouts branched. The core takes the
// switches of the `turnwise` estimator (turnwise.ts): changes 1–3 and its per-turn term
// (`TurnwiseResidual`).
import { mean } from '../core/stats';
import { TurnwiseError } from '../core/errors';
import { baseDiagnostics, indexBatch, num, type BatchIndex } from './batch';
import { levenshteinTable, robustSquash, signatureDistance, tanhB, TokenInterner, UnionFind } from './stats';
import type { EstimatorContext, EstimatorResult, EstimatorSpec, Params, TurnRow } from './types';

/** How far apart two turns' signatures may be and still count as the same action (the action margin's default `actionTau`). */
export const ACTION_TAU = 0.3;

export const A3_DEFAULTS: Params = {
  epsilon: 1e-6,
  bound: 1.1,
  minCount: 2,
  wTrie: 0.65,
  supportPrior: 0.1,
  gamma: 0.9,
  wTree: 1.0,
  scopes: [1, 2, 3, -1],
  scopeWeights: [0.25, 0.25, 0.25, 0.25],
  treeTau: 0.05,
  timeDecay: 0.84,
};

/**
 * The per-turn term of turnwise.
 *
 * `loo` (docs/credit-assignment.md, turnwise change 1): R − LOO mean of the rollout's cluster at (prompt, k).
 * Rollouts that took the same action at k share that action's effect, so subtracting their mean
 * removes exactly the contribution of the action at k: the term credits the *other* turns.
 *
 * `margin` (ours): the value of the action taken at k relative to the alternatives,
 *   shrink · (mean R of other rollouts' turns that took the same action − mean R of other rollouts' turns in the pool),
 * shrink = n / (n + supportPrior + ε) with n the number of those same-action turns; 0 when no
 * other rollout took it. The rollout's own reward never enters, so the term is not a copy of the
 * episode signal, and it is shift-invariant. Two choices:
 * - `actionKey`: `cluster` = A³'s per-cell clusters (forced to ⌈m / minCount⌉ and weighted
 *   over scopes; comparable only within a cell); `edit-intent` = a turn that changed files is
 *   identified by its edit signature (what it did to the workspace, whatever command did it),
 *   any other turn by its intent signature, linked to others of the task within signature
 *   distance ≤ actionTau (no forced cluster count; independent of rollout order).
 * - `marginPool`: `cell` = compare with the other rollouts' turns at the same k only; `task` =
 *   with their turns at every k (assumes an action's value in a task does not depend on when it
 *   is taken; ~turns× more evidence per action).
 */
export interface TurnwiseResidual {
  actionKey: 'cluster' | 'edit-intent';
  marginPool: 'cell' | 'task';
}

export interface A3Variant {
  /** turnwise: residual normalized per (promptId, turn) cell and kept per turn; a3: first row per trajectory, per group. */
  residualPerCell: boolean;
  /** turnwise: scope −1 is the prefix up to k; a3: all of the trajectory's commands. */
  scopeAllIsPrefix: boolean;
  /** turnwise: edit tokens join each turn's signature. */
  editTokens: boolean;
  /** turnwise (ours): the per-turn term is an action margin instead of R − LOO; absent = the per-turn R − LOO residual. */
  margin?: TurnwiseResidual;
  /**
   * How the three terms are put on one scale before they are added. `batch` (A³): each is divided by
   * its mean |value| over the batch, so a term that is zero on most rows is blown up where it is not,
   * and one task's credit grows with the number of uniform groups beside it. `none` (turnwise): the
   * terms are added as they are; each is already in units of a group's spread (the backbone and the
   * per-turn term are robust z-scores squashed to ±1, the tree margin is a shrunk reward difference).
   */
  termScale?: 'batch' | 'none';
}

/** A (promptId, turn k) cell: the rows of trajectories that have a turn k, in batch order. */
interface Cell {
  promptId: string;
  turn: number;
  rows: number[];
}

function cellsOf(rows: readonly TurnRow[], batch: BatchIndex): Cell[] {
  const cells: Cell[] = [];
  for (const [promptId, members] of batch.groups) {
    const byTurn = new Map<number, number[]>();
    for (const t of members) {
      for (const i of batch.trajs[t].rows) {
        let c = byTurn.get(rows[i].turn);
        if (!c) byTurn.set(rows[i].turn, (c = []));
        c.push(i);
      }
    }
    for (const turn of [...byTurn.keys()].sort((a, b) => a - b)) cells.push({ promptId, turn, rows: byTurn.get(turn)! });
  }
  return cells;
}

/** Signature tokens of the snippet made of the trajectory's turns at positions [from, to]. */
function makeSnippetTokens(rows: readonly TurnRow[], batch: BatchIndex, ctx: EstimatorContext, variant: A3Variant) {
  const interner = new TokenInterner();
  const memo = new Map<string, Int32Array>();
  const rowSig = (i: number): string[] => {
    const r = rows[i];
    if (r.signature) return r.signature;
    if (ctx.signJoined) return ctx.signJoined([r.bash]);
    throw new TurnwiseError('invalid-input', `row ${i} (${r.trajId} turn ${r.turn}) has no intent signature`, {
      hint: 'compute signatures first (attachSignatures in src/credit/signatures.ts) or pass ctx.signJoined',
    });
  };
  let nextId = 0;
  const ids = new Map<Int32Array, number>();
  const idOf = (t: Int32Array) => {
    let id = ids.get(t);
    if (id === undefined) ids.set(t, (id = nextId++));
    return id;
  };
  const get = (traj: number, from: number, to: number): Int32Array => {
    const key = `${traj}:${from}:${to}`;
    let toks = memo.get(key);
    if (toks) return toks;
    const idx = batch.trajs[traj].rows.slice(from, to + 1);
    let words: string[];
    if (variant.editTokens) {
      // turnwise: each turn is its own program; its tokens are intent then edit tokens
      words = idx.flatMap((i) => [...rowSig(i), ...(rows[i].editSig ?? [])]);
    } else if (ctx.signJoined && idx.length > 1) {
      words = ctx.signJoined(idx.map((i) => rows[i].bash));
    } else {
      words = idx.flatMap(rowSig);
    }
    toks = interner.intern(words);
    memo.set(key, toks);
    return toks;
  };
  return { get, idOf };
}

/** Single-linkage clustering to K* = max(1, min(m, ⌈m / minCount⌉)) components; ties keep (i, j) order. */
export function singleLinkage(tokens: readonly Int32Array[], minCount: number): { labels: number[]; k: number } {
  return singleLinkageBy(tokens.length, (i, j) => signatureDistance(tokens[i], tokens[j]), minCount);
}

/** singleLinkage over m items with a pairwise distance function. */
export function singleLinkageBy(m: number, distance: (i: number, j: number) => number, minCount: number): { labels: number[]; k: number } {
  if (m <= 1) return { labels: new Array(m).fill(0), k: m };
  const target = Math.max(1, Math.min(m, Math.ceil(m / minCount)));
  const pairs: { i: number; j: number; d: number }[] = [];
  for (let i = 0; i < m; i++) for (let j = i + 1; j < m; j++) pairs.push({ i, j, d: distance(i, j) });
  pairs.sort((a, b) => a.d - b.d); // stable: equal distances stay in (i, j) order
  const uf = new UnionFind(m);
  for (const p of pairs) {
    if (uf.components <= target) break;
    uf.union(p.i, p.j);
  }
  return { labels: uf.labels(), k: uf.components };
}

/**
 * Action margins within one pool of turns: for each, shrink(n) · (mean score of the other
 * rollouts' turns with the same key − mean score of the other rollouts' turns), n = the number
 * of those same-key turns; 0 when n = 0. O(pool) with per-key and per-(rollout, key) sums.
 */
export function actionMargins(pool: readonly { traj: number; key: number; score: number }[], shrinkOf: (n: number) => number): number[] {
  const keySum = new Map<number, { s: number; c: number }>();
  const trajSum = new Map<number, { s: number; c: number }>();
  const trajKeySum = new Map<string, { s: number; c: number }>();
  let total = 0;
  const bump = <K>(m: Map<K, { s: number; c: number }>, k: K, x: number) => {
    const e = m.get(k);
    if (e) {
      e.s += x;
      e.c++;
    } else m.set(k, { s: x, c: 1 });
  };
  for (const t of pool) {
    total += t.score;
    bump(keySum, t.key, t.score);
    bump(trajSum, t.traj, t.score);
    bump(trajKeySum, `${t.traj}:${t.key}`, t.score);
  }
  return pool.map((t) => {
    const own = trajKeySum.get(`${t.traj}:${t.key}`)!;
    const k = keySum.get(t.key)!;
    const same = k.c - own.c;
    const others = pool.length - trajSum.get(t.traj)!.c;
    if (same === 0 || others === 0) return 0;
    return shrinkOf(same) * ((k.s - own.s) / same - (total - trajSum.get(t.traj)!.s) / others);
  });
}

/**
 * turnwise's action identity per row, comparable across all turns of a task: a turn with edit
 * tokens is keyed by them (the same change to the workspace is the same action, whatever the
 * command); any other turn by its intent signature, linked to the task's other such turns whose
 * signature distance is ≤ tau (connected components, so the result does not depend on order).
 */
function editIntentKeys(rows: readonly TurnRow[], batch: BatchIndex, snippet: ReturnType<typeof makeSnippetTokens>, tau: number): number[] {
  const out = new Array<number>(rows.length).fill(-1);
  let next = 0;
  for (const members of batch.groups.values()) {
    const editKeys = new Map<string, number>();
    const intents = new Map<string, { toks: Int32Array; rows: number[] }>();
    for (const t of members) {
      for (const i of batch.trajs[t].rows) {
        const e = rows[i].editSig;
        if (e && e.length > 0) {
          const k = e.join('\u0001');
          let id = editKeys.get(k);
          if (id === undefined) editKeys.set(k, (id = next++));
          out[i] = id;
        } else {
          const toks = snippet.get(t, batch.posOfRow[i], batch.posOfRow[i]);
          const k = Array.from(toks).join(',');
          let u = intents.get(k);
          if (!u) intents.set(k, (u = { toks, rows: [] }));
          u.rows.push(i);
        }
      }
    }
    const uniq = [...intents.values()];
    const uf = new UnionFind(uniq.length);
    for (let a = 0; a < uniq.length; a++) {
      for (let b = a + 1; b < uniq.length; b++) if (signatureDistance(uniq[a].toks, uniq[b].toks) <= tau) uf.union(a, b);
    }
    const lab = uf.labels();
    const base = next;
    uniq.forEach((u, a) => u.rows.forEach((i) => (out[i] = base + lab[a])));
    next = base + uf.components;
  }
  return out;
}

/** The sums the release normalizes weights by: scope weights for the residual (+1e-12), for the tree's distances (+1e-9), and time-decay weights (+1e-9). */
const RESIDUAL_WEIGHT_EPS = 1e-12;
const TREE_WEIGHT_EPS = 1e-9;

function validate(params: Params): { scopes: number[]; wResidual: number[]; wTree: number[] } {
  const scopes = params.scopes as number[];
  const weights = params.scopeWeights as number[];
  if (scopes.length === 0 || scopes.length !== weights.length) {
    throw new TurnwiseError(
      'invalid-input',
      `scopes (${scopes.length}) and scopeWeights (${weights.length}) must be non-empty and of equal length`,
    );
  }
  for (const s of scopes) {
    if (!Number.isInteger(s) || (s < 1 && s !== -1)) {
      throw new TurnwiseError('invalid-input', `scope ${s} is not valid`, {
        hint: 'scopes are integers ≥ 1, or −1 for the whole trajectory',
      });
    }
  }
  const total = weights.reduce((a, b) => a + b, 0);
  if (!(total > 0)) throw new TurnwiseError('invalid-input', 'scopeWeights must sum to a positive number');
  if (!(num(params, 'minCount') >= 1)) throw new TurnwiseError('invalid-input', 'minCount must be ≥ 1');
  return {
    scopes,
    wResidual: weights.map((x) => x / (total + RESIDUAL_WEIGHT_EPS)),
    wTree: weights.map((x) => x / (total + TREE_WEIGHT_EPS)),
  };
}

/** Weights of a state's earlier turns, oldest first: decay^q / (Σ decay^q + 1e-9), as the release has them. */
export function timeDecayWeights(count: number, decay: number): number[] {
  const raw = Array.from({ length: count }, (_, q) => Math.pow(decay, q));
  const sum = raw.reduce((a, b) => a + b, 0);
  return raw.map((x) => x / (sum + TREE_WEIGHT_EPS));
}

/** What every phase of a3Core reads: the batch, its cells, snippet tokens and the parameters. */
interface A3Batch {
  rows: readonly TurnRow[];
  n: number;
  batch: BatchIndex;
  cells: Cell[];
  snippet: ReturnType<typeof makeSnippetTokens>;
  scopes: number[];
  wResidual: number[];
  wTree: number[];
  eps: number;
  supportPrior: number;
}

/** Per (promptId, k, scope): single-linkage clusters of the scope's snippets, and R − LOO mean of the row's cluster, weighted over scopes. */
function clusterResidual(
  a: A3Batch,
  ctx: EstimatorContext,
  variant: A3Variant,
  minCount: number,
): { labels: number[][]; residual: number[]; multi: number } {
  const { rows, n, batch, cells, snippet, scopes } = a;
  // Distances between equal snippet pairs are computed once (a3's scope −1 snippet is the same in
  // every cell of a trajectory). Prefix snippets built by concatenation (turnwise) read every
  // prefix pair off one Levenshtein table per trajectory pair.
  const distCache = new Map<number, number>();
  const snippetDistance = (x: Int32Array, y: Int32Array): number => {
    const ia = snippet.idOf(x);
    const ib = snippet.idOf(y);
    const key = ia < ib ? ia * 4194304 + ib : ib * 4194304 + ia;
    let d = distCache.get(key);
    if (d === undefined) distCache.set(key, (d = signatureDistance(x, y)));
    return d;
  };
  const prefixByTable = variant.scopeAllIsPrefix && (variant.editTokens || !ctx.signJoined);
  const tables = new Map<number, Int32Array>();
  const prefixDistance = (ta: number, la: number, tb: number, lb: number): number => {
    if (ta > tb) return prefixDistance(tb, lb, ta, la);
    const full = (t: number) => snippet.get(t, 0, batch.trajs[t].rows.length - 1);
    const key = ta * 4194304 + tb;
    let table = tables.get(key);
    if (!table) tables.set(key, (table = levenshteinTable(full(ta), full(tb))));
    return table[la * (full(tb).length + 1) + lb] / Math.max(la, lb, 1);
  };

  const labels = scopes.map(() => new Array<number>(n).fill(-1));
  const residual = new Array<number>(n).fill(0);
  let multi = 0;
  for (const cell of cells) {
    const m = cell.rows.length;
    for (let si = 0; si < scopes.length; si++) {
      const s = scopes[si];
      let distance: (x: number, y: number) => number;
      if (s === -1 && prefixByTable) {
        const tr = cell.rows.map((i) => batch.trajOfRow[i]);
        const len = cell.rows.map((i, q) => snippet.get(tr[q], 0, batch.posOfRow[i]).length);
        distance = (x, y) => prefixDistance(tr[x], len[x], tr[y], len[y]);
      } else {
        const toks = cell.rows.map((i) => {
          const t = batch.trajOfRow[i];
          const pos = batch.posOfRow[i];
          if (s === -1) return snippet.get(t, 0, variant.scopeAllIsPrefix ? pos : batch.trajs[t].rows.length - 1);
          return snippet.get(t, pos - Math.min(s, pos + 1) + 1, pos);
        });
        distance = (x, y) => snippetDistance(toks[x], toks[y]);
      }
      const { labels: lab, k } = singleLinkageBy(m, distance, minCount);
      if (k >= 2) multi++;
      const sum = new Map<number, { total: number; count: number }>();
      for (let q = 0; q < m; q++) {
        const e = sum.get(lab[q]) ?? { total: 0, count: 0 };
        e.total += rows[cell.rows[q]].score;
        e.count++;
        sum.set(lab[q], e);
      }
      for (let q = 0; q < m; q++) {
        const i = cell.rows[q];
        labels[si][i] = lab[q];
        const e = sum.get(lab[q])!;
        const loo = e.count > 1 ? (e.total - rows[i].score) / (e.count - 1) : rows[i].score;
        residual[i] += a.wResidual[si] * (rows[i].score - loo);
      }
    }
  }
  return { labels, residual, multi };
}

/** turnwise's action margin (replaces the residual when variant.margin is set). */
function turnwiseMargin(
  a: A3Batch,
  margin: TurnwiseResidual,
  labels: number[][],
  actionTau: number,
): { margin: number[]; actionLabels: number[] | null } {
  const { rows, n, batch, cells, scopes } = a;
  if (margin.actionKey === 'cluster' && margin.marginPool === 'task') {
    throw new TurnwiseError('invalid-input', 'actionKey=cluster needs marginPool=cell', {
      hint: "actionKey=cluster uses A³'s clusters, formed per (prompt, turn) cell, so their labels mean nothing across turns: use actionKey=edit-intent or marginPool=cell",
    });
  }
  const out = new Array<number>(n).fill(0);
  const shrinkOf = (k: number) => k / (k + a.supportPrior + a.eps);
  if (margin.actionKey === 'cluster') {
    for (const cell of cells) {
      for (let si = 0; si < scopes.length; si++) {
        const m = actionMargins(
          cell.rows.map((i) => ({ row: i, traj: batch.trajOfRow[i], key: labels[si][i], score: rows[i].score })),
          shrinkOf,
        );
        cell.rows.forEach((i, q) => (out[i] += a.wResidual[si] * m[q]));
      }
    }
    return { margin: out, actionLabels: null };
  }
  const actionLabels = editIntentKeys(rows, batch, a.snippet, actionTau);
  const pools =
    margin.marginPool === 'cell'
      ? cells.map((c) => c.rows)
      : [...batch.groups.values()].map((members) => members.flatMap((t) => batch.trajs[t].rows));
  for (const pool of pools) {
    const m = actionMargins(
      pool.map((i) => ({ row: i, traj: batch.trajOfRow[i], key: actionLabels[i], score: rows[i].score })),
      shrinkOf,
    );
    pool.forEach((i, q) => (out[i] = m[q]));
  }
  return { margin: out, actionLabels };
}

/** Robust episode standardization per group (backbone), and the per-turn term standardized per group (a3) or per cell (turnwise). */
function backboneAndResidual(a: A3Batch, perTurn: readonly number[], residualPerCell: boolean): { backbone: number[]; resNorm: number[] } {
  const { n, batch, cells, eps } = a;
  const backbone = new Array<number>(n).fill(0);
  const resNorm = new Array<number>(n).fill(0);
  for (const members of batch.groups.values()) {
    const b = robustSquash(
      members.map((t) => batch.trajs[t].score),
      eps,
      1.0,
    );
    members.forEach((t, q) => batch.trajs[t].rows.forEach((i) => (backbone[i] = b[q])));
    if (!residualPerCell) {
      const r = robustSquash(
        members.map((t) => perTurn[batch.trajs[t].firstRow]),
        eps,
        1.0,
      );
      members.forEach((t, q) => batch.trajs[t].rows.forEach((i) => (resNorm[i] = r[q])));
    }
  }
  if (residualPerCell) {
    for (const cell of cells) {
      const r = robustSquash(
        cell.rows.map((i) => perTurn[i]),
        eps,
        1.0,
      );
      cell.rows.forEach((i, q) => (resNorm[i] = r[q]));
    }
  }
  return { backbone, resNorm };
}

/**
 * Tree margin: per cell, states are rollouts with the same earlier turns whose earlier cluster
 * vectors are near-equal (time-decayed weighted Hamming ≤ tau); within a state, actions are near-equal
 * cluster vectors at k. Each branch gains shrink · (branch mean − state mean), discounted back along the trajectory.
 */
function treeMargin(
  a: A3Batch,
  labels: number[][],
  tau: number,
  decay: number,
  gamma: number,
): { tree: number[]; gate: number[]; gain: number[]; support: number[] } {
  const { rows, n, batch, cells, scopes, wTree, eps } = a;
  const p = a.supportPrior;
  const rowAt = new Map<string, number>(); // `${traj}:${turn}` → row
  for (let t = 0; t < batch.trajs.length; t++) for (const i of batch.trajs[t].rows) rowAt.set(`${t}:${rows[i].turn}`, i);
  const hamming = (x: number, y: number): number => {
    let h = 0;
    for (let si = 0; si < scopes.length; si++) if (labels[si][x] !== labels[si][y]) h += wTree[si];
    return h;
  };
  const gain = new Array<number>(n).fill(0);
  const support = new Array<number>(n).fill(0);
  for (const cell of cells) {
    const m = cell.rows.length;
    if (m < 2) continue;
    const earlier = cell.rows.map((i) => {
      const tr = batch.trajs[batch.trajOfRow[i]];
      return tr.rows.slice(0, batch.posOfRow[i]).map((j) => rows[j].turn);
    });
    const earlierKey = earlier.map((e) => e.join(','));
    const states = new UnionFind(m);
    for (let x = 0; x < m; x++) {
      for (let y = x + 1; y < m; y++) {
        if (earlierKey[x] !== earlierKey[y]) continue;
        const ts = earlier[x];
        let same = true;
        if (ts.length > 0) {
          const tw = timeDecayWeights(ts.length, decay);
          let d = 0;
          const tx = batch.trajOfRow[cell.rows[x]];
          const ty = batch.trajOfRow[cell.rows[y]];
          for (let q = 0; q < ts.length; q++) d += tw[q] * hamming(rowAt.get(`${tx}:${ts[q]}`)!, rowAt.get(`${ty}:${ts[q]}`)!);
          same = d <= tau;
        }
        if (same) states.union(x, y);
      }
    }
    const byState = new Map<number, number[]>();
    states.labels().forEach((st, q) => {
      let l = byState.get(st);
      if (!l) byState.set(st, (l = []));
      l.push(q);
    });
    for (const members of byState.values()) {
      if (members.length < 2) continue;
      const actions = new UnionFind(members.length);
      for (let x = 0; x < members.length; x++) {
        for (let y = x + 1; y < members.length; y++) {
          if (hamming(cell.rows[members[x]], cell.rows[members[y]]) <= tau) actions.union(x, y);
        }
      }
      if (actions.components < 2) continue;
      const parent = mean(members.map((q) => rows[cell.rows[q]].score));
      const branches = new Map<number, number[]>();
      actions.labels().forEach((l, x) => {
        let b = branches.get(l);
        if (!b) branches.set(l, (b = []));
        b.push(cell.rows[members[x]]);
      });
      for (const branch of branches.values()) {
        const shrink = branch.length / (branch.length + p + eps);
        const bMean = mean(branch.map((i) => rows[i].score));
        for (const i of branch) {
          gain[i] = shrink * (bMean - parent);
          support[i] = shrink;
        }
      }
    }
  }
  const tree = new Array<number>(n).fill(0);
  const gate = new Array<number>(n).fill(0);
  for (const tr of batch.trajs) {
    let G = 0;
    let S = 0;
    for (let q = tr.rows.length - 1; q >= 0; q--) {
      const i = tr.rows[q];
      G = gain[i] + gamma * G;
      S = support[i] + gamma * S;
      gate[i] = S / (S + p + eps);
      tree[i] = gate[i] * G;
    }
  }
  return { tree, gate, gain, support };
}

/** Each term divided by its mean absolute value over the scored rows (+1e-9), then A = tanhB(b̂ + wTrie · r̂ + wTree · t̂, bound). */
function combineTerms(
  batch: BatchIndex,
  n: number,
  terms: { backbone: number[]; resNorm: number[]; tree: number[] },
  wTrie: number,
  wTree: number,
  bound: number,
  termScale: 'batch' | 'none',
): { advantages: number[]; scored: number[] } {
  const scored: number[] = [];
  for (let i = 0; i < n; i++) if (batch.trajOfRow[i] >= 0) scored.push(i);
  const meanAbs = (xs: number[]) =>
    termScale === 'none' ? 1 : scored.reduce((acc, i) => acc + Math.abs(xs[i]), 0) / Math.max(scored.length, 1) + 1e-9;
  const [sb, sr, st] = [meanAbs(terms.backbone), meanAbs(terms.resNorm), meanAbs(terms.tree)];
  const advantages = new Array<number>(n).fill(0);
  for (const i of scored)
    advantages[i] = tanhB(terms.backbone[i] / sb + (wTrie * terms.resNorm[i]) / sr + (wTree * terms.tree[i]) / st, bound);
  return { advantages, scored };
}

function a3Core(rows: readonly TurnRow[], params: Params, ctx: EstimatorContext, variant: A3Variant): EstimatorResult {
  const { scopes, wResidual, wTree } = validate(params);
  const batch = indexBatch(rows);
  const a: A3Batch = {
    rows,
    n: rows.length,
    batch,
    cells: cellsOf(rows, batch),
    snippet: makeSnippetTokens(rows, batch, ctx, variant),
    scopes,
    wResidual,
    wTree,
    eps: num(params, 'epsilon'),
    supportPrior: num(params, 'supportPrior'),
  };
  const { labels, residual, multi } = clusterResidual(a, ctx, variant, num(params, 'minCount'));
  const actionTau = params.actionTau === undefined ? ACTION_TAU : num(params, 'actionTau');
  const m = variant.margin ? turnwiseMargin(a, variant.margin, labels, actionTau) : null;
  const { backbone, resNorm } = backboneAndResidual(a, m?.margin ?? residual, variant.residualPerCell);
  const { tree, gate, gain, support } = treeMargin(a, labels, num(params, 'treeTau'), num(params, 'timeDecay'), num(params, 'gamma'));
  const { advantages, scored } = combineTerms(
    batch,
    a.n,
    { backbone, resNorm, tree },
    num(params, 'wTrie'),
    num(params, 'wTree'),
    num(params, 'bound'),
    variant.termScale ?? 'batch',
  );

  const clusters: Record<string, number[]> = {};
  scopes.forEach((s, si) => (clusters[`scope${s}`] = labels[si]));
  if (m?.actionLabels) clusters.action = m.actionLabels;
  const diagnostics = baseDiagnostics(batch);
  diagnostics.frac_cells_multi_cluster = a.cells.length ? multi / (a.cells.length * scopes.length) : 0;
  diagnostics.mean_tree_gate = scored.length ? mean(scored.map((i) => gate[i])) : 0;
  return {
    advantages,
    components: { backbone, residualRaw: residual, ...(m ? { margin: m.margin } : {}), residual: resNorm, tree, gate, gain, support },
    clusters,
    diagnostics,
  };
}

/** A³ with any subset of turnwise's changes switched on (for ablations). */
export function a3VariantAdvantages(rows: readonly TurnRow[], params: Params, ctx: EstimatorContext, variant: A3Variant): EstimatorResult {
  return a3Core(rows, params, ctx, variant);
}

export function a3Advantages(rows: readonly TurnRow[], params: Params = A3_DEFAULTS, ctx: EstimatorContext = {}): EstimatorResult {
  return a3Core(rows, params, ctx, { residualPerCell: false, scopeAllIsPrefix: false, editTokens: false });
}

export const A3_SPEC: EstimatorSpec = {
  name: 'a3',
  summary: 'A³ as released: robust backbone + per-trajectory intent residual + tree margin over branching states',
  defaults: A3_DEFAULTS,
  fn: a3Advantages,
};
