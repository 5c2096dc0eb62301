// Training graphs: forward (given by the caller) + backward + global-norm clipping + AdamW in one
// ONNX graph, optionally K optimizer steps in one run() through an ONNX Loop.
//
// Where the time goes (turnwise-tiny, batch 4 × seq 128, CPU, 2 cores; `docs/experiments/scripts/profile-train.ts`
// reads ONNX Runtime's profiler by phase, from the fwd/ bwd/ opt/ node-name scopes):
// - fwd ~29 ms, bwd ~52 ms, opt ~18 ms (profiler on). About half is MatMul/Gemm (10.6 GFLOP per
//   step at 210-230 GFLOP/s, MLAS's rate on a 2048³ matmul on that machine), AdamW is 12 memory-bound passes
//   over 3.2M values, the rest elementwise forward/backward ops; ~1200 nodes, ~5 µs dispatch each.
// - Every separate run() copies all outputs (parameters and both moments, 38 MB) into new JS
//   buffers: ~15 ms. A K-step Loop pays that once per K steps, and copies nothing per
//   iteration (ONNX Runtime hands each iteration's carried outputs to the next as they are).
//   When a step's compute dominates (~88 ms here) the Loop gains ~1.15-1.2×; at 1 × 16, ~1.5×.
// - Flattening all parameters into one buffer per group was measured ~7% slower: see optim.ts.
import { TurnwiseError } from '../core/errors';
import { gradients } from './autodiff';
import { DType, Dim, Graph, Value, makeData, staticSize } from './graph';
import { toModelProto } from './model';
import { adamwStep, clipCoefficient } from './optim';
import { downloadTensor, HostTensor, OnnxSession, ort, SessionCache, SessionSettings } from './runtime';

export interface ParamSpec {
  /** Graph input name, e.g. a Hugging Face tensor name `model.layers.0.mlp.up_proj.weight`. */
  name: string;
  shape: readonly number[];
  /** Decoupled weight decay applies (default: rank >= 2, i.e. not biases and norm gains). */
  decay?: boolean;
}

export interface BatchSpec {
  name: string;
  dtype: DType;
  /** Per-step shape (symbolic dims allowed). With `batchPerStep` the fed tensor has a leading K axis. */
  shape: readonly Dim[];
  /** Fed once and used by every step even with `batchPerStep` (loss hyperparameters, constants). */
  shared?: boolean;
}

/** What a forward builder returns: a scalar loss and extra scalar metrics (entropy, clip fraction...). */
export interface ForwardResult {
  loss: Value;
  metrics?: Record<string, Value>;
}

/**
 * Builds the forward pass and loss. `norms` are given only in an accumulation graph (see
 * TrainingGraphSpec.normalisers): the step-wide denominators to divide by instead of the batch's own.
 */
export type ForwardBuilder = (
  g: Graph,
  params: Record<string, Value>,
  batch: Record<string, Value>,
  norms?: Record<string, Value>,
) => ForwardResult;

export interface TrainingGraphSpec {
  params: readonly ParamSpec[];
  /**
   * Inputs the forward reads but that are not trained: no gradient, no optimizer moments, no
   * output (a LoRA adapter's frozen base weights). Trainer.step takes them in its batch record,
   * unstacked, and feeds them as they are on every run.
   */
  frozen?: readonly { name: string; shape: readonly number[] }[];
  batch: readonly BatchSpec[];
  forward: ForwardBuilder;
  /**
   * The loss's denominators over one whole optimizer step (a sum of token weights, a number of
   * sequences), computed from the step's batch inputs. An accumulation graph reads a step as
   * micro-batches stacked on a leading axis: it calls this once on the stacked inputs (so it must
   * reduce over every leading axis) and hands the results to each micro-batch's forward, whose
   * loss and metrics are then sums over that micro-batch divided by the step-wide denominators.
   * The micro-batches' losses, metrics and gradients then add up to the whole step's. A spec
   * without it can only be accumulated if its loss is already a plain sum over rows.
   */
  normalisers?: (g: Graph, batch: Record<string, Value>) => Record<string, Value>;
  /** Names of the scalar metrics `forward` returns (fixed so outputs are known before building). */
  metricNames?: readonly string[];
  /** Parameter dtype (float64 is for gradient tests). Default float32. */
  dtype?: 'float32' | 'float64';
  /** Optimizer steps per run(): 1 = a plain graph, K > 1 = an ONNX Loop of K steps. */
  steps?: number;
  /** With steps > 1: each batch input carries a leading axis of K minibatches, one per step. */
  batchPerStep?: boolean;
  /**
   * With steps > 1: the `lr` input is [K], step k of the Loop using lr[k] (a per-step schedule
   * such as warm-up then cosine decay). Otherwise `lr` is a scalar shared by every step.
   */
  lrPerStep?: boolean;
}

