// The policy on ONNX Runtime's WebGPU execution provider, on a real adapter (in CI: Mesa's
// lavapipe, a Vulkan driver that runs on the CPU). Each result is compared with the CPU provider
// or the float64 reference: the same generated graphs must compute the same numbers on every
// provider, and a step must not silently fall back to CPU (no warning may be raised).
import * as assert from 'node:assert/strict';
import { deviceKeptBytes, meterFeeds, probeProvider, toModelProto, type FeedRecord, type SessionSettings } from '../../src/onnx';
import { nodePlacements } from '../../src/onnx/placements';
import { presetConfig } from '../../src/policy/model/config';
import { buildStepGraph, graphParamSpecs, loraGraphSpecs } from '../../src/policy/model/graphs';
import { initAdapter, parseLoraConfig, type LoraAdapter } from '../../src/policy/files/lora';
import { buildTrainGraph } from '../../src/policy/training/graphs';
import { benchTrain } from '../../src/bench/train';
import { BENCH_SHAPES, benchModel } from '../../src/bench/model';
import { halfBytesPerToken } from '../../src/policy/model/quantize';
import { Policy } from '../../src/policy/inference/policy';
import { logSoftmax } from '../../src/policy/inference/sampling';
import { referenceLogits } from '../support/reference-forward';
import { PolicyTrainer, type TrainBatch } from '../../src/policy/training/trainer';
import { initWeights, SeededRandom } from '../../src/policy/model/weights';
import { maxAbsDiff, SMALL_CONFIG } from '../unit/policy/helpers';

function batchOf(B: number, T: number, seed: number): TrainBatch {
  const r = new SeededRandom(seed);
  const n = B * T;
  return {
    inputIds: Array.from({ length: n }, () => Math.floor(r.next() * SMALL_CONFIG.vocab_size)),
    lossMask: Array.from({ length: n }, (_, i) => (i % T >= 2 ? 1 : 0)),
    advantages: Array.from({ length: n }, () => r.next() * 2 - 1),
    oldLogp: Array.from({ length: n }, () => -3.7 + r.next() * 0.4),
    refLogp: Array.from({ length: n }, () => -3.7 + r.next() * 0.4),
  };
}

function relClose(a: number, b: number, tol: number): boolean {
  return Math.abs(a - b) <= tol * Math.max(1, Math.abs(a), Math.abs(b));
}

