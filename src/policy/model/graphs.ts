// The decoder forward pass (Qwen2 and Llama, as config.ts describes them) as ONNX graph ops (built with src/onnx's Graph), shared by the
// inference graphs here and the training graphs in training.ts. Weights are graph inputs named
// by their Hugging Face names and in their Hugging Face layout (Linear weights [out, in]): the
// arrays a folder loads as are the arrays every session is fed. A projection is x·Wᵀ, which ONNX
// Runtime runs as one product with the weight read transposed (FusedMatMul), as fast as a plain
// product at one row and faster at several; a decode step of several rows computes (W·xᵀ)ᵀ
// instead, where each weight matrix is read once for all rows, or holds its weights in the
// session, packed once for the CPU's matrix kernel (ProductForm).
import { CUSTOM_GRADIENT, gradients, Graph, type Dim, type HostTensor, type Value } from '../../onnx';
import { biasesOf, familyOf, headDim, paramSpecs, ropeInvFreq, type ModelConfig } from './config';
import {
  DROPOUT_PRIME,
  DROPOUT_ROUNDS,
  dropoutTargetOffset,
  dropoutThreshold,
  loraScale,
  loraTargets,
  type LoraAdapter,
  type LoraConfig,
} from '../files/lora';
import type { PolicyWeights } from './weights';
import { blocksPerRow, PRECISION_BITS, QUANT_BLOCK_SIZE } from './quantize';

/** Additive attention bias for disallowed (future or padding) keys. Finite so fully masked rows stay finite. */
export const MASKED = -1e9;

/** Additive bias [B,1,1,T] from a key mask [B,T] (1 real, 0 padding): 0 or MASKED per key. */
export function keyPaddingBias(g: Graph, mask: Value): Value {
  return g.reshape(g.mul(g.sub(1, mask), MASKED), [0, 1, 1, -1], [mask.shape[0], 1, 1, mask.shape[1]]);
}

export interface GraphParamSpec {
  name: string;
  /** Shape in graph layout. */
  shape: number[];
}

/** The weights a graph takes, in its input order: every parameter, in its Hugging Face shape. */
export function graphParamSpecs(c: ModelConfig): GraphParamSpec[] {
  return paramSpecs(c).map((p) => ({ name: p.name, shape: p.shape }));
}

function transpose2d(a: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(a.length);
  for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) out[c * rows + r] = a[r * cols + c];
  return out;
}

/**
 * name → tensor as the graphs take it, for every parameter of `c` in order: the graph layout of
 * the base weights is their Hugging Face layout, so the arrays are shared, not copied.
 */
export function toGraphLayout(c: ModelConfig, tensors: Map<string, Float32Array>): Map<string, Float32Array> {
  const out = new Map<string, Float32Array>();
  for (const p of paramSpecs(c)) out.set(p.name, tensors.get(p.name)!);
  return out;
}

/** Inverse of toGraphLayout (the same arrays). */
export const fromGraphLayout = toGraphLayout;

/** Host tensors for every weight input, graph layout. */
export function weightFeeds(w: PolicyWeights): Record<string, HostTensor> {
  const g = toGraphLayout(w.config, w.tensors);
  const feeds: Record<string, HostTensor> = {};
  for (const p of graphParamSpecs(w.config)) feeds[p.name] = { dtype: 'float32', dims: p.shape, data: g.get(p.name)! };
  return feeds;
}

/** Declares every weight as a graph input (graph layout). */
export function declareParams(g: Graph, c: ModelConfig): Map<string, Value> {
  const m = new Map<string, Value>();
  for (const p of graphParamSpecs(c)) m.set(p.name, g.input(p.name, 'float32', p.shape));
  return m;
}

/** What a graph needs to know of a LoRA adapter: which layers, its rank and scale. */
export type LoraShape = Pick<LoraConfig, 'r' | 'lora_alpha' | 'use_rslora' | 'target_modules'>;

/**
 * The adapter's tensors as graph inputs, under their PEFT names, transposed from PEFT's layout:
 * A as [in, r] and B as [r, out], so x·A·B is two plain MatMuls (small: r columns).
 */
export function loraGraphSpecs(c: ModelConfig, lora: LoraShape): GraphParamSpec[] {
  return loraTargets(c, lora).flatMap((t) => [
    { name: t.a, shape: [t.inDim, lora.r] },
    { name: t.b, shape: [lora.r, t.outDim] },
  ]);
}

/** name → adapter tensor in graph layout (A and B transposed). */
export function loraToGraphLayout(c: ModelConfig, a: LoraAdapter): Map<string, Float32Array> {
  const out = new Map<string, Float32Array>();
  for (const t of loraTargets(c, a.config)) {
    out.set(t.a, transpose2d(a.tensors.get(t.a)!, a.config.r, t.inDim));
    out.set(t.b, transpose2d(a.tensors.get(t.b)!, t.outDim, a.config.r));
  }
  return out;
}

/** Inverse of loraToGraphLayout. */
export function loraFromGraphLayout(c: ModelConfig, lora: LoraConfig, graph: Map<string, Float32Array>): LoraAdapter {
  const tensors = new Map<string, Float32Array>();
  for (const t of loraTargets(c, lora)) {
    tensors.set(t.a, transpose2d(graph.get(t.a)!, t.inDim, lora.r));
    tensors.set(t.b, transpose2d(graph.get(t.b)!, lora.r, t.outDim));
  }
  return { config: lora, tensors };
}

/** Declares the adapter's inputs and returns what buildForward takes for it. */
export function declareLora(g: Graph, c: ModelConfig, lora: LoraShape): NonNullable<ForwardInputs['lora']> {
  const inputs = new Map(loraGraphSpecs(c, lora).map((p) => [p.name, g.input(p.name, 'float32', p.shape)]));
  return loraInputs(c, lora, inputs);
}

/**
 * buildForward's LoRA input from adapter values already in the graph (inputs, or a training
 * graph's parameters); with `dropout`, the adapters' inputs are dropped out (training only).
 */
