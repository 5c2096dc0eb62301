import * as assert from 'node:assert/strict';
import { mean, median, signFlipP, signTestP, std, stdUnbiased } from '../../../src/core/stats';
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

  it('signFlipP: the exact sign-flip test by task, against enumeration; ±1 differences give the sign test', () => {
    assert.equal(signFlipP([]), null);
    assert.equal(signFlipP([0, 0]), null);
    // Every d = ±1: the sign test on the same counts.
    assert.ok(Math.abs(signFlipP([1, 1, 1, 1, 1])! - signTestP(5, 0)!) < 1e-12);
    assert.ok(Math.abs(signFlipP([1, -1, -1, -1, -1, -1, -1, -1, 0])! - signTestP(1, 7)!) < 1e-12);
    // One task that went 0 of 8 → 8 of 8 among 15 that did not move: the sign test over its 8
    // samples says p = 2/256; by task it is one cluster, p = 1.
    assert.ok(Math.abs(signTestP(8, 0)! - 2 / 256) < 1e-12);
    assert.equal(signFlipP([8, ...Array(15).fill(0)]), 1);
    // Against brute-force enumeration of the 2^n patterns.
    const brute = (d: number[]) => {
      const obs = Math.abs(d.reduce((a, x) => a + x, 0));
      let hit = 0;
      for (let m = 0; m < 2 ** d.length; m++) {
        const s = d.reduce((a, x, i) => a + (m & (1 << i) ? -x : x), 0);
        if (Math.abs(s) >= obs) hit++;
      }
      return hit / 2 ** d.length;
    };
    for (const d of [
      [3, 1, 2, -1, 4],
      [5, 5, 5, -2, 1, 1, 1, 0, 2],
      [2, -2],
      [7, 6, 5, 4, 3, 2, 1, 1, 1, 1, 2, 3],
    ]) {
      assert.ok(Math.abs(signFlipP(d)! - brute(d.filter((x) => x !== 0))) < 1e-12, JSON.stringify(d));
    }
    assert.throws(() => signFlipP([0.5]), /integer/);
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
