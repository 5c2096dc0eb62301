// Demonstrations for the supervised warm start: the teacher's episode on a fix case in each form
// (sed, attempt loop, numbered, candidate), and the copy curriculum's short tasks.
import { SUBMIT, taskText, type Segment } from '../agent/prompt';
import { ARITH_SWAP, BOOL_SWAP, COMPARISON_FLIP } from '../tasks/mutate';
import { fixCommand, fixSpan, topSuspect, type FixCase } from './fix-cases';
import { int, pick, type Rng } from './generated-modules';
import { lineCandidates, twCandsOutput } from './line-candidates';
import {
  allPassed,
  numberedSuspects,
  numberedSuspectsObservation,
  obs,
  suspectsObservation,
  twApplyRefusal,
  twEditOutput,
  twShowOutput,
  twTestOutput,
} from './tool-output';

/** One training example: the segments, and which are actions (trained at full weight). */
export interface Demonstration {
  kind: string;
  segments: Segment[];
}

/**
 * A wrong first attempt for a recovery demonstration: a one-token edit (an operator undone, a
 * constant moved by one) on the first suspect that does not restore the original. When the bug
 * is not ranked first that is another line (trusting the top suspect); when it is, the wrong
 * token or direction on the right line.
 */
function wrongAttempt(r: Rng, c: FixCase): { fix: string; path: string } | undefined {
  const top = topSuspect(c);
  if (!top) return undefined;
  const { path: file, line, code } = top;
  const wrong: string[] = [];
  for (const t of code.matchAll(/<=|>=|==|!=|\+=|-=|(?<![=<>!])[<>](?!=)|(?<=\s)[-+](?=\s)|\band\b|\bor\b|(?<![\w.])\d+(?![\w.])/g)) {
    const tok = t[0];
    const alt = /^\d+$/.test(tok)
      ? String(Number(tok) + (Number(tok) > 0 && r() < 0.5 ? -1 : 1))
      : (UNDO_TABLE[tok] ?? (tok === '+=' ? '-=' : '+='));
    const edited = code.slice(0, t.index) + alt + code.slice(t.index! + tok.length);
    if (!(line === c.line && edited.trim() === c.originalLine.trim())) wrong.push(edited);
  }
  if (wrong.length === 0) return undefined;
  const fix = fixCommand(file, line, code, wrong[Math.floor(r() * wrong.length)]);
  return fix ? { fix, path: file } : undefined;
}

/** Share of fix episodes that show a wrong first attempt, undone with git, then the fix. */
export const RECOVERY_SHARE = 0.2;

/**
 * Share of fix episodes written as an attempt loop (attemptCommand) when a warm start asks for
 * loops (`--loop-share`) without naming a share.
 */
export const LOOP_SHARE = 0.6;

/** Failed attempts a loop demonstration shows at most before the fix. */
export const LOOP_MAX_FAILED = 2;

/**
 * One turn that tries a fix: the edit, then the tests; when they still fail the file goes back
 * (`git checkout`), so the next attempt starts from the task's state. Plain bash.
 */
export function attemptCommand(fix: string, path: string): string {
  return `${fix} && tw-test || git checkout -q ${path}`;
}

/**
 * The attempt loop: tw-suspects, then one turn per try until the tests pass, then submit. The
 * tries before the fix are 0 to LOOP_MAX_FAILED other undo candidates of the first suspect
 * (undoCandidates), drawn at random and never repeated: the teacher's first try is its best
 * guess like the policy's, and after a failure the next best guess that is not the same edit.
 * When the bug is not on the first suspect, at least one of that line's candidates fails first.
 */
function loopEpisode(r: Rng, c: FixCase, segs: Segment[], turn: (action: string, observation?: string) => void): Demonstration | undefined {
  const top = topSuspect(c);
  if (!top || !c.topCandidates?.length) return undefined;
  const onTop = top.path === c.path && top.line === c.line;
  const wrong = c.topCandidates.filter((x) => !(onTop && x.code === c.originalLine.trim()));
  const k = Math.min(wrong.length, onTop ? int(r, 0, LOOP_MAX_FAILED) : int(r, 1, LOOP_MAX_FAILED));
  if (!onTop && k === 0) return undefined;
  const failed: { fix: string }[] = [];
  for (let i = 0; i < k; i++) failed.push(wrong.splice(Math.floor(r() * wrong.length), 1)[0]);
  turn('tw-suspects', suspectsObservation(c));
  // `tw-test` failing, then `git checkout -q` succeeding: the command's exit code is 0.
  for (const f of failed) turn(attemptCommand(f.fix, top.path), obs(0, twTestOutput(c.failing, c.passing)));
  turn(attemptCommand(c.fix, c.path), obs(0, allPassed(c)));
  turn(SUBMIT);
  return { kind: failed.length ? 'episode-loop' : 'episode-loop-first', segments: segs };
}

