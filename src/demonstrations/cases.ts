// The warm start's training material: pools of generated fix cases and the draw of one
// demonstration from a case, as both warm starts and RL's replay term mix them.
import { seededRandom } from '../core/random';
import {
  candidateEpisode,
  curriculumTask,
  fixEpisode,
  numberedCurriculumTask,
  numberedEpisode,
  syntheticCases,
  type Demonstration,
  type FixCase,
} from './generated';
import { fixPromptTurns } from './simulator';

/** Generates `n` synthetic fix cases (several per generated module). */
export async function casePool(seed: number, n: number): Promise<FixCase[]> {
  const r = seededRandom(seed);
  const out: FixCase[] = [];
  while (out.length < n) out.push(...(await syntheticCases(r, 5)));
  return out.slice(0, n);
}

/** The held-out generated cases a warm start with `seed` evaluates on (its train pool uses another stream). */
export function evalCasePool(seed: number, n: number): Promise<FixCase[]> {
  return casePool(seed * 7919 + 2, n);
}

/**
 * One training example of a fix case, as the warm start mixes them: a curriculum task with
 * probability `curriculum`, else a whole fix episode (85%; attempt loops in `loopShare` of them)
 * or just the fix turn in context; in `numberedShare` of draws the numbered form of either
 * (numbered curriculum tasks, numberedEpisode) where the case has one, and in `candsShare` of
 * those the candidate form (candidateEpisode). RL's replay term (train/replay.ts) draws the same way.
 */
export function drawDemonstration(
  r: () => number,
  c: FixCase,
  o: { curriculum: number; loopShare: number; numberedShare?: number; candsShare?: number },
): Demonstration;
export function drawDemonstration(
  r: () => number,
  c: FixCase,
  o: { curriculum: number; loopShare: number; numberedShare?: number; candsShare?: number; noSed: true },
): Demonstration | undefined;
/**
 * With `noSed`, every draw is in the numbered form (numberedShare 1) and a case without one
 * gives undefined (the caller draws another case): no example writes a path or a sed command.
 */
export function drawDemonstration(
  r: () => number,
  c: FixCase,
  o: { curriculum: number; loopShare: number; numberedShare?: number; candsShare?: number; noSed?: boolean },
): Demonstration | undefined {
  // A draw only when a numbered (or candidate) share is set: a recipe without those forms keeps its random stream.
  const numbered = o.noSed || (!!o.numberedShare && r() < o.numberedShare);
  const cands = numbered && !!o.candsShare && r() < o.candsShare;
  if (r() < o.curriculum) return (numbered && numberedCurriculumTask(r, c, { cands })) || (o.noSed ? undefined : curriculumTask(r, c));
  if (numbered) {
    const d = (cands && candidateEpisode(c)) || numberedEpisode(r, c);
    if (d) return d;
    if (o.noSed) return undefined;
  }
  return r() < 0.85 ? fixEpisode(r, c, { loopShare: o.loopShare }) : { kind: 'fix-turn', segments: fixOnlySegments(c) };
}

/** Just the fix turn in context (task, tw-suspects and its output, the fix), a short full-weight example. */
function fixOnlySegments(c: FixCase) {
  const p = fixPromptTurns(c);
  return [
    { role: 'task' as const, text: p.task },
    { role: 'agent' as const, text: p.turns[0].action },
    { role: 'obs' as const, text: p.turns[0].observation },
    { role: 'agent' as const, text: c.fix },
  ];
}
