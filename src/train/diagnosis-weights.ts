// Diagnosis-guided reweighting (after SEAL): a turn the failure labels name (agent/diagnosis.ts)
// whose advantage is negative has it scaled by its label's weight (TrainConfig.diagnosisWeights),
// so the update pushes harder against a named mistake (a repeated failed command, a submit
// without a passing test) than against a turn that merely belonged to a failed episode. Positive
// advantages are left alone: a labelled turn in a resolved episode still helped it.
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