/** Input and output names of a training graph. */
export const TRAIN_IO = {
  m: (p: string) => `${p}.adam_m`,
  v: (p: string) => `${p}.adam_v`,
  next: (name: string) => `${name}.next`,
  metric: (k: string) => `metric.${k}`,
  hyper: ['lr', 'beta1', 'beta2', 'eps', 'weight_decay', 'max_grad_norm'] as const,
  step: 'step',
};

export type HyperName = (typeof TRAIN_IO.hyper)[number];
export type Hyperparameters = Record<HyperName, number>;

export const DEFAULT_HYPER: Hyperparameters = { lr: 1e-3, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.01, max_grad_norm: 1.0 };

/** Hyperparameters for one run: `lr` may give one rate per step (length `steps`). */
export type StepHyperparameters = Partial<Omit<Hyperparameters, 'lr'>> & { lr?: number | readonly number[] };

/**
 * Builds the training graph. Inputs: every param, its AdamW moments (`<p>.adam_m`, `<p>.adam_v`),
 * `step` (updates done so far, scalar), the hyperparameters (scalars) and the batch.
 * Outputs: `<p>.next`, `<p>.adam_m.next`, `<p>.adam_v.next`, `step.next`, and `metric.loss`,
 * `metric.grad_norm` and `metric.<k>` per forward metric: scalars for steps = 1, `[K]` for a Loop.
 */
