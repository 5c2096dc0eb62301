// Sampling without a sort: sampleToken draws exactly what a sort of the vocabulary by log-prob
// (ties by id) followed by a running sum draws, for full and nucleus sampling, with ties.
import { strict as assert } from 'node:assert';
import { logSoftmax, sampleToken } from '../../../src/policy/inference/sampling';
import { SeededRandom } from '../../../src/policy/model/weights';
import { Graph, OnnxSession, toModelProto } from '../../../src/onnx';
import { sampleRows } from '../../../src/policy/model/graphs';

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
      for (const [temperature, topP] of [
        [1, 1],
        [1, 0.6],
        [0.5, 0.9],
        [2, 1],
      ]) {
        const got = sampleToken(row, temperature, topP, new SeededRandom(i)).id;
        assert.equal(got, sortedDraw(row, temperature, topP, new SeededRandom(i)), `row ${i}, temperature ${temperature}, top-p ${topP}`);
      }
    }
  });

  it("returns the token's log-prob and stays inside the nucleus", () => {
    const row = [5, 4, 3, 0, 0, -2];
    const lp = logSoftmax(row);
    for (let s = 0; s < 50; s++) {
      const { id, logprob } = sampleToken(row, 1, 0.7, new SeededRandom(s));
      assert.ok(id <= 1, `id ${id} is outside the 0.7 nucleus {0, 1}`);
      assert.equal(logprob, lp[id]);
    }
  });
});

describe('policy/sampling: sampleRows, the draw inside a decode graph', () => {
  // The graph's draw against its definition computed here in float64: the first token, in
  // vocabulary order, whose running probability reaches u of the total; greedy rows the first
  // most likely token; log-probs as logSoftmax gives them.
  const run = async (rows: Float32Array[], temperature: number[], uniform: number[]) => {
    const V = rows[0].length;
    const N = rows.length;
    const g = Graph.create('sample_rows');
    const logits = g.input('logits', 'float32', ['N', V]);
    const out = sampleRows(g, logits, g.input('t', 'float32', ['N']), g.input('u', 'float32', ['N']));
    g.output(out.ids, 'ids');
    g.output(out.logprobs, 'lp');
    const s = await OnnxSession.create(toModelProto(g), { provider: 'cpu' });
    const data = new Float32Array(N * V);
    rows.forEach((r, i) => data.set(r, i * V));
    const res = await s.run({
      logits: { dtype: 'float32', dims: [N, V], data },
      t: { dtype: 'float32', dims: [N], data: Float32Array.from(temperature) },
      u: { dtype: 'float32', dims: [N], data: Float32Array.from(uniform) },
    });
    await s.release();
    return { ids: Array.from(res.ids.data as BigInt64Array, Number), lp: Array.from(res.lp.data as Float32Array) };
  };
  const rowOf = (seed: number, V: number, spread: number) => {
    const r = new SeededRandom(seed);
    return Float32Array.from({ length: V }, () => (r.next() - 0.5) * spread);
  };

  it("draws the first token whose running probability reaches u, with the log-prob at the row's temperature", async () => {
    const V = 300;
    const rows: Float32Array[] = [];
    const t: number[] = [];
    const u: number[] = [];
    const r = new SeededRandom(5);
    for (let i = 0; i < 64; i++) {
      rows.push(rowOf(i, V, 12));
      t.push([0.5, 1, 1.7][i % 3]);
      u.push(r.next());
    }
    const got = await run(rows, t, u);
    let near = 0;
    rows.forEach((row, i) => {
      const lp = logSoftmax(row, t[i]);
      let cum = 0;
      let want = V - 1;
      let gap = Infinity;
      for (let k = 0; k < V; k++) {
        cum += Math.exp(lp[k]);
        gap = Math.min(gap, Math.abs(cum - u[i]));
        if (cum >= u[i]) {
          want = k;
          break;
        }
      }
      // float32 running sums may cross a boundary this close to u the other way
      if (gap < 1e-5) near++;
      else assert.equal(got.ids[i], want, `row ${i}: u ${u[i]}`);
      assert.ok(Math.abs(got.lp[i] - lp[got.ids[i]]) < 1e-4, `row ${i}: log-prob ${got.lp[i]} vs ${lp[got.ids[i]]}`);
    });
    assert.ok(near < 4, `${near} rows too close to call`);
  });

  it('greedy rows (temperature 0) take the first most likely token whatever u is, as sampleToken does', async () => {
    const V = 151936;
    const rows = [rowOf(1, V, 20), rowOf(2, V, 20), Float32Array.from({ length: V }, (_, k) => (k === 7 || k === 900 ? 3 : 0))];
    const got = await run(rows, [0, 0, 0], [0.99, 0, 0.5]);
    rows.forEach((row, i) => {
      const want = sampleToken(row, 0, 1, new SeededRandom(0));
      assert.equal(got.ids[i], want.id, `row ${i}`);
      // float32 sums over 150k words against the host's float64 ones
      assert.ok(Math.abs(got.lp[i] - want.logprob) < 1e-3, `row ${i}: ${got.lp[i]} vs ${want.logprob}`);
    });
    assert.equal(got.ids[2], 7);
  });

  it('a draw of 0 or of nearly 1 stays on tokens of non-zero probability; frequencies follow the softmax', async () => {
    const row = Float32Array.from([-200, 1, -200, 2, 0.5, -200]); // exp(-200 - ·) underflows to 0 in float32
    const edges = await run([row, row], [1, 1], [0, 0.9999999]);
    assert.deepEqual(edges.ids, [1, 4]);
    const n = 4000;
    const r = new SeededRandom(3);
    const got = await run(
      Array.from({ length: n }, () => row),
      new Array(n).fill(1),
      Array.from({ length: n }, () => r.next()),
    );
    const lp = logSoftmax(row, 1);
    for (const k of [1, 3, 4]) {
      const p = Math.exp(lp[k]);
      const seen = got.ids.filter((id) => id === k).length / n;
      assert.ok(Math.abs(seen - p) < 4 * Math.sqrt((p * (1 - p)) / n), `token ${k}: ${seen} vs ${p}`);
    }
    assert.equal(got.ids.filter((id) => row[id] === -200).length, 0);
  });
});