export function loraInputs(
  c: ModelConfig,
  lora: LoraShape,
  values: Map<string, Value>,
  dropout?: LoraDropout,
): NonNullable<ForwardInputs['lora']> {
  const adapters = new Map<string, { a: Value; b: Value; index: number }>();
  loraTargets(c, lora).forEach((t, index) => adapters.set(t.module, { a: values.get(t.a)!, b: values.get(t.b)!, index }));
  return { scale: loraScale(lora), adapters, ...(dropout && dropout.p > 0 ? { dropout } : {}) };
}

/** Dropout on the adapters' inputs: probability p, and the step's hash seed (int64 scalar). */
export interface LoraDropout {
  p: number;
  seed: Value;
  /**
   * int64 [B, T]: each token's place b·T + t in the whole step's batch. A micro-batch of an
   * accumulated step is fed its rows' places in the step, so its masks are the ones the step in
   * one batch draws. Without it, the graph's own rows are the batch.
   */
  index?: Value;
}

/**
 * The dropout multiplier [B, T, in] of target `target`'s input x (static shape): 1/(1 − p) where
 * an element is kept, 0 where it is dropped, from the hash of lora.ts (loraDropoutHash), which
 * computes the same bits. Integer ops only, so nothing of it is differentiated.
 */
export function loraDropoutMask(g: Graph, x: Value, d: LoraDropout, target: number): Value {
  const shape = x.shape;
  if (shape.length !== 3 || !shape.every((n): n is number => typeof n === 'number'))
    throw new Error(`LoRA dropout needs a static [B, T, in] input, got ${x}`);
  const [B, T, n] = shape;
  const P = g.scalar(DROPOUT_PRIME, 'int64');
  const mod = (v: Value) => g.node('Mod', [v, P])[0];
  const rows = d.index
    ? g.mul(g.unsqueeze(d.index, [2]), g.scalar(n, 'int64'))
    : g.tensor(
        'int64',
        [B, T, 1],
        Array.from({ length: B * T }, (_, r) => r * n),
      );
  const cols = g.tensor(
    'int64',
    [1, 1, n],
    Array.from({ length: n }, (_, j) => j),
  );
  let h = mod(g.add(g.add(rows, cols), g.add(d.seed, dropoutTargetOffset(target))));
  for (const c of DROPOUT_ROUNDS) h = mod(g.add(g.mul(mod(g.mul(h, h)), h), c));
  return g.where(g.greaterOrEqual(h, dropoutThreshold(d.p)), g.scalar(1 / (1 - d.p), 'float32'), g.scalar(0, 'float32'));
}

export interface ForwardInputs {
  /** int64 [B, T] token ids. */
  ids: Value;
  /** int64 [B, T] position ids (RoPE). */
  positions: Value;
  /** float32, broadcastable to [B, 1, T, T]: 0 where a new token may attend a new token, MASKED elsewhere. */
  bias: Value;
  /**
   * A KV cache of capacity C per layer: keys [B, nkv, C, d], values transposed [B, nkv, d, C],
   * with `cacheBias` [B, 1, 1, C] masking the slots a query may not see. The layout lets the
   * caller write each new token in place between runs (see Policy): nothing O(cache) is copied per
   * step, in or out. Both products over the cache take it as their left operand, which ONNX
   * Runtime's CPU kernels read in place (a right operand they repack on every call). Absent for
   * a forward over the whole sequence.
   */
  cache?: CacheLayer[];
  cacheBias?: Value;
  /**
   * With `cache`, one new token per row (T = 1) whose earlier tokens of this run are `local`
   * (per layer, keys [B, nkv, n, d] and values transposed [B, nkv, d, n], n ≥ 0, all visible):
   * the query attends the cache, `local` and itself, `bias` is not read, and each layer's
   * `present` is `local` with this token appended. For decode steps looped inside one run.
   */
  local?: CacheLayer[];
  /**
   * Causal attention in this many query chunks (T static and divisible, no cache): each chunk
   * computes scores only up to its own end. `bias` must be causal. Default 1.
   */
  attentionChunks?: number;
  /**
   * Training only (no cache): each decoder layer's backward pass computes the layer again from its
   * input instead of reading what the forward pass kept (activation checkpointing, CUSTOM_GRADIENT),
   * so a step holds each layer's input and one layer's activations at a time, for a second pass
   * of the layers' arithmetic.
   */
  recomputeLayers?: boolean;
  /**
   * The products' form when not x·Wᵀ (ProductForm: 'weights-left' or 'packed'); their output
   * shapes come from `shapes` (rowShapes of the ids' shape).
   */
  products?: { form: Exclude<ProductForm, 'one-row'>; shapes: RowShapes };
  /**
   * A LoRA adapter: per base module (`model.layers.0.self_attn.q_proj`), A [in, r] and B [r, out]
   * and its place in loraTargets; y += scale·(dropout(x)·A)·B, dropout only when given (training).
   */
  lora?: { scale: number; adapters: Map<string, { a: Value; b: Value; index: number }>; dropout?: LoraDropout };
  dims: { B: Dim; T: Dim; C?: Dim };
}

/** One layer's keys [B, nkv, S, d] and values transposed [B, nkv, d, S] over S slots. */
export interface CacheLayer {
  key: Value;
  valueT: Value;
}

export interface ForwardOutputs {
  /** float32 [B, T, V]. */
  logits: Value;
  /** This step's keys ([B, nkv, T, d]) and values (transposed, [B, nkv, d, T]) per layer. */
  present: CacheLayer[];
}

/** Builds the forward pass into `g` (modeling_qwen2.py / modeling_llama.py semantics; see reference.ts). */
export function buildForward(g: Graph, c: ModelConfig, W: Map<string, Value>, inp: ForwardInputs): ForwardOutputs {
  const { hidden, present } = buildDecoder(g, c, W, inp);
  return { logits: lmHead(g, c, W, hidden), present };
}

