// ONNX Runtime sessions and execution providers. Asking onnxruntime-node for an EP whose
// libraries are absent throws instead of falling back, so every EP is tried for real.
import * as childProcess from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import './telemetry';
import * as ort from 'onnxruntime-node';
import { TurnwiseError } from '../core/errors';
import { DTYPE_CODE, type DType, type TensorData } from './graph';
import { ProtoWriter } from './protobuf';
import { webgpuAdapters } from './adapters';

export type ExecutionProviderName = 'cpu' | 'cuda' | 'webgpu';
export const EXECUTION_PROVIDERS: readonly ExecutionProviderName[] = ['cpu', 'cuda', 'webgpu'];

/**
 * A one-node model Y = op(X, …, X) (`arity` times X), named `name`: X and Y of `dtype`, of shape
 * [N] when `vector`, of any shape otherwise.
 */
function oneNodeModel(name: string, op: string, arity: number, dtype: DType, vector: boolean): Uint8Array {
  const valueInfo = (w: ProtoWriter, v: string) =>
    w.string(1, v).message(2, (t) =>
      t.message(1, (tt) => {
        tt.int(1, DTYPE_CODE[dtype]);
        if (vector) tt.message(2, (s) => s.message(1, (d) => d.string(2, 'N')));
      }),
    );
  return new ProtoWriter()
    .int(1, 8) // ir_version
    .string(2, 'turnwise')
    .message(7, (g) =>
      g
        .message(1, (n) => {
          for (let i = 0; i < arity; i++) n.string(1, 'X');
          n.string(2, 'Y').string(3, op.toLowerCase()).string(4, op);
        })
        .string(2, name)
        .message(11, (w) => valueInfo(w, 'X'))
        .message(12, (w) => valueInfo(w, 'Y')),
    )
    .message(8, (o) => o.string(1, '').int(2, 17))
    .finish();
}

/** A one-node model, Y = X + X over float[N], used to prove an EP really runs. */
export function probeModel(): Uint8Array {
  return oneNodeModel('probe', 'Add', 2, 'float32', true);
}

export interface ProviderProbe {
  provider: ExecutionProviderName;
  ok: boolean;
  /** Whether onnxruntime-node ships this provider's libraries in the package. */
  bundled: boolean;
  ms: number;
  error?: string;
}

// The child's whole program: load onnxruntime-node from the parent's path, create a session on
// the provider alone, check that it computes 2·x correctly, print JSON.
const PROBE_CHILD = `
const [ortPath, provider, modelB64] = process.argv.slice(1);
const ort = require(ortPath);
(async () => {
  const bundled = (ort.listSupportedBackends().find((b) => b.name === provider) || {}).bundled || false;
  const t0 = performance.now();
  // Exit once the answer is written: a driver's own threads must not keep the probe alive.
  const done = (r) => process.stdout.write(JSON.stringify({ provider, bundled, ms: performance.now() - t0, ...r }) + '\\n', () => process.exit(0));
  try {
    const s = await ort.InferenceSession.create(Buffer.from(modelB64, 'base64'), { executionProviders: [provider], logSeverityLevel: 4 });
    const x = new Float32Array([1, 2, 3, 4]);
    const y = (await s.run({ X: new ort.Tensor('float32', x, [4]) })).Y.data;
    const good = y.length === 4 && y.every((v, i) => v === 2 * x[i]);
    done(good ? { ok: true } : { ok: false, error: 'wrong result ' + Array.from(y) });
  } catch (e) {
    done({ ok: false, error: String(e && e.message || e).split('\\n')[0] });
  }
})();
`;

/**
 * What a native library wrote to stderr that explains a failure (Dawn and ONNX Runtime log there):
 * the last two telling lines, without colour codes, log prefixes, source paths or known noise.
 */
