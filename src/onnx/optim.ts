// AdamW and global-norm gradient clipping as ONNX graph ops, with PyTorch's semantics
// (torch.optim.AdamW, torch.nn.utils.clip_grad_norm_). Hyperparameters are graph values.
import { Graph, Value } from './graph';

/** Scalar hyperparameter values (graph inputs, so changing them never rebuilds a graph). */
export interface AdamWHyper {
  lr: Value;
  beta1: Value;
  beta2: Value;
  eps: Value;
  weightDecay: Value;
}

/**
 * Global L2 norm of all gradients and the gradients scaled so that norm <= maxNorm
 * (coefficient maxNorm / (norm + 1e-6), capped at 1, as in PyTorch). maxNorm <= 0 disables clipping.
 */
export function clipByGlobalNorm(g: Graph, grads: readonly Value[], maxNorm: Value): { grads: Value[]; norm: Value; scale: Value } {
  const { norm, scale } = clipCoefficient(g, grads, maxNorm);
  return { grads: grads.map((d) => g.mul(d, scale)), norm, scale };
}

/** The global norm and the clipping coefficient alone (to fold into the optimizer's scalars). */
export function clipCoefficient(g: Graph, grads: readonly Value[], maxNorm: Value): { norm: Value; scale: Value } {
  let sq: Value | undefined;
  for (const d of grads) {
    const s = g.reduceSumSquare(d, undefined, false);
    sq = sq ? g.add(sq, s) : s;
  }
  const norm = g.sqrt(sq!);
  const coef = g.min(g.div(maxNorm, g.add(norm, 1e-6)), 1);
  const scale = g.where(g.greater(maxNorm, 0), coef, 1);
  return { norm, scale };
}

/**
 * One AdamW update of `gradScale`·grads (the clipping coefficient; default 1). `step` is the number of updates done before this one (float scalar); the
 * returned step is step + 1. `decay[i]` says whether weight decay applies to params[i].
 *
 *   t = step + 1; p ← p·(1 − lr·wd); m ← β1·m + (1 − β1)·g; v ← β2·v + (1 − β2)·g²
 *   p ← p − lr/(1 − β1ᵗ) · m / (√v / √(1 − β2ᵗ) + ε)
 */
export function adamwStep(
  g: Graph,
  params: readonly Value[],
  grads: readonly Value[],
  m: readonly Value[],
  v: readonly Value[],
  step: Value,
  h: AdamWHyper,
  decay: readonly boolean[],
  gradScale?: Value,
): { params: Value[]; m: Value[]; v: Value[]; step: Value } {
  const t = g.add(step, 1);
  const bc1 = g.sub(1, g.pow(h.beta1, t));
  const sqrtBc2 = g.sqrt(g.sub(1, g.pow(h.beta2, t)));
  // m / (√v/√bc2 + ε) · lr/bc1 = m / (√v + ε·√bc2) · lr·√bc2/bc1: the bias corrections and the
  // learning rate become two scalars, so the full-size work is 13 elementwise passes (12 without
  // decay) instead of 14. This is memory-bound work over every parameter, once per step; kept per
  // parameter tensor on purpose (tensors of ≤ 0.8 MB stay in cache between the passes: one flat
  // buffer for all parameters measured ~7% slower per training step on CPU).
  const stepSize = g.div(g.mul(h.lr, sqrtBc2), bc1);
  const epsHat = g.mul(h.eps, sqrtBc2);
  // A gradient scale (clipping coefficient) is folded into these scalars: one less full-size Mul per param.
  const oneMinusB1 = gradScale ? g.mul(g.sub(1, h.beta1), gradScale) : g.sub(1, h.beta1);
  const oneMinusB2 = gradScale ? g.mul(g.sub(1, h.beta2), g.mul(gradScale, gradScale)) : g.sub(1, h.beta2);
  const decayFactor = g.sub(1, g.mul(h.lr, h.weightDecay));
  const out = { params: [] as Value[], m: [] as Value[], v: [] as Value[], step: t };
  params.forEach((p, i) => {
    const d = grads[i];
    const m1 = g.add(g.mul(m[i], h.beta1), g.mul(d, oneMinusB1));
    const v1 = g.add(g.mul(v[i], h.beta2), g.mul(g.mul(d, d), oneMinusB2));
    const update = g.div(m1, g.add(g.sqrt(v1), epsHat));
    const p0 = decay[i] ? g.mul(p, decayFactor) : p;
    out.params.push(g.sub(p0, g.mul(update, stepSize)));
    out.m.push(m1);
    out.v.push(v1);
  });
  return out;
}

/** The same update on plain arrays, in float64: the reference the graph is tested against. */
export function adamwReference(
  p: Float64Array,
  grad: ArrayLike<number>,
  m: Float64Array,
  v: Float64Array,
  step: number,
  h: { lr: number; beta1: number; beta2: number; eps: number; weightDecay: number },
  decay: boolean,
): void {
  const t = step + 1;
  const bc1 = 1 - h.beta1 ** t;
  const bc2 = 1 - h.beta2 ** t;
  for (let i = 0; i < p.length; i++) {
    if (decay) p[i] *= 1 - h.lr * h.weightDecay;
    m[i] = h.beta1 * m[i] + (1 - h.beta1) * grad[i];
    v[i] = h.beta2 * v[i] + (1 - h.beta2) * grad[i] * grad[i];
    const denom = Math.sqrt(v[i]) / Math.sqrt(bc2) + h.eps;
    p[i] -= (h.lr / bc1) * (m[i] / denom);
  }
}
