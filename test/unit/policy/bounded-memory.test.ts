// Training graphs in bounded memory, on real ONNX Runtime. The vocabulary head in chunks
// (policy/training/graphs.ts chunkedTokenLogprobs) and the layers computed again in the backward pass
// (graphs.ts recomputeLayers) give the loss, every metric and every gradient of the graph that
// keeps everything (whose gradients have their finite-difference tests): full training with a
// tied and an untied head (the head's gradient comes from the chunked backward pass), LoRA with
// and without dropout (the recomputed layer drops what the first pass dropped), with the entropy
// and KL terms and a temperature; the chunked head's gradient also against finite differences of
// the loss. The chunk size: the largest divisor of B·T at most the one asked for, none below the
// size threshold.
import * as assert from 'node:assert/strict';
import type { HostTensor } from '../../../src/onnx';
import { buildTrainingGraph, Trainer } from '../../../src/onnx/training';
import type { ModelConfig } from '../../../src/policy/model/config';
import { loraToGraphLayout, weightFeeds } from '../../../src/policy/model/graphs';
import { initAdapter, parseLoraConfig } from '../../../src/policy/files/lora';
import {
  batchInputs,
  LOGIT_CHUNK_ABOVE,
  LORA_DROPOUT_INDEX,
  LORA_DROPOUT_SEED,
  logitChunkRows,
  LOSS_HYPER_INPUTS,
  policyTrainingSpec,
  type TrainGraphOptions,
} from '../../../src/policy/training/graphs';
import { Policy } from '../../../src/policy/inference/policy';
import { logSoftmax } from '../../../src/policy/inference/sampling';
import { TrainablePolicy } from '../../../src/policy/trainable';
import { initWeights, SeededRandom } from '../../../src/policy/model/weights';
import { GOLDEN_LLAMA, maxAbsDiff, SMALL_CONFIG } from './helpers';

const UNTIED: ModelConfig = {
  ...GOLDEN_LLAMA,
  hidden_size: 16,
  intermediate_size: 24,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 8,
  vocab_size: 40,
  tie_word_embeddings: false,
};

interface Case {
  name: string;
  c: ModelConfig;
  lora: boolean;
  loss: TrainGraphOptions['loss'];
  /** LoRA dropout: the recomputed layer must drop what the first pass dropped. */
  dropout?: number;
}

const B = 2;
const T = 6;

async function step(
  cs: Case,
  chunkRows: number,
  params: Map<string, Float32Array>,
  feedsOf: (o: TrainGraphOptions) => Record<string, HostTensor>,
  recomputeLayers = false,
) {
  const o: TrainGraphOptions = {
    loss: cs.loss,
    batch: B,
    seq: T,
    weightDecay: false,
    entropy: true,
    kl: cs.loss !== 'sft',
    logitChunkRows: chunkRows,
    recomputeLayers,
    ...(cs.lora
      ? { lora: { r: 2, lora_alpha: 4, use_rslora: false, target_modules: ['q_proj', 'v_proj'] }, loraDropout: cs.dropout ?? 0 }
      : {}),
  };
  const spec = policyTrainingSpec(cs.c, o);
  const trainer = new Trainer(spec, `chunked-${cs.name}-${chunkRows}-${recomputeLayers}`, { provider: 'cpu' });
  try {
    const zeros = () => Object.fromEntries([...params].map(([k, v]) => [k, new Float32Array(v.length)]));
    const state = { params: Object.fromEntries([...params].map(([k, v]) => [k, Float32Array.from(v)])), m: zeros(), v: zeros(), step: 0 };
    // lr 0: the parameters stay; the first moment after one step is (1 − β1)·gradient.
    const r = await trainer.step(state, feedsOf(o), { lr: 0, max_grad_norm: 1e9, weight_decay: 0 });
    const grads = new Map(Object.entries(r.state.m).map(([k, m]) => [k, Float32Array.from(m, (x) => x / 0.1)]));
    return { metrics: r.metrics, grads, graph: buildTrainingGraph({ ...spec, steps: 1 }) };
  } finally {
    await trainer.release();
  }
}

