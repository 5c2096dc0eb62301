// `turnwise bench train`: option checking through main(), and one tiny real run whose fields must
// agree with each other (real ONNX Runtime; timings themselves are the machine's).
import * as assert from 'node:assert/strict';
import { main } from '../../../src/cli/main';
import { benchTrain, SMALL_LOOP } from '../../../src/bench/train';

async function run(argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, { out: (t) => out.push(t), err: (t) => err.push(t) });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

describe('bench train', function () {
  this.timeout(120000);

  it('refuses bad --spin and --threads values with a usage error', async () => {
    const spin = await run(['bench', 'train', '--spin', 'sometimes']);
    assert.equal(spin.code, 2);
    assert.match(spin.err, /--spin must be one of on, off/);
    const threads = await run(['bench', 'train', '--threads', '1.5']);
    assert.equal(threads.code, 2);
    assert.match(threads.err, /--threads must be an integer ≥ 0/);
  });

  it('a tiny run reports consistent fields: tokens/s from the step time, speedup from the two timings', async () => {
    const r = await benchTrain({
      batch: 1,
      seq: 4,
      steps: 2,
      k: 2,
      loopRepeats: 1,
      packedBatch: 2,
      packedSeq: 64,
      context: 8,
      decodeTokens: 8,
      settings: { provider: 'cpu', threads: 1 },
    });
    assert.equal(r.config, 'turnwise-tiny');
    assert.equal(r.provider, 'cpu');
    assert.deepEqual([r.batch, r.seq, r.loop_k, r.threads, r.spinning], [1, 4, 2, 1, false]);
    assert.ok(r.train_step_ms > 0 && r.loop_ms_per_step > 0 && r.separate_ms_per_step > 0);
    assert.ok(Math.abs(r.tokens_per_s - 4 / (r.train_step_ms / 1000)) <= 0.01 * r.tokens_per_s + 1, JSON.stringify(r));
    assert.ok(Math.abs(r.loop_speedup - r.separate_ms_per_step / r.loop_ms_per_step) < 0.02 * r.loop_speedup + 0.01, JSON.stringify(r));
    assert.ok(r.load_avg_1m >= 0 && r.peak_rss_mb > 0);
    assert.deepEqual([r.sft_packed_batch, r.sft_packed_seq], [2, 64]);
    assert.ok(r.sft_packed_real_tokens > 0 && r.sft_packed_real_tokens <= 2 * 64);
    assert.ok(
      Math.abs(r.sft_packed_tokens_per_s - r.sft_packed_real_tokens / (r.sft_packed_step_ms / 1000)) <=
        0.01 * r.sft_packed_tokens_per_s + 1,
      JSON.stringify(r),
    );
    assert.deepEqual([r.loop_small_batch, r.loop_small_seq], [SMALL_LOOP.batch, SMALL_LOOP.seq]);
    assert.ok(Number.isFinite(r.loop_speedup_small) && r.loop_speedup_small > 0);
    assert.equal(r.decode_batch, 8);
    assert.ok(r.decode_tokens_per_s_kv_batched > 0 && Number.isFinite(r.decode_tokens_per_s_kv_batched));
    assert.ok(r.sequence_sample_tokens_per_s > 0 && Number.isFinite(r.sequence_sample_tokens_per_s));
  });
});
