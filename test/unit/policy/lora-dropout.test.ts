// LoRA dropout (PEFT's lora_dropout) on real ONNX Runtime: the training graph's masks are the hash
// of lora.ts bit for bit and drop the expected fraction; dropout 0 builds the graph built without
// it; with dropout the adapter's gradients equal finite differences of the float64 reference given
// the same masks; a resumed policy drops what the uninterrupted one would (seeded by run and step),
// inference has no dropout, and the saved adapter_config.json carries lora_dropout.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Graph, OnnxSession, toModelProto, type HostTensor } from '../../../src/onnx';
import { buildTrainingGraph, Trainer } from '../../../src/onnx/training';
import type { ModelConfig } from '../../../src/policy/model/config';
import { loraDropoutMask, loraFromGraphLayout, loraToGraphLayout, weightFeeds } from '../../../src/policy/model/graphs';
import {
  initAdapter,
  loadAdapter,
  loadAdapterOptimizer,
  loraDropoutMultiplier,
  loraDropoutStepSeed,
  loraTargets,
  parseLoraConfig,
  type LoraAdapter,
} from '../../../src/policy/files/lora';
import { logSoftmax } from '../../../src/policy/inference/sampling';
import { logSoftmaxRows, referenceLogits } from '../../support/reference-forward';
import { TrainablePolicy } from '../../../src/policy/trainable';
import type { TrainBatch } from '../../../src/policy/training/trainer';
import { LORA_DROPOUT_INDEX, LORA_DROPOUT_SEED, LOSS_HYPER_INPUTS, policyTrainingSpec } from '../../../src/policy/training/graphs';
import { initWeights, SeededRandom } from '../../../src/policy/model/weights';
import { resolveTrainConfig } from '../../../src/train/config';
import { GOLDEN_LLAMA, maxAbsDiff, SMALL_CONFIG } from './helpers';

const LLAMA: ModelConfig = {
  ...GOLDEN_LLAMA,
  hidden_size: 16,
  intermediate_size: 24,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 8,
  vocab_size: 40,
};

function busyAdapter(c: ModelConfig, targets: 'all-linear' | string[], seed: number, r: number, dropout: number): LoraAdapter {
  const a = initAdapter(c, parseLoraConfig({ r, lora_alpha: 2 * r, lora_dropout: dropout, target_modules: targets }, 'test'), seed);
  const rng = new SeededRandom(seed + 1);
  for (const [k, t] of a.tensors) if (k.includes('lora_B')) for (let i = 0; i < t.length; i++) t[i] = 0.3 * (2 * rng.next() - 1);
  return a;
}

/** The graph's mask of target `target` for an input [B, T, n] at dropout p and step seed `seed`. */
async function graphMask(B: number, T: number, n: number, p: number, seed: number, target: number): Promise<Float32Array> {
  const g = Graph.create('dropout');
  const x = g.input('x', 'float32', [B, T, n]);
  const s = g.input('seed', 'int64', []);
  g.output(loraDropoutMask(g, x, { p, seed: s }, target), 'mask');
  const session = await OnnxSession.create(toModelProto(g), { provider: 'cpu' });
  try {
    const out = await session.run({
      x: { dtype: 'float32', dims: [B, T, n], data: new Float32Array(B * T * n) },
      seed: { dtype: 'int64', dims: [], data: BigInt64Array.of(BigInt(seed)) },
    });
    return out.mask.data as Float32Array;
  } finally {
    await session.release();
  }
}