function setup(cs: Case) {
  const w = initWeights(cs.c, 3, 0.5);
  const rng = new SeededRandom(9);
  const ids = Array.from({ length: B * T }, () => Math.floor(rng.next() * cs.c.vocab_size));
  const per = (f: (i: number) => number) => ({
    dtype: 'float32' as const,
    dims: [B, T],
    data: Float32Array.from({ length: B * T }, (_, i) => f(i)),
  });
  const lossMask = per((i) => (i % T >= 2 ? 1 : 0));
  const feedsOf = (o: TrainGraphOptions): Record<string, HostTensor> => {
    const f: Record<string, HostTensor> = {
      input_ids: { dtype: 'int64', dims: [B, T], data: BigInt64Array.from(ids, BigInt) },
      attention_mask: per((i) => (i === B * T - 1 ? 0 : 1)),
    };
    const values: Record<string, HostTensor> = {
      loss_mask: lossMask,
      action_mask: lossMask,
      advantages: per((i) => Math.sin(i + 1)),
      old_logp: per((i) => -3 - 0.1 * (i % 5)),
      ref_logp: per((i) => -3.2 + 0.05 * (i % 3)),
    };
    for (const n of batchInputs(o)) f[n] = values[n];
    const hyper: Record<string, number> = {
      clip_low: 0.2,
      clip_high: 0.28,
      kl_coef: 0.1,
      ent_coef: 0.05,
      replay_coef: 0,
      temperature: 0.7,
    };
    for (const k of LOSS_HYPER_INPUTS) f[k] = { dtype: 'float32', dims: [], data: Float32Array.of(hyper[k]) };
    if (cs.lora) Object.assign(f, weightFeeds(w));
    if (cs.dropout) {
      f[LORA_DROPOUT_SEED] = { dtype: 'int64', dims: [], data: BigInt64Array.of(12345n) };
      f[LORA_DROPOUT_INDEX] = { dtype: 'int64', dims: [B, T], data: BigInt64Array.from({ length: B * T }, (_, i) => BigInt(i)) };
    }
    return f;
  };
  const params = cs.lora
    ? (() => {
        const a = initAdapter(cs.c, parseLoraConfig({ r: 2, lora_alpha: 4, target_modules: ['q_proj', 'v_proj'] }, 'test'), 5);
        for (const [k, t] of a.tensors) if (k.includes('lora_B')) for (let i = 0; i < t.length; i++) t[i] = 0.2 * (2 * rng.next() - 1);
        return loraToGraphLayout(cs.c, a);
      })()
    : new Map(Object.entries(weightFeeds(w)).map(([k, t]) => [k, t.data as Float32Array]));
  return { params, feedsOf };
}