export function nativeReason(stderr: string): string | undefined {
  const lines = stderr
    .split('\n')
    // eslint-disable-next-line no-control-regex
    .map((l) => l.replace(/\u001b\[[0-9;]*m/g, '').trim())
    .filter((l) => l && !/^at |^- While|^\[m?$|XDG_RUNTIME_DIR/.test(l))
    .map((l) =>
      l
        .replace(/^\S+ \S+ \[[EWIF]:onnxruntime[^\]]*\] /, '') // "2026-… [E:onnxruntime:…, file.cc:12 Fn] "
        .replace(/^.*\[ONNXRuntimeError\] : \d+ : \w+ : /, '')
        .replace(/^(Warning|Error): /i, ''),
    );
  const pick = lines.filter((l) => /error|cannot|failed|not found|required|couldn't/i.test(l)).slice(-2);
  return pick.length ? pick.join('; ').slice(0, 400) : undefined;
}

/**
 * Probes an execution provider in a child process: GPU providers load native drivers (Dawn,
 * Vulkan, CUDA) that print to the process's stderr and can crash it. The child's stderr is
 * captured (its last telling line becomes part of the error), a crash or hang is reported as
 * such, and nothing stays loaded in this process. `cpu` goes the same way, so there is one probe.
 */
export async function probeProvider(
  provider: ExecutionProviderName,
  opts: {
    timeoutMs?: number;
    /** Test hook: the child's program instead of the probe (to simulate a crashing or hanging driver). */
    program?: string;
  } = {},
): Promise<ProviderProbe> {
  if (provider === 'cuda') {
    const missing = cudaLibrariesMissing();
    if (missing) return { provider, ok: false, bundled: false, ms: 0, error: missing };
  }
  const t0 = performance.now();
  let ortPath: string;
  try {
    ortPath = require.resolve('onnxruntime-node');
  } catch (e) {
    return {
      provider,
      ok: false,
      bundled: false,
      ms: 0,
      error: `onnxruntime-node cannot be found (${(e as Error).message.split('\n')[0]})`,
    };
  }
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const res = await new Promise<{
    stdout: string;
    stderr: string;
    code: number | null;
    signal: NodeJS.Signals | null;
    timedOut: boolean;
    spawnError?: Error;
  }>((resolve) => {
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    // ELECTRON_RUN_AS_NODE: inside VS Code's extension host execPath is Electron (or code-server's node).
    const child = childProcess.spawn(
      process.execPath,
      ['-e', opts.program ?? PROBE_CHILD, ortPath, provider, Buffer.from(probeModel()).toString('base64')],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, ELECTRON_RUN_AS_NODE: '1' },
      },
    );
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-16384)));
    child.on('error', (e) => {
      clearTimeout(timer);
      resolve({ stdout, stderr, code: null, signal: null, timedOut, spawnError: e });
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ stdout, stderr, code, signal, timedOut });
    });
  });
  const ms = performance.now() - t0;
  const reason = nativeReason(res.stderr);
  if (res.spawnError)
    return { provider, ok: false, bundled: false, ms, error: `the probe process could not start: ${res.spawnError.message}` };
  if (res.timedOut)
    return {
      provider,
      ok: false,
      bundled: false,
      ms,
      error: `the probe did not finish in ${Math.round(timeoutMs / 1000)} s (a driver hung)${reason ? `; ${reason}` : ''}`,
    };
  const line = res.stdout.trim().split('\n').pop() ?? '';
  let parsed: ProviderProbe | undefined;
  try {
    parsed = JSON.parse(line) as ProviderProbe;
  } catch {
    parsed = undefined;
  }
  if (!parsed) {
    const how = res.signal ? `was killed by ${res.signal}` : `exited with code ${res.code}`;
    return {
      provider,
      ok: false,
      bundled: false,
      ms,
      error: `the probe process ${how} before answering (a driver crashed)${reason ? `; ${reason}` : ''}`,
    };
  }
  if (!parsed.ok && reason && parsed.error && !parsed.error.includes(reason)) parsed.error = `${parsed.error} (${reason})`;
  return parsed;
}

