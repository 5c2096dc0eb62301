// A typed ONNX graph builder (opset 17): values carry dtype and a static shape (numbers or
// symbolic names), so autodiff knows broadcast axes at build time and emits no shape ops for them.
import { TurnwiseError } from '../core/errors';

export type DType = 'float32' | 'float64' | 'float16' | 'int64' | 'int32' | 'uint8' | 'bool';
/** A dimension: a number, or a symbolic name ('B', 'T'); names starting with '?' are unknown. */
export type Dim = number | string;
export type Shape = readonly Dim[];

export const OPSET = 17;
export const IR_VERSION = 8;

/** TensorProto.DataType codes. */
export const DTYPE_CODE: Record<DType, number> = { float32: 1, uint8: 2, int32: 6, int64: 7, bool: 9, float16: 10, float64: 11 };

/** float16 tensors hold their IEEE half-precision bit patterns (toFloat16Bits). */
export type TensorData = Float32Array | Float64Array | BigInt64Array | Int32Array | Uint8Array | Uint16Array;

/** A constant tensor (initializer or attribute value). */
export interface ConstTensor {
  dtype: DType;
  dims: number[];
  data: TensorData;
}

/** Attribute values. Plain numbers are INT attributes; wrap floats as `{ f: x }`. */
export type Attr = number | { f: number } | readonly number[] | { floats: readonly number[] } | string | { tensor: ConstTensor } | Graph;

export interface NodeDef {
  op: string;
  domain: string;
  name: string;
  inputs: (Value | null)[];
  outputs: Value[];
  attrs: Record<string, Attr>;
}

/** One SSA value of a graph. */
export class Value {
  constructor(
    readonly graph: Graph,
    /** Mutable only through Graph.output, which renames a computed value instead of copying it. */
    public name: string,
    readonly dtype: DType,
    readonly shape: Shape,
  ) {}
  get rank(): number {
    return this.shape.length;
  }
  /** The producing node (undefined for graph inputs and initializers). */
  producer?: NodeDef;
  toString(): string {
    return `${this.name}: ${this.dtype}[${this.shape.join(',')}]`;
  }
}

export function isFloat(d: DType): boolean {
  return d === 'float32' || d === 'float64';
}

/** Numel of a static shape, or undefined when a dim is symbolic. */
export function staticSize(shape: Shape): number | undefined {
  let n = 1;
  for (const d of shape) {
    if (typeof d !== 'number') return undefined;
    n *= d;
  }
  return n;
}

function bad(message: string): never {
  throw new TurnwiseError('internal', `ONNX graph: ${message}`, { hint: 'this is a bug in the graph that was being built' });
}

/** Numpy broadcasting over dims; distinct symbolic names are assumed equal (never 1). */
export function broadcastShapes(...shapes: Shape[]): Dim[] {
  const rank = Math.max(...shapes.map((s) => s.length));
  const out: Dim[] = [];
  for (let i = 0; i < rank; i++) {
    let d: Dim = 1;
    for (const s of shapes) {
      const k = i - (rank - s.length);
      if (k < 0) continue;
      const e = s[k];
      if (e === 1) continue;
      if (d === 1) d = e;
      else if (typeof d === 'number' && typeof e === 'number' && d !== e)
        bad(`cannot broadcast [${shapes.map((x) => x.join(',')).join('] and [')}]`);
      else if (typeof d === 'string' && typeof e === 'number') d = e;
    }
    out.push(d);
  }
  return out;
}

/** An ONNX axis (negative counts from the end) as an index in [0, rank); out of range is an error. */
export function normAxis(axis: number, rank: number): number {
  const a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) bad(`axis ${axis} out of range for rank ${rank}`);
  return a;
}

/** Identity nodes made by Graph.stopGradient: autodiff passes no gradient through them. */
export const STOP_GRADIENT = new WeakSet<NodeDef>();

/**
 * Nodes whose backward pass is given instead of derived: the node's outputs depend on `inputs`
 * (values it may read from an enclosing scope, as a Loop's body does, rather than as node
 * inputs), and `rule` builds the gradients of `inputs` from those of the outputs (null where an
 * output receives none, or an input is not needed). gradients() uses it in place of the op's rule.
 */
export const CUSTOM_GRADIENT = new WeakMap<
  NodeDef,
  { inputs: Value[]; rule: (g: Graph, dys: (Value | null)[], need: boolean[]) => (Value | null)[] }
>();

/** State shared by a root graph and its subgraphs: unique names, constants, fresh dims. */
class ModelState {
  names = new Set<string>();
  counter = 0;
  initializers: { name: string; tensor: ConstTensor }[] = [];
  constByName = new Map<string, ConstTensor>();
  constCache = new Map<string, Value>();
  /** Prefix of node names (`fwd/layer0/Mul`), set by Graph.scope: profiles read by phase. */
  scope = '';
  unique(hint: string): string {
    let n = hint;
    while (this.names.has(n)) n = `${hint}_${++this.counter}`;
    this.names.add(n);
    return n;
  }
  freshDim(): string {
    return `?${++this.counter}`;
  }
}

