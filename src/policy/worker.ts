// The policy in a worker thread. onnxruntime-node's run() blocks the thread it is called on, so
// generation and training run in a worker_threads Worker (worker-main.ts) holding one
// TrainablePolicy, and the main event loop stays free for sandbox I/O. PolicyWorker is the
// main-thread side: the PolicyService interface as messages, errors back as TurnwiseErrors.
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as path from 'node:path';
import { Worker } from 'node:worker_threads';
import { TurnwiseError, type ErrorCode } from '../core/errors';
import type { SessionSettings } from '../onnx';
import type { OptimizerState } from './files/optimizer-state';
import type { GeneratedRow } from './inference/policy';
import type {
  CheckpointOptions,
  ExtendByIdRequest,
  LogprobOptions,
  PolicyInfo,
  PolicyService,
  SampleByIdRequest,
  SequenceId,
  TrainableOptions,
  TrainArgs,
} from './trainable';
import type { StepMetrics } from './training/trainer';
import type { RolloutPrecision } from './model/quantize';
import type { PolicyWeights } from './model/weights';

/** Session settings that cross the thread boundary (warnings come back as messages). */
export type WorkerSettings = Omit<SessionSettings, 'onWarning'>;

/** A call from the main thread to the worker. */
export type WorkerCall =
  | { method: 'loadCheckpoint'; dir: string; options: CheckpointOptions; settings: WorkerSettings }
  | { method: 'loadWeights'; weights: PolicyWeights; options: Omit<TrainableOptions, 'settings'>; settings: WorkerSettings }
  | { method: 'info' }
  | { method: 'setRolloutPrecision'; setting: RolloutPrecision | 'auto' }
  | { method: 'newSequence'; tokens?: readonly number[] }
  | { method: 'tokens'; seq: SequenceId }
  | { method: 'reset'; seq: SequenceId; ids: readonly number[] }
  | { method: 'release'; seq: SequenceId }
  | { method: 'extend'; requests: readonly ExtendByIdRequest[] }
  | { method: 'sample'; requests: readonly SampleByIdRequest[] }
  | { method: 'logprobs'; rows: readonly (readonly number[])[]; options?: LogprobOptions }
  | { method: 'train'; args: TrainArgs }
  | { method: 'saveCheckpoint'; dir: string }
  | { method: 'weights' }
  | { method: 'optimizerState' }
  | { method: 'dispose' }
  | { method: 'crashForTest' };

/** Main thread → worker. Each request is answered by one reply with its id. */
export type WorkerRequest = WorkerCall & { id: number };

/** Worker → main thread: a reply to request `id`, or a warning from ONNX Runtime. */
export type WorkerReply =
  { warning: string } | { id: number; result: unknown } | { id: number; error: { code: ErrorCode; message: string; hint?: string } };

type Body<M extends WorkerCall['method']> = Extract<WorkerCall, { method: M }>;

export interface PolicyWorkerOptions {
  /** Where ONNX Runtime warnings from the worker go (default: the load settings' onWarning, else stderr). */
  onWarning?: (message: string) => void;
  /** The worker's entry file (default: policyWorkerEntry()). */
  entry?: { file: string; execArgv?: string[] };
}

/**
 * Where the worker's code is: dist/policy-worker.js next to the bundle that runs (dist/cli.js,
 * dist/extension.js), or worker-main.ts next to this file when running from source under tsx.
 */
export function policyWorkerEntry(): { file: string; execArgv?: string[] } {
  const bundled = path.join(__dirname, 'policy-worker.js');
  if (fs.existsSync(bundled)) return { file: bundled };
  const source = path.join(__dirname, 'worker-main.ts');
  // Resolved through createRequire so that bundlers leave tsx (a dev dependency) alone.
  if (fs.existsSync(source)) return { file: source, execArgv: ['--require', createRequire(__filename).resolve('tsx/cjs')] };
  throw new TurnwiseError('internal', `the policy worker's code is missing: neither ${bundled} nor ${source} exists`, {
    hint: 'rebuild with `npm run build`, which writes dist/policy-worker.js next to dist/cli.js',
  });
}

interface Pending {
  method: string;
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
}

