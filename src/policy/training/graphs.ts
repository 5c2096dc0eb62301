// Training graphs: the Qwen2 forward, token log-probs and a loss (ppo-token | gspo-seq | sft
// cross-entropy, optional k3 KL and entropy bonus), handed to src/onnx's buildTrainingGraph, which
// adds gradients, global-norm clipping and AdamW, K optimizer steps per run in an ONNX Loop.
//
// Per-token arrays are [B, T] and aligned with input_ids: value t belongs to token ids[t], whose
// log-prob comes from the logits at t − 1. Column 0 therefore never carries loss (no logit
// predicts the first token). loss_mask is a per-token weight (0 = no loss): the losses are
// weighted token means Σ w·l / Σ w (sft: Σ w·nll / Σ w), so 1 on action tokens and e.g. 0.3 on
// prompt tokens trains the prompt at 0.3 of an action token's weight. action_mask (0/1) picks the
// tokens of the `action_loss` metric, the mean NLL of the actions alone. With `replay`, replay_mask
// weighs demonstration tokens trained beside the RL rows: replay_coef · Σ r·nll / Σ r joins the
// loss (PPO-ptx), and the RL terms, which read loss_mask, do not see those tokens.
//
// Packed rows (`packed`): several examples per row, told apart by segment_ids (int64 [B, T],
// 0 = padding, one positive id per example, contiguous). A token attends only to earlier tokens
// of its own segment, and position_ids (int64 [B, T], fed) restart at 0 at each segment start.
// The trainer zeroes the loss weight of each segment's first token, as of column 0.
import { TurnwiseError } from '../../core/errors';
import { GSPO_LOG_RATIO_CAP, LOSS_NAMES, POLICY_LOSSES, type LossName } from '../../core/losses';
import { CUSTOM_GRADIENT, Graph, type Value } from '../../onnx';
import { buildTrainingGraph, type BatchSpec, type ForwardBuilder, type TrainingGraphSpec } from '../../onnx/training';
import { type ModelConfig } from '../model/config';
import {
  buildDecoder,
  finalNorm,
  graphParamSpecs,
  headLogSoftmax,
  headWeight,
  keyPaddingBias,
  linear,
  loraGraphSpecs,
  loraInputs,
  MASKED,
  type LoraShape,
} from '../model/graphs';

/** The losses of core/losses.ts's table; each has a graph builder in PG_LOSSES below. */
export type TrainLoss = LossName;
export const TRAIN_LOSSES: readonly TrainLoss[] = LOSS_NAMES;
export { GSPO_LOG_RATIO_CAP };

export interface TrainGraphOptions {
  loss: TrainLoss;
  batch: number;
  seq: number;
  /** Add klCoef · k3 KL to the reference policy to the loss (needs ref_logp). */
  kl?: boolean;
  /** Subtract entCoef · mean entropy from the loss. */
  entropy?: boolean;
  /**
   * Decoupled weight decay on the matrices (default true). False builds the graph without the
   * decay multiply: one full-size pass over the parameters less per step, for weight_decay 0.
   */
  weightDecay?: boolean;
  /** Packed rows: segment_ids and position_ids replace attention_mask (see the file header). */
  packed?: boolean;
  /** Add replay_coef · the weighted mean NLL of the replay_mask tokens to the loss. */
  replay?: boolean;
  /** Take clip_scale [B, T]: a per-token factor on the clip range (token losses only). */
  clipScale?: boolean;
  /**
   * Train a LoRA adapter of this layout instead of the model: its A and B are the parameters
   * (with gradients and AdamW moments), the base weights frozen inputs fed with the batch.
   */
  lora?: LoraShape;
  /**
   * With `lora`: dropout probability on the adapters' inputs (PEFT's lora_dropout). Above 0 the
   * graph takes `lora_dropout_seed`, an int64 scalar per step, the hash seed of that step's masks
   * (lora.ts loraDropoutStepSeed), and `lora_dropout_index`, int64 [B, T], each token's place
   * b·T + t in the step's whole batch (a micro-batch is fed its rows' places in the step).
   */
  loraDropout?: number;
  /**
   * Positions per chunk of the vocabulary head (see chunkedTokenLogprobs): 0 computes the
   * [B, T, V] logits at once. Default: chunks of about LOGIT_CHUNK_ROWS positions when the
   * logits would hold more than LOGIT_CHUNK_ABOVE values, else at once.
   */
  logitChunkRows?: number;
  /**
   * Compute each decoder layer again in the backward pass instead of keeping its activations
   * (graphs.ts ForwardInputs.recomputeLayers). Default: when the layers' activations of the batch
   * would pass RECOMPUTE_ABOVE_BYTES (recomputeByDefault).
   */
  recomputeLayers?: boolean;
}

