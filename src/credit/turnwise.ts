// `turnwise`, the turn-level, edit-aware variant of A³ (docs/credit-assignment.md): A³'s core
// (a3.ts) with changes 1–4 switched on, a per-turn action margin in place of R − LOO, and each
// turn's penalties charged to that turn.
import { ACTION_TAU, A3_DEFAULTS, a3VariantAdvantages, type A3Variant, type TurnwiseResidual } from './a3';
import { num } from './batch';
import { chargePenaltiesToTurns } from './penalties';
import type { EstimatorContext, EstimatorResult, EstimatorSpec, Params, TurnRow } from './types';

/**
 * turnwise's defaults: A³'s, plus the choices of its action margin (change 5, see
 * `TurnwiseResidual`) and of its turn penalties (change 6, see turnwiseAdvantages).
 * `residual: 'loo'` with any actionKey/marginPool is changes 1–4 (and 6) alone.
 */
export const TURNWISE_DEFAULTS: Params = {
  ...A3_DEFAULTS,
  residual: 'margin',
  actionKey: 'edit-intent',
  marginPool: 'task',
  actionTau: ACTION_TAU,
  penalties: 'turn',
  penaltyScale: 0.5,
  termScale: 'none',
};

export const TURNWISE_CHOICES = {
  residual: ['loo', 'margin'],
  actionKey: ['cluster', 'edit-intent'],
  marginPool: ['cell', 'task'],
  penalties: ['turn', 'episode'],
  termScale: ['none', 'batch'],
} as const;

/** turnwise's changes 1–4, plus the per-turn term chosen by params.residual / actionKey / marginPool. */
export function turnwiseVariant(params: Params): A3Variant {
  const residual = params.residual ?? TURNWISE_DEFAULTS.residual;
  const margin: TurnwiseResidual | undefined =
    residual === 'margin'
      ? {
          actionKey: (params.actionKey ?? TURNWISE_DEFAULTS.actionKey) as TurnwiseResidual['actionKey'],
          marginPool: (params.marginPool ?? TURNWISE_DEFAULTS.marginPool) as TurnwiseResidual['marginPool'],
        }
      : undefined;
  const termScale = (params.termScale ?? TURNWISE_DEFAULTS.termScale) as NonNullable<A3Variant['termScale']>;
  return { residualPerCell: true, scopeAllIsPrefix: true, editTokens: true, termScale, ...(margin ? { margin } : {}) };
}

/**
 * turnwise's change 6 (`penalties: turn`, the default): a penalty is charged to the turn that
 * earned it, not to the episode. The three terms see each episode's outcome (its reward with its
 * turns' penalties added back), and each turn's advantage then loses its own penalty divided by
 * `penaltyScale` (reward units per unit of advantage; 0.5 is the backbone's scale floor, so a
 * penalty weighs what the same reward difference between two episodes would). In a group where
 * no rollout fixed anything, every outcome is then equal and only the penalized turns move,
 * instead of every turn of a penalized episode against every turn of the others: there, the
 * group's spread is made of penalties alone, and standardizing it credits whatever the
 * unpenalized episodes did, such as stopping early. `penalties: episode` keeps them in R.
 */
export function turnwiseAdvantages(
  rows: readonly TurnRow[],
  params: Params = TURNWISE_DEFAULTS,
  ctx: EstimatorContext = {},
): EstimatorResult {
  const variant = turnwiseVariant(params);
  if ((params.penalties ?? TURNWISE_DEFAULTS.penalties) !== 'turn') return a3VariantAdvantages(rows, params, ctx, variant);
  const scale = params.penaltyScale === undefined ? (TURNWISE_DEFAULTS.penaltyScale as number) : num(params, 'penaltyScale');
  return chargePenaltiesToTurns('turnwise', rows, scale, (outcome) => a3VariantAdvantages(outcome, params, ctx, variant));
}

export const TURNWISE_SPEC: EstimatorSpec = {
  name: 'turnwise',
  summary:
    'A³ made turn-level and edit-aware: per-turn action margin (value of the action vs the alternatives), prefix-only scopes, code-edit tokens, penalties charged to their own turn',
  defaults: TURNWISE_DEFAULTS,
  choices: TURNWISE_CHOICES,
  fn: turnwiseAdvantages,
};
