// Fix cases, the facts a demonstration is written from (a mutation task's fix is known): which
// mutations are fixable, the one-line `sed` that undoes one, a suspect line's undo candidates.
import type { MutationInfo } from '../core/schema';
import { MUTATION_OPERATORS, mutationCandidates, type MutationCandidate } from '../tasks/mutate';
import { readWorkspaceFile } from '../tasks/origin';

/**
 * The facts a fix episode is written from: a mutation of a generated module (cases.ts), of real
 * source (real-source.ts), or a workspace's own mutation task (train split only), its tool output
 * recorded for real in a sandbox (workspaceCasesFor in warmstart/workspace-demonstrations.ts).
 */
export interface FixCase {
  /** The workspace task it was recorded from (absent for generated modules). */
  taskId?: string;
  path: string;
  line: number;
  mutatedLine: string;
  originalLine: string;
  fix: string;
  failing: string[];
  passing: number;
  /** `tw-suspects` output lines after the summary. */
  suspects: string[];
  /**
   * One-token undo edits of the first suspect's line in a fixed order (undoCandidates), each with
   * the line it makes and its `sed`: what an attempt loop tries (absent: not computed).
   */
  topCandidates?: { code: string; fix: string }[];
  /** The mutated file's lines around the bug (from `first`, 1-based), as `tw-show` prints them; absent: not known. */
  context?: { first: number; lines: string[] };
  /**
   * The first of the bug line's `tw-cands` variants (1-based) that makes the tests pass, where it
   * comes before the one that restores the original: a workspace's tests may accept another
   * change too (recorded in a sandbox: recordWorkspaceCases). Absent: only the original passes.
   */
  firstPassingVariant?: number;
}

/** Mutations whose fix can be read off the code (deleted statements cannot be restored by reading). */
export const FIXABLE_OPERATORS: ReadonlySet<string> = new Set(MUTATION_OPERATORS.filter((op) => !op.startsWith('delete-')));

const sedPattern = (s: string) => s.replace(/[\\/.*[\]^$]/g, (c) => `\\${c}`);
const sedReplacement = (s: string) => s.replace(/[\\/&]/g, (c) => `\\${c}`);

/**
 * The smallest edit that turns the mutated line back into the original, as text to replace and
 * its replacement: the differing span, widened to whole tokens and until it occurs once in the
 * line (what both a one-line `sed` and `tw-edit K OLD NEW` need). Undefined when the lines are
 * equal or no such span exists.
 */
export function fixSpan(mutatedLine: string, originalLine: string): { old: string; neu: string } | undefined {
  if (mutatedLine === originalLine) return undefined;
  let p = 0;
  while (p < mutatedLine.length && p < originalLine.length && mutatedLine[p] === originalLine[p]) p++;
  let s = 0;
  while (
    s < mutatedLine.length - p &&
    s < originalLine.length - p &&
    mutatedLine[mutatedLine.length - 1 - s] === originalLine[originalLine.length - 1 - s]
  )
    s++;
  // Whole tokens around the change (an insertion takes the token after it), widened token by
  // token until the span occurs once in the line.
  const toks = [...mutatedLine.matchAll(/\w+|[^\w\s()[\]{},:'"]+|[()[\]{},:'"]|\s+/g)].map((m) => ({
    s: m.index!,
    e: m.index! + m[0].length,
    ws: /^\s+$/.test(m[0]),
  }));
  const a = p;
  const b = mutatedLine.length - s;
  let i = toks.findIndex((t) => t.e > a);
  if (i < 0) return undefined;
  // An insertion before a space (`>` → `>=`) takes the token it extends.
  if (a === b && toks[i].ws && i > 0 && toks[i - 1].e === a) i--;
  let j = i;
  while (j + 1 < toks.length && toks[j].e < b) j++;
  while (toks[i].ws && i < j) i++;
  while (toks[j].ws && j > i) j--;
  // Trimming must not drop changed characters (a deleted ` - 1` starts with its space): take
  // the neighbouring word instead, so the span still covers the whole change.
  if (toks[i].s > a)
    do i--;
    while (i > 0 && toks[i].ws);
  if (toks[j].e < b)
    do j++;
    while (j + 1 < toks.length && toks[j].ws);
  if (toks[i].ws) return undefined;
  const count = (x: string) => mutatedLine.split(x).length - 1;
  const span = () => mutatedLine.slice(toks[i].s, toks[j].e);
  while (count(span()) > 1) {
    const canL = i > 0;
    const canR = j + 1 < toks.length;
    if (!canL && !canR) return undefined;
    if (canL)
      do i--;
      while (i > 0 && toks[i].ws);
    if (canR)
      do j++;
      while (j + 1 < toks.length && toks[j].ws);
  }
  const old = span();
  const neu = originalLine.slice(toks[i].s, originalLine.length - (mutatedLine.length - toks[j].e));
  if (old === '' || count(old) !== 1) return undefined;
  return { old, neu };
}

/**
 * The line a mutation changed, read from the original file in the workspace (only a plain file
 * inside it: a task's path is input, and this reads the host): its number, its text before and
 * after the mutation, and the mutated file's lines. Undefined where the file does not hold the
 * mutation's original text there, or the mutation changes the number of lines.
 */
