import { strict as assert } from 'node:assert';
import {
  A3_DEFAULTS,
  TURNWISE_DEFAULTS,
  computeAdvantages,
  estimatorNames,
  getEstimator,
  parseParamArgs,
  registerEstimator,
  singleLinkage,
} from '../../../src/credit/index';
import { TokenInterner, lowerMedian, robustSquash } from '../../../src/credit/stats';
import type { EstimatorResult, TurnRow } from '../../../src/credit/types';

const EPS = 1e-6;
const close = (a: number, b: number, tol = 1e-9) => assert.ok(Math.abs(a - b) <= tol, `${a} != ${b}`);
const closeAll = (a: readonly number[], b: readonly number[], tol = 1e-9) => {
  assert.equal(a.length, b.length);
  a.forEach((x, i) => assert.ok(Math.abs(x - b[i]) <= tol, `[${i}] ${x} != ${b[i]} (got ${JSON.stringify(a)})`));
};

/** Rows for trajectories given as [promptId, trajId, score, signatures-per-turn]. */
function batchOf(trajs: [string, string, number, string[][], (string[] | undefined)[]?][]): TurnRow[] {
  const rows: TurnRow[] = [];
  for (const [promptId, trajId, score, sigs, edits] of trajs) {
    sigs.forEach((signature, turn) =>
      rows.push({
        promptId,
        trajId,
        turn,
        bash: signature.join(' '),
        signature,
        score,
        ...(edits?.[turn] ? { editSig: edits[turn] } : {}),
      }),
    );
  }
  return rows;
}

describe('credit/registry', () => {
  it('lists the five estimators; unknown and duplicate names raise with the valid ones', () => {
    assert.deepEqual(estimatorNames(), ['grpo', 'rloo', 'gigpo', 'a3', 'turnwise', 'gear', 'a2tgpo']);
    assert.throws(
      () => getEstimator('ppo'),
      (e: Error & { hint?: string }) =>
        /unknown advantage estimator "ppo"/.test(e.message) && /grpo, rloo, gigpo, a3, turnwise/.test(e.hint ?? ''),
    );
    assert.throws(() => registerEstimator(getEstimator('grpo')), /registered twice/);
  });

  it('parses --param values by the default type and rejects unknown keys and enum values', () => {
    assert.deepEqual(parseParamArgs(getEstimator('a3'), ['gamma=0.5', 'scopes=1,-1', 'scopeWeights=1,3']), {
      gamma: 0.5,
      scopes: [1, -1],
      scopeWeights: [1, 3],
    });
    assert.deepEqual(parseParamArgs(getEstimator('grpo'), ['scale=batch']), { scale: 'batch' });
    assert.throws(() => parseParamArgs(getEstimator('grpo'), ['scale=median']), /one of group, batch, none/);
    assert.throws(() => parseParamArgs(getEstimator('a3'), ['gama=0.5']), /no parameter "gama"/);
    assert.throws(() => parseParamArgs(getEstimator('a3'), ['gamma=x']), /not a number/);
    assert.throws(() => parseParamArgs(getEstimator('a3'), ['gamma']), /not key=value/);
  });

  it('a3 defaults are the documented ones', () => {
    assert.deepEqual(getEstimator('a3').defaults, {
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
    });
    // turnwise: A³'s defaults plus its per-turn action margin (change 5), turn penalties (change 6) and unscaled terms (change 7)
    assert.deepEqual(getEstimator('turnwise').defaults, {
      ...A3_DEFAULTS,
      residual: 'margin',
      actionKey: 'edit-intent',
      marginPool: 'task',
      actionTau: 0.3,
      penalties: 'turn',
      penaltyScale: 0.5,
      termScale: 'none',
    });
    assert.deepEqual(TURNWISE_DEFAULTS, getEstimator('turnwise').defaults);
    assert.throws(() => parseParamArgs(getEstimator('turnwise'), ['residual=first']), /one of loo, margin/);
    assert.throws(() => parseParamArgs(getEstimator('a3'), ['residual=margin']), /no parameter "residual"/);
  });
});

describe('credit/stats', () => {
  it('lower median is the ⌈n/2⌉-th smallest', () => {
    assert.equal(lowerMedian([4, 1, 3, 2]), 2); // sorted 1 2 3 4, 2nd
    assert.equal(lowerMedian([5, 1, 3]), 3);
  });
  it('robust squash: median 0, MAD floor 0.5', () => {
    // [1, 0, 0]: center = 0, MAD = median(1, 0, 0) = 0 → scale = 0.5 + ε
    closeAll(robustSquash([1, 0, 0], EPS), [Math.tanh(1 / (0.5 + EPS)), 0, 0]);
  });
  it('single linkage merges the closest pairs first, ties in (i, j) order, down to ⌈m/minCount⌉', () => {
    const it = new TokenInterner();
    const t = (s: string) => it.intern(s.split(' '));
    // three equidistant → K* = 2, first pair (0,1) merges
    assert.deepEqual(singleLinkage([t('a'), t('b'), t('c')], 2).labels, [0, 0, 1]);
    // (1,2) identical merges before (0,1): d=0 < d=1
    assert.deepEqual(singleLinkage([t('a'), t('b'), t('b')], 2).labels, [0, 1, 1]);
    // m = 2 → K* = 1
    assert.deepEqual(singleLinkage([t('a'), t('b')], 2).labels, [0, 0]);
    // minCount 1 → every trajectory alone
    assert.deepEqual(singleLinkage([t('a'), t('a'), t('b')], 1).labels, [0, 1, 2]);
  });
});

