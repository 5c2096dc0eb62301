// The policy losses in one table: names, what each reads, hyperparameter defaults and docs.
// /support/reference-losses.ts holds the reference maths and policy/training/graphs.ts the ONNX graph builder, each
// as a Record<LossName, …> keyed on this table, so a loss added here is missing from neither
// (the compiler says so), and no default is written twice.
import { TurnwiseError } from './errors';

/** Loss hyperparameters (docs/credit-assignment.md "Policy losses"). */
export interface LossHyper {
  /** The ratio's lower bound is 1 − clipLow. */
  clipLow: number;
  /** The ratio's upper bound is 1 + clipHigh. */
  clipHigh: number;
  /** Weight of the k3 KL estimate to the reference policy (0: no KL term, no ref log-probs needed). */
  klCoef: number;
  /** Weight of the entropy bonus, subtracted from the loss (0: none). */
  entCoef: number;
  /**
   * Weight of the replay term: the weighted mean NLL of the batch's replay tokens (demonstrations
   * trained beside the RL rows, PPO-ptx style; their own per-token weights, not the loss mask).
   * 0: no replay term, no replay weights needed.
   */
  replayCoef: number;
}

/** Optimizer settings shared by every loss (AdamW with global-norm clipping). */
export interface OptimizerHyper {
  beta1: number;
  beta2: number;
  eps: number;
  /** Decoupled weight decay on matrices only (not norms or biases). */
  weightDecay: number;
  /** Global gradient-norm clip; ≤ 0 disables. */
  maxGradNorm: number;
  /** Sampling temperature the log-probs are computed at. */
  temperature: number;
}

/** gspo-seq caps a sequence's mean log-ratio at this before exp (as in the a3 release). */
export const GSPO_LOG_RATIO_CAP = 10;

export const OPTIMIZER_DEFAULTS: Readonly<OptimizerHyper> = {
  beta1: 0.9,
  beta2: 0.999,
  eps: 1e-8,
  weightDecay: 0,
  maxGradNorm: 1,
  temperature: 1,
};

export interface PolicyLossInfo {
  /** One line for help text and docs. */
  summary: string;
  /** Reads advantages and rollout log-probs (an RL loss); false: only the tokens and their weights. */
  rl: boolean;
  /** What the policy-gradient term is a mean over. */
  meanOver: 'tokens' | 'sequences';
  /** Packed rows (several examples per row) are supported. */
  packable: boolean;
  defaults: Readonly<LossHyper>;
}

const CLIP = { clipLow: 0.2, clipHigh: 0.2, klCoef: 0, entCoef: 0, replayCoef: 0 } as const;

export const POLICY_LOSSES = {
  'ppo-token': {
    summary: 'PPO/GRPO clipped surrogate per token, weighted mean over action tokens',
    rl: true,
    meanOver: 'tokens',
    packable: true,
    defaults: CLIP,
  },
  'gspo-seq': {
    summary: 'one clipped ratio per turn (exp of the mean token log-ratio, capped at 10), mean over turns',
    rl: true,
    meanOver: 'sequences',
    packable: false, // one ratio per row: a packed row would be one sequence
    defaults: CLIP,
  },
  sft: {
    summary: 'supervised: weighted mean negative log-likelihood Σ w·nll / Σ w of the weighted tokens',
    rl: false,
    meanOver: 'tokens',
    packable: true,
    defaults: CLIP, // clips unused; KL and entropy terms apply as for the RL losses
  },
} as const satisfies Record<string, PolicyLossInfo>;

export type LossName = keyof typeof POLICY_LOSSES;
export type RlLossName = { [K in LossName]: (typeof POLICY_LOSSES)[K]['rl'] extends true ? K : never }[LossName];

export const LOSS_NAMES = Object.keys(POLICY_LOSSES) as LossName[];
export const RL_LOSS_NAMES = LOSS_NAMES.filter((n): n is RlLossName => POLICY_LOSSES[n].rl);

export function isLossName(name: string): name is LossName {
  return Object.prototype.hasOwnProperty.call(POLICY_LOSSES, name);
}

/** `name` as a LossName; unknown names raise, listing the valid ones (of `among`, default all). */
export function lossName<N extends LossName = LossName>(name: string, among: readonly N[] = LOSS_NAMES as N[]): N {
  if (!(among as readonly string[]).includes(name)) {
    throw new TurnwiseError('invalid-input', `unknown policy loss "${name}"`, { hint: `valid: ${among.join(', ')}` });
  }
  return name as N;
}

/** The loss's hyperparameters with its defaults filled in. */
export function lossHyper(name: LossName, given: Partial<LossHyper> = {}): LossHyper {
  const d = POLICY_LOSSES[name].defaults;
  return {
    clipLow: given.clipLow ?? d.clipLow,
    clipHigh: given.clipHigh ?? d.clipHigh,
    klCoef: given.klCoef ?? d.klCoef,
    entCoef: given.entCoef ?? d.entCoef,
    replayCoef: given.replayCoef ?? d.replayCoef,
  };
}