/**
 * The teacher's episode for a fix case: in `loopShare` of them (candidates known) an attempt
 * loop (loopEpisode); otherwise [tw-test,] tw-suspects, sed, tw-test, submit; or, in
 * about RECOVERY_SHARE of those, a wrong sed first, tw-test still failing, `git checkout -- FILE`
 * to undo it, then the right sed.
 */
export function fixEpisode(r: Rng, c: FixCase, o: { loopShare?: number } = {}): Demonstration {
  const segs: Segment[] = [{ role: 'task', text: taskText({ fail_to_pass: c.failing, source: 'mutation' }) }];
  const turn = (action: string, observation?: string) => {
    segs.push({ role: 'agent', text: action });
    if (observation !== undefined) segs.push({ role: 'obs', text: observation });
  };
  // No draw at all without loops: the random stream (and so the demonstrations) of warm starts
  // made before loops existed stays the same.
  if (o.loopShare && c.topCandidates?.length && r() < o.loopShare) {
    const loop = loopEpisode(r, c, segs, turn);
    if (loop) return loop;
  }
  const wrong = r() < RECOVERY_SHARE ? wrongAttempt(r, c) : undefined;
  if (!wrong && r() < 0.2) turn('tw-test', obs(1, twTestOutput(c.failing, c.passing)));
  turn('tw-suspects', suspectsObservation(c));
  if (wrong) {
    turn(wrong.fix, obs(0, ''));
    turn('tw-test', obs(1, twTestOutput(c.failing, c.passing)));
    turn(`git checkout -- ${wrong.path}`, obs(0, ''));
  }
  turn(c.fix, obs(0, ''));
  turn('tw-test', obs(0, allPassed(c)));
  turn(SUBMIT);
  return { kind: wrong ? 'episode-recovery' : 'episode', segments: segs };
}

// Numbered form: `tw-suspects -n` numbers its ranking, and `tw-edit K OLD NEW` edits suspect K's
// line, so a fix names no path: the policy reads a number and a few characters of the line off
// the tool's output instead of copying (or recalling) where the bug is.

/** A shell word for `s`: single-quoted; undefined when it holds a single quote. */
const quoted = (s: string) => (s.includes("'") ? undefined : `'${s}'`);

/** The 1-based number of the case's bug line in its ranking (0: not ranked). */
export function bugSuspect(c: Pick<FixCase, 'suspects' | 'path' | 'line'>): number {
  return c.suspects.findIndex((l) => l.startsWith(`${c.path}:${c.line}: `)) + 1;
}

/**
 * One try in the numbered form: edit suspect `k`, run the tests, and put every file back when
 * they still fail (`git checkout -q .`), so the next try starts from the task's state. Plain
 * bash; undefined when the edit cannot be quoted or is ambiguous.
 */
export function numberedAttempt(k: number, line: string, edited: string): string | undefined {
  const e = fixSpan(line, edited);
  const a = e && quoted(e.old);
  const b = e && quoted(e.neu);
  return a && b ? `tw-edit ${k} ${a} ${b} && tw-test || git checkout -q .` : undefined;
}

/** The numbered fix of a case: the attempt that edits its bug's suspect back to the original. */
export function numberedFix(c: FixCase): string | undefined {
  const k = bugSuspect(c);
  return k > 0 ? numberedAttempt(k, c.mutatedLine, c.originalLine) : undefined;
}

/**
 * The teacher's episode in the numbered form: `tw-suspects -n`, sometimes `tw-show 1`, then tries
 * on the first suspect (0 to LOOP_MAX_FAILED wrong undo candidates, at least one when the bug is
 * ranked lower), the fix on the bug's suspect, submit. Undefined when the case has no numbered fix.
 */