export function buildTrainingGraph(spec: TrainingGraphSpec): Graph {
  const dtype = spec.dtype ?? 'float32';
  const K = spec.steps ?? 1;
  if (!Number.isInteger(K) || K < 1)
    throw new TurnwiseError('invalid-input', `training steps per run must be a positive integer, got ${K}`);
  checkNames(spec);
  const g = Graph.create(K > 1 ? `train_loop_${K}` : 'train_step');
  const params = spec.params.map((p) => g.input(p.name, dtype, p.shape));
  const frozen = Object.fromEntries((spec.frozen ?? []).map((p) => [p.name, g.input(p.name, dtype, p.shape)]));
  const ms = spec.params.map((p) => g.input(TRAIN_IO.m(p.name), dtype, p.shape));
  const vs = spec.params.map((p) => g.input(TRAIN_IO.v(p.name), dtype, p.shape));
  const step = g.input(TRAIN_IO.step, dtype, []);
  const lrStacked = K > 1 && !!spec.lrPerStep;
  const hp = Object.fromEntries(TRAIN_IO.hyper.map((h) => [h, g.input(h, dtype, h === 'lr' && lrStacked ? [K] : [])])) as Record<
    HyperName,
    Value
  >;
  const stacked = K > 1 && !!spec.batchPerStep;
  const batchIn = spec.batch.map((b) => g.input(b.name, b.dtype, stacked && !b.shared ? [K, ...b.shape] : b.shape));
  const decay = spec.params.map((p) => p.decay ?? p.shape.length >= 2);
  const metricNames = ['loss', 'grad_norm', ...(spec.metricNames ?? [])];

  // One optimizer step inside graph `b`, from state values visible in `b`.
  const oneStep = (b: Graph, p: Value[], m: Value[], v: Value[], s: Value, batch: Value[], hps = hp) => {
    const named = { ...frozen, ...Object.fromEntries(spec.params.map((ps, i) => [ps.name, p[i]])) };
    const namedBatch = Object.fromEntries(spec.batch.map((bs, i) => [bs.name, batch[i]]));
    const fwd = b.scope('fwd', () => spec.forward(b, named, namedBatch));
    if (fwd.loss.rank !== 0) throw new TurnwiseError('internal', `training graph: the loss must be a scalar, got ${fwd.loss}`);
    const grads = b.scope('bwd', () => gradients(b, fwd.loss, p));
    const { norm, upd } = b.scope('opt', () => optimizerStep(b, p, grads, m, v, s, hps, decay));
    const extra = fwd.metrics ?? {};
    for (const k of Object.keys(extra))
      if (!metricNames.includes(k)) throw new TurnwiseError('internal', `training graph: metric ${k} is not listed in metricNames`);
    const metrics = metricNames.map((k) => {
      const val = k === 'loss' ? fwd.loss : k === 'grad_norm' ? norm : extra[k];
      if (!val) throw new TurnwiseError('internal', `training graph: forward did not return metric ${k}`);
      if (val.rank !== 0) throw new TurnwiseError('internal', `training graph: metric ${k} must be a scalar, got ${val}`);
      return val.dtype === dtype ? val : b.cast(val, dtype);
    });
    return { ...upd, metrics };
  };

  let result: { params: Value[]; m: Value[]; v: Value[]; step: Value; metrics: Value[] };
  if (K === 1) result = oneStep(g, params, ms, vs, step, batchIn);
  else {
    const n = params.length;
    const loop = g.loop(K, [...params, ...ms, ...vs, step], (b, iter, c) => {
      const batch = stacked ? batchIn.map((x, i) => (spec.batch[i].shared ? x : b.gather(x, iter, 0))) : batchIn;
      const hps = lrStacked ? { ...hp, lr: b.gather(hp.lr, iter, 0) } : hp;
      const r = oneStep(b, c.slice(0, n), c.slice(n, 2 * n), c.slice(2 * n, 3 * n), c[3 * n], batch, hps);
      return { carried: [...r.params, ...r.m, ...r.v, r.step], scan: r.metrics };
    });
    const c = loop.carried;
    result = { params: c.slice(0, n), m: c.slice(n, 2 * n), v: c.slice(2 * n, 3 * n), step: c[3 * n], metrics: loop.scan };
  }
  spec.params.forEach((p, i) => {
    g.output(result.params[i], TRAIN_IO.next(p.name));
    g.output(result.m[i], TRAIN_IO.next(TRAIN_IO.m(p.name)));
    g.output(result.v[i], TRAIN_IO.next(TRAIN_IO.v(p.name)));
  });
  g.output(result.step, TRAIN_IO.next(TRAIN_IO.step));
  metricNames.forEach((k, i) => g.output(result.metrics[i], TRAIN_IO.metric(k)));
  return g;
}

function checkNames(spec: Omit<TrainingGraphSpec, 'steps'>): void {
  const seen = new Set<string>();
  for (const n of [
    ...spec.params.map((p) => p.name),
    ...(spec.frozen ?? []).map((p) => p.name),
    ...spec.batch.map((b) => b.name),
    ...TRAIN_IO.hyper,
    TRAIN_IO.step,
  ]) {
    if (seen.has(n))
      throw new TurnwiseError('invalid-input', `training graph: name ${n} is used twice`, { hint: 'rename the batch input or parameter' });
    seen.add(n);
  }
}

/** Whether an accumulation graph feeds this batch input once per micro-batch (stacked) or once per step. */
export function isMicroBatched(b: BatchSpec): boolean {
  return !b.shared && b.shape.length > 0;
}

/** Output name of a parameter's accumulated gradient (only with `outputGradients`). */
export const gradOutput = (p: string) => `${p}.grad`;

