// What a run's train tasks did over the run, read back from its folder: shared by transfer-runs.ts
// and picker-sim.ts.
import type { RunDir } from '../../../src/core/run';
import { scoredGroups } from '../../../src/train/task-picking';

/**
 * Per train task, its first-phase episodes over iterations 1..`last` (branches and sandbox
 * failures left out): how many were scored (n) and how many resolved (k); with the most groups an
 * iteration posed and the largest group, G.
 */
export function trainTaskOutcomes(run: Pick<RunDir, 'readTrajectories'>, last: number) {
  const per = new Map<string, { n: number; k: number }>();
  let perIteration = 0;
  let G = 0;
  for (let n = 1; n <= last; n++) {
    const groups = scoredGroups(run.readTrajectories(n, 'train').filter((t) => !t.branch && !t.failure));
    perIteration = Math.max(perIteration, groups.size);
    for (const g of groups.values()) {
      G = Math.max(G, g.length);
      const e = per.get(g[0].taskId) ?? per.set(g[0].taskId, { n: 0, k: 0 }).get(g[0].taskId)!;
      e.n += g.length;
      e.k += g.filter((t) => t.reward.resolved).length;
    }
  }
  return { per, perIteration, G };
}

/** The chance that a group of G episodes of a task resolved with probability p ends with both outcomes. */
export const mixedChance = (p: number, G: number) => 1 - p ** G - (1 - p) ** G;
