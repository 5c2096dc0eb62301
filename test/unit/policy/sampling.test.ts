// Sampling without a sort: sampleToken draws exactly what a sort of the vocabulary by log-prob
// (ties by id) followed by a running sum draws, for full and nucleus sampling, with ties.
import { strict as assert } from 'node:assert';
import { logSoftmax, sampleToken } from '../../../src/policy/policy';
import { SeededRandom } from '../../../src/policy/weights';

/** The definition: sort, cut the nucleus, walk the running sum. */
function sortedDraw(row: ArrayLike<number>, temperature: number, topP: number, rng: SeededRandom): number {
  const lp = logSoftmax(row, temperature);
  const order = Array.from(lp.keys()).sort((a, b) => lp[b] - lp[a]);
  let keep = order.length;
  if (topP < 1) {
    let cum = 0;
    for (let k = 0; k < order.length; k++) {
      cum += Math.exp(lp[order[k]]);
      if (cum >= topP) {
        keep = k + 1;
        break;
      }
    }
  }
  let mass = 0;
  for (let k = 0; k < keep; k++) mass += Math.exp(lp[order[k]]);
  let u = rng.next() * mass;
  for (let k = 0; k < keep; k++) {
    u -= Math.exp(lp[order[k]]);
    if (u <= 0) return order[k];
  }
  return order[keep - 1];
}

describe('policy/sampling: sampleToken without sorting the vocabulary', () => {
  it('draws what the sorted running sum draws (small vocabularies with ties, a 150k float32 row)', () => {
    const rows: ArrayLike<number>[] = [];
    for (let t = 0; t < 60; t++) {
      const r = new SeededRandom(t);
      rows.push(Array.from({ length: 3 + t * 5 }, () => Math.round((r.next() - 0.5) * 16) / 4)); // many ties
    }
    const big = new Float32Array(151936);
    const r = new SeededRandom(99);
    for (let i = 0; i < big.length; i++) big[i] = (r.next() - 0.5) * 6;
    big[7] = big[8];
    rows.push(big);
    for (const [i, row] of rows.entries()) {
      for (const [temperature, topP] of [[1, 1], [1, 0.6], [0.5, 0.9], [2, 1]]) {
        const got = sampleToken(row, temperature, topP, new SeededRandom(i)).id;
        assert.equal(got, sortedDraw(row, temperature, topP, new SeededRandom(i)), `row ${i}, temperature ${temperature}, top-p ${topP}`);
      }
    }
  });

  it('returns the token\'s log-prob and stays inside the nucleus', () => {
    const row = [5, 4, 3, 0, 0, -2];
    const lp = logSoftmax(row);
    for (let s = 0; s < 50; s++) {
      const { id, logprob } = sampleToken(row, 1, 0.7, new SeededRandom(s));
      assert.ok(id <= 1, `id ${id} is outside the 0.7 nucleus {0, 1}`);
      assert.equal(logprob, lp[id]);
    }
  });
});
