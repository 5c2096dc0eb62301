// Training graphs end to end: whole-model gradients against finite differences of the float64
// reference, the AdamW/clipping wiring, K steps in one Loop vs K runs, SFT learning a corpus,
// and the direction of a PPO step.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { loadCheckpoint, saveCheckpoint } from '../../../src/policy/files/checkpoint';
import { ppoTokenLoss, tokenEntropy } from '../../support/reference-losses';
import { gradients, Graph, OnnxSession, toModelProto, type HostTensor, type Value } from '../../../src/onnx';
import { adamwReference } from '../../../src/onnx/optim';
import { paramSpecs, presetConfig, type ModelConfig } from '../../../src/policy/model/config';
import { buildForward, fromGraphLayout, graphParamSpecs, MASKED, weightFeeds } from '../../../src/policy/model/graphs';
import { referenceLogits, logSoftmaxRows } from '../../support/reference-forward';
import { PolicyTrainer, type TrainBatch } from '../../../src/policy/training/trainer';
import { attentionChunksFor, LOSS_HYPER_INPUTS, policyTrainingSpec, type TrainGraphOptions } from '../../../src/policy/training/graphs';
import { buildTrainingGraph } from '../../../src/onnx/training';
import { byteLevelTokenizer, byteLevelTokenizerJson } from '../../../src/policy/files/tokenizer';
import { initWeights, SeededRandom, type PolicyWeights } from '../../../src/policy/model/weights';
import { Policy } from '../../../src/policy/inference/policy';
import { GOLDEN_CONFIG, GOLDEN_LLAMA, maxAbsDiff, SMALL_CONFIG } from './helpers';

const HYPER = { clip_low: 0.2, clip_high: 0.2, kl_coef: 0.3, ent_coef: 0.02, replay_coef: 0.5, temperature: 1 };

interface Batch {
  ids: number[];
  mask: Float32Array;
  adv: Float32Array;
  old: Float32Array;
  ref: Float32Array;
  /** Replay (demonstration) token weights: 0, 0.3 or 1, never on column 0 (no logit predicts it). */
  replay: Float32Array;
}

function makeBatch(c: ModelConfig, B: number, T: number, seed: number): Batch {
  const r = new SeededRandom(seed);
  const n = B * T;
  return {
    ids: Array.from({ length: n }, () => Math.floor(r.next() * c.vocab_size)),
    mask: Float32Array.from({ length: n }, (_, i) => (i % T >= 2 ? 1 : 0)),
    adv: Float32Array.from({ length: n }, () => r.next() * 2 - 1),
    old: Float32Array.from({ length: n }, () => -2.4 + r.next() * 0.6 - 0.3),
    ref: Float32Array.from({ length: n }, () => -2.4 + r.next() - 0.5),
    replay: Float32Array.from({ length: n }, (_, i) => (i % T === 0 ? 0 : [0, 0.3, 1][Math.floor(r.next() * 3)])),
  };
}

/** The ppo-token loss (with KL, entropy and the replay term) of the float64 reference model. */
function referenceLoss(w: PolicyWeights, b: Batch, B: number, T: number): number {
  const V = w.config.vocab_size;
  const logp = new Float64Array(B * T);
  const ent = new Float64Array(B * T);
  for (let r = 0; r < B; r++) {
    const ids = b.ids.slice(r * T, (r + 1) * T);
    const logits = referenceLogits(w, ids);
    const lsm = logSoftmaxRows(logits, T, V);
    const h = tokenEntropy(logits, T, V);
    for (let t = 1; t < T; t++) {
      logp[r * T + t] = lsm[(t - 1) * V + ids[t]];
      ent[r * T + t] = h[t - 1];
    }
  }
  return ppoTokenLoss(
    { batch: B, seq: T, logp, oldLogp: b.old, advantages: b.adv, mask: b.mask, refLogp: b.ref, entropy: ent, replayMask: b.replay },
    { clipLow: HYPER.clip_low, clipHigh: HYPER.clip_high, klCoef: HYPER.kl_coef, entCoef: HYPER.ent_coef, replayCoef: HYPER.replay_coef },
  ).loss;
}