/**
 * A graph under construction. `Graph.create()` makes a root graph; `loop`/`ifElse` make
 * subgraphs. Constants always go to the root graph's initializers (visible in every subgraph).
 */
export class Graph {
  readonly nodes: NodeDef[] = [];
  readonly inputs: Value[] = [];
  readonly outputs: Value[] = [];
  private readonly state: ModelState;

  private constructor(
    readonly name: string,
    readonly parent: Graph | undefined,
    state?: ModelState,
  ) {
    this.state = state ?? new ModelState();
  }

  static create(name = 'turnwise'): Graph {
    return new Graph(name, undefined);
  }

  get root(): Graph {
    return this.parent ? this.parent.root : this;
  }

  get initializers(): readonly { name: string; tensor: ConstTensor }[] {
    return this.state.initializers;
  }

  /** The tensor of a constant (initializer) value, or undefined for computed values and inputs. */
  constValue(v: Value | null): ConstTensor | undefined {
    return v ? this.state.constByName.get(v.name) : undefined;
  }

  /** Numbers of a constant value (int64 as numbers), or undefined when `v` is not a constant. */
  constNumbers(v: Value | null): number[] | undefined {
    const t = this.constValue(v);
    return t ? Array.from(t.data as ArrayLike<number | bigint>, Number) : undefined;
  }

  /** Whether `v` can be used in this graph (it belongs here or to an enclosing graph). */
  sees(v: Value): boolean {
    if (v.graph === this) return true;
    for (let g = this.parent; g; g = g.parent) if (v.graph === g) return true;
    return false;
  }

  freshDim(): string {
    return this.state.freshDim();
  }

  // ---------------------------------------------------------------- declarations

  input(name: string, dtype: DType, shape: Shape): Value {
    return this.addInput(this.claim(name), dtype, shape);
  }

  private addInput(name: string, dtype: DType, shape: Shape): Value {
    const v = new Value(this, name, dtype, [...shape]);
    this.inputs.push(v);
    return v;
  }

  /** Marks `v` as a graph output named `name` (an Identity is inserted if the name differs). */
  output(v: Value, name?: string): Value {
    let out = v;
    const isInput = this.inputs.includes(v) || !v.producer || v.graph !== this;
    if (isInput || this.outputs.includes(v)) {
      out = this.node('Identity', [v], {}, { name: name ?? `${v.name}_out` })[0];
    } else if (name !== undefined && name !== v.name) {
      // Rename in place: an Identity would copy the tensor on every run.
      this.claim(name);
      this.state.names.delete(v.name);
      v.name = name;
    }
    this.outputs.push(out);
    return out;
  }

  /**
   * Turns the root graph's input `name` into an initializer holding `tensor`, under the same name
   * (every node reading it reads the initializer): a model whose session holds what other
   * sessions of the same graph are fed. `external`: the tensor's bytes are placed outside the
   * model when it is written, and `tensor.data` is not read.
   */
  holdInput(name: string, tensor: ConstTensor, opts: { external?: boolean } = {}): Value {
    if (this.parent) bad(`holdInput(${name}): only the root graph has initializers`);
    const i = this.inputs.findIndex((v) => v.name === name);
    if (i < 0) bad(`holdInput: the graph has no input ${name}`);
    const v = this.inputs[i];
    const dims = tensor.dims;
    if (v.dtype !== tensor.dtype || v.shape.length !== dims.length || v.shape.some((d, k) => typeof d === 'number' && d !== dims[k])) {
      bad(`holdInput(${name}): a ${tensor.dtype} [${dims}] tensor for an input of ${v.dtype} [${v.shape}]`);
    }
    // An external tensor's bytes are in a file the model names (toModelProto's `external`): its data here is not read.
    if (!opts.external && tensor.data.length !== dims.reduce((a, b) => a * b, 1))
      bad(`holdInput(${name}): ${tensor.data.length} values for dims [${dims}]`);
    this.inputs.splice(i, 1);
    this.state.initializers.push({ name, tensor });
    this.state.constByName.set(name, tensor);
    return v;
  }

  /**
   * Removes the root graph's inputs that no live node or output reads (a graph built from a
   * shared declaration whose products read other tensors in their place); returns their names.
   */
  dropUnreadInputs(): string[] {
    if (this.parent) bad('dropUnreadInputs: only the root graph');
    const read = new Set<Value>(this.outputs);
    for (const n of this.liveNodes()) {
      for (const v of n.inputs) if (v) read.add(v);
      for (const a of Object.values(n.attrs)) if (a instanceof Graph) for (const v of a.outerReads()) read.add(v);
    }
    const dropped = this.inputs.filter((v) => !read.has(v));
    for (const v of dropped) this.inputs.splice(this.inputs.indexOf(v), 1);
    return dropped.map((v) => v.name);
  }

  /** The root graph's input `name`, declared on first use. */
  inputOnce(name: string, dtype: DType, shape: Shape): Value {
    if (this.parent) bad(`inputOnce(${name}): only the root graph`);
    const v = this.inputs.find((x) => x.name === name);
    if (!v) return this.input(name, dtype, shape);
    if (v.dtype !== dtype || v.shape.join() !== shape.join()) bad(`inputOnce(${name}): declared as ${v}, asked as ${dtype}[${shape}]`);
    return v;
  }

