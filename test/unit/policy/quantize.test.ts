// Quantized rollouts: the block quantizer's layout and error bound, the MatMulNBits sessions of a
// policy sampling at int8 and int4 against the reference forward of the weights they stand for,
// and the fallback to float32 where a quantized session cannot be made.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Graph, OnnxSession, toModelProto } from '../../../src/onnx';
import { Policy } from '../../../src/policy/inference/policy';
import { logSoftmax } from '../../../src/policy/inference/sampling';
import { linear, quantizedNames, rowShapes } from '../../../src/policy/model/graphs';
import {
  dequantizeBlocks,
  quantizeBlocks,
  quantizedBytesPerToken,
  precisionsOn,
  rolloutPrecisionFor,
  samplerKl,
  QUANT_AUTO_MIN_BYTES,
  QUANT_BLOCK_SIZE,
} from '../../../src/policy/model/quantize';
import { initWeights, SeededRandom } from '../../../src/policy/model/weights';
import { fromFloat16Bits, toFloat16Bits } from '../../../src/onnx';
import { referenceLogits } from '../../support/reference-forward';
import { SMALL_CONFIG } from './helpers';

const c = SMALL_CONFIG;
const V = c.vocab_size;

describe('policy/quantize: block quantization for quantized rollouts', function () {
  this.timeout(120000);

  it('4-bit codes: two columns per byte, the even one low; symmetric around the zero point 8; the largest weight exact', () => {
    // One row of 32 columns (one block): max |w| = 1.4 → scale 0.2.
    const w = new Float32Array(32);
    w[0] = 1.4;
    w[1] = -0.6;
    w[2] = 0.29; // 1.45 steps → 1
    w[3] = -1.4;
    const q = quantizeBlocks(w, 1, 32, 4, 32);
    assert.equal(q.codes.length, 16);
    assert.ok(Math.abs(q.scales[0] - 0.2) < 1e-7);
    assert.equal(q.codes[0], 8 + 7 + ((8 - 3) << 4)); // columns 0 (+7) and 1 (−3)
    assert.equal(q.codes[1], 8 + 1 + ((8 - 7) << 4)); // columns 2 (+1) and 3 (−7)
    assert.equal(q.codes[2], 8 + (8 << 4)); // zeros
    const back = dequantizeBlocks(q);
    assert.ok(Math.abs(back[0] - 1.4) < 1e-6 && Math.abs(back[3] + 1.4) < 1e-6);
    assert.ok(Math.abs(back[2] - 0.2) < 1e-6);
  });

  it('every weight within half a step of its block, for 8 and 4 bits, a last block padded with zeros', () => {
    const r = new SeededRandom(3);
    const rows = 5;
    const cols = 72; // 3 blocks of 32, the last 8 wide
    const w = Float32Array.from({ length: rows * cols }, () => (r.next() - 0.5) * (r.next() < 0.1 ? 8 : 1));
    for (const bits of [8, 4] as const) {
      const q = quantizeBlocks(w, rows, cols, bits, 32);
      assert.equal(q.scales.length, rows * 3);
      assert.equal(q.codes.length, rows * 3 * ((32 * bits) / 8));
      const back = dequantizeBlocks(q);
      for (let i = 0; i < w.length; i++) {
        const scale = q.scales[Math.floor(i / cols) * 3 + Math.floor((i % cols) / 32)];
        assert.ok(Math.abs(back[i] - w[i]) <= scale / 2 + 1e-7, `${bits} bits, weight ${i}: ${back[i]} for ${w[i]}`);
      }
    }
    assert.throws(() => quantizeBlocks(Float32Array.of(...new Array(31).fill(0), NaN), 1, 32, 4, 32), /not finite/);
  });

  it('bytes a decode step reads: codes and scales of every product (the tied head included), float norms', () => {
    const h = c.hidden_size; // 32 and 48: one block per row, padded
    const m = c.intermediate_size;
    const q = c.num_attention_heads * (h / c.num_attention_heads);
    const kv = c.num_key_value_heads * (h / c.num_attention_heads);
    const B = QUANT_BLOCK_SIZE;
    const rowBytes = (cols: number, bits: number) => Math.ceil(cols / B) * (4 + B * (bits / 8));
    for (const bits of [8, 4] as const) {
      const layer =
        (q + 2 * kv) * rowBytes(h, bits) + h * rowBytes(q, bits) + 2 * m * rowBytes(h, bits) + h * rowBytes(m, bits) + 2 * h * 4;
      const bias = (q + 2 * kv) * 4; // Qwen2's q/k/v biases
      const expected = c.num_hidden_layers * (layer + bias) + h * 4 + V * rowBytes(h, bits);
      assert.equal(quantizedBytesPerToken(c, bits), expected, `${bits} bits`);
    }
  });

  it("ONNX Runtime's MatMulNBits reads the codes and scales as x · dequantized(W)ᵀ, at 8 and 4 bits, K not a multiple of the block", async () => {
    const r = new SeededRandom(9);
    const [M, N, K] = [3, 20, 2 * QUANT_BLOCK_SIZE + 40];
    const w = Float32Array.from({ length: N * K }, () => r.next() - 0.5);
    const x = Float32Array.from({ length: M * K }, () => r.next() * 2 - 1);
    for (const [form, bits] of [
      ['int8', 8],
      ['int4', 4],
    ] as const) {
      const g = Graph.create(`q_${form}`);
      const xv = g.input('x', 'float32', ['M', K]);
      const wv = g.input('w', 'float32', [N, K]);
      g.output(linear(g, xv, wv, { form, shapes: rowShapes(g, g.shapeOf(xv)) }), 'y');
      assert.deepEqual(g.dropUnreadInputs(), ['w']);
      const q = quantizeBlocks(w, N, K, bits);
      const s = await OnnxSession.create(toModelProto(g), { provider: 'cpu' });
      try {
        const out = await s.run({
          x: { dtype: 'float32', dims: [M, K], data: x },
          'w.codes': { dtype: 'uint8', dims: [N, 3, (QUANT_BLOCK_SIZE * bits) / 8], data: q.codes },
          'w.scales': { dtype: 'float32', dims: [N * 3], data: q.scales },
        });
        const dq = dequantizeBlocks(q);
        let worst = 0;
        for (let m = 0; m < M; m++)
          for (let n = 0; n < N; n++) {
            let y = 0;
            for (let k = 0; k < K; k++) y += x[m * K + k] * dq[n * K + k];
            // The rows are quantized to int8 per block before the product (accuracy level 4): |x|/127 per element.
            worst = Math.max(worst, Math.abs((out.y.data as Float32Array)[m * N + n] - y));
          }
        assert.ok(worst < 0.02, `${form}: off by ${worst}`);
      } finally {
        await s.release();
      }
    }
  });

  it('a policy sampling at int8 and int4 stays close to float32, int8 closer than int4', async () => {
    const weights = initWeights(c, 5, 0.1);
    const prompt = Array.from({ length: 7 }, (_, i) => (i * 7 + 2) % V);
    const off: Record<string, number> = {};
    for (const precision of ['int8', 'int4'] as const) {
      const warnings: string[] = [];
      const p = new Policy(weights, undefined, { provider: 'cpu', rolloutPrecision: precision, onWarning: (m) => warnings.push(m) });
      try {
        assert.equal(await p.rolloutPrecision(), precision);
        const seq = p.newSequence(prompt);
        await p.extend([{ seq }]); // the prompt's prefill runs in float32; every drawn token after it is quantized
        const rows = await p.sample([{ seq, seed: 2, maxNewTokens: 12, temperature: 1, stopIds: [] }]);
        assert.deepEqual(warnings, []);
        // The float model's log-probs of the tokens drawn (the reference forward in float64).
        const ref = referenceLogits(weights, [...prompt, ...rows[0].tokenIds]);
        off[precision] = Math.max(
          ...rows[0].tokenIds.map((id, t) => {
            const pos = prompt.length - 1 + t;
            return Math.abs(logSoftmax(ref.subarray(pos * V, (pos + 1) * V), 1)[id] - rows[0].logprobs[t]);
          }),
        );
      } finally {
        await p.dispose();
      }
    }
    // The sessions read the quantized weights (off float32, more at 4 bits) and nothing worse.
    assert.ok(off.int8 > 1e-4 && off.int8 < 0.05, `int8 within ${off.int8}`);
    assert.ok(off.int4 > off.int8 && off.int4 < 1, `int4 within ${off.int4}`);
  });

  it('setRolloutPrecision switches what the next draws read: float32 draws the float policy’s tokens, back to int4 its own again', async () => {
    const weights = initWeights(c, 5, 0.3);
    const p = new Policy(weights, undefined, { provider: 'cpu', rolloutPrecision: 'int4' });
    const f = new Policy(weights, undefined, { provider: 'cpu', rolloutPrecision: 'float32' });
    const draw = async (x: Policy) => {
      const seq = x.newSequence([2, 4, 6, 8, 10]);
      await x.extend([{ seq }]);
      return (await x.sample([{ seq, seed: 9, maxNewTokens: 10, temperature: 1, stopIds: [] }]))[0];
    };
    try {
      const int4 = await draw(p);
      const float = await draw(f);
      assert.equal(await p.setRolloutPrecision('float32'), 'float32');
      const switched = await draw(p);
      assert.deepEqual(switched.tokenIds, float.tokenIds);
      switched.logprobs.forEach((lp, i) => assert.ok(Math.abs(lp - float.logprobs[i]) < 1e-5));
      assert.equal(await p.setRolloutPrecision('int4'), 'int4');
      const back = await draw(p);
      assert.deepEqual(back.tokenIds, int4.tokenIds);
      back.logprobs.forEach((lp, i) => assert.ok(Math.abs(lp - int4.logprobs[i]) < 1e-5));
      assert.ok(
        int4.logprobs.some((lp, i) => Math.abs(lp - float.logprobs[i]) > 1e-3) || int4.tokenIds.join() !== float.tokenIds.join(),
        'int4 draws differ from float32 (else the switch checks nothing)',
      );
    } finally {
      await p.dispose();
      await f.dispose();
    }
  });

  it('a quantized session that cannot be made: one warning, and the policy samples in float32', async () => {
    const weights = initWeights(c, 5, 0.3);
    const cache = fs.mkdtempSync(path.join(os.tmpdir(), 'turnwise-quant-'));
    const was = process.env.XDG_CACHE_HOME;
    const blocked = path.join(cache, 'not-a-folder');
    fs.writeFileSync(blocked, '');
    process.env.XDG_CACHE_HOME = blocked;
    const warnings: string[] = [];
    const p = new Policy(weights, undefined, { provider: 'cpu', rolloutPrecision: 'int4', onWarning: (m) => warnings.push(m) });
    const f = new Policy(weights, undefined, { provider: 'cpu', rolloutPrecision: 'float32' });
    try {
      const run = async (x: Policy) => {
        const seq = x.newSequence([3, 5, 7, 9]);
        await x.extend([{ seq }]);
        return (await x.sample([{ seq, seed: 4, maxNewTokens: 6, temperature: 1, stopIds: [] }]))[0];
      };
      const got = await run(p);
      await run(p);
      assert.equal(warnings.length, 1, warnings.join('\n'));
      assert.match(warnings[0], /rollouts not quantized to int4 .*sampling in float32/);
      assert.equal(await p.rolloutPrecision(), 'float32');
      assert.deepEqual(got.tokenIds, (await run(f)).tokenIds, 'the float policy draws the same tokens');
    } finally {
      await p.dispose();
      await f.dispose();
      if (was === undefined) delete process.env.XDG_CACHE_HOME;
      else process.env.XDG_CACHE_HOME = was;
      fs.rmSync(cache, { recursive: true, force: true });
    }
  });

  it('the precision rule: as set on the CPU (float16 refused with a note), on WebGPU any, on CUDA float16 or float32 (a note when quantized was asked), auto by size', () => {
    assert.deepEqual(rolloutPrecisionFor('int8', 'cpu', 1), { precision: 'int8' });
    assert.deepEqual(rolloutPrecisionFor('float32', 'cpu', 1e10), { precision: 'float32' });
    const gpu = rolloutPrecisionFor('int4', 'cuda', 1e10);
    assert.equal(gpu.precision, 'float32');
    assert.match(gpu.note!, /float32 on cuda: int4 rollouts run on the CPU and WebGPU providers/);
    assert.deepEqual(rolloutPrecisionFor('int4', 'webgpu', 1e10), { precision: 'int4' });
    assert.deepEqual(rolloutPrecisionFor('auto', 'webgpu', 1e10), { precision: 'float32' });
    assert.equal(rolloutPrecisionFor('auto', 'cpu', QUANT_AUTO_MIN_BYTES - 1).precision, 'float32');
    // float16: the GPU providers' form; on the CPU float32 with a note; never chosen by auto yet.
    assert.deepEqual(rolloutPrecisionFor('float16', 'webgpu', 1e10), { precision: 'float16' });
    assert.deepEqual(rolloutPrecisionFor('float16', 'cuda', 1), { precision: 'float16' });
    assert.deepEqual(rolloutPrecisionFor('auto', 'cuda', 1e10), { precision: 'float32' });
    // What each provider samples at when asked, from the same rule (bench model measures these).
    assert.deepEqual(precisionsOn('cpu'), ['int8', 'int4']);
    assert.deepEqual(precisionsOn('webgpu'), ['float16', 'int8', 'int4']);
    assert.deepEqual(precisionsOn('cuda'), ['float16']);
    const cpu16 = rolloutPrecisionFor('float16', 'cpu', 1e10);
    assert.equal(cpu16.precision, 'float32');
    assert.match(cpu16.note!, /float16 rollouts run on GPU providers only/);
  });

  it('float16 bit patterns: exact values, rounding to nearest even, overflow to infinity, subnormals, NaN; and back', () => {
    const bits = (x: number[]) => Array.from(toFloat16Bits(x));
    assert.deepEqual(
      bits([0, -0, 1, -2, 0.5, 65504, 65520, -1e6, 2 ** -24, 2 ** -14, 2 ** -26]),
      [0x0000, 0x8000, 0x3c00, 0xc000, 0x3800, 0x7bff, 0x7c00, 0xfc00, 0x0001, 0x0400, 0x0000],
    );
    // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: to the even one (1); 1 + 3·2^-11 to 1 + 2^-9.
    assert.deepEqual(bits([1 + 2 ** -11, 1 + 3 * 2 ** -11, 1 + 2 ** -11 + 2 ** -20]), [0x3c00, 0x3c02, 0x3c01]);
    assert.equal(bits([NaN])[0] & 0x7c00, 0x7c00);
    assert.ok((bits([NaN])[0] & 0x3ff) !== 0);
    assert.deepEqual(bits([Infinity, -Infinity]), [0x7c00, 0xfc00]);
    // Every half value survives the round trip; random floats come back within half a unit in the last place.
    const all = Uint16Array.from({ length: 0x7c00 }, (_, i) => i);
    assert.deepEqual(toFloat16Bits(fromFloat16Bits(all)), all);
    const r = new SeededRandom(3);
    for (let i = 0; i < 2000; i++) {
      const x = (r.next() - 0.5) * 2 ** (Math.floor(r.next() * 30) - 15);
      const back = fromFloat16Bits(toFloat16Bits([x]))[0];
      const ulp = 2 ** (Math.max(Math.floor(Math.log2(Math.abs(x))), -14) - 10);
      assert.ok(Math.abs(back - x) <= ulp / 2 + 1e-30, `${x} → ${back}`);
    }
  });

  it('samplerKl: 0 where the two agree, positive otherwise, and its mean over draws from q is KL(q ‖ p)', () => {
    assert.equal(samplerKl(-1.2, -1.2), 0);
    assert.ok(samplerKl(-1, -2) > 0 && samplerKl(-2, -1) > 0);
    const q = [0.5, 0.3, 0.2];
    const p = [0.2, 0.3, 0.5];
    const exact = q.reduce((s, qi, i) => s + qi * Math.log(qi / p[i]), 0);
    const mean = q.reduce((s, qi, i) => s + qi * samplerKl(Math.log(qi), Math.log(p[i])), 0);
    assert.ok(Math.abs(mean - exact) < 1e-12, `${mean} vs ${exact}`);
  });

  it('Graph.dropUnreadInputs removes the inputs no node reads; the quantized names stand beside the weight', () => {
    const g = Graph.create('t');
    const a = g.input('a', 'float32', [2]);
    g.input('unused', 'float32', [2]);
    g.output(g.add(a, a), 'y');
    assert.deepEqual(g.dropUnreadInputs(), ['unused']);
    assert.deepEqual(
      g.inputs.map((v) => v.name),
      ['a'],
    );
    assert.deepEqual(quantizedNames('model.layers.0.mlp.up_proj.weight'), {
      codes: 'model.layers.0.mlp.up_proj.weight.codes',
      scales: 'model.layers.0.mlp.up_proj.weight.scales',
    });
  });
});