/** The user-facing setting: a provider, or `auto` (CUDA when it loads, else WebGPU on a GPU adapter, else CPU). */
export type ProviderSetting = 'auto' | ExecutionProviderName;
export const PROVIDER_SETTINGS: readonly ProviderSetting[] = ['auto', ...EXECUTION_PROVIDERS];

export interface SessionSettings {
  provider?: ProviderSetting;
  /** Intra-op threads; 0 or undefined lets ONNX Runtime use one per physical core. */
  threads?: number;
  /** Where the one fallback warning goes (default: stderr). */
  onWarning?: (message: string) => void;
  /** Graph optimization level (default 'all'). */
  optimization?: 'disabled' | 'basic' | 'extended' | 'all';
  /**
   * Whether idle intra-op worker threads busy-wait for the next op (ONNX Runtime's default) instead
   * of sleeping. Default false. Measured on a 2-core machine (turnwise-tiny training step, 2
   * threads): spinning is ~7-10% faster while nothing else runs, and 2-3× slower as soon as another
   * process wants a core (a spinning worker takes the core from the thread it waits for), which a
   * decision taken from the load average at session creation cannot foresee. Turn it on for a
   * machine dedicated to the run.
   */
  spinning?: boolean;
  /**
   * Write ONNX Runtime's per-node profile (Chrome trace JSON) to `<profile>_<timestamp>.json` when
   * the session is released. For `docs/experiments/scripts/profile-train.ts`; slows every run.
   */
  profile?: string;
  /**
   * For a Policy, not a session: whether the CPU decode steps that draw their tokens hold the
   * base weights in their session, packed once for the matrix kernel (graphs.ts ProductForm
   * 'packed'), at the cost of a second copy of the weights while sampling. Undefined: when the
   * weights are large enough to gain (Policy's PACK_MIN_WEIGHT_BYTES). Ignored on GPU providers.
   */
  packDecodeWeights?: boolean;
  /**
   * For a Policy, not a session: what the decode steps that draw tokens read the base weights
   * as (the policy's quantize.ts RolloutPrecision): float32; on the CPU and WebGPU int8 / int4
   * blocks quantized once per weights version; on a GPU provider float16 products. Scoring and training
   * stay float32. `auto` and undefined: the policy's measured rule (rolloutPrecisionFor). A
   * precision the provider does not run samples in float32, with a warning.
   */
  rolloutPrecision?: 'auto' | 'float32' | 'float16' | 'int8' | 'int4';
}

/** Whether the intra-op workers of a session with settings `s` spin. */
export function resolveSpinning(s: SessionSettings): boolean {
  return s.spinning === true && s.threads !== 1;
}

/** A host-side tensor: what `OnnxSession.run` takes and returns. */
export interface HostTensor {
  dtype: DType;
  dims: readonly number[];
  data: TensorData;
}

const ORT_TYPE: Record<DType, ort.Tensor.Type> = {
  float32: 'float32',
  float16: 'float16',
  float64: 'float64',
  int64: 'int64',
  int32: 'int32',
  uint8: 'uint8',
  bool: 'bool',
};

export function toOrt(t: HostTensor | ort.Tensor): ort.Tensor {
  if (t instanceof ort.Tensor) return t;
  const h = t as HostTensor;
  return new ort.Tensor(ORT_TYPE[h.dtype], h.data as never, h.dims);
}

/** The DType of an ONNX Runtime tensor type. */
function dtypeOf(t: ort.Tensor): DType {
  const dtype = (Object.keys(ORT_TYPE) as DType[]).find((k) => ORT_TYPE[k] === t.type);
  if (!dtype) throw new TurnwiseError('internal', `ONNX Runtime returned an unsupported tensor type ${t.type}`);
  return dtype;
}

function fromOrt(t: ort.Tensor): HostTensor {
  return { dtype: dtypeOf(t), dims: t.dims, data: t.data as TensorData };
}

/** Providers that failed to load in this process: asked again, they go straight to CPU. */
const unavailable = new Map<ExecutionProviderName, string>();
const warned = new Set<string>();
let webgpuProbed = false;

