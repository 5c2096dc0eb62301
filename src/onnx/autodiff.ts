// Reverse-mode autodiff over a Graph: appends the backward pass as standard ONNX ops, so one
// training graph runs on every execution provider. Broadcast axes are known at build time.
import { TurnwiseError } from '../core/errors';
import { CUSTOM_GRADIENT, Graph, NodeDef, STOP_GRADIENT, Value, isFloat, normAxis, staticSize } from './graph';

/** Gradient rule: output grads (null where none flows) -> input grads (null where not needed). */
type Rule = (g: Graph, n: NodeDef, dy: (Value | null)[], need: boolean[]) => (Value | null)[];

function unsupported(msg: string): never {
  throw new TurnwiseError('internal', `autodiff: ${msg}`, {
    hint: 'add a gradient rule in src/onnx/autodiff.ts or avoid the op on a differentiable path',
  });
}

/** A runtime int64 shape of `x`: a constant when static, else a Shape node. */
export function shapeTensor(g: Graph, x: Value): Value {
  return staticSize(x.shape) !== undefined ? g.ints(x.shape as number[]) : g.shapeOf(x);
}

/** Sums `dy` (shaped like a broadcast result) down to the shape of `target`. */
export function unbroadcast(g: Graph, dy: Value, target: Value): Value {
  const lead = dy.rank - target.rank;
  if (lead < 0) unsupported(`gradient ${dy} has lower rank than ${target}`);
  const axes: number[] = [];
  for (let i = 0; i < lead; i++) axes.push(i);
  const inner: number[] = [];
  target.shape.forEach((d, i) => {
    if (d === 1 && dy.shape[i + lead] !== 1) inner.push(i + lead);
  });
  if (!axes.length && !inner.length) return dy;
  if (!inner.length) return g.reduceSum(dy, axes, false);
  if (!axes.length) return g.reduceSum(dy, inner, true);
  return g.reshape(g.reduceSum(dy, [...axes, ...inner], true), shapeTensor(g, target), target.shape);
}

function axesOf(g: Graph, n: NodeDef, rank: number): number[] | undefined {
  let ax: number[] | undefined;
  if (n.op === 'ReduceSum' || n.op === 'Squeeze' || n.op === 'Unsqueeze') {
    if (!n.inputs[1]) return undefined;
    ax = g.constNumbers(n.inputs[1]);
    if (!ax) unsupported(`${n.op} with computed axes`);
  } else ax = n.attrs.axes as number[] | undefined;
  return ax?.map((a) => (a < 0 ? a + rank : a));
}

/** dy of a reduction, reshaped so it broadcasts against the input (keepdims form). */
function keepDims(g: Graph, n: NodeDef, dy: Value): { dyk: Value; axes: number[] } {
  const x = n.inputs[0]!;
  const axes = axesOf(g, n, x.rank) ?? x.shape.map((_, i) => i);
  const keep = n.attrs.keepdims === undefined ? true : n.attrs.keepdims === 1;
  if (keep) return { dyk: dy, axes };
  return { dyk: g.unsqueeze(dy, axes), axes };
}

function expandTo(g: Graph, v: Value, x: Value): Value {
  return g.expand(v, shapeTensor(g, x), x.shape);
}

/** Number of reduced elements as a scalar of x's dtype (constant when static). */
function reducedCount(g: Graph, x: Value, axes: number[]): Value {
  const dims = axes.map((a) => x.shape[a]);
  const s = staticSize(dims);
  if (s !== undefined) return g.scalar(s, x);
  const sizes = g.gather(g.shapeOf(x), g.ints(axes), 0);
  return g.cast(g.reduceProd(sizes, [0], false), x.dtype);
}

function transposeLast2(g: Graph, x: Value): Value {
  const perm = x.shape.map((_, i) => i);
  [perm[x.rank - 2], perm[x.rank - 1]] = [perm[x.rank - 1], perm[x.rank - 2]];
  return g.transpose(x, perm);
}

/** Pads built by the Slice rule: slices that tile an axis get their gradient by one Concat instead. */
const sliceGrads = new WeakMap<Value, { dy: Value; axis: number; begin: number; len: number }>();