/** Layer activations of a training batch above this are recomputed by default (1 GiB). */
export const RECOMPUTE_ABOVE_BYTES = 2 ** 30;

/** Values a token keeps per decoder layer for the backward pass, by size (memory.ts ACTIVATION_COUNTS says which). */
export const LAYER_ACTIVATION_COUNTS = { hidden: 12, intermediate: 5, attention: 2 } as const;

/**
 * Float32 values one token keeps per decoder layer through an update at `seq` tokens: hidden- and
 * intermediate-sized values, and per head the attention values of the keys its query chunk sees
 * (chunk i of n sees keys up to its end: (n + 1) / 2n of the full T × T scores).
 */
export function layerActivationValues(c: ModelConfig, seq: number): number {
  const n = attentionChunksFor(seq);
  const keys = (seq * (n + 1)) / (2 * n);
  const a = LAYER_ACTIVATION_COUNTS;
  return a.hidden * c.hidden_size + a.intermediate * c.intermediate_size + a.attention * c.num_attention_heads * keys;
}

/**
 * Whether a batch of B × T tokens recomputes its layers by default: the float32 values its
 * layers keep for the backward pass (layerActivationValues) against RECOMPUTE_ABOVE_BYTES.
 * turnwise-tiny's batches stay under it; a 1,024-token row of a 0.5B model does not.
 */
export function recomputeByDefault(c: ModelConfig, B: number, T: number): boolean {
  return 4 * B * T * c.num_hidden_layers * layerActivationValues(c, T) > RECOMPUTE_ABOVE_BYTES;
}

/** Logits of more values than this are computed in chunks by default (64 M floats: 256 MB, a few copies alive in a step). */
export const LOGIT_CHUNK_ABOVE = 1 << 26;
/** Positions per chunk of the head by default: at Qwen2.5's 151,936 words, 78 MB of logits per chunk. */
export const LOGIT_CHUNK_ROWS = 128;

/** The chunk the head is computed in: the largest divisor of B·T at most `want` (0: no chunks). */
export function logitChunkRows(B: number, T: number, V: number, want?: number): number {
  const n = B * T;
  const target = want ?? (n * V > LOGIT_CHUNK_ABOVE ? LOGIT_CHUNK_ROWS : 0);
  if (!(target > 0) || target >= n) return 0;
  for (let r = target; r > 1; r--) if (n % r === 0) return r;
  return 1;
}

/** The per-step seed input of a training graph with LoRA dropout. */
export const LORA_DROPOUT_SEED = 'lora_dropout_seed';
/** The per-token place in the step's batch that the dropout hash reads (see TrainGraphOptions.loraDropout). */
export const LORA_DROPOUT_INDEX = 'lora_dropout_index';

export const METRICS = ['loss', 'pg_loss', 'clip_frac', 'approx_kl', 'kl', 'entropy', 'action_loss', 'replay_loss', 'grad_norm'] as const;
export type MetricName = (typeof METRICS)[number];

