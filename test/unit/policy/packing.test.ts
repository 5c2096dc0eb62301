// Packed rows (several examples per row, attention and positions per example), per-step learning
// rates, and lossMask as a per-token weight with the action-token loss reported on its own.
import * as assert from 'node:assert/strict';
import { referenceLogits, logSoftmaxRows } from '../../support/reference-forward';
import { PolicyTrainer, warmupCosineLr, type StepMetrics, type TrainBatch, type TrainHyper } from '../../../src/policy/training/trainer';
import type { TrainLoss } from '../../../src/policy/training/graphs';
import { initWeights, SeededRandom, type PolicyWeights } from '../../../src/policy/model/weights';
import { maxAbsDiff, SMALL_CONFIG } from './helpers';

const c = SMALL_CONFIG;

interface Example {
  ids: number[];
  /** Loss weight per token (index 0 is never trained). */
  w: number[];
  adv: number[];
  old: number[];
}

function example(r: SeededRandom, len: number, prompt: number): Example {
  return {
    ids: Array.from({ length: len }, () => Math.floor(r.next() * c.vocab_size)),
    w: Array.from({ length: len }, (_, t) => (t >= prompt ? 1 : 0.3)),
    adv: Array.from({ length: len }, () => r.next() * 2 - 1),
    old: Array.from({ length: len }, () => -3.7 + r.next() * 0.4),
  };
}

/** Examples as rows of length T, right-padded (attentionMask 0). */
function separateRows(xs: Example[], T: number): TrainBatch {
  const pad = (a: number[], fill: number) => [...a, ...new Array(T - a.length).fill(fill)];
  return {
    inputIds: xs.flatMap((x) => pad(x.ids, 0)),
    attentionMask: xs.flatMap((x) =>
      pad(
        x.ids.map(() => 1),
        0,
      ),
    ),
    lossMask: xs.flatMap((x) => pad(x.w, 0)),
    advantages: xs.flatMap((x) => pad(x.adv, 0)),
    oldLogp: xs.flatMap((x) => pad(x.old, 0)),
  };
}

/** Examples packed into rows of length T (each inner list one row), segment ids 1, 2, … per row. */
function packedRows(rows: Example[][], T: number): TrainBatch {
  const out = {
    inputIds: [] as number[],
    segmentIds: [] as number[],
    lossMask: [] as number[],
    advantages: [] as number[],
    oldLogp: [] as number[],
  };
  for (const xs of rows) {
    const n = xs.reduce((s, x) => s + x.ids.length, 0);
    assert.ok(n <= T);
    xs.forEach((x, k) => {
      out.inputIds.push(...x.ids);
      out.segmentIds.push(...x.ids.map(() => k + 1));
      // The first token's weight is non-zero on purpose: the trainer must ignore it, as column 0 of a row.
      out.lossMask.push(...x.w.map((w, t) => (t === 0 ? 1 : w)));
      out.advantages.push(...x.adv);
      out.oldLogp.push(...x.old);
    });
    for (let t = n; t < T; t++) {
      out.inputIds.push(7);
      out.segmentIds.push(0);
      out.lossMask.push(1); // padding carries no loss whatever its weight
      out.advantages.push(0);
      out.oldLogp.push(0);
    }
  }
  return out;
}

async function trainOnce(w: PolicyWeights, loss: TrainLoss, B: number, T: number, batches: TrainBatch[], hyper: TrainHyper) {
  const t = new PolicyTrainer(w, undefined, { provider: 'cpu' });
  const metrics = await t.train({ loss, batch: B, seq: T }, batches, hyper);
  const weights = t.weights().tensors;
  await t.dispose();
  return { metrics, weights };
}

function assertSameWeights(a: Map<string, Float32Array>, b: Map<string, Float32Array>, tol: number) {
  let worst = 0;
  for (const [name, x] of a) {
    const d = maxAbsDiff(x, b.get(name)!);
    worst = Math.max(worst, d);
    assert.ok(d < tol, `${name}: ${d}`);
  }
  return worst;
}

