import { strict as assert } from 'node:assert';
import { DEFAULT_CREDIT_BENCH, pearson, syntheticBatch } from '../../../src/credit/bench';

describe('credit/bench synthetic environment', () => {
  it('without noise the reward is exactly the sum of the turn contributions; helpful, harmful and neutral turns all occur', () => {
    const { rows, contribution } = syntheticBatch({ ...DEFAULT_CREDIT_BENCH, noise: 0 }, 3);
    assert.equal(rows.length, 8 * 8 * 10);
    const byTraj = new Map<string, number>();
    rows.forEach((r, i) => byTraj.set(r.trajId, (byTraj.get(r.trajId) ?? 0) + contribution[i]));
    rows.forEach((r) => assert.ok(Math.abs(r.score - byTraj.get(r.trajId)!) < 1e-12));
    assert.deepEqual([...new Set(contribution)].sort(), [-0.3, 0, 0.15, 0.35]);
    // edit tokens only on turns that change files
    rows.forEach((r, i) => assert.equal(!!r.editSig, contribution[i] !== 0));
  });
  it('is reproducible per seed and differs across seeds', () => {
    const a = syntheticBatch(DEFAULT_CREDIT_BENCH, 5);
    assert.deepEqual(syntheticBatch(DEFAULT_CREDIT_BENCH, 5), a);
    assert.notDeepEqual(syntheticBatch(DEFAULT_CREDIT_BENCH, 6).rows.map((r) => r.bash), a.rows.map((r) => r.bash));
  });
  it('pearson by hand', () => {
    // x = [1,2,3], y = [2,4,7]: mx 2, my 13/3; sxy = (−1)(−7/3) + 0 + (1)(8/3) = 5; sxx = 2; syy = 49/9 + 1/9 + 64/9 = 114/9
    assert.ok(Math.abs(pearson([1, 2, 3], [2, 4, 7]) - 5 / Math.sqrt(2 * (114 / 9))) < 1e-12);
    assert.equal(pearson([1, 1], [2, 3]), 0);
  });
});