/** The final norm and the output projection (the embedding when tied): [..., H] → [..., V]. */
export function lmHead(g: Graph, c: ModelConfig, W: Map<string, Value>, hidden: Value, products?: ForwardInputs['products']): Value {
  const { x, head } = lmHeadParts(g, c, W, hidden);
  return linear(g, x, head, products);
}

/**
 * How a graph multiplies its activations by its weights [out, in].
 * - 'one-row': x·Wᵀ, the weights graph inputs. ONNX Runtime runs it as one product reading W
 *   transposed: a matrix-vector product at one row, the fastest form there.
 * - 'weights-left': (W·xᵀ)ᵀ, the weights graph inputs, for several rows. ONNX Runtime's CPU kernels
 *   repack a product's right-hand matrix on every call when it is an input, so x·Wᵀ over 8 rows
 *   reads and writes each weight matrix again; with the weight on the left it is read once for all
 *   rows (docs/experiments/2026-12-03-decode.md: at 8 rows 1.5 times one row's x·Wᵀ, against 1.9
 *   times for x·Wᵀ).
 * - 'packed': Gemm(x, W, transB), the weights initializers of the session (Graph.holdInput), which
 *   ONNX Runtime's CPU provider packs once, at load, into its matrix kernel's layout: over 8 rows
 *   the weights stream at 19.0 GB/s against 15.8 for 'weights-left' (2-core Xeon). The session
 *   holds its own copy of the weights (docs/experiments/2026-12-03-packed-decode.md).
 */
export type ProductForm = 'one-row' | 'weights-left' | 'packed' | QuantizedForm | 'float16';
/**
 * - 'int8', 'int4': MatMulNBits(x, codes, scales), the weights block-quantized (quantize.ts) and
 *   held by the session as its initializers, as 'packed' holds them in float: the sampling
 *   sessions of a policy whose rolloutPrecision is int8 or int4. Each product reads the inputs
 *   `{weight}.codes` and `{weight}.scales` in place of the float weight (Graph.dropUnreadInputs
 *   removes those no product reads any more).
 */
export type QuantizedForm = 'int8' | 'int4';
/**
 * - 'float16': Cast(MatMul(Cast(x, f16), W16ᵀ), f32), the weight read as `{weight}.f16` (halfName),
 *   a float16 copy made once per weights version: the sampling sessions of a policy whose
 *   rolloutPrecision is float16 (GPU providers). Activations, norms, softmax and the adapter stay
 *   float32; only the products' operands are half precision.
 */
const PRODUCT_SUFFIX: Record<ProductForm, string> = {
  'one-row': '',
  'weights-left': '_rows',
  packed: '_packed',
  int8: '_int8',
  int4: '_int4',
  float16: '_f16',
};

/** The name of the float16 input that stands for weight `name` in the 'float16' form. */
export function halfName(name: string): string {
  return `${name}.f16`;
}

/** x [..., K] · Wᵀ for W [N, K] read as its float16 copy, in half precision, the result float32. */
function halfLinear(g: Graph, x: Value, w: Value): Value {
  const w16 = g.inputOnce(halfName(w.name), 'float16', w.shape);
  return g.cast(g.matmul(g.cast(x, 'float16'), g.transpose(w16, [1, 0])), 'float32');
}

/**
 * MatMulNBits' accuracy_level: 4 quantizes each product's input rows to int8 and multiplies in
 * integers, the CPU kernel's fast path: int4 at the 0.5B shape decodes 25 tokens/s at batch 1 and
 * 97 at batch 8 with it, 13 and 40 with level 1 (float products), slower than float32 packed at
 * batch 8 (docs/experiments/2026-12-06-quantized-rollouts.md).
 */
export const QUANT_ACCURACY_LEVEL = 4;

/** The names of the quantized inputs that stand for weight `name` in the 'int8' and 'int4' forms. */
export function quantizedNames(name: string): { codes: string; scales: string } {
  return { codes: `${name}.codes`, scales: `${name}.scales` };
}

/** x [..., K] · Wᵀ for W [N, K] read as block-quantized codes and scales (MatMulNBits). */
function quantizedLinear(g: Graph, x: Value, w: Value, form: QuantizedForm): Value {
  const [N, K] = w.shape as number[];
  const bits = PRECISION_BITS[form];
  const nb = blocksPerRow(K, QUANT_BLOCK_SIZE);
  const names = quantizedNames(w.name);
  const codes = g.inputOnce(names.codes, 'uint8', [N, nb, (QUANT_BLOCK_SIZE * bits) / 8]);
  const scales = g.inputOnce(names.scales, 'float32', [N * nb]);
  return g.node(
    'MatMulNBits',
    [x, codes, scales],
    { K, N, bits, block_size: QUANT_BLOCK_SIZE, accuracy_level: QUANT_ACCURACY_LEVEL },
    { domain: 'com.microsoft', outputs: [{ dtype: 'float32', shape: [...x.shape.slice(0, -1), N] }] },
  )[0];
}

/**
 * The output shapes [...lead, out] of products with the weight on the left, one tensor per output
 * width, all from one lead shape. Computed per product from its input instead, a decode graph of 24
 * layers carries a few hundred int64 shape nodes, which GPU providers place on the CPU, each a
 * copy between the devices at every step.
 */
export type RowShapes = (out: number) => Value;

/** RowShapes from `lead`, the int64 shape of every product input but its last axis (the ids' [B, T]). */
export function rowShapes(g: Graph, lead: Value): RowShapes {
  const memo = new Map<number, Value>();
  return (out) => {
    let s = memo.get(out);
    if (!s) memo.set(out, (s = g.concat([lead, g.tensor('int64', [1], [out])], 0)));
    return s;
  };
}

