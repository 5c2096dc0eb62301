// A batch read in micro-batches under a token cap (TrainStepOptions.microBatchTokens) takes the
// same optimizer step as the whole batch in one run: every loss of the table with its KL, entropy
// and replay terms, packed rows, and a LoRA adapter; parameters, AdamW moments and metrics.
import * as assert from 'node:assert/strict';
import { LOSS_NAMES, POLICY_LOSSES } from '../../../src/core/losses';
import { initAdapter, parseLoraConfig, type LoraAdapter } from '../../../src/policy/files/lora';
import { PolicyTrainer, type StepMetrics, type TrainBatch, type TrainHyper } from '../../../src/policy/training/trainer';
import type { TrainLoss } from '../../../src/policy/training/graphs';
import { initWeights, SeededRandom } from '../../../src/policy/model/weights';
import { SMALL_CONFIG } from './helpers';

const c = SMALL_CONFIG;
const B = 5;
const T = 16;

/** Rows of different lengths (right-padded), weights 0.3 on prompt tokens and 1 on actions, one row without loss. */
function batch(seed: number, withRef: boolean, withReplay: boolean): TrainBatch {
  const r = new SeededRandom(seed);
  const n = B * T;
  const b = {
    inputIds: new Array<number>(n).fill(0),
    attentionMask: new Array<number>(n).fill(0),
    lossMask: new Array<number>(n).fill(0),
    advantages: new Array<number>(n).fill(0),
    oldLogp: new Array<number>(n).fill(0),
    refLogp: new Array<number>(n).fill(0),
    replayMask: new Array<number>(n).fill(0),
  };
  for (let row = 0; row < B; row++) {
    const len = 6 + ((row * 3) % (T - 5));
    const adv = r.next() * 2 - 1;
    for (let t = 0; t < len; t++) {
      const i = row * T + t;
      b.inputIds[i] = Math.floor(r.next() * c.vocab_size);
      b.attentionMask[i] = 1;
      if (row === 2) continue; // a row that carries no loss: its micro-batch's own sums would be 0
      if (withReplay && row === 4) {
        b.replayMask[i] = t >= 2 ? 0.5 + r.next() : 0;
        continue;
      }
      b.lossMask[i] = t >= 4 ? 1 : 0.3;
      b.advantages[i] = adv;
      b.oldLogp[i] = -3.7 + r.next() * 0.4;
      b.refLogp[i] = -3.6 + r.next() * 0.4;
    }
  }
  const { refLogp, replayMask, ...rest } = b;
  return { ...rest, ...(withRef ? { refLogp } : {}), ...(withReplay ? { replayMask } : {}) };
}

/** Packed: two examples per row (segment ids 1 and 2), the rest padding. */
function packed(seed: number): TrainBatch {
  const r = new SeededRandom(seed);
  const n = B * T;
  const b = {
    inputIds: new Array<number>(n).fill(0),
    segmentIds: new Array<number>(n).fill(0),
    lossMask: new Array<number>(n).fill(0),
    advantages: new Array<number>(n).fill(0),
    oldLogp: new Array<number>(n).fill(0),
  };
  for (let row = 0; row < B; row++) {
    const split = 5 + row;
    for (let t = 0; t < T - 2; t++) {
      const i = row * T + t;
      b.inputIds[i] = Math.floor(r.next() * c.vocab_size);
      b.segmentIds[i] = t < split ? 1 : 2;
      b.lossMask[i] = t % 3 === 0 ? 0.3 : 1;
      b.advantages[i] = r.next() - 0.5;
      b.oldLogp[i] = -3.7 + r.next() * 0.4;
    }
  }
  return b;
}

function busyAdapter(seed: number): LoraAdapter {
  const a = initAdapter(c, parseLoraConfig({ r: 4, lora_alpha: 8, target_modules: 'all-linear' }, 'test'), seed);
  const rng = new SeededRandom(seed + 1);
  for (const [k, t] of a.tensors) if (k.includes('lora_B')) for (let i = 0; i < t.length; i++) t[i] = 0.3 * (2 * rng.next() - 1);
  return a;
}

interface After {
  metrics: StepMetrics[];
  tensors: Map<string, Float32Array>[];
}