/**
 * A TrainablePolicy in a worker thread. Calls are answered in order; a failed call rejects with
 * the worker's TurnwiseError (code, message, hint). If the worker dies, every pending and later
 * call rejects saying so. Keeps the process alive only while a call is pending.
 */
export class PolicyWorker implements PolicyService {
  private readonly worker: Worker;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private closed: TurnwiseError | undefined;
  private step = 0;
  private onWarning: (message: string) => void;
  private disposing: Promise<void> | undefined;

  constructor(options: PolicyWorkerOptions = {}) {
    const entry = options.entry ?? policyWorkerEntry();
    this.onWarning = options.onWarning ?? ((m) => process.stderr.write(`turnwise: ${m}\n`));
    this.worker = new Worker(entry.file, entry.execArgv ? { execArgv: entry.execArgv } : {});
    this.worker.unref();
    this.worker.on('message', (m: WorkerReply) => this.onMessage(m));
    this.worker.on('error', (e) =>
      this.close(
        new TurnwiseError('internal', `the policy worker crashed: ${e.message}`, {
          hint: 'calls in flight were lost; start a new PolicyWorker and load the last checkpoint',
        }),
      ),
    );
    this.worker.on('exit', (code) => {
      liveWorkers.delete(this);
      this.close(
        new TurnwiseError('internal', `the policy worker exited (code ${code})`, {
          hint: 'calls in flight were lost; start a new PolicyWorker and load the last checkpoint',
        }),
      );
    });
    liveWorkers.add(this);
  }

  private onMessage(m: WorkerReply): void {
    if ('warning' in m) {
      this.onWarning(m.warning);
      return;
    }
    const p = this.pending.get(m.id);
    if (!p) return;
    this.pending.delete(m.id);
    if (this.pending.size === 0) this.worker.unref();
    if ('error' in m) p.reject(new TurnwiseError(m.error.code, m.error.message, m.error.hint ? { hint: m.error.hint } : undefined));
    else p.resolve(m.result);
  }

  /** Rejects every pending call with `reason`; later calls reject with it too. */
  private close(reason: TurnwiseError): void {
    if (!this.closed) this.closed = reason;
    for (const p of this.pending.values())
      p.reject(new TurnwiseError(reason.code, `${reason.message}; ${p.method} did not finish`, { hint: reason.hint }));
    this.pending.clear();
  }