/** x [..., in] · Wᵀ for W [out, in], in the form `products` says (ProductForm; absent: 'one-row'). */
export function linear(g: Graph, x: Value, w: Value, products?: ForwardInputs['products']): Value {
  if (!products) return g.matmul(x, g.transpose(w, [1, 0]));
  if (products.form === 'int8' || products.form === 'int4') return quantizedLinear(g, x, w, products.form);
  if (products.form === 'float16') return halfLinear(g, x, w);
  const [out, n] = w.shape as number[];
  const rows = g.reshape(x, [-1, n], ['?rows', n]);
  const y = products.form === 'packed' ? g.gemm(rows, w, { transB: true }) : g.transpose(g.gemm(w, rows, { transB: true }), [1, 0]); // [rows, out]
  return g.reshape(y, products.shapes(out), [...x.shape.slice(0, -1), out]);
}

/** lmHead's two factors: the final norm's output [..., H] and the projection's weight [V, H]. */
export function lmHeadParts(g: Graph, c: ModelConfig, W: Map<string, Value>, hidden: Value): { x: Value; head: Value } {
  return { x: finalNorm(g, c, W, hidden), head: headWeight(c, W) };
}

/**
 * `x` plus a zero computed from the first element of each of `deps`: the same values, but ONNX
 * Runtime cannot run what reads the result before every dep exists (it has no other way to order
 * nodes). NaN-proof: where(v = v, 0, 0) is 0 whatever v is.
 */
function after(g: Graph, x: Value, deps: readonly Value[]): Value {
  const firsts = deps.map((v) =>
    g.reshape(
      g.slice(
        v,
        v.shape.map(() => 0),
        v.shape.map(() => 1),
      ),
      [1],
      [1],
    ),
  );
  const s = firsts.length > 1 ? g.concat(firsts, 0) : firsts[0];
  const zeros = g.where(g.equal(s, s), g.scalar(0, 'float32'), g.scalar(0, 'float32'));
  return g.add(x, firsts.length > 1 ? g.reduceSum(zeros, [0]) : zeros);
}

/** The final RMS norm: [..., H] → [..., H]. */
export function finalNorm(g: Graph, c: ModelConfig, W: Map<string, Value>, hidden: Value): Value {
  const norm = W.get('model.norm.weight');
  if (!norm) throw new Error('missing weight input model.norm.weight');
  const ms = g.reduceMean(g.mul(hidden, hidden), [-1], true);
  return g.mul(g.div(hidden, g.sqrt(g.add(ms, c.rms_norm_eps))), norm);
}