/** Two train() calls of two batches each (a fused Loop of 2 without a cap), then the state. */
async function trainTwice(
  loss: TrainLoss,
  batches: TrainBatch[],
  hyper: TrainHyper,
  cap: number | undefined,
  lora?: LoraAdapter,
): Promise<After> {
  const w = initWeights(c, 3, 0.1);
  const t = lora
    ? new PolicyTrainer(w, undefined, { provider: 'cpu' }, { adapter: lora })
    : new PolicyTrainer(w, undefined, { provider: 'cpu' });
  const metrics: StepMetrics[] = [];
  for (let i = 0; i < 2; i++)
    metrics.push(...(await t.train({ loss, batch: B, seq: T, ...(cap ? { microBatchTokens: cap } : {}) }, batches, hyper)));
  const tensors = lora
    ? [t.adapter()!.tensors, t.adapterOptimizerState()!.expAvg, t.adapterOptimizerState()!.expAvgSq]
    : [t.weights().tensors, t.optimizerState().expAvg, t.optimizerState().expAvgSq];
  assert.equal(t.step, 4);
  await t.dispose();
  return { metrics, tensors };
}

function assertSame(a: After, b: After, what: string) {
  const names = ['weights', 'first moments', 'second moments'];
  a.tensors.forEach((m, j) => {
    for (const [name, x] of m) {
      const y = b.tensors[j].get(name)!;
      let scale = 1e-6;
      for (const v of x) scale = Math.max(scale, Math.abs(v));
      let worst = 0;
      for (let i = 0; i < x.length; i++) worst = Math.max(worst, Math.abs(x[i] - y[i]));
      // Weights: relative to lr-sized moves; moments: relative to the tensor's largest value.
      const tol = j === 0 ? 2e-5 : 5e-5 * scale;
      assert.ok(worst <= tol, `${what}: ${names[j]} of ${name} differ by ${worst} (tolerance ${tol})`);
    }
  });
  a.metrics.forEach((row, k) => {
    for (const [key, v] of Object.entries(row)) {
      const u = b.metrics[k][key as keyof StepMetrics];
      assert.ok(
        Math.abs(v - u) <= 1e-5 * Math.max(1, Math.abs(v)),
        `${what}: step ${k} metric ${key}: ${u} read in micro-batches vs ${v} in one run`,
      );
    }
  });
}

describe('policy training in micro-batches under a token cap', function () {
  this.timeout(300_000);
  const hyper = (loss: TrainLoss): TrainHyper => ({
    lr: [1e-2, 5e-3],
    weightDecay: 0.05,
    maxGradNorm: 0.5, // active: the clip reads the whole step's gradient
    klCoef: 0.1,
    entCoef: 0.01,
    replayCoef: POLICY_LOSSES[loss].rl ? 0.5 : 0,
    clipLow: 0.1,
    clipHigh: 0.1,
  });

  for (const loss of LOSS_NAMES) {
    it(`${loss} with KL, entropy${POLICY_LOSSES[loss].rl ? ' and replay' : ''}: micro-batches of 2, 1 and 3 rows take the step of the whole batch`, async () => {
      const rl = POLICY_LOSSES[loss].rl;
      const batches = [batch(1, true, rl), batch(2, true, rl)];
      const whole = await trainTwice(loss, batches, hyper(loss), undefined);
      assert.ok(
        whole.metrics.some((m) => m.grad_norm > 0.5),
        'clipping is active',
      );
      for (const rows of [2, 1, 3])
        assertSame(whole, await trainTwice(loss, batches, hyper(loss), rows * T, undefined), `${loss}, ${rows} rows per micro-batch`);
      // A cap under one row reads one row at a time.
      assertSame(whole, await trainTwice(loss, batches, hyper(loss), T - 3), `${loss}, cap below one row`);
    });
  }

  it('packed rows (ppo-token): micro-batches take the step of the whole batch', async () => {
    const batches = [packed(5), packed(6)];
    const h = { lr: 1e-2, maxGradNorm: 0.5 };
    const whole = await trainTwice('ppo-token', batches, h, undefined);
    assertSame(whole, await trainTwice('ppo-token', batches, h, 2 * T), 'packed, 2 rows per micro-batch');
  });

  it('a LoRA adapter: micro-batches take the step of the whole batch (only the adapter moves)', async () => {
    const batches = [batch(7, true, true), batch(8, true, true)];
    const h = hyper('ppo-token');
    const whole = await trainTwice('ppo-token', batches, h, undefined, busyAdapter(9));
    assertSame(whole, await trainTwice('ppo-token', batches, h, 2 * T, busyAdapter(9)), 'LoRA, 2 rows per micro-batch');
  });

  it('a cap that is not a positive integer is refused', async () => {
    const t = new PolicyTrainer(initWeights(c, 3), undefined, { provider: 'cpu' });
    await assert.rejects(
      t.train({ loss: 'sft', batch: B, seq: T, microBatchTokens: 0 }, [batch(1, false, false)], { lr: 1e-3 }),
      /microBatchTokens must be a positive integer/,
    );
    await t.dispose();
  });
});