function assertSameMetrics(a: StepMetrics[], b: StepMetrics[], tol: number) {
  assert.equal(a.length, b.length);
  a.forEach((m, k) => {
    for (const key of Object.keys(m) as (keyof StepMetrics)[]) {
      assert.ok(Math.abs(m[key] - b[k][key]) < tol * Math.max(1, Math.abs(b[k][key])), `step ${k} ${key}: ${m[key]} vs ${b[k][key]}`);
    }
  });
}

describe('policy/trainer: packed rows', function () {
  this.timeout(120000);
  const w = initWeights(c, 17, 0.3);
  const r = new SeededRandom(3);
  const e1 = example(r, 5, 2);
  const e2 = example(r, 8, 3);
  const e3 = example(r, 6, 1);
  const e4 = example(r, 7, 4);

  for (const loss of ['sft', 'ppo-token'] as TrainLoss[]) {
    it(`${loss}: a row packing two examples gives the loss, metrics, gradients and update of the two as separate rows`, async () => {
      // eps 1 and lr 1 make AdamW's first update g/(|g| + 1): the update is (nearly) the gradient
      // itself, so equal updates mean equal gradients, not just equal signs.
      const hyper: TrainHyper = { lr: 1, eps: 1, maxGradNorm: 0 };
      const sep = await trainOnce(w, loss, 2, 8, [separateRows([e1, e2], 8)], hyper);
      const packed = await trainOnce(w, loss, 1, 16, [packedRows([[e1, e2]], 16)], hyper);
      assertSameMetrics(packed.metrics, sep.metrics, 1e-5);
      assert.ok(sep.metrics[0].grad_norm > 1e-3, 'a real gradient');
      assertSameWeights(packed.weights, sep.weights, 1e-5);
      // The ordinary optimizer settings too (first AdamW step ≈ lr·sign(g)).
      const h2: TrainHyper = { lr: 1e-3 };
      const a = await trainOnce(w, loss, 2, 8, [separateRows([e1, e2], 8)], h2);
      const b = await trainOnce(w, loss, 1, 16, [packedRows([[e1, e2]], 16)], h2);
      assertSameWeights(b.weights, a.weights, 1e-5);
    });
  }

  it('packing works in the K-step Loop: two packed batches in one run equal two separate-row steps', async () => {
    const hyper: TrainHyper = { lr: [0.5, 0.25], eps: 1, maxGradNorm: 0 };
    const sep = await trainOnce(w, 'sft', 2, 8, [separateRows([e1, e2], 8), separateRows([e3, e4], 8)], hyper);
    // One packed row per batch, two steps in one Loop run.
    const packed = await trainOnce(w, 'sft', 1, 16, [packedRows([[e1, e2]], 16), packedRows([[e3, e4]], 16)], hyper);
    assertSameMetrics(packed.metrics, sep.metrics, 1e-5);
    assertSameWeights(packed.weights, sep.weights, 1e-5);
    // Several packed rows per batch, and a batch without segmentIds mixed in (packed from its
    // attentionMask, one example per row).
    const mixed = await trainOnce(w, 'sft', 2, 13, [packedRows([[e1, e3], [e2]], 13), separateRows([e3, e4], 13)], {
      lr: [0.5, 0.25],
      eps: 1,
      maxGradNorm: 0,
    });
    const plain = await trainOnce(
      w,
      'sft',
      3,
      8,
      [separateRows([e1, e3, e2], 8), separateRows([e3, e4, { ...e4, w: e4.w.map(() => 0) }], 8)],
      { lr: [0.5, 0.25], eps: 1, maxGradNorm: 0 },
    );
    assertSameMetrics(mixed.metrics, plain.metrics, 1e-5);
    assertSameWeights(mixed.weights, plain.weights, 1e-5);
  });

  it('gspo-seq (one ratio per row) refuses packed rows', async () => {
    const t = new PolicyTrainer(w, undefined, { provider: 'cpu' });
    await assert.rejects(t.train({ loss: 'gspo-seq', batch: 1, seq: 16 }, [packedRows([[e1, e2]], 16)], { lr: 0 }), /gspo-seq.*packed/);
    await t.dispose();
  });

  it('rejects malformed segment ids', async () => {
    const t = new PolicyTrainer(w, undefined, { provider: 'cpu' });
    const ids = [1, 2, 3, 4, 5, 6];
    const lossMask = [0, 1, 1, 1, 1, 1];
    const o = { loss: 'sft' as const, batch: 1, seq: 6 };
    await assert.rejects(t.train(o, [{ inputIds: ids, lossMask, segmentIds: [1, 1, 2, 2, 1, 1] }], { lr: 0 }), /not contiguous/);
    await assert.rejects(t.train(o, [{ inputIds: ids, lossMask, segmentIds: [1, 1, -1, 2, 2, 2] }], { lr: 0 }), /integers ≥ 0/);
    await assert.rejects(
      t.train(o, [{ inputIds: ids, lossMask, segmentIds: [1, 1, 1, 2, 2, 2], attentionMask: [1, 1, 1, 1, 1, 1] }], { lr: 0 }),
      /both segmentIds and attentionMask/,
    );
    await assert.rejects(t.train(o, [{ inputIds: ids, lossMask: [0, 1, -1, 1, 1, 1] }], { lr: 0 }), /finite and ≥ 0/);
    await t.dispose();
  });
});