/** The decoder blocks: hidden states [B, T, H] before the final norm, and each layer's new keys and values. */
export function buildDecoder(
  g: Graph,
  c: ModelConfig,
  W: Map<string, Value>,
  inp: ForwardInputs,
): { hidden: Value; present: ForwardOutputs['present'] } {
  const d = headDim(c);
  const nh = c.num_attention_heads;
  const nkv = c.num_key_value_heads;
  const group = nh / nkv;
  const { B, T } = inp.dims;
  const chunks = inp.attentionChunks ?? 1;
  if (chunks > 1 && (inp.cache || typeof T !== 'number' || T % chunks !== 0)) {
    throw new Error(`buildForward: ${chunks} attention chunks need a static sequence length divisible by them and no cache`);
  }
  const param = (n: string) =>
    W.get(n) ??
    (() => {
      throw new Error(`missing weight input ${n}`);
    })();

  // RoPE tables from position ids: angle = pos · inv_freq, repeated over both halves (HF layout).
  const half = d / 2;
  const invFreq = g.tensor('float32', [1, 1, half], ropeInvFreq(c));
  const bias = biasesOf(c);
  // x·Wᵀ (+ b) for a projection, plus the adapter's scale·(x·A)·B where it has one.
  const proj = (x: Value, name: string, withBias: boolean) => {
    let y = linear(g, x, param(`${name}.weight`), inp.products);
    if (withBias) y = g.add(y, param(`${name}.bias`));
    const ad = inp.lora?.adapters.get(name);
    if (!ad) return y;
    const drop = inp.lora!.dropout;
    const xa = drop ? g.mul(x, loraDropoutMask(g, x, drop, ad.index)) : x;
    return g.add(y, g.mul(g.matmul(g.matmul(xa, ad.a), ad.b), inp.lora!.scale));
  };
  const pos = g.unsqueeze(g.cast(inp.positions, 'float32'), [2]); // [B,T,1]
  const ang = g.mul(pos, invFreq); // [B,T,half]
  const ang2 = g.concat([ang, ang], 2); // [B,T,d]
  const cos = g.unsqueeze(g.cos(ang2), [1]); // [B,1,T,d]
  const sin = g.unsqueeze(g.sin(ang2), [1]);
  const rope = (x: Value) => {
    const x1 = g.slice(x, [0], [half], [3]);
    const x2 = g.slice(x, [half], [d], [3]);
    const rot = g.concat([g.neg(x2), x1], 3);
    return g.add(g.mul(x, cos), g.mul(rot, sin));
  };
  const rmsNorm = (x: Value, w: Value) => {
    const ms = g.reduceMean(g.mul(x, x), [-1], true);
    return g.mul(g.div(x, g.sqrt(g.add(ms, c.rms_norm_eps))), w);
  };
  // [B,T,H·] → [B,heads,T,d]
  const heads = (x: Value, n: number) => g.transpose(g.reshape(x, [0, 0, n, d], [B, T, n, d]), [0, 2, 1, 3]);
  const bias5 = g.unsqueeze(inp.bias, [1]); // [B,1,1,T,T]
  if (!!inp.cache !== !!inp.cacheBias) throw new Error('buildForward: cache and cacheBias go together');
  // The biases as the cached attention keeps its scores, transposed (keys, queries): the new
  // tokens' [B,1,T,T] repeated for each query head of a group, [B,1,T,g·T], and the cache's
  // [B,1,1,C] as [B,1,C,g·T], expanded over the queries once here rather than added in every layer
  // with a broadcast along the innermost axis (g·T numbers), which runs element by element.
  if (inp.local && (!inp.cache || T !== 1)) throw new Error('buildForward: local keys need a cache and one new token per row');
  const groupBiasT =
    inp.cache && !inp.local
      ? g.transpose(g.reshape(g.expand(bias5, [1, 1, group, 1, 1]), [0, 1, -1, 0], [B, 1, '?gT', T]), [0, 1, 3, 2])
      : undefined;
  const expandOverQueries = (cacheBias: Value) => {
    const C = inp.dims.C ?? '?C';
    // g·T from the new tokens' bias (shape ops only: integer arithmetic would run on the CPU provider).
    const gT = groupBiasT ? g.slice(g.shapeOf(groupBiasT), [3], [4], [0]) : g.tensor('int64', [1], [group]);
    return g.expand(g.reshape(cacheBias, [0, 1, -1, 1], [B, 1, C, 1]), g.concat([g.tensor('int64', [3], [1, 1, 1]), gT], 0), [
      B,
      1,
      C,
      '?gT',
    ]);
  };
  const cacheBiasT = inp.cacheBias ? expandOverQueries(inp.cacheBias) : undefined;
  const scale = 1 / Math.sqrt(d);
  // Scaled scores of grouped queries [B,nkv,g,T,d] against transposed keys [B,nkv,d,S], plus a bias.
  const scores = (qs: Value, ksT: Value, b: Value) => g.add(g.mul(g.matmul(qs, g.unsqueeze(ksT, [2])), scale), b);
  const attend = (qs: Value, ksT: Value, vs: Value, b: Value) => g.matmul(g.softmax(scores(qs, ksT, b), -1), g.unsqueeze(vs, [2]));

  const embed = param('model.embed_tokens.weight');
  let x = g.gather(embed, inp.ids, 0); // [B,T,H]
  const present: CacheLayer[] = [];
  const layer = (x: Value, l: number): { x: Value } & CacheLayer => {
    const p = `model.layers.${l}.`;
    const xn = rmsNorm(x, param(`${p}input_layernorm.weight`));
    const q = rope(heads(proj(xn, `${p}self_attn.q_proj`, bias.qkv), nh));
    const k = rope(heads(proj(xn, `${p}self_attn.k_proj`, bias.qkv), nkv));
    const v = heads(proj(xn, `${p}self_attn.v_proj`, bias.qkv), nkv);
    const kT = g.transpose(k, [0, 1, 3, 2]); // [B,nkv,d,T]
    // Grouped-query attention without copying K/V: query heads are grouped under their KV head,
    // [B,nkv,g,T,d] · [B,nkv,1,d,S] → [B,nkv,g,T,S].
    const qg = g.reshape(q, [0, nkv, group, -1, d], [B, nkv, group, T, d]);
    let ctx: Value; // [B,nkv,g,T,d]
    // What the layer hands on as its keys and values: this step's, or with `local` the run's so far and this step's.
    let kept: CacheLayer = { key: k, valueT: g.transpose(v, [0, 1, 3, 2]) };
    if (!inp.cache && chunks > 1) {
      // Causal attention by query chunks: chunk i sees only keys before its end, so the masked
      // upper triangle is mostly never computed ((n+1)/2n of the full scores for n chunks).
      const size = (T as number) / chunks;
      const parts: Value[] = [];
      for (let i = 0; i < chunks; i++) {
        const [a, e] = [i * size, (i + 1) * size];
        const bi = g.slice(bias5, [a, 0], [e, e], [3, 4]); // [B,1,1,size,e]
        parts.push(attend(g.slice(qg, [a], [e], [3]), g.slice(kT, [0], [e], [3]), g.slice(v, [0], [e], [2]), bi));
      }
      ctx = g.concat(parts, 3);
    } else if (!inp.cache) {
      ctx = attend(qg, kT, v, bias5);
    } else {
      // Softmax over [cache slots ‖ new tokens] without concatenating the cache: one max and one
      // normalizer over both score blocks. A KV head's query heads and tokens are the columns of
      // one product with the cache on the left ([B,nkv,S,d] · [B,nkv,d,g·T], then
      // [B,nkv,d,S] · [B,nkv,S,g·T]): each cached key and value is read once per KV head, in
      // place, so the scores are kept transposed, [B,nkv,S,g·T], and reduced over their slots
      // (axis 2). At 8 rows of the 0.5B shape this took the two products from 27 to 18 ms a step.
      const cached = inp.cache[l];
      const q4T = g.transpose(g.reshape(q, [0, nkv, -1, d], [B, nkv, '?gT', d]), [0, 1, 3, 2]); // [B,nkv,d,g·T]
      const scaled = (ks: Value) => g.mul(g.matmul(ks, q4T), scale);
      // With `local`: this run's earlier tokens and this one, all visible to it (T = 1).
      if (inp.local) kept = { key: g.concat([inp.local[l].key, k], 2), valueT: g.concat([inp.local[l].valueT, kept.valueT], 3) };
      const scoresNew = inp.local ? scaled(kept.key) : g.add(scaled(k), groupBiasT!); // [B,nkv,·,g·T]
      const scoresCache = g.add(scaled(cached.key), cacheBiasT!); // [B,nkv,C,g·T]
      const m = g.max(g.reduceMax(scoresCache, [2], true), g.reduceMax(scoresNew, [2], true));
      const eCache = g.exp(g.sub(scoresCache, m));
      const eNew = g.exp(g.sub(scoresNew, m));
      const denom = g.add(g.reduceSum(eCache, [2], true), g.reduceSum(eNew, [2], true));
      const ctxT = g.div(g.add(g.matmul(cached.valueT, eCache), g.matmul(kept.valueT, eNew)), denom); // [B,nkv,d,g·T]
      ctx = g.transpose(ctxT, [0, 1, 3, 2]); // [B,nkv,g·T,d]
    }
    const merged = g.reshape(g.transpose(g.reshape(ctx, [0, nh, -1, d], [B, nh, T, d]), [0, 2, 1, 3]), [0, 0, nh * d], [B, T, nh * d]);
    const mid = g.add(x, proj(merged, `${p}self_attn.o_proj`, bias.o));
    const xn2 = rmsNorm(mid, param(`${p}post_attention_layernorm.weight`));
    const gate = proj(xn2, `${p}mlp.gate_proj`, bias.mlp);
    const up = proj(xn2, `${p}mlp.up_proj`, bias.mlp);
    return { x: g.add(mid, proj(g.mul(g.mul(gate, g.sigmoid(gate)), up), `${p}mlp.down_proj`, bias.mlp)), ...kept };
  };
  if (inp.recomputeLayers && inp.cache) throw new Error('buildForward: recomputeLayers is for training graphs (no cache)');
  for (let l = 0; l < c.num_hidden_layers; l++) {
    const input = x;
    const out = layer(input, l);
    present.push({ key: out.key, valueT: out.valueT });
    x = out.x;
    if (inp.recomputeLayers) {
      // The layer's own parameters and adapters: what its backward pass gives gradients for.
      const prefix = `model.layers.${l}.`;
      const own = [...W].filter(([n]) => n.startsWith(prefix)).map(([, v]) => v);
      for (const [module, ad] of inp.lora?.adapters ?? []) if (module.startsWith(prefix)) own.push(ad.a, ad.b);
      CUSTOM_GRADIENT.set(x.producer!, {
        inputs: [input, ...own],
        rule: (_g, [dy], need) => {
          // The layer again from its input, made to wait for the gradient reaching it, so it runs
          // in the backward pass, not beside the first.
          const again = after(g, input, [dy!]);
          const wrt = [again, ...own.filter((_, i) => need[i + 1])];
          const grads = gradients(g, layer(again, l).x, wrt, dy!);
          // The gradient handed down waits, the same way, for this layer's parameter gradients.
          // Nothing else orders them: ONNX Runtime ran every layer's weight-gradient products
          // after the whole input-gradient chain, so every layer's recomputed activations stayed
          // alive to the end of the pass (at the Llama 3.2 1B shape, 3.2 GB instead of 0.5).
          const ownGrads = grads.slice(1);
          const down = need[0] && ownGrads.length > 0 ? after(g, grads[0], ownGrads) : grads[0];
          let k = 1;
          return [need[0] ? down : null, ...own.map((_, i) => (need[i + 1] ? grads[k++] : null))];
        },
      });
    }
  }
  return { hidden: x, present };
}

