// Reference policy losses as plain array code (docs/credit-assignment.md "Policy losses"). The ONNX
// training graph is checked against these numbers, so they favour clarity over speed.
//
// Shapes: every per-token array is a flat row-major [batch, seq] buffer (length batch*seq);
// row b is one turn (one action sequence). `mask[b*seq+t]` is a per-token weight: 1 for action
// tokens and 0 for prompt, observation and padding tokens in RL; masked (0) tokens never change
// any output. Means over tokens are weighted, Σ w·x / Σ w, as in the ONNX training graph.
// `advantages` is either per row ([batch]) or per token ([batch, seq]).
//
// Loss = pgLoss + klCoef * kl − entCoef * entropy + replayCoef * replay, where kl and entropy are
// token means over action tokens and replay is the weighted mean NLL of the replay tokens
// (demonstrations trained beside the RL rows, their weights in `replayMask`). `gradLogp` is
// d loss / d logp per token (0 where neither mask nor replayMask weighs a token); the entropy
// term has no logp gradient here because entropy is passed in as its own input
// (d loss / d entropy[t] = −entCoef / #action tokens).
import { TurnwiseError } from '../../src/core/errors';
import { GSPO_LOG_RATIO_CAP, lossHyper, lossName, RL_LOSS_NAMES, type RlLossName } from '../../src/core/losses';

export { GSPO_LOG_RATIO_CAP };

export type Numbers = ArrayLike<number>;

export interface PolicyLossInput {
  batch: number;
  seq: number;
  /** log π_θ(token) of each taken token, [batch, seq]. */
  logp: Numbers;
  /** log π_old(token) at rollout time, [batch, seq]. */
  oldLogp: Numbers;
  /** [batch] (one advantage per turn) or [batch, seq]. */
  advantages: Numbers;
  /** Per-token weight ≥ 0: 1 = action token, 0 = everything else, [batch, seq]. */
  mask: Numbers;
  /** log π_ref(token), [batch, seq]; required when klCoef > 0. */
  refLogp?: Numbers;
  /** Per-token entropy of π_θ's distribution, [batch, seq]; required when entCoef > 0 (see tokenEntropy). */
  entropy?: Numbers;
  /** Per-token weight ≥ 0 of replay (demonstration) tokens, [batch, seq]; required when replayCoef > 0. */
  replayMask?: Numbers;
  /** Per-token factor on the clip range, [batch, seq] (ppo-token): bounds 1 − clipLow·s, 1 + clipHigh·s. Default 1. */
  clipScale?: Numbers;
}

export interface PolicyLossParams {
  /** ratio lower bound is 1 − clipLow. Default: POLICY_LOSSES in core/losses.ts. */
  clipLow?: number;
  /** ratio upper bound is 1 + clipHigh. Default: POLICY_LOSSES. */
  clipHigh?: number;
  /** weight of the k3 KL estimate to the reference policy. Default: POLICY_LOSSES (0). */
  klCoef?: number;
  /** weight of the entropy bonus (subtracted). Default: POLICY_LOSSES (0). */
  entCoef?: number;
  /** weight of the replay tokens' mean NLL. Default: POLICY_LOSSES (0). */
  replayCoef?: number;
}

export interface PolicyLossOutput {
  /** pgLoss + klCoef·kl − entCoef·entropy + replayCoef·replay. */
  loss: number;
  pgLoss: number;
  /** ppo-token: fraction of action tokens whose clipped term was taken; gspo-seq: fraction of turns. */
  clipFrac: number;
  /** token mean of (oldLogp − logp) over action tokens (verl's ppo_kl). */
  approxKl: number;
  /** token mean of k3 = exp(ref − logp) − (ref − logp) − 1; 0 when no refLogp. */
  kl: number;
  /** token mean of the entropy input; 0 when none. */
  entropy: number;
  /** Σ r·(−logp) / Σ r over the replay weights r; 0 when none. */
  replay: number;
  /** d loss / d logp, [batch, seq]. */
  gradLogp: Float64Array;
}

export type PolicyLossFn = (input: PolicyLossInput, params?: PolicyLossParams) => PolicyLossOutput;

