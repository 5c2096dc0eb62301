// The batch term (TrainConfig.batchBaseline): every turn of an episode gains
// w · (s − s̄) / BATCH_BASELINE_SCALE, s its test score and s̄ the mean over the iteration's scored
// episodes. The estimators' group baselines compare episodes of the same task only: a group whose
// episodes all resolved gives its actions nothing, while the failed episodes of mixed groups push
// theirs down. An action most groups resolve with ("try the first candidate") is then pushed down
// on the few tasks where it was wrong and never up where it was right. Against the batch's mean,
// what resolved is pushed up wherever it did. Across tasks, though, an episode's score is mostly
// its task's difficulty, and the term credits that too: what the policy writes on hard tasks
// (free edits, after the candidates failed) goes down, what ends every easy one (`submit`) up.
// Off by default for that reason (docs/credit-assignment.md).
import type { Trajectory } from '../core/schema';
import { mean } from '../core/stats';

/** Test-score units per unit of advantage: a resolved episode against an unresolved one whose other tests pass (0.5 apart) is 1. */
export const BATCH_BASELINE_SCALE = 0.5;

/**
 * Adds the batch term to the advantages (token advantages and components too, as `batch`) of
 * every turn of `trajs` in place, episodes without a test score left alone; returns s̄ (NaN when
 * no episode has a score or `weight` is 0).
 */
export function addBatchBaseline(trajs: readonly Trajectory[], weight: number): number {
  if (!(weight > 0)) return NaN;
  const scored = trajs.filter((t) => Number.isFinite(t.reward?.testScore));
  if (!scored.length) return NaN;
  const batchMean = mean(scored.map((t) => t.reward!.testScore!));
  for (const t of scored) {
    const term = (weight * (t.reward!.testScore! - batchMean)) / BATCH_BASELINE_SCALE;
    for (const u of t.turns) {
      // Turns with no advantage take no part in the update (inherited turns of a branch).
      if (typeof u.advantage !== 'number') continue;
      u.advantage += term;
      if (u.tokenAdvantages) u.tokenAdvantages = u.tokenAdvantages.map((x) => x + term);
      if (u.advantageComponents) u.advantageComponents = { ...u.advantageComponents, batch: term };
    }
  }
  return batchMean;
}
