// Masked positions of the per-token training inputs must never change any output: the pure
// reference (test/support/reference-losses.ts) skips them, so the ONNX graph must too, whatever a caller
// leaves there (NaN or ±1e30 sentinels for "no value" are common). A graph that multiplies by the
// mask after exp() turns such values into Inf·0 = NaN and poisons every weight.
import * as assert from 'node:assert/strict';
import { PolicyTrainer, type TrainBatch } from '../../../src/policy/training/trainer';
import type { TrainLoss } from '../../../src/policy/training/graphs';
import { initWeights, SeededRandom } from '../../../src/policy/model/weights';
import { SMALL_CONFIG } from './helpers';

describe('policy/training: masked positions never change the step', function () {
  this.timeout(120000);
  const c = SMALL_CONFIG;
  const B = 2;
  const T = 7;
  const n = B * T;
  const r = new SeededRandom(3);
  const ids = Array.from({ length: n }, () => Math.floor(r.next() * c.vocab_size));
  const mask = Float32Array.from({ length: n }, (_, i) => (i % T >= 3 ? 1 : 0));
  const adv = Float32Array.from({ length: n }, () => r.next() * 2 - 1);
  const old = Float32Array.from({ length: n }, () => -3.7 + r.next() * 0.4);
  const ref = Float32Array.from({ length: n }, () => -3.7 + r.next() * 0.4);
  const junk = (a: Float32Array, v: number) => a.map((x, i) => (mask[i] ? x : v));

  for (const loss of ['ppo-token', 'gspo-seq'] as TrainLoss[]) {
    for (const [what, v] of [
      ['NaN', NaN],
      ['-1e30', -1e30],
      ['+1e30', 1e30],
    ] as const) {
      it(`${loss}: ${what} at masked positions of advantages/old_logp/ref_logp gives the clean step`, async () => {
        const hyper = { lr: 0.01, klCoef: 0.2, entCoef: 0.01 };
        const run = async (b: TrainBatch) => {
          const t = new PolicyTrainer(initWeights(c, 4, 0.2), undefined, { provider: 'cpu' });
          const [m] = await t.train({ loss, batch: B, seq: T }, [b], hyper);
          const w = t.weights().tensors;
          await t.dispose();
          return { m, w };
        };
        const clean = await run({ inputIds: ids, lossMask: mask, advantages: adv, oldLogp: old, refLogp: ref });
        const dirty = await run({ inputIds: ids, lossMask: mask, advantages: junk(adv, v), oldLogp: junk(old, v), refLogp: junk(ref, v) });
        for (const k of Object.keys(clean.m) as (keyof typeof clean.m)[]) {
          assert.ok(Number.isFinite(dirty.m[k]), `${k} is ${dirty.m[k]}`);
          assert.ok(Math.abs(dirty.m[k] - clean.m[k]) <= 1e-6 * Math.max(1, Math.abs(clean.m[k])), `${k}: ${dirty.m[k]} vs ${clean.m[k]}`);
        }
        const name = 'model.layers.0.self_attn.q_proj.weight';
        assert.deepEqual(Array.from(dirty.w.get(name)!), Array.from(clean.w.get(name)!));
      });
    }
  }
});

describe('policy/training: hyperparameters the graph cannot take', function () {
  this.timeout(60000);
  it('temperature 0 (or negative, or NaN) is refused with the reason before any run', async () => {
    const c = SMALL_CONFIG;
    const t = new PolicyTrainer(initWeights(c, 4, 0.2), undefined, { provider: 'cpu' });
    const before = new Map([...t.weights().tensors].map(([k, v]) => [k, Float32Array.from(v)]));
    const batch = {
      inputIds: [1, 2, 3, 4],
      lossMask: Float32Array.from([0, 1, 1, 1]),
      advantages: Float32Array.from([0, 1, 1, 1]),
      oldLogp: Float32Array.from([0, -5, -5, -5]),
    };
    for (const temperature of [0, -1, NaN]) {
      await assert.rejects(
        t.train({ loss: 'ppo-token', batch: 1, seq: 4 }, [batch], { lr: 0.01, temperature }),
        /training temperature must be a finite number > 0/,
      );
    }
    // Nothing was stepped: the weights are the initial ones.
    const after = t.weights().tensors;
    assert.ok(before.size > 5);
    for (const [name, w] of before) assert.deepEqual(after.get(name), w, name);
    await t.dispose();
  });
});
