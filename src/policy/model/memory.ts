// The memory a training run will take, before it starts: weights, optimizer state, the
// activations of one update micro-batch, the KV caches of the episodes in flight and the logits
// the generation and scoring runs hold, per place (host RAM; device memory on CUDA / WebGPU).
// Computed from the model's shapes and the graphs this project builds (float32 throughout: F16
// and BF16 weights are converted to float32 once at load). A run that does not fit is refused
// before any sandbox starts, naming the numbers and the settings that would fit.
import * as fs from 'node:fs';
import * as os from 'node:os';
import { TurnwiseError } from '../../core/errors';
import { formatMiB } from '../../core/units';
import { webgpuAdapters, type GpuAdapter } from '../../onnx/adapters';
import { kvBytesPerToken, parameterCount, paramSpecs, type ModelConfig } from './config';
import { SCORE_CHUNK_ROWS, SCORING_ROWS_PER_RUN as SCORING_ROWS } from './graphs';
import { loraTargets, type LoraConfig } from '../files/lora';
import { LAYER_ACTIVATION_COUNTS, layerActivationValues, logitChunkRows, recomputeByDefault } from '../training/graphs';
import { halfSessionBytes, PRECISION_BITS, QUANTIZE_VALUES_PER_S, quantizedSessionBytes } from './quantize';

const F32 = 4;
const MB = 1024 ** 2;

/**
 * Float32 weight bytes from which a CPU policy packs its decode weights when the setting leaves it
 * open (SessionSettings.packDecodeWeights). Below, a decode step costs its runs' overhead more than
 * reading the weights (turnwise-tiny: 13 MB).
 */
export const PACK_MIN_WEIGHT_BYTES = 256 * MB;

/** The packed decode session's copy of the weights: all of them, a tied embedding twice (read by the lookup as it is, by the head packed). */
function packedDecodeBytes(c: ModelConfig): number {
  return (parameterCount(c) + (c.tie_word_embeddings ? c.vocab_size * c.hidden_size : 0)) * F32;
}

/** KV caches of `episodes` sequences of `context` tokens: each sequence's own, and the batched cache a decode step feeds and gets back. */
function kvCacheBytes(c: ModelConfig, episodes: number, context: number): number {
  return 3 * episodes * context * kvBytesPerToken(c);
}

/** What a plan is for. */
export interface MemoryPlanInput {
  config: ModelConfig;
  /** Training a LoRA adapter (the base frozen); undefined: the whole model. */
  lora?: Pick<LoraConfig, 'r' | 'target_modules'>;
  /** Execution provider the sessions run on: cpu computes in host RAM, cuda and webgpu on the device. */
  provider: 'cpu' | 'cuda' | 'webgpu';
  /** Tokens of one update micro-batch (updateTokensPerStep): whole rows, at least one. */
  updateTokensPerStep: number;
  /** Tokens of a row: the context an episode's turns are trained at. Default: max_position_embeddings. */
  context?: number;
  /** Episodes in flight, each with a KV cache of `context` tokens. */
  episodes: number;
  /** A KL term to a reference model: with full training, a second copy of the starting weights. */
  klReference?: boolean;
  /**
   * The run scores its episodes against the reference fix each iteration (gear, a2tgpo): more
   * scoring runs on the same sessions, so the same peak; named in the scoring part.
   */
  teacherPass?: boolean;
  /** Decode steps hold the weights packed in their session (SessionSettings.packDecodeWeights; CPU only): a second copy while sampling. */
  packedDecode?: boolean;
  /**
   * What decode steps that draw tokens read the weights as (SessionSettings.rolloutPrecision): on
   * the CPU int8 or int4, held quantized in place of the packed copy (every product's codes and
   * scales); on a GPU provider float16, a half-precision copy of every product's weight kept on
   * the device beside the float32 weights.
   */
  quantizedDecode?: 'float32' | 'float16' | 'int8' | 'int4';
}