/** Loss and d loss / d weights (HF layout) from the ONNX training forward. */
async function onnxGradients(w: PolicyWeights, b: Batch, B: number, T: number) {
  const c = w.config;
  const o: TrainGraphOptions = { loss: 'ppo-token', batch: B, seq: T, kl: true, entropy: true, replay: true };
  const spec = policyTrainingSpec(c, o);
  const g = Graph.create('grad');
  const params: Record<string, Value> = {};
  for (const p of spec.params) params[p.name] = g.input(p.name, 'float32', p.shape);
  const batch: Record<string, Value> = {};
  for (const s of spec.batch) batch[s.name] = g.input(s.name, s.dtype, s.shape);
  const { loss } = spec.forward(g, params, batch);
  const names = Object.keys(params);
  gradients(
    g,
    loss,
    names.map((n) => params[n]),
  ).forEach((d, i) => g.output(d, `grad.${names[i]}`));
  g.output(loss, 'loss');
  const s = await OnnxSession.create(toModelProto(g), { provider: 'cpu' });
  const t = (a: Float32Array): HostTensor => ({ dtype: 'float32', dims: [B, T], data: a });
  const feeds: Record<string, HostTensor> = {
    ...weightFeeds(w),
    input_ids: { dtype: 'int64', dims: [B, T], data: BigInt64Array.from(b.ids, BigInt) },
    attention_mask: t(new Float32Array(B * T).fill(1)),
    loss_mask: t(b.mask),
    action_mask: t(b.mask),
    advantages: t(b.adv),
    old_logp: t(b.old),
    ref_logp: t(b.ref),
    replay_mask: t(b.replay),
  };
  for (const k of LOSS_HYPER_INPUTS) feeds[k] = { dtype: 'float32', dims: [], data: Float32Array.of(HYPER[k]) };
  const out = await s.run(feeds);
  await s.release();
  const graphGrads = new Map(names.map((n) => [n, out[`grad.${n}`].data as Float32Array]));
  return { loss: (out.loss.data as Float32Array)[0], grads: fromGraphLayout(c, graphGrads) };
}

