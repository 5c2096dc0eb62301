// Penalties charged to their own turns (docs/credit-assignment.md, turnwise's change 6), for any
// estimator: the estimator sees each episode's outcome (its reward with its turns' penalties
// added back), and each turn's advantage then loses its own penalty divided by `scale`. In a group
// where every episode failed, the outcomes are equal and only the penalized turns move, instead
// of every turn of the episodes that paid no penalty (stopping early included) being credited.
import { TurnwiseError } from '../core/errors';
import type { EstimatorResult, TurnRow } from './types';

export function chargePenaltiesToTurns(
  estimator: string,
  rows: readonly TurnRow[],
  scale: number,
  run: (outcome: TurnRow[]) => EstimatorResult,
): EstimatorResult {
  if (!(scale > 0))
    throw new TurnwiseError('invalid-input', `${estimator}: penaltyScale must be > 0, got ${scale}`, {
      hint: 'the reward units one unit of advantage stands for, e.g. 0.5',
    });
  const episodePenalty = new Map<string, number>();
  for (const r of rows) episodePenalty.set(r.trajId, (episodePenalty.get(r.trajId) ?? 0) + (r.penalty ?? 0));
  const result = run(rows.map((r) => ({ ...r, score: r.score + episodePenalty.get(r.trajId)! })));
  const charge = rows.map((r) => (Number.isFinite(r.score) ? -(r.penalty ?? 0) / scale : 0));
  return {
    ...result,
    advantages: result.advantages.map((a, i) => a + charge[i]),
    ...(result.tokenAdvantages ? { tokenAdvantages: result.tokenAdvantages.map((t, i) => t && t.map((a) => a + charge[i])) } : {}),
    components: { ...result.components, penalty: charge },
  };
}