  /** A constant tensor as an initializer of the root graph. Small ones are deduplicated. */
  constant(tensor: ConstTensor, hint = 'const'): Value {
    const n = tensor.data.length;
    if (n !== (tensor.dims.length ? tensor.dims.reduce((a, b) => a * b, 1) : 1))
      bad(`constant ${hint}: ${n} values for dims [${tensor.dims}]`);
    let key: string | undefined;
    // Object.is tells -0 from 0 (String(-0) is "0"; 1/x and copysign-like uses differ).
    const str = (x: number | bigint) => (Object.is(x, -0) ? '-0' : String(x));
    if (n <= 16) key = `${tensor.dtype}|${tensor.dims.join(',')}|${Array.from(tensor.data as ArrayLike<number | bigint>, str).join(',')}`;
    const hit = key !== undefined ? this.state.constCache.get(key) : undefined;
    if (hit) return hit;
    const root = this.root;
    const name = this.state.unique(hint);
    const v = new Value(root, name, tensor.dtype, tensor.dims);
    this.state.initializers.push({ name, tensor });
    this.state.constByName.set(name, tensor);
    if (key !== undefined) this.state.constCache.set(key, v);
    return v;
  }

  /** A scalar constant of a given dtype (or the dtype of `like`). */
  scalar(x: number, like: DType | Value): Value {
    const dtype = typeof like === 'string' ? like : like.dtype;
    return this.constant({ dtype, dims: [], data: makeData(dtype, [x]) }, 'scalar');
  }

  /** A 1-D int64 constant (axes, shapes, starts...). */
  ints(xs: readonly number[]): Value {
    return this.constant({ dtype: 'int64', dims: [xs.length], data: BigInt64Array.from(xs, (x) => BigInt(x)) }, 'ints');
  }

  /** A constant of any shape filled from `values`. */
  tensor(dtype: DType, dims: number[], values: ArrayLike<number>): Value {
    return this.constant({ dtype, dims, data: makeData(dtype, values) }, 'tensor');
  }

  // ---------------------------------------------------------------- generic node

  /**
   * Adds a node. Without `types`, outputs get the dtype and shape of the first input (or must be
   * given): the typed helpers below compute them; use this directly for ops they do not cover.
   */
  node(
    op: string,
    inputs: (Value | null)[],
    attrs: Record<string, Attr> = {},
    opts: { outputs?: { dtype: DType; shape: Shape }[]; name?: string; names?: string[]; domain?: string } = {},
  ): Value[] {
    for (const v of inputs) if (v && !this.sees(v)) bad(`${op}: input ${v.name} belongs to another graph`);
    const first = inputs.find((v): v is Value => !!v);
    const outTypes = opts.outputs ?? (first ? [{ dtype: first.dtype, shape: first.shape }] : bad(`${op}: output types needed`));
    const nodeName = this.state.unique(this.state.scope ? `${this.state.scope}/${op}` : op);
    const def: NodeDef = { op, domain: opts.domain ?? '', name: nodeName, inputs: [...inputs], outputs: [], attrs };
    outTypes.forEach((t, i) => {
      const name = opts.names?.[i] ?? (i === 0 && opts.name ? opts.name : undefined);
      const v = new Value(this, name !== undefined ? this.claim(name) : this.state.unique(`${op.toLowerCase()}`), t.dtype, [...t.shape]);
      v.producer = def;
      def.outputs.push(v);
    });
    this.nodes.push(def);
    return def.outputs;
  }

  /**
   * Runs `build` with node names prefixed by `name/` (nested scopes join with '/'). Names only:
   * ONNX Runtime's profiler reports nodes by name, so time can be read per phase or layer.
   */
  scope<T>(name: string, build: () => T): T {
    const prev = this.state.scope;
    this.state.scope = prev ? `${prev}/${name}` : name;
    try {
      return build();
    } finally {
      this.state.scope = prev;
    }
  }

  /**
   * The nodes that some output of this graph depends on, in order: what a model is written with.
   * A builder may leave values no output needs (the recomputed layer output whose gradient a
   * backward pass asked for, a shared helper's extra result); ONNX Runtime would run those too,
   * last (nothing waits for them), keeping their inputs alive until then.
   */
  liveNodes(): NodeDef[] {
    const needed = new Set<Value>(this.outputs);
    const keep = new Array<boolean>(this.nodes.length).fill(false);
    for (let i = this.nodes.length - 1; i >= 0; i--) {
      const n = this.nodes[i];
      if (!n.outputs.some((o) => needed.has(o))) continue;
      keep[i] = true;
      for (const v of n.inputs) if (v) needed.add(v);
      for (const a of Object.values(n.attrs)) if (a instanceof Graph) for (const v of a.outerReads()) needed.add(v);
    }
    return this.nodes.filter((_, i) => keep[i]);
  }

  /** Values of enclosing graphs that this subgraph's live nodes and outputs read. */
  private outerReads(): Value[] {
    const out: Value[] = this.outputs.filter((o) => o.graph !== this);
    for (const n of this.liveNodes()) {
      for (const v of n.inputs) if (v && v.graph !== this) out.push(v);
      for (const a of Object.values(n.attrs)) if (a instanceof Graph) for (const v of a.outerReads()) if (v.graph !== this) out.push(v);
    }
    return out;
  }