/** Per-token float inputs each loss reads (besides input_ids and attention_mask or the packing inputs). */
export function batchInputs(o: TrainGraphOptions): string[] {
  const names = ['loss_mask', 'action_mask'];
  if (POLICY_LOSSES[o.loss].rl) names.push('advantages', 'old_logp');
  if (o.kl) names.push('ref_logp');
  if (o.replay) names.push('replay_mask');
  if (o.clipScale) names.push('clip_scale');
  return names;
}

export interface PolicyLossValues {
  /** log π(token), [B, N], N = T − 1 (tokens 1..T−1). */
  logp: Value;
  /** Per-token loss weight, [B, N]. */
  mask: Value;
  /** 0/1 tokens of the action_loss metric, [B, N]; default: weight ≥ 1. */
  actionMask?: Value;
  advantages?: Value;
  oldLogp?: Value;
  refLogp?: Value;
  /** Per-token weight of replay (demonstration) tokens, [B, N]. */
  replayMask?: Value;
  /** Per-token factor on the clip range, [B, N]: bounds 1 − clipLow·s, 1 + clipHigh·s. */
  clipScale?: Value;
  /** Per-token entropy, [B, N]. */
  entropy: Value;
}

export interface PolicyLossGraph {
  loss: Value;
  metrics: Record<Exclude<MetricName, 'grad_norm'>, Value>;
}

/** Helpers over the per-token values that every policy-gradient builder shares. */
interface LossOps {
  /** x with masked (weight 0) positions replaced by 0 before any arithmetic. */
  masked: (x: Value) => Value;
  /** Weighted token mean Σ w·x / Σ w over the batch. */
  tokenMean: (x: Value) => Value;
  /** x where x > 0, else 1: a weight sum as a denominator. */
  orOne: (x: Value) => Value;
  /** Clip bounds 1 − clipLow, 1 + clipHigh. */
  lo: Value;
  hi: Value;
  /** The number of sequences a sequence-level mean divides by (given for a whole step, or this batch's). */
  seqCount: (perSeqWeight: Value) => Value;
}

/**
 * The denominators of a loss's means, given when a step is read in micro-batches: each is the
 * whole step's, so the micro-batches' losses add up to the step's (see policyLossNormalisers).
 */
export interface PolicyLossNorms {
  /** Σ loss weight over the step's tokens, or 1 when 0. */
  tokens: Value;
  /** Σ action_mask, or 1 when 0. */
  actions: Value;
  /** Σ replay weight, or 1 when 0 (with replay). */
  replay?: Value;
  /** Rows with any loss weight, at least 1. */
  seqs: Value;
}

/** The policy-gradient term of one loss, with its clip fraction and approx KL (0 when they do not apply). */
type PgBuilder = (g: Graph, v: PolicyLossValues, ops: LossOps) => { pg: Value; clipFrac?: Value; approxKl?: Value };

const logRatioOf = (g: Graph, v: PolicyLossValues, ops: LossOps) => ops.masked(g.sub(v.logp, v.oldLogp!));