/**
 * One optimizer step over micro-batches: the step's batch inputs carry a leading axis of M
 * micro-batches (any M at run time; scalars and `shared` inputs are fed once). An ONNX Loop runs
 * the forward and backward pass of one micro-batch per iteration and adds its gradients and
 * metrics to loop-carried sums; then global-norm clipping and AdamW update the parameters once
 * from the summed gradient. Each iteration's activations are freed before the next, so a step's
 * memory is that of one micro-batch whatever M is. With `spec.normalisers` the loss's
 * denominators are the whole step's, so the update equals the one-batch update of the same rows
 * to float rounding. Inputs and outputs as buildTrainingGraph with steps = 1 (metrics are sums
 * over the micro-batches: the step's values); `outputGradients` adds `<p>.grad`, the summed
 * gradient before clipping.
 */
export function buildAccumulationGraph(
  spec: Omit<TrainingGraphSpec, 'steps' | 'batchPerStep' | 'lrPerStep'>,
  opts: { outputGradients?: boolean } = {},
): Graph {
  const dtype = spec.dtype ?? 'float32';
  checkNames(spec);
  const stackedSpec = spec.batch.find(isMicroBatched);
  if (!stackedSpec)
    throw new TurnwiseError(
      'invalid-input',
      'an accumulation graph needs at least one per-example batch input to split into micro-batches',
    );
  const g = Graph.create('train_accumulate');
  const params = spec.params.map((p) => g.input(p.name, dtype, p.shape));
  const frozen = Object.fromEntries((spec.frozen ?? []).map((p) => [p.name, g.input(p.name, dtype, p.shape)]));
  const ms = spec.params.map((p) => g.input(TRAIN_IO.m(p.name), dtype, p.shape));
  const vs = spec.params.map((p) => g.input(TRAIN_IO.v(p.name), dtype, p.shape));
  const step = g.input(TRAIN_IO.step, dtype, []);
  const hp = Object.fromEntries(TRAIN_IO.hyper.map((h) => [h, g.input(h, dtype, [])])) as Record<HyperName, Value>;
  const micro = g.freshDim();
  const batchIn = spec.batch.map((b) => g.input(b.name, b.dtype, isMicroBatched(b) ? [micro, ...b.shape] : b.shape));
  const stackedBatch = Object.fromEntries(spec.batch.map((bs, i) => [bs.name, batchIn[i]]));
  const norms = spec.normalisers ? g.scope('norms', () => spec.normalisers!(g, stackedBatch)) : undefined;
  const decay = spec.params.map((p) => p.decay ?? p.shape.length >= 2);
  const metricNames = ['loss', ...(spec.metricNames ?? [])];
  const first = batchIn[spec.batch.indexOf(stackedSpec)];
  const trips = g.gather(g.shapeOf(first), g.scalar(0, 'int64'), 0);
  // The sums start from the first micro-batch's values (a Where on the iteration number), not from
  // zeros: a zero tensor of every parameter's shape would be constant-folded into the model.
  const init = [...params, ...metricNames.map(() => g.scalar(0, dtype))];
  const loop = g.loop(trips, init, (b, iter, c) => {
    const firstIter = b.equal(iter, b.scalar(0, 'int64'));
    const add = (acc: Value, x: Value) => b.where(firstIter, x, b.add(acc, x));
    const namedBatch = Object.fromEntries(
      spec.batch.map((bs, i) => [bs.name, isMicroBatched(bs) ? b.gather(batchIn[i], iter, 0) : batchIn[i]]),
    );
    const named = { ...frozen, ...Object.fromEntries(spec.params.map((ps, i) => [ps.name, params[i]])) };
    const fwd = b.scope('fwd', () => spec.forward(b, named, namedBatch, norms));
    if (fwd.loss.rank !== 0) throw new TurnwiseError('internal', `training graph: the loss must be a scalar, got ${fwd.loss}`);
    const grads = b.scope('bwd', () => gradients(b, fwd.loss, params));
    const extra = fwd.metrics ?? {};
    for (const k of Object.keys(extra))
      if (!metricNames.includes(k)) throw new TurnwiseError('internal', `training graph: metric ${k} is not listed in metricNames`);
    const metrics = metricNames.map((k) => {
      const val = k === 'loss' ? fwd.loss : extra[k];
      if (!val) throw new TurnwiseError('internal', `training graph: forward did not return metric ${k}`);
      if (val.rank !== 0) throw new TurnwiseError('internal', `training graph: metric ${k} must be a scalar, got ${val}`);
      return val.dtype === dtype ? val : b.cast(val, dtype);
    });
    const n = params.length;
    return { carried: [...grads.map((d, i) => add(c[i], d)), ...metrics.map((m, i) => add(c[n + i], m))] };
  });
  const n = params.length;
  const summed = loop.carried.slice(0, n);
  const { norm, upd } = g.scope('opt', () => optimizerStep(g, params, summed, ms, vs, step, hp, decay));
  spec.params.forEach((p, i) => {
    g.output(upd.params[i], TRAIN_IO.next(p.name));
    g.output(upd.m[i], TRAIN_IO.next(TRAIN_IO.m(p.name)));
    g.output(upd.v[i], TRAIN_IO.next(TRAIN_IO.v(p.name)));
    if (opts.outputGradients) g.output(summed[i], gradOutput(p.name));
  });
  g.output(upd.step, TRAIN_IO.next(TRAIN_IO.step));
  g.output(loop.carried[n], TRAIN_IO.metric('loss'));
  g.output(norm, TRAIN_IO.metric('grad_norm'));
  metricNames.slice(1).forEach((k, i) => g.output(loop.carried[n + 1 + i], TRAIN_IO.metric(k)));
  return g;
}