describe('policy/training: gradients, optimizer, learning', function () {
  this.timeout(120000);

  const fdConfigs: Array<[string, ModelConfig]> = [
    ['Qwen2, untied head', { ...GOLDEN_CONFIG, tie_word_embeddings: false }],
    ['Qwen2, tied head', { ...GOLDEN_CONFIG, tie_word_embeddings: true }],
    ['Llama 3: llama3 rope scaling, head_dim 8, attention and MLP biases', { ...GOLDEN_LLAMA, attention_bias: true, mlp_bias: true }],
  ];
  for (const [what, config] of fdConfigs) {
    it(`whole-model gradients equal finite differences of the float64 reference (${what})`, async () => {
      const c = config;
      const w = initWeights(c, 21, 0.4);
      // Norm gains away from 1 and non-zero biases, so their gradients are generic too.
      for (const [name, a] of w.tensors)
        if (name.endsWith('norm.weight') || name.endsWith('.bias'))
          for (let i = 0; i < a.length; i++) a[i] = (name.endsWith('bias') ? 0 : 1) + 0.3 * Math.sin(i + name.length);
      const B = 2;
      const T = 6;
      const batch = makeBatch(c, B, T, 5);
      const { loss, grads } = await onnxGradients(w, batch, B, T);
      assert.ok(Math.abs(loss - referenceLoss(w, batch, B, T)) < 1e-5, 'loss matches the reference');
      const r = new SeededRandom(9);
      let checked = 0;
      let worst = 0;
      for (const p of paramSpecs(c)) {
        const a = w.tensors.get(p.name)!;
        const f64 = Float64Array.from(a);
        for (let k = 0; k < 3; k++) {
          const i = Math.floor(r.next() * a.length);
          const h = 1e-3;
          // Perturb in float64 through a float64 view of the weights.
          const wd: PolicyWeights = { config: c, tensors: new Map(w.tensors) };
          const plus = Float64Array.from(f64);
          plus[i] += h;
          const minus = Float64Array.from(f64);
          minus[i] -= h;
          wd.tensors.set(p.name, plus as unknown as Float32Array);
          const lp = referenceLoss(wd, batch, B, T);
          wd.tensors.set(p.name, minus as unknown as Float32Array);
          const lm = referenceLoss(wd, batch, B, T);
          const fd = (lp - lm) / (2 * h);
          const got = grads.get(p.name)![i];
          const err = Math.abs(got - fd) / Math.max(1e-3, Math.abs(fd));
          worst = Math.max(worst, err);
          assert.ok(err < 1e-3, `${p.name}[${i}]: onnx ${got} vs finite difference ${fd}`);
          checked++;
        }
      }
      assert.ok(checked >= 3 * paramSpecs(c).length);
      assert.ok(worst < 1e-3);
    });
  }

  it('one training step applies global-norm clipping and AdamW (PyTorch semantics) to the exact gradients', async () => {
    const c = { ...GOLDEN_CONFIG };
    const w = initWeights(c, 3, 0.4);
    const B = 2;
    const T = 6;
    const b = makeBatch(c, B, T, 8);
    const { grads } = await onnxGradients(w, b, B, T);
    let sq = 0;
    for (const g of grads.values()) for (const x of g) sq += x * x;
    const norm = Math.sqrt(sq);
    const maxNorm = norm / 3; // forces clipping by 1/3
    const trainer = new PolicyTrainer(w, undefined, { provider: 'cpu' });
    const hyper = {
      lr: 0.01,
      weightDecay: 0.1,
      maxGradNorm: maxNorm,
      clipLow: 0.2,
      clipHigh: 0.2,
      klCoef: 0.3,
      entCoef: 0.02,
      replayCoef: 0.5,
    };
    const [m] = await trainer.train(
      { loss: 'ppo-token', batch: B, seq: T },
      [{ inputIds: b.ids, lossMask: b.mask, advantages: b.adv, oldLogp: b.old, refLogp: b.ref, replayMask: b.replay }],
      hyper,
    );
    assert.ok(Math.abs(m.grad_norm - norm) < 1e-5 * norm, `grad_norm ${m.grad_norm} vs ${norm}`);
    // Second step from the first step's moments, reference and graph side by side.
    const scale = maxNorm / (norm + 1e-6);
    const after = trainer.weights();
    const opt = trainer.optimizerState();
    for (const p of paramSpecs(c)) {
      const x = Float64Array.from(w.tensors.get(p.name)!);
      const mm = new Float64Array(x.length);
      const vv = new Float64Array(x.length);
      adamwReference(
        x,
        Array.from(grads.get(p.name)!, (g) => g * scale),
        mm,
        vv,
        0,
        { lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.1 },
        p.shape.length === 2,
      );
      const got = after.tensors.get(p.name)!;
      for (let i = 0; i < x.length; i++) {
        assert.ok(Math.abs(got[i] - x[i]) < 2e-6, `${p.name}[${i}] ${got[i]} vs ${x[i]}`);
        assert.ok(Math.abs(opt.expAvg.get(p.name)![i] - mm[i]) < 1e-6 * Math.max(1, Math.abs(mm[i])) + 1e-9);
      }
    }
    assert.equal(trainer.step, 1);
    await trainer.dispose();
  });

  it('weight decay 0 trains on a graph without the decay multiply, with the same result', async () => {
    const c = SMALL_CONFIG;
    const o = { loss: 'ppo-token' as const, batch: 2, seq: 6 };
    const count = (g: Graph) => g.nodes.length;
    const withWd = count(buildTrainingGraph({ ...policyTrainingSpec(c, { ...o, weightDecay: true }), steps: 1 }));
    const without = count(buildTrainingGraph({ ...policyTrainingSpec(c, { ...o, weightDecay: false }), steps: 1 }));
    assert.ok(without < withWd, `${without} vs ${withWd} nodes`);
    const w = initWeights(c, 5, 0.1);
    const b = makeBatch(c, 2, 6, 3);
    const batch: TrainBatch = { inputIds: b.ids, lossMask: b.mask, advantages: b.adv, oldLogp: b.old };
    const run = async (weightDecay: number) => {
      const t = new PolicyTrainer(w, undefined, { provider: 'cpu' });
      await t.train(o, [batch, batch], { lr: 1e-3, weightDecay });
      const out = t.weights().tensors;
      await t.dispose();
      return out;
    };
    // 1e-30 builds the decayed graph, whose factor 1 − lr·1e-30 rounds to exactly 1 in float32.
    // The two graphs pack small tensors differently (packs are per decay group), so the global
    // gradient norm sums in another order: equal up to float32 rounding, not bit for bit.
    const a = await run(0);
    const d = await run(1e-30);
    for (const [name, x] of a) assert.ok(maxAbsDiff(x, d.get(name)!) < 1e-7, `${name}: ${maxAbsDiff(x, d.get(name)!)}`);
    const moved = await run(0.5);
    assert.notDeepEqual(
      Array.from(moved.get('model.layers.0.mlp.up_proj.weight')!),
      Array.from(a.get('model.layers.0.mlp.up_proj.weight')!),
    );
  });

  it('K steps in one Loop run equal K separate runs', async () => {
    const c = SMALL_CONFIG;
    const w = initWeights(c, 4, 0.1);
    const B = 2;
    const T = 10;
    const batches: TrainBatch[] = [1, 2, 3].map((s) => {
      const b = makeBatch(c, B, T, s);
      return { inputIds: b.ids, lossMask: b.mask, advantages: b.adv, oldLogp: b.old };
    });
    const hyper = { lr: 3e-3, weightDecay: 0.01 };
    const loop = new PolicyTrainer(w, undefined, { provider: 'cpu' });
    const ml = await loop.train({ loss: 'gspo-seq', batch: B, seq: T }, batches, hyper);
    const sep = new PolicyTrainer(w, undefined, { provider: 'cpu' });
    const ms = [];
    for (const b of batches) ms.push(...(await sep.train({ loss: 'gspo-seq', batch: B, seq: T }, [b], hyper)));
    assert.equal(loop.step, 3);
    assert.equal(sep.step, 3);
    for (let k = 0; k < 3; k++) assert.ok(Math.abs(ml[k].loss - ms[k].loss) < 1e-6, `step ${k} loss`);
    const a = loop.weights().tensors;
    const b = sep.weights().tensors;
    let diff = 0;
    for (const [name, x] of a) for (let i = 0; i < x.length; i++) diff = Math.max(diff, Math.abs(x[i] - b.get(name)![i]));
    assert.ok(diff < 1e-6, `max weight difference ${diff}`);
    assert.ok(ml[2].loss !== ml[0].loss, 'the steps really differ');
    await loop.dispose();
    await sep.dispose();
  });

  it('a training run resumes from a checkpoint exactly where it stopped', async () => {
    const c = { ...SMALL_CONFIG, vocab_size: 260 }; // the byte tokenizer saved with it has 260 tokens
    const B = 2;
    const T = 8;
    const mk = (s: number): TrainBatch => {
      const b = makeBatch(c, B, T, s);
      return { inputIds: b.ids, lossMask: b.mask, advantages: b.adv, oldLogp: b.old };
    };
    const hyper = { lr: 5e-3, weightDecay: 0.05 };
    const o = { loss: 'ppo-token' as const, batch: B, seq: T };
    const straight = new PolicyTrainer(initWeights(c, 8, 0.1), undefined, { provider: 'cpu' });
    await straight.train(o, [mk(1), mk(2)], hyper);
    const first = new PolicyTrainer(initWeights(c, 8, 0.1), undefined, { provider: 'cpu' });
    await first.train(o, [mk(1)], hyper);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-resume-'));
    try {
      saveCheckpoint(dir, { weights: first.weights(), optimizer: first.optimizerState(), tokenizerJson: byteLevelTokenizerJson() });
      const ck = loadCheckpoint(dir);
      assert.equal(ck.optimizer!.step, 1);
      const resumed = new PolicyTrainer(ck.weights, ck.optimizer, { provider: 'cpu' });
      await resumed.train(o, [mk(2)], hyper);
      const a = resumed.weights().tensors;
      let diff = 0;
      for (const [name, x] of straight.weights().tensors)
        for (let i = 0; i < x.length; i++) diff = Math.max(diff, Math.abs(x[i] - a.get(name)![i]));
      assert.ok(diff < 1e-6, `resumed run differs by ${diff}`);
      await resumed.dispose();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
      await straight.dispose();
      await first.dispose();
    }
  });

  it('SFT drives the loss on a fixed small corpus below 10% of its start', async () => {
    const tok = byteLevelTokenizer();
    const c = { ...SMALL_CONFIG, vocab_size: 260 };
    const corpus = ['ls -la\n', 'git status\n', 'cat a.py\n', 'pytest -q\n'];
    const T = 12;
    const ids: number[] = [];
    const mask: number[] = [];
    for (const line of corpus) {
      const t = [257, ...tok.encode(line)];
      const row = [...t, ...new Array(T - t.length).fill(259)];
      ids.push(...row);
      mask.push(...row.map((_, i) => (i >= 1 && i < t.length ? 1 : 0)));
    }
    const trainer = new PolicyTrainer(initWeights(c, 1), undefined, { provider: 'cpu' });
    const batch: TrainBatch = { inputIds: ids, lossMask: mask };
    const losses: number[] = [];
    for (let i = 0; i < 6; i++)
      losses.push(...(await trainer.train({ loss: 'sft', batch: 4, seq: T }, new Array(10).fill(batch), { lr: 1e-2 })).map((m) => m.loss));
    const start = losses[0];
    const end = losses[losses.length - 1];
    assert.ok(Math.abs(start - Math.log(260)) < 0.1, `starts near uniform (ln 260 = 5.56), got ${start}`);
    assert.ok(end < 0.1 * start, `loss ${start} → ${end}`);
    // The trained policy greedily completes a corpus line from its prefix.
    const policy = new Policy(trainer.weights(), tok, { provider: 'cpu' });
    const [r] = await policy.generateIds([[257, ...tok.encode('git s')]], { maxNewTokens: 5, temperature: 0, stopIds: [] });
    assert.equal(tok.decode(r.tokenIds), 'tatus');
    await policy.dispose();
    await trainer.dispose();
  });

  for (const sign of [1, -1]) {
    it(`one PPO step with ${sign > 0 ? 'positive' : 'negative'} advantage ${sign > 0 ? 'raises' : 'lowers'} the log-prob of the action`, async () => {
      const c = SMALL_CONFIG;
      const w = initWeights(c, 12, 0.2);
      const prompt = [3, 14, 15, 9];
      const action = [26, 5, 35];
      const ids = [...prompt, ...action];
      const T = ids.length;
      const policy = new Policy(w, undefined, { provider: 'cpu' });
      const actionLogp = async (p: Policy) => {
        const [logits] = await p.logits([ids]);
        const lsm = logSoftmaxRows(logits, T, c.vocab_size);
        return ids.map((id, t) => (t === 0 ? 0 : lsm[(t - 1) * c.vocab_size + id]));
      };
      const before = await actionLogp(policy);
      const mask = ids.map((_, t) => (t >= prompt.length ? 1 : 0));
      const trainer = new PolicyTrainer(w, undefined, { provider: 'cpu' });
      const [m] = await trainer.train(
        { loss: 'ppo-token', batch: 1, seq: T },
        [{ inputIds: ids, lossMask: mask, advantages: new Array(T).fill(sign), oldLogp: before }],
        { lr: 1e-3 },
      );
      assert.ok(Math.abs(m.approx_kl) < 1e-5 && m.clip_frac === 0, 'on-policy: ratio 1, nothing clipped');
      assert.ok(Math.abs(m.loss + sign) < 1e-5, `loss −A·1 = ${-sign}, got ${m.loss}`);
      policy.setWeights(trainer.weights());
      const after = await actionLogp(policy);
      const sum = (a: number[]) => a.reduce((s, x, t) => s + (mask[t] ? x : 0), 0);
      const delta = sum(after) - sum(before);
      assert.ok(sign * delta > 1e-3, `action log-prob moved by ${delta}`);
      await policy.dispose();
      await trainer.dispose();
    });
  }

  it('no node of the turnwise-tiny training graph binds more than 8 tensors (WebGPU guarantees 8 storage buffers per shader)', () => {
    // Constant inputs (Split sizes, axes, shapes) are read on the host, not bound to the shader.
    for (const steps of [1, 2]) {
      const g = buildTrainingGraph({
        ...policyTrainingSpec(presetConfig('tiny'), { loss: 'ppo-token', batch: 2, seq: 8, kl: true, entropy: true }),
        steps,
      });
      const body = steps === 1 ? g : (g.nodes.find((n) => n.op === 'Loop')!.attrs.body as unknown as Graph);
      const wide = body.nodes
        .filter((n) => n.op !== 'Loop' && n.op !== 'If')
        .map((n) => ({ n, bound: n.inputs.filter((v) => v && !g.constValue(v)).length + n.outputs.length }))
        .filter((x) => x.bound > 8)
        .map((x) => `${x.n.name} (${x.bound})`);
      assert.deepEqual(wide, []);
    }
  });
});

