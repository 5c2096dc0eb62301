// `turnwise bench train`: how fast the ONNX policy trains and decodes on this machine.
import { benchTrain } from '../../../bench/train';
import { oneOf, optionalNumber, UsageError, valueOptions, type CliCommand } from '../../command';
import { PROVIDER_USAGE, providerOption } from '../options';

const SPIN = ['on', 'off'] as const;

export const benchTrainCommand: CliCommand = {
  name: 'bench train',
  summary: 'time a training step, the K-step Loop, and KV-cache vs no-cache decoding of turnwise-tiny',
  usage: `[--batch B] [--seq T] [--steps N] [--k K] [--context C] ${PROVIDER_USAGE} [--threads N] [--spin on|off] [--json]`,
  options: valueOptions('batch', 'seq', 'steps', 'k', 'context', 'provider', 'threads', 'spin'),
  async run(args, io) {
    const int = (name: string, fallback: number, min: number) => {
      const v = optionalNumber(args, name, fallback);
      if (!Number.isInteger(v) || v < min) throw new UsageError(`--${name} must be an integer ≥ ${min}, got ${v}`);
      return v;
    };
    const provider = providerOption(args);
    const spin = oneOf(args, 'spin', SPIN, 'off');
    const r = await benchTrain({
      batch: int('batch', 4, 1),
      seq: int('seq', 128, 2),
      steps: int('steps', 6, 1),
      k: int('k', 8, 2),
      context: int('context', 512, 1),
      settings: {
        provider,
        threads: int('threads', 0, 0),
        spinning: spin === 'on',
        onWarning: (m) => io.err(`warning: ${m}`),
      },
      onProgress: io.json ? undefined : (m) => io.err(m),
    });
    if (io.json) io.out(JSON.stringify(r, null, 2));
    else {
      io.out(
        [
          `${r.config} (${(r.parameters / 1e6).toFixed(2)}M params) on ${r.provider}, batch ${r.batch} × seq ${r.seq}, ${r.loss}`,
          `  threads         ${r.threads || 'one per core'}, spinning ${r.spinning ? 'on' : 'off'}, load average ${r.load_avg_1m}`,
          `  train step      ${r.train_step_ms} ms  (${r.tokens_per_s} tokens/s)`,
          `  Loop of ${r.loop_k}       ${r.loop_ms_per_step} ms/step vs ${r.separate_ms_per_step} ms/step separately (×${r.loop_speedup}); ×${r.loop_speedup_small} at ${r.loop_small_batch} × ${r.loop_small_seq}`,
          `  decode @${r.decode_context}    ${r.decode_tokens_per_s_kv} tokens/s with KV cache, ${r.decode_tokens_per_s_nokv} without (×${r.kv_speedup}); ${r.decode_tokens_per_s_kv_batched} tokens/s for ${r.decode_batch} rows at once`,
          `  sequences       ${r.sequence_sample_tokens_per_s} tokens/s sampling ${r.decode_batch} sequences of ragged lengths, a turn each`,
          `  peak RSS        ${r.peak_rss_mb} MB`,
        ].join('\n'),
      );
    }
    return 0;
  },
};
