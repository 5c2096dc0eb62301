// The memory plan (policy/model/memory.ts) against the measured peak RSS of small real runs, the
// bound an update's token cap puts on that peak, and the refusal of a plan over a limit.
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { TurnwiseError } from '../../../src/core/errors';
import { parameterCount, TURNWISE_TINY, type ModelConfig } from '../../../src/policy/model/config';
import { BENCH_SHAPES } from '../../../src/bench/model';
import type { LoraConfig } from '../../../src/policy/files/lora';
import { halfSessionBytes } from '../../../src/policy/model/quantize';
import {
  assertPlanFits,
  autoUpdateTokens,
  availableDeviceMemory,
  availableMemory,
  formatMemoryPlan,
  PACK_MIN_WEIGHT_BYTES,
  planMemory,
  samplingPacksWeights,
} from '../../../src/policy/model/memory';
import { runMemoryPlan, samplingPacksFolder, type RunPlanConfig } from '../../../src/train/memory-plan';
import { quantizedSessionBytes } from '../../../src/policy/model/quantize';
import { TRAIN_DEFAULTS } from '../../../src/train/config';

const FIXTURE = path.join(__dirname, 'fixtures', 'memory-run.ts');
const MB = 1024 ** 2;

/** Peak RSS (bytes) of the fixture's run in a fresh process. */
function peakOf(episodes: number, rows: number, seq: number, cap: number, score: boolean): number {
  const r = spawnSync(
    process.execPath,
    ['--require', 'tsx/cjs', FIXTURE, String(episodes), String(rows), String(seq), String(cap), score ? '1' : '0'],
    { encoding: 'utf8', timeout: 240_000 },
  );
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout.trim().split('\n').pop()!).peakRss as number;
}

/** Qwen2.5-0.5B's shape, as `bench model` generates it. */
const QWEN_05B: ModelConfig = BENCH_SHAPES['qwen2.5-0.5b'];