describe("policy/lora: dropout on the adapters' inputs in training", function () {
  this.timeout(180_000);
  let tmp: string;
  before(() => (tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-lora-drop-'))));
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it("the graph's mask is the hash of lora.ts bit for bit, drops the expected fraction, and differs per target and step", async () => {
    const [B, T, n] = [2, 64, 256];
    for (const p of [0.05, 0.1, 0.5]) {
      const seed = loraDropoutStepSeed(7, 3);
      const m = await graphMask(B, T, n, p, seed, 2);
      let kept = 0;
      for (let i = 0; i < m.length; i++) {
        const want = loraDropoutMultiplier(p, seed, 2, i);
        assert.equal(m[i], Math.fround(want), `element ${i}: graph ${m[i]} vs lora.ts ${want}`);
        if (m[i] > 0) kept++;
      }
      const dropped = 1 - kept / m.length;
      // 32768 elements: the standard deviation of the fraction is below 0.003.
      assert.ok(Math.abs(dropped - p) < 0.012, `p ${p}: ${dropped} of the elements dropped`);
      // Neighbours are independent: P(both dropped) ≈ p².
      let both = 0;
      for (let i = 1; i < m.length; i++) if (m[i] === 0 && m[i - 1] === 0) both++;
      assert.ok(
        Math.abs(both / (m.length - 1) - p * p) < 0.012,
        `p ${p}: neighbours both dropped ${both / (m.length - 1)}, expected ${p * p}`,
      );
    }
    // Another target or another step drops other elements (agreement ≈ p² + (1 − p)² = 0.82 at p 0.1).
    const base = await graphMask(1, 16, 256, 0.1, loraDropoutStepSeed(7, 3), 0);
    for (const other of [
      await graphMask(1, 16, 256, 0.1, loraDropoutStepSeed(7, 3), 1),
      await graphMask(1, 16, 256, 0.1, loraDropoutStepSeed(7, 4), 0),
      await graphMask(1, 16, 256, 0.1, loraDropoutStepSeed(8, 3), 0),
    ]) {
      const same = base.reduce((k, v, i) => k + (v === other[i] ? 1 : 0), 0) / base.length;
      assert.ok(same > 0.77 && same < 0.87, `masks agree on ${same} of the elements`);
    }
  });

  it('dropout 0 builds the very graph built without dropout (no seed input)', () => {
    const ad = busyAdapter(LLAMA, 'all-linear', 3, 2, 0);
    const opts = { loss: 'sft' as const, batch: 2, seq: 6, weightDecay: false, lora: ad.config };
    const plain = policyTrainingSpec(LLAMA, opts);
    const zero = policyTrainingSpec(LLAMA, { ...opts, loraDropout: 0 });
    assert.ok(!zero.batch.some((b) => b.name === LORA_DROPOUT_SEED));
    assert.ok(
      Buffer.from(toModelProto(buildTrainingGraph({ ...plain, steps: 1 }))).equals(
        Buffer.from(toModelProto(buildTrainingGraph({ ...zero, steps: 1 }))),
      ),
    );
    const dropped = policyTrainingSpec(LLAMA, { ...opts, loraDropout: 0.1 });
    assert.deepEqual(
      dropped.batch.find((b) => b.name === LORA_DROPOUT_SEED),
      { name: LORA_DROPOUT_SEED, dtype: 'int64', shape: [] },
    );
    assert.deepEqual(
      dropped.batch.find((b) => b.name === LORA_DROPOUT_INDEX),
      { name: LORA_DROPOUT_INDEX, dtype: 'int64', shape: [2, 6] },
    );
    assert.throws(() => policyTrainingSpec(LLAMA, { ...opts, loraDropout: 1 }), /LoRA dropout must be in \[0, 1\)/);
  });

  it("with dropout, the adapter's gradients equal finite differences of the float64 reference given the same masks", async () => {
    const c = LLAMA;
    const p = 0.3;
    const w = initWeights(c, 11, 0.3);
    const ad = busyAdapter(c, ['q_proj', 'v_proj', 'o_proj', 'up_proj', 'down_proj'], 13, 2, p);
    const targets = loraTargets(c, ad.config);
    const index = new Map(targets.map((t, i) => [t.module, i]));
    const B = 2;
    const T = 6;
    const stepSeed = loraDropoutStepSeed(5, 0);
    const rng = new SeededRandom(4);
    const ids = Array.from({ length: B * T }, () => Math.floor(rng.next() * c.vocab_size));
    const mask = Float32Array.from({ length: B * T }, (_, i) => (i % T >= 2 ? 0.5 + (i % 3) * 0.25 : 0));
    // The mask of row r: element (r·T + token)·in + feature of the module's target.
    const refLoss = (a: LoraAdapter, withDropout = true) => {
      let num = 0;
      let den = 0;
      for (let r = 0; r < B; r++) {
        const row = ids.slice(r * T, (r + 1) * T);
        const adapterInput = withDropout
          ? (module: string, token: number, feature: number) => {
              const t = targets[index.get(module)!];
              return loraDropoutMultiplier(p, stepSeed, index.get(module)!, (r * T + token) * t.inDim + feature);
            }
          : undefined;
        const lsm = logSoftmaxRows(referenceLogits(w, row, { adapter: a, ...(adapterInput ? { adapterInput } : {}) }), T, c.vocab_size);
        for (let t = 1; t < T; t++) {
          num += -mask[r * T + t] * lsm[(t - 1) * c.vocab_size + row[t]];
          den += mask[r * T + t];
        }
      }
      return num / den;
    };
    const spec = policyTrainingSpec(c, { loss: 'sft', batch: B, seq: T, weightDecay: false, lora: ad.config, loraDropout: p });
    const trainer = new Trainer(spec, 'lora-dropout-test', { provider: 'cpu' });
    const t2 = (a: Float32Array): HostTensor => ({ dtype: 'float32', dims: [B, T], data: a });
    const batch: Record<string, HostTensor> = {
      ...weightFeeds(w),
      input_ids: { dtype: 'int64', dims: [B, T], data: BigInt64Array.from(ids, BigInt) },
      attention_mask: t2(new Float32Array(B * T).fill(1)),
      loss_mask: t2(mask),
      action_mask: t2(mask),
      [LORA_DROPOUT_SEED]: { dtype: 'int64', dims: [], data: BigInt64Array.of(BigInt(stepSeed)) },
      [LORA_DROPOUT_INDEX]: { dtype: 'int64', dims: [B, T], data: BigInt64Array.from({ length: B * T }, (_, i) => BigInt(i)) },
    };
    for (const k of LOSS_HYPER_INPUTS) batch[k] = { dtype: 'float32', dims: [], data: Float32Array.of(k === 'temperature' ? 1 : 0) };
    const graph = loraToGraphLayout(c, ad);
    const zeros = () => Object.fromEntries([...graph].map(([k, v]) => [k, new Float32Array(v.length)]));
    const state = { params: Object.fromEntries(graph), m: zeros(), v: zeros(), step: 0 };
    const probe = await trainer.step(state, batch, { lr: 0, max_grad_norm: 1e9, weight_decay: 0 });
    const want = refLoss(ad);
    assert.ok(Math.abs(probe.metrics.loss[0] - want) < 1e-5, `loss ${probe.metrics.loss[0]} vs reference with the masks ${want}`);
    assert.ok(Math.abs(want - refLoss(ad, false)) > 1e-4, 'dropout changes the loss');
    const grads = loraFromGraphLayout(
      c,
      ad.config,
      new Map(Object.entries(probe.state.m).map(([k, v]) => [k, Float32Array.from(v, (x) => x / 0.1)])),
    );
    let checked = 0;
    for (const [key, a] of ad.tensors) {
      for (let k = 0; k < 3; k++) {
        const i = Math.floor(rng.next() * a.length);
        const h = 1e-3;
        const at = (d: number) => {
          const t = new Map(ad.tensors);
          const x = Float64Array.from(a);
          x[i] += d;
          t.set(key, x as unknown as Float32Array);
          return refLoss({ config: ad.config, tensors: t });
        };
        const fd = (at(h) - at(-h)) / (2 * h);
        const got = grads.tensors.get(key)![i];
        assert.ok(Math.abs(got - fd) / Math.max(1e-3, Math.abs(fd)) < 2e-3, `${key}[${i}]: onnx ${got} vs finite difference ${fd}`);
        checked++;
      }
    }
    assert.equal(checked, 3 * ad.tensors.size);
    await trainer.release();
  });

  it('a LoRA policy with dropout: a resume takes the uninterrupted step bit for bit, the seed matters, inference has no dropout, adapter_config.json carries lora_dropout', async () => {
    const c = SMALL_CONFIG;
    const [B, T] = [2, 12];
    const batchOf = (seed: number): TrainBatch => {
      const r = new SeededRandom(seed);
      return {
        inputIds: Array.from({ length: B * T }, () => Math.floor(r.next() * c.vocab_size)),
        lossMask: Float32Array.from({ length: B * T }, (_, i) => (i % T >= 3 ? 1 : 0)),
      };
    };
    const w = initWeights(c, 23, 0.3);
    const config = parseLoraConfig({ r: 4, lora_alpha: 8, lora_dropout: 0.2, target_modules: 'all-linear' }, 'test');
    const fresh = () => initAdapter(c, config, 29);
    const opts = { loss: 'sft' as const, batch: B, seq: T };
    const tp = new TrainablePolicy(w, { adapter: fresh(), loraDropoutSeed: 41, settings: { provider: 'cpu' } });
    const other = new TrainablePolicy(w, { adapter: fresh(), loraDropoutSeed: 42, settings: { provider: 'cpu' } });
    const plain = new TrainablePolicy(w, { adapter: initAdapter(c, { ...config, lora_dropout: 0 }, 29), settings: { provider: 'cpu' } });
    try {
      // Two steps in one run (a Loop, seeds [K]) and one more after a checkpoint.
      for (const p of [tp, other, plain]) await p.train(opts, [batchOf(1), batchOf(2)], { lr: 5e-2 });
      const [a, b, z] = [(await tp.adapter())!, (await other.adapter())!, (await plain.adapter())!];
      const key = [...a.tensors.keys()].find((k) => k.includes('lora_B'))!;
      assert.ok(maxAbsDiff(a.tensors.get(key)!, b.tensors.get(key)!) > 1e-6, 'another seed drops other elements');
      assert.ok(maxAbsDiff(a.tensors.get(key)!, z.tensors.get(key)!) > 1e-6, 'dropout changes the update');
      // Inference: the policy's logits are the reference with the adapter and no dropout.
      const row = Array.from({ length: 10 }, (_, i) => (i * 3 + 1) % c.vocab_size);
      const [lp] = await tp.logprobs([row]);
      const ref = referenceLogits(w, row, { adapter: a });
      for (let t = 1; t < row.length; t++)
        assert.ok(Math.abs(logSoftmax(ref.subarray((t - 1) * c.vocab_size, t * c.vocab_size))[row[t]] - lp[t]) < 1e-4, `token ${t}`);
      const dir = path.join(tmp, 'ck');
      await tp.saveCheckpoint(dir);
      assert.equal(JSON.parse(fs.readFileSync(path.join(dir, 'adapter_config.json'), 'utf8')).lora_dropout, 0.2);
      const back = loadAdapter(dir, c);
      assert.equal(back.config.lora_dropout, 0.2);
      const resumed = new TrainablePolicy(w, {
        adapter: back,
        optimizer: loadAdapterOptimizer(dir, back, c),
        loraDropoutSeed: 41,
        settings: { provider: 'cpu' },
      });
      await tp.train(opts, [batchOf(3)], { lr: 5e-2 });
      await resumed.train(opts, [batchOf(3)], { lr: 5e-2 });
      const [a1, a2] = [(await tp.adapter())!, (await resumed.adapter())!];
      for (const [k, t] of a1.tensors) assert.equal(maxAbsDiff(t, a2.tensors.get(k)!), 0, `${k} differs after the resume`);
      await resumed.dispose();
    } finally {
      for (const p of [tp, other, plain]) await p.dispose();
    }
  });

  // Micro-batches hash each token's place in the whole step (lora_dropout_index), so row 0 of the
  // second micro-batch is not dropped like row 0 of the first: the accumulated step is the step.
  it('a step in micro-batches of one row drops what the step in one batch drops: the same update', async () => {
    const c = SMALL_CONFIG;
    const [B, T] = [4, 12];
    const r = new SeededRandom(7);
    const batch: TrainBatch = {
      inputIds: Array.from({ length: B * T }, () => Math.floor(r.next() * c.vocab_size)),
      lossMask: Float32Array.from({ length: B * T }, (_, i) => (i % T >= 3 ? 1 : 0)),
    };
    const w = initWeights(c, 23, 0.3);
    const config = parseLoraConfig({ r: 4, lora_alpha: 8, lora_dropout: 0.3, target_modules: 'all-linear' }, 'test');
    const make = () => new TrainablePolicy(w, { adapter: initAdapter(c, config, 29), loraDropoutSeed: 41, settings: { provider: 'cpu' } });
    const [whole, micro] = [make(), make()];
    try {
      await whole.train({ loss: 'sft', batch: B, seq: T }, [batch], { lr: 5e-2 });
      await micro.train({ loss: 'sft', batch: B, seq: T, microBatchTokens: T }, [batch], { lr: 5e-2 });
      const [a, b] = [(await whole.adapter())!, (await micro.adapter())!];
      const init = initAdapter(c, config, 29);
      const key = [...a.tensors.keys()].find((k) => k.includes('lora_B'))!;
      assert.ok(maxAbsDiff(a.tensors.get(key)!, init.tensors.get(key)!) > 1e-3, 'the step moved the adapter');
      for (const [k, t] of a.tensors)
        assert.ok(maxAbsDiff(t, b.tensors.get(k)!) < 1e-5, `${k}: ${maxAbsDiff(t, b.tensors.get(k)!)} between one batch and micro-batches`);
    } finally {
      await whole.dispose();
      await micro.dispose();
    }
  });

  it('a run config takes lora_dropout', () => {
    const c = resolveTrainConfig({ lora: { r: 8, lora_alpha: 16, lora_dropout: 0.05, target_modules: ['q_proj', 'v_proj'] } });
    assert.equal(c.lora!.lora_dropout, 0.05);
    assert.throws(() => resolveTrainConfig({ lora: { lora_dropout: 1 } }), /lora_dropout must be in \[0, 1\)/);
  });
});
