// `turnwise bench model` at the tiny-test shape: the JSON's keys, figures computed from the
// measured numbers, ratios from the PyTorch side's (a stand-in runner, so no Python is needed).
// Speed thresholds belong to the benchmark, not to this test.
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { BENCH_SHAPES, benchModel, type TorchFigures } from '../../../src/bench/model';
import { resetProviderState } from '../../../src/onnx';
import { parameterCount } from '../../../src/policy/model/config';
import { quantizedBytesPerToken } from '../../../src/policy/model/quantize';

const TORCH: TorchFigures = {
  torch_version: 'stand-in',
  threads: 1,
  load_s: 0.5,
  load_peak_rss_mb: 100,
  prefill_tokens_per_s: 100,
  prefill_peak_rss_mb: 100,
  decode_tokens_per_s_b1: 10,
  decode_tokens_per_s_batch: 40,
  decode_peak_rss_mb: 100,
  lora_train_tokens_per_s: 50,
  train_step_s: 1.28,
  train_step_peak_rss_mb: 120,
  memory_bandwidth_gbs: 10,
};

const KEYS = [
  'schema',
  'shape',
  'family',
  'parameters',
  'date',
  'provider',
  'threads',
  'machine',
  'load_avg_start',
  'load_avg_end',
  'work',
  'weights_file_bytes',
  'weights_bytes_per_token',
  'load_s',
  'load_peak_rss_mb',
  'prefill_tokens_per_s',
  'prefill_peak_rss_mb',
  'decode_tokens_per_s_b1',
  'decode_tokens_per_s_batch',
  'decode_batch_speedup',
  'decode_steps_per_run',
  'decode_weights',
  'decode_setup_s',
  'decode_fed',
  'decode_peak_rss_mb',
  'fed_bytes_per_decode_step',
  'fed_weight_bytes_per_decode_step',
  'fed_bytes_per_train_step',
  'fed_weight_bytes_per_train_step',
  'decode_quantized',
  'lora_train_tokens_per_s',
  'train_step_s',
  'train_first_step_s',
  'train_step_peak_rss_mb',
  'train_start_rss_mb',
  'train_rss_budget_mb',
  'memory_bandwidth_gbs',
  'memory_bandwidth_1thread_gbs',
  'decode_bound_tokens_per_s',
  'decode_fraction_of_bound',
  'torch',
  'prefill_vs_torch',
  'decode_vs_torch',
  'decode_batch_vs_torch',
  'train_vs_torch',
  'torch_decode_fraction_of_bound',
  'llama_cpp',
  'decode_vs_llama_cpp',
  'decode_batch_vs_llama_cpp',
  'llama_cpp_q8_0',
  'decode_int8_vs_llama_cpp_q8_0',
  'decode_batch_int8_vs_llama_cpp_q8_0',
  'targets',
].sort();