/**
 * Contributions where the padded slice gradients among them exactly tile one axis are merged into
 * one Concat (the other contributions are kept); undefined when there is nothing to merge.
 */
function mergeSliceGrads(g: Graph, target: Value, parts: Value[]): Value[] | undefined {
  const padded = parts.filter((p) => sliceGrads.has(p));
  if (padded.length < 2) return undefined;
  const ms = padded.map((p) => sliceGrads.get(p)!).sort((a, b) => a.begin - b.begin);
  const axis = ms[0].axis;
  let at = 0;
  for (const m of ms) {
    if (m.axis !== axis || m.begin !== at) return undefined;
    at += m.len;
  }
  if (at !== target.shape[axis]) return undefined;
  for (const p of padded) if (p.producer) g.dropUnusedNode(p.producer);
  return [
    g.concat(
      ms.map((m) => m.dy),
      axis,
    ),
    ...parts.filter((p) => !sliceGrads.has(p)),
  ];
}

/** A rank-2 Transpose's perm that swaps the two axes (given as [1, 0], or left out). */
function isSwap(perm: unknown): boolean {
  return perm === undefined || (Array.isArray(perm) && perm.length === 2 && perm[0] === 1 && perm[1] === 0);
}

const RULES: Record<string, Rule> = {
  Identity: (_g, _n, [dy]) => [dy],
  Add: (g, n, [dy], need) => [need[0] ? unbroadcast(g, dy!, n.inputs[0]!) : null, need[1] ? unbroadcast(g, dy!, n.inputs[1]!) : null],
  Sub: (g, n, [dy], need) => [
    need[0] ? unbroadcast(g, dy!, n.inputs[0]!) : null,
    need[1] ? g.neg(unbroadcast(g, dy!, n.inputs[1]!)) : null,
  ],
  Mul: (g, n, [dy], need) => {
    const [a, b] = n.inputs as Value[];
    const silu = siluGrad(g, n, dy!);
    if (silu) return silu;
    return [need[0] ? unbroadcast(g, g.mul(dy!, b), a) : null, need[1] ? unbroadcast(g, g.mul(dy!, a), b) : null];
  },
  Div: (g, n, [dy], need) => {
    const [a, b] = n.inputs as Value[];
    const y = n.outputs[0];
    const da = need[0] || need[1] ? g.div(dy!, b) : null;
    return [need[0] ? unbroadcast(g, da!, a) : null, need[1] ? g.neg(unbroadcast(g, g.mul(da!, y), b)) : null];
  },
  Neg: (g, _n, [dy]) => [g.neg(dy!)],
  Pow: (g, n, [dy], need) => {
    const [a, b] = n.inputs as Value[];
    const y = n.outputs[0];
    let da: Value | null = null;
    if (need[0]) {
      const c = g.constNumbers(b);
      if (c && c.length === 1) {
        const e = c[0];
        if (e === 0)
          da = g.mul(dy!, 0); // a^0 is constant; e·a^(e-1) would be 0·inf = NaN at a = 0
        else if (e === 1) da = dy!;
        else if (e === 2) da = g.mul(dy!, g.mul(a, 2));
        else da = g.mul(dy!, g.mul(g.pow(a, e - 1), e));
      } else da = g.mul(dy!, g.where(g.equal(b, 0), 0, g.mul(b, g.pow(a, g.sub(b, 1)))));
      da = unbroadcast(g, da, a);
    }
    // y·log a is 0·(-inf) = NaN at a = 0; PyTorch's value there is 0 for b >= 0 (the right limit).
    const db = need[1] ? unbroadcast(g, g.mul(dy!, g.where(g.and(g.equal(a, 0), g.greaterOrEqual(b, 0)), 0, g.mul(y, g.log(a)))), b) : null;
    return [da, db];
  },
  Sqrt: (g, n, [dy]) => [g.div(dy!, g.mul(n.outputs[0], 2))],
  Exp: (g, n, [dy]) => [g.mul(dy!, n.outputs[0])],
  Log: (g, n, [dy]) => [g.div(dy!, n.inputs[0]!)],
  Reciprocal: (g, n, [dy]) => {
    const y = n.outputs[0];
    return [g.neg(g.mul(dy!, g.mul(y, y)))];
  },
  Sigmoid: (g, n, [dy]) => {
    const y = n.outputs[0];
    return [g.mul(dy!, g.mul(y, g.sub(1, y)))];
  },
  Tanh: (g, n, [dy]) => {
    const y = n.outputs[0];
    return [g.mul(dy!, g.sub(1, g.mul(y, y)))];
  },
  Relu: (g, n, [dy]) => [g.where(g.greater(n.outputs[0], 0), dy!, 0)],
  Abs: (g, n, [dy]) => [g.mul(dy!, g.node('Sign', [n.inputs[0]])[0])],
  Sin: (g, n, [dy]) => [g.mul(dy!, g.cos(n.inputs[0]!))],
  Cos: (g, n, [dy]) => [g.neg(g.mul(dy!, g.sin(n.inputs[0]!)))],
  Softmax: (g, n, [dy]) => {
    const y = n.outputs[0];
    const axis = (n.attrs.axis as number | undefined) ?? -1;
    const dot = g.reduceSum(g.mul(dy!, y), [axis], true);
    return [g.mul(y, g.sub(dy!, dot))];
  },
  LogSoftmax: (g, n, [dy]) => {
    const y = n.outputs[0];
    const axis = (n.attrs.axis as number | undefined) ?? -1;
    return [g.sub(dy!, g.mul(g.exp(y), g.reduceSum(dy!, [axis], true)))];
  },
  MatMul: (g, n, [dy], need) => {
    const [a, b] = n.inputs as Value[];
    const K = b.shape[0];
    const N = b.shape[1];
    if (b.rank === 2 && typeof K === 'number' && typeof N === 'number') {
      // A[...,M,K] @ W[K,N]: flatten the batch dims and use Gemm's transpose flags (no Transpose nodes).
      const flat = a.rank > 2;
      const a2 = flat && need[1] ? g.reshape(a, [-1, K]) : a;
      const d2 = flat ? g.reshape(dy!, [-1, N]) : dy!;
      let da: Value | null = null;
      if (need[0]) {
        // B = Wᵀ (a linear layer's x·Wᵀ): dA = dY·W reads W itself. The transposed copy then has
        // the forward product as its only consumer and fuses into it (FusedMatMul), instead of
        // being materialized and held from the forward pass to the backward one (a weight-sized
        // buffer per layer).
        const t =
          b.producer?.op === 'Transpose' && b.producer.inputs[0]?.rank === 2 && isSwap(b.producer.attrs.perm)
            ? b.producer.inputs[0]
            : undefined;
        const r = t ? g.gemm(d2, t) : g.gemm(d2, b, { transB: true });
        da = flat ? g.reshape(r, shapeTensor(g, a), a.shape) : r;
      }
      const db = need[1] ? g.gemm(a2, d2, { transA: true }) : null;
      return [da, db];
    }
    return [
      need[0] ? unbroadcast(g, g.matmul(dy!, transposeLast2(g, b)), a) : null,
      need[1] ? unbroadcast(g, g.matmul(transposeLast2(g, a), dy!), b) : null,
    ];
  },
  ReduceSum: (g, n, [dy]) => [expandTo(g, keepDims(g, n, dy!).dyk, n.inputs[0]!)],
  ReduceMean: (g, n, [dy]) => {
    const x = n.inputs[0]!;
    const { dyk, axes } = keepDims(g, n, dy!);
    return [expandTo(g, g.div(dyk, reducedCount(g, x, axes)), x)];
  },
  ReduceSumSquare: (g, n, [dy]) => {
    const x = n.inputs[0]!;
    return [g.mul(x, g.mul(keepDims(g, n, dy!).dyk, 2))];
  },
  ReduceMax: (g, n, dy) => reduceExtremum(g, n, dy[0]!),
  ReduceMin: (g, n, dy) => reduceExtremum(g, n, dy[0]!),
  Reshape: (g, n, [dy]) => {
    const x = n.inputs[0]!;
    return [g.reshape(dy!, shapeTensor(g, x), x.shape)];
  },
  Flatten: (g, n, [dy]) => {
    const x = n.inputs[0]!;
    return [g.reshape(dy!, shapeTensor(g, x), x.shape)];
  },
  Transpose: (g, n, [dy]) => {
    const perm = (n.attrs.perm as number[] | undefined) ?? n.inputs[0]!.shape.map((_, i, s) => s.length - 1 - i);
    const inv: number[] = [];
    perm.forEach((p, i) => (inv[p] = i));
    return [g.transpose(dy!, inv)];
  },
  Unsqueeze: (g, n, [dy]) => [g.squeeze(dy!, axesOf(g, n, n.outputs[0].rank)!)],
  Squeeze: (g, n, [dy]) => {
    const axes = axesOf(g, n, n.inputs[0]!.rank);
    if (!axes) unsupported('Squeeze without axes');
    return [g.unsqueeze(dy!, axes)];
  },
  Expand: (g, n, [dy]) => [unbroadcast(g, dy!, n.inputs[0]!)],
  Cast: (g, n, [dy]) => [isFloat(n.inputs[0]!.dtype) ? g.cast(dy!, n.inputs[0]!.dtype) : null],
  Where: (g, n, [dy], need) => {
    const [c, a, b] = n.inputs as Value[];
    return [null, need[1] ? unbroadcast(g, g.where(c, dy!, 0), a) : null, need[2] ? unbroadcast(g, g.where(c, 0, dy!), b) : null];
  },
  Max: (g, n, dy, need) => minMax(g, n, dy[0]!, need, true),
  Min: (g, n, dy, need) => minMax(g, n, dy[0]!, need, false),
  Clip: (g, n, [dy], need) => {
    if (need[1] || need[2]) unsupported('gradient with respect to Clip bounds');
    const [x, lo, hi] = n.inputs;
    let mask: Value | null = null;
    if (lo) mask = g.greaterOrEqual(x!, lo);
    if (hi) mask = mask ? g.and(mask, g.lessOrEqual(x!, hi)) : g.lessOrEqual(x!, hi);
    return [mask ? g.where(mask, dy!, 0) : dy];
  },
  Gather: (g, n, [dy], need) => {
    if (need[1]) unsupported('gradient with respect to Gather indices');
    const [data, idx] = n.inputs as Value[];
    const axis = normAxis((n.attrs.axis as number | undefined) ?? 0, data.rank);
    if (axis !== 0) unsupported('Gather gradient for axis != 0 (transpose the data so the gathered axis is first)');
    // ScatterND with reduction=add: O(tokens·D), against O(tokens·V·D) for a one-hot MatMul.
    return [g.scatterND(g.zerosLike(data), g.unsqueeze(idx, [-1]), dy!, 'add'), null];
  },
  GatherElements: (g, n, [dy], need) => {
    if (need[1]) unsupported('gradient with respect to GatherElements indices');
    const [data, idx] = n.inputs as Value[];
    return [g.scatterElements(g.zerosLike(data), idx, dy!, n.attrs.axis as number, 'add'), null];
  },
  Concat: (g, n, [dy], need) => {
    const axis = normAxis(n.attrs.axis as number, dy!.rank);
    const sizes = n.inputs.map((x) => x!.shape[axis]);
    if (sizes.every((s): s is number => typeof s === 'number')) {
      const parts = g.split(dy!, sizes, axis);
      return parts.map((p, i) => (need[i] ? p : null));
    }
    // Symbolic sizes: slice at runtime offsets taken from the inputs' shapes.
    const out: (Value | null)[] = [];
    let start: Value = g.ints([0]);
    for (const [i, x] of n.inputs.entries()) {
      const len = g.slice(g.shapeOf(x!), [axis], [axis + 1]);
      const end = g.add(start, len);
      out.push(
        need[i] ? g.node('Slice', [dy, start, end, g.ints([axis])], {}, { outputs: [{ dtype: dy!.dtype, shape: x!.shape }] })[0] : null,
      );
      start = end;
    }
    return out;
  },
  Split: (g, n, dys) => {
    const axis = normAxis((n.attrs.axis as number | undefined) ?? 0, n.inputs[0]!.rank);
    const parts = dys.map((d, i) => d ?? g.zerosLike(n.outputs[i]));
    return [g.concat(parts, axis), null];
  },
  Slice: (g, n, [dy]) => {
    const x = n.inputs[0]!;
    const starts = g.constNumbers(n.inputs[1]);
    const ends = g.constNumbers(n.inputs[2]);
    const axes = n.inputs[3] ? g.constNumbers(n.inputs[3]) : starts?.map((_, i) => i);
    const steps = n.inputs[4] ? g.constNumbers(n.inputs[4]) : undefined;
    if (!starts || !ends || !axes) unsupported('Slice gradient needs constant starts, ends and axes');
    if (steps && steps.some((s) => s !== 1)) unsupported('Slice gradient with steps != 1');
    const before = new Array<number | Value>(x.rank).fill(0);
    const after = new Array<number | Value>(x.rank).fill(0);
    const ax = axes.map((a) => (a < 0 ? a + x.rank : a));
    let dynamic = false;
    ax.forEach((a, i) => {
      const d = x.shape[a];
      const len = dy!.shape[a];
      if (typeof d === 'number' && typeof len === 'number') {
        const s = Math.min(Math.max(starts[i] < 0 ? starts[i] + d : starts[i], 0), d);
        before[a] = s;
        after[a] = d - s - len;
      } else {
        dynamic = true;
        const dimX = g.slice(g.shapeOf(x), [a], [a + 1]);
        const lenY = g.slice(g.shapeOf(dy!), [a], [a + 1]);
        const s = starts[i] >= 0 ? g.ints([starts[i]]) : g.max(g.add(dimX, g.ints([starts[i]])), g.ints([0]));
        before[a] = s;
        after[a] = g.sub(g.sub(dimX, s), lenY);
      }
    });
    const pads = dynamic
      ? g.concat(
          [...before, ...after].map((p) => (typeof p === 'number' ? g.ints([p]) : p)),
          0,
        )
      : g.ints([...before, ...after] as number[]);
    const padded = g.pad(dy!, pads, x.shape, g.scalar(0, dy!));
    if (!dynamic && ax.length === 1)
      sliceGrads.set(padded, { dy: dy!, axis: ax[0], begin: before[ax[0]] as number, len: dy!.shape[ax[0]] as number });
    return [padded, null, null, null, null];
  },
  Trilu: (g, n, [dy], need) => {
    if (need[1]) unsupported('gradient with respect to Trilu k');
    return [g.node('Trilu', n.inputs[1] ? [dy, n.inputs[1]] : [dy], n.attrs)[0], null];
  },
};