function check(name: RlLossName, input: PolicyLossInput, params: PolicyLossParams | undefined): Required<PolicyLossParams> {
  const { batch, seq } = input;
  const n = batch * seq;
  const bad = (what: string): never => {
    throw new TurnwiseError('invalid-input', `policy loss: ${what}`, {
      hint: 'pass flat [batch, seq] arrays (see test/support/reference-losses.ts)',
    });
  };
  if (!Number.isInteger(batch) || !Number.isInteger(seq) || batch < 0 || seq < 0)
    bad(`batch and seq must be non-negative integers, got ${batch}, ${seq}`);
  for (const [name, arr] of [
    ['logp', input.logp],
    ['oldLogp', input.oldLogp],
    ['mask', input.mask],
  ] as const) {
    if (arr.length !== n) bad(`${name} has length ${arr.length}, expected batch*seq = ${n}`);
  }
  if (input.advantages.length !== batch && input.advantages.length !== n) {
    bad(`advantages has length ${input.advantages.length}, expected batch = ${batch} or batch*seq = ${n}`);
  }
  for (let i = 0; i < n; i++)
    if (!(input.mask[i] >= 0) || !Number.isFinite(input.mask[i])) bad(`mask[${i}] is ${input.mask[i]}: weights must be finite and ≥ 0`);
  const p = lossHyper(name, params);
  if (p.klCoef !== 0 && (!input.refLogp || input.refLogp.length !== n)) bad('klCoef > 0 needs refLogp of length batch*seq');
  if (p.entCoef !== 0 && (!input.entropy || input.entropy.length !== n)) bad('entCoef > 0 needs entropy of length batch*seq');
  if (input.refLogp && input.refLogp.length !== n) bad(`refLogp has length ${input.refLogp.length}, expected ${n}`);
  if (input.entropy && input.entropy.length !== n) bad(`entropy has length ${input.entropy.length}, expected ${n}`);
  if (p.replayCoef !== 0 && !input.replayMask) bad('replayCoef > 0 needs replayMask of length batch*seq');
  if (input.replayMask) {
    if (input.replayMask.length !== n) bad(`replayMask has length ${input.replayMask.length}, expected ${n}`);
    for (let i = 0; i < n; i++)
      if (!(input.replayMask[i] >= 0) || !Number.isFinite(input.replayMask[i]))
        bad(`replayMask[${i}] is ${input.replayMask[i]}: weights must be finite and ≥ 0`);
  }
  return p;
}

function weightSum(mask: Numbers, from: number, to: number): number {
  let s = 0;
  for (let i = from; i < to; i++) s += mask[i];
  return s;
}

function advantageAt(input: PolicyLossInput, b: number, i: number): number {
  return input.advantages.length === input.batch * input.seq ? input.advantages[i] : input.advantages[b];
}

/** KL (k3), approxKl and entropy token means plus the KL part of the gradient; shared by both losses. */
function regularizers(input: PolicyLossInput, p: Required<PolicyLossParams>, nTok: number, grad: Float64Array) {
  let approx = 0;
  let kl = 0;
  let ent = 0;
  const n = input.batch * input.seq;
  for (let i = 0; i < n; i++) {
    const w = input.mask[i];
    if (!w) continue;
    approx += w * (input.oldLogp[i] - input.logp[i]);
    if (input.refLogp) {
      const d = input.refLogp[i] - input.logp[i];
      kl += w * (Math.exp(d) - d - 1);
      if (p.klCoef !== 0) grad[i] += (w * p.klCoef * (1 - Math.exp(d))) / nTok;
    }
    if (input.entropy) ent += w * input.entropy[i];
  }
  const denom = nTok > 0 ? nTok : 1;
  return { approxKl: approx / denom, kl: kl / denom, entropy: ent / denom, replay: replayTerm(input, p, grad) };
}

/** The replay tokens' weighted mean NLL, adding replayCoef times its gradient to `grad`. */
function replayTerm(input: PolicyLossInput, p: Required<PolicyLossParams>, grad: Float64Array): number {
  const r = input.replayMask;
  if (!r) return 0;
  const n = input.batch * input.seq;
  const total = weightSum(r, 0, n);
  if (!(total > 0)) return 0;
  let nll = 0;
  for (let i = 0; i < n; i++) {
    if (!r[i]) continue;
    nll -= r[i] * input.logp[i];
    grad[i] -= (p.replayCoef * r[i]) / total;
  }
  return nll / total;
}

/**
 * `ppo-token`: PPO/GRPO clipped surrogate per token, mean over all action tokens of the batch
 * (verl's "token-mean"). ratio_t = exp(logp_t − oldLogp_t);
 * l_t = max(−A·ratio_t, −A·clip(ratio_t, 1 − clipLow, 1 + clipHigh)).
 */
export const ppoTokenLoss: PolicyLossFn = (input, params) => {
  const p = check('ppo-token', input, params);
  const n = input.batch * input.seq;
  const grad = new Float64Array(n);
  const nTok = weightSum(input.mask, 0, n);
  let pg = 0;
  let clipped = 0;
  for (let b = 0; b < input.batch; b++) {
    for (let t = 0; t < input.seq; t++) {
      const i = b * input.seq + t;
      const w = input.mask[i];
      if (!w) continue;
      const a = advantageAt(input, b, i);
      const ratio = Math.exp(input.logp[i] - input.oldLogp[i]);
      const c = input.clipScale?.[i] ?? 1;
      const s = clippedSurrogate(a, ratio, { clipLow: p.clipLow * c, clipHigh: p.clipHigh * c });
      pg += w * s.loss;
      if (s.clipped) clipped += w;
      else grad[i] = (w * s.loss) / nTok; // d(−A·e^{logp−old})/d logp = −A·ratio
    }
  }
  const reg = regularizers(input, p, nTok, grad);
  const pgLoss = nTok ? pg / nTok : 0;
  return {
    loss: pgLoss + p.klCoef * reg.kl - p.entCoef * reg.entropy + p.replayCoef * reg.replay,
    pgLoss,
    clipFrac: nTok ? clipped / nTok : 0,
    ...reg,
    gradLogp: grad,
  };
};