describe('policy/training: padding', function () {
  this.timeout(60000);
  // Rollouts are generated left-padded and may be trained padded either way: a padded row must
  // give the log-probs the sampler saw, or the first PPO ratio is not 1. (Real tokens of a
  // left-padded row sit at shifted absolute positions; RoPE scores depend only on relative
  // positions, so that is harmless, as long as padding keys are masked out.)
  it('a left-padded or right-padded row trains on the same log-probs as the row alone', async () => {
    const c = SMALL_CONFIG;
    const w = initWeights(c, 8, 0.3);
    const r = new SeededRandom(4);
    const n = 9;
    const ids = Array.from({ length: n }, () => Math.floor(r.next() * c.vocab_size));
    const adv = Array.from({ length: n }, () => r.next() * 2 - 1);
    const mask = ids.map((_, i) => (i >= 3 ? 1 : 0));
    const old = ids.map(() => -3.5);
    const lossOf = async (b: TrainBatch, T: number) => {
      const t = new PolicyTrainer(w, undefined, { provider: 'cpu' });
      const [m] = await t.train({ loss: 'ppo-token', batch: 1, seq: T }, [b], { lr: 0 });
      await t.dispose();
      return m;
    };
    const alone = await lossOf({ inputIds: ids, lossMask: mask, advantages: adv, oldLogp: old }, n);
    const pad = 4;
    const left = await lossOf(
      {
        inputIds: [...Array(pad).fill(0), ...ids],
        attentionMask: [...Array(pad).fill(0), ...ids.map(() => 1)],
        lossMask: [...Array(pad).fill(0), ...mask],
        advantages: [...Array(pad).fill(0), ...adv],
        oldLogp: [...Array(pad).fill(0), ...old],
      },
      n + pad,
    );
    const right = await lossOf(
      {
        inputIds: [...ids, ...Array(pad).fill(0)],
        attentionMask: [...ids.map(() => 1), ...Array(pad).fill(0)],
        lossMask: [...mask, ...Array(pad).fill(0)],
        advantages: [...adv, ...Array(pad).fill(0)],
        oldLogp: [...old, ...Array(pad).fill(0)],
      },
      n + pad,
    );
    for (const m of [left, right]) {
      assert.ok(Math.abs(m.loss - alone.loss) < 1e-5, `loss ${m.loss} vs ${alone.loss}`);
      assert.ok(Math.abs(m.approx_kl - alone.approx_kl) < 1e-5, `approx_kl ${m.approx_kl} vs ${alone.approx_kl}`);
      assert.ok(Math.abs(m.entropy - alone.entropy) < 1e-5);
    }
  });
});