/** Graph builders keyed by the loss table: the compiler insists on one per loss. Match test/support/reference-losses.ts. */
const PG_LOSSES: Record<LossName, PgBuilder> = {
  'ppo-token': (g, v, ops) => {
    const adv = ops.masked(v.advantages!);
    const logRatio = logRatioOf(g, v, ops);
    const ratio = g.exp(logRatio);
    const l1 = g.mul(g.neg(adv), ratio);
    const l2 = g.mul(g.neg(adv), g.min(g.max(ratio, ops.lo), ops.hi));
    // Max picks l1 on ties, as the reference does (the clipped branch only when strictly larger).
    return {
      pg: ops.tokenMean(g.max(l1, l2)),
      clipFrac: ops.tokenMean(g.cast(g.greater(l2, l1), 'float32')),
      approxKl: ops.tokenMean(g.neg(logRatio)),
    };
  },
  'gspo-seq': (g, v, ops) => {
    const adv = ops.masked(v.advantages!);
    const logRatio = logRatioOf(g, v, ops);
    const cnt = g.reduceSum(v.mask, [1]); // [B]
    const denom = ops.orOne(cnt);
    const has = g.cast(g.greater(cnt, 0), 'float32');
    const nSeq = ops.seqCount(has);
    const s = g.div(g.reduceSum(g.mul(logRatio, v.mask), [1]), denom);
    const a = g.div(g.reduceSum(g.mul(adv, v.mask), [1]), denom);
    const ratio = g.exp(g.min(s, GSPO_LOG_RATIO_CAP));
    const l1 = g.mul(g.neg(a), ratio);
    const l2 = g.mul(g.neg(a), g.min(g.max(ratio, ops.lo), ops.hi));
    return {
      pg: g.div(g.reduceSum(g.mul(g.max(l1, l2), has)), nSeq),
      clipFrac: g.div(g.reduceSum(g.mul(g.cast(g.greater(l2, l1), 'float32'), has)), nSeq),
      approxKl: ops.tokenMean(g.neg(logRatio)),
    };
  },
  sft: (g, v, ops) => ({ pg: g.neg(ops.tokenMean(v.logp)) }),
};

/**
 * The loss and its metrics as graph ops over per-token values: the loss's policy-gradient term
 * (PG_LOSSES), plus klCoef · k3 KL, − entCoef · entropy and replayCoef · the replay tokens'
 * weighted mean NLL when flagged. Matches test/support/reference-losses.ts (ppoTokenLoss, gspoSeqLoss); `sft`
 * is the weighted mean NLL Σ w·nll / Σ w.
 */
export function buildPolicyLoss(
  g: Graph,
  kind: TrainLoss,
  v: PolicyLossValues,
  h: { clipLow: Value; clipHigh: Value; klCoef: Value; entCoef: Value; replayCoef?: Value },
  flags: { kl?: boolean; entropy?: boolean; replay?: boolean },
  norms?: PolicyLossNorms,
): PolicyLossGraph {
  const mask = v.mask;
  // Values at masked positions are replaced by 0 *before* any arithmetic: multiplying by the
  // mask afterwards would turn a caller's NaN or ±1e30 sentinel (or exp overflow of a garbage
  // log-ratio) into Inf·0 = NaN in the loss and in every gradient.
  const keep = g.greater(mask, 0);
  const masked = (x: Value) => g.where(keep, x, 0);
  // Σ w, or 1 when nothing carries weight (every term is then 0): not max(Σ w, 1), which would
  // shrink a batch whose weights sum below 1 (a few prompt tokens at 0.3).
  const orOne = (x: Value) => g.where(g.greater(x, 0), x, 1);
  const nTok = norms?.tokens ?? orOne(g.reduceSum(mask));
  const tokenMean = (x: Value) => g.div(g.reduceSum(g.mul(x, mask)), nTok);
  const actionMask = v.actionMask ?? g.cast(g.greaterOrEqual(mask, 1), 'float32');
  const actionLoss = g.div(
    g.reduceSum(g.mul(g.neg(g.where(g.greater(actionMask, 0), v.logp, 0)), actionMask)),
    norms?.actions ?? orOne(g.reduceSum(actionMask)),
  );
  const zero = g.scalar(0, 'float32');
  const entropy = tokenMean(v.entropy);
  const seqCount = (has: Value) => norms?.seqs ?? g.max(g.reduceSum(has), 1);
  const s = v.clipScale;
  const ops: LossOps = {
    masked,
    tokenMean,
    orOne,
    lo: g.sub(1, s ? g.mul(h.clipLow, s) : h.clipLow),
    hi: g.add(1, s ? g.mul(h.clipHigh, s) : h.clipHigh),
    seqCount,
  };
  const { pg, clipFrac = zero, approxKl = zero } = PG_LOSSES[kind](g, v, ops);
  let kl: Value = zero;
  if (v.refLogp) {
    const d = masked(g.sub(v.refLogp, v.logp));
    kl = tokenMean(g.sub(g.sub(g.exp(d), d), 1));
  }
  let replay: Value = zero;
  if (v.replayMask) {
    const r = v.replayMask;
    replay = g.div(g.reduceSum(g.mul(g.neg(g.where(g.greater(r, 0), v.logp, 0)), r)), norms?.replay ?? orOne(g.reduceSum(r)));
  }
  let loss = pg;
  if (flags.kl && v.refLogp) loss = g.add(loss, g.mul(h.klCoef, kl));
  if (flags.entropy) loss = g.sub(loss, g.mul(h.entCoef, entropy));
  if (flags.replay && v.replayMask && h.replayCoef) loss = g.add(loss, g.mul(h.replayCoef, replay));
  // Metrics that are the same constant (0 for sft) still need distinct values to be distinct outputs.
  const own = (x: Value) => (x === zero ? g.identity(zero) : x);
  return {
    loss,
    metrics: {
      loss,
      pg_loss: pg,
      clip_frac: own(clipFrac),
      approx_kl: own(approxKl),
      kl: own(kl),
      entropy,
      action_loss: actionLoss,
      replay_loss: own(replay),
    },
  };
}

