// The warm start's training material: fix cases from generated modules and pools of them, and the
// draw of one demonstration from a case, as both warm starts and RL's replay term mix them.
import { seededRandom } from '../core/random';
import { stopPoint } from '../core/stop';
import { mutationCandidates, type MutationCandidate } from '../tasks/mutate';
import { FIXABLE_OPERATORS, fixCommand, withTopCandidates, type FixCase } from './fix-cases';
import {
  candidateEpisode,
  curriculumTask,
  fixEpisode,
  numberedCurriculumTask,
  numberedEpisode,
  walkEpisode,
  withBugRanked,
  type Demonstration,
} from './forms';
import { generateModule, int, type GeneratedModule, type Rng } from './generated-modules';
import { fixPromptTurns } from './simulator';
import { showContext, simulatedSuspects, testIds } from './tool-output';

/** Up to `n` fix cases from one generated module (parsing dominates: several per module). */
export async function syntheticCases(r: Rng, n = 4): Promise<FixCase[]> {
  const mod = generateModule(r);
  const cands = (await mutationCandidates(mod.path, mod.source, 'python')).filter((c) => FIXABLE_OPERATORS.has(c.operator));
  const out: FixCase[] = [];
  for (let i = 0; i < n && cands.length > 0; i++) {
    const c = cands.splice(Math.floor(r() * cands.length), 1)[0];
    const fc = caseFromCandidate(r, mod, c);
    if (fc) out.push(await withTopCandidates(fc));
  }
  return out;
}

function caseFromCandidate(r: Rng, mod: GeneratedModule, c: MutationCandidate): FixCase | undefined {
  const before = mod.source.split('\n');
  const after = c.mutatedSource.split('\n');
  if (before.length !== after.length) return undefined;
  const line = c.line;
  if (before[line - 1] === after[line - 1]) return undefined;
  const fix = fixCommand(mod.path, line, after[line - 1], before[line - 1]);
  if (!fix) return undefined;
  const fn = [...mod.functions.entries()].find(([, [a, b]]) => line >= a && line <= b);
  if (!fn) return undefined;
  const failing = testIds(r, mod.path, fn[0], int(r, 1, 3));
  return {
    path: mod.path,
    line,
    mutatedLine: after[line - 1],
    originalLine: before[line - 1],
    fix,
    failing,
    passing: int(r, 3, 24),
    suspects: simulatedSuspects(r, mod.path, after, fn[1], line),
    context: showContext(after, line),
  };
}

/**
 * Generates `n` synthetic fix cases (several per generated module). With a signal, an abort
 * stops it within a module's cases (StoppedError); the cases drawn do not depend on it.
 */
export async function casePool(seed: number, n: number, signal?: AbortSignal): Promise<FixCase[]> {
  const r = seededRandom(seed);
  const out: FixCase[] = [];
  while (out.length < n) {
    await stopPoint(signal, `generating fix cases (${out.length} of ${n})`);
    out.push(...(await syntheticCases(r, 5)));
  }
  return out.slice(0, n);
}

/** The held-out generated cases a warm start with `seed` evaluates on (its train pool uses another stream). */
export function evalCasePool(seed: number, n: number, signal?: AbortSignal): Promise<FixCase[]> {
  return casePool(seed * 7919 + 2, n, signal);
}

/**
 * One training example of a fix case, as the warm start mixes them: a curriculum task with
 * probability `curriculum`, else a whole fix episode (85%; attempt loops in `loopShare` of them)
 * or just the fix turn in context; in `numberedShare` of draws the numbered form of either
 * (numbered curriculum tasks, numberedEpisode) where the case has one, and in `candsShare` of
 * those the candidate form (candidateEpisode), or in `walkShare` of candidate draws the walk form
 * (walkEpisode), its case's bug moved below the first suspect in `lowerShare` of them
 * (withBugRanked, suspect 2 to 5). RL's replay term (train/replay.ts) draws the same way.
 */
export function drawDemonstration(r: () => number, c: FixCase, o: DrawMix): Demonstration;
export function drawDemonstration(r: () => number, c: FixCase, o: DrawMix & { noSed: true }): Demonstration | undefined;
/**
 * With `noSed`, every draw is in the numbered form (numberedShare 1) and a case without one
 * gives undefined (the caller draws another case): no example writes a path or a sed command.
 */
export function drawDemonstration(r: () => number, c: FixCase, o: DrawMix & { noSed?: boolean }): Demonstration | undefined {
  // A draw only when a numbered (or candidate) share is set: a recipe without those forms keeps its random stream.
  const numbered = o.noSed || (!!o.numberedShare && r() < o.numberedShare);
  const cands = numbered && !!o.candsShare && r() < o.candsShare;
  if (r() < o.curriculum) return (numbered && numberedCurriculumTask(r, c, { cands })) || (o.noSed ? undefined : curriculumTask(r, c));
  if (numbered) {
    const d = (cands && candidateForm(r, c, o)) || numberedEpisode(r, c);
    if (d) return d;
    if (o.noSed) return undefined;
  }
  return r() < 0.85 ? fixEpisode(r, c, { loopShare: o.loopShare }) : { kind: 'fix-turn', segments: fixOnlySegments(c) };
}

/** The shares of each form in a draw (drawDemonstration). */
export interface DrawMix {
  curriculum: number;
  loopShare: number;
  numberedShare?: number;
  candsShare?: number;
  walkShare?: number;
  lowerShare?: number;
}

/** A candidate-form draw: the walk in `walkShare` of them (its bug lower in `lowerShare` where such a walk fits), else the listed form. */
function candidateForm(r: () => number, c: FixCase, o: DrawMix): Demonstration | undefined {
  // No draw without walks: the random stream of recipes made before them stays the same.
  if (!o.walkShare || r() >= o.walkShare) return candidateEpisode(c);
  if (o.lowerShare && r() < o.lowerShare) {
    // Suspect 2 to 5, or the lowest above it whose walk fits in the turns.
    for (let k = 2 + Math.floor(r() * 4); k >= 2; k--) {
      const lower = withBugRanked(c, k);
      const d = lower && walkEpisode(lower);
      if (d) return d;
    }
  }
  return walkEpisode(c) || candidateEpisode(c);
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