export function numberedEpisode(r: Rng, c: FixCase): Demonstration | undefined {
  const fix = numberedFix(c);
  const k = bugSuspect(c);
  const top = topSuspect(c);
  if (!fix || !top) return undefined;
  const segs: Segment[] = [{ role: 'task', text: taskText({ fail_to_pass: c.failing, source: 'mutation' }) }];
  const turn = (action: string, observation?: string) => {
    segs.push({ role: 'agent', text: action });
    if (observation !== undefined) segs.push({ role: 'obs', text: observation });
  };
  const wrong = (c.topCandidates ?? []).filter((x) => !(k === 1 && x.code === c.originalLine.trim()));
  const n = Math.min(wrong.length, k === 1 ? int(r, 0, LOOP_MAX_FAILED) : int(r, 1, LOOP_MAX_FAILED));
  if (k > 1 && n === 0) return undefined;
  turn('tw-suspects -n', numberedSuspectsObservation(c));
  const show = k === 1 ? twShowOutput(c) : undefined;
  if (show && r() < 0.3) turn('tw-show 1', obs(0, show));
  for (let i = 0; i < n; i++) {
    const w = wrong.splice(Math.floor(r() * wrong.length), 1)[0];
    const cmd = numberedAttempt(1, top.code, w.code);
    if (!cmd) continue;
    // The edit, tw-test failing, then `git checkout -q .` succeeding: the command's exit code is 0.
    turn(cmd, obs(0, `${twEditOutput(top.path, top.line, top.code, w.code)}\n${twTestOutput(c.failing, c.passing)}`));
  }
  turn(fix, obs(0, `${twEditOutput(c.path, c.line, c.mutatedLine, c.originalLine)}\n${allPassed(c)}`));
  turn(SUBMIT);
  return { kind: k === 1 ? 'episode-numbered' : 'episode-numbered-lower', segments: segs };
}

// Candidate form: `tw-cands K` lists suspect K's one-token variants by number and `tw-apply K J`
// writes one, so a fix is two numbers read off the tools' output: nothing is copied at all.

/** One try in the candidate form: write variant `j` of suspect `k`, run the tests, put every file back when they still fail. */
export function candidateAttempt(k: number, j: number): string {
  return `tw-apply ${k} ${j} && tw-test || git checkout -q .`;
}

/** The 1-based number of the case's original line among the mutated line's variants (0: not one of them). */
export function fixVariant(c: Pick<FixCase, 'mutatedLine' | 'originalLine'>): number {
  return lineCandidates(c.mutatedLine).indexOf(c.originalLine) + 1;
}

/**
 * The variant a try in order stops at: the first that makes the tests pass (the recorded one
 * where the workspace's tests accept an earlier variant, else the original's); 0: none listed.
 */
export function stopVariant(c: Pick<FixCase, 'mutatedLine' | 'originalLine' | 'firstPassingVariant'>): number {
  const j = fixVariant(c);
  return j > 0 && c.firstPassingVariant && c.firstPassingVariant < j ? c.firstPassingVariant : j;
}

/** The candidate-form fix of a case: `tw-apply K J` of its bug's suspect and the original line; undefined when either is not listed. */
export function candidateFix(c: FixCase): string | undefined {
  const k = bugSuspect(c);
  const j = fixVariant(c);
  return k > 0 && j > 0 ? candidateAttempt(k, j) : undefined;
}

/**
 * The teacher's episode in the candidate form: `tw-suspects -n`, then each suspect from the top:
 * `tw-cands K`, and its variants tried in their listed order, 1, 2, 3, …, until one makes the
 * tests pass, and submit. A line above the bug has every variant tried (all fail) before the
 * next suspect; a line without variants is passed straight on. So what a try depends on is the
 * try before it (the next number, or the next suspect after a line's last one), never which
 * number the fix has: a policy that learned this fixes a line of a repository it never saw as
 * well as one of its demonstrations, and RL on one repository's tasks has no number to learn.
 * Undefined when the case has no candidate fix, a suspect above the bug is cut in the ranking
 * (its variants are not known here), or the tries do not fit in CANDS_MAX_TURNS commands.
 */
export function candidateEpisode(c: FixCase): Demonstration | undefined {
  const k = bugSuspect(c);
  const j = stopVariant(c);
  const above = k > 0 && j > 0 ? suspectsAbove(c, k) : undefined;
  if (!above) return undefined;
  // tw-suspects, a tw-cands per suspect down to the bug, every variant above it, the bug line's
  // variants before the fix, and the fix.
  const commands = 1 + k + above.reduce((s, x) => s + x.variants.length, 0) + (j - 1) + 1;
  if (commands > CANDS_MAX_TURNS) return undefined;
  const segs: Segment[] = [{ role: 'task', text: taskText({ fail_to_pass: c.failing, source: 'mutation' }) }];
  const turn = (action: string, observation: string) => segs.push({ role: 'agent', text: action }, { role: 'obs', text: observation });
  const bug = bugLine(c);
  turn('tw-suspects -n', numberedSuspectsObservation(c));
  above.forEach((x, i) => {
    turn(`tw-cands ${i + 1}`, obs(0, twCandsOutput(x.path, x.line, x.code)));
    x.variants.forEach((_, vi) => turn(...failedTry(c, i + 1, x, vi + 1)));
  });
  turn(`tw-cands ${k}`, obs(0, twCandsOutput(c.path, c.line, c.mutatedLine)));
  for (let vi = 1; vi < j; vi++) turn(...failedTry(c, k, bug, vi));
  turn(candidateAttempt(k, j), obs(0, `${applyOutput(bug, j)}\n${allPassed(c)}`));
  segs.push({ role: 'agent', text: SUBMIT });
  return { kind: k === 1 ? 'episode-cands' : 'episode-cands-lower', segments: segs };
}