/**
 * Which logits an inference graph outputs: `all` [B,T,V]; `rows` [N,V] at the flat positions
 * (b·T + t) of input logits_rows int64 [N]; `none` (a run that only fills the cache); `sample`:
 * no logits, one token drawn per row in the graph (see sampleRows; one new token per row).
 */
export type StepLogits = 'all' | 'rows' | 'none' | 'logprobs' | 'sample';

/**
 * One token per row of logits [N, V], drawn in the graph so that only two numbers per row leave
 * it (at 150k words the logits are 600 KB a row, and the host's passes over them cost as much as
 * the products of a small batch). temperature float [N]: > 0 draws from softmax(logits / t), the
 * first token whose cumulative probability (in vocabulary order) reaches uniform[b] of the total;
 * 0 takes the most likely token (the first of equals). Returns its id int64 [N] and its log-prob
 * float [N] at the row's temperature (at 1 for greedy rows), as Policy's host sampling gives them.
 */
export function sampleRows(g: Graph, logits: Value, temperature: Value, uniform: Value): { ids: Value; logprobs: Value } {
  const hot = g.unsqueeze(g.greater(temperature, 0), [1]); // [N,1]
  const z = g.div(logits, g.where(hot, g.unsqueeze(temperature, [1]), 1));
  const shifted = g.sub(z, g.reduceMax(z, [-1], true));
  const e = g.exp(shifted);
  const lp = g.sub(shifted, g.log(g.reduceSum(e, [-1], true))); // log-softmax, as headLogSoftmax
  const cum = g.cumSum(e, 1);
  const total = g.reduceMax(cum, [-1], true); // the last entry (a sum of non-negative terms)
  // Tiny floor: a draw of exactly 0 must not pick a leading token of probability 0.
  const target = g.max(g.mul(g.unsqueeze(uniform, [1]), total), 1e-30);
  const reached = g.cast(g.greaterOrEqual(cum, target), 'float32');
  const ids = g.argMax(g.where(hot, reached, lp), 1);
  const logprobs = g.squeeze(g.gatherElements(lp, g.unsqueeze(ids, [1]), 1), [1]);
  return { ids, logprobs };
}

/** Positions per chunk of a scoring graph's head ('logprobs'): the host pads the positions to a multiple. */
export const SCORE_CHUNK_ROWS = 128;
/** Rows a log-prob scoring run takes at once (TrainablePolicy.logprobs): bounds a layer's attention held at once. */
export const SCORING_ROWS_PER_RUN = 8;

/**
 * The output projection's weight [V, H]: the embedding when tied, else lm_head (the logits are
 * x·wᵀ). Chunked heads multiply by it through Gemm's transpose flag, so no transposed copy of a
 * 150k-word matrix is made.
 */
export function headWeight(c: ModelConfig, W: Map<string, Value>): Value {
  const name = c.tie_word_embeddings ? 'model.embed_tokens.weight' : 'lm_head.weight';
  const w = W.get(name);
  if (!w) throw new Error(`missing weight input ${name}`);
  return w;
}

/** log-softmax of x·headᵀ / temperature over the vocabulary, for rows x [n, H] and the head [V, H]. */
export function headLogSoftmax(g: Graph, x: Value, head: Value, temperature: Value): Value {
  const z = g.div(g.gemm(x, head, { transB: true }), temperature);
  const shifted = g.sub(z, g.reduceMax(z, [-1], true));
  return g.sub(shifted, g.log(g.reduceSum(g.exp(shifted), [-1], true)));
}