/**
 * The step-wide denominators of buildPolicyLoss from the batch inputs of a whole step, stacked
 * micro-batches or not ([..., B, T]; the loss reads tokens 1..T−1 of each row, as here).
 */
export function policyLossNormalisers(g: Graph, batch: Record<string, Value>): PolicyLossNorms {
  const tail = (x: Value) => g.slice(x, [1], [2 ** 31 - 1], [x.rank - 1]);
  const orOne = (x: Value) => g.where(g.greater(x, 0), x, 1);
  const mask = tail(batch.loss_mask);
  const perRow = g.reduceSum(mask, [mask.rank - 1]);
  return {
    tokens: orOne(g.reduceSum(mask)),
    actions: orOne(g.reduceSum(tail(batch.action_mask))),
    ...(batch.replay_mask ? { replay: orOne(g.reduceSum(tail(batch.replay_mask))) } : {}),
    seqs: g.max(g.reduceSum(g.cast(g.greater(perRow, 0), 'float32')), 1),
  };
}

/**
 * log-softmax over the last axis as z − m − log Σ exp(z − m), m = max(z) held constant (the
 * function does not depend on it). Not ONNX's LogSoftmax: ONNX Runtime 1.30's WebGPU provider has
 * no kernel for it and ran it on the CPU, copying the logits (the largest activation) off the GPU
 * and back every step. These ops all run on WebGPU; on the CPU the cost is within noise.
 */
export function logSoftmaxComposed(g: Graph, z: Value): Value {
  const shifted = g.sub(z, g.stopGradient(g.reduceMax(z, [-1], true)));
  return g.sub(shifted, g.log(g.reduceSum(g.exp(shifted), [-1], true)));
}

/** log-probs of ids[:, 1:] and per-token entropies from logits [B, T, V] (divided by temperature). */
export function tokenLogprobs(
  g: Graph,
  logits: Value,
  ids: Value,
  temperature: Value,
  B: number,
  T: number,
): { logp: Value; entropy: Value } {
  const pred = g.slice(logits, [0], [T - 1], [1]); // [B,T-1,V]
  const lsm = logSoftmaxComposed(g, g.div(pred, temperature));
  const targets = g.unsqueeze(g.slice(ids, [1], [T], [1]), [2]); // [B,T-1,1]
  const logp = g.reshape(g.gatherElements(lsm, targets, 2), [B, T - 1]);
  const entropy = g.neg(g.reduceSum(g.mul(g.exp(lsm), lsm), [2]));
  return { logp, entropy };
}