function warnOnce(settings: SessionSettings, key: string, message: string): void {
  if (warned.has(key)) return;
  warned.add(key);
  (settings.onWarning ?? ((m: string) => process.stderr.write(`warning: ${m}\n`)))(message);
}

/** Test hook: forget which providers failed and which warnings were shown. */
export function resetProviderState(): void {
  unavailable.clear();
  warned.clear();
  webgpuProbed = false;
  gpuAdapter = undefined;
}

let gpuAdapter: boolean | undefined;

/**
 * Whether `auto` tries WebGPU (after CUDA, before the CPU): only where a GPU adapter is found
 * (adapters.ts), never on a software one such as lavapipe, which passes the session probe but
 * runs on the CPU, slower than the CPU provider. Looked up once per process.
 */
export function autoTriesWebgpu(): boolean {
  // Only the kind matters here: nvidia-smi (names and memory) is not asked.
  return (gpuAdapter ??= webgpuAdapters({ gpuInfo: () => [] }).some((a) => a.kind === 'hardware'));
}

/**
 * Why CUDA cannot load, found without asking ONNX Runtime (which would print a native error line
 * on every start): its provider libraries sit next to the binding when they were installed.
 */
function cudaLibrariesMissing(): string | undefined {
  if (process.platform !== 'linux' && process.platform !== 'win32') return undefined;
  let binDir: string;
  try {
    binDir = path.join(path.dirname(require.resolve('onnxruntime-node')), '..', 'bin', 'napi-v6', process.platform, process.arch);
  } catch {
    return undefined;
  }
  if (!fs.existsSync(binDir)) return undefined;
  const lib = process.platform === 'win32' ? 'onnxruntime_providers_cuda.dll' : 'libonnxruntime_providers_cuda.so';
  return fs.existsSync(path.join(binDir, lib)) ? undefined : `${lib} is not installed with onnxruntime-node`;
}

function ortOptions(provider: ExecutionProviderName, s: SessionSettings): ort.InferenceSession.SessionOptions {
  return {
    executionProviders: [provider],
    graphOptimizationLevel: s.optimization ?? 'all',
    intraOpNumThreads: s.threads ?? 0,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    enableCpuMemArena: true,
    // ONNX Runtime's memory pattern preallocates one block for every intermediate from the first
    // run's trace. Measured on a turnwise-tiny training step (CPU): no speed difference (within
    // noise at 4x128 and 4x1024, decode too), but peak RSS 1.96 GB instead of 1.1 GB at 4x1024
    // tokens and 370 instead of 309 MB at 4x128. The arena stays (without it steps are ~20% slower).
    enableMemPattern: false,
    logSeverityLevel: 3,
    extra: { session: { intra_op: { allow_spinning: resolveSpinning(s) ? '1' : '0' } } },
    ...(s.profile ? { enableProfiling: true, profileFilePrefix: s.profile } : {}),
  };
}

/** An inference session on a resolved execution provider. */
export class OnnxSession {
  private constructor(
    readonly session: ort.InferenceSession,
    readonly provider: ExecutionProviderName,
  ) {}