  /** Drops a node nobody consumes yet (autodiff replaces some of its own just-built nodes). */
  dropUnusedNode(def: NodeDef): void {
    const i = this.nodes.indexOf(def);
    if (
      i < 0 ||
      this.nodes.some((n) => n.inputs.some((v) => v && def.outputs.includes(v))) ||
      this.outputs.some((o) => def.outputs.includes(o))
    )
      return;
    this.nodes.splice(i, 1);
  }

  private claim(name: string): string {
    if (this.state.names.has(name)) bad(`duplicate name ${name}`);
    this.state.names.add(name);
    return name;
  }

  private one(op: string, inputs: (Value | null)[], dtype: DType, shape: Shape, attrs: Record<string, Attr> = {}): Value {
    return this.node(op, inputs, attrs, { outputs: [{ dtype, shape }] })[0];
  }

  // ---------------------------------------------------------------- elementwise

  private binary(op: string, a: Value, b: Value, outDtype?: DType): Value {
    if (a.dtype !== b.dtype) bad(`${op}: dtype mismatch ${a} vs ${b}`);
    return this.one(op, [a, b], outDtype ?? a.dtype, broadcastShapes(a.shape, b.shape));
  }
  private lift(a: Value | number, b: Value | number): [Value, Value] {
    if (typeof a === 'number' && typeof b === 'number') bad('two numbers');
    const av = typeof a === 'number' ? this.scalar(a, b as Value) : a;
    const bv = typeof b === 'number' ? this.scalar(b, a as Value) : b;
    return [av, bv];
  }
  add(a: Value | number, b: Value | number): Value {
    return this.binary('Add', ...this.lift(a, b));
  }
  sub(a: Value | number, b: Value | number): Value {
    return this.binary('Sub', ...this.lift(a, b));
  }
  mul(a: Value | number, b: Value | number): Value {
    return this.binary('Mul', ...this.lift(a, b));
  }
  div(a: Value | number, b: Value | number): Value {
    return this.binary('Div', ...this.lift(a, b));
  }
  pow(a: Value | number, b: Value | number): Value {
    return this.binary('Pow', ...this.lift(a, b));
  }
  min(a: Value | number, b: Value | number): Value {
    return this.binary('Min', ...this.lift(a, b));
  }
  max(a: Value | number, b: Value | number): Value {
    return this.binary('Max', ...this.lift(a, b));
  }
  equal(a: Value | number, b: Value | number): Value {
    return this.binary('Equal', ...this.lift(a, b), 'bool');
  }
  less(a: Value | number, b: Value | number): Value {
    return this.binary('Less', ...this.lift(a, b), 'bool');
  }
  lessOrEqual(a: Value | number, b: Value | number): Value {
    return this.binary('LessOrEqual', ...this.lift(a, b), 'bool');
  }
  greater(a: Value | number, b: Value | number): Value {
    return this.binary('Greater', ...this.lift(a, b), 'bool');
  }
  greaterOrEqual(a: Value | number, b: Value | number): Value {
    return this.binary('GreaterOrEqual', ...this.lift(a, b), 'bool');
  }
  and(a: Value, b: Value): Value {
    return this.binary('And', a, b, 'bool');
  }
  or(a: Value, b: Value): Value {
    return this.binary('Or', a, b, 'bool');
  }
  not(a: Value): Value {
    return this.one('Not', [a], 'bool', a.shape);
  }

  private unary(op: string, x: Value, attrs: Record<string, Attr> = {}): Value {
    return this.one(op, [x], x.dtype, x.shape, attrs);
  }
  neg(x: Value): Value {
    return this.unary('Neg', x);
  }
  sqrt(x: Value): Value {
    return this.unary('Sqrt', x);
  }
  exp(x: Value): Value {
    return this.unary('Exp', x);
  }
  log(x: Value): Value {
    return this.unary('Log', x);
  }
  sigmoid(x: Value): Value {
    return this.unary('Sigmoid', x);
  }
  tanh(x: Value): Value {
    return this.unary('Tanh', x);
  }
  relu(x: Value): Value {
    return this.unary('Relu', x);
  }
  abs(x: Value): Value {
    return this.unary('Abs', x);
  }
  sin(x: Value): Value {
    return this.unary('Sin', x);
  }
  cos(x: Value): Value {
    return this.unary('Cos', x);
  }
  reciprocal(x: Value): Value {
    return this.unary('Reciprocal', x);
  }
  identity(x: Value): Value {
    return this.unary('Identity', x);
  }
  /**
   * `x` as a value autodiff treats as a constant (an Identity node it never differentiates
   * through), like PyTorch's `detach()`: for terms a function is invariant to, such as the max
   * subtracted in a log-softmax.
   */
  stopGradient(x: Value): Value {
    const y = this.unary('Identity', x);
    STOP_GRADIENT.add(y.producer!);
    return y;
  }
  softmax(x: Value, axis = -1): Value {
    return this.unary('Softmax', x, { axis });
  }
  logSoftmax(x: Value, axis = -1): Value {
    return this.unary('LogSoftmax', x, { axis });
  }
  /** Clip(x, lo, hi); bounds are scalars (numbers or scalar values), either may be omitted. */
  clip(x: Value, lo?: Value | number, hi?: Value | number): Value {
    const b = (v?: Value | number) => (v === undefined ? null : typeof v === 'number' ? this.scalar(v, x) : v);
    return this.one('Clip', [x, b(lo), b(hi)], x.dtype, x.shape);
  }
  cast(x: Value, to: DType): Value {
    return this.one('Cast', [x], to, x.shape, { to: DTYPE_CODE[to] });
  }
  where(cond: Value, a: Value | number, b: Value | number): Value {
    const [av, bv] = this.lift(a, b);
    if (cond.dtype !== 'bool') bad(`Where: condition ${cond} is not bool`);
    return this.one('Where', [cond, av, bv], av.dtype, broadcastShapes(cond.shape, av.shape, bv.shape));
  }