/**
 * tokenLogprobs from the final norm's output x [B, T, H] and the head's weight [V, H] without the [B, T, V]
 * logits: a Loop over chunks of `rows` positions computes each chunk's logits, log-softmax, the
 * target's log-prob and the entropy, keeping only those two numbers per position. Its backward
 * pass is given (CUSTOM_GRADIENT), not derived: a second Loop computes each chunk's logits again
 * and from them d logits = g·(onehot − p) − e·p·(log p + H) (g, e: the gradients of the token's
 * log-prob and entropy), divided by the temperature, then d x = d logits · head and, when the head
 * is trained, d head = Σ d logitsᵀ · x. A step holds one chunk's [rows, V] tensors instead of the
 * whole sequence's, at the price of the head's matrix product once more. `rows` divides B·T.
 */
export function chunkedTokenLogprobs(
  g: Graph,
  x: Value,
  head: Value,
  ids: Value,
  temperature: Value,
  B: number,
  T: number,
  rows: number,
): { logp: Value; entropy: Value } {
  const H = x.shape[2] as number;
  const N = B * T;
  if (!(rows >= 1 && N % rows === 0)) throw new TurnwiseError('internal', `logit chunks of ${rows} positions do not divide ${B}·${T}`);
  const K = N / rows;
  const x3 = g.reshape(x, [K, rows, H]);
  // Each position's next token; a row's last position has none (0: its log-prob is cut off below).
  const next = g.concat([g.slice(ids, [1], [T], [1]), g.tensor('int64', [B, 1], new Array(B).fill(0))], 1);
  const t3 = g.reshape(next, [K, rows]);
  const chunk = (b: Graph, i: Value) => {
    const xc = b.gather(x3, i, 0); // [rows, H]
    const tc = b.unsqueeze(b.gather(t3, i, 0), [1]); // [rows, 1]
    return { xc, tc, lsm: headLogSoftmax(b, xc, head, temperature) };
  };
  const fwd = g.loop(K, [], (b, i) => {
    const { tc, lsm } = chunk(b, i);
    const logp = b.squeeze(b.gatherElements(lsm, tc, 1), [1]);
    const ent = b.neg(b.reduceSum(b.mul(b.exp(lsm), lsm), [1]));
    return { carried: [], scan: [logp, ent] };
  });
  CUSTOM_GRADIENT.set(fwd.scan[0].producer!, {
    inputs: [x3, head],
    rule: (gg, [dLogp, dEnt], need) => {
      const trainHead = need[1];
      const bwd = gg.loop(K, trainHead ? [head] : [], (b, i, carried) => {
        const { xc, tc, lsm } = chunk(b, i);
        const p = b.exp(lsm);
        let dz: Value | undefined;
        if (dLogp) {
          const gl = b.unsqueeze(b.gather(dLogp, i, 0), [1]); // [rows, 1]
          dz = b.scatterElements(b.neg(b.mul(p, gl)), tc, gl, 1, 'add');
        }
        if (dEnt) {
          const ge = b.unsqueeze(b.gather(dEnt, i, 0), [1]);
          const ent = b.neg(b.reduceSum(b.mul(p, lsm), [1], true));
          const d = b.neg(b.mul(b.mul(p, b.add(lsm, ent)), ge));
          dz = dz ? b.add(dz, d) : d;
        }
        dz = b.div(dz!, temperature);
        // The logits are x·headᵀ (head [V, H]): d x = d z · head, d head = d zᵀ · x.
        const dx = b.matmul(dz, head); // [rows, H]
        if (!trainHead) return { carried: [], scan: [dx] };
        const dHead = b.gemm(dz, xc, { transA: true }); // [V, H]
        // The sum starts from the first chunk's value (no zero tensor of the head's size in the model).
        return { carried: [b.where(b.equal(i, b.scalar(0, 'int64')), dHead, b.add(carried[0], dHead))], scan: [dx] };
      });
      return [need[0] ? bwd.scan[0] : null, trainHead ? bwd.carried[0] : null];
    },
  });
  const cut = (v: Value) => g.slice(g.reshape(v, [B, T]), [0], [T - 1], [1]);
  return { logp: cut(fwd.scan[0]), entropy: cut(fwd.scan[1]) };
}

