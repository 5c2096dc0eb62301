// The time budget's stopping rule (maxMinutes): after an iteration, another is started only if it
// and the evaluation that would end the run fit before the budget's end.
import * as assert from 'node:assert/strict';
import { fitsAnotherIteration } from '../../../src/train/run';

describe('train/run: the time budget', () => {
  // 400 s left; evaluations take up to 271 s, iterations up to 128 s of work (the inflection
  // repository's figures under bench transfer, which evaluates only at the ends).
  const b = { now: 0, end: 400_000, evalMs: 271_000, slowestMs: 128_000 };

  it('between evaluations, another iteration fits when it and one evaluation do', () => {
    assert.equal(fitsAnotherIteration({ ...b, workMs: 66_000, evaluatedNow: false }), true, '128 + 271 = 399 s of 400');
    assert.equal(fitsAnotherIteration({ ...b, end: 398_000, workMs: 66_000, evaluatedNow: false }), false, 'not in 398');
    // The iteration just done counts as a sample of the next when it was the longest.
    assert.equal(fitsAnotherIteration({ ...b, workMs: 130_000, evaluatedNow: false }), false, '130 + 271 > 400');
  });

  it('an iteration evaluated anyway (evalEvery) costs its evaluation first', () => {
    assert.equal(fitsAnotherIteration({ ...b, workMs: 66_000, evaluatedNow: true }), false, '271 + 128 + 271 > 400');
    assert.equal(fitsAnotherIteration({ ...b, end: 670_000, workMs: 66_000, evaluatedNow: true }), true, '= 670');
  });

  it('no evaluation yet and no iteration yet: only the work counts', () => {
    assert.equal(fitsAnotherIteration({ now: 0, end: 10, evalMs: 0, slowestMs: 0, workMs: 10, evaluatedNow: false }), true);
    assert.equal(fitsAnotherIteration({ now: 1, end: 10, evalMs: 0, slowestMs: 0, workMs: 10, evaluatedNow: false }), false);
  });
});