  // ---------------------------------------------------------------- linear algebra

  /** Batched matmul with broadcasting of the leading dims (both operands rank >= 2). */
  matmul(a: Value, b: Value): Value {
    if (a.rank < 2 || b.rank < 2) bad(`MatMul: rank-1 operands are not supported (${a}, ${b})`);
    if (a.dtype !== b.dtype) bad(`MatMul: dtype mismatch ${a} vs ${b}`);
    const k1 = a.shape[a.rank - 1];
    const k2 = b.shape[b.rank - 2];
    if (typeof k1 === 'number' && typeof k2 === 'number' && k1 !== k2) bad(`MatMul: inner dims differ (${a}, ${b})`);
    const batch = broadcastShapes(a.shape.slice(0, -2), b.shape.slice(0, -2));
    return this.one('MatMul', [a, b], a.dtype, [...batch, a.shape[a.rank - 2], b.shape[b.rank - 1]]);
  }

  /** Gemm over 2-D operands: alpha·op(A)·op(B) (+ beta·C). */
  gemm(a: Value, b: Value, opts: { transA?: boolean; transB?: boolean; c?: Value; alpha?: number; beta?: number } = {}): Value {
    if (a.rank !== 2 || b.rank !== 2) bad(`Gemm needs 2-D operands (${a}, ${b})`);
    const m = opts.transA ? a.shape[1] : a.shape[0];
    const n = opts.transB ? b.shape[0] : b.shape[1];
    const attrs: Record<string, Attr> = {};
    if (opts.transA) attrs.transA = 1;
    if (opts.transB) attrs.transB = 1;
    if (opts.alpha !== undefined) attrs.alpha = { f: opts.alpha };
    if (opts.beta !== undefined) attrs.beta = { f: opts.beta };
    return this.one('Gemm', opts.c ? [a, b, opts.c] : [a, b], a.dtype, [m, n], attrs);
  }

  // ---------------------------------------------------------------- reductions

  private reducedShape(x: Value, axes: readonly number[] | undefined, keepdims: boolean): { shape: Dim[]; axes: number[] } {
    const ax = axes === undefined ? x.shape.map((_, i) => i) : axes.map((a) => normAxis(a, x.rank));
    const shape: Dim[] = [];
    x.shape.forEach((d, i) => {
      if (!ax.includes(i)) shape.push(d);
      else if (keepdims) shape.push(1);
    });
    return { shape, axes: ax };
  }
  /** ReduceSum (opset 13+: axes as an input). `axes` undefined = all axes. */
  reduceSum(x: Value, axes?: readonly number[], keepdims = false): Value {
    if (axes !== undefined && axes.length === 0) return this.identity(x); // ONNX: empty axes = all axes
    const r = this.reducedShape(x, axes, keepdims);
    return this.one('ReduceSum', axes === undefined ? [x] : [x, this.ints(r.axes)], x.dtype, r.shape, { keepdims: keepdims ? 1 : 0 });
  }
  /** ReduceMean/Max/Min/SumSquare/Prod (opset 17: axes as an attribute). */
  private reduceAttr(op: string, x: Value, axes: readonly number[] | undefined, keepdims: boolean): Value {
    // Reducing over no axis is the identity; ONNX reads an empty axes list as "every axis".
    if (axes !== undefined && axes.length === 0) return this.identity(x);
    const r = this.reducedShape(x, axes, keepdims);
    const attrs: Record<string, Attr> = { keepdims: keepdims ? 1 : 0 };
    if (axes !== undefined) attrs.axes = r.axes;
    return this.one(op, [x], x.dtype, r.shape, attrs);
  }
  reduceMean(x: Value, axes?: readonly number[], keepdims = false): Value {
    return this.reduceAttr('ReduceMean', x, axes, keepdims);
  }
  reduceMax(x: Value, axes?: readonly number[], keepdims = false): Value {
    return this.reduceAttr('ReduceMax', x, axes, keepdims);
  }
  reduceMin(x: Value, axes?: readonly number[], keepdims = false): Value {
    return this.reduceAttr('ReduceMin', x, axes, keepdims);
  }
  /** CumSum along `axis` (inclusive, forward). No gradient rule: for inference graphs. */
  cumSum(x: Value, axis: number): Value {
    return this.one('CumSum', [x, this.scalar(axis, 'int64')], x.dtype, x.shape);
  }
  /** ArgMax along `axis`: int64, the first index of the largest value. No gradient rule. */
  argMax(x: Value, axis: number, keepdims = false): Value {
    const a = axis < 0 ? axis + x.rank : axis;
    const shape = x.shape.flatMap((d, i) => (i !== a ? [d] : keepdims ? [1] : []));
    return this.one('ArgMax', [x], 'int64', shape, { axis: a, keepdims: keepdims ? 1 : 0, select_last_index: 0 });
  }
  reduceSumSquare(x: Value, axes?: readonly number[], keepdims = false): Value {
    return this.reduceAttr('ReduceSumSquare', x, axes, keepdims);
  }
  reduceProd(x: Value, axes?: readonly number[], keepdims = false): Value {
    return this.reduceAttr('ReduceProd', x, axes, keepdims);
  }

