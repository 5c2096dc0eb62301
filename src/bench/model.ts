// `turnwise bench model`: a model at the exact shape of a real checkpoint (Qwen2.5-0.5B, Llama 3.2
// 1B) with random weights, written as a BF16 Hugging Face folder and loaded like a user's: load
// time, prefill, KV-cache decode at batch 1 and 8, a LoRA training step, each with its peak RSS;
// the same work in PyTorch in a child process (scripts/compare/torch_model_bench.py) for ratios,
// with --against llama.cpp llama.cpp's decode of the same weights (bench/llama-cpp.ts), and the
// machine's measured memory bandwidth for the ceiling of batch-1 decode.
import { mean, median } from '../core/stats';
import * as childProcess from 'node:child_process';
import * as fs from 'node:fs';
import * as v8 from 'node:v8';
import * as vm from 'node:vm';
import * as os from 'node:os';
import * as path from 'node:path';
import { Worker } from 'node:worker_threads';
import { TurnwiseError } from '../core/errors';
import { findResource } from '../core/resources';
import { meterFeeds, ort, type SessionSettings } from '../onnx';
import { loadCheckpoint } from '../policy/files/checkpoint';
import { parameterCount, paramSpecs, type ModelConfig } from '../policy/model/config';
import { writeModelFolder } from '../policy/files/hf';
import { llamaCppDecode, writeBenchGguf, type LlamaCppDecodeFigures } from './llama-cpp';
import { initAdapter, LORA_MODULES, type LoraConfig } from '../policy/files/lora';
import { Policy } from '../policy/inference/policy';
import type { Sequence } from '../policy/inference/sequences';
import { numel } from '../policy/files/safetensors';
import { byteLevelTokenizerConfig, byteLevelTokenizerJson } from '../policy/files/tokenizer';
import { PolicyTrainer, type TrainBatch } from '../policy/training/trainer';
import { SeededRandom, type PolicyWeights } from '../policy/model/weights';
import {
  halfBytesPerToken,
  precisionsOn,
  PRECISION_BITS,
  quantizedBytesPerToken,
  samplerKl,
  type RolloutPrecision,
} from '../policy/model/quantize';

/** The shapes `bench model` generates, with the config fields of the published checkpoints. */
export const BENCH_SHAPES: Record<string, ModelConfig> = {
  // Qwen/Qwen2.5-0.5B config.json.
  'qwen2.5-0.5b': {
    model_type: 'qwen2',
    hidden_size: 896,
    intermediate_size: 4864,
    num_hidden_layers: 24,
    num_attention_heads: 14,
    num_key_value_heads: 2,
    rms_norm_eps: 1e-6,
    rope_theta: 1000000,
    vocab_size: 151936,
    max_position_embeddings: 32768,
    tie_word_embeddings: true,
    bos_token_id: 151643,
    eos_token_id: 151643,
  },
  // meta-llama/Llama-3.2-1B config.json.
  'llama3.2-1b': {
    model_type: 'llama',
    hidden_size: 2048,
    intermediate_size: 8192,
    num_hidden_layers: 16,
    num_attention_heads: 32,
    num_key_value_heads: 8,
    head_dim: 64,
    rms_norm_eps: 1e-5,
    rope_theta: 500000,
    rope_scaling: { rope_type: 'llama3', factor: 32, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 },
    vocab_size: 128256,
    max_position_embeddings: 131072,
    tie_word_embeddings: true,
    bos_token_id: 128000,
    eos_token_id: 128001,
  },
  // A few-second shape for checking the benchmark itself (its figures mean nothing).
  'tiny-test': {
    model_type: 'qwen2',
    hidden_size: 32,
    intermediate_size: 64,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    rms_norm_eps: 1e-6,
    rope_theta: 1000000,
    vocab_size: 320,
    max_position_embeddings: 256,
    tie_word_embeddings: true,
  },
};

/** The amount of work of one benchmark run (defaults: the full-size figures, see DEFAULT_WORK). */
export interface BenchModelWork {
  /** Prompt tokens of the prefill measurement. */
  prefillTokens: number;
  /** Tokens of context in the cache before decoding starts. */
  contextTokens: number;
  /** Decode steps timed (per batch size). */
  decodeSteps: number;
  /** Rows of the batched decode measurement. */
  decodeBatch: number;
  /** LoRA rank (alpha = 2r, all linear layers). */
  loraR: number;
  /** Rows × tokens of the LoRA training step. */
  trainRows: number;
  trainSeq: number;
  /** Timed training steps after one untimed first step (which builds the session). */
  trainSteps: number;
}

/**
 * 1,024 tokens of prompt and of context, rows of 1,024 tokens; 16 decode steps per batch size and
 * one timed training step (after the first) keep a run at 0.5B within a few minutes on 2 cores.
 */
/** Timed calls per decode figure (their median). */
const DECODE_REPEATS = 3;

async function sequential<T>(n: number, f: () => Promise<T>): Promise<T[]> {
  const out: T[] = [];
  for (let i = 0; i < n; i++) out.push(await f());
  return out;
}

export const DEFAULT_WORK: BenchModelWork = {
  prefillTokens: 1024,
  contextTokens: 1024,
  decodeSteps: 16,
  decodeBatch: 8,
  loraR: 16,
  trainRows: 1,
  trainSeq: 1024,
  trainSteps: 1,
};