describe('policy/memory: the memory plan of a run', function () {
  this.timeout(600_000);

  it('counts the parameters of the model and of its adapter', () => {
    const p = planMemory({
      config: QWEN_05B,
      provider: 'cpu',
      updateTokensPerStep: 1024,
      context: 1024,
      episodes: 4,
      lora: { r: 16, target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] },
    });
    assert.ok(Math.abs(p.parameters - 494_032_768) < 1e6, `${p.parameters}`);
    // PEFT's count for r 16 on all linear layers of Qwen2.5-0.5B: 8,798,208.
    assert.equal(p.adapterParameters, 8_798_208);
    assert.equal(p.parts.find((x) => x.name === 'weights')!.bytes, p.parameters * 4);
    assert.deepEqual(p.microBatch, { rows: 1, tokens: 1024 });
    const full = planMemory({ config: QWEN_05B, provider: 'cpu', updateTokensPerStep: 4096, context: 1024, episodes: 4 });
    assert.ok(full.host > p.host + 6 * p.parameters * 4, 'full training holds the AdamW state of every weight');
    assert.deepEqual(full.microBatch, { rows: 4, tokens: 4096 });
    const gpu = planMemory({ config: QWEN_05B, provider: 'cuda', updateTokensPerStep: 1024, context: 1024, episodes: 4 });
    assert.ok(gpu.device > 0 && gpu.parts.some((x) => x.where === 'device' && x.name === 'update activations'));
    for (const line of formatMemoryPlan(p, 16 * 1024 * MB)) assert.ok(!/NaN|undefined/.test(line), line);
  });

  // The plan against the measured peak of a real run: within a factor of 1.5 either way.
  it('the plan of a small real run (prefill, sampling, scoring, a capped update) is within a factor of 1.5 of its measured peak RSS', () => {
    const input = { config: TURNWISE_TINY, provider: 'cpu' as const, updateTokensPerStep: 1024, context: 512, episodes: 4 };
    const plan = planMemory(input).host;
    const peak = peakOf(4, 8, 512, 1024, true);
    const ratio = peak / plan;
    assert.ok(
      ratio > 1 / 1.5 && ratio < 1.5,
      `measured ${Math.round(peak / MB)} MB, planned ${Math.round(plan / MB)} MB (ratio ${ratio.toFixed(2)})`,
    );
  });

  it('under one token cap the peak does not grow with the rows of the update; without it, it does', () => {
    const few = peakOf(0, 4, 512, 1024, false);
    const many = peakOf(0, 16, 512, 1024, false);
    const uncapped = peakOf(0, 16, 512, 0, false);
    const seen = `4 rows ${Math.round(few / MB)} MiB, 16 rows ${Math.round(many / MB)} MiB, 16 rows in one run ${Math.round(uncapped / MB)} MiB`;
    // What the plan says 16 rows in one run add over a 1,024-token cap (557 MiB for turnwise-tiny
    // at 512 tokens; measured on a 2-core EPYC: 515). The measure must see at least half of it,
    // or it cannot tell a cap that holds from one that does nothing.
    const plan = (tokens: number) =>
      planMemory({ config: TURNWISE_TINY, provider: 'cpu', updateTokensPerStep: tokens, context: 512, episodes: 0 }).host;
    const plannedGrowth = plan(16 * 512) - plan(1024);
    assert.ok(
      uncapped - many > plannedGrowth / 2,
      `the measure sees what rows cost without the cap (planned +${Math.round(plannedGrowth / MB)} MiB): ${seen}`,
    );
    // 12 more rows under the cap cost less than one row's activations (measured: a few MiB).
    const perRow = (uncapped - few) / 12;
    assert.ok(many - few < perRow, seen);
  });

  it('a LoRA policy holds its base weights once: sampling and training feed the same arrays', () => {
    const r = spawnSync(process.execPath, ['--expose-gc', '--require', 'tsx/cjs', path.join(__dirname, 'fixtures', 'weights-once.ts')], {
      encoding: 'utf8',
      timeout: 240_000,
    });
    assert.equal(r.status, 0, r.stderr);
    const { held, weightBytes } = JSON.parse(r.stdout.trim().split('\n').pop()!);
    // The weights once, plus the adapter, its moments and small buffers (a second copy of the
    // transposed weights would add ~75% of the weights' bytes).
    assert.ok(held < weightBytes * 1.4, `JavaScript buffers ${Math.round(held / MB)} MB for ${Math.round(weightBytes / MB)} MB of weights`);
  });

  it('on WebGPU the device holds the weights once, the train state and the KV caches; a plan over the GPU memory is refused naming the GPU', () => {
    const lora = {
      r: 16,
      target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] as LoraConfig['target_modules'],
    };
    const input = { config: QWEN_05B, provider: 'webgpu' as const, updateTokensPerStep: 1024, context: 1024, episodes: 8, lora };
    const p = planMemory(input);
    const part = (n: string) => p.parts.find((x) => x.name === n)!;
    assert.equal(part('device weights').bytes, p.parameters * 4, 'one copy of the weights, whatever the sessions');
    assert.equal(part('device train state').bytes, 7 * p.adapterParameters * 4);
    assert.equal(part('device KV caches').bytes, part('KV caches').bytes);
    assert.equal(
      p.device,
      p.parts.filter((x) => x.where === 'device').reduce((n, x) => n + x.bytes, 0),
    );
    // float16 rollouts add their half-precision copy on the device; the CPU runs none.
    const half = planMemory({ ...input, quantizedDecode: 'float16' });
    assert.equal(half.parts.find((x) => x.name === 'float16 decode weights')?.bytes, halfSessionBytes(QWEN_05B));
    assert.equal(half.device - p.device, halfSessionBytes(QWEN_05B));
    assert.ok(Math.abs(halfSessionBytes(QWEN_05B) - 2 * p.parameters) < 2e6, 'every product weight, the tied embedding once');
    const cpuHalf = planMemory({ ...input, provider: 'cpu', quantizedDecode: 'float16' });
    assert.equal(cpuHalf.input.quantizedDecode, 'float32');
    // A GPU where 2 episodes in flight fit and 8 do not.
    const gpuMb = Math.ceil(planMemory({ ...input, episodes: 2 }).device / MB) + 1;
    // The GPU's memory from its driver (nvidia-smi's answer given here), unless the variable says otherwise.
    const gpu = () => [
      { kind: 'software' as const, name: 'lavapipe', driver: 'libvulkan_lvp.so' },
      { kind: 'hardware' as const, name: 'NVIDIA T4', driver: 'libGLX_nvidia.so.0', memoryBytes: gpuMb * MB },
    ];
    const dev = availableDeviceMemory({}, gpu)!;
    assert.deepEqual(dev, { bytes: gpuMb * MB, source: 'the memory of the NVIDIA T4' });
    assert.deepEqual(availableDeviceMemory({ TURNWISE_DEVICE_MEMORY_LIMIT_MB: '4096' }, gpu), {
      bytes: 4096 * MB,
      source: 'TURNWISE_DEVICE_MEMORY_LIMIT_MB',
    });
    assert.equal(
      availableDeviceMemory({}, () => []),
      undefined,
    );
    assert.ok(p.device > dev.bytes);
    const host = { bytes: 1e15, source: 'test' };
    assert.throws(
      () => assertPlanFits(p, host, dev),
      (e: TurnwiseError) =>
        e.message.includes(`MiB over the ${gpuMb.toLocaleString('en-US')} MiB of the memory of the NVIDIA T4`) &&
        /"concurrency": 2/.test(e.hint ?? ''),
    );
    assert.doesNotThrow(() => assertPlanFits(p, host, { bytes: p.device, source: 'test' }));
  });

  it('a plan over the limit is refused with its numbers and the settings that would fit', () => {
    const input = { config: QWEN_05B, provider: 'cpu' as const, updateTokensPerStep: 8192, context: 1024, episodes: 8 };
    const p = planMemory(input);
    // A limit the plan passes at 1,024 tokens per update step but not at 8,192.
    const limitMb = Math.ceil(planMemory({ ...input, updateTokensPerStep: 1024 }).host / MB) + 1;
    assert.ok(p.host > limitMb * MB);
    const limit = { bytes: limitMb * MB, source: 'TURNWISE_MEMORY_LIMIT_MB' };
    let err: TurnwiseError | undefined;
    try {
      assertPlanFits(p, limit);
    } catch (e) {
      err = e as TurnwiseError;
    }
    assert.ok(err instanceof TurnwiseError, 'refused');
    assert.match(err.message, /would not fit in memory/);
    assert.match(
      err.message,
      new RegExp(
        `${Math.round(p.host / MB).toLocaleString('en-US')} MiB over the ${limitMb.toLocaleString('en-US')} MiB of TURNWISE_MEMORY_LIMIT_MB`,
      ),
    );
    assert.match(err.message, /update activations/);
    assert.match(err.hint!, /"updateTokensPerStep": \d+/);
    assert.match(err.hint!, /"lora"/);
    // Each fix the hint names fits.
    const cap = Number(/"updateTokensPerStep": (\d+)/.exec(err.hint!)![1]);
    assert.doesNotThrow(() => assertPlanFits(planMemory({ ...input, updateTokensPerStep: cap }), limit));
    const eps = /"concurrency": (\d+)/.exec(err.hint!);
    if (eps) assert.doesNotThrow(() => assertPlanFits(planMemory({ ...input, episodes: Number(eps[1]) }), limit));
    // The same plan under a larger limit passes.
    assert.doesNotThrow(() => assertPlanFits(p, { bytes: p.host, source: 'test' }));
  });

  it('a plan that nothing fits says so', () => {
    const p = planMemory({ config: QWEN_05B, provider: 'cpu', updateTokensPerStep: 1024, context: 1024, episodes: 1 });
    assert.throws(
      () => assertPlanFits(p, { bytes: 512 * MB, source: 'test' }),
      (e: TurnwiseError) => /use a machine with more memory/.test(e.hint!),
    );
  });

  it('quantized rollouts hold the codes and scales in place of the packed copy, on the CPU only', () => {
    const input = { config: QWEN_05B, context: 1024, episodes: 4, updateTokensPerStep: 1024, provider: 'cpu' as const };
    const fed = planMemory(input);
    for (const [precision, bits] of [
      ['int8', 8],
      ['int4', 4],
    ] as const) {
      const q = planMemory({ ...input, quantizedDecode: precision, packedDecode: true });
      assert.equal(q.input.packedDecode, false, 'the quantized session replaces the packed one');
      const part = q.parts.find((p) => p.name === `${precision} decode weights`)!;
      assert.equal(part.bytes, quantizedSessionBytes(QWEN_05B, bits));
      assert.match(part.detail, /made once per weights version, in about \d+ s/);
      assert.equal(q.host - fed.host, part.bytes);
    }
    // Qwen2.5-0.5B at int4: about an eighth of its float32 weights (4.25 bits of 32 per weight).
    const ratio = quantizedSessionBytes(QWEN_05B, 4) / (parameterCount(QWEN_05B) * 4);
    assert.ok(ratio > 0.125 && ratio < 0.14, `${ratio}`);
    assert.equal(planMemory({ ...input, provider: 'webgpu', quantizedDecode: 'int4' }).input.quantizedDecode, 'float32');
    const run = { ...TRAIN_DEFAULTS, executionProvider: 'cpu' as const };
    assert.equal(
      runMemoryPlan({ ...run, rolloutPrecision: 'int4' }, QWEN_05B, { TURNWISE_MEMORY_LIMIT_MB: '65536' }).packDecodeWeights,
      false,
    );
    assert.ok(
      runMemoryPlan({ ...run, rolloutPrecision: 'int4' }, QWEN_05B, { TURNWISE_MEMORY_LIMIT_MB: '65536' }).lines.some((l) =>
        /int4 decode weights/.test(l),
      ),
    );
  });

  it('packed decode weights are a second copy of the weights on the CPU only; a run packs them where that plan fits, and feeds them where only the plan without does', () => {
    const input = {
      config: QWEN_05B,
      context: 1024,
      episodes: 4,
      updateTokensPerStep: 1024,
      lora: { r: 16, target_modules: ['q_proj', 'v_proj'] as ('q_proj' | 'v_proj')[] },
    };
    const fed = planMemory({ ...input, provider: 'cpu' });
    const packed = planMemory({ ...input, provider: 'cpu', packedDecode: true });
    const weights = fed.parts.find((p) => p.name === 'weights')!.bytes;
    // Qwen2.5-0.5B ties its embedding: the lookup's copy and the head's packed one.
    assert.equal(packed.host - fed.host, weights + QWEN_05B.vocab_size * QWEN_05B.hidden_size * 4);
    assert.ok(formatMemoryPlan(packed).some((l) => /packed decode weights/.test(l)));
    assert.equal(planMemory({ ...input, provider: 'cuda', packedDecode: true }).input.packedDecode, false, 'not on a GPU provider');
    const run: RunPlanConfig = {
      maxTurns: 6,
      maxActionTokens: 128,
      concurrency: 4,
      executionProvider: 'cpu',
      klCoef: 0,
      updateTokensPerStep: 1024,
      lora: {
        r: 16,
        lora_alpha: 32,
        lora_dropout: 0,
        target_modules: ['q_proj', 'v_proj'],
        use_rslora: false,
        base_model_name_or_path: 'x',
      },
    };
    const at = (mb: number) => runMemoryPlan(run, QWEN_05B, { TURNWISE_MEMORY_LIMIT_MB: String(mb) });
    const roomy = at(64 * 1024);
    assert.equal(roomy.packDecodeWeights, true);
    const between = (roomy.plan.host - weights / 2) / MB;
    const tight = at(between);
    assert.equal(tight.packDecodeWeights, false, 'fed where only the plan without the copy fits');
    assert.ok(tight.plan.host <= between * MB);
    assert.equal(
      runMemoryPlan({ ...run, executionProvider: 'cuda' }, QWEN_05B, { TURNWISE_MEMORY_LIMIT_MB: '65536' }).packDecodeWeights,
      false,
    );
    assert.ok(
      planMemory({ config: TURNWISE_TINY, provider: 'cpu', updateTokensPerStep: 1024, episodes: 1 }).parameters * 4 < PACK_MIN_WEIGHT_BYTES,
    );
    assert.equal(
      runMemoryPlan({ ...run, lora: undefined }, TURNWISE_TINY, { TURNWISE_MEMORY_LIMIT_MB: '65536' }).packDecodeWeights,
      false,
      'turnwise-tiny is below the size that gains',
    );
    // The setting: off never packs; on packs whatever the size, and a plan it makes too large is
    // refused naming "off" among the settings that fit.
    assert.equal(at(64 * 1024).packDecodeWeights, true);
    assert.equal(
      runMemoryPlan({ ...run, packDecodeWeights: 'off' }, QWEN_05B, { TURNWISE_MEMORY_LIMIT_MB: '65536' }).packDecodeWeights,
      false,
    );
    assert.equal(
      runMemoryPlan({ ...run, lora: undefined, packDecodeWeights: 'on' }, TURNWISE_TINY, { TURNWISE_MEMORY_LIMIT_MB: '65536' })
        .packDecodeWeights,
      true,
    );
    const forced = runMemoryPlan({ ...run, packDecodeWeights: 'on' }, QWEN_05B, { TURNWISE_MEMORY_LIMIT_MB: String(Math.floor(between)) });
    assert.equal(forced.packDecodeWeights, true);
    assert.throws(
      () => assertPlanFits(forced.plan, forced.limit),
      (e: TurnwiseError) => /"packDecodeWeights": "off"/.test(e.hint!),
    );
  });

  it('a policy that only samples packs where the weights twice, its caches and the runtime fit; the setting overrides, a GPU provider never packs', () => {
    const load = { episodes: 8, context: 4096 };
    const limit = (mb: number) => ({ bytes: mb * MB, source: 'the test' });
    const roomy = samplingPacksWeights('auto', 'cpu', QWEN_05B, load, limit(64 * 1024));
    assert.deepEqual(roomy, { pack: true });
    // What a sampling process holds: the weights, the packed copy (a tied embedding twice), 8 × 4,096 tokens of caches, the runtime.
    const P = planMemory({ config: QWEN_05B, provider: 'cpu', updateTokensPerStep: 1024, episodes: 1 }).parameters;
    const kv = planMemory({ config: QWEN_05B, provider: 'cpu', updateTokensPerStep: 4096, context: 4096, episodes: 8 }).parts.find(
      (x) => x.name === 'KV caches',
    )!.bytes;
    const need = (2 * P + QWEN_05B.vocab_size * QWEN_05B.hidden_size) * 4 + kv + 320 * MB;
    assert.equal(samplingPacksWeights('auto', 'cpu', QWEN_05B, load, { bytes: need, source: 'x' }).pack, true);
    const tight = samplingPacksWeights('auto', 'cpu', QWEN_05B, load, limit(Math.floor(need / MB) - 1));
    assert.equal(tight.pack, false);
    assert.match(
      tight.note!,
      /decoding with the weights fed: packing them would take [\d,.]+ MiB with 8 sequences of 4,096 tokens, over the [\d,.]+ MiB of the test/,
    );
    // Longer sequences hold more: the same memory no longer fits them.
    assert.equal(samplingPacksWeights('auto', 'cpu', QWEN_05B, { episodes: 8, context: 16_384 }, { bytes: need, source: 'x' }).pack, false);
    assert.equal(samplingPacksWeights('auto', 'auto', QWEN_05B, load, limit(64 * 1024)).pack, true, "'auto' may land on the CPU");
    for (const provider of ['cuda', 'webgpu'])
      assert.equal(samplingPacksWeights('on', provider, QWEN_05B, load, limit(64 * 1024)).pack, false, provider);
    assert.equal(samplingPacksWeights('off', 'cpu', QWEN_05B, load, limit(64 * 1024)).pack, false);
    assert.deepEqual(
      samplingPacksWeights('auto', 'cpu', TURNWISE_TINY, load, limit(64 * 1024)),
      { pack: false },
      'below the size that gains: no note',
    );
    assert.equal(samplingPacksWeights('on', 'cpu', TURNWISE_TINY, load, limit(1)).pack, true, 'on packs whatever the size and memory');
  });

  it("an evaluation of a model folder packs by its config's setting and, on auto, by what its episodes hold", () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-sampling-pack-'));
    try {
      // Only config.json is read: a 0.5B shape without its weights.
      fs.writeFileSync(path.join(tmp, 'config.json'), JSON.stringify(QWEN_05B));
      const c = { executionProvider: 'cpu' as const, maxActionTokens: 128, concurrency: 4, maxTurns: 6 };
      const logs: string[] = [];
      const at = (mb: number, setting?: 'auto' | 'on' | 'off') =>
        samplingPacksFolder(tmp, { ...c, ...(setting ? { packDecodeWeights: setting } : {}) }, (m) => logs.push(m), {
          TURNWISE_MEMORY_LIMIT_MB: String(mb),
        });
      assert.equal(at(64 * 1024), true);
      assert.equal(at(64 * 1024, 'off'), false, '"off" in the config is kept');
      assert.deepEqual(logs, []);
      assert.equal(at(2 * 1024), false, 'two copies of 2 GB of weights do not fit 2 GB');
      assert.equal(logs.length, 1);
      assert.match(
        logs[0],
        /packing them would take [\d,.]+ MiB with 4 sequences of [\d,]+ tokens, over the 2,048 MiB of TURNWISE_MEMORY_LIMIT_MB/,
      );
      assert.equal(at(2 * 1024, 'on'), true);
      const tiny = path.join(__dirname, '..', '..', '..', 'models', 'turnwise-tiny');
      assert.equal(samplingPacksFolder(tiny, c, undefined, { TURNWISE_MEMORY_LIMIT_MB: '65536' }), false);
      assert.equal(samplingPacksFolder(tiny, { ...c, packDecodeWeights: 'on' }, undefined, { TURNWISE_MEMORY_LIMIT_MB: '65536' }), true);
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });

  it('updateTokensPerStep 0 picks the largest cap that fits; TURNWISE_MEMORY_LIMIT_MB sets the limit', () => {
    const input = {
      config: QWEN_05B,
      provider: 'cpu' as const,
      context: 1024,
      episodes: 2,
      lora: { r: 16, target_modules: ['q_proj', 'v_proj'] as const },
    };
    const plan0 = (t: number) => planMemory({ ...input, lora: { r: 16, target_modules: ['q_proj', 'v_proj'] }, updateTokensPerStep: t });
    // A limit 2,048 tokens per step fit under and 4,096 do not.
    const limit = (plan0(2048).host + plan0(4096).host) / 2;
    const cap = autoUpdateTokens({ ...input, lora: { ...input.lora, target_modules: [...input.lora.target_modules] } }, limit);
    const plan = (t: number) => planMemory({ ...input, lora: { r: 16, target_modules: ['q_proj', 'v_proj'] }, updateTokensPerStep: t });
    assert.ok(plan(cap).host <= limit);
    assert.ok(plan(cap * 2).host > limit, `cap ${cap}`);
    assert.equal(cap, 2048);
    assert.deepEqual(availableMemory({ TURNWISE_MEMORY_LIMIT_MB: '2048' }), { bytes: 2048 * MB, source: 'TURNWISE_MEMORY_LIMIT_MB' });
    assert.throws(() => availableMemory({ TURNWISE_MEMORY_LIMIT_MB: 'lots' }), /TURNWISE_MEMORY_LIMIT_MB must be a number/);
    assert.ok(availableMemory({}).bytes > 0);
  });
});
