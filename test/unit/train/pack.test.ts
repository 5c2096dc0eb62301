// Training rows as the trainer gets them. RL minibatches (packMinibatches): the loss mask,
// advantages and old log-probs sit on the action tokens only, padding rows carry no loss, shapes
// come from a few fixed buckets. Warm-start rows (packRows): examples packed whole into rows with
// a segment id each, weights and the action mask where the example put them.
import * as assert from 'node:assert/strict';
import { packMinibatches } from '../../../src/train/run';
import { packRows } from '../../../src/train/warmstart';

const row = (len: number, actionLen: number, advantage: number, base = 10) => ({
  ids: Array.from({ length: len }, (_, i) => base + i),
  actionStart: len - actionLen,
  logprobs: Array.from({ length: actionLen }, (_, i) => -(i + 1) / 10),
  advantage,
});

describe('train/run: packMinibatches', () => {
  it('5 rows in 2 minibatches: B=3 each, the missing row is padding without loss', () => {
    const rows = [row(40, 5, 1), row(100, 8, -0.5), row(20, 3, 2), row(130, 4, 0.25), row(60, 6, -1)];
    const mbs = packMinibatches(rows, 2);
    assert.equal(mbs.length, 2);
    assert.deepEqual(mbs.map((m) => m.B), [3, 3]);
    assert.deepEqual(mbs.map((m) => m.T), [128, 256]);
    let r = 0;
    for (const { batch, B, T } of mbs) {
      for (const k of ['inputIds', 'attentionMask', 'lossMask', 'advantages', 'oldLogp'] as const) assert.equal((batch[k] as ArrayLike<number>).length, B * T, k);
      for (let b = 0; b < B; b++, r++) {
        const at = (a: ArrayLike<number> | undefined, j: number) => a![b * T + j];
        if (r >= rows.length) {
          // Padding row: one attended token, nothing in the loss.
          for (let j = 0; j < T; j++) {
            assert.equal(at(batch.attentionMask, j), j === 0 ? 1 : 0);
            assert.equal(at(batch.lossMask, j), 0);
          }
          continue;
        }
        const src = rows[r];
        for (let j = 0; j < T; j++) {
          const real = j < src.ids.length;
          const action = real && j >= src.actionStart;
          assert.equal(at(batch.inputIds, j), real ? src.ids[j] : 0);
          assert.equal(at(batch.attentionMask, j), real ? 1 : 0);
          assert.equal(at(batch.lossMask, j), action ? 1 : 0, `row ${r} token ${j}`);
          assert.equal(at(batch.advantages, j), action ? src.advantage : 0);
          assert.equal(at(batch.oldLogp, j), action ? src.logprobs[j - src.actionStart] : 0);
        }
      }
    }
  });

  it('reference log-probs are taken position by position on action tokens', () => {
    const rows = [row(12, 4, 1), row(9, 2, -1)];
    const ref = rows.map((x) => Float32Array.from(x.ids, (_, j) => -j));
    const [mb] = packMinibatches(rows, 1, ref);
    assert.ok(mb.batch.refLogp);
    for (let b = 0; b < 2; b++) {
      for (let j = 0; j < mb.T; j++) {
        const want = j >= rows[b].actionStart && j < rows[b].ids.length ? -j : 0;
        assert.equal(mb.batch.refLogp![b * mb.T + j], want);
      }
    }
    assert.equal(packMinibatches(rows, 1)[0].batch.refLogp, undefined);
  });

  it('more minibatches than rows: one row each; a row over the largest bucket keeps its length', () => {
    const mbs = packMinibatches([row(10, 2, 1), row(1100, 10, 1)], 8);
    assert.deepEqual(mbs.map((m) => [m.B, m.T]), [[1, 128], [1, 1100]]);
  });
});

describe('train/warmstart: packRows', () => {
  const ex = (len: number, actionFrom: number, v: number) => ({ ids: Array(len).fill(v), weights: Array.from({ length: len }, (_, i) => (i >= actionFrom ? 1 : 0.3)) });

  it('examples packed whole, one segment id each, weights and action mask carried', () => {
    const exs = [ex(50, 40, 1), ex(30, 10, 2), ex(14, 5, 3), ex(20, 0, 4)];
    const { batch, tokens, used } = packRows(exs, 2, 64);
    assert.equal(used, 4);
    assert.equal(tokens, 114);
    const ids = batch.inputIds as number[];
    const seg = batch.segmentIds as number[];
    const w = batch.lossMask as number[];
    const act = batch.actionMask as number[];
    for (const a of [ids, seg, w, act]) assert.equal(a.length, 128);
    // Each example is one contiguous run of one segment id, never split across rows.
    for (let s = 1; s <= 4; s++) {
      const at = seg.map((x, i) => (x === s ? i : -1)).filter((i) => i >= 0);
      assert.equal(at.length, exs[s - 1].ids.length, `segment ${s}`);
      assert.equal(at[at.length - 1] - at[0] + 1, at.length, 'contiguous');
      assert.equal(Math.floor(at[0] / 64), Math.floor(at[at.length - 1] / 64), 'one row');
      at.forEach((i, k) => {
        assert.equal(ids[i], s);
        assert.equal(w[i], exs[s - 1].weights[k]);
        assert.equal(act[i], exs[s - 1].weights[k] >= 1 ? 1 : 0);
      });
    }
    // Padding: segment 0, no weight.
    for (let i = 0; i < 128; i++) if (seg[i] === 0) assert.equal(w[i], 0);
  });

  it('an example that fits nowhere is skipped; one longer than a row is cut to the row', () => {
    const r = packRows([ex(60, 0, 1), ex(60, 0, 2), ex(4, 0, 3)], 1, 64);
    assert.equal(r.used, 2);
    assert.equal(r.tokens, 64);
    assert.ok(!(r.batch.inputIds as number[]).includes(2), 'the example that did not fit is not there at all');
    const long = packRows([ex(100, 0, 5)], 1, 64);
    assert.equal(long.tokens, 64);
    assert.ok((long.batch.segmentIds as number[]).every((s) => s === 1));
  });
});
