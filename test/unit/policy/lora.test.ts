// LoRA adapters in the PEFT layout, end to end on real ONNX Runtime: B = 0 gives exactly the
// base logits; an adapter's logits equal the float64 reference with it (whole and through the KV
// cache); the training graph's adapter gradients equal finite differences and a step changes the
// adapter only (the base's bytes stay); a merged model gives the base+adapter logits; saving,
// loading and saving again is byte-identical; adapters keyed as PEFT writes them load.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from '../../../src/cli/main';
import { TurnwiseError } from '../../../src/core/errors';
import { Trainer } from '../../../src/onnx/training';
import type { HostTensor } from '../../../src/onnx';
import { loadCheckpoint } from '../../../src/policy/files/checkpoint';
import type { ModelConfig } from '../../../src/policy/model/config';
import { loraFromGraphLayout, loraToGraphLayout, weightFeeds } from '../../../src/policy/model/graphs';
import { writeModelFolder } from '../../../src/policy/files/hf';
import {
  adapterParameterCount,
  initAdapter,
  inspectAdapterFolder,
  loadAdapter,
  loadAdapterOptimizer,
  loraScale,
  loraTargets,
  mergeAdapter,
  parseLoraConfig,
  saveAdapter,
  type LoraAdapter,
} from '../../../src/policy/files/lora';
import { adapterIsBase, TrainablePolicy } from '../../../src/policy/trainable';
import type { TrainBatch } from '../../../src/policy/training/trainer';
import { Policy } from '../../../src/policy/inference/policy';
import { logSoftmax } from '../../../src/policy/inference/sampling';
import { logSoftmaxRows, referenceLogits } from '../../support/reference-forward';
import { decodeSafetensors, encodeSafetensors } from '../../../src/policy/files/safetensors';
import { byteLevelTokenizerConfig, byteLevelTokenizerJson } from '../../../src/policy/files/tokenizer';
import { LOSS_HYPER_INPUTS, policyTrainingSpec } from '../../../src/policy/training/graphs';
import { initWeights, SeededRandom } from '../../../src/policy/model/weights';
import { GOLDEN_LLAMA, maxAbsDiff, SMALL_CONFIG } from './helpers';

const LLAMA: ModelConfig = {
  ...GOLDEN_LLAMA,
  hidden_size: 16,
  intermediate_size: 24,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 8,
  vocab_size: 40,
  attention_bias: true,
};

/** An adapter with B away from zero, so it changes the logits. */
function busyAdapter(c: ModelConfig, targets: 'all-linear' | string[], seed: number, r = 4): LoraAdapter {
  const a = initAdapter(c, parseLoraConfig({ r, lora_alpha: 8, target_modules: targets }, 'test'), seed);
  const rng = new SeededRandom(seed + 1);
  for (const [k, t] of a.tensors) if (k.includes('lora_B')) for (let i = 0; i < t.length; i++) t[i] = 0.3 * (2 * rng.next() - 1);
  return a;
}