/** Parameters with fewer elements than this share one packed optimizer update per weight-decay group. */
export const PACK_BELOW = 16384;

/**
 * Most tensors in one pack. A pack is one Concat of its members and one Split back: a node with
 * n inputs or outputs binds n + 1 storage buffers in a WebGPU shader, and WebGPU guarantees only
 * 8 per shader stage (maxStorageBuffersPerShaderStage; adapters commonly offer 8-16). Found on
 * Mesa's lavapipe (16): a Split into 16 failed at run time.
 */
export const PACK_MAX = 7;

/**
 * Global-norm clipping and AdamW over all parameters. Small tensors (biases, norm gains) of the
 * same decay group are first concatenated into one 1-D tensor: one set of a dozen elementwise
 * nodes for all of them instead of a set per tensor, where per-node dispatch dominates the work
 * (turnwise-tiny: 29 tensors of 128–256 values, ~370 nodes fewer). Large tensors stay separate:
 * each stays in cache across its passes.
 */
function optimizerStep(
  b: Graph,
  p: readonly Value[],
  grads: readonly Value[],
  m: readonly Value[],
  v: readonly Value[],
  step: Value,
  hp: Record<HyperName, Value>,
  decay: readonly boolean[],
): { norm: Value; upd: { params: Value[]; m: Value[]; v: Value[]; step: Value } } {
  const packs: number[][] = [];
  for (const dec of [true, false]) {
    const idx = p.map((_, i) => i).filter((i) => decay[i] === dec && (staticSize(p[i].shape) ?? PACK_BELOW) < PACK_BELOW);
    for (let at = 0; at < idx.length; at += PACK_MAX) {
      const pack = idx.slice(at, at + PACK_MAX);
      if (pack.length >= 2) packs.push(pack);
    }
  }
  const packed = new Set(packs.flat());
  const singles = p.map((_, i) => i).filter((i) => !packed.has(i));
  const flat = (x: Value) => (x.rank === 1 ? x : b.reshape(x, [-1]));
  const unit = (xs: readonly Value[]) => [
    ...singles.map((i) => xs[i]),
    ...packs.map((idx) =>
      b.concat(
        idx.map((i) => flat(xs[i])),
        0,
      ),
    ),
  ];
  const uGrads = unit(grads);
  const { norm, scale } = clipCoefficient(b, uGrads, hp.max_grad_norm);
  const uDecay = [...singles.map((i) => decay[i]), ...packs.map((idx) => decay[idx[0]])];
  const u = adamwStep(
    b,
    unit(p),
    uGrads,
    unit(m),
    unit(v),
    step,
    { lr: hp.lr, beta1: hp.beta1, beta2: hp.beta2, eps: hp.eps, weightDecay: hp.weight_decay },
    uDecay,
    scale,
  );
  const unpack = (us: Value[]) => {
    const out: Value[] = new Array(p.length);
    singles.forEach((i, k) => (out[i] = us[k]));
    packs.forEach((idx, k) => {
      const parts = b.split(
        us[singles.length + k],
        idx.map((i) => staticSize(p[i].shape)!),
        0,
      );
      idx.forEach((i, j) => (out[i] = p[i].rank === 1 ? parts[j] : b.reshape(parts[j], p[i].shape as number[])));
    });
    return out;
  };
  return { norm, upd: { params: unpack(u.params), m: unpack(u.m), v: unpack(u.v), step: u.step } };
}