/** tiny-test's work: a few tokens of everything. */
export const TINY_TEST_WORK: BenchModelWork = {
  prefillTokens: 32,
  contextTokens: 32,
  decodeSteps: 4,
  decodeBatch: 8,
  loraR: 4,
  trainRows: 2,
  trainSeq: 32,
  trainSteps: 1,
};

/** What the PyTorch side measures (scripts/compare/torch_model_bench.py prints it as JSON). */
export interface TorchFigures {
  torch_version: string;
  threads: number;
  /** Whose threads ran the matrix products: OpenBLAS's (Debian's PyTorch) or PyTorch's own pool (MKL). */
  blas?: 'openblas' | 'torch';
  load_s: number;
  load_peak_rss_mb: number;
  prefill_tokens_per_s: number;
  prefill_peak_rss_mb: number;
  decode_tokens_per_s_b1: number;
  decode_tokens_per_s_batch: number;
  decode_peak_rss_mb: number;
  lora_train_tokens_per_s: number;
  train_step_s: number;
  train_step_peak_rss_mb: number;
  /** numpy's single-threaded copy, for comparison with the Node figure. */
  memory_bandwidth_gbs?: number;
}

/** The arguments the PyTorch script takes (one JSON object as its only argument). */
export interface TorchArgs {
  dir: string;
  threads: number;
  prefill: number;
  context: number;
  decode_steps: number;
  decode_batch: number;
  /** Timed decode calls per figure (their median). */
  decode_repeats: number;
  lora_r: number;
  lora_alpha: number;
  train_rows: number;
  train_seq: number;
  train_steps: number;
  seed: number;
}

export interface BenchModelOptions {
  shape: string;
  /** Another shape than a named one (tests); `shape` then only names it. */
  config?: ModelConfig;
  work?: Partial<BenchModelWork>;
  settings?: SessionSettings;
  /** 'off' skips PyTorch; 'auto' (default) runs it when python3 with torch is found. */
  torch?: 'auto' | 'off';
  /** The Python that has torch (default: /usr/bin/python3 where it exists, else python3). */
  python?: string;
  /** Also time llama.cpp's decode of the same weights (float32 GGUF), for ratios. */
  againstLlamaCpp?: boolean;
  /** Rollout precisions whose decode is timed beside float32's (default: what the provider runs: int8 and int4 on the CPU, those and float16 on WebGPU, float16 on CUDA; [] for none). */
  precisions?: QuantizedPrecision[];
  /** Runs the PyTorch side (default: the script in a child process). Test hook. */
  torchRunner?: (args: TorchArgs) => Promise<TorchFigures>;
  /** Where the generated folder goes (default: a temporary folder, removed afterwards). */
  dir?: string;
  seed?: number;
  onProgress?: (message: string) => void;
}