/** A suspect's line as the tries of the candidate and walk forms see it: its place, its text and its tw-cands variants. */
interface TriedLine {
  path: string;
  line: number;
  code: string;
  variants: string[];
}

/** The case's bug line before its fix. */
const bugLine = (c: FixCase): TriedLine => ({ path: c.path, line: c.line, code: c.mutatedLine, variants: lineCandidates(c.mutatedLine) });

/**
 * The suspects ranked above suspect `k`, parsed; undefined when one is cut in the ranking (it cuts
 * a line at 100 characters, and past that its variants are not known here).
 */
function suspectsAbove(c: FixCase, k: number): TriedLine[] | undefined {
  const parsed = c.suspects.slice(0, k - 1).map((l) => /^(\S+):(\d+): (.*)$/.exec(l));
  if (parsed.some((m) => !m || m[3].length >= 100)) return undefined;
  return parsed.map((m) => ({ path: m![1], line: Number(m![2]), code: m![3], variants: lineCandidates(m![3]) }));
}

/** What `tw-apply` prints when it writes variant `j` of line `x`. */
const applyOutput = (x: TriedLine, j: number) => twEditOutput(x.path, x.line, x.code, x.variants[j - 1], { j, n: x.variants.length });

/**
 * A try of variant `j` of suspect `k`'s line `x` whose tests still fail: the edit, tw-test failing,
 * then `git checkout -q .` succeeding, so the command exits 0. The action and its observation.
 */
const failedTry = (c: FixCase, k: number, x: TriedLine, j: number): [string, string] => [
  candidateAttempt(k, j),
  obs(0, `${applyOutput(x, j)}\n${twTestOutput(c.failing, c.passing)}`),
];

/**
 * The teacher's episode in the walk form: `tw-suspects -n`, then the variants of each suspect
 * from the top, in their listed order, each written with `tw-apply K J`, tested and put back
 * when the tests still fail, until one makes them pass, and submit. No `tw-cands`: tw-apply says
 * "variant J of N", and after a line's last variant the walk goes on with the next suspect's
 * first; a line without variants is one try that tw-apply refuses, and then the next suspect.
 * So every try follows from the one before it (the next number, or the next suspect), as in the
 * candidate form, at a turn fewer per suspect: a bug on suspect 2 or 3 fits in the turn limit
 * when the lines above it have few variants. Undefined when the case has no candidate fix, a
 * suspect above the bug is cut in the ranking, or the tries do not fit in CANDS_MAX_TURNS commands.
 */
export function walkEpisode(c: FixCase): Demonstration | undefined {
  const k = bugSuspect(c);
  const j = stopVariant(c);
  const above = k > 0 && j > 0 ? suspectsAbove(c, k) : undefined;
  // A line without variants costs one refused try.
  if (!above || 1 + above.reduce((s, x) => s + Math.max(1, x.variants.length), 0) + j > CANDS_MAX_TURNS) return undefined;
  const segs: Segment[] = [{ role: 'task', text: taskText({ fail_to_pass: c.failing, source: 'mutation' }) }];
  const turn = (action: string, observation: string) => segs.push({ role: 'agent', text: action }, { role: 'obs', text: observation });
  const bug = bugLine(c);
  turn('tw-suspects -n', numberedSuspectsObservation(c));
  above.forEach((x, i) => {
    // tw-apply refuses (exit 1), so `git checkout -q .` runs and the command exits 0.
    if (!x.variants.length) turn(candidateAttempt(i + 1, 1), obs(0, twApplyRefusal(x.path, x.line, x.code, i + 1, 1, 0)));
    x.variants.forEach((_, vi) => turn(...failedTry(c, i + 1, x, vi + 1)));
  });
  for (let vi = 1; vi < j; vi++) turn(...failedTry(c, k, bug, vi));
  turn(candidateAttempt(k, j), obs(0, `${applyOutput(bug, j)}\n${allPassed(c)}`));
  segs.push({ role: 'agent', text: SUBMIT });
  return { kind: k === 1 ? 'episode-walk' : 'episode-walk-lower', segments: segs };
}