/**
 * The inference graphs (logits as `logits` says, see StepLogits). `prefill`: the whole prompt (left-padded rows), inputs weights,
 * input_ids and position_ids int64 [B,T], attention_mask float [B,T] (1 real, 0 padding) and
 * token_index int64 [T] (0..T−1). `decode`: T new tokens on top of a KV cache, inputs weights,
 * input_ids, position_ids, attn_bias float [B,1,T,T] (0 visible, MASKED not), cache.{l}.key
 * [B,nkv,C,d], cache.{l}.value [B,nkv,d,C] (values transposed) and cache_bias float [B,1,1,C]
 * (0 for a filled slot holding a real token, MASKED otherwise). Both output logits [B,T,V] and
 * this step's keys and values, new.{l}.key [B,nkv,T,d] and new.{l}.value [B,nkv,d,T], which the
 * caller writes into its cache (Policy). `products`: the products' form (ProductForm; 'packed'
 * declares the weights as inputs too, for the caller to hold them in the session with
 * Graph.holdInput).
 */
export function buildStepGraph(
  c: ModelConfig,
  kind: 'prefill' | 'decode',
  lora?: LoraShape,
  logits: StepLogits = 'all',
  products: ProductForm = 'one-row',
  cacheOut = false,
): Graph {
  const g = Graph.create(
    `${familyOf(c)}_${kind}${logits === 'all' ? '' : `_${logits}`}${PRODUCT_SUFFIX[products]}${cacheOut ? '_cache_out' : ''}`,
  );
  const W = declareParams(g, c);
  const adapter = lora ? declareLora(g, c, lora) : undefined;
  const d = headDim(c);
  const nkv = c.num_key_value_heads;
  const ids = g.input('input_ids', 'int64', ['B', 'T']);
  const positions = g.input('position_ids', 'int64', ['B', 'T']);
  let bias: Value;
  let cache: CacheLayer[] | undefined;
  let cacheBias: Value | undefined;
  if (kind === 'prefill') {
    // The B·T·T bias is built here from the masks (the host would otherwise build and feed it):
    // causal from the token indices, padding from attention_mask.
    const mask = g.input('attention_mask', 'float32', ['B', 'T']);
    const idx = g.input('token_index', 'int64', ['T']); // 0..T−1
    const future = g.greater(g.unsqueeze(idx, [0]), g.unsqueeze(idx, [1])); // [T,T]: key after query
    const causal = g.where(future, g.scalar(MASKED, 'float32'), g.scalar(0, 'float32'));
    bias = g.add(g.unsqueeze(causal, [0, 1]), keyPaddingBias(g, mask)); // [B,1,T,T]
  } else {
    // Decode steps are a handful of tokens: their small biases come from the host, the cache's
    // one ([B,1,1,C]: every new token sees every valid slot) kept up to date slot by slot.
    bias = g.input('attn_bias', 'float32', ['B', 1, 'T', 'T']);
    cacheBias = g.input('cache_bias', 'float32', ['B', 1, 1, 'C']);
    cache = Array.from({ length: c.num_hidden_layers }, (_, l) => ({
      key: g.input(`cache.${l}.key`, 'float32', ['B', nkv, 'C', d]),
      valueT: g.input(`cache.${l}.value`, 'float32', ['B', nkv, d, 'C']),
    }));
  }
  const left = products !== 'one-row' ? { form: products, shapes: rowShapes(g, g.shapeOf(ids)) } : undefined;
  const out = buildDecoder(g, c, W, {
    ids,
    positions,
    bias,
    cache,
    cacheBias,
    ...(left ? { products: left } : {}),
    ...(adapter ? { lora: adapter } : {}),
    dims: { B: 'B', T: 'T', C: 'C' },
  });
  if (logits === 'all') g.output(lmHead(g, c, W, out.hidden, left), 'logits');
  else if (logits === 'rows') {
    // The head only where logits are wanted (a prompt's last token): at 150k words it is a
    // quarter of a 0.5B prefill, and [B,T,V] floats the host would copy out.
    const rows = g.input('logits_rows', 'int64', ['N']);
    const flat = g.reshape(out.hidden, [-1, c.hidden_size], ['?BT', c.hidden_size]);
    g.output(lmHead(g, c, W, g.gather(flat, rows, 0)), 'logits');
  } else if (logits === 'sample') {
    // Decode steps of one token per row: each row's token drawn here (sampleRows).
    const temperature = g.input('sample_temperature', 'float32', ['B']);
    const uniform = g.input('sample_uniform', 'float32', ['B']);
    const flat = g.reshape(lmHead(g, c, W, out.hidden, left), [-1, c.vocab_size], ['B', c.vocab_size]);
    const drawn = sampleRows(g, flat, temperature, uniform);
    g.output(drawn.ids, 'sampled_ids');
    g.output(drawn.logprobs, 'sampled_logprobs');
  } else if (logits === 'logprobs') {
    // Scoring: the log-prob of logprob_targets[i] after flat position logprob_rows[i] (M of them,
    // a multiple of SCORE_CHUNK_ROWS), at `temperature`, the head run chunk by chunk in a Loop, so
    // no [B, T, V] logits exist; no keys or values come out.
    const rows = g.input('logprob_rows', 'int64', ['M']);
    const targets = g.input('logprob_targets', 'int64', ['M']);
    const temperature = g.input('temperature', 'float32', []);
    const H = c.hidden_size;
    const flat = g.reshape(out.hidden, [-1, H], ['?BT', H]);
    const x = finalNorm(g, c, W, g.gather(flat, rows, 0));
    const head = headWeight(c, W);
    const x3 = g.reshape(x, [-1, SCORE_CHUNK_ROWS, H], ['K', SCORE_CHUNK_ROWS, H]);
    const t3 = g.reshape(targets, [-1, SCORE_CHUNK_ROWS], ['K', SCORE_CHUNK_ROWS]);
    const K = g.gather(g.shapeOf(x3), g.scalar(0, 'int64'), 0);
    const lp = g.loop(K, [], (b, i) => {
      const lsm = headLogSoftmax(b, b.gather(x3, i, 0), head, temperature);
      return { carried: [], scan: [b.squeeze(b.gatherElements(lsm, b.unsqueeze(b.gather(t3, i, 0), [1]), 1), [1])] };
    });
    g.output(g.reshape(lp.scan[0], [-1], ['M']), 'logprobs');
  }
  if (logits !== 'logprobs') {
    out.present.forEach((p, l) => {
      g.output(p.key, `new.${l}.key`);
      g.output(p.valueT, `new.${l}.value`);
    });
  }
  if (cacheOut && cache) {
    // The whole cache with this step's keys and values in slots cache_slot.. (the caller's
    // `filled`): a provider that keeps tensors on the device feeds it back to the next step, so
    // the cache crosses from the host once per round instead of every step.
    const slot = g.input('cache_slot', 'int64', [1]);
    const T = g.gather(g.shapeOf(ids), g.tensor('int64', [1], [1]), 0); // [1]
    const tail = g.add(slot, T);
    const end = g.tensor('int64', [1], [2 ** 53]);
    const zero = g.tensor('int64', [1], [0]);
    const put = (old: Value, fresh: Value, axis: number, name: string) => {
      const piece = (from: Value, to: Value) =>
        g.node(
          'Slice',
          [old, from, to, g.tensor('int64', [1], [axis])],
          {},
          { outputs: [{ dtype: 'float32', shape: old.shape.map((d, i) => (i === axis ? `?${name}_${i}` : d)) }] },
        )[0];
      g.output(g.concat([piece(zero, slot), fresh, piece(tail, end)], axis), name);
    };
    cache.forEach((k, l) => {
      put(k.key, out.present[l].key, 2, `cache_out.${l}.key`);
      put(k.valueT, out.present[l].valueT, 3, `cache_out.${l}.value`);
    });
  }
  return g;
}