export interface BenchModelResult {
  schema: 'turnwise/bench-model@1';
  shape: string;
  family: string;
  parameters: number;
  date: string;
  provider: string;
  threads: number;
  machine: { cpu: string; cores: number; memory_gb: number; platform: string; node: string; onnxruntime: string };
  /** os.loadavg() (1, 5, 15 minutes) when the run started and when it ended: other work skews every figure. */
  load_avg_start: number[];
  load_avg_end: number[];
  work: BenchModelWork & { note: string };
  /** The generated folder's BF16 weight bytes, and what one token of batch-1 decode reads (float32, as computed). */
  weights_file_bytes: number;
  weights_bytes_per_token: number;
  /** Folder to first token ready: reading and widening the weights, building and starting the sessions, one token. */
  load_s: number;
  load_peak_rss_mb: number;
  /** prefillTokens in one run (the first token's logits included). */
  prefill_tokens_per_s: number;
  prefill_peak_rss_mb: number;
  /** decodeSteps sampled at temperature 1 after contextTokens of context, through the KV cache. */
  decode_tokens_per_s_b1: number;
  /** The same for decodeBatch rows at once (tokens of all rows per second). */
  decode_tokens_per_s_batch: number;
  decode_batch_speedup: number;
  /** Decode steps per ONNX Runtime run (1 on the CPU provider, several in a Loop on a GPU one). */
  decode_steps_per_run: number;
  /** 'packed': the decode session holds the weights, packed by ONNX Runtime at load (SessionSettings.packDecodeWeights); 'fed': fed every run. */
  decode_weights: 'packed' | 'fed';
  /** The first decode call (2 steps at batch 1), building the decode session: with packed weights, writing and packing them. */
  decode_setup_s: number;
  /** With packed weights: the same decode measured with the weights fed (what packing buys); null otherwise. */
  decode_fed: { decode_tokens_per_s_b1: number; decode_tokens_per_s_batch: number; decode_batch_speedup: number } | null;
  /** Peak RSS while decoding (with packed weights: their copy included). */
  decode_peak_rss_mb: number;
  /**
   * Host bytes fed per decode run at batch decodeBatch, and per training step, counted from the
   * feeds (meterFeeds): what a GPU provider copies in per run. The weight bytes among them: 0 where
   * the provider keeps the weights on the device (WebGPU) or a session holds them (the CPU's packed
   * and quantized decode); the CPU provider reads fed bytes in place.
   */
  fed_bytes_per_decode_step: number;
  fed_weight_bytes_per_decode_step: number;
  fed_bytes_per_train_step: number;
  fed_weight_bytes_per_train_step: number;
  /**
   * The same decode with the sampling sessions' weights quantized (rolloutPrecision), per
   * precision: tokens/s, the ratio to the float32 figures above, the weight bytes a token reads
   * and the bound they allow, the time to quantize and load, and the KL from the quantized policy
   * to the float one over the batch's sampled tokens (samplerKl's mean, nats per token).
   */
  decode_quantized: Partial<Record<QuantizedPrecision, QuantizedDecodeFigures>>;
  /** LoRA training step over trainRows × trainSeq tokens (ppo-token loss, AdamW). */
  lora_train_tokens_per_s: number;
  train_step_s: number;
  train_first_step_s: number;
  train_step_peak_rss_mb: number;
  /** What the process held as the training step began (the weights, and what generation left allocated). */
  train_start_rss_mb: number;
  /** The weights at float32 plus 3 GB: the bound a training step's peak RSS should stay under. */
  train_rss_budget_mb: number;
  /** Stream copy (read + write bytes per second), the best of one thread and one per core. */
  memory_bandwidth_gbs: number;
  memory_bandwidth_1thread_gbs: number;
  /** memory_bandwidth / weights_bytes_per_token: the batch-1 decode ceiling. */
  decode_bound_tokens_per_s: number;
  decode_fraction_of_bound: number;
  torch: (TorchFigures & { available: true }) | { available: false; reason: string };
  /** Turnwise ÷ PyTorch (> 1: Turnwise is faster); null without PyTorch. */
  prefill_vs_torch: number | null;
  decode_vs_torch: number | null;
  decode_batch_vs_torch: number | null;
  train_vs_torch: number | null;
  torch_decode_fraction_of_bound: number | null;
  /** llama.cpp's decode of the same weights (--against llama.cpp), or why it was not run. */
  llama_cpp: (LlamaCppDecodeFigures & { available: true }) | { available: false; reason: string };
  /** Turnwise ÷ llama.cpp decode at batch 1 and at decodeBatch (> 1: Turnwise is faster); null without llama.cpp. */
  decode_vs_llama_cpp: number | null;
  decode_batch_vs_llama_cpp: number | null;
  /** With --against llama.cpp and int8 measured: llama.cpp's decode of the same weights at q8_0, or why it was not run. */
  llama_cpp_q8_0: (LlamaCppDecodeFigures & { available: true }) | { available: false; reason: string };
  /** Turnwise's int8 decode ÷ llama.cpp's q8_0 at batch 1 and at decodeBatch; null where either is missing. */
  decode_int8_vs_llama_cpp_q8_0: number | null;
  decode_batch_int8_vs_llama_cpp_q8_0: number | null;
  /** The figures' targets, each true or false (null where PyTorch or llama.cpp is needed and absent). */
  targets: {
    /** Batch decode at least llama.cpp's (sampling many episodes at once is what RL does), batch 1 within 0.8× of it. */
    decode_batch_at_least_llama_cpp: boolean | null;
    decode_at_least_0_8_llama_cpp: boolean | null;
    decode_at_least_torch: boolean | null;
    decode_half_of_bound: boolean;
    batch_at_least_4x: boolean;
    train_at_least_torch: boolean | null;
    train_rss_within_budget: boolean;
  };
}

type QuantizedPrecision = Exclude<RolloutPrecision, 'float32'>;

export interface QuantizedDecodeFigures {
  decode_tokens_per_s_b1: number;
  decode_tokens_per_s_batch: number;
  /** ÷ the float32 decode of the same run (packed or fed, as decode_weights says). */
  speedup_b1: number;
  speedup_batch: number;
  weights_bytes_per_token: number;
  decode_bound_tokens_per_s: number;
  decode_fraction_of_bound: number;
  /** The first decode call: quantizing the weights, writing and loading them. */
  setup_s: number;
  kl_to_float: number;
  /** Tokens the KL is the mean over. */
  kl_tokens: number;
}

const round = (x: number, d = 2) => Math.round(x * 10 ** d) / 10 ** d;
const ratio = (a: number, b: number | undefined) => (b && b > 0 ? round(a / b, 3) : null);

/** Resets the process's peak RSS (Linux: /proc/self/clear_refs); false where it cannot. */
export function resetPeakRss(): boolean {
  try {
    fs.writeFileSync('/proc/self/clear_refs', '5');
    return true;
  } catch {
    return false;
  }
}

/**
 * A full garbage collection where V8 allows one, so a phase's peak does not count what an earlier
 * phase left for the collector (typed arrays are freed only when it runs).
 */
export function collectGarbage(): boolean {
  try {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    // A typed array's memory is released by a sweeper that runs beside the collection, late on a
    // busy machine; the next full collection waits for it to finish.
    gc();
    gc();
    return true;
  } catch {
    return false;
  }
}

/** The process's resident memory now, in MB. */
export function currentRssMb(): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'));
    if (m) return round(Number(m[1]) / 1024, 0);
  } catch {
    // not Linux
  }
  return round(process.memoryUsage().rss / 1024 / 1024, 0);
}

/** Peak RSS in MB since the last resetPeakRss (or the process start). */
export function peakRssMb(): number {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync('/proc/self/status', 'utf8'));
    if (m) return round(Number(m[1]) / 1024, 0);
  } catch {
    // not Linux: the lifetime peak
  }
  return round(process.resourceUsage().maxRSS / 1024, 0);
}