  private call<T>(body: WorkerCall): Promise<T> {
    if (this.closed) return Promise.reject(this.closed);
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { method: body.method, resolve: resolve as (v: unknown) => void, reject });
      if (this.pending.size === 1) this.worker.ref();
      try {
        this.worker.postMessage({ ...body, id } satisfies WorkerRequest);
      } catch (e) {
        this.pending.delete(id);
        reject(
          new TurnwiseError('invalid-input', `cannot send ${body.method} to the policy worker: ${(e as Error).message}`, {
            hint: 'arguments must be plain data (no functions)',
          }),
        );
      }
    });
  }

  private async loaded(body: Body<'loadCheckpoint'> | Body<'loadWeights'>, onWarning?: (m: string) => void): Promise<PolicyInfo> {
    if (onWarning) this.onWarning = onWarning;
    const info = await this.call<PolicyInfo>(body);
    this.step = info.step;
    return info;
  }

  /** Loads a checkpoint directory in the worker; the KL reference is `referenceDir`'s weights, else its own. */
  loadCheckpoint(dir: string, settings: SessionSettings = {}, options: CheckpointOptions = {}): Promise<PolicyInfo> {
    const { onWarning, ...rest } = settings;
    return this.loaded(
      {
        method: 'loadCheckpoint',
        dir: path.resolve(dir),
        options: { ...options, ...(options.referenceDir ? { referenceDir: path.resolve(options.referenceDir) } : {}) },
        settings: rest,
      },
      onWarning,
    );
  }

  /** Loads weights (copied to the worker) with an optional optimizer state, reference and tokenizer files. */
  loadWeights(weights: PolicyWeights, options: TrainableOptions = {}): Promise<PolicyInfo> {
    const { settings = {}, ...rest } = options;
    const { onWarning, ...plain } = settings;
    return this.loaded({ method: 'loadWeights', weights, options: rest, settings: plain }, onWarning);
  }

  info(): Promise<PolicyInfo> {
    return this.call({ method: 'info' });
  }

  setRolloutPrecision(setting: RolloutPrecision | 'auto'): Promise<RolloutPrecision> {
    return this.call({ method: 'setRolloutPrecision', setting });
  }

  newSequence(tokens?: readonly number[]): Promise<SequenceId> {
    return this.call({ method: 'newSequence', tokens });
  }

  tokens(seq: SequenceId): Promise<number[]> {
    return this.call({ method: 'tokens', seq });
  }

  reset(seq: SequenceId, ids: readonly number[]): Promise<void> {
    return this.call({ method: 'reset', seq, ids });
  }

  release(seq: SequenceId): Promise<void> {
    return this.call({ method: 'release', seq });
  }

  extend(requests: readonly ExtendByIdRequest[]): Promise<void> {
    return this.call({ method: 'extend', requests });
  }

  sample(requests: readonly SampleByIdRequest[]): Promise<GeneratedRow[]> {
    return this.call({ method: 'sample', requests });
  }

  logprobs(rows: readonly (readonly number[])[], options?: LogprobOptions): Promise<Float32Array[]> {
    return this.call({ method: 'logprobs', rows, options });
  }

  async train(...args: TrainArgs): Promise<StepMetrics[]> {
    const [o, batches, hyper] = args;
    // A learning-rate function cannot cross threads: evaluate it here for this call's steps.
    const lr =
      typeof hyper.lr === 'function'
        ? Array.from({ length: batches.length }, (_, k) => (hyper.lr as (s: number) => number)(this.step + k))
        : hyper.lr;
    const r = await this.call<{ metrics: StepMetrics[]; step: number }>({ method: 'train', args: [o, batches, { ...hyper, lr }] });
    this.step = r.step;
    return r.metrics;
  }

  saveCheckpoint(dir: string): Promise<void> {
    return this.call({ method: 'saveCheckpoint', dir: path.resolve(dir) });
  }

  weights(): Promise<PolicyWeights> {
    return this.call({ method: 'weights' });
  }

  optimizerState(): Promise<OptimizerState> {
    return this.call({ method: 'optimizerState' });
  }

  /** For tests of crash handling: the worker throws an uncaught exception. */
  crashForTest(): Promise<never> {
    return this.call({ method: 'crashForTest' });
  }

  /**
   * Stops the worker: pending calls reject at once, then the worker releases its ONNX Runtime
   * sessions and the thread ends. Terminating the thread while a session run is in flight aborts
   * the whole process: the run's completion reaches a torn-down thread and onnxruntime-node's
   * binding throws a C++ exception nothing catches ("terminate called after throwing an instance
   * of 'Napi::Error'"). So the release goes through the worker's own queue (TrainablePolicy runs
   * calls one at a time, so it waits for the run in flight), and the thread is terminated only
   * after it, or after `graceMs` when a call never finishes.
   */
  dispose(graceMs = 60_000): Promise<void> {
    this.disposing ??= (async () => {
      if (this.closed) return;
      this.close(
        new TurnwiseError('internal', 'the policy worker was disposed', { hint: 'dispose the worker only after its calls are answered' }),
      );
      const id = this.nextId++;
      let timer: NodeJS.Timeout | undefined;
      const released = new Promise<void>((resolve) => {
        this.pending.set(id, { method: 'dispose', resolve: () => resolve(), reject: () => resolve() });
        timer = setTimeout(resolve, graceMs);
      });
      this.worker.ref();
      this.worker.postMessage({ method: 'dispose', id } satisfies WorkerRequest);
      await released;
      clearTimeout(timer);
      this.pending.delete(id);
      await this.worker.terminate();
    })();
    return this.disposing;
  }
}

/** Policy workers of this process not yet disposed (see disposeAllPolicyWorkers). */
const liveWorkers = new Set<PolicyWorker>();

/**
 * Disposes every policy worker of this process (in-flight runs finish first, at most `graceMs`):
 * what a forced exit calls before process.exit(), which would otherwise end the worker threads
 * mid-run and abort the process.
 */
export async function disposeAllPolicyWorkers(graceMs = 3000): Promise<void> {
  await Promise.all([...liveWorkers].map((w) => w.dispose(graceMs).catch(() => undefined)));
}