export interface MemoryPart {
  name: string;
  bytes: number;
  /** host: RAM of this process; device: the GPU's memory (CUDA, WebGPU). */
  where: 'host' | 'device';
  /** How the figure is made, in a few words. */
  detail: string;
}

export interface MemoryPlan {
  input: Required<Omit<MemoryPlanInput, 'lora'>> & Pick<MemoryPlanInput, 'lora'>;
  parameters: number;
  adapterParameters: number;
  /** Rows and tokens of one update micro-batch. */
  microBatch: { rows: number; tokens: number };
  parts: MemoryPart[];
  host: number;
  device: number;
}

/**
 * Runtime, thread pools and session state besides the tensors: Node (~60 MB), the ONNX Runtime
 * library, a handful of cached sessions and their arenas' slack, as measured on turnwise-tiny runs.
 */
export const RUNTIME_BYTES = 320 * MB;

/**
 * Float32 values one token keeps alive through an update step, per layer and per vocabulary
 * entry: what the training graph saves for the backward pass (buildForward + tokenLogprobs +
 * the loss), with the backward pass's own buffers at their peak. Counted from the graph's ops:
 * a layer saves ~12 hidden-sized values (norm inputs and outputs, q, k, v before and after rope,
 * the attention output, projections, residuals), ~5 intermediate-sized ones (gate, up, SiLU's
 * sigmoid and product, their product) and ~2 attention values per key (the softmax
 * probabilities and their gradient) over the keys a chunked query sees; the logits ~8 per
 * vocabulary entry (logits, scaled, shifted, exp, log-softmax, its exp for the entropy, two
 * gradients). On turnwise-tiny (CPU) this gives 10-20% above the measured peak per row at 256,
 * 512 and 1,024 tokens (about 185 MB per 1,024-token row measured). Where the training graph
 * computes the head in chunks (training.ts logitChunkRows), the vocabulary values are one chunk's;
 * where it recomputes the layers (recomputeByDefault), a layer's input per layer and two layers'
 * worth of activations (the one recomputed and its gradients).
 */
export const ACTIVATION_COUNTS = { ...LAYER_ACTIVATION_COUNTS, vocab: 8 } as const;