/**
 * Random weights at `config`'s shape, uniform with std 0.02 (norms 1, biases 0): what matters
 * for speed is the shape, and a uniform draw is ~10× faster to make than a normal one at 0.5B.
 */
export function randomWeights(config: ModelConfig, seed: number): PolicyWeights {
  const tensors = new Map<string, Float32Array>();
  const next = randomStream(seed);
  for (const p of paramSpecs(config)) tensors.set(p.name, randomTensor(p.name, p.shape, next));
  return { config, tensors };
}

/** One stream of uniform values for randomWeights' tensors, in their order. */
function randomStream(seed: number): (a: Float32Array) => void {
  const amp = 0.02 * Math.sqrt(3);
  // xorshift32, inlined: a method call per value would take most of the time at 0.5B values.
  let x = Math.floor(new SeededRandom(seed).next() * 4294967296) | 1 | 0;
  return (a) => {
    for (let i = 0; i < a.length; i++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      a[i] = ((x >>> 0) / 2147483648 - 1) * amp;
    }
  };
}

/** A tensor of randomWeights: norms 1, biases 0, the rest the stream's next values. */
function randomTensor(name: string, shape: readonly number[], fill: (a: Float32Array) => void): Float32Array {
  const a = new Float32Array(numel(shape));
  if (name.endsWith('norm.weight')) a.fill(1);
  else if (!name.endsWith('.bias')) fill(a);
  return a;
}