  /**
   * Creates a session. `cuda`/`webgpu` that cannot be loaded (onnxruntime-node throws rather than
   * falling back) give one warning and a CPU session; `auto` tries CUDA silently, then WebGPU where
   * a GPU adapter is found (autoTriesWebgpu), then the CPU.
   * `model`: the model's bytes, or the path of a model file (one whose initializers are kept in
   * files beside it).
   */
  static async create(
    model: Uint8Array | string,
    settings: SessionSettings = {},
    /** Outputs a provider that keeps tensors (KEEPING_PROVIDERS) leaves on the device: read them with runKeeping. */
    deviceOutputs: readonly string[] = [],
  ): Promise<OnnxSession> {
    const want = settings.provider ?? 'auto';
    const order: ExecutionProviderName[] =
      want === 'auto' ? ['cuda', ...(autoTriesWebgpu() ? (['webgpu'] as const) : []), 'cpu'] : want === 'cpu' ? ['cpu'] : [want, 'cpu'];
    let lastError: unknown;
    for (const p of order) {
      if (p === 'cpu' && want !== 'auto' && want !== 'cpu' && unavailable.has(want)) {
        warnOnce(
          settings,
          want,
          `the ${want} execution provider could not be loaded (${unavailable.get(want)}); running on CPU. ` +
            (want === 'cuda'
              ? 'For CUDA install CUDA 12 + cuDNN 9 and run `npm rebuild onnxruntime-node --onnxruntime-node-install=cuda12`.'
              : 'WebGPU needs a GPU adapter visible to the process.'),
        );
      }
      if (p === 'cuda' && !unavailable.has(p)) {
        const missing = cudaLibrariesMissing();
        if (missing) unavailable.set(p, missing);
      }
      if (p === 'webgpu' && !unavailable.has(p) && !webgpuProbed) {
        // Dawn prints its adapter search to this process's stderr and a broken driver can take
        // the process down: ask a child first, once per process.
        webgpuProbed = true;
        const probe = await probeProvider('webgpu');
        if (!probe.ok) unavailable.set(p, probe.error ?? 'no WebGPU adapter');
      }
      if (p !== 'cpu' && unavailable.has(p)) continue;
      try {
        // Two calls, one per overload of create (a path, the bytes): TypeScript picks an overload by the argument's type.
        const options: ort.InferenceSession.SessionOptions = {
          ...ortOptions(p, settings),
          ...(deviceOutputs.length && KEEPING_PROVIDERS.has(p)
            ? { preferredOutputLocation: Object.fromEntries(deviceOutputs.map((n) => [n, 'gpu-buffer' as const])) }
            : {}),
        };
        const session =
          typeof model === 'string' ? await ort.InferenceSession.create(model, options) : await ort.InferenceSession.create(model, options);
        return new OnnxSession(session, p);
      } catch (e) {
        lastError = e;
        if (p === 'cpu') break;
        unavailable.set(p, (e as Error).message.split('\n')[0].slice(0, 300));
      }
    }
    if (lastError === undefined) throw new TurnwiseError('internal', 'no execution provider was tried');
    throw new TurnwiseError(
      'runtime-unavailable',
      `ONNX Runtime could not create a session: ${(lastError as Error).message.split('\n')[0]}`,
      {
        hint: 'run `turnwise doctor`; if the model was generated by Turnwise this is a bug worth reporting',
        cause: lastError,
      },
    );
  }

  get inputNames(): readonly string[] {
    return this.session.inputNames;
  }
  get outputNames(): readonly string[] {
    return this.session.outputNames;
  }

  private inFlight = new Set<Promise<unknown>>();
  private released: Promise<void> | undefined;

  /**
   * Runs the session; feeds may be host tensors or ort tensors. Returns host tensors. On a provider
   * that keeps tensors on the device (KEEPING_PROVIDERS), a host tensor marked by keepOnDevice is fed
   * its device copy, uploaded by the first run that needs it.
   */
  async run(feeds: Record<string, HostTensor | ort.Tensor>, fetches?: readonly string[]): Promise<Record<string, HostTensor>> {
    const out = await this.execute(feeds, fetches);
    const res: Record<string, HostTensor> = {};
    for (const [k, v] of Object.entries(out)) res[k] = fromOrt(v);
    return res;
  }

  /**
   * Runs the session; the outputs it was created to leave on the device (deviceOutputs, on a
   * provider that keeps tensors) come back as device tensors, which the caller feeds to a later
   * run and disposes; the rest as host tensors.
   */
  async runKeeping(
    feeds: Record<string, HostTensor | ort.Tensor>,
  ): Promise<{ host: Record<string, HostTensor>; device: Record<string, ort.Tensor> }> {
    const out = await this.execute(feeds);
    const host: Record<string, HostTensor> = {};
    const device: Record<string, ort.Tensor> = {};
    for (const [k, v] of Object.entries(out)) {
      if (v.location === 'gpu-buffer') device[k] = v;
      else host[k] = fromOrt(v);
    }
    return { host, device };
  }

