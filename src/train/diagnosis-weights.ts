// Diagnosis-guided reweighting (after SEAL): a turn the failure labels name (agent/diagnosis.ts)
// whose advantage is negative has it scaled by its label's weight (TrainConfig.diagnosisWeights),
// so the update pushes harder against a named mistake (a repeated failed command, a submit
// without a passing test) than against a turn that merely belonged to a failed episode. Positive
// advantages are left alone: a labelled turn in a resolved episode still helped it.
//
// A weight scales what is there, and in a group where every episode failed the group baseline
// leaves nothing: a giving-up `submit` there has advantage 0, while the commands that kept trying
// are pushed down by their penalties, so probability moves to `submit`. A charge
// (TrainConfig.diagnosisCharges) is subtracted instead, in advantage units, from each labelled
// turn of an unresolved episode, whatever its advantage was.
import type { Trajectory } from '../core/schema';

/** Scales the negative advantages of labelled turns in place; returns the turns it changed. */
export function reweightByDiagnosis(trajs: readonly Trajectory[], weights: Readonly<Record<string, number>>): number {
  if (!Object.keys(weights).length) return 0;
  let changed = 0;
  for (const t of trajs) {
    for (const u of t.turns) {
      if (!u.labels?.length || !(typeof u.advantage === 'number' && u.advantage < 0)) continue;
      const ws = u.labels.map((l) => weights[l]).filter((w): w is number => typeof w === 'number');
      if (!ws.length) continue;
      const w = Math.max(...ws);
      u.advantage *= w;
      if (u.tokenAdvantages) u.tokenAdvantages = u.tokenAdvantages.map((x) => x * w);
      // The components are the advantage's terms: scaled with it, they still add up to it.
      if (u.advantageComponents)
        u.advantageComponents = Object.fromEntries(Object.entries(u.advantageComponents).map(([k, v]) => [k, v * w]));
      changed++;
    }
  }
  return changed;
}

/**
 * Subtracts each labelled turn's charge (the largest of its labels') from its advantage, token
 * advantages and components (as `diagnosis`), in unresolved episodes only; returns the turns it changed.
 */
export function chargeByDiagnosis(trajs: readonly Trajectory[], charges: Readonly<Record<string, number>>): number {
  if (!Object.keys(charges).length) return 0;
  let changed = 0;
  for (const t of trajs) {
    if (t.reward.resolved || t.failure) continue;
    for (const u of t.turns) {
      if (!u.labels?.length || typeof u.advantage !== 'number') continue;
      const cs = u.labels.map((l) => charges[l]).filter((c): c is number => typeof c === 'number' && c > 0);
      if (!cs.length) continue;
      const c = Math.max(...cs);
      u.advantage -= c;
      if (u.tokenAdvantages) u.tokenAdvantages = u.tokenAdvantages.map((x) => x - c);
      u.advantageComponents = { ...u.advantageComponents, diagnosis: (u.advantageComponents?.diagnosis ?? 0) - c };
      changed++;
    }
  }
  return changed;
}
