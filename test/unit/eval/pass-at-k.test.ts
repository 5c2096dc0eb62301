// PASS@(k,T) against values worked out by hand.
import * as assert from 'node:assert/strict';
import { passAtK } from '../../../src/core/stats';
import { passAtKT } from '../../../src/eval/pass-at-k';

const ep = (taskId: string, resolved: boolean, actions: number) => ({
  taskId,
  turns: [...Array.from({ length: actions }, () => ({ action: 'x' })), { action: 'submit' }],
  reward: { resolved },
  failure: undefined,
});

describe('eval/pass-at-k: PASS@(k,T)', () => {
  it('passAtK is 1 − C(n−c,k)/C(n,k)', () => {
    assert.equal(passAtK(4, 0, 1), 0);
    assert.equal(passAtK(4, 1, 1), 0.25);
    // 1 − C(3,2)/C(4,2) = 1 − 3/6
    assert.ok(Math.abs(passAtK(4, 1, 2) - 0.5) < 1e-12);
    // 1 − C(2,2)/C(4,2) = 1 − 1/6
    assert.ok(Math.abs(passAtK(4, 2, 2) - 5 / 6) < 1e-12);
    assert.equal(passAtK(4, 3, 2), 1, 'fewer failures than draws: certain');
    assert.ok(Number.isNaN(passAtK(2, 1, 3)));
    // Large n does not overflow: 1 − C(900,10)/C(1000,10).
    let want = 1;
    for (let i = 0; i < 10; i++) want *= (900 - i) / (1000 - i);
    assert.ok(Math.abs(passAtK(1000, 100, 10) - (1 - want)) < 1e-12);
  });

  it('averages over tasks, per k and per turn budget T', () => {
    // Task a: 4 samples, resolved after 1 and after 3 actions. Task b: 4 samples, none resolved.
    const s = [
      ep('a', true, 1),
      ep('a', true, 3),
      ep('a', false, 4),
      ep('a', false, 4),
      ep('b', false, 2),
      ep('b', false, 4),
      ep('b', false, 4),
      ep('b', false, 4),
    ];
    const p = passAtKT(s, 4);
    assert.deepEqual(Object.keys(p), ['1', '2', '3', '4']);
    assert.deepEqual(Object.keys(p['1']), ['1', '2', '3', '4']);
    // T = 1: task a has c = 1 → pass@1 = 1/4, pass@2 = 1/2; task b 0: means 1/8 and 1/4.
    assert.equal(p['1']['1'], 0.125);
    assert.ok(Math.abs(p['2']['1'] - 0.25) < 1e-12);
    // T = 3: task a has c = 2 → pass@1 = 1/2, pass@2 = 5/6: means 1/4 and 5/12.
    assert.equal(p['1']['3'], 0.25);
    assert.ok(Math.abs(p['2']['3'] - 5 / 12) < 1e-12);
    // k = 4 at T = 4: task a certain, task b never.
    assert.equal(p['4']['4'], 0.5);
    // Monotone in k and in T.
    for (let k = 1; k <= 4; k++) for (let T = 2; T <= 4; T++) assert.ok(p[k][T] >= p[k][T - 1]);
    assert.deepEqual(passAtKT([], 4), {});
  });

  it('k goes up to the fewest samples any task has; a failed episode is not resolved', () => {
    const s = [ep('a', true, 1), ep('a', true, 1), ep('b', true, 1), { ...ep('b', true, 1), failure: 'sandbox died' }, ep('b', false, 1)];
    const p = passAtKT(s, 2);
    assert.deepEqual(Object.keys(p), ['1', '2']);
    // a: n 2, c 2 → 1; b: n 3, c 1 → pass@1 1/3, pass@2 2/3.
    assert.ok(Math.abs(p['1']['1'] - (1 + 1 / 3) / 2) < 1e-12);
    assert.ok(Math.abs(p['2']['1'] - (1 + 2 / 3) / 2) < 1e-12);
  });
});