  // ---------------------------------------------------------------- shape ops

  shapeOf(x: Value): Value {
    return this.one('Shape', [x], 'int64', [x.rank]);
  }

  /**
   * Reshape to `shape`: numbers follow ONNX (0 copies the input dim, -1 is inferred); strings
   * are symbolic output dims (the runtime value must then be given as a Value instead).
   * Pass a Value (int64[rank]) plus `outShape` for fully dynamic reshapes.
   */
  reshape(x: Value, shape: readonly number[] | Value, outShape?: Shape): Value {
    if (shape instanceof Value) {
      if (!outShape) {
        const r = shape.shape[0];
        if (typeof r !== 'number') bad('Reshape by a Value needs a static rank');
        outShape = Array.from({ length: r }, () => this.freshDim());
      }
      return this.one('Reshape', [x, shape], x.dtype, outShape);
    }
    const out: Dim[] = shape.map((d, i) => (d === 0 ? x.shape[i] : d));
    const neg = out.indexOf(-1);
    if (neg >= 0) {
      const total = staticSize(x.shape);
      const known = staticSize(out.filter((_, i) => i !== neg));
      if (total !== undefined && known !== undefined) out[neg] = total / known;
      else {
        // Symbolic: if the known part equals a sub-product of x's dims, the rest is what is left.
        const remaining = [...x.shape];
        let ok = true;
        for (let i = 0; i < out.length; i++) {
          if (i === neg) continue;
          const k = remaining.indexOf(out[i]);
          if (k >= 0) remaining.splice(k, 1);
          else ok = false;
        }
        out[neg] =
          ok && remaining.length === 1
            ? remaining[0]
            : ok && staticSize(remaining) !== undefined
              ? staticSize(remaining)!
              : this.freshDim();
      }
    }
    return this.one('Reshape', [x, this.ints(shape)], x.dtype, outShape ?? out);
  }

  transpose(x: Value, perm?: readonly number[]): Value {
    const p = perm ?? x.shape.map((_, i) => x.rank - 1 - i);
    return this.one(
      'Transpose',
      [x],
      x.dtype,
      p.map((i) => x.shape[i]),
      { perm: [...p] },
    );
  }

  unsqueeze(x: Value, axes: readonly number[]): Value {
    const rank = x.rank + axes.length;
    const ax = axes.map((a) => normAxis(a, rank)).sort((a, b) => a - b);
    const out: Dim[] = [];
    let k = 0;
    for (let i = 0; i < rank; i++) out.push(ax.includes(i) ? 1 : x.shape[k++]);
    return this.one('Unsqueeze', [x, this.ints(ax)], x.dtype, out);
  }

  squeeze(x: Value, axes: readonly number[]): Value {
    const ax = axes.map((a) => normAxis(a, x.rank));
    for (const a of ax) if (typeof x.shape[a] === 'number' && x.shape[a] !== 1) bad(`Squeeze: axis ${a} of ${x} is not 1`);
    return this.one(
      'Squeeze',
      [x, this.ints(ax)],
      x.dtype,
      x.shape.filter((_, i) => !ax.includes(i)),
    );
  }

  /** Expand to a static shape (numbers) or a runtime shape Value with a declared `outShape`. */
  expand(x: Value, shape: readonly number[] | Value, outShape?: Shape): Value {
    if (shape instanceof Value) {
      const s = outShape ?? bad('Expand by a Value needs outShape');
      return this.one('Expand', [x, shape], x.dtype, broadcastShapes(x.shape, s));
    }
    return this.one('Expand', [x, this.ints(shape)], x.dtype, broadcastShapes(x.shape, shape));
  }

  concat(xs: Value[], axis: number): Value {
    const a = normAxis(axis, xs[0].rank);
    const shape = [...xs[0].shape];
    let total: Dim = 0;
    for (const x of xs) {
      const d = x.shape[a];
      total = typeof total === 'number' && typeof d === 'number' ? total + d : this.freshDim();
    }
    shape[a] = total;
    return this.one('Concat', xs, xs[0].dtype, shape, { axis: a });
  }