  private async execute(feeds: Record<string, HostTensor | ort.Tensor>, fetches?: readonly string[]): Promise<Record<string, ort.Tensor>> {
    if (this.released) throw new TurnwiseError('internal', 'this ONNX Runtime session was released; create a new one');
    const keeps = KEEPING_PROVIDERS.has(this.provider);
    // An upload or a run the device failed: said as such (deviceFailure), anything else as it came.
    const failed = (e: unknown): never => {
      throw deviceFailure(this.provider, e) ?? e;
    };
    const f: Record<string, ort.Tensor> = {};
    const used: DeviceCopy[] = [];
    const record: FeedRecord | undefined = feedMeters.size
      ? { provider: this.provider, hostBytes: 0, uploadBytes: 0, deviceTensors: 0, byName: {} }
      : undefined;
    try {
      for (const [k, v] of Object.entries(feeds)) {
        const copy = keeps && !(v instanceof ort.Tensor) ? kept.get(v.data) : undefined;
        if (copy) {
          copy.users++;
          used.push(copy);
          if (record && !copy.tensor) record.uploadBytes += copy.bytes;
          f[k] = await deviceTensor(copy, v as HostTensor).catch(failed);
        } else f[k] = toOrt(v);
        if (record) {
          const onHost = f[k].location === 'cpu' || f[k].location === undefined;
          if (onHost) {
            const bytes = (v instanceof ort.Tensor ? (v.data as TensorData) : (v as HostTensor).data).byteLength;
            record.hostBytes += bytes;
            record.byName[k] = bytes;
          } else record.deviceTensors++;
        }
      }
      if (record) for (const m of feedMeters) m(record);
      const pending = fetches ? this.session.run(f, fetches) : this.session.run(f);
      this.inFlight.add(pending);
      try {
        return (await pending.catch(failed)) as Record<string, ort.Tensor>;
      } finally {
        this.inFlight.delete(pending);
      }
    } finally {
      for (const c of used) {
        c.users--;
        disposeIfUnheld(c);
      }
    }
  }

  /**
   * Frees the native session once the runs already started have finished (a cache may evict a
   * session another caller is still running); later runs are refused. Idempotent.
   */
  release(): Promise<void> {
    this.released ??= (async () => {
      await Promise.allSettled([...this.inFlight]);
      await this.session.release().catch(() => undefined);
    })();
    return this.released;
  }
}

// ---- A GPU that fails mid-run ----

/** What the messages of ONNX Runtime's GPU providers (CUDA, Dawn's WebGPU) say when the device runs out of memory. */
const OUT_OF_MEMORY =
  /out of memory|\bOOM\b|failed to allocate|BFCArena|cudaErrorMemoryAllocation|CUDNN_STATUS_ALLOC_FAILED|CUBLAS_STATUS_ALLOC_FAILED|buffer allocation failed|exceeds the max buffer size/i;
/** ... and when the device or its driver is gone. */
const DEVICE_LOST =
  /device (?:was |is )?lost|DeviceLost|\bLost\b.*device|illegal memory access|unspecified launch failure|CUDA failure 999|CUDA_ERROR_LAUNCH_FAILED|device-side assert|driver shutting down|no CUDA-capable device/i;

/**
 * A run's failure on a GPU provider as a TurnwiseError that names the cause and what to change,
 * or undefined when it is not the device's (a model or input error keeps its own message).
 */
export function deviceFailure(provider: ExecutionProviderName, e: unknown): TurnwiseError | undefined {
  if (provider === 'cpu' || e instanceof TurnwiseError) return undefined;
  const message = e instanceof Error ? e.message : String(e);
  const reason = message.split('\n')[0].slice(0, 300);
  const resume =
    'a training run keeps its last complete iteration: `turnwise train --resume RUN` continues it (add `--provider cpu` to continue on the CPU)';
  if (OUT_OF_MEMORY.test(message))
    return new TurnwiseError('runtime-unavailable', `the ${provider} device ran out of memory: ${reason}`, {
      hint: `lower "concurrency" (episodes in flight) or "updateTokensPerStep", or use LoRA; TURNWISE_DEVICE_MEMORY_LIMIT_MB makes the memory plan refuse what will not fit before a run starts. ${resume}`,
      cause: e,
    });
  if (DEVICE_LOST.test(message))
    return new TurnwiseError('runtime-unavailable', `the ${provider} device was lost (its driver failed or reset): ${reason}`, {
      hint: `check the GPU (nvidia-smi, the kernel log); ${resume}`,
      cause: e,
    });
  return undefined;
}