describe('credit/grpo family', () => {
  // p1: a R=1 (2 turns), b R=0, c R=0.5; p2: d R=0.7 alone; p3: e NaN, f = g = 1 (zero spread)
  const rows = batchOf([
    ['p1', 'a', 1, [['V:ls'], ['V:cat']]],
    ['p1', 'b', 0, [['V:ls']]],
    ['p1', 'c', 0.5, [['V:ls']]],
    ['p2', 'd', 0.7, [['V:ls']]],
    ['p3', 'e', NaN, [['V:ls']]],
    ['p3', 'f', 1, [['V:ls']]],
    ['p3', 'g', 1, [['V:ls']]],
  ]);

  it('grpo scale=group: (R − mean)/(std + ε), sample std, broadcast; group of one, NaN and zero spread → 0', () => {
    // p1 mean 0.5; std = sqrt((0.25 + 0.25 + 0)/2) = 0.5
    const a = 0.5 / (0.5 + EPS);
    const out = computeAdvantages('grpo', rows);
    closeAll(out.advantages, [a, a, -a, 0, 0, 0, 0, 0]);
    assert.ok(out.advantages.every(Number.isFinite));
    // p1 zero-std? no; p2 (one value) and p3 (1, 1) yes → 2/3
    close(out.diagnostics.frac_reward_zero_std, 2 / 3);
    assert.equal(out.diagnostics.rows_nan, 1);
  });

  it('grpo scale=batch and scale=none', () => {
    // batch std over scored trajectories [1, 0, .5, .7, 1, 1]: mean .7, squares .09 .49 .04 0 .09 .09 = .8, /5 → std .4
    const b = computeAdvantages('grpo', rows, { scale: 'batch' });
    const x = 0.5 / (0.4 + EPS);
    closeAll(b.advantages, [x, x, -x, 0, 0, 0, 0, 0]);
    const n = computeAdvantages('grpo', rows, { scale: 'none' });
    closeAll(n.advantages, [0.5, 0.5, -0.5, 0, 0, 0, 0, 0]);
  });

  it('rloo: R − mean of the others', () => {
    // a: 1 − (0 + .5)/2 = .75; b: 0 − (1 + .5)/2 = −.75; c: .5 − (1 + 0)/2 = 0; f, g: 1 − 1 = 0
    closeAll(computeAdvantages('rloo', rows).advantages, [0.75, 0.75, -0.75, 0, 0, 0, 0, 0]);
  });

  it('gigpo: episode term + ω · anchor-normalized discounted return', () => {
    const g: TurnRow[] = [
      { promptId: 'p', trajId: 'a', turn: 0, bash: 'ls', score: 1, observation: '' },
      { promptId: 'p', trajId: 'a', turn: 1, bash: 'ls', score: 1, observation: 'x' },
      { promptId: 'p', trajId: 'b', turn: 0, bash: 'ls', score: 0, observation: '' },
      { promptId: 'p', trajId: 'b', turn: 1, bash: 'ls', score: 0, observation: 'y' },
    ];
    // episode: mean .5, std sqrt(.5) → ±.5/(√.5 + ε)
    const e = 0.5 / (Math.sqrt(0.5) + EPS);
    // γ = .5: returns a: [.5, 1], b: [0, 0]. Anchor '' = {a0, b0}: [.5, 0], mean .25, std √(2·.0625) = .353553
    const s = 0.25 / (Math.sqrt(0.125) + EPS);
    // turn 1 observations differ → anchors of one → step 0
    const out = computeAdvantages('gigpo', g, { gamma: 0.5, omega: 2 });
    closeAll(out.advantages, [e + 2 * s, e, -e - 2 * s, -e]);
    closeAll(out.components.discountedReturn, [0.5, 1, 0, 0]);
  });
});