describe('policy/trainer: per-step learning rate', function () {
  this.timeout(120000);
  const w = initWeights(c, 5, 0.2);
  const r = new SeededRandom(11);
  const batches = [0, 1, 2].map(() => separateRows([example(r, 8, 3), example(r, 6, 2)], 8));
  const lrs = [3e-3, 1e-2, 2e-3];

  it('K steps with one rate per step equal K single-step calls with those rates', async () => {
    const loop = new PolicyTrainer(w, undefined, { provider: 'cpu' });
    const ml = await loop.train({ loss: 'ppo-token', batch: 2, seq: 8 }, batches, { lr: lrs, weightDecay: 0.01 });
    const one = new PolicyTrainer(w, undefined, { provider: 'cpu' });
    const ms: StepMetrics[] = [];
    for (let k = 0; k < 3; k++)
      ms.push(...(await one.train({ loss: 'ppo-token', batch: 2, seq: 8 }, [batches[k]], { lr: lrs[k], weightDecay: 0.01 })));
    assertSameMetrics(ml, ms, 1e-6);
    assertSameWeights(loop.weights().tensors, one.weights().tensors, 1e-6);
    // A schedule function is evaluated at the global step: steps 0, 1, 2 here.
    const fn = new PolicyTrainer(w, undefined, { provider: 'cpu' });
    await fn.train({ loss: 'ppo-token', batch: 2, seq: 8 }, batches.slice(0, 1), { lr: (s) => lrs[s], weightDecay: 0.01 });
    await fn.train({ loss: 'ppo-token', batch: 2, seq: 8 }, batches.slice(1), { lr: (s) => lrs[s], weightDecay: 0.01 });
    assertSameWeights(fn.weights().tensors, one.weights().tensors, 1e-6);
    // A different rate really changes the result.
    const flat = new PolicyTrainer(w, undefined, { provider: 'cpu' });
    await flat.train({ loss: 'ppo-token', batch: 2, seq: 8 }, batches, { lr: 3e-3, weightDecay: 0.01 });
    assert.ok(maxAbsDiff(flat.weights().tensors.get('model.norm.weight')!, one.weights().tensors.get('model.norm.weight')!) > 1e-4);
    await assert.rejects(
      flat.train({ loss: 'ppo-token', batch: 2, seq: 8 }, batches, { lr: [1e-3, 1e-3] }),
      /2 learning rates for 3 batches/,
    );
    await assert.rejects(flat.train({ loss: 'ppo-token', batch: 2, seq: 8 }, batches, { lr: () => NaN }), /not a finite number/);
    for (const t of [loop, one, fn, flat]) await t.dispose();
  });

  it('warmupCosineLr: linear warm-up to the peak, cosine decay to the floor', () => {
    const s = warmupCosineLr({ peak: 2e-3, warmupSteps: 4, totalSteps: 14, floor: 2e-4 });
    assert.deepEqual([0, 1, 2, 3].map(s), [5e-4, 1e-3, 1.5e-3, 2e-3]);
    assert.ok(Math.abs(s(4) - 2e-3) < 1e-12);
    assert.ok(Math.abs(s(9) - 1.1e-3) < 1e-12, `midpoint ${s(9)}`);
    assert.ok(Math.abs(s(14) - 2e-4) < 1e-12 && Math.abs(s(100) - 2e-4) < 1e-12);
    for (let k = 4; k < 14; k++) assert.ok(s(k + 1) <= s(k));
    assert.throws(() => warmupCosineLr({ peak: 1, warmupSteps: 5, totalSteps: 2 }), /warmupSteps ≤ totalSteps/);
  });
});