describe('policy/training: bounded memory (the head in chunks, layers recomputed)', function () {
  this.timeout(120_000);

  it('chunk sizes: the largest divisor of B·T at most the one asked for; by default only above the size threshold', () => {
    assert.equal(logitChunkRows(2, 6, 40, 4), 4);
    assert.equal(logitChunkRows(2, 6, 40, 5), 4, '5 does not divide 12');
    assert.equal(logitChunkRows(1, 7, 40, 3), 1, 'a prime length: one position per chunk');
    assert.equal(logitChunkRows(2, 6, 40, 12), 0, 'one chunk is no chunking');
    assert.equal(logitChunkRows(2, 6, 40, 0), 0);
    assert.equal(logitChunkRows(2, 6, 40), 0, 'small logits at once');
    assert.equal(logitChunkRows(1, 1024, 151_936), 128, 'a Qwen2.5 row in chunks');
    assert.ok(1024 * 151_936 > LOGIT_CHUNK_ABOVE);
  });

  const cases: Case[] = [
    { name: 'tied, full, ppo-token', c: SMALL_CONFIG, lora: false, loss: 'ppo-token' },
    { name: 'untied, full, ppo-token', c: UNTIED, lora: false, loss: 'ppo-token' },
    { name: 'untied, full, sft', c: UNTIED, lora: false, loss: 'sft' },
    { name: 'tied, LoRA, ppo-token', c: SMALL_CONFIG, lora: true, loss: 'ppo-token' },
    { name: 'tied, LoRA with dropout, ppo-token', c: SMALL_CONFIG, lora: true, loss: 'ppo-token', dropout: 0.3 },
  ];
  type StepResult = Awaited<ReturnType<typeof step>>;
  const sameStep = (whole: StepResult, chunked: StepResult) => {
    for (const [k, v] of Object.entries(whole.metrics)) {
      const a = v[0];
      const b = chunked.metrics[k][0];
      assert.ok(Math.abs(a - b) <= 1e-5 * Math.max(1, Math.abs(a)), `metric ${k}: ${a} whole vs ${b} chunked`);
    }
    let norm = 0;
    for (const [k, g] of whole.grads) {
      const h = chunked.grads.get(k)!;
      let diff = 0;
      let size = 0;
      for (let i = 0; i < g.length; i++) {
        diff += (g[i] - h[i]) ** 2;
        size += g[i] * g[i];
      }
      norm += size;
      const rel = Math.sqrt(diff / Math.max(size, 1e-20));
      if (process.env.TW_PRINT) console.log(k, rel);
      assert.ok(rel <= 1e-5, `${k}: the gradients differ by ${rel.toExponential(2)} of their norm`);
    }
    assert.ok(norm > 1e-6, 'the step has gradients to compare');
  };

  for (const cs of cases) {
    it(`${cs.name}: loss, metrics and every gradient equal the graph without chunks`, async () => {
      const { params, feedsOf } = setup(cs);
      const whole = await step(cs, 0, params, feedsOf);
      const chunked = await step(cs, 4, params, feedsOf);
      // No value of the chunked step's graph is sequence × vocabulary sized.
      const logitsSized = (g: StepResult['graph']) =>
        g.nodes.flatMap((n) => n.outputs).filter((v) => v.rank === 3 && v.shape[2] === cs.c.vocab_size);
      assert.ok(logitsSized(whole.graph).length > 0);
      assert.deepEqual(logitsSized(chunked.graph).map(String), []);
      sameStep(whole, chunked);
    });

    // Activation checkpointing: each layer computed again in the backward pass gives the same step.
    it(`${cs.name}: recomputing the layers in the backward pass gives the same loss, metrics and gradients`, async () => {
      const { params, feedsOf } = setup(cs);
      const kept = await step(cs, 0, params, feedsOf);
      const again = await step(cs, 4, params, feedsOf, true);
      const matmuls = (g: StepResult['graph']) => g.nodes.filter((n) => n.op === 'MatMul').length;
      assert.ok(matmuls(again.graph) > matmuls(kept.graph), "the backward pass holds the layers' products again");
      sameStep(kept, again);
    });
  }

  it('finite differences of the chunked loss agree with its gradient (untied head and embedding)', async () => {
    const cs: Case = { name: 'fd', c: UNTIED, lora: false, loss: 'ppo-token' };
    const { params, feedsOf } = setup(cs);
    const base = await step(cs, 4, params, feedsOf);
    const rng = new SeededRandom(21);
    for (const name of ['lm_head.weight', 'model.embed_tokens.weight', 'model.norm.weight']) {
      const g = base.grads.get(name)!;
      // The parameters where the gradient is largest, and one at random.
      const order = Array.from(g.keys()).sort((a, b) => Math.abs(g[b]) - Math.abs(g[a]));
      for (const i of [order[0], order[1], Math.floor(rng.next() * g.length)]) {
        const at = async (d: number) => {
          const p = new Map(params);
          const x = Float32Array.from(params.get(name)!);
          x[i] += d;
          p.set(name, x);
          return (await step(cs, 4, p, feedsOf)).metrics.loss[0];
        };
        const h = 1e-2;
        const fd = ((await at(h)) - (await at(-h))) / (2 * h);
        assert.ok(Math.abs(fd - g[i]) <= 2e-3 + 0.02 * Math.abs(fd), `${name}[${i}]: gradient ${g[i]} vs finite difference ${fd}`);
      }
    }
  });

  // Scoring (Policy.tokenLogprobs): each target's log-prob from the graph, the head in chunks,
  // against the log-softmax of the full logits; rows of other lengths (left padding), more
  // positions than one chunk and not a multiple of it, a temperature, the adapter on and off.
  it('scoring in the graph gives the log-softmax of the full logits at every position', async () => {
    const c = SMALL_CONFIG;
    const w = initWeights(c, 17, 0.5);
    const ad = initAdapter(c, parseLoraConfig({ r: 2, lora_alpha: 4, target_modules: 'all-linear' }, 'test'), 3);
    const rng = new SeededRandom(2);
    for (const [k, t] of ad.tensors) if (k.includes('lora_B')) for (let i = 0; i < t.length; i++) t[i] = 0.3 * (2 * rng.next() - 1);
    const policy = new Policy(w, undefined, { provider: 'cpu' }, ad);
    try {
      const rows = [70, 45, 1, 90].map((n) => Array.from({ length: n }, () => Math.floor(rng.next() * c.vocab_size)));
      for (const [temperature, adapter] of [
        [1, true],
        [0.6, true],
        [1.3, false],
      ] as const) {
        const got = await policy.tokenLogprobs(rows, { temperature, adapter });
        const logits = await policy.logits(rows, { adapter });
        rows.forEach((r, b) => {
          const want = Float32Array.from(r, (id, t) =>
            t === 0 ? 0 : logSoftmax(logits[b].subarray((t - 1) * c.vocab_size, t * c.vocab_size), temperature)[id],
          );
          assert.equal(got[b].length, r.length);
          assert.ok(
            maxAbsDiff(got[b], want) < 2e-5,
            `row ${b}, temperature ${temperature}, adapter ${adapter}: ${maxAbsDiff(got[b], want)}`,
          );
        });
      }
      const off = await policy.tokenLogprobs([rows[0]], { adapter: false });
      const on = await policy.tokenLogprobs([rows[0]]);
      assert.ok(maxAbsDiff(off[0], on[0]) > 1e-3, 'the adapter changes the scores');
      await assert.rejects(policy.tokenLogprobs([rows[0]], { temperature: 0 }), /temperature must be a finite number > 0/);
    } finally {
      await policy.dispose();
    }
    // TrainablePolicy.logprobs goes through it: the reference of a LoRA policy is its starting
    // policy, here (B not zero) the base with the adapter as it started; with a fresh adapter, the base.
    const tp = new TrainablePolicy(w, { adapter: ad, settings: { provider: 'cpu' } });
    const started = new Policy(w, undefined, { provider: 'cpu' }, ad);
    const base = new Policy(w, undefined, { provider: 'cpu' });
    const fresh = new TrainablePolicy(w, {
      adapter: initAdapter(c, parseLoraConfig({ r: 2, lora_alpha: 4, target_modules: 'all-linear' }, 'test'), 3),
      settings: { provider: 'cpu' },
    });
    try {
      const row = Array.from({ length: 33 }, (_, i) => (i * 7) % c.vocab_size);
      const [ref] = await tp.logprobs([row], { model: 'reference' });
      const [withAdapter] = await started.tokenLogprobs([row]);
      assert.ok(maxAbsDiff(ref, withAdapter) < 1e-6);
      const [freshRef] = await fresh.logprobs([row], { model: 'reference' });
      const [plain] = await base.tokenLogprobs([row]);
      assert.ok(maxAbsDiff(freshRef, plain) < 1e-6);
    } finally {
      await tp.dispose();
      await fresh.dispose();
      await started.dispose();
      await base.dispose();
    }
  });
});