function count(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/** Float32 values of activations one micro-batch of `rows` × `seq` tokens holds at the peak of an update. */
export function activationValues(c: ModelConfig, rows: number, seq: number, lora?: Pick<LoraConfig, 'r' | 'target_modules'>): number {
  const N = rows * seq;
  const a = ACTIVATION_COUNTS;
  const perLayer = layerActivationValues(c, seq);
  const adapter = lora ? (loraTargets(c, lora).length / c.num_hidden_layers) * 2 * lora.r : 0;
  const chunk = logitChunkRows(rows, seq, c.vocab_size);
  // Recomputed layers keep each layer's input, and one layer's activations and their gradients at a time.
  const layers = recomputeByDefault(c, rows, seq)
    ? c.num_hidden_layers * c.hidden_size + 2 * (perLayer + adapter)
    : c.num_hidden_layers * (perLayer + adapter);
  return N * layers + (chunk > 0 ? chunk : N) * a.vocab * c.vocab_size;
}

/** The memory a run of these settings takes, part by part. */
export function planMemory(input: MemoryPlanInput): MemoryPlan {
  const c = input.config;
  const context = input.context ?? c.max_position_embeddings;
  const asked = input.quantizedDecode ?? 'float32';
  // What each provider runs (rolloutPrecisionFor): the CPU's quantized forms, the GPU's float16.
  const quantizedDecode: NonNullable<MemoryPlanInput['quantizedDecode']> =
    input.provider === 'cpu' ? (asked === 'float16' ? 'float32' : asked) : asked === 'float16' ? 'float16' : 'float32';
  const full = {
    ...input,
    context,
    klReference: input.klReference ?? false,
    teacherPass: input.teacherPass ?? false,
    packedDecode: (input.packedDecode ?? false) && input.provider === 'cpu' && quantizedDecode === 'float32',
    quantizedDecode,
  };
  const specs = paramSpecs(c);
  const P = specs.reduce((s, p) => s + count(p.shape), 0);
  const A = input.lora ? loraTargets(c, input.lora).reduce((s, t) => s + input.lora!.r * (t.inDim + t.outDim), 0) : 0;
  const rows = Math.max(1, Math.floor(input.updateTokensPerStep / context));
  const tokens = rows * context;
  const dev: 'host' | 'device' = input.provider === 'cpu' ? 'host' : 'device';
  const parts: MemoryPart[] = [];
  const amount = (x: number) => (x >= 1e9 ? `${(x / 1e9).toFixed(2)}G` : `${(x / 1e6).toFixed(1)}M`);
  parts.push({
    name: 'weights',
    bytes: P * F32,
    where: 'host',
    detail: `${amount(P)} parameters as float32, held once (the loaded arrays) and fed to every session${full.packedDecode ? ' but the packed decode step' : ''}`,
  });
  // Counted beside everything else, though released during each update: the plan stays an upper bound.
  if (full.packedDecode)
    parts.push({
      name: 'packed decode weights',
      bytes: packedDecodeBytes(c),
      where: 'host',
      detail: `the decode session's own copy, packed for the CPU's matrix kernel (while sampling)${c.tie_word_embeddings ? '; the tied embedding twice' : ''}`,
    });
  if (full.quantizedDecode === 'float16')
    parts.push({
      name: 'float16 decode weights',
      bytes: halfSessionBytes(c),
      where: 'device',
      detail: "every product's weight in half precision, for the sampling steps (made once per weights version)",
    });
  else if (full.quantizedDecode !== 'float32') {
    const bits = PRECISION_BITS[full.quantizedDecode];
    parts.push({
      name: `${full.quantizedDecode} decode weights`,
      bytes: quantizedSessionBytes(c, bits),
      where: 'host',
      detail: `the sampling session's ${bits}-bit codes and scales of every product (made once per weights version, in about ${Math.max(1, Math.round(P / QUANTIZE_VALUES_PER_S))} s)`,
    });
  }
  if (input.lora) {
    // Adapter, its AdamW moments, the step's new values of all three, and the summed gradient (in and out of the Loop).
    parts.push({
      name: 'adapter + optimizer',
      bytes: 8 * A * F32,
      where: 'host',
      detail: `${(A / 1e6).toFixed(2)}M adapter values: adapter, 2 AdamW moments, their next values, gradient sums`,
    });
  } else {
    parts.push({
      name: 'optimizer',
      bytes: 7 * P * F32,
      where: 'host',
      detail: "2 AdamW moments, the step's next weights and moments (3), gradient sums in and out of the Loop (2)",
    });
    if (full.klReference)
      parts.push({ name: 'KL reference', bytes: P * F32, where: 'host', detail: 'the starting weights, for the KL term' });
  }
  parts.push({
    name: 'update activations',
    bytes: activationValues(c, rows, context, input.lora) * F32,
    where: dev,
    detail: `one micro-batch: ${rows} row${rows > 1 ? 's' : ''} × ${context} tokens`,
  });
  parts.push({
    name: 'KV caches',
    bytes: kvCacheBytes(c, input.episodes, context),
    where: 'host',
    detail: `${input.episodes} episodes × ${context} tokens, kept per episode and batched per step`,
  });
  // A prefill runs full causal attention: a layer's scores and probabilities, [rows, heads, T, T]
  // twice, plus a few hidden-sized values per token. The episodes' prefill returns the logits of
  // each row's last token; log-prob scoring (8 rows a run) runs the head over chunks of positions,
  // one chunk's logits and log-softmax alive at a time. The larger of the two.
  const layer = (rows: number) => rows * context * (2 * c.num_attention_heads * context + 4 * c.hidden_size + c.intermediate_size);
  const episodesPrefill = layer(input.episodes) + 2 * input.episodes * c.vocab_size;
  const scoring = layer(SCORING_ROWS) + 4 * SCORE_CHUNK_ROWS * c.vocab_size;
  const prefillIsLarger = episodesPrefill > scoring;
  parts.push({
    name: 'prefill activations',
    bytes: Math.max(episodesPrefill, scoring) * F32,
    where: dev,
    detail: prefillIsLarger
      ? `prefill of ${input.episodes} episodes × ${context} tokens: one layer's attention`
      : `log-prob scoring${input.teacherPass ? ' (the KL reference, the update check and the teacher pass)' : ''} of ${SCORING_ROWS} rows × ${context} tokens: one layer's attention and a chunk of ${SCORE_CHUNK_ROWS} positions' logits`,
  });
  if (dev === 'device') {
    const kept = input.provider === 'webgpu';
    parts.push({
      name: 'device weights',
      bytes: P * F32,
      where: 'device',
      detail: kept
        ? 'the weights, uploaded once per weights version and shared by every session'
        : 'the weights, copied in by every run that reads them',
    });
    parts.push({
      name: 'device train state',
      bytes: (input.lora ? 7 * A : 6 * P) * F32,
      where: 'device',
      detail: input.lora
        ? 'the adapter kept for sampling; in a step, the adapter and its 2 AdamW moments in and their next values out'
        : 'in a step, the 2 AdamW moments in and the next weights and moments out',
    });
    parts.push({
      name: 'device KV caches',
      bytes: kvCacheBytes(c, input.episodes, context),
      where: 'device',
      detail: `a decode step of all ${input.episodes} episodes reads their caches on the device`,
    });
  }
  parts.push({ name: 'runtime', bytes: RUNTIME_BYTES, where: 'host', detail: 'Node, ONNX Runtime, sessions' });
  const sum = (w: 'host' | 'device') => parts.filter((p) => p.where === w).reduce((s, p) => s + p.bytes, 0);
  return {
    input: full,
    parameters: P,
    adapterParameters: A,
    microBatch: { rows, tokens },
    parts,
    host: sum('host'),
    device: sum('device'),
  };
}

/**
 * The size rule of decode-weight packing, before any memory check: never on a GPU provider (a
 * provider of `auto` may still land on the CPU), `on` / `off` (true / false) as set, otherwise a
 * model of PACK_MIN_WEIGHT_BYTES of float32 weights or more.
 */
export function packsDecodeWeights(setting: 'auto' | 'on' | 'off' | boolean | undefined, provider: string, weightBytes: number): boolean {
  if (provider === 'cuda' || provider === 'webgpu') return false;
  if (setting === 'on' || setting === true) return true;
  if (setting === 'off' || setting === false) return false;
  return weightBytes >= PACK_MIN_WEIGHT_BYTES;
}

/**
 * Whether a policy that only samples (an evaluation, a server) packs its CPU decode weights.
 * `on` and `off` as set; `auto` packs PACK_MIN_WEIGHT_BYTES of float32 weights or more where the
 * weights, their packed copy (a tied embedding in it twice), the KV caches of `episodes` sequences
 * of `context` tokens and the runtime fit `limit`: nothing else is held there, as no update runs.
 * `note` says why a model the size rule would pack decodes with its weights fed.
 */
export function samplingPacksWeights(
  setting: 'auto' | 'on' | 'off',
  provider: string,
  c: ModelConfig,
  load: { episodes: number; context: number },
  limit: { bytes: number; source: string },
): { pack: boolean; note?: string } {
  const weights = parameterCount(c) * F32;
  if (!packsDecodeWeights(setting, provider, weights)) return { pack: false };
  if (setting === 'on') return { pack: true };
  const need =
    weights + packedDecodeBytes(c) + kvCacheBytes(c, load.episodes, Math.min(load.context, c.max_position_embeddings)) + RUNTIME_BYTES;
  if (need <= limit.bytes) return { pack: true };
  return {
    pack: false,
    note: `decoding with the weights fed: packing them would take ${formatMiB(need)} with ${load.episodes} sequence${load.episodes === 1 ? '' : 's'} of ${load.context.toLocaleString('en-US')} tokens, over the ${formatMiB(limit.bytes)} of ${limit.source}`,
  };
}

/** Memory a run may use: TURNWISE_MEMORY_LIMIT_MB when set, else what the machine has available (MemAvailable) plus this process's own. */
export function availableMemory(env: NodeJS.ProcessEnv = process.env): { bytes: number; source: string } {
  const set = env.TURNWISE_MEMORY_LIMIT_MB;
  if (set !== undefined && set !== '') {
    const mb = Number(set);
    if (!(mb > 0) || !Number.isFinite(mb))
      throw new TurnwiseError('invalid-input', `TURNWISE_MEMORY_LIMIT_MB must be a number of megabytes > 0, got ${JSON.stringify(set)}`, {
        hint: "e.g. TURNWISE_MEMORY_LIMIT_MB=8192, or unset it to use the machine's memory",
      });
    return { bytes: mb * MB, source: 'TURNWISE_MEMORY_LIMIT_MB' };
  }
  let free = os.freemem();
  try {
    const m = /^MemAvailable:\s+(\d+) kB/m.exec(fs.readFileSync('/proc/meminfo', 'utf8'));
    if (m) free = Number(m[1]) * 1024;
  } catch {
    // not Linux: os.freemem()
  }
  return { bytes: Math.min(os.totalmem(), free + process.memoryUsage().rss), source: 'available RAM' };
}

/**
 * Device memory a run may use on a GPU provider: TURNWISE_DEVICE_MEMORY_LIMIT_MB, else the first
 * GPU adapter's memory where its driver says (nvidia-smi); undefined when unknown (not checked).
 */
export function availableDeviceMemory(
  env: NodeJS.ProcessEnv = process.env,
  adapters: () => readonly GpuAdapter[] = webgpuAdapters,
): { bytes: number; source: string } | undefined {
  const set = Number(env.TURNWISE_DEVICE_MEMORY_LIMIT_MB);
  if (set > 0) return { bytes: set * MB, source: 'TURNWISE_DEVICE_MEMORY_LIMIT_MB' };
  const gpu = adapters().find((a) => a.kind === 'hardware' && a.memoryBytes);
  return gpu ? { bytes: gpu.memoryBytes!, source: `the memory of the ${gpu.name}` } : undefined;
}

/** Width of the plan's first column: its longest part name ('packed decode weights'). */
const NAME_WIDTH = 21;

/** The plan as lines for a terminal or an editor panel. */
export function formatMemoryPlan(p: MemoryPlan, limit?: number): string[] {
  const i = p.input;
  const lines = [
    `memory plan (${i.provider}, ${i.lora ? `LoRA r ${i.lora.r}` : 'full training'}, ${i.episodes} episodes in flight × ${i.context} tokens, update micro-batches of ${p.microBatch.rows} row${p.microBatch.rows > 1 ? 's' : ''} = ${p.microBatch.tokens} tokens):`,
    ...p.parts.map(
      (x) => `  ${x.name.padEnd(NAME_WIDTH)} ${formatMiB(x.bytes).padStart(10)}  ${x.where === 'device' ? '[device] ' : ''}${x.detail}`,
    ),
    `  ${'host total'.padEnd(NAME_WIDTH)} ${formatMiB(p.host).padStart(10)}${limit !== undefined ? ` of ${formatMiB(limit)}` : ''}`,
  ];
  if (p.device > 0) lines.push(`  ${'device total'.padEnd(NAME_WIDTH)} ${formatMiB(p.device).padStart(10)}`);
  return lines;
}

/** The largest value in `candidates` (descending) whose plan fits `limit` on the host. */
function largestFitting(candidates: number[], plan: (x: number) => MemoryPlan, limit: number): number | undefined {
  return candidates.find((x) => plan(x).host <= limit);
}

/**
 * updateTokensPerStep 0 (auto): the largest of 4096 … 256 tokens whose plan fits `limit` (the
 * smallest when none does). Larger micro-batches buy little speed on a CPU (the work per row is
 * the same), so the cap stays at 4,096 tokens however much memory is free.
 */
export function autoUpdateTokens(input: Omit<MemoryPlanInput, 'updateTokensPerStep'>, limit: number): number {
  const caps = [4096, 2048, 1024, 512, 256];
  return largestFitting(caps, (t) => planMemory({ ...input, updateTokensPerStep: t }), limit) ?? caps[caps.length - 1];
}

/**
 * Refuses a plan over `limit` (host) or `deviceLimit`: the message gives the plan's total, its
 * largest parts and the settings that would fit (fewer episodes in flight, a smaller
 * updateTokensPerStep, LoRA instead of full training, a shorter context).
 */
export function assertPlanFits(
  p: MemoryPlan,
  limit: { bytes: number; source: string },
  deviceLimit?: { bytes: number; source: string },
): void {
  const i = p.input;
  const over = p.host > limit.bytes;
  const devOver = deviceLimit !== undefined && p.device > deviceLimit.bytes;
  if (!over && !devOver) return;
  const biggest = [...p.parts]
    .sort((a, b) => b.bytes - a.bytes)
    .slice(0, 3)
    .map((x) => `${x.name} ${formatMiB(x.bytes)}`)
    .join(', ');
  const fixes: string[] = [];
  const again = (o: Partial<MemoryPlanInput>) => planMemory({ ...i, ...o });
  const fits = (q: MemoryPlan) => q.host <= limit.bytes && (deviceLimit === undefined || q.device <= deviceLimit.bytes);
  if (i.packedDecode && fits(again({ packedDecode: false })))
    fixes.push('"packDecodeWeights": "off" (decode with the weights fed: no second copy)');
  const caps = [8192, 4096, 2048, 1024, 512, 256].filter((t) => t < i.updateTokensPerStep);
  const cap = caps.find((t) => fits(again({ updateTokensPerStep: t })));
  if (cap !== undefined) fixes.push(`"updateTokensPerStep": ${cap}`);
  const eps = Array.from({ length: i.episodes - 1 }, (_, k) => i.episodes - 1 - k).find((e) => fits(again({ episodes: e })));
  if (eps !== undefined) fixes.push(`"concurrency": ${eps} (episodes in flight)`);
  if (cap === undefined && eps === undefined) {
    const both = [1024, 512, 256].find((t) => fits(again({ updateTokensPerStep: t, episodes: 1 })));
    if (both !== undefined) fixes.push(`"updateTokensPerStep": ${both} with "concurrency": 1`);
  }
  if (!i.lora) {
    const lora = {
      r: 16,
      target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] as LoraConfig['target_modules'],
    };
    const loraCap = [i.updateTokensPerStep, ...caps].find((t) => fits(again({ lora, updateTokensPerStep: t })));
    if (loraCap !== undefined)
      fixes.push(
        `"lora": {} (train a LoRA adapter instead of the whole model)${loraCap !== i.updateTokensPerStep ? ` with "updateTokensPerStep": ${loraCap}` : ''}`,
      );
  }
  const ctx = [2048, 1024, 512]
    .filter((t) => t < i.context)
    .find((t) => fits(again({ context: t, updateTokensPerStep: Math.min(i.updateTokensPerStep, t) })));
  if (ctx !== undefined) fixes.push(`a model with a context of ${ctx} tokens`);
  const where =
    devOver && !over
      ? `device memory ${formatMiB(p.device)} over the ${formatMiB(deviceLimit!.bytes)} of ${deviceLimit!.source}`
      : `${formatMiB(p.host)} over the ${formatMiB(limit.bytes)} of ${limit.source}`;
  throw new TurnwiseError('invalid-input', `this run would not fit in memory: its plan needs ${where} (largest: ${biggest})`, {
    hint: fixes.length
      ? `settings that fit: ${fixes.join('; or ')}`
      : 'no smaller setting fits: use a machine with more memory, or a smaller model',
  });
}