/**
 * x·sigmoid(x) (SiLU/swish, the SwiGLU gate) as one unit: dx = dy·(s + y − y·s) with s = sigmoid(x),
 * y = x·s. Four full-size ops instead of the six that the Mul and Sigmoid rules emit apart.
 * The sigmoid gets no gradient of its own from here (other consumers of it still send theirs).
 */
function siluGrad(g: Graph, n: NodeDef, dy: Value): (Value | null)[] | undefined {
  const [a, b] = n.inputs as Value[];
  const isSig = (s: Value, x: Value) =>
    s.producer?.op === 'Sigmoid' &&
    s.producer.inputs[0] === x &&
    s.shape.length === x.shape.length &&
    s.shape.every((d, i) => d === x.shape[i]);
  const xFirst = isSig(b, a);
  if (!xFirst && !isSig(a, b)) return undefined;
  const s = xFirst ? b : a;
  const y = n.outputs[0];
  const dx = unbroadcast(g, g.mul(dy, g.add(s, g.sub(y, g.mul(y, s)))), xFirst ? a : b);
  return xFirst ? [dx, null] : [null, dx];
}

function reduceExtremum(g: Graph, n: NodeDef, dy: Value): (Value | null)[] {
  const x = n.inputs[0]!;
  const keep = n.attrs.keepdims === undefined || n.attrs.keepdims === 1;
  const axes = axesOf(g, n, x.rank);
  const yk = keep ? n.outputs[0] : g.unsqueeze(n.outputs[0], axes ?? x.shape.map((_, i) => i));
  const { dyk } = keepDims(g, n, dy);
  const mask = g.cast(g.equal(x, yk), x.dtype); // ties share the gradient, like PyTorch's amax
  const count = n.op === 'ReduceMax' ? g.reduceSum(mask, axes, true) : g.reduceSum(mask, axes, true);
  return [g.mul(mask, g.div(dyk, count))];
}