/**
 * The PPO clipped surrogate for one ratio: max(−A·ratio, −A·clip(ratio, 1 − clipLow, 1 + clipHigh)).
 * `clipped` is true when the clipped branch wins (its gradient with respect to the ratio is 0).
 */
function clippedSurrogate(a: number, ratio: number, p: { clipLow: number; clipHigh: number }): { loss: number; clipped: boolean } {
  const l1 = -a * ratio;
  const l2 = -a * Math.min(Math.max(ratio, 1 - p.clipLow), 1 + p.clipHigh);
  return l2 > l1 ? { loss: l2, clipped: true } : { loss: l1, clipped: false };
}

/**
 * `gspo-seq`: one ratio per turn, ratio_b = exp(min(mean_t∈action(logp − oldLogp), 10));
 * l_b = max(−A_b·ratio_b, −A_b·clip(ratio_b, 1 − clipLow, 1 + clipHigh)); pgLoss = mean over turns
 * that have at least one action token. Per-token advantages are averaged over the turn's action tokens.
 */
export const gspoSeqLoss: PolicyLossFn = (input, params) => {
  const p = check('gspo-seq', input, params);
  const n = input.batch * input.seq;
  const grad = new Float64Array(n);
  const nTok = weightSum(input.mask, 0, n);
  let nSeq = 0;
  for (let b = 0; b < input.batch; b++) if (weightSum(input.mask, b * input.seq, (b + 1) * input.seq) > 0) nSeq++;
  let pg = 0;
  let clipped = 0;
  for (let b = 0; b < input.batch; b++) {
    let cnt = 0;
    let sum = 0;
    let aSum = 0;
    for (let t = 0; t < input.seq; t++) {
      const i = b * input.seq + t;
      const w = input.mask[i];
      if (!w) continue;
      cnt += w;
      sum += w * (input.logp[i] - input.oldLogp[i]);
      aSum += w * advantageAt(input, b, i);
    }
    if (!(cnt > 0)) continue;
    const a = aSum / cnt;
    const s = sum / cnt;
    const ratio = Math.exp(Math.min(s, GSPO_LOG_RATIO_CAP));
    const sur = clippedSurrogate(a, ratio, p);
    pg += sur.loss;
    if (sur.clipped) clipped++;
    else if (s < GSPO_LOG_RATIO_CAP) {
      for (let t = 0; t < input.seq; t++) {
        const i = b * input.seq + t;
        if (input.mask[i]) grad[i] = (input.mask[i] * sur.loss) / cnt / nSeq;
      }
    }
  }
  const reg = regularizers(input, p, nTok, grad);
  const pgLoss = nSeq ? pg / nSeq : 0;
  return {
    loss: pgLoss + p.klCoef * reg.kl - p.entCoef * reg.entropy + p.replayCoef * reg.replay,
    pgLoss,
    clipFrac: nSeq ? clipped / nSeq : 0,
    ...reg,
    gradLogp: grad,
  };
};

/**
 * Entropy of softmax(logits) per position: logits is [rows, vocab] flat; returns [rows].
 * H = logsumexp(z) − Σ softmax(z)·z, computed with the max subtracted for stability.
 */
export function tokenEntropy(logits: Numbers, rows: number, vocab: number): Float64Array {
  if (logits.length !== rows * vocab) {
    throw new TurnwiseError('invalid-input', `tokenEntropy: logits has length ${logits.length}, expected rows*vocab = ${rows * vocab}`);
  }
  const out = new Float64Array(rows);
  for (let r = 0; r < rows; r++) {
    let max = -Infinity;
    for (let v = 0; v < vocab; v++) max = Math.max(max, logits[r * vocab + v]);
    let z = 0;
    let zx = 0;
    for (let v = 0; v < vocab; v++) {
      const x = logits[r * vocab + v] - max;
      const e = Math.exp(x);
      z += e;
      zx += e * x;
    }
    out[r] = Math.log(z) - zx / z;
  }
  return out;
}

/** Per-token k3 KL estimate exp(ref − logp) − (ref − logp) − 1 (≥ 0, unbiased for KL(π‖π_ref)). */
export function klK3(logp: number, refLogp: number): number {
  const d = refLogp - logp;
  return Math.exp(d) - d - 1;
}

/** The reference of every RL loss in core/losses.ts's table (sft is a plain weighted NLL mean). */
const LOSSES: Record<RlLossName, PolicyLossFn> = {
  'ppo-token': ppoTokenLoss,
  'gspo-seq': gspoSeqLoss,
};

export function policyLossNames(): RlLossName[] {
  return [...RL_LOSS_NAMES];
}

/** The loss registered as `name`; unknown names raise, listing the valid ones. */
export function getPolicyLoss(name: string): PolicyLossFn {
  return LOSSES[lossName(name, RL_LOSS_NAMES)];
}