  /** Split along `axis` into pieces of the given static sizes. */
  split(x: Value, sizes: readonly number[], axis: number): Value[] {
    const a = normAxis(axis, x.rank);
    return this.node(
      'Split',
      [x, this.ints(sizes)],
      { axis: a },
      {
        outputs: sizes.map((s) => ({ dtype: x.dtype, shape: x.shape.map((d, i) => (i === a ? s : d)) })),
      },
    );
  }

  /** Slice with constant starts/ends (ONNX clamping rules apply), optional axes and steps. */
  slice(x: Value, starts: readonly number[], ends: readonly number[], axes?: readonly number[], steps?: readonly number[]): Value {
    const ax = (axes ?? starts.map((_, i) => i)).map((a) => normAxis(a, x.rank));
    const shape: Dim[] = [...x.shape];
    ax.forEach((a, i) => {
      const d = x.shape[a];
      const step = steps?.[i] ?? 1;
      if (typeof d === 'number') {
        const clampS = (v: number) => Math.min(Math.max(v < 0 ? v + d : v, 0), step > 0 ? d : d - 1);
        const clampE = (v: number) => Math.min(Math.max(v < 0 ? v + d : v, step > 0 ? 0 : -1), d);
        const s = clampS(starts[i]);
        const e = clampE(ends[i]);
        shape[a] = Math.max(0, Math.ceil((e - s) / step));
      } else if (starts[i] >= 0 && ends[i] >= 0 && ends[i] < 2 ** 31 && step === 1) {
        shape[a] = ends[i] - starts[i]; // assumes the symbolic dim is at least `end`
      } else shape[a] = this.freshDim();
    });
    const inputs: (Value | null)[] = [x, this.ints(starts), this.ints(ends), this.ints(ax)];
    if (steps) inputs.push(this.ints(steps));
    return this.one('Slice', inputs, x.dtype, shape);
  }

  /** Gather along `axis` (embedding lookup with axis 0). */
  gather(data: Value, indices: Value, axis = 0): Value {
    const a = normAxis(axis, data.rank);
    const shape = [...data.shape.slice(0, a), ...indices.shape, ...data.shape.slice(a + 1)];
    return this.one('Gather', [data, indices], data.dtype, shape, { axis: a });
  }

  /** GatherElements: out[i][j] = data[i][idx[i][j]] along `axis` (picking a token's log-prob). */
  gatherElements(data: Value, indices: Value, axis: number): Value {
    const a = normAxis(axis, data.rank);
    return this.one('GatherElements', [data, indices], data.dtype, indices.shape, { axis: a });
  }

  scatterND(data: Value, indices: Value, updates: Value, reduction?: 'add' | 'mul'): Value {
    return this.one('ScatterND', [data, indices, updates], data.dtype, data.shape, reduction ? { reduction } : {});
  }

  scatterElements(data: Value, indices: Value, updates: Value, axis: number, reduction?: 'add' | 'mul'): Value {
    const attrs: Record<string, Attr> = { axis: normAxis(axis, data.rank) };
    if (reduction) attrs.reduction = reduction;
    return this.one('ScatterElements', [data, indices, updates], data.dtype, data.shape, attrs);
  }

  /** A tensor of `shape` (a runtime int64 shape Value) filled with `value`. */
  constantOfShape(shape: Value, value: number, dtype: DType, outShape: Shape): Value {
    return this.one('ConstantOfShape', [shape], dtype, outShape, {
      value: { tensor: { dtype, dims: [1], data: makeData(dtype, [value]) } },
    });
  }

  /** Zeros shaped like `x` (static shapes become a constant-folded Expand). */
  zerosLike(x: Value): Value {
    const s = staticSize(x.shape);
    if (s !== undefined) return this.expand(this.scalar(0, x), x.shape as number[]);
    return this.constantOfShape(this.shapeOf(x), 0, x.dtype, x.shape);
  }

  range(start: Value, limit: Value, delta: Value, outLen?: Dim): Value {
    return this.one('Range', [start, limit, delta], start.dtype, [outLen ?? this.freshDim()]);
  }

  /** Trilu: upper (default) or lower triangle of the last two dims, offset `k`. */
  trilu(x: Value, upper = true, k?: Value): Value {
    return this.one('Trilu', k ? [x, k] : [x], x.dtype, x.shape, { upper: upper ? 1 : 0 });
  }

  pad(x: Value, pads: Value | readonly number[], outShape: Shape, value?: Value): Value {
    const p = pads instanceof Value ? pads : this.ints(pads);
    return this.one('Pad', value ? [x, p, value] : [x, p], x.dtype, outShape, { mode: 'constant' });
  }

  // ---------------------------------------------------------------- control flow