describe('policy/trainer: lossMask as a per-token weight', function () {
  this.timeout(60000);
  it('sft loss is Σ w·nll / Σ w, action_loss the mean NLL of the weight-1 (or actionMask) tokens', async () => {
    const w = initWeights(c, 9, 0.4);
    const r = new SeededRandom(2);
    const B = 2;
    const T = 9;
    const ids = Array.from({ length: B * T }, () => Math.floor(r.next() * c.vocab_size));
    const weight = Array.from({ length: B * T }, (_, i) => (i % T >= 5 ? 1 : i % T >= 2 ? 0.3 : 0));
    const nll: number[] = [];
    for (let b = 0; b < B; b++) {
      const row = ids.slice(b * T, (b + 1) * T);
      const lsm = logSoftmaxRows(referenceLogits(w, row), T, c.vocab_size);
      for (let t = 0; t < T; t++) nll.push(t === 0 ? 0 : -lsm[(t - 1) * c.vocab_size + row[t]]);
    }
    const mean = (wt: number[]) => wt.reduce((s, x, i) => s + x * nll[i], 0) / wt.reduce((s, x) => s + x, 0);
    const t = new PolicyTrainer(w, undefined, { provider: 'cpu' });
    const o = { loss: 'sft' as const, batch: B, seq: T };
    const [m] = await t.train(o, [{ inputIds: ids, lossMask: weight }], { lr: 0 });
    assert.ok(Math.abs(m.loss - mean(weight)) < 1e-5, `loss ${m.loss} vs ${mean(weight)}`);
    const action = weight.map((x) => (x === 1 ? 1 : 0));
    assert.ok(Math.abs(m.action_loss - mean(action)) < 1e-5, `action_loss ${m.action_loss} vs ${mean(action)}`);
    assert.ok(Math.abs(m.loss - m.action_loss) > 1e-3, 'the prompt tokens count in the loss');
    // An explicit actionMask; and weights that sum below 1 (no max(Σw, 1) floor).
    const only = weight.map((_, i) => (i === 3 || i === T + 7 ? 1 : 0));
    const small = weight.map((_, i) => (i === 3 ? 0.2 : i === T + 7 ? 0.3 : 0));
    const [m2] = await t.train(o, [{ inputIds: ids, lossMask: small, actionMask: only }], { lr: 0 });
    assert.ok(Math.abs(m2.loss - mean(small)) < 1e-5, `loss ${m2.loss} vs ${mean(small)}`);
    assert.ok(Math.abs(m2.action_loss - mean(only)) < 1e-5, `action_loss ${m2.action_loss} vs ${mean(only)}`);
    // Nothing weighted: loss 0, not NaN.
    const [m3] = await t.train(o, [{ inputIds: ids, lossMask: weight.map(() => 0) }], { lr: 0 });
    assert.ok(m3.loss === 0 && m3.action_loss === 0, `${m3.loss}, ${m3.action_loss}`);
    await t.dispose();
  });
});