// ---- What crosses into a run, and tensors kept on the device ----

/** What one run was fed, counted from the feeds themselves: the bytes read from host memory. */
export interface FeedRecord {
  provider: ExecutionProviderName;
  /** Bytes of the feeds that were host tensors (what a GPU provider copies in for this run). */
  hostBytes: number;
  /** Bytes of kept tensors (keepOnDevice) this run uploaded, first used here; fed from the device from now on. */
  uploadBytes: number;
  /** Feeds that were tensors on the device. */
  deviceTensors: number;
  /** Host bytes by input name. */
  byName: Record<string, number>;
}

const feedMeters = new Set<(r: FeedRecord) => void>();

/**
 * Records what every run in this process is fed from now until `stop()`: the tests' and the
 * benchmarks' view of what crosses to a GPU per step. Costs nothing while no meter is on.
 */
export function meterFeeds(): { records: FeedRecord[]; stop(): void } {
  const records: FeedRecord[] = [];
  const m = (r: FeedRecord) => records.push(r);
  feedMeters.add(m);
  return { records, stop: () => feedMeters.delete(m) };
}

/**
 * Providers on which onnxruntime-node can hold a tensor on the device between runs and feed it
 * to any session of the process: WebGPU (its `gpu-buffer` tensors). The CPU provider reads host
 * tensors in place; onnxruntime-node's binding takes no CUDA device tensors.
 */
export const KEEPING_PROVIDERS: ReadonlySet<ExecutionProviderName> = new Set(['webgpu']);

interface DeviceCopy {
  /** keepOnDevice calls not yet matched by releaseFromDevice. */
  holders: number;
  /** Runs feeding the copy right now. */
  users: number;
  bytes: number;
  tensor?: Promise<ort.Tensor>;
}

/** Host arrays marked to stay on the device, by identity. */
const kept = new WeakMap<object, DeviceCopy>();
let keptBytes = 0;

/**
 * Marks host tensors (a policy's weights, a trainer's frozen base) to be kept on the device by
 * providers that can (KEEPING_PROVIDERS): the first run there that feeds one uploads it once, and
 * every later run of any session is fed the device copy; no host bytes cross again. Marks count:
 * each call is matched by a releaseFromDevice. A marked array must not be written to (its device
 * copy would not follow): replace it with a new array and release the old one. No effect on
 * other providers.
 */
export function keepOnDevice(tensors: Iterable<HostTensor>): void {
  for (const t of tensors) {
    const c = kept.get(t.data);
    if (c) c.holders++;
    else kept.set(t.data, { holders: 1, users: 0, bytes: t.data.byteLength });
  }
}

/** Undoes one keepOnDevice of each tensor; a copy no one holds is freed once the runs feeding it end. */
export function releaseFromDevice(tensors: Iterable<HostTensor>): void {
  for (const t of tensors) {
    const c = kept.get(t.data);
    if (!c || c.holders === 0) continue;
    c.holders--;
    if (c.holders === 0) kept.delete(t.data);
    disposeIfUnheld(c);
  }
}

/** Bytes of the tensors uploaded to the device by keepOnDevice marks and not yet freed. */
export function deviceKeptBytes(): number {
  return keptBytes;
}

function disposeIfUnheld(c: DeviceCopy): void {
  if (c.holders > 0 || c.users > 0 || !c.tensor) return;
  const t = c.tensor;
  c.tensor = undefined;
  void t.then(
    (x) => {
      keptBytes -= c.bytes;
      x.dispose();
    },
    () => undefined,
  );
}