/**
 * The case with its ranking redrawn so the bug is suspect `k` (2 or lower; the others keep their
 * order): the warm start's rankings put the bug first as often as tw-suspects does on the demo
 * workspace, and a walk past the first suspect is shown only where it is not (`lowerShare`).
 * Undefined when the ranking has fewer than `k` lines or does not show the bug.
 */
export function withBugRanked(c: FixCase, k: number): FixCase | undefined {
  const at = bugSuspect(c);
  if (at === 0 || k < 1 || k > c.suspects.length) return undefined;
  const others = c.suspects.filter((_, i) => i !== at - 1);
  const suspects = [...others.slice(0, k - 1), c.suspects[at - 1], ...others.slice(k - 1)];
  // topCandidates are the first suspect's undo edits: no longer that line's once it moved.
  const { topCandidates: _, ...rest } = c;
  return { ...rest, suspects };
}

/**
 * The most commands a candidate-form episode runs, its fix the last, before it submits: the turn
 * budget of the bench's evaluations (an episode that runs out of turns is scored as it stands).
 */
export const CANDS_MAX_TURNS = 6;

/** Short tasks that teach reading the numbered ranking: a suspect's number, an edit of a given suspect (with `cands`: a given variant written instead). */
export function numberedCurriculumTask(r: Rng, c: FixCase, o: { cands?: boolean } = {}): Demonstration | undefined {
  const one = (task: string, answer: string, kind: string): Demonstration => ({
    kind,
    segments: [
      { role: 'task', text: task },
      { role: 'agent', text: answer },
    ],
  });
  const list = numberedSuspects(c).join('\n');
  const k = bugSuspect(c);
  const fix = numberedFix(c);
  if (!fix || k === 0) return undefined;
  const e = fixSpan(c.mutatedLine, c.originalLine)!;
  if (r() < 0.4) return one(`Number of the suspect at ${c.path}:${c.line}:\n${list}`, String(k), 'numbered-which');
  const j = o.cands ? fixVariant(c) : 0;
  if (j > 0)
    return one(
      `Write variant ${j} of suspect ${k} and test it:\n${twCandsOutput(c.path, c.line, c.mutatedLine)}`,
      candidateAttempt(k, j),
      'cands-apply',
    );
  return one(`In suspect ${k}, replace ${e.old} with ${e.neu}:\n${list}`, fix, 'numbered-edit');
}

/** The operators the copy curriculum asks to undo, each with its undo: the mutation engine's own swaps. */
const UNDO_TABLE: Readonly<Record<string, string>> = {
  ...only(COMPARISON_FLIP, '<', '<=', '>', '>=', '==', '!='),
  ...only(ARITH_SWAP, '+', '-'),
  ...only(BOOL_SWAP, 'and', 'or'),
  True: 'False',
  False: 'True',
};

function only(table: Readonly<Record<string, string>>, ...keys: string[]): Record<string, string> {
  return Object.fromEntries(keys.map((k) => [k, table[k]]));
}

/**
 * Short copy/undo/assemble tasks in the chat format, built from a fix case: a byte-level model of
 * 3M parameters first has to learn to copy from its context (measured: docs/model-card-turnwise-tiny.md).
 */
export function curriculumTask(r: Rng, c: FixCase): Demonstration {
  const one = (task: string, answer: string, kind: string): Demonstration => ({
    kind,
    segments: [
      { role: 'task', text: task },
      { role: 'agent', text: answer },
    ],
  });
  const k = r();
  if (k < 0.2) {
    const i = int(r, 0, Math.min(2, c.suspects.length - 1));
    const m = /^(.*?:\d+):/.exec(c.suspects[i])!;
    return one(`Location of suspect ${i + 1}:\n${c.suspects.join('\n')}`, m[1], 'copy-location');
  }
  if (k < 0.35) {
    const op = pick(r, Object.keys(UNDO_TABLE));
    return one(`Undo the mutation of: ${op}`, UNDO_TABLE[op], 'undo-operator');
  }
  if (k < 0.55) {
    const m = /^sed -i '(\d+)s\/(.*)\/(.*)\/' (.*)$/.exec(c.fix);
    if (m) return one(`sed command: file ${m[4]}, line ${m[1]}, replace ${m[2]} with ${m[3]}`, c.fix, 'assemble-sed');
  }
  if (k < 0.8) return one(`Fix ${c.path}:${c.line}: ${c.mutatedLine.trim()}`, c.fix, 'fix-line');
  return one(`Fix the bug at ${c.path}:${c.line} in:\n${c.suspects.join('\n')}`, c.fix, 'fix-marked');
}
