import * as assert from 'node:assert/strict';
import { median } from '../../../src/core/stats';

describe('core/stats', () => {
  it('median: middle value, mean of the two middle ones, NaN when empty; input untouched', () => {
    const xs = [5, 1, 3];
    assert.equal(median(xs), 3);
    assert.deepEqual(xs, [5, 1, 3]);
    assert.equal(median([4, 1, 3, 2]), 2.5);
    assert.ok(Number.isNaN(median([])));
  });
});