describe('webgpu: the policy on a real WebGPU adapter', function () {
  this.timeout(300000);
  const warnings: string[] = [];
  const webgpu: SessionSettings = { provider: 'webgpu', onWarning: (m) => warnings.push(m) };
  const cpu: SessionSettings = { provider: 'cpu' };
  const weights = initWeights(SMALL_CONFIG, 11, 0.3);

  before(async () => {
    const p = await probeProvider('webgpu');
    if (!p.ok) throw new Error(`no WebGPU adapter: ${p.error}`);
  });
  afterEach(() => assert.deepEqual(warnings.splice(0), [], 'a WebGPU session fell back to CPU'));

  it('logits equal the float64 reference (1e-4), and the session is a WebGPU one', async () => {
    const policy = new Policy(weights, undefined, webgpu);
    assert.equal(await policy.provider, 'webgpu');
    const seq = Array.from({ length: 29 }, (_, i) => (i * 5 + 1) % SMALL_CONFIG.vocab_size);
    const [got] = await policy.logits([seq]);
    const diff = maxAbsDiff(got, referenceLogits(weights, seq));
    assert.ok(diff < 1e-4, `max diff ${diff}`);
    await policy.dispose();
  });

  it('KV-cache decode on WebGPU: the tokens of full recomputation, log-probs of the reference (1e-4)', async () => {
    const policy = new Policy(weights, undefined, webgpu);
    const prompts = [
      [1, 2, 3, 4, 5],
      [6, 7],
    ];
    const opts = { maxNewTokens: 8, temperature: 0, stopIds: [] };
    const kv = await policy.generateIds(prompts, { ...opts, kvCache: true });
    const full = await policy.generateIds(prompts, { ...opts, kvCache: false });
    assert.deepEqual(
      kv.map((r) => r.tokenIds),
      full.map((r) => r.tokenIds),
    );
    const V = SMALL_CONFIG.vocab_size;
    for (let b = 0; b < prompts.length; b++) {
      const ref = referenceLogits(weights, [...prompts[b], ...kv[b].tokenIds]);
      for (let t = 0; t < 8; t++) {
        const pos = prompts[b].length - 1 + t;
        const lp = logSoftmax(ref.subarray(pos * V, (pos + 1) * V));
        assert.ok(Math.abs(lp[kv[b].tokenIds[t]] - kv[b].logprobs[t]) < 1e-4, `row ${b} token ${t}`);
      }
    }
    await policy.dispose();
  });

  it('decode steps looped in one run (the default where weights are copied per run) draw on WebGPU what one step per run draws', async () => {
    const run = async (perRun: number) => {
      const policy = new Policy(weights, undefined, webgpu);
      policy.decodeStepsPerRun = perRun;
      const seqs = [[1, 2, 3, 4, 5], [6, 7], [9]].map((p) => policy.newSequence(p));
      const out = await policy.sample(
        seqs.map((seq, b) => ({ seq, seed: b, maxNewTokens: 9 + b, temperature: b === 0 ? 0 : 1, stopIds: [] })),
      );
      await policy.dispose();
      return out;
    };
    const [one, looped] = [await run(1), await run(4)];
    assert.deepEqual(
      looped.map((r) => r.tokenIds),
      one.map((r) => r.tokenIds),
    );
    looped.forEach((r, b) =>
      r.logprobs.forEach((lp, t) =>
        assert.ok(Math.abs(lp - one[b].logprobs[t]) < 1e-4, `row ${b} token ${t}: ${lp} vs ${one[b].logprobs[t]}`),
      ),
    );
  });

  it('a training step on WebGPU equals the CPU step: metrics and both AdamW moments', async () => {
    const o = { loss: 'ppo-token' as const, batch: 2, seq: 12 };
    const hyper = { lr: 1e-3, weightDecay: 0.1, klCoef: 0.2, entCoef: 0.01, maxGradNorm: 0.5 };
    const batch = batchOf(2, 12, 3);
    const run = async (settings: SessionSettings) => {
      const t = new PolicyTrainer(weights, undefined, settings);
      const [m] = await t.train(o, [batch], hyper);
      const opt = t.optimizerState();
      await t.dispose();
      return { m, opt };
    };
    const g = await run(webgpu);
    const c = await run(cpu);
    for (const k of ['loss', 'pg_loss', 'kl', 'entropy', 'approx_kl', 'grad_norm', 'clip_frac'] as const) {
      assert.ok(relClose(g.m[k], c.m[k], 1e-4), `${k}: webgpu ${g.m[k]} vs cpu ${c.m[k]}`);
    }
    assert.ok(c.m.grad_norm > 0.5, 'clipping was active');
    // m = (1 − β1)·clipped gradient and v = (1 − β2)·gradient²: the gradients themselves, compared.
    for (const [name, a] of g.opt.expAvg) {
      const b = c.opt.expAvg.get(name)!;
      const scale = Math.max(...Array.from(b, Math.abs));
      assert.ok(maxAbsDiff(a, b) <= 1e-4 * scale + 1e-12, `${name}: m differs by ${maxAbsDiff(a, b)} (scale ${scale})`);
      const va = g.opt.expAvgSq.get(name)!;
      const vb = c.opt.expAvgSq.get(name)!;
      const vs = Math.max(...Array.from(vb, Math.abs));
      assert.ok(maxAbsDiff(va, vb) <= 2e-4 * vs + 1e-18, `${name}: v differs`);
    }
  });

  it('K steps in one Loop run on WebGPU equal K separate runs on WebGPU', async () => {
    const o = { loss: 'gspo-seq' as const, batch: 2, seq: 10 };
    const batches = [1, 2, 3].map((s) => batchOf(2, 10, s));
    const hyper = { lr: 3e-3, weightDecay: 0.01 };
    const loop = new PolicyTrainer(weights, undefined, webgpu);
    const ml = await loop.train(o, batches, hyper);
    const sep = new PolicyTrainer(weights, undefined, webgpu);
    const ms = [];
    for (const b of batches) ms.push(...(await sep.train(o, [b], hyper)));
    for (let k = 0; k < 3; k++) assert.ok(relClose(ml[k].loss, ms[k].loss, 1e-5), `step ${k}: ${ml[k].loss} vs ${ms[k].loss}`);
    assert.notEqual(ml[2].loss, ml[0].loss);
    const a = loop.weights().tensors;
    const b = sep.weights().tensors;
    let diff = 0;
    for (const [name, x] of a) diff = Math.max(diff, maxAbsDiff(x, b.get(name)!));
    assert.ok(diff < 1e-5, `max weight difference ${diff}`);
    await loop.dispose();
    await sep.dispose();
  });

  it('weights stay on the device: after the first run, prefill, decode, scoring and a LoRA step feed no weight bytes from the host, and give the CPU results', async () => {
    const lora = parseLoraConfig({ r: 4, lora_alpha: 8, target_modules: ['q_proj', 'v_proj', 'down_proj'] }, 'test');
    const adapter: LoraAdapter = initAdapter(SMALL_CONFIG, lora, 5);
    const rng = new SeededRandom(9);
    for (const [k, t] of adapter.tensors) if (k.includes('lora_B')) for (let i = 0; i < t.length; i++) t[i] = (rng.next() - 0.5) * 0.2;
    const baseNames = new Set(graphParamSpecs(SMALL_CONFIG).map((p) => p.name));
    const adapterNames = new Set(loraGraphSpecs(SMALL_CONFIG, { ...lora, target_modules: [...lora.target_modules] }).map((p) => p.name));
    const rows = [
      [1, 2, 3, 4, 5, 6],
      [7, 8, 9],
    ];
    const batch = batchOf(2, 10, 4);
    const work = async (settings: SessionSettings, meter: boolean) => {
      const policy = new Policy(weights, undefined, settings, adapter);
      const trainer = new PolicyTrainer(policy.baseWeights(), undefined, settings, { adapter }, policy.baseFeeds());
      const once = async () => {
        const seqs = rows.map((r) => policy.newSequence(r));
        const drawn = await policy.sample(seqs.map((seq, b) => ({ seq, seed: b, maxNewTokens: 5, temperature: 1, stopIds: [] })));
        const scored = await policy.tokenLogprobs(rows);
        const base = await policy.tokenLogprobs(rows, { adapter: false });
        const [m] = await trainer.train({ loss: 'ppo-token', batch: 2, seq: 10 }, [batch], { lr: 1e-3, klCoef: 0.1 });
        return { drawn, scored, base, m };
      };
      await once(); // the first runs upload the weights
      const meterOn = meter ? meterFeeds() : undefined;
      const r = await once();
      meterOn?.stop();
      const out = { ...r, records: meterOn?.records ?? [], kept: deviceKeptBytes() };
      await trainer.dispose();
      await policy.dispose();
      return out;
    };
    const g = await work(webgpu, true);
    const c = await work(cpu, false);
    // Counted from the feeds: every run on WebGPU read its weights from the device.
    assert.ok(g.records.length >= 4, `${g.records.length} runs metered`);
    const fed = (r: FeedRecord, names: Set<string>) => Object.keys(r.byName).filter((k) => names.has(k));
    for (const r of g.records) {
      assert.equal(r.provider, 'webgpu');
      assert.deepEqual(fed(r, baseNames), [], 'base weights fed from the host after the first run');
      assert.ok(r.deviceTensors >= baseNames.size, `${r.deviceTensors} tensors came from the device`);
      assert.equal(r.uploadBytes, 0, 'nothing uploaded again');
    }
    // The policy's adapter is kept too; only the training step, whose state the adapter is, feeds it.
    const adapterFed = g.records.filter((r) => fed(r, adapterNames).length > 0);
    assert.equal(adapterFed.length, 1, `${adapterFed.length} runs fed the adapter from the host`);
    assert.ok('input_ids' in adapterFed[0].byName && Object.keys(adapterFed[0].byName).some((k) => k.includes('loss_mask')));
    const weightBytes = [...weights.tensors.values()].reduce((n, t) => n + t.byteLength, 0);
    assert.ok(g.kept >= weightBytes, `kept ${g.kept} bytes, weights ${weightBytes}`);
    // The same numbers as the CPU provider.
    assert.deepEqual(
      g.drawn.map((r) => r.tokenIds),
      c.drawn.map((r) => r.tokenIds),
    );
    g.drawn.forEach((r, b) => r.logprobs.forEach((lp, t) => assert.ok(Math.abs(lp - c.drawn[b].logprobs[t]) < 1e-4, `draw ${b}.${t}`)));
    for (const k of ['scored', 'base'] as const)
      g[k].forEach((r, b) => assert.ok(maxAbsDiff(r, c[k][b]) < 1e-4, `${k} row ${b}: ${maxAbsDiff(r, c[k][b])}`));
    for (const k of ['loss', 'pg_loss', 'kl', 'grad_norm'] as const)
      assert.ok(relClose(g.m[k], c.m[k], 1e-4), `${k}: ${g.m[k]} vs ${c.m[k]}`);
    // Released with the policy and the trainer.
    await new Promise((r) => setImmediate(r));
    assert.equal(deviceKeptBytes(), 0);
  });

  it("the KV cache stays on the device through a sample call: after its first draw no step feeds cache bytes, and the draws are the CPU's", async () => {
    const prompts = [
      [1, 2, 3, 4, 5, 6, 7],
      [8, 9],
      [10, 11, 12],
    ];
    const run = async (settings: SessionSettings, meter: boolean) => {
      const p = new Policy(weights, undefined, settings);
      const seqs = prompts.map((r) => p.newSequence(r));
      await p.extend(seqs.map((seq) => ({ seq }))); // the prompts' prefill, outside the metered call
      const m = meter ? meterFeeds() : undefined;
      // Budgets that keep every row going, so the call is one round (no regathering).
      const rows = await p.sample(seqs.map((seq, b) => ({ seq, seed: b, maxNewTokens: 9, temperature: 1, stopIds: [] })));
      m?.stop();
      // A second call continues from the sequences' caches: their host copies must hold every step.
      const more = await p.sample(seqs.map((seq, b) => ({ seq, seed: 10 + b, maxNewTokens: 4, temperature: 0, stopIds: [] })));
      await p.dispose();
      return { rows, more, records: m?.records ?? [] };
    };
    const g = await run(webgpu, true);
    const c = await run(cpu, false);
    assert.deepEqual(
      g.rows.map((r) => r.tokenIds),
      c.rows.map((r) => r.tokenIds),
    );
    assert.deepEqual(
      g.more.map((r) => r.tokenIds),
      c.more.map((r) => r.tokenIds),
    );
    g.rows.forEach((r, b) => r.logprobs.forEach((lp, t) => assert.ok(Math.abs(lp - c.rows[b].logprobs[t]) < 1e-4, `row ${b} token ${t}`)));
    const cacheFed = g.records.map((r) => Object.keys(r.byName).filter((k) => /^cache\.\d+\./.test(k)).length);
    assert.ok(g.records.length >= 8, `${g.records.length} runs`);
    // The call's first run (the step that takes each row's pending token) and its first draw read the host's cache; no run after them.
    assert.ok(cacheFed[0] > 0 && cacheFed[1] > 0, `cache tensors fed per run: ${cacheFed.join(' ')}`);
    assert.deepEqual(cacheFed.slice(2), new Array(cacheFed.length - 2).fill(0), `cache tensors fed per run: ${cacheFed.join(' ')}`);
  });

  it("the AdamW moments stay on the device between LoRA steps: no step after the first feeds them, and they read back as the CPU's", async () => {
    const lora = parseLoraConfig({ r: 4, lora_alpha: 8, target_modules: ['q_proj', 'v_proj', 'down_proj'] }, 'test');
    const adapter = initAdapter(SMALL_CONFIG, lora, 8);
    const batches = [5, 6, 7, 8].map((sd) => batchOf(2, 10, sd));
    const o = { loss: 'ppo-token' as const, batch: 2, seq: 10 };
    const hyper = { lr: 3e-3, weightDecay: 0.01 };
    const run = async (settings: SessionSettings, meter: boolean) => {
      const t = new PolicyTrainer(weights, undefined, settings, { adapter }, undefined, { keepMoments: true });
      const metrics = [...(await t.train(o, [batches[0]], hyper))];
      const m = meter ? meterFeeds() : undefined;
      metrics.push(...(await t.train(o, [batches[1]], hyper)), ...(await t.train(o, [batches[2]], hyper)));
      m?.stop();
      if (settings.provider === 'webgpu')
        assert.throws(() => t.adapterOptimizerState(), /moments are on the device and were not read back/);
      await t.syncMoments();
      const mid = t.adapterOptimizerState()!;
      // Reading them back leaves the device's copies in place: one more step goes on from them.
      metrics.push(...(await t.train(o, [batches[3]], hyper)));
      await t.syncMoments();
      const end = { opt: t.adapterOptimizerState()!, adapter: t.adapter()!, records: m?.records ?? [] };
      await t.dispose();
      return { metrics, mid, ...end };
    };
    const g = await run(webgpu, true);
    const c = await run(cpu, false);
    const moments = g.records.flatMap((r) => Object.keys(r.byName).filter((k) => /\.adam_[mv]$/.test(k)));
    assert.ok(g.records.length >= 2, `${g.records.length} runs`);
    assert.deepEqual(moments, [], 'moments fed from the host after the first step');
    g.metrics.forEach((m, k) => assert.ok(relClose(m.loss, c.metrics[k].loss, 1e-4), `step ${k}: ${m.loss} vs ${c.metrics[k].loss}`));
    for (const [which, a, b] of [
      ['m after 3 steps', g.mid.expAvg, c.mid.expAvg],
      ['v after 3 steps', g.mid.expAvgSq, c.mid.expAvgSq],
      ['m after 4 steps', g.opt.expAvg, c.opt.expAvg],
      ['adapter after 4 steps', g.adapter.tensors, c.adapter.tensors],
    ] as const)
      for (const [name, x] of a) {
        const y = b.get(name)!;
        const scale = Math.max(1e-12, ...Array.from(y, Math.abs));
        assert.ok(maxAbsDiff(x, y) <= 2e-4 * scale, `${which}, ${name}: differs by ${maxAbsDiff(x, y)} (scale ${scale})`);
      }
    assert.equal(g.opt.step, 4);
  });

  it('float16 rollouts on WebGPU: half-precision products draw within 0.01 nats (mean; 0.05 at most) of the float32 policy, their copies kept on the device', async () => {
    const lora = parseLoraConfig({ r: 4, lora_alpha: 8, target_modules: ['q_proj', 'down_proj'] }, 'test');
    const adapter: LoraAdapter = initAdapter(SMALL_CONFIG, lora, 6);
    const half = new Policy(weights, undefined, { ...webgpu, rolloutPrecision: 'float16' }, adapter);
    const full = new Policy(weights, undefined, webgpu, adapter);
    assert.equal(await half.rolloutPrecision(), 'float16');
    const prompts = [
      [1, 2, 3, 4, 5],
      [6, 7, 8],
      [9, 10],
    ];
    const draw = (p: Policy, seed: number) => {
      const seqs = prompts.map((r) => p.newSequence(r));
      return p
        .sample(seqs.map((seq, b) => ({ seq, seed: seed + b, maxNewTokens: 12, temperature: 1, stopIds: [] })))
        .then((rows) => ({ rows, seqs }));
    };
    await draw(half, 0); // uploads the weights and their float16 copies
    const meter = meterFeeds();
    const { rows, seqs } = await draw(half, 100);
    meter.stop();
    for (const r of meter.records) {
      assert.deepEqual(
        Object.keys(r.byName).filter((k) => k.endsWith('.f16') || graphParamSpecs(SMALL_CONFIG).some((p) => p.name === k)),
        [],
        'weights or their float16 copies fed from the host',
      );
      assert.equal(r.uploadBytes, 0);
    }
    // The float32 policy scores the float16 sampler's own draws.
    const scored = await full.tokenLogprobs(seqs.map((s) => s.tokens));
    let maxDiff = 0;
    let sum = 0;
    let n = 0;
    rows.forEach((r, b) => {
      const from = seqs[b].tokens.length - r.tokenIds.length;
      r.logprobs.forEach((lq, t) => {
        const d = Math.abs(lq - scored[b][from + t]);
        maxDiff = Math.max(maxDiff, d);
        sum += d;
        n++;
      });
    });
    console.log(
      `      float16 vs float32 log-probs: mean ${(sum / n).toExponential(2)}, max ${maxDiff.toExponential(2)} nats over ${n} tokens`,
    );
    assert.ok(sum / n < 0.01 && maxDiff < 0.05, `float16 draws ${sum / n} nats (mean), ${maxDiff} (max) from float32`);
    // The products really ran in half precision: the log-probs are not float32's to the last bit.
    assert.ok(maxDiff > 1e-6, `no difference at all (${maxDiff}): the float16 session did not run`);
    await half.dispose();
    await full.dispose();
  });

  it('int8 rollouts on WebGPU: MatMulNBits on the device, the codes held by the session, as close to float32 as the CPU int8 sampler', async () => {
    const full = new Policy(weights, undefined, cpu);
    const prompts = [
      [1, 2, 3, 4, 5],
      [6, 7],
      [9, 3, 1],
    ];
    const drift = async (settings: SessionSettings, meter = false) => {
      const p = new Policy(weights, undefined, { ...settings, rolloutPrecision: 'int8' });
      assert.equal(await p.rolloutPrecision(), 'int8');
      const draw = async (seed: number) => {
        const seqs = prompts.map((r) => p.newSequence(r));
        const rows = await p.sample(seqs.map((seq, b) => ({ seq, seed: seed + b, maxNewTokens: 16, temperature: 1, stopIds: [] })));
        return { rows, seqs };
      };
      await draw(0);
      const m = meter ? meterFeeds() : undefined;
      const { rows, seqs } = await draw(50);
      m?.stop();
      const scored = await full.tokenLogprobs(seqs.map((s) => s.tokens));
      let sum = 0;
      let n = 0;
      rows.forEach((r, b) => {
        const from = seqs[b].tokens.length - r.tokenIds.length;
        r.logprobs.forEach((lq, t) => ((sum += Math.abs(lq - scored[b][from + t])), n++));
      });
      const provider = await p.provider;
      await p.dispose();
      return { mean: sum / n, records: m?.records ?? [], provider };
    };
    const g = await drift(webgpu, true);
    const c = await drift(cpu);
    assert.equal(g.provider, 'webgpu');
    assert.ok(g.mean > 0 && g.mean <= 2 * c.mean + 1e-3, `WebGPU int8 ${g.mean} nats from float32, the CPU's int8 ${c.mean}`);
    for (const r of g.records) {
      assert.equal(r.provider, 'webgpu');
      assert.deepEqual(
        Object.keys(r.byName).filter(
          (k) => k.endsWith('.codes') || k.endsWith('.scales') || graphParamSpecs(SMALL_CONFIG).some((p) => p.name === k),
        ),
        [],
        'codes or weights fed from the host',
      );
    }
    await full.dispose();
  });

  it('every float op of the training, prefill and decode graphs is placed on WebGPU, none on the CPU', () => {
    // ONNX Runtime runs nodes its WebGPU provider has no kernel for on the CPU, copying their
    // tensors off the GPU and back on every run (LogSoftmax did, with the logits). Only small
    // integer index/shape ops (its own choice) and the Loop's control flow may stay there.
    const c = presetConfig('tiny');
    const graphs = [
      buildTrainGraph(c, { loss: 'ppo-token', batch: 2, seq: 16, kl: true, entropy: true }, 1),
      buildTrainGraph(c, { loss: 'gspo-seq', batch: 2, seq: 16 }, 3),
      buildStepGraph(c, 'prefill'),
      buildStepGraph(c, 'decode'),
      buildStepGraph(c, 'decode', undefined, 'all', 'weights-left'),
      buildStepGraph(c, 'decode', undefined, 'sample', 'weights-left'),
    ];
    const placed = nodePlacements(
      'webgpu',
      graphs.map((g, i) => ({ name: `${g.name}#${i}`, bytes: toModelProto(g) })),
    );
    for (const p of placed) {
      assert.equal(p.error, undefined, `${p.graph}: ${p.error}`);
      assert.ok((p.providers.WebGpuExecutionProvider?.count ?? 0) > 0, `${p.graph}: nothing on WebGPU ${JSON.stringify(p.providers)}`);
    }
    // Shape arithmetic (int64: the Slice and Concat of a Shape, e.g. the output shape of a
    // batched decode's products) stays on the CPU by ONNX Runtime's choice; these op types have
    // WebGPU kernels for float tensors, so a float node of theirs would be placed there.
    const allowed = new Set([
      'Slice',
      'Unsqueeze',
      'Squeeze',
      'Reshape',
      'Shape',
      'Cast',
      'Concat',
      'Greater',
      'Gather',
      'Identity',
      'Loop',
    ]);
    const heavy = placed.flatMap((p) => p.onCpu.filter((n) => !allowed.has(n.split(' ')[0])).map((n) => `${p.graph}: ${n}`));
    assert.deepEqual(heavy, []);
    // A batched decode's products share one lead shape: its shape arithmetic is a handful of
    // nodes, not a few per product (at the 0.5B shape it was 219 nodes, each a copy per step).
    const [single, rows] = [placed[3], placed[4]];
    assert.ok(
      rows.cpuNodes <= single.cpuNodes + 8,
      `batched decode: ${rows.cpuNodes} nodes on the CPU against the one-row decode's ${single.cpuNodes}: ${rows.onCpu.join(', ')}`,
    );
    for (const p of placed) {
      assert.equal(p.cpuNodes, p.onCpu.length, `${p.graph}: every CPU node is listed`);
      const gpu = p.providers.WebGpuExecutionProvider!.count;
      assert.ok(
        p.cpuNodes <= 0.1 * (gpu + p.cpuNodes),
        `${p.graph}: ${p.cpuNodes} of ${gpu + p.cpuNodes} nodes on the CPU: ${p.onCpu.join(', ')}`,
      );
    }
  });

  it('bench model on WebGPU: no weight bytes fed per decode step or per training step, float16, int8 and int4 decode beside float32', async () => {
    const r = await benchModel({ shape: 'tiny-test', settings: webgpu, torch: 'off' });
    assert.equal(r.provider, 'webgpu');
    assert.equal(r.decode_steps_per_run, 1, 'the weights kept on the device, a step per run');
    assert.equal(r.fed_weight_bytes_per_decode_step, 0);
    assert.equal(r.fed_weight_bytes_per_train_step, 0);
    assert.ok(r.fed_bytes_per_decode_step > 0 && r.fed_bytes_per_train_step > 0, 'the ids, the KV cache and the batch are still fed');
    assert.ok(r.decode_tokens_per_s_b1 > 0 && r.lora_train_tokens_per_s > 0);
    // On WebGPU the half-precision and quantized decodes are measured beside float32's by default.
    assert.deepEqual(Object.keys(r.decode_quantized).sort(), ['float16', 'int4', 'int8']);
    const h = r.decode_quantized.float16!;
    assert.ok(h.decode_tokens_per_s_b1 > 0 && h.kl_tokens > 0 && h.kl_to_float >= 0 && h.kl_to_float < 0.01, JSON.stringify(h));
    assert.equal(h.weights_bytes_per_token, halfBytesPerToken(BENCH_SHAPES['tiny-test']));
  });

  it('bench train runs turnwise-tiny on WebGPU and says so', async () => {
    const r = await benchTrain({
      batch: 1,
      seq: 16,
      steps: 1,
      k: 2,
      loopRepeats: 1,
      packedBatch: 1,
      packedSeq: 32,
      context: 24,
      decodeTokens: 3,
      settings: webgpu,
    });
    assert.equal(r.provider, 'webgpu');
    assert.ok(
      r.train_step_ms > 0 &&
        Number.isFinite(r.loop_speedup) &&
        r.decode_tokens_per_s_kv > 0 &&
        r.sft_packed_step_ms > 0 &&
        r.sequence_sample_tokens_per_s > 0,
    );
  });
});
