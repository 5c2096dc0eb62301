import * as assert from 'node:assert/strict';
import { mean, median, signTestP, std, stdUnbiased } from '../../../src/core/stats';
import { ESTIMATOR_NAMES } from '../../../src/credit/names';
import { estimatorNames } from '../../../src/credit';

describe('core/stats', () => {
  it('median: middle value, mean of the two middle ones, NaN when empty; input untouched', () => {
    const xs = [5, 1, 3];
    assert.equal(median(xs), 3);
    assert.deepEqual(xs, [5, 1, 3]);
    assert.equal(median([4, 1, 3, 2]), 2.5);
    assert.ok(Number.isNaN(median([])));
  });

  it('signTestP: exact two-sided binomial tail, symmetric, 1 at a tie, null with no change', () => {
    assert.equal(signTestP(0, 0), null);
    assert.equal(signTestP(3, 3), 1);
    assert.ok(Math.abs(signTestP(5, 0)! - 2 / 32) < 1e-12); // 2 × (1/2)^5
    assert.ok(Math.abs(signTestP(1, 7)! - (2 * (1 + 8)) / 256) < 1e-12); // 2 × P(X ≤ 1), n = 8
    assert.equal(signTestP(7, 1), signTestP(1, 7));
    assert.ok(signTestP(600, 400)! < 1e-9 && signTestP(600, 400)! > 0, 'large n stays finite');
  });

  it('mean, std (population) and stdUnbiased (n − 1) skip non-finite values; empty and single-value cases are defined', () => {
    assert.equal(mean([1, 2, 3, NaN]), 2);
    assert.ok(Number.isNaN(mean([])));
    assert.ok(Math.abs(std([1, 3]) - 1) < 1e-12);
    assert.ok(Math.abs(stdUnbiased([1, 3, Infinity]) - Math.SQRT2) < 1e-12);
    assert.equal(stdUnbiased([5]), 0);
    assert.equal(stdUnbiased([]), 0);
  });

  it('the registry holds exactly the listed estimators, in the listed order', () => {
    assert.deepEqual(estimatorNames(), [...ESTIMATOR_NAMES]);
  });
});