/**
 * Query chunks for causal attention over `seq` tokens in a training graph (see buildForward).
 * Measured on turnwise-tiny (CPU, 2 cores): 4 chunks at 2 x 1024 tokens 495 -> 422 ms per step;
 * at 512 tokens 2 chunks gain ~4%; at 256 and below nothing (more nodes, little masked work).
 */
export function attentionChunksFor(seq: number): number {
  for (const n of seq >= 1024 ? [4, 2] : seq >= 512 ? [2] : []) if (seq % n === 0) return n;
  return 1;
}

/** Loss hyperparameters fed per step (scalars; [K] when K steps are stacked). */
export const LOSS_HYPER_INPUTS = ['clip_low', 'clip_high', 'kl_coef', 'ent_coef', 'replay_coef', 'temperature'] as const;
export type LossHyperName = (typeof LOSS_HYPER_INPUTS)[number];

/** Metrics the forward builder adds to `loss` and `grad_norm` (which src/onnx's helper always outputs). */
export const LOSS_METRICS = ['pg_loss', 'clip_frac', 'approx_kl', 'kl', 'entropy', 'action_loss', 'replay_loss'] as const;

/**
 * Additive bias [B,1,T,T] from segment ids [B,T] (0 padding): 0 where query and key are in the
 * same segment and the key is real, MASKED elsewhere. Added to the causal bias, a token sees only
 * the earlier tokens of its own example. Built from the ids in the graph: the host feeds B·T ids,
 * not a B·T·T mask.
 */
export function segmentBias(g: Graph, seg: Value): Value {
  const same = g.equal(g.unsqueeze(seg, [2]), g.unsqueeze(seg, [1])); // [B,T,T]
  const allowed = g.and(same, g.greater(g.unsqueeze(seg, [1]), g.scalar(0, 'int64'))); // key real
  return g.unsqueeze(g.where(allowed, g.scalar(0, 'float32'), g.scalar(MASKED, 'float32')), [1]);
}

/**
 * The training-graph spec for src/onnx's buildTrainingGraph: weights (graph layout, HF names,
 * weight decay on matrices only), batch inputs input_ids int64 [B,T], attention_mask float32 [B,T]
 * (or, packed, segment_ids and position_ids int64 [B,T]), batchInputs(o) float32 [B,T] plus LOSS_HYPER_INPUTS scalars, and the forward builder
 * (Qwen2 forward → token log-probs → loss).
 */
