import { strict as assert } from 'node:assert';
import { checkCreditBenchConfig, DEFAULT_CREDIT_BENCH, pearson, syntheticBatch, type CreditBenchConfig } from '../../../src/bench/credit';

/** Per trajectory: its rows' indices in turn order. */
function trajectories(rows: { trajId: string }[]): number[][] {
  const m = new Map<string, number[]>();
  rows.forEach((r, i) => {
    let l = m.get(r.trajId);
    if (!l) m.set(r.trajId, (l = []));
    l.push(i);
  });
  return [...m.values()];
}

describe('bench/credit synthetic environment', () => {
  const noiseless = (over: Partial<CreditBenchConfig> = {}) => ({ ...DEFAULT_CREDIT_BENCH, noise: 0, ...over });

  it('additive: without noise the reward is exactly the sum of the turn contributions; helpful, harmful and neutral turns all occur', () => {
    const { rows, contribution } = syntheticBatch(noiseless(), 3);
    assert.equal(rows.length, 8 * 8 * 10);
    for (const idx of trajectories(rows)) {
      const sum = idx.reduce((s, i) => s + contribution[i], 0);
      idx.forEach((i) => assert.ok(Math.abs(rows[i].score - sum) < 1e-12));
    }
    assert.deepEqual([...new Set(contribution)].sort(), [-0.3, 0, 0.15, 0.35]);
    // every turn that mattered changed a file, but so did some that did not (debug prints):
    // "changed a file" is not a free hint that a turn mattered
    rows.forEach((r, i) => contribution[i] !== 0 && assert.ok(r.editSig));
    assert.ok(rows.some((r, i) => r.editSig && contribution[i] === 0));
  });

  it('action sets: few has 3 types, many 10 with more effect sizes', () => {
    const few = syntheticBatch(noiseless({ actions: 'few' }), 4).contribution;
    assert.deepEqual([...new Set(few)].sort(), [-0.3, 0, 0.35]);
    const many = syntheticBatch(noiseless({ actions: 'many' }), 4).contribution;
    assert.deepEqual(
      [...new Set(many)].sort((a, b) => a - b),
      [-0.3, -0.1, 0, 0.15, 0.25, 0.35],
    );
  });

  it('stateful: a fix counts once (re-running it changes nothing and leaves no edit), a revert undoes everything, contributions still sum to the reward', () => {
    const { rows, contribution } = syntheticBatch(noiseless({ dynamics: 'stateful' }), 5);
    let repeatedFixes = 0;
    let reverts = 0;
    for (const idx of trajectories(rows)) {
      const sum = idx.reduce((s, i) => s + contribution[i], 0);
      idx.forEach((i) => assert.ok(Math.abs(rows[i].score - sum) < 1e-12));
      let value = 0;
      let editedSincePristine = false;
      const fixed = new Set<string>();
      for (const i of idx) {
        const r = rows[i];
        if (/^(sed -i 's\/n <= limit|python3 - <<|perl -pi)/.test(r.bash)) {
          // the main fix: +.35 the first time, then nothing and no edit tokens
          if (fixed.has('fix')) {
            assert.equal(contribution[i], 0);
            assert.equal(r.editSig, undefined);
            repeatedFixes++;
          } else assert.equal(contribution[i], 0.35);
          fixed.add('fix');
        }
        if (/^git (checkout|stash|restore)/.test(r.bash)) {
          // the workspace goes back to its start: the contribution cancels everything so far
          assert.ok(Math.abs(contribution[i] + value) < 1e-12);
          // it changes files (has edit tokens) exactly when something was edited since the start
          assert.equal(!!r.editSig, editedSincePristine);
          fixed.clear();
          editedSincePristine = false;
          reverts++;
        } else if (r.editSig) editedSincePristine = true;
        value += contribution[i];
      }
    }
    assert.ok(repeatedFixes > 0 && reverts > 0, `${repeatedFixes} repeated fixes, ${reverts} reverts`);
  });

  it('stateful: the policy reacts to the workspace (tests follow fixes more often than they open episodes)', () => {
    let afterFix = 0;
    let afterFixTests = 0;
    let before = 0;
    let beforeTests = 0;
    for (let seed = 1; seed <= 4; seed++) {
      const { rows } = syntheticBatch(noiseless({ dynamics: 'stateful' }), seed);
      for (const idx of trajectories(rows)) {
        let fixedYet = false;
        for (const i of idx) {
          const isTest = /pytest/.test(rows[i].bash);
          if (fixedYet) {
            afterFix++;
            if (isTest) afterFixTests++;
          } else {
            before++;
            if (isTest) beforeTests++;
          }
          if (/^(sed -i 's\/n <= limit|python3 - <<|perl -pi)/.test(rows[i].bash)) fixedYet = true;
          if (/^git (checkout|stash|restore)/.test(rows[i].bash)) fixedYet = false;
        }
      }
    }
    // test weight .25 of 1.13 before any fix (~.22); ×2 after (~.39 once explore is halved)
    assert.ok(afterFixTests / afterFix > 1.4 * (beforeTests / before), `${afterFixTests}/${afterFix} vs ${beforeTests}/${before}`);
  });

  it('is reproducible per seed and differs across seeds', () => {
    const a = syntheticBatch(DEFAULT_CREDIT_BENCH, 5);
    assert.deepEqual(syntheticBatch(DEFAULT_CREDIT_BENCH, 5), a);
    assert.notDeepEqual(
      syntheticBatch(DEFAULT_CREDIT_BENCH, 6).rows.map((r) => r.bash),
      a.rows.map((r) => r.bash),
    );
  });

  it('bad settings raise a TurnwiseError naming the setting', () => {
    assert.throws(() => checkCreditBenchConfig({ ...DEFAULT_CREDIT_BENCH, group: 0 }), /group must be a positive integer/);
    assert.throws(() => checkCreditBenchConfig({ ...DEFAULT_CREDIT_BENCH, actions: 'all' as never }), /unknown action set "all"/);
    assert.throws(() => checkCreditBenchConfig({ ...DEFAULT_CREDIT_BENCH, dynamics: 'markov' as never }), /unknown dynamics "markov"/);
    assert.throws(() => checkCreditBenchConfig({ ...DEFAULT_CREDIT_BENCH, noise: -1 }), /noise must be ≥ 0/);
  });

  it('pearson by hand', () => {
    // x = [1,2,3], y = [2,4,7]: mx 2, my 13/3; sxy = (−1)(−7/3) + 0 + (1)(8/3) = 5; sxx = 2; syy = 49/9 + 1/9 + 64/9 = 114/9
    assert.ok(Math.abs(pearson([1, 2, 3], [2, 4, 7]) - 5 / Math.sqrt(2 * (114 / 9))) < 1e-12);
    assert.equal(pearson([1, 1], [2, 3]), 0);
  });
});