  /**
   * ONNX Loop. The body gets the iteration number (int64 scalar) and the loop-carried values
   * and returns the new carried values (same dtypes and shapes), optional per-iteration scan
   * outputs (stacked along a new leading axis) and an optional `cond` to stop early.
   * The body may use any value of this graph or an enclosing one directly.
   */
  loop(
    trips: Value | number,
    carried: Value[],
    body: (b: Graph, iter: Value, carried: Value[]) => { carried: Value[]; scan?: Value[]; cond?: Value },
  ): { carried: Value[]; scan: Value[] } {
    const b = new Graph(this.state.unique('loop_body'), this, this.state);
    const iter = b.addInput(this.state.unique('iter'), 'int64', []);
    const condIn = b.addInput(this.state.unique('cond_in'), 'bool', []);
    const ins = carried.map((c) => b.addInput(this.state.unique(`${c.name}_c`), c.dtype, c.shape));
    const res = body(b, iter, ins);
    if (res.carried.length !== carried.length) bad(`Loop body returned ${res.carried.length} carried values, expected ${carried.length}`);
    res.carried.forEach((v, i) => {
      if (v.dtype !== carried[i].dtype) bad(`Loop carried ${i}: dtype ${v.dtype} != ${carried[i].dtype}`);
    });
    b.output(res.cond ?? b.identity(condIn));
    for (const v of res.carried) b.output(v);
    for (const v of res.scan ?? []) b.output(v);
    const tripV =
      typeof trips === 'number' ? this.constant({ dtype: 'int64', dims: [], data: BigInt64Array.of(BigInt(trips)) }, 'trips') : trips;
    const trueV = this.constant({ dtype: 'bool', dims: [], data: Uint8Array.of(1) }, 'true');
    const tripDim: Dim = typeof trips === 'number' ? trips : this.freshDim();
    const outs = this.node(
      'Loop',
      [tripV, trueV, ...carried],
      { body: b },
      {
        outputs: [
          ...carried.map((c) => ({ dtype: c.dtype, shape: c.shape })),
          ...(res.scan ?? []).map((s) => ({ dtype: s.dtype, shape: [tripDim, ...s.shape] })),
        ],
      },
    );
    return { carried: outs.slice(0, carried.length), scan: outs.slice(carried.length) };
  }

  /** ONNX If: both branches return values of the same dtypes (shapes from `then`). */
  ifElse(cond: Value, then: (b: Graph) => Value[], otherwise: (b: Graph) => Value[]): Value[] {
    const mk = (f: (b: Graph) => Value[], hint: string) => {
      const b = new Graph(this.state.unique(hint), this, this.state);
      const outs = f(b);
      for (const v of outs) b.output(v);
      return { b, outs };
    };
    const t = mk(then, 'then');
    const e = mk(otherwise, 'else');
    return this.node(
      'If',
      [cond],
      { then_branch: t.b, else_branch: e.b },
      {
        outputs: t.outs.map((v) => ({ dtype: v.dtype, shape: v.shape })),
      },
    );
  }
}

export function makeData(dtype: DType, values: ArrayLike<number>): TensorData {
  switch (dtype) {
    case 'float32':
      return Float32Array.from(values);
    case 'float64':
      return Float64Array.from(values);
    case 'int64':
      return BigInt64Array.from(Array.from(values), (x) => BigInt(Math.trunc(x)));
    case 'int32':
      return Int32Array.from(values);
    case 'uint8':
      return Uint8Array.from(values);
    case 'bool':
      return Uint8Array.from(values, (x) => (x ? 1 : 0));
    case 'float16':
      return toFloat16Bits(Float32Array.from(values));
  }
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/**
 * IEEE half-precision bit patterns of `x`, rounded to nearest even; beyond the half range ±Inf,
 * below it subnormals then ±0; NaN stays NaN.
 */
export function toFloat16Bits(x: ArrayLike<number>): Uint16Array {
  const out = new Uint16Array(x.length);
  for (let i = 0; i < x.length; i++) {
    f32[0] = x[i];
    const b = u32[0];
    const sign = (b >>> 16) & 0x8000;
    const exp = (b >>> 23) & 0xff;
    let mant = b & 0x7fffff;
    if (exp === 0xff) {
      out[i] = sign | 0x7c00 | (mant ? 0x200 : 0);
      continue;
    }
    const e = exp - 127 + 15;
    if (e >= 0x1f) {
      out[i] = sign | 0x7c00;
      continue;
    }
    if (e <= 0) {
      if (e < -10) {
        out[i] = sign;
        continue;
      }
      // Subnormal: the implicit bit made explicit, shifted into place, rounded to nearest even.
      mant |= 0x800000;
      const shift = 14 - e;
      const half = 1 << (shift - 1);
      const rest = mant & ((1 << shift) - 1);
      let m = mant >>> shift;
      if (rest > half || (rest === half && m & 1)) m++;
      out[i] = sign | m;
      continue;
    }
    let h = (e << 10) | (mant >>> 13);
    const rest = mant & 0x1fff;
    if (rest > 0x1000 || (rest === 0x1000 && h & 1)) h++; // a carry into the exponent is right: it rounds up to the next binade or to Inf
    out[i] = sign | h;
  }
  return out;
}

/** The float values of half-precision bit patterns. */
export function fromFloat16Bits(h: ArrayLike<number>): Float32Array {
  const out = new Float32Array(h.length);
  for (let i = 0; i < h.length; i++) {
    const sign = h[i] & 0x8000 ? -1 : 1;
    const e = (h[i] >>> 10) & 0x1f;
    const m = h[i] & 0x3ff;
    out[i] = e === 0 ? sign * m * 2 ** -24 : e === 0x1f ? (m ? NaN : sign * Infinity) : sign * (1 + m / 1024) * 2 ** (e - 15);
  }
  return out;
}