export function mutatedLineOf(
  workspace: string,
  m: MutationInfo,
): { line: number; mutatedLine: string; originalLine: string; mutatedLines: string[] } | undefined {
  const source = readWorkspaceFile(workspace, m.file);
  if (source === undefined || source.slice(m.span.start, m.span.end) !== m.span.text) return undefined;
  const mutated = source.slice(0, m.span.start) + m.replacement + source.slice(m.span.end);
  const line = source.slice(0, m.span.start).split('\n').length;
  const a = mutated.split('\n');
  const b = source.split('\n');
  if (a.length !== b.length) return undefined;
  return { line, mutatedLine: a[line - 1], originalLine: b[line - 1], mutatedLines: a };
}

/** A file path a demonstrated command holds as it is: no character bash would read as anything but itself. */
const PLAIN_PATH = /^[A-Za-z0-9_./+-]+$/;

/**
 * The one-line `sed` that turns the mutated line back into the original (fixSpan). Undefined
 * when the change spans lines, the line holds a single quote (the command is single-quoted), or
 * the path holds a character bash would interpret (a space, `$(…)`): a workspace's file names
 * are data, and a demonstration must not teach a command that runs part of one.
 */
export function fixCommand(path: string, line: number, mutatedLine: string, originalLine: string): string | undefined {
  if (mutatedLine.includes("'") || originalLine.includes("'") || !PLAIN_PATH.test(path)) return undefined;
  const e = fixSpan(mutatedLine, originalLine);
  return e && `sed -i '${line}s/${sedPattern(e.old)}/${sedReplacement(e.neu)}/' ${path}`;
}

/**
 * The lines a mutation of `code` (one line) could have come from, in a fixed order: a removed
 * `not (…)` or ` - 1` bound first, then token by token left to right (negating the whole
 * condition last), each token's undo edits in the mutation engine's order (a constant: +1, then
 * -1; `*`: `//` before `/`; `False`: `True` before `None`). Found by running the real mutation
 * engine on the line, since most of its operators are their own inverses, plus the inverses
 * that are not.
 */
export async function undoCandidates(code: string): Promise<string[]> {
  const body = code.trim();
  const src = `def f():\n    ${body}${body.endsWith(':') ? '\n        pass' : ''}\n`;
  const negated = /^(\s*(?:if|elif|while|return|assert)\s+)not \((.*)\)(:?)$/.exec(body);
  // Negating a condition again is no undo when it is negated already (that `not (…)` goes instead).
  const muts = (await mutationCandidates('m.py', src, 'python')).filter(
    (m) => FIXABLE_OPERATORS.has(m.operator) && m.line === 2 && !(negated && m.operator === 'negate-condition'),
  );
  // Left to right; negating the whole condition last (a flipped operator is likelier on such a line).
  const late = (m: MutationCandidate) => (m.operator === 'negate-condition' ? 1 : 0);
  muts.sort((a, b) => late(a) - late(b) || a.start - b.start);
  const out: string[] = [];
  const add = (line: string) => {
    const t = line.trim();
    if (t !== body && !out.includes(t)) out.push(t);
  };
  if (negated) add(`${negated[1]}${negated[2]}${negated[3]}`);
  for (const m of body.matchAll(/ - 1(?=\))/g)) add(body.slice(0, m.index) + body.slice(m.index! + 4));
  const lineStart = src.indexOf('\n') + 1;
  const lineEnd = src.indexOf('\n', lineStart);
  for (const m of muts) {
    // `*` is what both `/` and `//` become; the generated modules use `//`.
    if (m.original === '*' && m.replacement === '/') add(src.slice(lineStart, m.start) + '//' + src.slice(m.end, lineEnd));
    // The engine negates a bare name as `not (x)` but un-negates `not x`: undo that form.
    add(m.mutatedSource.split('\n')[1].replace(/\bnot \(([\w.]+)\)/, 'not $1'));
    // `False` is what both `True` and `None` become.
    if (m.original === 'False' && m.replacement === 'True') add(src.slice(lineStart, m.start) + 'None' + src.slice(m.end, lineEnd));
  }
  return out;
}

/** The first `path:line: code` line of a case's `tw-suspects` output, parsed. */
export function topSuspect(c: Pick<FixCase, 'suspects'>): { path: string; line: number; code: string } | undefined {
  const m = /^(\S+):(\d+): (.*)$/.exec(c.suspects[0] ?? '');
  return m ? { path: m[1], line: Number(m[2]), code: m[3] } : undefined;
}

/** `c` with its first suspect's undo candidates (topCandidates), each as a `sed` on that line. */
export async function withTopCandidates(c: FixCase): Promise<FixCase> {
  const top = topSuspect(c);
  if (!top) return c;
  const topCandidates: { code: string; fix: string }[] = [];
  for (const alt of await undoCandidates(top.code)) {
    const fix = fixCommand(top.path, top.line, top.code, alt);
    if (fix) topCandidates.push({ code: alt, fix });
  }
  return { ...c, topCandidates };
}