describe('policy/lora: adapters in the PEFT layout', function () {
  this.timeout(120_000);
  let tmp: string;
  before(() => (tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-lora-'))));
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('reads and checks a LoRA block: all-linear, the default rank, every problem named', () => {
    const c = parseLoraConfig({ target_modules: 'all-linear' }, 'x');
    assert.deepEqual(c.target_modules, ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj']);
    assert.equal(c.r, 16);
    assert.equal(c.use_rslora, false);
    // PEFT's scaling: lora_alpha / r, or lora_alpha / √r with rsLoRA.
    assert.equal(loraScale({ r: 16, lora_alpha: 32, use_rslora: false }), 2);
    assert.equal(loraScale({ r: 16, lora_alpha: 32, use_rslora: true }), 8);
    assert.throws(
      () => parseLoraConfig({ r: 0, target_modules: ['q_proj', 'qkv'], bias: 'all', use_dora: true }, 'cfg.json'),
      (e: unknown) =>
        e instanceof TurnwiseError &&
        ['cfg.json', 'r must be a positive integer', '"qkv"', 'bias is "all"', 'DoRA'].every((s) => e.message.includes(s)),
    );
    // r 16 on all seven projections of every layer: r·(in + out) each.
    const t = loraTargets(SMALL_CONFIG, c);
    assert.equal(t.length, 7 * SMALL_CONFIG.num_hidden_layers);
    assert.equal(
      adapterParameterCount(SMALL_CONFIG, c),
      t.reduce((n, x) => n + 16 * (x.inDim + x.outDim), 0),
    );
    assert.equal(t[0].a, 'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight');
  });

  it("target_modules as a regular expression, by PEFT's rule for a string (fullmatch on the module's name)", () => {
    assert.deepEqual(parseLoraConfig({ target_modules: '.*\\.(q_proj|v_proj)' }, 'x').target_modules, ['q_proj', 'v_proj']);
    assert.deepEqual(parseLoraConfig({ target_modules: 'model\\.layers\\.\\d+\\.mlp\\.(gate|up|down)_proj' }, 'x').target_modules, [
      'gate_proj',
      'up_proj',
      'down_proj',
    ]);
    assert.deepEqual(parseLoraConfig({ target_modules: '.*(self_attn|mlp)\\..*' }, 'x').target_modules, [
      'q_proj',
      'k_proj',
      'v_proj',
      'o_proj',
      'gate_proj',
      'up_proj',
      'down_proj',
    ]);
    // fullmatch: a pattern for a part of the name matches nothing.
    assert.throws(() => parseLoraConfig({ target_modules: 'q_proj' }, 'cfg.json'), /matches none of the modules/);
    assert.throws(
      () => parseLoraConfig({ target_modules: 'model\\.layers\\.[0-3]\\.self_attn\\.q_proj' }, 'cfg.json'),
      /selects q_proj in some layers only \(layer 0 but not 4\)/,
    );
    assert.throws(() => parseLoraConfig({ target_modules: '(' }, 'cfg.json'), /not a regular expression/);
  });

  it('policy inspect describes an adapter folder and says whether its base is here; a quantized checkpoint is refused by name', async () => {
    const base = path.join(tmp, 'inspect-base');
    writeModelFolder(base, initWeights(LLAMA, 3, 0.1), {
      dtype: 'float32',
      tokenizerJson: byteLevelTokenizerJson(),
      tokenizerConfig: byteLevelTokenizerConfig(),
    });
    const ad = path.join(tmp, 'inspect-adapter');
    saveAdapter(
      ad,
      initAdapter(
        LLAMA,
        parseLoraConfig(
          { r: 4, lora_alpha: 8, use_rslora: true, target_modules: ['q_proj', 'v_proj'], base_model_name_or_path: base },
          'x',
        ),
        1,
      ),
      LLAMA,
    );
    const run = async (...argv: string[]) => {
      const out: string[] = [];
      const code = await main(['policy', 'inspect', ...argv], { out: (t) => out.push(t), err: (t) => out.push(t) });
      return { code, out: out.join('\n') };
    };
    const j = await run(ad, '--json');
    assert.equal(j.code, 0, j.out);
    const a = JSON.parse(j.out);
    assert.deepEqual(
      [a.kind, a.r, a.loraAlpha, a.useRslora, a.scale, a.targetModules, a.base.found],
      ['lora-adapter', 4, 8, true, 4, ['q_proj', 'v_proj'], base],
    );
    assert.match(
      (await run(ad)).out,
      /LoRA adapter {2}r 4, alpha 8, rsLoRA: B·A scaled by 4[\s\S]*targets {7}q_proj, v_proj in every layer[\s\S]*found: /,
    );
    // A base that is not here is said so, with what to do.
    const cfg = JSON.parse(fs.readFileSync(path.join(ad, 'adapter_config.json'), 'utf8'));
    fs.writeFileSync(path.join(ad, 'adapter_config.json'), JSON.stringify({ ...cfg, base_model_name_or_path: 'Qwen/Qwen2.5-0.5B' }));
    assert.match((await run(ad)).out, /base {10}"Qwen\/Qwen2.5-0.5B", not a model folder here: give it with --model BASE --adapter DIR/);
    // A damaged adapter_config.json is named; a byte-order mark before good JSON is skipped.
    fs.writeFileSync(path.join(ad, 'adapter_config.json'), '\uFEFF' + JSON.stringify(cfg));
    assert.equal(inspectAdapterFolder(ad).r, 4);
    fs.writeFileSync(path.join(ad, 'adapter_config.json'), '{"r": 4,');
    assert.throws(
      () => inspectAdapterFolder(ad),
      (e: unknown) => e instanceof TurnwiseError && e.code === 'invalid-file' && /adapter_config\.json is not valid JSON/.test(e.message),
    );
    // GPTQ / AWQ: refused by name before any tensor is read.
    const q = path.join(tmp, 'inspect-gptq');
    fs.cpSync(base, q, { recursive: true });
    const mc = JSON.parse(fs.readFileSync(path.join(q, 'config.json'), 'utf8'));
    fs.writeFileSync(path.join(q, 'config.json'), JSON.stringify({ ...mc, quantization_config: { quant_method: 'gptq', bits: 4 } }));
    const r = await run(q);
    assert.equal(r.code, 1);
    assert.match(
      r.out,
      /quantization_config \(quant_method "gptq"\): this is a GPTQ-quantized checkpoint, and Turnwise loads float weights/,
    );
    assert.throws(() => loadCheckpoint(q), /GPTQ-quantized checkpoint/);
  });

  it('saved in the PEFT layout; saved, loaded and saved again byte for byte; PEFT keys with an adapter name load too', () => {
    const a = busyAdapter(SMALL_CONFIG, ['q_proj', 'v_proj', 'down_proj'], 3);
    const d1 = path.join(tmp, 'a1');
    saveAdapter(d1, a, SMALL_CONFIG);
    const cfg = JSON.parse(fs.readFileSync(path.join(d1, 'adapter_config.json'), 'utf8'));
    for (const [k, v] of Object.entries({
      peft_type: 'LORA',
      task_type: 'CAUSAL_LM',
      r: 4,
      lora_alpha: 8,
      bias: 'none',
      fan_in_fan_out: false,
      use_rslora: false,
    }))
      assert.deepEqual(cfg[k], v, k);
    assert.deepEqual(cfg.target_modules, ['q_proj', 'v_proj', 'down_proj']);
    const st = decodeSafetensors(fs.readFileSync(path.join(d1, 'adapter_model.safetensors'))).tensors;
    assert.deepEqual(st.get('base_model.model.model.layers.1.self_attn.v_proj.lora_A.weight')!.shape, [4, 32]);
    assert.deepEqual(st.get('base_model.model.model.layers.1.mlp.down_proj.lora_B.weight')!.shape, [32, 4]);
    assert.equal(st.size, 3 * 2 * SMALL_CONFIG.num_hidden_layers);
    const d2 = path.join(tmp, 'a2');
    saveAdapter(d2, loadAdapter(d1, SMALL_CONFIG), SMALL_CONFIG);
    for (const f of ['adapter_config.json', 'adapter_model.safetensors'])
      assert.ok(fs.readFileSync(path.join(d1, f)).equals(fs.readFileSync(path.join(d2, f))), `${f} differs after a round trip`);
    // Keys as PEFT writes them for a named adapter (".lora_A.default.weight") are the same tensors.
    const named = path.join(tmp, 'peft-named');
    fs.mkdirSync(named);
    fs.copyFileSync(path.join(d1, 'adapter_config.json'), path.join(named, 'adapter_config.json'));
    fs.writeFileSync(
      path.join(named, 'adapter_model.safetensors'),
      encodeSafetensors(new Map([...st].map(([k, t]) => [k.replace(/\.lora_([AB])\.weight$/, '.lora_$1.default.weight'), t]))),
    );
    const back = loadAdapter(named, SMALL_CONFIG);
    for (const [k, t] of a.tensors) assert.deepEqual(back.tensors.get(k), t, k);
    // An adapter of another base is refused, naming the tensor and the shapes.
    assert.throws(
      () => loadAdapter(d1, { ...SMALL_CONFIG, hidden_size: 48 }),
      (e: unknown) => e instanceof TurnwiseError && /has shape \[4,32\], the base model needs \[4,48\]/.test(e.message),
    );
  });

  it('with B = 0 the logits are exactly the base logits; with a trained B they equal the reference with the adapter (whole and by KV cache)', async () => {
    for (const c of [SMALL_CONFIG, LLAMA]) {
      const w = initWeights(c, 7, 0.3);
      const ids = Array.from({ length: 30 }, (_, i) => (i * 7 + 3) % c.vocab_size);
      const base = new Policy(w, undefined, { provider: 'cpu' });
      const zero = new Policy(
        w,
        undefined,
        { provider: 'cpu' },
        initAdapter(c, parseLoraConfig({ r: 4, target_modules: 'all-linear' }, 'test'), 1),
      );
      const [lb] = await base.logits([ids]);
      const [lz] = await zero.logits([ids]);
      assert.equal(maxAbsDiff(lb, lz), 0, 'B = 0 changes nothing');
      const ad = busyAdapter(c, 'all-linear', 9);
      const withAd = new Policy(w, undefined, { provider: 'cpu' }, ad);
      const [la] = await withAd.logits([ids]);
      const ref = referenceLogits(w, ids, { adapter: ad });
      assert.ok(maxAbsDiff(la, ref) < 1e-4, `adapter logits differ from the reference by ${maxAbsDiff(la, ref)}`);
      assert.ok(maxAbsDiff(la, lb) > 1e-2, 'the adapter changes the logits');
      const s = withAd.newSequence(ids.slice(0, 10));
      const [row] = await withAd.sample([{ seq: s, maxNewTokens: 8, temperature: 0, stopIds: [] }]);
      const full = referenceLogits(w, s.tokens, { adapter: ad });
      row.tokenIds.forEach((id, t) => {
        const lp = logSoftmax(full.subarray((9 + t) * c.vocab_size, (10 + t) * c.vocab_size));
        assert.ok(Math.abs(lp[id] - row.logprobs[t]) < 1e-4);
      });
      for (const p of [base, zero, withAd]) await p.dispose();
    }
  });

  it('a training step on the adapter: gradients equal finite differences of the float64 reference, and only the adapter changes', async () => {
    const c = LLAMA;
    const w = initWeights(c, 11, 0.3);
    const ad = busyAdapter(c, ['q_proj', 'o_proj', 'up_proj', 'down_proj'], 13, 2);
    const B = 2;
    const T = 6;
    const rng = new SeededRandom(4);
    const ids = Array.from({ length: B * T }, () => Math.floor(rng.next() * c.vocab_size));
    const weightsMask = Float32Array.from({ length: B * T }, (_, i) => (i % T >= 2 ? 0.5 + (i % 3) * 0.25 : 0));
    const refLoss = (a: LoraAdapter) => {
      let num = 0;
      let den = 0;
      for (let r = 0; r < B; r++) {
        const row = ids.slice(r * T, (r + 1) * T);
        const lsm = logSoftmaxRows(referenceLogits(w, row, { adapter: a }), T, c.vocab_size);
        for (let t = 1; t < T; t++) {
          num += -weightsMask[r * T + t] * lsm[(t - 1) * c.vocab_size + row[t]];
          den += weightsMask[r * T + t];
        }
      }
      return num / den;
    };
    const spec = policyTrainingSpec(c, { loss: 'sft', batch: B, seq: T, weightDecay: false, lora: ad.config });
    assert.deepEqual(spec.params.map((p) => p.name).sort(), [...ad.tensors.keys()].sort(), 'only the adapter is trained');
    assert.equal(spec.frozen!.length, Object.keys(weightFeeds(w)).length, 'every base weight is a frozen input');
    const trainer = new Trainer(spec, 'lora-test', { provider: 'cpu' });
    const base = weightFeeds(w);
    const baseBytes = Object.fromEntries(Object.entries(base).map(([k, t]) => [k, Buffer.from((t.data as Float32Array).buffer.slice(0))]));
    // One step per run: the batch is not stacked per step.
    const t2 = (a: Float32Array): HostTensor => ({ dtype: 'float32', dims: [B, T], data: a });
    const batch: Record<string, HostTensor> = {
      ...base,
      input_ids: { dtype: 'int64', dims: [B, T], data: BigInt64Array.from(ids, BigInt) },
      attention_mask: t2(new Float32Array(B * T).fill(1)),
      loss_mask: t2(weightsMask),
      action_mask: t2(weightsMask),
    };
    for (const k of LOSS_HYPER_INPUTS) batch[k] = { dtype: 'float32', dims: [], data: Float32Array.of(k === 'temperature' ? 1 : 0) };
    const graph = loraToGraphLayout(c, ad);
    const state = {
      params: Object.fromEntries(graph),
      m: Object.fromEntries([...graph].map(([k, v]) => [k, new Float32Array(v.length)])),
      v: Object.fromEntries([...graph].map(([k, v]) => [k, new Float32Array(v.length)])),
      step: 0,
    };
    // lr 0 and no clipping: the step reports the exact loss and gradient norm and moves nothing.
    const probe = await trainer.step(state, batch, { lr: 0, max_grad_norm: 1e9, weight_decay: 0 });
    assert.ok(Math.abs(probe.metrics.loss[0] - refLoss(ad)) < 1e-5, `loss ${probe.metrics.loss[0]} vs reference ${refLoss(ad)}`);
    // The gradient of the adapter from one Adam step's first moment: m = (1 − β1)·g.
    const grads = loraFromGraphLayout(
      c,
      ad.config,
      new Map(Object.entries(probe.state.m).map(([k, v]) => [k, Float32Array.from(v, (x) => x / 0.1)])),
    );
    let worst = 0;
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
        const err = Math.abs(got - fd) / Math.max(1e-3, Math.abs(fd));
        worst = Math.max(worst, err);
        assert.ok(err < 2e-3, `${key}[${i}]: onnx ${got} vs finite difference ${fd}`);
      }
    }
    assert.ok(worst < 2e-3);
    // A real step: the adapter moves, the base's bytes (fed, not trained) stay as they were.
    const moved = await trainer.step(state, batch, { lr: 1e-2, weight_decay: 0 });
    assert.ok(
      Object.entries(moved.state.params).some(([k, v]) => maxAbsDiff(v, state.params[k]) > 1e-4),
      'the adapter changed',
    );
    assert.deepEqual(Object.keys(moved.state.params).sort(), [...ad.tensors.keys()].sort(), 'the step returns the adapter only');
    for (const [k, t] of Object.entries(base)) assert.ok(Buffer.from((t.data as Float32Array).buffer).equals(baseBytes[k]), `${k} changed`);
    await trainer.release();
  });

  it('turnwise policy merge writes a Hugging Face folder in the base dtype whose logits are the base + adapter logits (1e-5)', async () => {
    const c: ModelConfig = { ...LLAMA, vocab_size: 300, eos_token_id: 2 };
    const w = initWeights(c, 17, 0.3);
    const baseDir = path.join(tmp, 'merge-base');
    writeModelFolder(baseDir, w, {
      dtype: 'float32',
      tokenizerJson: byteLevelTokenizerJson(),
      tokenizerConfig: byteLevelTokenizerConfig(),
    });
    // What a Hugging Face folder holds beside what Turnwise writes (Qwen's and Llama's config keys, a
    // generation_config whose eos ids are not config.json's, the slow tokenizer's files).
    const cfg = JSON.parse(fs.readFileSync(path.join(baseDir, 'config.json'), 'utf8'));
    fs.writeFileSync(
      path.join(baseDir, 'config.json'),
      JSON.stringify(
        { ...cfg, max_window_layers: 21, sliding_window: 131072, use_cache: true, pretraining_tp: 1, transformers_version: '4.44.0' },
        null,
        4,
      ) + '\n',
    );
    fs.writeFileSync(
      path.join(baseDir, 'generation_config.json'),
      JSON.stringify({ bos_token_id: 1, eos_token_id: [263, 261], transformers_version: '4.44.0' }, null, 2),
    );
    fs.writeFileSync(path.join(baseDir, 'vocab.json'), '{"a": 0}');
    fs.writeFileSync(path.join(baseDir, 'merges.txt'), '#version: 0.2\na b\n');
    fs.writeFileSync(path.join(baseDir, 'added_tokens.json'), '{"<|x|>": 299}');
    const SIDE_FILES = [
      'config.json',
      'generation_config.json',
      'vocab.json',
      'merges.txt',
      'added_tokens.json',
      'tokenizer.json',
      'tokenizer_config.json',
    ];
    const ad = busyAdapter(c, 'all-linear', 19);
    const adDir = path.join(tmp, 'merge-adapter');
    saveAdapter(adDir, ad, c);
    const out = path.join(tmp, 'merged');
    const err: string[] = [];
    assert.equal(
      await main(['policy', 'merge', '--model', baseDir, '--adapter', adDir, '--out', out, '--json'], {
        out: () => undefined,
        err: (t) => err.push(t),
      }),
      0,
      err.join('\n'),
    );
    for (const f of ['config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json'])
      assert.ok(fs.existsSync(path.join(out, f)), f);
    // Everything but the weights is the base's, byte for byte: config keys Turnwise does not read,
    // generation_config's own eos ids, the tokenizer's side files.
    for (const f of SIDE_FILES)
      assert.ok(fs.readFileSync(path.join(out, f)).equals(fs.readFileSync(path.join(baseDir, f))), `${f} is the base's`);
    assert.ok(
      !fs.readFileSync(path.join(out, 'model.safetensors')).equals(fs.readFileSync(path.join(baseDir, 'model.safetensors'))),
      'the weights are merged',
    );
    const merged = loadCheckpoint(out).weights;
    assert.equal(merged.config.torch_dtype, 'float32');
    const ids = Array.from({ length: 25 }, (_, i) => (i * 5 + 1) % c.vocab_size);
    const pm = new Policy(merged, undefined, { provider: 'cpu' });
    const pa = new Policy(w, undefined, { provider: 'cpu' }, ad);
    const [lm] = await pm.logits([ids]);
    const [la] = await pa.logits([ids]);
    assert.ok(maxAbsDiff(lm, la) < 1e-5, `merged logits differ by ${maxAbsDiff(lm, la)}`);
    assert.ok(
      maxAbsDiff(
        mergeAdapter(w, ad).tensors.get('model.layers.0.self_attn.q_proj.weight')!,
        merged.tensors.get('model.layers.0.self_attn.q_proj.weight')!,
      ) === 0,
    );
    await pm.dispose();
    await pa.dispose();
    // --adapter where a model is given: policy logits with the adapter give the adapter's logits.
    const outLines: string[] = [];
    assert.equal(
      await main(['policy', 'logits', '--model', baseDir, '--adapter', adDir, '--ids', ids.join(','), '--provider', 'cpu', '--json'], {
        out: (t) => outLines.push(t),
        err: (t) => err.push(t),
      }),
      0,
      err.join('\n'),
    );
    const j = JSON.parse(outLines.join('\n'));
    const last = j.logits[j.logits.length - 1] as number[];
    assert.ok(maxAbsDiff(last, la.subarray((ids.length - 1) * c.vocab_size)) < 1e-4);
    // Merging into an existing model folder needs --force.
    assert.equal(
      await main(['policy', 'merge', '--model', baseDir, '--adapter', adDir, '--out', out], {
        out: () => undefined,
        err: (t) => err.push(t),
      }),
      1,
    );
    assert.match(err.join('\n'), /already holds/);
  });
});

describe('policy/lora: a LoRA policy in training (TrainablePolicy)', function () {
  this.timeout(120_000);
  let tmp: string;
  before(() => (tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-lora-train-'))));
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  const c = SMALL_CONFIG;
  const B = 2;
  const T = 12;
  const batchOf = (seed: number): TrainBatch => {
    const r = new SeededRandom(seed);
    return {
      inputIds: Array.from({ length: B * T }, () => Math.floor(r.next() * c.vocab_size)),
      lossMask: Float32Array.from({ length: B * T }, (_, i) => (i % T >= 3 ? 1 : 0)),
    };
  };
  const rows = [Array.from({ length: 10 }, (_, i) => (i * 3 + 1) % c.vocab_size)];

  it('trains only the adapter: the base stays byte for byte, the reference is the base with the adapter off, a checkpoint is the adapter', async () => {
    const w = initWeights(c, 23, 0.3);
    const bytes = new Map([...w.tensors].map(([k, t]) => [k, Buffer.from(t.buffer.slice(0))]));
    const adapter = initAdapter(c, parseLoraConfig({ r: 4, lora_alpha: 8, target_modules: 'all-linear' }, 'test'), 29);
    const tp = new TrainablePolicy(w, { adapter, settings: { provider: 'cpu' } });
    const base = new Policy(w, undefined, { provider: 'cpu' });
    try {
      const [cur0] = await tp.logprobs(rows);
      const [ref0] = await tp.logprobs(rows, { model: 'reference' });
      assert.equal(maxAbsDiff(cur0, ref0), 0, 'B = 0: the policy is its base');
      await tp.train({ loss: 'sft', batch: B, seq: T }, [batchOf(1), batchOf(2)], { lr: 5e-2 });
      const [cur] = await tp.logprobs(rows);
      const [ref] = await tp.logprobs(rows, { model: 'reference' });
      assert.ok(maxAbsDiff(cur, ref) > 1e-3, 'training moved the adapter');
      assert.equal(maxAbsDiff(ref, ref0), 0, 'the reference (base, adapter off) did not move');
      const [lb] = await base.logits(rows);
      const [lr] = await tp.logprobs(rows, { model: 'reference' });
      for (let t = 1; t < rows[0].length; t++)
        assert.ok(Math.abs(logSoftmax(lb.subarray((t - 1) * c.vocab_size, t * c.vocab_size))[rows[0][t]] - lr[t]) < 1e-6);
      for (const [k, t] of (await tp.weights()).tensors) assert.ok(Buffer.from(t.buffer).equals(bytes.get(k)!), `${k} changed`);
      const dir = path.join(tmp, 'ck');
      await tp.saveCheckpoint(dir);
      assert.deepEqual(fs.readdirSync(dir).sort(), ['adapter_config.json', 'adapter_model.safetensors', 'optimizer.safetensors']);
      const adapterBytes = fs.statSync(path.join(dir, 'adapter_model.safetensors')).size;
      const baseBytes = [...w.tensors.values()].reduce((n, t) => n + t.byteLength, 0);
      assert.ok(adapterBytes < baseBytes / 2, `the adapter (${adapterBytes} bytes) is not a copy of the base (${baseBytes})`);
      // Resumed from the checkpoint, the next step is the one the uninterrupted policy takes.
      const back = loadAdapter(dir, c);
      const tp2 = new TrainablePolicy(w, { adapter: back, optimizer: loadAdapterOptimizer(dir, back, c), settings: { provider: 'cpu' } });
      await tp.train({ loss: 'sft', batch: B, seq: T }, [batchOf(3)], { lr: 5e-2 });
      await tp2.train({ loss: 'sft', batch: B, seq: T }, [batchOf(3)], { lr: 5e-2 });
      const [a1, a2] = [await tp.adapter(), await tp2.adapter()];
      for (const [k, t] of a1!.tensors) assert.equal(maxAbsDiff(t, a2!.tensors.get(k)!), 0, `${k} differs after the resume`);
      await tp2.dispose();
    } finally {
      await tp.dispose();
      await base.dispose();
    }
  });

  it('a warm-started adapter (B not zero): the KL reference is the starting policy, the adapter as it started, not the bare base; a resume names it', async () => {
    const w = initWeights(c, 23, 0.3);
    const adapter = initAdapter(c, parseLoraConfig({ r: 4, lora_alpha: 8, target_modules: 'all-linear' }, 'test'), 29);
    const r = new SeededRandom(5);
    for (const [k, t] of adapter.tensors) if (k.includes('lora_B')) for (let i = 0; i < t.length; i++) t[i] = (r.next() - 0.5) * 0.4;
    assert.equal(adapterIsBase(adapter), false);
    const tp = new TrainablePolicy(w, { adapter, settings: { provider: 'cpu' } });
    const base = new Policy(w, undefined, { provider: 'cpu' });
    try {
      const [cur0] = await tp.logprobs(rows);
      const [ref0] = await tp.logprobs(rows, { model: 'reference' });
      assert.ok(maxAbsDiff(cur0, ref0) < 1e-6, `the reference is the starting policy (${maxAbsDiff(cur0, ref0)})`);
      const [lb] = await base.logits(rows);
      const baseLp = rows[0].map((id, t) => (t === 0 ? 0 : logSoftmax(lb.subarray((t - 1) * c.vocab_size, t * c.vocab_size))[id]));
      assert.ok(maxAbsDiff(ref0, Float32Array.from(baseLp)) > 1e-3, 'not the base with the adapter off');
      await tp.train({ loss: 'sft', batch: B, seq: T }, [batchOf(1), batchOf(2)], { lr: 5e-2 });
      const [cur] = await tp.logprobs(rows);
      const [ref] = await tp.logprobs(rows, { model: 'reference' });
      assert.ok(maxAbsDiff(cur, ref) > 1e-3, 'training moved the adapter');
      assert.ok(maxAbsDiff(ref, ref0) < 1e-6, 'the reference stayed the adapter as it started (a copy, not the trained arrays)');
      // A resumed run: its adapter is the trained one, its reference the one it started with (checkpoint 0's).
      const resumed = new TrainablePolicy(w, { adapter: await tp.adapter(), referenceAdapter: adapter, settings: { provider: 'cpu' } });
      try {
        const [refBack] = await resumed.logprobs(rows, { model: 'reference' });
        assert.ok(maxAbsDiff(refBack, ref0) < 1e-6);
      } finally {
        await resumed.dispose();
      }
    } finally {
      await tp.dispose();
      await base.dispose();
    }
  });
});