/** Y = Identity(X) over a tensor of any shape: run with gpu-buffer outputs it uploads X, fed a device tensor with CPU outputs it reads X back. */
function identityModel(dtype: DType): Uint8Array {
  return oneNodeModel('identity', 'Identity', 1, dtype, false);
}

/** WebGPU Identity sessions by dtype and direction, made once: 'up' leaves its output on the device, 'down' on the CPU. */
const movers = new Map<string, Promise<ort.InferenceSession>>();

function mover(dtype: DType, direction: 'up' | 'down'): Promise<ort.InferenceSession> {
  const key = `${direction}|${dtype}`;
  let s = movers.get(key);
  if (!s) {
    s = ort.InferenceSession.create(identityModel(dtype), {
      ...ortOptions('webgpu', {}),
      ...(direction === 'up' ? { preferredOutputLocation: 'gpu-buffer' as const } : {}),
    });
    // A session that could not be made is tried again by the next call rather than remembered.
    s.catch(() => movers.delete(key));
    movers.set(key, s);
  }
  return s;
}

/**
 * A device tensor's values on the host, read back through an Identity session on WebGPU whose
 * output stays on the CPU (onnxruntime-node's own download of a gpu-buffer tensor is not usable
 * from Node); a host tensor as it is.
 */
export async function downloadTensor(t: ort.Tensor): Promise<HostTensor> {
  if (t.location !== 'gpu-buffer') return fromOrt(t);
  const s = await mover(dtypeOf(t), 'down');
  return fromOrt((await s.run({ X: t })).Y);
}

/** The device copy of `t`, uploaded on first use (through a WebGPU Identity session with gpu-buffer outputs). */
function deviceTensor(c: DeviceCopy, t: HostTensor): Promise<ort.Tensor> {
  if (!c.tensor) {
    c.tensor = mover(t.dtype, 'up').then(async (s) => {
      const y = (await s.run({ X: toOrt(t) })).Y;
      keptBytes += c.bytes;
      return y;
    });
    // A failed upload is tried again by the next run rather than remembered.
    c.tensor.catch(() => (c.tensor = undefined));
  }
  return c.tensor;
}

/**
 * Sessions keyed by a graph signature (shape class, loss, provider...): a graph is built and a
 * session created once per key, then reused. Least recently used sessions are released.
 */
export class SessionCache {
  private readonly map = new Map<string, Promise<OnnxSession>>();
  constructor(
    private readonly settings: SessionSettings = {},
    private readonly capacity = 8,
  ) {}

  get size(): number {
    return this.map.size;
  }

  /** The session under `key`, created from `build`'s model (bytes, or a model file's path) the first time. */
  get(key: string, build: () => Uint8Array | string, deviceOutputs: readonly string[] = []): Promise<OnnxSession> {
    const hit = this.map.get(key);
    if (hit) {
      this.map.delete(key);
      this.map.set(key, hit);
      return hit;
    }
    const p = OnnxSession.create(build(), this.settings, deviceOutputs);
    // Forget a failed creation, but only if the key still maps to it (it may have been evicted and rebuilt).
    p.catch(() => this.map.get(key) === p && this.map.delete(key));
    this.map.set(key, p);
    while (this.map.size > this.capacity) {
      const [oldKey, old] = this.map.entries().next().value as [string, Promise<OnnxSession>];
      this.map.delete(oldKey);
      void old.then(
        (s) => s.release(),
        () => undefined,
      );
    }
    return p;
  }

  async clear(): Promise<void> {
    await this.drop(() => true);
  }

  /** Releases the sessions whose keys `which` picks; the next get of such a key creates one again. */
  async drop(which: (key: string) => boolean): Promise<void> {
    const gone = [...this.map.entries()].filter(([k]) => which(k));
    for (const [k] of gone) this.map.delete(k);
    for (const [, p] of gone)
      await p.then(
        (s) => s.release(),
        () => undefined,
      );
  }
}

export { ort };