describe('policy/training: chunked causal attention', function () {
  this.timeout(60000);
  it('attention in query chunks gives the logits and weight gradients of full attention (float32, 1e-5)', async () => {
    const c = SMALL_CONFIG;
    const B = 2;
    const T = 12;
    const w = initWeights(c, 6, 0.3);
    const r = new SeededRandom(9);
    const ids = Array.from({ length: B * T }, () => Math.floor(r.next() * c.vocab_size));
    const mask = Array.from({ length: B * T }, (_, i) => (i === T + T - 1 || i === T + T - 2 ? 0 : 1)); // right padding in row 2
    const seeds = Float32Array.from({ length: B * T * c.vocab_size }, () => r.next() - 0.5);
    const run = async (chunks: number) => {
      const g = Graph.create('chunks');
      const W = new Map(graphParamSpecs(c).map((p) => [p.name, g.input(p.name, 'float32', p.shape)] as [string, Value]));
      const idsV = g.input('ids', 'int64', [B, T]);
      const m = g.input('mask', 'float32', [B, T]);
      const causal = new Float32Array(T * T);
      for (let i = 0; i < T; i++) for (let j = i + 1; j < T; j++) causal[i * T + j] = MASKED;
      const bias = g.add(g.tensor('float32', [1, 1, T, T], causal), g.reshape(g.mul(g.sub(1, m), MASKED), [B, 1, 1, T]));
      const positions = g.tensor(
        'int64',
        [1, T],
        Array.from({ length: T }, (_, i) => i),
      );
      const { logits } = buildForward(g, c, W, { ids: idsV, positions, bias, attentionChunks: chunks, dims: { B, T } });
      const loss = g.reduceSum(g.mul(logits, g.tensor('float32', [B, T, c.vocab_size], seeds)));
      const names = [...W.keys()];
      gradients(
        g,
        loss,
        names.map((n) => W.get(n)!),
      ).forEach((d, i) => g.output(d, `grad.${names[i]}`));
      g.output(logits, 'logits');
      const s = await OnnxSession.create(toModelProto(g), { provider: 'cpu' });
      const feeds: Record<string, HostTensor> = {
        ids: { dtype: 'int64', dims: [B, T], data: BigInt64Array.from(ids, BigInt) },
        mask: { dtype: 'float32', dims: [B, T], data: Float32Array.from(mask) },
      };
      Object.assign(feeds, weightFeeds(w));
      const out = await s.run(feeds);
      await s.release();
      return out;
    };
    const full = await run(1);
    for (const chunks of [2, 3, 4]) {
      const part = await run(chunks);
      for (const [name, t] of Object.entries(full)) {
        const ref = t.data as Float32Array;
        const scale = Math.max(1, ...Array.from(ref, Math.abs));
        const diff = maxAbsDiff(part[name].data as Float32Array, ref);
        assert.ok(diff < 1e-5 * scale, `${chunks} chunks, ${name}: ${diff} (scale ${scale})`);
      }
    }
    assert.throws(
      () =>
        buildForward(Graph.create(), c, new Map(), {
          ids: null as never,
          positions: null as never,
          bias: null as never,
          attentionChunks: 5,
          dims: { B, T },
        }),
      /divisible/,
    );
    assert.deepEqual([attentionChunksFor(128), attentionChunksFor(512), attentionChunksFor(1024), attentionChunksFor(1022)], [1, 2, 4, 2]);
  });
});