// Each worker copies its own buffers (a copy between SharedArrayBuffers is slower in V8).
const COPY_WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const src = Buffer.alloc(workerData.bytes, 1), dst = Buffer.alloc(workerData.bytes);
src.copy(dst);
parentPort.on('message', () => {
  for (let r = 0; r < workerData.reps; r++) src.copy(dst);
  parentPort.postMessage('done');
});
parentPort.postMessage('ready');
`;

/**
 * Memory bandwidth by stream copy (STREAM's convention: bytes read + bytes written per second),
 * best of `tries` after a warm-up, on one thread and on `threads` worker threads at once, each
 * copying its share of `bytes`.
 */
export async function measureCopyBandwidth(
  o: { bytes?: number; threads?: number; tries?: number } = {},
): Promise<{ oneThreadGbs: number; allThreadsGbs: number; threads: number }> {
  const bytes = o.bytes ?? 256 * 2 ** 20;
  const threads = Math.max(1, o.threads ?? os.cpus().length);
  const tries = o.tries ?? 7;
  const gbs = (b: number, ms: number) => round((2 * b) / (ms / 1000) / 1e9, 2);
  let best1 = Infinity;
  {
    const src = Buffer.alloc(bytes, 1);
    const dst = Buffer.alloc(bytes);
    src.copy(dst); // faults the pages in
    for (let t = 0; t < tries; t++) {
      const t0 = performance.now();
      src.copy(dst);
      best1 = Math.min(best1, performance.now() - t0);
    }
  }
  const share = Math.floor(bytes / threads);
  const reps = 2;
  const workers = Array.from({ length: threads }, () => new Worker(COPY_WORKER, { eval: true, workerData: { bytes: share, reps } }));
  let bestN = Infinity;
  try {
    await Promise.all(workers.map((w) => new Promise((r) => w.once('message', r))));
    for (let t = 0; t < tries; t++) {
      const t0 = performance.now();
      await Promise.all(
        workers.map(
          (w) =>
            new Promise((r) => {
              w.once('message', r);
              w.postMessage('go');
            }),
        ),
      );
      bestN = Math.min(bestN, (performance.now() - t0) / reps);
    }
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
  return { oneThreadGbs: gbs(bytes, best1), allThreadsGbs: gbs(share * threads, bestN), threads };
}

/** The PyTorch script of a source checkout (core/resources.ts); the packages do not carry it. */
export function torchScriptPath(): string | undefined {
  return findResource(path.join('scripts', 'compare', 'torch_model_bench.py'));
}

export function defaultPython(): string {
  return fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
}

/**
 * Runs the PyTorch side in a child process (python3, the script, one JSON argument; no shell).
 * On Debian's PyTorch OpenBLAS gets the cores and PyTorch's own pool one thread (the two otherwise
 * fight over them); a PyTorch on MKL gives its own pool the cores (the script decides).
 */
export function runTorchScript(python: string, args: TorchArgs, onProgress?: (m: string) => void): Promise<TorchFigures> {
  const script = torchScriptPath();
  if (!script) return Promise.reject(new Error('scripts/compare/torch_model_bench.py is not next to this installation'));
  return new Promise((resolve, reject) => {
    const child = childProcess.spawn(python, [script, JSON.stringify(args)], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, OPENBLAS_NUM_THREADS: String(args.threads), OMP_NUM_THREADS: '1' },
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => {
      err = (err + d.toString()).slice(-8192);
      for (const line of d.toString().split('\n')) if (line.startsWith('progress: ')) onProgress?.(`torch: ${line.slice(10)}`);
    });
    child.on('error', (e) => reject(new Error(`${python} could not start: ${e.message}`)));
    child.on('close', (code, signal) => {
      const last = out.trim().split('\n').pop() ?? '';
      try {
        if (code === 0) return resolve(JSON.parse(last) as TorchFigures);
      } catch {
        // fall through to the error
      }
      const why = err
        .split('\n')
        .filter((l) => l.trim() && !l.startsWith('progress: '))
        .slice(-2)
        .join(' ')
        .slice(0, 400);
      reject(
        new Error(
          `${python} ${path.basename(script)} ${signal ? `was killed by ${signal}` : `exited with code ${code}`}${why ? `: ${why}` : ''}`,
        ),
      );
    });
  });
}

function folderBytes(dir: string): number {
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.safetensors'))
    .reduce((n, f) => n + fs.statSync(path.join(dir, f)).size, 0);
}

/**
 * Random weights at `config`'s shape written as one BF16 safetensors file, as transformers
 * writes it (2 GB and more for the larger shapes). Not async: an async function keeps its
 * locals reachable while it is suspended, and these weights must be garbage once written.
 */
function writeRandomFolder(dir: string, config: ModelConfig, seed: number): void {
  // Made tensor by tensor as the file is written: the freed float32 copies of 2 GB of weights
  // stay in glibc's heap (resident) after the collector frees them, and would count in every
  // figure after (1,991 MB before the load at 0.5B, against 76 MB with a fixed mmap threshold).
  const next = randomStream(seed);
  writeModelFolder(
    dir,
    { config, make: (name, shape) => randomTensor(name, shape, next) },
    { dtype: 'bfloat16', tokenizerJson: byteLevelTokenizerJson(), tokenizerConfig: byteLevelTokenizerConfig() },
  );
}

/** Host bytes fed per run while `work` runs (all of them, and those of the tensors named in `weights`), rounded means. */
async function fedPerRun(work: () => Promise<unknown>, weights: ReadonlySet<string>): Promise<{ bytes: number; weightBytes: number }> {
  const meter = meterFeeds();
  try {
    await work();
  } finally {
    meter.stop();
  }
  const runs = Math.max(1, meter.records.length);
  const sum = (f: (r: (typeof meter.records)[number]) => number) => Math.round(meter.records.reduce((n, r) => n + f(r), 0) / runs);
  return {
    bytes: sum((r) => r.hostBytes),
    weightBytes: sum((r) => Object.entries(r.byName).reduce((n, [k, b]) => n + (weights.has(k) ? b : 0), 0)),
  };
}

export async function benchModel(o: BenchModelOptions): Promise<BenchModelResult> {
  const config = o.config ?? BENCH_SHAPES[o.shape];
  if (!config)
    throw new TurnwiseError('invalid-input', `unknown model shape "${o.shape}"`, {
      hint: `use one of: ${Object.keys(BENCH_SHAPES).join(', ')}`,
    });
  const work: BenchModelWork = { ...(o.shape === 'tiny-test' ? TINY_TEST_WORK : DEFAULT_WORK), ...o.work };
  if (
    work.contextTokens + work.decodeSteps + 1 > config.max_position_embeddings ||
    work.prefillTokens > config.max_position_embeddings ||
    work.trainSeq > config.max_position_embeddings
  ) {
    throw new TurnwiseError(
      'invalid-input',
      `the work (${work.contextTokens} tokens of context + ${work.decodeSteps} steps, rows of ${work.trainSeq}) does not fit the shape's ${config.max_position_embeddings} positions`,
    );
  }
  const log = o.onProgress ?? (() => undefined);
  const seed = o.seed ?? 0;
  const settings: SessionSettings = { ...o.settings };
  const loadStart = os.loadavg().map((x) => round(x));
  const date = new Date().toISOString();
  const rng = new SeededRandom(seed + 1);
  const tokens = (n: number) => Array.from({ length: n }, () => Math.floor(rng.next() * 256));
  const tmp = o.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'turnwise-bench-model-'));
  const dir = path.join(tmp, o.shape);
  const params = parameterCount(config);
  try {
    log(`generating ${(params / 1e6).toFixed(0)}M random weights at the ${o.shape} shape…`);
    writeRandomFolder(dir, config, seed);
    // The generated weights are garbage now: collected before anything is measured, as a
    // user's process (which loads a folder it did not make) never holds them.
    collectGarbage();
    const weightsFileBytes = folderBytes(dir);

    log(`loading the folder… (resident ${currentRssMb()} MB)`);
    resetPeakRss();
    const t0 = performance.now();
    // The policy's feeds are the loaded arrays; nothing else keeps the checkpoint, as in a run.
    const policy = (() => {
      const ck = loadCheckpoint(dir, { optimizer: false });
      return new Policy(ck.weights, ck.tokenizer, { ...settings, rolloutPrecision: 'float32' });
    })();
    const gen = { temperature: 1, topP: 1, stopIds: [] as number[] };
    await policy.sample([{ seq: policy.newSequence(tokens(4)), maxNewTokens: 1, ...gen }]);
    const loadS = (performance.now() - t0) / 1000;
    const loadPeak = peakRssMb();
    const provider = await policy.provider;
    // A provider asked for by name that did not load ran everything on the CPU: its figures would be the CPU's.
    const want = settings.provider ?? 'auto';
    if (want !== 'auto' && provider !== want) {
      await policy.dispose();
      throw new TurnwiseError(
        'runtime-unavailable',
        `bench model was asked to run on ${want}, which did not load here (it fell back to ${provider}); nothing was measured`,
        {
          hint: 'run `turnwise doctor` for the reason; see docs/gpus.md for installing the provider',
        },
      );
    }

    log(`prefill of ${work.prefillTokens} tokens… (resident ${currentRssMb()} MB)`);
    resetPeakRss();
    const prompt = policy.newSequence(tokens(work.prefillTokens));
    const tp = performance.now();
    await policy.sample([{ seq: prompt, maxNewTokens: 1, seed: 1, ...gen }]);
    const prefillMs = performance.now() - tp;
    const prefillPeak = peakRssMb();

    log(
      `decode: ${work.decodeSteps} steps at ${work.contextTokens} tokens of context, batch 1 and ${work.decodeBatch}… (resident ${currentRssMb()} MB)`,
    );
    resetPeakRss();
    // The context: the prefilled prompt, cut or extended to contextTokens (its cache kept).
    const ctx = prompt.fork();
    if (ctx.length > work.contextTokens) ctx.truncate(work.contextTokens);
    else if (ctx.length < work.contextTokens) await policy.extend([{ seq: ctx, ids: tokens(work.contextTokens - ctx.length) }]);
    // Decode calls of `rows` rows continuing `from` (forks of it), timed.
    const decodeOn = (p: Policy, from: Sequence) => async (rows: number, steps: number) => {
      const seqs = Array.from({ length: rows }, () => from.fork());
      const t = performance.now();
      await p.sample(seqs.map((seq, b) => ({ seq, seed: 10 + b, maxNewTokens: steps, ...gen })));
      return performance.now() - t;
    };
    const decode = decodeOn(policy, ctx);
    // A decode figure is the median of DECODE_REPEATS timed calls: on a shared machine one call
    // can be a third slower or faster than the next.
    const timed = async (run: (rows: number, steps: number) => Promise<number>, rows: number) =>
      median(await sequential(DECODE_REPEATS, () => run(rows, work.decodeSteps)));
    const stepsPerRun = policy.resolvedDecodeStepsPerRun();
    const packed = await policy.packsDecodeWeights();
    const ts = performance.now();
    await decode(1, 2); // builds the decode session (and packs the weights)
    const setupMs = performance.now() - ts;
    const b1Ms = await timed(decode, 1);
    await decode(work.decodeBatch, 2);
    const bnMs = await timed(decode, work.decodeBatch);
    const decodePeak = peakRssMb();
    const weightNames = new Set(Object.keys(policy.baseFeeds()));
    const decodeFed = await fedPerRun(() => decode(work.decodeBatch, 4), weightNames);
    // With packed weights, the same steps with the weights fed (the policy's own arrays): what packing buys.
    let fed: BenchModelResult['decode_fed'] = null;
    if (packed) {
      log('decode with the weights fed, for comparison…');
      const fedPolicy = new Policy(policy.baseWeights(), undefined, { ...settings, packDecodeWeights: false });
      try {
        const fctx = fedPolicy.newSequence(ctx.tokens);
        await fedPolicy.extend([{ seq: fctx }]);
        const fdecode = decodeOn(fedPolicy, fctx);
        await fdecode(1, 2);
        const f1 = work.decodeSteps / ((await timed(fdecode, 1)) / 1000);
        await fdecode(work.decodeBatch, 2);
        const fn = (work.decodeBatch * work.decodeSteps) / ((await timed(fdecode, work.decodeBatch)) / 1000);
        fed = { decode_tokens_per_s_b1: round(f1, 2), decode_tokens_per_s_batch: round(fn, 2), decode_batch_speedup: round(fn / f1) };
      } finally {
        await fedPolicy.dispose();
      }
    }
    // Per precision, what is measured now; the figures are made once the float ones and the bandwidth are known.
    const measured: Partial<Record<QuantizedPrecision, { b1: number; bn: number; setupS: number; kl: number[] }>> = {};
    for (const precision of o.precisions ?? precisionsOn(provider)) {
      log(`decode with ${precision} weights…`);
      const q = new Policy(policy.baseWeights(), undefined, { ...settings, rolloutPrecision: precision });
      try {
        const qctx = q.newSequence(ctx.tokens);
        await q.extend([{ seq: qctx }]);
        const qdecode = decodeOn(q, qctx);
        const tq = performance.now();
        await qdecode(1, 2);
        const qsetup = performance.now() - tq;
        if ((await q.rolloutPrecision()) !== precision)
          throw new TurnwiseError(
            'invalid-input',
            `${precision} rollouts do not run on the ${provider} provider (they sampled in float32)`,
            {
              hint: 'int8 and int4 run on the CPU and WebGPU providers, float16 on GPU providers: name those in --precisions, or none',
            },
          );
        const q1 = work.decodeSteps / ((await timed(qdecode, 1)) / 1000);
        await qdecode(work.decodeBatch, 2);
        const qn = (work.decodeBatch * work.decodeSteps) / ((await timed(qdecode, work.decodeBatch)) / 1000);
        // The KL from the quantized sampler to the float policy: its own draws, scored by both.
        const drawn = Array.from({ length: work.decodeBatch }, () => qctx.fork());
        const rows = await q.sample(drawn.map((seq, b) => ({ seq, seed: 100 + b, maxNewTokens: work.decodeSteps, ...gen })));
        const scored = await policy.tokenLogprobs(drawn.map((seq) => seq.tokens));
        const kl = rows.flatMap((r, b) => {
          const from = drawn[b].tokens.length - r.tokenIds.length;
          return r.logprobs.map((lq, t) => samplerKl(lq, scored[b][from + t]));
        });
        measured[precision] = { b1: q1, bn: qn, setupS: qsetup / 1000, kl };
      } finally {
        await q.dispose();
      }
    }
    const contextIds = ctx.tokens.slice();
    // The trainer feeds the policy's own arrays as the frozen base, as a LoRA run's does (one copy of the weights).
    const baseFeeds = policy.baseFeeds();
    await policy.dispose();
    collectGarbage();

    log(
      `LoRA training step (r ${work.loraR}, all linear layers) on ${work.trainRows} × ${work.trainSeq} tokens… (resident ${currentRssMb()} MB)`,
    );
    const lora: LoraConfig = {
      r: work.loraR,
      lora_alpha: 2 * work.loraR,
      lora_dropout: 0,
      target_modules: [...LORA_MODULES],
      use_rslora: false,
      base_model_name_or_path: o.shape,
    };
    const trainer = new PolicyTrainer(
      { config, tensors: new Map() },
      undefined,
      settings,
      { adapter: initAdapter(config, lora, seed) },
      baseFeeds,
      // As a run's trainer: on a GPU that keeps tensors, the moments stay there between steps.
      { keepMoments: true },
    );
    const n = work.trainRows * work.trainSeq;
    const ids = tokens(n);
    const batch: TrainBatch = {
      inputIds: ids,
      lossMask: ids.map((_, i) => (i % work.trainSeq >= work.trainSeq / 2 ? 1 : 0)),
      oldLogp: ids.map(() => -Math.log(config.vocab_size)),
      advantages: ids.map(() => rng.next() * 2 - 1),
    };
    const step = async () => {
      const t = performance.now();
      await trainer.train({ loss: 'ppo-token', batch: work.trainRows, seq: work.trainSeq }, [batch], { lr: 1e-4 });
      return performance.now() - t;
    };
    const trainStartRss = currentRssMb();
    resetPeakRss();
    const firstMs = await step();
    const stepTimes: number[] = [];
    for (let i = 0; i < work.trainSteps; i++) stepTimes.push(await step());
    const trainPeak = peakRssMb();
    const trainFed = await fedPerRun(step, weightNames);
    await trainer.dispose();
    const stepMs = mean(stepTimes);

    log('memory bandwidth…');
    const bw = await measureCopyBandwidth();
    const bandwidth = Math.max(bw.oneThreadGbs, bw.allThreadsGbs);
    const bytesPerToken = params * 4;
    const bound = (bandwidth * 1e9) / bytesPerToken;

    let torch: BenchModelResult['torch'];
    const threads = settings.threads || os.cpus().length;
    if (o.torch === 'off') torch = { available: false, reason: 'not asked for (--torch off)' };
    else {
      log('the same work in PyTorch…');
      const args: TorchArgs = {
        dir,
        threads,
        prefill: work.prefillTokens,
        context: work.contextTokens,
        decode_steps: work.decodeSteps,
        decode_batch: work.decodeBatch,
        decode_repeats: DECODE_REPEATS,
        lora_r: work.loraR,
        lora_alpha: 2 * work.loraR,
        train_rows: work.trainRows,
        train_seq: work.trainSeq,
        train_steps: work.trainSteps,
        seed,
      };
      try {
        const f = await (o.torchRunner ?? ((a) => runTorchScript(o.python ?? defaultPython(), a, log)))(args);
        torch = { available: true, ...f };
      } catch (e) {
        torch = { available: false, reason: (e as Error).message };
      }
    }
    // llama.cpp's decode of the same weights: at f32 against float32, at q8_0 against int8.
    const llamaAt = async (type: 'f32' | 'q8_0'): Promise<BenchModelResult['llama_cpp']> => {
      log(`the same decode in llama.cpp (${type} GGUF)…`);
      const file = path.join(tmp, `${o.shape}-${type}.gguf`);
      try {
        writeBenchGguf(file, loadCheckpoint(dir, { optimizer: false }).weights, type);
        collectGarbage();
        const f = await llamaCppDecode(file, {
          context: contextIds,
          steps: work.decodeSteps,
          batch: work.decodeBatch,
          threads,
          repeats: DECODE_REPEATS,
          weightType: type,
        });
        return { available: true, ...f };
      } catch (e) {
        return { available: false, reason: (e as Error).message };
      } finally {
        fs.rmSync(file, { force: true });
      }
    };
    const llamaCpp: BenchModelResult['llama_cpp'] = o.againstLlamaCpp
      ? await llamaAt('f32')
      : { available: false, reason: 'not asked for (--against llama.cpp)' };
    const llamaQ8: BenchModelResult['llama_cpp_q8_0'] = !o.againstLlamaCpp
      ? { available: false, reason: 'not asked for (--against llama.cpp)' }
      : !measured.int8
        ? { available: false, reason: 'int8 decode not measured (--precisions)' }
        : await llamaAt('q8_0');
    const b1 = work.decodeSteps / (b1Ms / 1000);
    const bn = (work.decodeBatch * work.decodeSteps) / (bnMs / 1000);
    const prefill = work.prefillTokens / (prefillMs / 1000);
    const train = n / (stepMs / 1000);
    const t = torch.available ? torch : undefined;
    const l = llamaCpp.available ? llamaCpp : undefined;
    const lq = llamaQ8.available ? llamaQ8 : undefined;
    const quantized: BenchModelResult['decode_quantized'] = {};
    for (const precision of ['int8', 'int4', 'float16'] as const) {
      const m = measured[precision];
      if (!m) continue;
      const bytes = precision === 'float16' ? halfBytesPerToken(config) : quantizedBytesPerToken(config, PRECISION_BITS[precision]);
      const qbound = (bandwidth * 1e9) / bytes;
      quantized[precision] = {
        decode_tokens_per_s_b1: round(m.b1, 2),
        decode_tokens_per_s_batch: round(m.bn, 2),
        speedup_b1: round(m.b1 / b1, 3),
        speedup_batch: round(m.bn / bn, 3),
        weights_bytes_per_token: bytes,
        decode_bound_tokens_per_s: round(qbound, 2),
        decode_fraction_of_bound: round(m.b1 / qbound, 3),
        setup_s: round(m.setupS),
        kl_to_float: m.kl.length ? round(mean(m.kl), 5) : 0,
        kl_tokens: m.kl.length,
      };
    }
    const int8 = quantized.int8;
    const budget = (params * 4) / 2 ** 20 + 3 * 1024;
    return {
      schema: 'turnwise/bench-model@1',
      shape: o.shape,
      family: config.model_type ?? 'qwen2',
      parameters: params,
      date,
      provider,
      threads: settings.threads ?? 0,
      machine: {
        cpu: os.cpus()[0]?.model.trim() ?? 'unknown',
        cores: os.cpus().length,
        memory_gb: round(os.totalmem() / 2 ** 30, 1),
        platform: `${process.platform} ${os.release()}`,
        node: process.version,
        onnxruntime: ort.env.versions?.common ?? 'unknown',
      },
      load_avg_start: loadStart,
      load_avg_end: os.loadavg().map((x) => round(x)),
      work: {
        ...work,
        note: `decode: ${work.decodeSteps} sampled tokens (temperature 1) per batch size after ${work.contextTokens} tokens of context, the median of ${DECODE_REPEATS} timed calls after 2 untimed steps; training: the mean of ${work.trainSteps} step(s) after an untimed first one; prefill: one run (counts kept small for a few minutes on a 2-core CPU)`,
      },
      weights_file_bytes: weightsFileBytes,
      weights_bytes_per_token: bytesPerToken,
      load_s: round(loadS),
      load_peak_rss_mb: loadPeak,
      prefill_tokens_per_s: round(prefill, 1),
      prefill_peak_rss_mb: prefillPeak,
      decode_tokens_per_s_b1: round(b1, 2),
      decode_tokens_per_s_batch: round(bn, 2),
      decode_batch_speedup: round(bn / b1),
      decode_steps_per_run: stepsPerRun,
      decode_weights: packed ? 'packed' : 'fed',
      decode_setup_s: round(setupMs / 1000),
      decode_fed: fed,
      decode_peak_rss_mb: decodePeak,
      fed_bytes_per_decode_step: decodeFed.bytes,
      fed_weight_bytes_per_decode_step: decodeFed.weightBytes,
      fed_bytes_per_train_step: trainFed.bytes,
      fed_weight_bytes_per_train_step: trainFed.weightBytes,
      decode_quantized: quantized,
      lora_train_tokens_per_s: round(train, 1),
      train_step_s: round(stepMs / 1000, 6),
      train_first_step_s: round(firstMs / 1000),
      train_step_peak_rss_mb: trainPeak,
      train_start_rss_mb: trainStartRss,
      train_rss_budget_mb: round(budget, 0),
      memory_bandwidth_gbs: bandwidth,
      memory_bandwidth_1thread_gbs: bw.oneThreadGbs,
      decode_bound_tokens_per_s: round(bound, 2),
      decode_fraction_of_bound: round(b1 / bound, 3),
      torch,
      prefill_vs_torch: ratio(prefill, t?.prefill_tokens_per_s),
      decode_vs_torch: ratio(b1, t?.decode_tokens_per_s_b1),
      decode_batch_vs_torch: ratio(bn, t?.decode_tokens_per_s_batch),
      train_vs_torch: ratio(train, t?.lora_train_tokens_per_s),
      torch_decode_fraction_of_bound: t ? round(t.decode_tokens_per_s_b1 / bound, 3) : null,
      llama_cpp: llamaCpp,
      decode_vs_llama_cpp: ratio(b1, l?.decode_tokens_per_s_b1),
      decode_batch_vs_llama_cpp: ratio(bn, l?.decode_tokens_per_s_batch),
      llama_cpp_q8_0: llamaQ8,
      decode_int8_vs_llama_cpp_q8_0: int8 ? ratio(int8.decode_tokens_per_s_b1, lq?.decode_tokens_per_s_b1) : null,
      decode_batch_int8_vs_llama_cpp_q8_0: int8 ? ratio(int8.decode_tokens_per_s_batch, lq?.decode_tokens_per_s_batch) : null,
      targets: {
        decode_batch_at_least_llama_cpp: l ? bn >= l.decode_tokens_per_s_batch : null,
        decode_at_least_0_8_llama_cpp: l ? b1 >= 0.8 * l.decode_tokens_per_s_b1 : null,
        decode_at_least_torch: t ? b1 >= t.decode_tokens_per_s_b1 : null,
        decode_half_of_bound: b1 >= 0.5 * bound,
        batch_at_least_4x: bn >= 4 * b1,
        train_at_least_torch: t ? train >= t.lora_train_tokens_per_s : null,
        train_rss_within_budget: trainPeak <= budget,
      },
    };
  } finally {
    if (!o.dir) fs.rmSync(tmp, { recursive: true, force: true });
  }
}