describe('bench model', function () {
  this.timeout(120_000);

  it('reports every key, figures from the measured numbers, and ratios against the PyTorch side', async () => {
    let asked: unknown;
    const r = await benchModel({
      shape: 'tiny-test',
      settings: { provider: 'cpu', threads: 1 },
      torchRunner: async (a) => ((asked = a), TORCH),
    });
    assert.deepEqual(Object.keys(r).sort(), KEYS);
    assert.equal(r.schema, 'turnwise/bench-model@1');
    assert.equal(r.parameters, parameterCount(BENCH_SHAPES['tiny-test']));
    assert.equal(r.weights_bytes_per_token, 4 * r.parameters);
    // The folder is BF16: two bytes per weight, plus the header.
    assert.ok(r.weights_file_bytes > 2 * r.parameters && r.weights_file_bytes < 2 * r.parameters + 65536);
    assert.equal(r.load_avg_start.length, 3);
    assert.ok(typeof r.work.note === 'string' && r.work.note.length > 0);
    const a = asked as Record<string, number>;
    assert.deepEqual(
      [a.prefill, a.context, a.decode_steps, a.decode_batch, a.lora_r, a.train_rows, a.train_seq],
      [r.work.prefillTokens, r.work.contextTokens, r.work.decodeSteps, r.work.decodeBatch, r.work.loraR, r.work.trainRows, r.work.trainSeq],
    );
    for (const k of [
      'load_s',
      'prefill_tokens_per_s',
      'decode_tokens_per_s_b1',
      'decode_tokens_per_s_batch',
      'lora_train_tokens_per_s',
      'memory_bandwidth_gbs',
      'load_peak_rss_mb',
      'train_step_peak_rss_mb',
    ] as const) {
      assert.ok(Number.isFinite(r[k]) && r[k] > 0, `${k} = ${r[k]}`);
    }
    const close = (x: number | null, want: number, what: string) =>
      assert.ok(x !== null && Math.abs(x - want) <= 0.01 * Math.abs(want) + 2e-3, `${what}: ${x} vs ${want}`);
    close(r.decode_vs_torch, r.decode_tokens_per_s_b1 / TORCH.decode_tokens_per_s_b1, 'decode_vs_torch');
    close(r.decode_batch_vs_torch, r.decode_tokens_per_s_batch / TORCH.decode_tokens_per_s_batch, 'decode_batch_vs_torch');
    close(r.train_vs_torch, r.lora_train_tokens_per_s / TORCH.lora_train_tokens_per_s, 'train_vs_torch');
    close(r.prefill_vs_torch, r.prefill_tokens_per_s / TORCH.prefill_tokens_per_s, 'prefill_vs_torch');
    close(r.decode_batch_speedup, r.decode_tokens_per_s_batch / r.decode_tokens_per_s_b1, 'decode_batch_speedup');
    assert.equal(r.decode_steps_per_run, 1, 'the CPU provider decodes one step per run');
    // Weights this small are fed (below PACK_MIN_WEIGHT_BYTES): no comparison to make.
    assert.deepEqual([r.decode_weights, r.decode_fed], ['fed', null]);
    assert.ok(r.decode_setup_s > 0);
    // On the CPU provider with fed weights, every decode run and the LoRA step read all base weights from the host.
    assert.equal(r.fed_weight_bytes_per_decode_step, r.weights_bytes_per_token);
    assert.equal(r.fed_weight_bytes_per_train_step, r.weights_bytes_per_token);
    assert.ok(r.fed_bytes_per_decode_step > r.fed_weight_bytes_per_decode_step, 'the KV cache and the ids are fed too');
    assert.ok(r.fed_bytes_per_train_step > r.fed_weight_bytes_per_train_step, 'the adapter, its moments and the batch are fed too');
    close(r.lora_train_tokens_per_s, (r.work.trainRows * r.work.trainSeq) / r.train_step_s, 'lora_train_tokens_per_s');
    close(r.decode_bound_tokens_per_s, (r.memory_bandwidth_gbs * 1e9) / r.weights_bytes_per_token, 'decode_bound_tokens_per_s');
    close(r.decode_fraction_of_bound, r.decode_tokens_per_s_b1 / r.decode_bound_tokens_per_s, 'decode_fraction_of_bound');
    assert.equal(r.targets.decode_at_least_torch, r.decode_tokens_per_s_b1 >= TORCH.decode_tokens_per_s_b1);
    assert.equal(r.targets.batch_at_least_4x, r.decode_tokens_per_s_batch >= 4 * r.decode_tokens_per_s_b1);
    assert.equal(r.targets.train_rss_within_budget, r.train_step_peak_rss_mb <= r.train_rss_budget_mb);
    assert.deepEqual({ ...r.torch }, { available: true, ...TORCH });
    // The quantized decode beside the float one: its speeds, ratios, bytes, bound and KL.
    assert.deepEqual(Object.keys(r.decode_quantized).sort(), ['int4', 'int8']);
    for (const [p, q] of Object.entries(r.decode_quantized)) {
      const bits = p === 'int8' ? 8 : 4;
      assert.equal(q.weights_bytes_per_token, quantizedBytesPerToken(BENCH_SHAPES['tiny-test'], bits));
      assert.ok(q.decode_tokens_per_s_b1 > 0 && q.decode_tokens_per_s_batch > 0 && q.setup_s > 0, p);
      close(q.speedup_b1, q.decode_tokens_per_s_b1 / r.decode_tokens_per_s_b1, `${p} speedup_b1`);
      close(q.speedup_batch, q.decode_tokens_per_s_batch / r.decode_tokens_per_s_batch, `${p} speedup_batch`);
      close(q.decode_bound_tokens_per_s, (r.memory_bandwidth_gbs * 1e9) / q.weights_bytes_per_token, `${p} bound`);
      assert.equal(q.kl_tokens, r.work.decodeBatch * r.work.decodeSteps);
      assert.ok(q.kl_to_float >= 0 && q.kl_to_float < 0.1, `${p} KL ${q.kl_to_float}`);
    }
    assert.ok(r.decode_quantized.int4!.weights_bytes_per_token < r.decode_quantized.int8!.weights_bytes_per_token);
  });

  it('without PyTorch every ratio is null and the reason is given; packed decode weights are measured against fed ones', async () => {
    const r = await benchModel({
      shape: 'tiny-test',
      settings: { provider: 'cpu', threads: 1, packDecodeWeights: true },
      torchRunner: async () => {
        throw new Error('no torch here');
      },
    });
    assert.equal(r.decode_weights, 'packed');
    const f = r.decode_fed!;
    assert.ok(f.decode_tokens_per_s_b1 > 0 && f.decode_tokens_per_s_batch > 0);
    assert.ok(
      Math.abs(f.decode_batch_speedup - f.decode_tokens_per_s_batch / f.decode_tokens_per_s_b1) <= 0.01 * f.decode_batch_speedup + 2e-3,
    );
    assert.deepEqual(r.torch, { available: false, reason: 'no torch here' });
    assert.deepEqual(r.llama_cpp, { available: false, reason: 'not asked for (--against llama.cpp)' });
    assert.deepEqual(r.llama_cpp_q8_0, { available: false, reason: 'not asked for (--against llama.cpp)' });
    assert.deepEqual(
      [
        r.decode_vs_llama_cpp,
        r.decode_batch_vs_llama_cpp,
        r.decode_int8_vs_llama_cpp_q8_0,
        r.decode_batch_int8_vs_llama_cpp_q8_0,
        r.targets.decode_batch_at_least_llama_cpp,
        r.targets.decode_at_least_0_8_llama_cpp,
      ],
      [null, null, null, null, null, null],
    );
    assert.deepEqual(
      [
        r.prefill_vs_torch,
        r.decode_vs_torch,
        r.decode_batch_vs_torch,
        r.train_vs_torch,
        r.targets.decode_at_least_torch,
        r.targets.train_at_least_torch,
      ],
      [null, null, null, null, null, null],
    );
  });

  it("--against llama.cpp: llama.cpp's decode of the same weights (its CPU build, test/tools/llama-cpp) and Turnwise's ratios to it", async () => {
    const r = await benchModel({
      shape: 'tiny-test',
      settings: { provider: 'cpu', threads: 1 },
      torch: 'off',
      againstLlamaCpp: true,
    });
    assert.ok(
      r.llama_cpp.available,
      `llama.cpp ran: ${(r.llama_cpp as { reason?: string }).reason ?? ''} (bash scripts/setup-test-tools.sh unit installs it)`,
    );
    const l = r.llama_cpp;
    assert.deepEqual([l.version, l.weight_type, l.kv_cache, l.threads], ['3.22.1', 'f32', 'f16', 1]);
    assert.ok(l.decode_tokens_per_s_b1 > 0 && l.decode_tokens_per_s_batch > 0);
    const close = (x: number | null, want: number, what: string) =>
      assert.ok(x !== null && Math.abs(x - want) <= 0.01 * Math.abs(want) + 2e-3, `${what}: ${x} vs ${want}`);
    close(l.decode_batch_speedup, l.decode_tokens_per_s_batch / l.decode_tokens_per_s_b1, 'llama.cpp batch speedup');
    close(r.decode_vs_llama_cpp, r.decode_tokens_per_s_b1 / l.decode_tokens_per_s_b1, 'decode_vs_llama_cpp');
    close(r.decode_batch_vs_llama_cpp, r.decode_tokens_per_s_batch / l.decode_tokens_per_s_batch, 'decode_batch_vs_llama_cpp');
    assert.equal(r.targets.decode_batch_at_least_llama_cpp, r.decode_tokens_per_s_batch >= l.decode_tokens_per_s_batch);
    assert.equal(r.targets.decode_at_least_0_8_llama_cpp, r.decode_tokens_per_s_b1 >= 0.8 * l.decode_tokens_per_s_b1);
    // Turnwise's int8 rollouts beside llama.cpp's q8_0 of the same weights.
    const q = r.llama_cpp_q8_0;
    assert.ok(q.available, `llama.cpp q8_0 ran: ${(q as { reason?: string }).reason ?? ''}`);
    assert.equal(q.weight_type, 'q8_0');
    const int8 = r.decode_quantized.int8!;
    close(r.decode_int8_vs_llama_cpp_q8_0, int8.decode_tokens_per_s_b1 / q.decode_tokens_per_s_b1, 'int8 vs q8_0');
    close(r.decode_batch_int8_vs_llama_cpp_q8_0, int8.decode_tokens_per_s_batch / q.decode_tokens_per_s_batch, 'int8 vs q8_0, batch');
  });

  it('refuses an unknown shape, naming the known ones', async () => {
    await assert.rejects(benchModel({ shape: 'gpt-5' }), /unknown model shape "gpt-5".*/);
  });

  it("a provider asked for by name that does not load measures nothing (its figures would be the CPU's)", async () => {
    // No CUDA provider libraries here: the session falls back to the CPU with a warning (shown once per process: reset).
    resetProviderState();
    const warnings: string[] = [];
    await assert.rejects(
      benchModel({
        shape: 'tiny-test',
        torch: 'off',
        precisions: [],
        settings: { provider: 'cuda', threads: 1, onWarning: (m) => warnings.push(m) },
      }),
      /bench model was asked to run on cuda, which did not load here \(it fell back to cpu\); nothing was measured/,
    );
    assert.equal(warnings.length, 1);
  });

  // The bench generates its weights in the process that measures: left to the collector they
  // counted in every later peak (2 GB at 0.5B), which no user's process holds.
  it('collects garbage before measuring: 256 MB of dropped typed arrays leave the resident set', () => {
    // In a child process: in the test runner, earlier tests' heap grows and shrinks between readings.
    const r = spawnSync(process.execPath, ['--require', 'tsx/cjs', path.join(__dirname, 'fixtures', 'collect-garbage.ts')], {
      encoding: 'utf8',
      timeout: 120_000,
    });
    assert.equal(r.status, 0, r.stderr);
    const m = JSON.parse(r.stdout) as { base: number; held: number; after: number; made: number; collected: boolean };
    assert.equal(m.made, 4);
    assert.equal(m.collected, true);
    assert.ok(m.held - m.base >= 200, `the arrays are resident: ${m.base} MB before, ${m.held} MB with them`);
    // Most of them go back (V8 may still hold the last array made for a while; left to the
    // collector, none would).
    assert.ok(m.held - m.after >= 160, `resident ${m.base} MB before the arrays, ${m.held} MB with them, ${m.after} MB after collection`);
  });
});