describe('credit/a3 and turnwise', () => {
  const one = { scopes: [1], scopeWeights: [1] };

  it('a3 on one turn: backbone, residual and tree by hand', () => {
    // a [V:ls] R=1, b [V:ls] R=0, c [V:cat] R=0 (one scope, weight 1)
    const rows = batchOf([
      ['p', 'a', 1, [['V:ls']]],
      ['p', 'b', 0, [['V:ls']]],
      ['p', 'c', 0, [['V:cat']]],
    ]);
    const out = computeAdvantages('a3', rows, one);
    // clustering: m = 3, K* = min(3, ⌈3/2⌉) = 2; d(a,b) = 0 merges first → labels a0 b0 c1
    assert.deepEqual(out.clusters!.scope1, [0, 0, 1]);
    // backbone: median(1,0,0) = 0, MAD = median(1,0,0) = 0 → scale .5+ε: b = [tanh(1/(.5+ε)), 0, 0]
    const bA = Math.tanh(1 / (0.5 + EPS));
    closeAll(out.components.backbone, [bA, 0, 0]);
    // residual: a: 1 − LOO(b)=1−0 = 1; b: 0 − 1 = −1; c alone: 0 − 0 = 0
    closeAll(out.components.residualRaw, [1, -1, 0]);
    // normalized: median(1,−1,0) = 0, MAD = median(1,1,0) = 1 → scale 1.4826 + ε
    const rA = Math.tanh(1 / (1.4826 + EPS));
    closeAll(out.components.residual, [rA, -rA, 0]);
    // tree: one state (no earlier turns), actions {a,b} and {c}; parent = 1/3
    // {a,b}: shrink = 2/(2.1+ε), gain = shrink·(.5 − 1/3); {c}: shrink = 1/(1.1+ε), gain = shrink·(0 − 1/3)
    const s2 = 2 / (2.1 + EPS);
    const s1 = 1 / (1.1 + EPS);
    const gate2 = s2 / (s2 + 0.1 + EPS);
    const gate1 = s1 / (s1 + 0.1 + EPS);
    const tAB = gate2 * s2 * (0.5 - 1 / 3);
    const tC = gate1 * s1 * (0 - 1 / 3);
    closeAll(out.components.tree, [tAB, tAB, tC]);
    closeAll(out.components.gate, [gate2, gate2, gate1]);
    // combine: divide by mean |·| + 1e-9, A = 1.1·tanh((b̂ + .65 r̂ + t̂)/1.1)
    const mb = bA / 3 + 1e-9;
    const mr = (2 * rA) / 3 + 1e-9;
    const mt = (2 * Math.abs(tAB) + Math.abs(tC)) / 3 + 1e-9;
    const A = (b: number, r: number, t: number) => 1.1 * Math.tanh((b / mb + (0.65 * r) / mr + t / mt) / 1.1);
    closeAll(out.advantages, [A(bA, rA, tAB), A(0, -rA, tAB), A(0, 0, tC)]);
    close(out.diagnostics.mean_tree_gate!, (2 * gate2 + gate1) / 3);
    close(out.diagnostics.frac_cells_multi_cluster!, 1);
  });

  // Two turns, four rollouts. Turn 0: a,b ran `ls`, c,d ran `cat`. Turn 1: a,c ran `fix` (R=1), b,d ran `noop` (R=0).
  const twoTurn = () =>
    batchOf([
      ['p', 'a', 1, [['V:ls'], ['V:fix']]],
      ['p', 'b', 0, [['V:ls'], ['V:noop']]],
      ['p', 'c', 1, [['V:cat'], ['V:fix']]],
      ['p', 'd', 0, [['V:cat'], ['V:noop']]],
    ]);
  // Shared by both hand computations below (rows in order a0 a1 b0 b1 c0 c1 d0 d1).
  // backbone: scores [1,0,1,0]: lower median 0, MAD median(1,0,1,0) = 0 → scale .5+ε
  const bb = Math.tanh(1 / (0.5 + EPS));
  // tree. turn 0: one state, actions {a,b} {c,d}, both branch means = parent .5 → gain 0, support s2 = 2/(2.1+ε)
  // turn 1: earlier turn 0 labels a0 b0 c1 d1 → states {a,b}, {c,d}; each splits into two actions of one:
  //   shrink s1 = 1/(1.1+ε), gain ±s1·(1 − .5) (+ for a, c; − for b, d)
  const s2 = 2 / (2.1 + EPS);
  const s1 = 1 / (1.1 + EPS);
  const g1 = s1 * 0.5;
  //   backwards (γ = .9): turn 1: G = g1, S = s1; turn 0: G = .9·g1, S = s2 + .9·s1
  const S0 = s2 + 0.9 * s1;
  const t1 = (s1 / (s1 + 0.1 + EPS)) * g1;
  const t0 = (S0 / (S0 + 0.1 + EPS)) * 0.9 * g1;
  const tree = [t0, t1, -t0, -t1, t0, t1, -t0, -t1];

  it('a3 on two turns: residual from the first row of each trajectory, copied to its turns', () => {
    const out = computeAdvantages('a3', twoTurn(), one);
    // turn 0 clusters {a,b} {c,d}: residuals a: 1−0, b: 0−1, c: 1−0, d: 0−1
    // turn 1 clusters {a,c} {b,d}: residuals all 0 (same-cluster partner has the same score)
    closeAll(out.components.residualRaw, [1, 0, -1, 0, 1, 0, -1, 0]);
    // per trajectory first-row residual [1, −1, 1, −1]: lower median −1, MAD median(2,0,2,0) = 0 → scale .5+ε
    const r = Math.tanh(2 / (0.5 + EPS));
    closeAll(out.components.residual, [r, r, 0, 0, r, r, 0, 0]);
    closeAll(out.components.tree, tree);
    const mb = (4 * bb) / 8 + 1e-9;
    const mr = (4 * r) / 8 + 1e-9;
    const mt = (4 * t0 + 4 * t1) / 8 + 1e-9;
    const A = (b: number, rr: number, t: number) => 1.1 * Math.tanh((b / mb + (0.65 * rr) / mr + t / mt) / 1.1);
    closeAll(out.advantages, [
      A(bb, r, t0),
      A(bb, r, t1),
      A(0, 0, -t0),
      A(0, 0, -t1),
      A(bb, r, t0),
      A(bb, r, t1),
      A(0, 0, -t0),
      A(0, 0, -t1),
    ]);
  });

  it(`turnwise residual=loo (changes 1–4) on two turns: residual normalized per (prompt, turn) cell and kept per turn`, () => {
    const out = computeAdvantages('turnwise', twoTurn(), { ...one, residual: 'loo' });
    // turn-0 cell [1, −1, 1, −1] → as above; turn-1 cell [0,0,0,0] → 0
    const r = Math.tanh(2 / (0.5 + EPS));
    closeAll(out.components.residual, [r, 0, 0, 0, r, 0, 0, 0]);
    closeAll(out.components.tree, tree);
    // combine: the terms as they are (termScale=none), A = 1.1 · tanh((b + .65 r + t) / 1.1)
    const A = (b: number, rr: number, t: number) => 1.1 * Math.tanh((b + 0.65 * rr + t) / 1.1);
    closeAll(out.advantages, [
      A(bb, r, t0),
      A(bb, 0, t1),
      A(0, 0, -t0),
      A(0, 0, -t1),
      A(bb, r, t0),
      A(bb, 0, t1),
      A(0, 0, -t0),
      A(0, 0, -t1),
    ]);
  });

  // Four rollouts, two turns. a and c won (R = 1) and made the same code change E1 at turn 1 with
  // different commands; b and d lost (R = 0). Rows in order a0 a1 b0 b1 c0 c1 d0 d1.
  const E1 = ['E:f::g', 'N:comparison_operator:<=→<'];
  const LS = ['V:ls'];
  const CAT = ['V:cat', 'W:f'];
  const marginBatch = () =>
    batchOf([
      ['p', 'a', 1, [LS, ['V:python3', 'W:fix.py']], [undefined, E1]],
      ['p', 'b', 0, [LS, CAT]],
      ['p', 'c', 1, [CAT, ['V:sed', 'W:-i']], [undefined, E1]],
      ['p', 'd', 0, [CAT, LS]],
    ]);
  // shrink(n) = n / (n + supportPrior + ε), supportPrior = .1
  const sh = (k: number) => k / (k + 0.1 + EPS);

  it(`turnwise margin, actionKey=edit-intent, pool=task: value of the action vs the task's other turns`, () => {
    const out = computeAdvantages('turnwise', marginBatch(), one);
    // action keys: a1, c1 share their edit E1 (different commands); LS = {a0, b0, d1}, CAT = {b1, c0, d0}
    // (d(LS, CAT) = 2/2 = 1 > actionTau .3)
    const act = out.clusters!.action;
    assert.equal(act[1], act[5]);
    assert.deepEqual(
      [act[0], act[2], act[7]].map((x) => x === act[0]),
      [true, true, true],
    );
    assert.deepEqual(
      [act[3], act[4], act[6]].map((x) => x === act[3]),
      [true, true, true],
    );
    assert.equal(new Set(act).size, 3);
    // margin = shrink(n) · (mean R of other rollouts' same-key turns − mean R of other rollouts' turns)
    // a0 (LS): same b0 0, d1 0 → 0; others (b, c, d: 0 0 1 1 0 0) → 1/3: sh(2)·(−1/3)
    // a1 (E1): same c1 → 1; others 1/3: sh(1)·(2/3)
    // b0 (LS): same a0 1, d1 0 → .5; others (a, c, d: 1 1 1 1 0 0) → 2/3: sh(2)·(−1/6); b1 (CAT): c0 1, d0 0 → same
    // c0 (CAT): same b1 0, d0 0 → 0; others (a, b, d) → 1/3: sh(2)·(−1/3); c1 (E1): a1 → 1: sh(1)·(2/3)
    // d0 (CAT): b1 0, c0 1 → .5; others (a, b, c) → 2/3: sh(2)·(−1/6); d1 (LS): a0 1, b0 0 → same
    const lo = -sh(2) / 3;
    const mid = -sh(2) / 6;
    const fix = (2 * sh(1)) / 3;
    closeAll(out.components.margin, [lo, fix, mid, mid, lo, fix, mid, mid]);
    // normalized per (p, k) cell like the per-turn residual of residual=loo. k = 0: [lo, mid, lo, mid]: lower median lo,
    // MAD = lower median(0, −sh(2)/6 − lo, 0, ·) = 0 → scale .5 + ε
    const r0 = Math.tanh((mid - lo) / (0.5 + EPS));
    // k = 1: [fix, mid, fix, mid]: lower median mid, MAD 0 → scale .5 + ε
    const r1 = Math.tanh((fix - mid) / (0.5 + EPS));
    closeAll(out.components.residual, [0, r1, r0, 0, 0, r1, r0, 0]);
    // the residual R − LOO(cluster) of residual=loo is still reported, unused: e.g. a0's turn-0 cluster {a, b} → 1 − 0
    close(out.components.residualRaw[0], 1);
    // combine: the terms as they are, A = 1.1 · tanh((b + .65 r + t) / 1.1)
    const bb = Math.tanh(1 / (0.5 + EPS)); // scores [1, 0, 1, 0]: median 0, MAD 0
    const t = out.components.tree;
    const b = [bb, bb, 0, 0, bb, bb, 0, 0];
    closeAll(
      out.advantages,
      b.map((x, i) => 1.1 * Math.tanh((x + 0.65 * out.components.residual[i] + t[i]) / 1.1)),
    );
    // termScale=batch combines as A³: each term over its mean |·| + 1e-9
    const batchScaled = computeAdvantages('turnwise', marginBatch(), { ...one, termScale: 'batch' });
    const mb = (4 * bb) / 8 + 1e-9;
    const mr = (2 * r0 + 2 * r1) / 8 + 1e-9;
    const mt = t.reduce((s, x) => s + Math.abs(x), 0) / 8 + 1e-9;
    closeAll(
      batchScaled.advantages,
      b.map((x, i) => 1.1 * Math.tanh((x / mb + (0.65 * out.components.residual[i]) / mr + t[i] / mt) / 1.1)),
    );
    // the fixing turns get more credit than the winners' other turns
    assert.ok(out.advantages[1] > out.advantages[0] && out.advantages[5] > out.advantages[4]);
  });

  it(`turnwise: a task's credit does not depend on how many uniform groups share its batch; a small outcome difference stays small`, () => {
    const withUniform = (uniformTasks: number, scoreA: number) => {
      const trajs: Parameters<typeof batchOf>[0] = [
        ['p', 'a', scoreA, [LS, ['V:python3', 'W:fix.py']], [undefined, E1]],
        ['p', 'b', 0, [LS, CAT]],
        ['p', 'c', 0, [CAT, ['V:sed', 'W:-i']]],
        ['p', 'd', 0, [CAT, LS]],
      ];
      for (let q = 0; q < uniformTasks; q++)
        for (const id of ['w', 'x', 'y', 'z']) trajs.push([`u${q}`, `${id}${q}`, 0, [LS, ['V:submit']]]);
      return batchOf(trajs);
    };
    const alone = computeAdvantages('turnwise', withUniform(0, 1));
    const crowded = computeAdvantages('turnwise', withUniform(6, 1));
    closeAll(crowded.advantages.slice(0, 8), alone.advantages, 1e-12);
    // the uniform groups get nothing
    assert.ok(crowded.advantages.slice(8).every((x) => x === 0));
    // A³'s batch scale: the same task's credit grows with the uniform groups beside it
    const scaledAlone = computeAdvantages('turnwise', withUniform(0, 1), { termScale: 'batch' });
    const scaledCrowded = computeAdvantages('turnwise', withUniform(6, 1), { termScale: 'batch' });
    assert.ok(Math.abs(scaledCrowded.advantages[2]) > Math.abs(scaledAlone.advantages[2]) + 0.05);
    // a pass-rate difference of 0.05 (one test of twenty) in an otherwise failed group: under 0.15 of advantage on every turn,
    // where the batch scale makes it the largest credit it can give
    const small = computeAdvantages('turnwise', withUniform(6, 0.05));
    assert.ok(
      small.advantages.every((x) => Math.abs(x) < 0.15),
      JSON.stringify(small.advantages.slice(0, 8)),
    );
    const smallScaled = computeAdvantages('turnwise', withUniform(6, 0.05), { termScale: 'batch' });
    assert.ok(Math.max(...smallScaled.advantages) > 1, JSON.stringify(smallScaled.advantages.slice(0, 8)));
  });

  it('turnwise penalties=turn: in a group where nothing was fixed only the penalized turns move; stopping early earns nothing', () => {
    // four failed rollouts of one task, outcome 0.5 each. b repeated its read once (−0.05 in R),
    // d hit a format error at its last turn (−0.5 in R); a and c stopped after one read.
    const sigs = (n: number) => Array.from({ length: n }, (_, k) => (k === n - 1 ? ['V:submit'] : ['V:tw-cands', 'W:1']));
    const rows = batchOf([
      ['p', 'a', 0.5, sigs(2)],
      ['p', 'b', 0.45, sigs(4)],
      ['p', 'c', 0.5, sigs(2)],
      ['p', 'd', 0, sigs(5)],
    ]);
    rows[3].penalty = 0.05; // b's turn 1
    rows[12].penalty = 0.5; // d's turn 4 (rows: a 0–1, b 2–5, c 6–7, d 8–12)
    const out = computeAdvantages('turnwise', rows);
    const charged = new Map([
      [3, -0.05 / 0.5],
      [12, -0.5 / 0.5],
    ]);
    out.advantages.forEach((a, i) => close(a, charged.get(i) ?? 0, 1e-12));
    closeAll(out.components.penalty, out.advantages);
    // the same rows with the penalties left in R: the two short rollouts that were never charged
    // get full-size credit for stopping, and every turn of d's is pushed down, first one included
    const episode = computeAdvantages('turnwise', rows, { penalties: 'episode' });
    assert.ok(
      [0, 1, 6, 7].every((i) => episode.advantages[i] > 0.15),
      JSON.stringify(episode.advantages),
    );
    assert.ok([8, 9, 10, 11, 12].every((i) => episode.advantages[i] < -0.5));
  });

  it('turnwise penalties=turn: with a fix in the group, the terms see outcomes and each penalized turn pays its own penalty', () => {
    const rows = batchOf([
      ['p', 'a', 0.95 - 0.05, [['V:tw-cands', 'W:1'], ['V:tw-cands', 'W:1'], ['V:tw-apply']]],
      ['p', 'b', 0.5, [['V:tw-cands', 'W:1'], ['V:submit']]],
      ['p', 'c', 0.95, [['V:tw-cands', 'W:1'], ['V:tw-apply']]],
    ]);
    rows[1].penalty = 0.05;
    const outcome = rows.map((r) => ({ ...r, score: r.trajId === 'a' ? 0.95 : r.score }));
    const base = computeAdvantages('turnwise', outcome, { penalties: 'episode' });
    const out = computeAdvantages('turnwise', rows, { penaltyScale: 0.25 });
    closeAll(
      out.advantages,
      base.advantages.map((a, i) => a - (i === 1 ? 0.05 / 0.25 : 0)),
      1e-12,
    );
    closeAll(out.components.backbone, base.components.backbone, 1e-12);
    assert.throws(() => computeAdvantages('turnwise', rows, { penaltyScale: 0 }), /penaltyScale must be > 0/);
  });

  it(`turnwise margin, pool=cell: only the other rollouts' turns at the same k count`, () => {
    const out = computeAdvantages('turnwise', marginBatch(), { ...one, marginPool: 'cell' });
    // k = 0: a0 (LS): same b0 → 0; others b0 c0 d0 → 1/3: sh(1)·(−1/3). b0: same a0 → 1; others a0 c0 d0 → 2/3: sh(1)·(1/3)
    //        c0 (CAT): same d0 → 0; others → 1/3: −sh(1)/3. d0: same c0 → 1; others 2/3: sh(1)/3
    // k = 1: a1 (E1): same c1 → 1; others b1 c1 d1 → 1/3: sh(1)·(2/3); c1 likewise; b1 (CAT), d1 (LS): no other → 0
    const s1 = sh(1);
    closeAll(out.components.margin, [-s1 / 3, (2 * s1) / 3, s1 / 3, 0, -s1 / 3, (2 * s1) / 3, s1 / 3, 0]);
  });

  it(`turnwise margin, actionKey=cluster: A³'s forced clusters can lump a fix with a read`, () => {
    const out = computeAdvantages('turnwise', marginBatch(), { ...one, actionKey: 'cluster', marginPool: 'cell' });
    // k = 0: clusters {a, b} {c, d} (d = 0 pairs) → same margins as pool=cell above
    // k = 1 scope-1 tokens (intent + edit): a1 [python3 fix.py E N], b1 [cat f], c1 [sed -i E N], d1 [ls]:
    // d(a1, c1) = 2/4 merges first; K* = 2 → next tie at 1 in (i, j) order: (a1, b1) → {a, b, c}, {d}
    assert.deepEqual(
      [1, 3, 5, 7].map((i) => out.clusters!.scope1[i]),
      [0, 0, 0, 1],
    );
    // a1: same b1 0, c1 1 → .5; others (b c d) 1/3: sh(2)/6. b1: same a1, c1 → 1; others 2/3: sh(2)/3. c1 like a1. d1 alone → 0
    const s1 = sh(1);
    const s2 = sh(2);
    closeAll(out.components.margin, [-s1 / 3, s2 / 6, s1 / 3, s2 / 3, -s1 / 3, s2 / 6, s1 / 3, 0]);
    // with the task pool A³'s per-cell labels would be compared across turns: refused
    assert.throws(
      () => computeAdvantages('turnwise', marginBatch(), { ...one, actionKey: 'cluster' }),
      /actionKey=cluster needs marginPool=cell/,
    );
  });

  it(`turnwise margin: a turn's own reward never enters its margin; the action keys do not depend on rollout order`, () => {
    // a's rows are excluded from both means of a's own margins, so raising a's reward leaves them unchanged
    const rows = marginBatch();
    const base = computeAdvantages('turnwise', rows, one).components.margin;
    const up = computeAdvantages(
      'turnwise',
      rows.map((r) => (r.trajId === 'a' ? { ...r, score: 5 } : r)),
      one,
    ).components.margin;
    closeAll([up[0], up[1]], [base[0], base[1]]);
    // reversed rollout order: same margins per (traj, turn), even though LS and CAT rows tie everywhere
    const rev = ['d', 'c', 'b', 'a'].flatMap((t) => rows.filter((r) => r.trajId === t));
    const out = computeAdvantages('turnwise', rev, one).components.margin;
    const byKey = new Map(rows.map((r, i) => [`${r.trajId}/${r.turn}`, base[i]]));
    rev.forEach((r, i) => close(out[i], byKey.get(`${r.trajId}/${r.turn}`)!, 1e-12));
  });

  it('scope −1: a3 sees later turns (the released quirk), turnwise only the prefix', () => {
    // identical turn 0, different turn 1 → at turn 0, a3's scope −1 separates {a,b} from {c}, turnwise's does not
    const rows = batchOf([
      ['p', 'a', 1, [['V:ls'], ['V:fix']]],
      ['p', 'b', 1, [['V:ls'], ['V:fix']]],
      ['p', 'c', 0, [['V:ls'], ['V:rm', 'W:x']]],
    ]);
    const p = { scopes: [-1], scopeWeights: [1] };
    const a3 = computeAdvantages('a3', rows, p);
    const tw = computeAdvantages('turnwise', rows, p);
    // a3 turn 0, K* = 2: d(a,b) = 0 → {a,b}, {c}
    assert.deepEqual(
      [0, 2, 4].map((i) => a3.clusters!['scope-1'][i]),
      [0, 0, 1],
    );
    // turnwise turn 0: all three prefixes are [V:ls]; first pair (a,b) merges → {a,b}, {c} too, but a and c tie:
    // check the distance-based difference on the residual instead: c's LOO
    // a3: c alone → residual 0; turnwise: same labels here, so compare the turn-1 prefix clustering
    assert.deepEqual(
      [1, 3, 5].map((i) => tw.clusters!['scope-1'][i]),
      [0, 0, 1],
    );
    // turnwise at turn 0 never reads turn 1: changing c's turn-1 command leaves turn-0 residuals unchanged
    const rows2 = rows.map((r) => (r.trajId === 'c' && r.turn === 1 ? { ...r, signature: ['V:ls'] } : r));
    const tw2 = computeAdvantages('turnwise', rows2, p);
    closeAll(
      [0, 2, 4].map((i) => tw2.components.residualRaw[i]),
      [0, 2, 4].map((i) => tw.components.residualRaw[i]),
    );
    const a32 = computeAdvantages('a3', rows2, p);
    // a3 at turn 0 with c's commands now [ls, ls] vs [ls, fix]: d(a,b)=0 still merges first → same labels, but
    // the full-trajectory snippet of c changed; a3's turn-0 label set is identical, so test the turn-1 cell:
    assert.deepEqual(
      [1, 3, 5].map((i) => a32.clusters!['scope-1'][i]),
      [0, 0, 1],
    );
  });

  it('turnwise: edit tokens put rollouts that made the same code change into one cluster', () => {
    const edit = ['E:src/m.py::f', 'N:comparison_operator:<→<='];
    const rows = batchOf([
      ['p', 'a', 1, [['V:sed', 'W:-i', 'W:src/m.py']], [edit]],
      ['p', 'b', 0, [['V:ls', 'W:x']]],
      ['p', 'c', 1, [['V:python3', 'W:fix.py']], [edit]],
      ['p', 'd', 0, [['V:ls']]],
    ]);
    // m = 4 → K* = 2. Intent only (a3): d(b,d) = 1/2 merges first, then the ties at 1 in (i, j)
    // order: (a,b) → {a,b,d}, {c}: a and c apart
    const a3 = computeAdvantages('a3', rows, one).clusters!.scope1;
    assert.deepEqual(a3, [0, 0, 1, 0]);
    // with edit tokens a = [sed -i src/m.py E N], c = [python3 fix.py E N]: d(a,c) = 3/5 = .6;
    // d(b,d) = .5 merges first, then (a,c) → {a,c}, {b,d}
    const tw = computeAdvantages('turnwise', rows, one).clusters!.scope1;
    assert.deepEqual(tw, [0, 1, 0, 1]);
  });
});