/**
 * K decode steps in one run (an ONNX Loop), each row's next token drawn in the graph
 * (sampleRows) and fed to the next step. On a GPU provider, whose every run copies the weights
 * in from the host, K steps share one copy. Inputs: the weights (and adapter), the cache as the
 * decode step graph takes it (cache.{l}.key/value, cache_bias), input_ids and position_ids int64
 * [B, 1] (each row's token not yet fed and its position), sample_temperature float [B] and
 * sample_uniform float [K, B] (row b's draw at step k; K is its first dimension). Outputs
 * sampled_ids int64 [K, B] and sampled_logprobs float [K, B] (the token drawn at step k and its
 * log-prob), new.{l}.key [B, nkv, K, d] and new.{l}.value [B, nkv, d, K]: the keys and values of
 * the K tokens fed (the input token, then the first K − 1 drawn). Every row runs all K steps; the
 * caller keeps what comes before a row's stop.
 */
export function buildDecodeLoopGraph(c: ModelConfig, lora?: LoraShape, products: ProductForm = 'one-row'): Graph {
  const g = Graph.create(`${familyOf(c)}_decode_loop${PRODUCT_SUFFIX[products]}`);
  const W = declareParams(g, c);
  const adapter = lora ? declareLora(g, c, lora) : undefined;
  const d = headDim(c);
  const nkv = c.num_key_value_heads;
  const L = c.num_hidden_layers;
  const ids0 = g.input('input_ids', 'int64', ['B', 1]);
  const pos0 = g.input('position_ids', 'int64', ['B', 1]);
  const cacheBias = g.input('cache_bias', 'float32', ['B', 1, 1, 'C']);
  const cache = Array.from({ length: L }, (_, l) => ({
    key: g.input(`cache.${l}.key`, 'float32', ['B', nkv, 'C', d]),
    valueT: g.input(`cache.${l}.value`, 'float32', ['B', nkv, d, 'C']),
  }));
  const temperature = g.input('sample_temperature', 'float32', ['B']);
  const uniform = g.input('sample_uniform', 'float32', ['K', 'B']);
  const K = g.gather(g.shapeOf(uniform), g.scalar(0, 'int64'), 0);
  // This run's tokens so far, per layer: none yet (a slice of the cache of length 0), declared
  // of a symbolic length: the loop grows them, and ONNX Runtime plans buffers by declared shapes.
  const n = g.freshDim();
  const empty = cache.flatMap((kv) => [
    g.reshape(g.slice(kv.key, [0], [0], [2]), [0, 0, 0, 0], ['B', nkv, n, d]),
    g.reshape(g.slice(kv.valueT, [0], [0], [3]), [0, 0, 0, 0], ['B', nkv, d, n]),
  ]);
  const noBias = g.tensor('float32', [1, 1, 1, 1], [0]); // not read with `local`
  const looped = g.loop(K, [ids0, pos0, ...empty], (b, step, [ids, pos, ...kv]) => {
    const local = Array.from({ length: L }, (_, l) => ({ key: kv[2 * l], valueT: kv[2 * l + 1] }));
    const left = products !== 'one-row' ? { form: products, shapes: rowShapes(b, b.shapeOf(ids)) } : undefined;
    const out = buildDecoder(b, c, W, {
      ids,
      positions: pos,
      bias: noBias,
      cache,
      cacheBias,
      local,
      ...(left ? { products: left } : {}),
      ...(adapter ? { lora: adapter } : {}),
      dims: { B: 'B', T: 1, C: 'C' },
    });
    const logits = b.reshape(lmHead(b, c, W, out.hidden, left), [-1, c.vocab_size], ['B', c.vocab_size]);
    const drawn = sampleRows(b, logits, temperature, b.gather(uniform, step, 0));
    return {
      carried: [b.unsqueeze(drawn.ids, [1]), b.add(pos, b.scalar(1, 'int64')), ...out.present.flatMap((p) => [p.key, p.valueT])],
      scan: [drawn.ids, drawn.logprobs],
    };
  });
  g.output(looped.scan[0], 'sampled_ids');
  g.output(looped.scan[1], 'sampled_logprobs');
  for (let l = 0; l < L; l++) {
    g.output(looped.carried[2 + 2 * l], `new.${l}.key`);
    g.output(looped.carried[3 + 2 * l], `new.${l}.value`);
  }
  return g;
}