function minMax(g: Graph, n: NodeDef, dy: Value, need: boolean[], isMax: boolean): (Value | null)[] {
  if (n.inputs.length !== 2) unsupported(`${n.op} gradient with ${n.inputs.length} inputs`);
  const [a, b] = n.inputs as Value[];
  const pickA = isMax ? g.greaterOrEqual(a, b) : g.lessOrEqual(a, b);
  return [need[0] ? unbroadcast(g, g.where(pickA, dy, 0), a) : null, need[1] ? unbroadcast(g, g.where(pickA, 0, dy), b) : null];
}

/** Ops whose outputs carry no gradient (piecewise constant or index-valued). */
const NO_GRAD = new Set([
  'Sign',
  'Floor',
  'Ceil',
  'Round',
  'Shape',
  'Size',
  'ArgMax',
  'ArgMin',
  'ConstantOfShape',
  'Range',
  'OneHot',
  'NonZero',
  'RandomUniformLike',
  'RandomNormalLike',
]);

/** The ops with a backward rule. */
export const DIFFERENTIABLE_OPS: readonly string[] = Object.keys(RULES).sort();

/**
 * Appends the backward pass of `loss` (a scalar, or any shape when `seed` is given) to `g` and
 * returns d loss / d v for each `wrt` value (zeros where the loss does not depend on v).
 */
