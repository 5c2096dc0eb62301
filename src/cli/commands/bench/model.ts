// `turnwise bench model`: load, prefill, decode and LoRA-training speed of a model at the shape of
// a real checkpoint (random weights), beside PyTorch doing the same work.
import { BENCH_SHAPES, benchModel, type BenchModelWork } from '../../../bench/model';
import { listOption, numberInRange, oneOf, UsageError, valueOptions, type CliCommand } from '../../command';
import { PROVIDER_USAGE, providerOption } from '../options';

const TORCH = ['auto', 'off'] as const;
/** What `--against` compares with, beside PyTorch. */
const AGAINST = ['llama.cpp'] as const;
/** Rollout precisions `--precisions` may name (`none`: float32 only). */
const PRECISIONS = ['int8', 'int4', 'float16'] as const;

export const benchModelCommand: CliCommand = {
  name: 'bench model',
  summary:
    "load, prefill, decode (batch 1 and 8) and LoRA-train a model at a real checkpoint's shape (random BF16 weights), beside PyTorch (and llama.cpp's decode with --against llama.cpp)",
  usage: `--shape ${Object.keys(BENCH_SHAPES).join('|')} ${PROVIDER_USAGE} [--threads N] [--decode-steps N] [--context N] [--train-rows N] [--torch auto|off] [--python PATH] [--against llama.cpp] [--precisions int8,int4,float16|none] [--json]`,
  options: valueOptions(
    'shape',
    'provider',
    'threads',
    'decode-steps',
    'context',
    'train-rows',
    'torch',
    'python',
    'against',
    'precisions',
  ),
  async run(args, io) {
    const shape = args.values.shape as string | undefined;
    if (!shape) throw new UsageError(`--shape is required: one of ${Object.keys(BENCH_SHAPES).join(', ')}`);
    if (!(shape in BENCH_SHAPES))
      throw new UsageError(`--shape must be one of ${Object.keys(BENCH_SHAPES).join(', ')}, got ${JSON.stringify(shape)}`);
    const provider = providerOption(args);
    const torch = oneOf(args, 'torch', TORCH, 'auto');
    const againstLlamaCpp = args.values.against !== undefined && oneOf(args, 'against', AGAINST, 'llama.cpp') === 'llama.cpp';
    // Not given: bench model's default for the provider (int8 and int4 on the CPU, float16 on a GPU).
    const listed = args.values.precisions === undefined ? undefined : listOption(args, 'precisions', PRECISIONS);
    const precisions = listed && listed.length === 1 && listed[0] === 'none' ? [] : listed;
    for (const p of precisions ?? [])
      if (!(PRECISIONS as readonly string[]).includes(p))
        throw new UsageError(`--precisions takes int8, int4, float16 or none, comma-separated; got ${JSON.stringify(p)}`);
    const work: Partial<BenchModelWork> = {};
    if (args.values['decode-steps'] !== undefined) work.decodeSteps = numberInRange(args, 'decode-steps', 0, { min: 1, integer: true });
    if (args.values.context !== undefined) {
      const c = numberInRange(args, 'context', 0, { min: 1, integer: true });
      work.contextTokens = c;
      work.prefillTokens = c;
    }
    if (args.values['train-rows'] !== undefined) work.trainRows = numberInRange(args, 'train-rows', 0, { min: 1, integer: true });
    const r = await benchModel({
      shape,
      work,
      torch,
      againstLlamaCpp,
      ...(precisions ? { precisions: precisions as (typeof PRECISIONS)[number][] } : {}),
      ...(typeof args.values.python === 'string' ? { python: args.values.python } : {}),
      settings: {
        provider,
        threads: numberInRange(args, 'threads', 0, { min: 0, integer: true }),
        onWarning: (m) => io.err(`warning: ${m}`),
      },
      onProgress: io.json ? undefined : (m) => io.err(m),
    });
    if (io.json) {
      io.out(JSON.stringify(r, null, 2));
      return 0;
    }
    const t = r.torch.available ? r.torch : undefined;
    const vs = (x: number | null) => (x === null ? '' : `  (×${x} PyTorch)`);
    const w = r.work;
    io.out(
      [
        `${r.shape} (${(r.parameters / 1e6).toFixed(0)}M params, ${r.family}) on ${r.provider}; load average ${r.load_avg_start.join(' ')} → ${r.load_avg_end.join(' ')}`,
        `  load            ${r.load_s} s to the first token  (peak RSS ${r.load_peak_rss_mb} MB)${t ? `; PyTorch ${t.load_s} s` : ''}`,
        `  prefill         ${r.prefill_tokens_per_s} tokens/s at ${w.prefillTokens} tokens  (peak RSS ${r.prefill_peak_rss_mb} MB)${vs(r.prefill_vs_torch)}`,
        `  decode batch 1  ${r.decode_tokens_per_s_b1} tokens/s at ${w.contextTokens} tokens of context${vs(r.decode_vs_torch)}; ${Math.round(r.decode_fraction_of_bound * 100)}% of the ${r.decode_bound_tokens_per_s} tokens/s bandwidth bound`,
        `  decode batch ${w.decodeBatch}  ${r.decode_tokens_per_s_batch} tokens/s (×${r.decode_batch_speedup} batch 1)${vs(r.decode_batch_vs_torch)}  (peak RSS ${r.decode_peak_rss_mb} MB)`,
        `  LoRA train      ${r.lora_train_tokens_per_s} tokens/s, ${r.train_step_s} s per step of ${w.trainRows} × ${w.trainSeq}  (peak RSS ${r.train_step_peak_rss_mb} MB from ${r.train_start_rss_mb} MB held before it, budget ${r.train_rss_budget_mb} MB)${vs(r.train_vs_torch)}`,
        ...Object.entries(r.decode_quantized).map(
          ([p, q]) =>
            `  decode ${p}     ${q.decode_tokens_per_s_b1} / ${q.decode_tokens_per_s_batch} tokens/s at batch 1 / ${w.decodeBatch} (×${q.speedup_b1} / ×${q.speedup_batch} float32); ${Math.round(q.decode_fraction_of_bound * 100)}% of its ${q.decode_bound_tokens_per_s} tokens/s bound; KL to float32 ${q.kl_to_float} nats/token; ready in ${q.setup_s} s`,
        ),
        `  memory          ${r.memory_bandwidth_gbs} GB/s stream copy; a decoded token reads ${(r.weights_bytes_per_token / 1e9).toFixed(2)} GB of weights`,
        r.llama_cpp.available
          ? `  llama.cpp       node-llama-cpp ${r.llama_cpp.version}, f32 weights: decode ${r.llama_cpp.decode_tokens_per_s_b1} / ${r.llama_cpp.decode_tokens_per_s_batch} tokens/s at batch 1 / ${w.decodeBatch}; Turnwise ×${r.decode_vs_llama_cpp} / ×${r.decode_batch_vs_llama_cpp}`
          : `  llama.cpp       not run: ${r.llama_cpp.reason}`,
        ...(r.llama_cpp_q8_0.available
          ? [
              `  llama.cpp q8_0  decode ${r.llama_cpp_q8_0.decode_tokens_per_s_b1} / ${r.llama_cpp_q8_0.decode_tokens_per_s_batch} tokens/s at batch 1 / ${w.decodeBatch}; Turnwise int8 ×${r.decode_int8_vs_llama_cpp_q8_0} / ×${r.decode_batch_int8_vs_llama_cpp_q8_0}`,
            ]
          : []),
        t
          ? `  PyTorch ${t.torch_version}: prefill ${t.prefill_tokens_per_s}, decode ${t.decode_tokens_per_s_b1} / ${t.decode_tokens_per_s_batch}, LoRA train ${t.lora_train_tokens_per_s} tokens/s (peak RSS ${t.train_step_peak_rss_mb} MB)`
          : `  PyTorch         not run: ${(r.torch as { reason: string }).reason}`,
      ].join('\n'),
    );
    return 0;
  },
};