/** Parameters and AdamW state held on the host between runs. */
export interface TrainState {
  params: Record<string, Float32Array | Float64Array>;
  m: Record<string, Float32Array | Float64Array>;
  v: Record<string, Float32Array | Float64Array>;
  /** Updates done so far. */
  step: number;
  /**
   * The AdamW moments on the device (a Trainer that keeps them, on a provider that keeps tensors),
   * by feed name (TRAIN_IO.m / TRAIN_IO.v of each parameter): the next step reads them there. Then
   * `m` and `v` hold what hostMoments last read back (empty before): read them through it.
   */
  deviceMoments?: Record<string, ort.Tensor>;
}

/**
 * The state with its device moments read back into `m` and `v` (the device copies stay the
 * moments the next step reads); the state itself when it has none.
 */
export async function hostMoments(state: TrainState): Promise<TrainState> {
  if (!state.deviceMoments) return state;
  const m: TrainState['m'] = {};
  const v: TrainState['v'] = {};
  for (const [name, t] of Object.entries(state.deviceMoments)) {
    const host = (await downloadTensor(t)).data as Float32Array | Float64Array;
    const [M, V] = [TRAIN_IO.m(''), TRAIN_IO.v('')];
    if (name.endsWith(M)) m[name.slice(0, -M.length)] = host;
    else if (name.endsWith(V)) v[name.slice(0, -V.length)] = host;
  }
  return { ...state, m, v };
}

/** Frees a state's device moments (a state no step will read again). */
export function disposeDeviceMoments(state: TrainState): void {
  for (const t of Object.values(state.deviceMoments ?? {})) t.dispose();
}

/** Fresh AdamW state (zero moments, step 0) for the given parameter values. */
export function initTrainState(params: Record<string, Float32Array | Float64Array>): TrainState {
  const zeros = (a: Float32Array | Float64Array) => (a instanceof Float64Array ? new Float64Array(a.length) : new Float32Array(a.length));
  return {
    params: { ...params },
    m: Object.fromEntries(Object.entries(params).map(([k, a]) => [k, zeros(a)])),
    v: Object.fromEntries(Object.entries(params).map(([k, a]) => [k, zeros(a)])),
    step: 0,
  };
}

const specIds = new WeakMap<object, number>();
let nextSpecId = 0;
function specId(spec: object): number {
  let id = specIds.get(spec);
  if (id === undefined) specIds.set(spec, (id = ++nextSpecId));
  return id;
}

/**
 * Runs training graphs. Sessions are built once per (key, steps) and reused; `key` names the shape
 * class (the caller's choice, e.g. `tiny|ppo-token|seq512`). Batch dims may vary between calls
 * where the graph declares them symbolic.
 */
export class Trainer {
  private readonly cache: SessionCache;
  constructor(
    readonly spec: Omit<TrainingGraphSpec, 'steps'>,
    readonly key: string,
    settings: SessionSettings = {},
    cache?: SessionCache,
    /**
     * On a provider that keeps tensors (KEEPING_PROVIDERS): leave the AdamW moments on the device
     * between steps (TrainState.deviceMoments). A step then consumes its state's device moments:
     * the caller steps each state once and reads the moments through hostMoments.
     */
    private readonly keepMoments = false,
  ) {
    this.cache = cache ?? new SessionCache(settings);
  }