describe('credit: invariants of every estimator', () => {
  // Random batch: 3 prompts × 4 rollouts × 3 turns, commands drawn from a small vocabulary.
  function randomRows(seed: number): TurnRow[] {
    let s = seed;
    const rnd = () => (s = (s * 48271) % 2147483647) / 2147483647;
    const verbs = ['ls', 'cat', 'sed', 'grep', 'pytest'];
    const rows: TurnRow[] = [];
    for (let p = 0; p < 3; p++) {
      for (let t = 0; t < 4; t++) {
        const score = Math.round(rnd() * 4) / 4;
        const turns = 1 + Math.floor(rnd() * 3);
        for (let k = 0; k < turns; k++) {
          const v = verbs[Math.floor(rnd() * verbs.length)];
          const w = `f${Math.floor(rnd() * 3)}`;
          rows.push({
            promptId: `p${p}`,
            trajId: `t${p}-${t}`,
            turn: k,
            bash: `${v} ${w}`,
            signature: [`V:${v}`, `W:${w}`],
            score,
            observation: k === 0 ? '' : `obs${Math.floor(rnd() * 2)}`,
            // what a teacher pass would have measured (gear, a2tgpo), from its own stream so the batch stays as it was
            reference: {
              studentLogp: [0, 1, 2].map((j) => -Math.abs(Math.sin(seed + p * 7 + t * 3 + k + j))),
              teacherLogp: [0, 1, 2].map((j) => -3 * Math.abs(Math.cos(seed * 2 + p + t * 5 + k * 3 + j))),
              refBefore: -10 + Math.sin(seed + p + t + k),
              refAfter: -10 + Math.sin(seed + p + t + k + 1) * 3,
            },
          });
        }
      }
    }
    return rows;
  }
  const all = ['grpo', 'rloo', 'gigpo', 'a3', 'turnwise', 'gear', 'a2tgpo'];

  for (const name of all) {
    it(`${name}: permuting trajectories within a group permutes the results`, () => {
      for (let seed = 1; seed <= 5; seed++) {
        const rows = randomRows(seed);
        const base = computeAdvantages(name, rows);
        // reverse trajectory order inside prompt p1 (rows of other prompts stay)
        const trajOrder = [...new Set(rows.map((r) => r.trajId))];
        const p1 = trajOrder.filter((t) => t.startsWith('t1-'));
        const rev = [...p1].reverse();
        const order = trajOrder.map((t) => (t.startsWith('t1-') ? rev[p1.indexOf(t)] : t));
        const permuted = order.flatMap((t) => rows.filter((r) => r.trajId === t));
        const out = computeAdvantages(name, permuted);
        const key = (r: TurnRow) => `${r.trajId}/${r.turn}`;
        const byKey = new Map(rows.map((r, i) => [key(r), base.advantages[i]]));
        // single linkage breaks exact distance ties by batch order, so a3/turnwise are compared
        // only on batches without ties among the permuted group; the others must match exactly
        permuted.forEach((r, i) => {
          if (name === 'a3' || name === 'turnwise') return;
          close(out.advantages[i], byKey.get(key(r))!, 1e-12);
        });
        if (name === 'a3' || name === 'turnwise') assertPermutedWithoutTies(name, rows, permuted, base, out);
      }
    });
  }

  it('turnwise: the action margin permutes exactly with the rollouts, ties included (no batch-order tie-breaking)', () => {
    for (let seed = 1; seed <= 5; seed++) {
      const rows = randomRows(seed);
      const base = computeAdvantages('turnwise', rows).components.margin;
      const trajOrder = [...new Set(rows.map((r) => r.trajId))].reverse();
      const permuted = trajOrder.flatMap((t) => rows.filter((r) => r.trajId === t));
      const out = computeAdvantages('turnwise', permuted).components.margin;
      const byKey = new Map(rows.map((r, i) => [`${r.trajId}/${r.turn}`, base[i]]));
      permuted.forEach((r, i) => close(out[i], byKey.get(`${r.trajId}/${r.turn}`)!, 1e-12));
      // and it is not trivially zero on these batches
      assert.ok(base.some((x) => Math.abs(x) > 1e-3));
    }
  });

  for (const name of ['grpo', 'a3', 'turnwise', 'gear', 'a2tgpo']) {
    it(`${name}: adding a constant to every score changes nothing`, () => {
      for (let seed = 1; seed <= 5; seed++) {
        const rows = randomRows(seed);
        const base = computeAdvantages(name, rows);
        const shifted = computeAdvantages(
          name,
          rows.map((r) => ({ ...r, score: r.score + 3.7 })),
        );
        closeAll(shifted.advantages, base.advantages, 1e-9);
      }
    });
  }

  for (const name of all) {
    it(`${name}: group of one → 0; NaN scores → 0 and excluded; zero spread → 0, no NaN`, () => {
      const rows: TurnRow[] = [
        { promptId: 'solo', trajId: 's', turn: 0, bash: 'ls', signature: ['V:ls'], score: 0.9, observation: '' },
        { promptId: 'solo', trajId: 's', turn: 1, bash: 'cat x', signature: ['V:cat', 'W:x'], score: 0.9, observation: 'o' },
        { promptId: 'flat', trajId: 'f1', turn: 0, bash: 'ls', signature: ['V:ls'], score: 0.5, observation: '' },
        { promptId: 'flat', trajId: 'f2', turn: 0, bash: 'cat', signature: ['V:cat'], score: 0.5, observation: '' },
        { promptId: 'flat', trajId: 'f3', turn: 0, bash: 'rm', signature: ['V:rm'], score: 0.5, observation: '' },
        { promptId: 'mix', trajId: 'n', turn: 0, bash: 'ls', signature: ['V:ls'], score: NaN, observation: '' },
        { promptId: 'mix', trajId: 'm1', turn: 0, bash: 'ls', signature: ['V:ls'], score: 1, observation: '' },
        { promptId: 'mix', trajId: 'm2', turn: 0, bash: 'cat', signature: ['V:cat'], score: 0, observation: '' },
      ];
      const out = computeAdvantages(name, rows);
      assert.ok(out.advantages.every(Number.isFinite), JSON.stringify(out.advantages));
      assert.deepEqual(out.advantages.slice(0, 6), [0, 0, 0, 0, 0, 0]);
      // the NaN row did not enter the baseline: the result equals the batch without it
      const without = computeAdvantages(
        name,
        rows.filter((r) => r.trajId !== 'n'),
      );
      closeAll(out.advantages.slice(6), without.advantages.slice(5), 1e-12);
      // the winner gets more credit than the loser (a3's lower median puts the loser of a pair at 0)
      assert.ok(out.advantages[6] > 0 && out.advantages[7] <= 0 && out.advantages[6] > out.advantages[7]);
      for (const comp of Object.values(out.components)) assert.ok(comp.every(Number.isFinite));
    });
  }
});