export function gradients(g: Graph, loss: Value, wrt: readonly Value[], seed?: Value): Value[] {
  if (!seed && staticSize(loss.shape) !== 1) unsupported(`loss ${loss} is not a scalar; pass a seed gradient`);
  const nodes = g.nodes.slice(); // snapshot: rules append nodes
  const requires = new Set<Value>(wrt);
  for (const n of nodes) {
    if (NO_GRAD.has(n.op) || STOP_GRADIENT.has(n)) continue;
    const ins = CUSTOM_GRADIENT.get(n)?.inputs ?? n.inputs;
    if (ins.some((i) => i && requires.has(i))) for (const o of n.outputs) if (isFloat(o.dtype)) requires.add(o);
  }
  if (!requires.has(loss)) return wrt.map((w) => g.zerosLike(w));
  const contrib = new Map<Value, Value[]>();
  const push = (v: Value, d: Value) => {
    const l = contrib.get(v);
    if (l) l.push(d);
    else contrib.set(v, [d]);
  };
  const total = (v: Value): Value | null => {
    const l = contrib.get(v);
    if (!l || !l.length) return null;
    const merged = l.length > 1 ? mergeSliceGrads(g, v, l) : undefined;
    if (merged) l.splice(0, l.length, ...merged);
    let s = l[0];
    for (let i = 1; i < l.length; i++) s = g.add(s, l[i]);
    contrib.set(v, [s]);
    return s;
  };
  push(loss, seed ?? (loss.rank === 0 ? g.scalar(1, loss) : g.tensor(loss.dtype, loss.shape as number[], [1])));
  for (let k = nodes.length - 1; k >= 0; k--) {
    const n = nodes[k];
    if (!n.outputs.some((o) => contrib.has(o))) continue;
    const custom = CUSTOM_GRADIENT.get(n);
    if (custom) {
      const need = custom.inputs.map((i) => requires.has(i));
      if (!need.some(Boolean)) continue;
      const dxs = custom.rule(
        g,
        n.outputs.map((o) => total(o)),
        need,
      );
      custom.inputs.forEach((x, i) => {
        if (need[i] && dxs[i]) push(x, dxs[i]!);
      });
      continue;
    }
    const need = n.inputs.map((i) => !!i && requires.has(i));
    if (!need.some(Boolean)) continue;
    const rule = RULES[n.op];
    if (!rule) unsupported(`no gradient rule for ${n.op} (node ${n.name})`);
    const dys = n.outputs.map((o) => total(o));
    const dxs = rule(g, n, dys, need);
    n.inputs.forEach((x, i) => {
      const d = dxs[i];
      if (x && need[i] && d) push(x, d);
    });
  }
  return wrt.map((w) => total(w) ?? g.zerosLike(w));
}