  /** The outputs a step leaves on the device when it keeps the moments. */
  private deviceOutputs(): string[] {
    return this.keepMoments ? this.spec.params.flatMap((p) => [TRAIN_IO.next(TRAIN_IO.m(p.name)), TRAIN_IO.next(TRAIN_IO.v(p.name))]) : [];
  }

  /** The accumulation graph's session (buildAccumulationGraph): one step over any number of micro-batches. */
  accumulationSession(): Promise<OnnxSession> {
    return this.cache.get(
      `${this.key}|spec${specId(this.spec)}|accumulate|${this.spec.dtype ?? 'float32'}${this.keepMoments ? '|keep' : ''}`,
      () => toModelProto(buildAccumulationGraph(this.spec)),
      this.deviceOutputs(),
    );
  }

  session(steps = 1): Promise<OnnxSession> {
    // The spec's identity is part of the key: two Trainers given the same key (a caller's slip) but
    // different specs sharing one cache must never run each other's graphs.
    return this.cache.get(
      `${this.key}|spec${specId(this.spec)}|K=${steps}|${this.spec.batchPerStep ? 'stacked' : 'same'}|${this.spec.dtype ?? 'float32'}${this.keepMoments ? '|keep' : ''}`,
      () => toModelProto(buildTrainingGraph({ ...this.spec, steps })),
      this.deviceOutputs(),
    );
  }

  /**
   * `steps` optimizer updates (one run). Returns the new state and metrics per step
   * (arrays of length `steps`). `state` is not modified.
   */
  async step(
    state: TrainState,
    batch: Record<string, HostTensor>,
    hyper: StepHyperparameters = {},
    steps = 1,
  ): Promise<{ state: TrainState; metrics: Record<string, number[]> }> {
    return this.runStep(await this.session(steps), state, batch, hyper, steps);
  }

  /**
   * One optimizer update from micro-batches (buildAccumulationGraph): every per-example batch
   * input carries a leading axis of micro-batches, scalars and shared inputs are fed as they are.
   * Same result shape as step() with steps = 1.
   */
  async accumulatedStep(
    state: TrainState,
    batch: Record<string, HostTensor>,
    hyper: StepHyperparameters = {},
  ): Promise<{ state: TrainState; metrics: Record<string, number[]> }> {
    return this.runStep(await this.accumulationSession(), state, batch, hyper, 1);
  }