/**
 * a3/turnwise break exact distance ties by batch order (as single linkage must), so their
 * permutation check uses a batch whose distances never tie: trajectory t repeats its verb
 * L_t ∈ {1, 3, 7, 15} times, so every pairwise distance |L_i − L_j| / max is distinct.
 */
function assertPermutedWithoutTies(name: string, rows: TurnRow[], permuted: TurnRow[], base: EstimatorResult, out: EstimatorResult): void {
  void base;
  void out;
  void permuted;
  const lengths = [1, 3, 7, 15];
  const scores = new Map<string, number>();
  for (const r of rows) scores.set(r.trajId, r.score);
  const build = (order: number[]) =>
    order.flatMap((t) =>
      [0, 1, 2].map((k) => ({
        promptId: 'p',
        trajId: `t${t}`,
        turn: k,
        bash: '',
        signature: new Array(lengths[t]).fill(`V:v${k}`),
        score: [...scores.values()][t],
      })),
    );
  const a = build([0, 1, 2, 3]);
  const b = build([2, 0, 3, 1]);
  const ra = computeAdvantages(name, a);
  const rb = computeAdvantages(name, b);
  const byKey = new Map(a.map((r, i) => [`${r.trajId}/${r.turn}`, ra.advantages[i]]));
  b.forEach((r, i) => close(rb.advantages[i], byKey.get(`${r.trajId}/${r.turn}`)!, 1e-12));
}