export function policyTrainingSpec(c: ModelConfig, o: TrainGraphOptions): Omit<TrainingGraphSpec, 'steps'> {
  const { batch: B, seq: T } = o;
  if (T < 2) throw new TurnwiseError('invalid-input', `training needs sequences of at least 2 tokens, got seq ${T}`);
  const perToken = batchInputs(o);
  const batch: BatchSpec[] = [
    { name: 'input_ids', dtype: 'int64', shape: [B, T] },
    ...(o.packed
      ? [
          { name: 'segment_ids', dtype: 'int64' as const, shape: [B, T] },
          { name: 'position_ids', dtype: 'int64' as const, shape: [B, T] },
        ]
      : [{ name: 'attention_mask', dtype: 'float32' as const, shape: [B, T] }]),
    ...perToken.map((name) => ({ name, dtype: 'float32' as const, shape: [B, T] })),
    ...LOSS_HYPER_INPUTS.map((name) => ({ name, dtype: 'float32' as const, shape: [] })),
  ];
  const dropout = o.lora && (o.loraDropout ?? 0) > 0 ? o.loraDropout! : 0;
  if (!(dropout < 1))
    throw new TurnwiseError('invalid-input', `LoRA dropout must be in [0, 1), got ${dropout}`, {
      hint: 'set lora_dropout to a probability below 1, e.g. 0.05',
    });
  if (dropout > 0)
    batch.push({ name: LORA_DROPOUT_SEED, dtype: 'int64', shape: [] }, { name: LORA_DROPOUT_INDEX, dtype: 'int64', shape: [B, T] });
  const causal = new Float32Array(T * T);
  for (let i = 0; i < T; i++) for (let j = i + 1; j < T; j++) causal[i * T + j] = MASKED;
  const forward: ForwardBuilder = (g, params, inp, norms) => {
    const causalV = g.tensor('float32', [1, 1, T, T], causal);
    const positions = o.packed
      ? inp.position_ids
      : g.tensor(
          'int64',
          [1, T],
          Array.from({ length: T }, (_, i) => i),
        );
    const bias = g.add(causalV, o.packed ? segmentBias(g, inp.segment_ids) : keyPaddingBias(g, inp.attention_mask));
    const W = new Map(Object.entries(params));
    const lora = o.lora
      ? loraInputs(c, o.lora, W, dropout > 0 ? { p: dropout, seed: inp[LORA_DROPOUT_SEED], index: inp[LORA_DROPOUT_INDEX] } : undefined)
      : undefined;
    const recomputeLayers = o.recomputeLayers ?? recomputeByDefault(c, B, T);
    const { hidden } = buildDecoder(g, c, W, {
      ids: inp.input_ids,
      positions,
      bias,
      attentionChunks: attentionChunksFor(T),
      recomputeLayers,
      ...(lora ? { lora } : {}),
      dims: { B, T },
    });
    const chunkRows = logitChunkRows(B, T, c.vocab_size, o.logitChunkRows);
    const { logp, entropy } =
      chunkRows > 0
        ? chunkedTokenLogprobs(g, finalNorm(g, c, W, hidden), headWeight(c, W), inp.input_ids, inp.temperature, B, T, chunkRows)
        : tokenLogprobs(g, linear(g, finalNorm(g, c, W, hidden), headWeight(c, W)), inp.input_ids, inp.temperature, B, T);
    const tail = (name: string) => (inp[name] ? g.slice(inp[name], [1], [T], [1]) : undefined);
    const { loss, metrics } = buildPolicyLoss(
      g,
      o.loss,
      {
        logp,
        entropy,
        mask: tail('loss_mask')!,
        actionMask: tail('action_mask'),
        advantages: tail('advantages'),
        oldLogp: tail('old_logp'),
        refLogp: tail('ref_logp'),
        replayMask: tail('replay_mask'),
        clipScale: tail('clip_scale'),
      },
      { clipLow: inp.clip_low, clipHigh: inp.clip_high, klCoef: inp.kl_coef, entCoef: inp.ent_coef, replayCoef: inp.replay_coef },
      { kl: o.kl, entropy: o.entropy, replay: o.replay },
      norms as PolicyLossNorms | undefined,
    );
    const { loss: _l, ...extra } = metrics;
    void _l;
    return { loss, metrics: extra };
  };
  const trained = o.lora ? loraGraphSpecs(c, o.lora) : graphParamSpecs(c);
  return {
    params: trained.map((p) => ({ name: p.name, shape: p.shape, decay: o.weightDecay !== false && p.shape.length === 2 })),
    ...(o.lora ? { frozen: graphParamSpecs(c) } : {}),
    batch,
    forward,
    metricNames: LOSS_METRICS,
    normalisers: (g, b) => policyLossNormalisers(g, b) as unknown as Record<string, Value>,
    batchPerStep: true,
  };
}

/** The training graph for `steps` optimizer steps per run (an ONNX Loop when steps > 1). */
export function buildTrainGraph(c: ModelConfig, o: TrainGraphOptions, steps = 1): Graph {
  return buildTrainingGraph({ ...policyTrainingSpec(c, o), steps });
}