  private async runStep(
    s: OnnxSession,
    state: TrainState,
    batch: Record<string, HostTensor>,
    hyper: StepHyperparameters,
    steps: number,
  ): Promise<{ state: TrainState; metrics: Record<string, number[]> }> {
    const dtype = this.spec.dtype ?? 'float32';
    const { lr, ...rest } = hyper;
    const h = { ...DEFAULT_HYPER, ...rest };
    const lrs =
      typeof lr === 'number'
        ? new Array<number>(steps).fill(lr)
        : lr === undefined
          ? new Array<number>(steps).fill(DEFAULT_HYPER.lr)
          : Array.from(lr);
    if (lrs.length !== steps)
      throw new TurnwiseError('invalid-input', `got ${lrs.length} learning rates for ${steps} steps`, {
        hint: 'pass one rate, or one per step',
      });
    const lrPerStep = steps > 1 && !!this.spec.lrPerStep;
    if (!lrPerStep && lrs.some((x) => x !== lrs[0])) {
      throw new TurnwiseError('invalid-input', 'this training graph takes one learning rate for all its steps', {
        hint: 'build it with lrPerStep, or run the steps separately',
      });
    }
    const feeds: Record<string, HostTensor | ort.Tensor> = { ...batch };
    const scalar = (x: number): HostTensor => ({ dtype, dims: [], data: makeData(dtype, [x]) });
    for (const p of this.spec.params) {
      const get = (rec: Record<string, Float32Array | Float64Array>, what: string) => {
        const a = rec[p.name];
        if (!a) throw new TurnwiseError('invalid-input', `training state has no ${what} for parameter ${p.name}`);
        const n = p.shape.reduce((x, y) => x * y, 1);
        if (a.length !== n)
          throw new TurnwiseError('invalid-input', `${what} of ${p.name} has ${a.length} values, expected ${n} (shape [${p.shape}])`);
        const want = dtype === 'float64' ? Float64Array : Float32Array;
        if (!(a instanceof want)) {
          throw new TurnwiseError('invalid-input', `${what} of ${p.name} is a ${a.constructor.name}, but this training graph is ${dtype}`, {
            hint: `pass ${want.name}s (convert with ${want.name}.from(values))`,
          });
        }
        return { dtype, dims: p.shape, data: a } as HostTensor;
      };
      feeds[p.name] = get(state.params, 'values');
      const [m, v] = [TRAIN_IO.m(p.name), TRAIN_IO.v(p.name)];
      const dm = state.deviceMoments?.[m];
      const dv = state.deviceMoments?.[v];
      feeds[m] = dm ?? get(state.m, 'first moment');
      feeds[v] = dv ?? get(state.v, 'second moment');
    }
    feeds[TRAIN_IO.step] = scalar(state.step);
    for (const k of TRAIN_IO.hyper)
      feeds[k] = k !== 'lr' ? scalar(h[k]) : lrPerStep ? { dtype, dims: [steps], data: makeData(dtype, lrs) } : scalar(lrs[0]);
    const { host: out, device } = await s.runKeeping(feeds);
    const next: TrainState = { params: {}, m: {}, v: {}, step: Number((out[TRAIN_IO.next(TRAIN_IO.step)].data as Float32Array)[0]) };
    const kept = Object.keys(device).length > 0;
    if (kept) next.deviceMoments = {};
    for (const p of this.spec.params) {
      next.params[p.name] = out[TRAIN_IO.next(p.name)].data as Float32Array;
      for (const [name, rec] of [
        [TRAIN_IO.m(p.name), next.m],
        [TRAIN_IO.v(p.name), next.v],
      ] as const) {
        if (kept) next.deviceMoments![name] = device[TRAIN_IO.next(name)];
        else rec[p.name] = out[TRAIN_IO.next(name)].data as Float32Array;
      }
    }
    // The moments this step read on the device are replaced by the ones it wrote.
    disposeDeviceMoments(state);
    const metrics: Record<string, number[]> = {};
    for (const k of ['loss', 'grad_norm', ...(this.spec.metricNames ?? [])])
      metrics[k] = Array.from(out[TRAIN_IO.metric(k)].data as Float32Array, Number);
    return { state: next, metrics };
  }

  release(): Promise<void> {
    return this.cache.clear();
  }
}

/**
 * Times K optimizer steps as one Loop run against K separate runs on the same batch (after a
 * warm-up of each). Returns `loop_speedup` = separate / loop (the `bench train` field).
 */
export async function measureLoopSpeedup(
  trainer: Trainer,
  state: TrainState,
  batch: Record<string, HostTensor>,
  opts: { k?: number; repeats?: number; hyper?: Partial<Hyperparameters> } = {},
): Promise<{ loop_speedup: number; k: number; separate_ms: number; loop_ms: number }> {
  const k = opts.k ?? 8;
  const repeats = opts.repeats ?? 3;
  if (trainer.spec.batchPerStep)
    throw new TurnwiseError('invalid-input', 'measureLoopSpeedup needs a trainer without batchPerStep (the same batch every step)');
  await trainer.step(state, batch, opts.hyper, 1);
  await trainer.step(state, batch, opts.hyper, k);
  let separate = Infinity;
  let loop = Infinity;
  for (let r = 0; r < repeats; r++) {
    let t0 = performance.now();
    let s = state;
    for (let i = 0; i < k; i++) s = (await trainer.step(s, batch, opts.hyper, 1)).state;
    separate = Math.min(separate, performance.now() - t0);
    t0 = performance.now();
    await trainer.step(state, batch, opts.hyper, k);
    loop = Math.min(loop, performance.now() - t0);
  }
  return { loop_speedup: separate / loop, k, separate_ms: separate, loop_ms: loop };
}
