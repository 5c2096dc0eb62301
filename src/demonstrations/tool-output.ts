// The sandbox tools simulated for fix cases: what `tw-suspects`, `tw-test`, `tw-show`, `tw-edit`
// print, in the exact formats of sandbox-images/python/tools/turnwise_tools.py.
import { observationText } from '../agent/prompt';
import type { FixCase } from './fix-cases';
import { int, NOUNS, pick, type Rng } from './generated-modules';

/** Lines of the file as `tw-suspects` prints them: `path:line: code` (code trimmed). */
function suspectLine(path: string, lines: string[], n: number): string {
  return `${path}:${n}: ${lines[n - 1].trim().slice(0, 100)}`;
}

/**
 * Share of fixable bugs `tw-suspects` ranks first: its mutation analysis puts the line where a
 * one-token change makes the tests pass on top. Measured on the demo workspace's 24 fixable
 * mutation tasks in the sandbox image: 22 first, 2 third (a changed constant and swapped
 * arguments, which it does not try), against 12 first by Ochiai alone.
 */
export const SUSPECTS_TOP1 = 0.9;

/**
 * A plausible `tw-suspects` ranking for a mutated function: usually the mutated line first (the
 * tool's mutation analysis confirmed it), then the function's other executed body lines in order
 * (ties in Ochiai order by line), some moved down (also covered by passing tests); at most 5.
 */
export function simulatedSuspects(r: Rng, path: string, mutatedLines: string[], fn: [number, number], bugLine: number): string[] {
  let body: number[] = [];
  // Lines where a statement starts (a closing bracket or a string continuing a call is not one).
  for (let n = fn[0] + 1; n <= fn[1]; n++) {
    const t = mutatedLines[n - 1]?.trim();
    if (t && !/^([)\]}]+[,:)]*|["'].*|#.*)$/.test(t)) body.push(n);
  }
  const demoted: number[] = [];
  body = body.filter((n) => {
    if (n !== bugLine && r() < 0.25) {
      demoted.push(n);
      return false;
    }
    return true;
  });
  let order = [...body, ...demoted];
  if (r() < SUSPECTS_TOP1) order = [bugLine, ...order.filter((n) => n !== bugLine)];
  order = order.slice(0, 5);
  if (!order.includes(bugLine)) order = [bugLine, ...order.slice(0, 4)];
  return order.map((n) => suspectLine(path, mutatedLines, n));
}

/**
 * Test ids for failing tests of function `fnName` in the module at `path` (a package's
 * `__init__.py` is named by its folder), in the shapes pytest reports: a test function, a method
 * of a unittest or pytest class, or a parametrized case; in tests/, test/ or beside the code.
 */
export function testIds(r: Rng, path: string, fnName: string, n: number): string[] {
  const parts = path.replace(/^src\//, '').split('/');
  let mod = parts.pop()!.replace(/\.py$/, '');
  if (mod === '__init__' && parts.length) mod = parts.pop()!;
  mod = mod.replace(/^_+/, '');
  const suffixes = ['basic', 'edge', 'zero', 'large', 'empty', 'boundary', 'rounds', 'negative', 'default', 'limit'];
  const camel = mod
    .split('_')
    .map((w) => w.slice(0, 1).toUpperCase() + w.slice(1))
    .join('');
  const dir = pick(r, ['tests/', 'tests/', 'tests/', 'test/', '']);
  const shape = r();
  const cls = shape < 0.5 ? '' : `${pick(r, [`Test${camel}`, `${camel}TestCase`, `${camel}Tests`])}::`;
  const param = () =>
    shape < 0.8 ? '' : `[${pick(r, [String(int(r, 0, 20)), `${pick(r, NOUNS)}-${int(r, 0, 9)}`, `case${int(r, 0, 9)}`])}]`;
  const ids = new Set<string>();
  while (ids.size < n)
    ids.add(
      `${dir}test_${mod}.py::${cls}test_${fnName}${r() < 0.8 ? `_${pick(r, suffixes)}` : ''}${ids.size ? `_${ids.size}` : ''}${param()}`,
    );
  return [...ids];
}

/** Lines of the file around line `n`, as `tw-show` prints them (its context of 2 lines). */
export function showContext(lines: readonly string[], n: number, ctx = 2): { first: number; lines: string[] } {
  const lo = Math.max(1, n - ctx);
  const hi = Math.min(lines.length, n + ctx);
  return { first: lo, lines: lines.slice(lo - 1, hi) };
}

/** An observation: the exit code and what a command printed (nothing on stderr). */
export const obs = (exitCode: number, stdout: string) => observationText({ exitCode, stdout, stderr: '' });

/** The observation of `tw-suspects` on a case: its counts line, then the suspect lines. */
export const suspectsObservation = (c: FixCase) => obs(1, [`${c.failing.length} failed, ${c.passing} passed`, ...c.suspects].join('\n'));

/** `tw-test`'s output when `failing` fail and `passing` pass (its format in the sandbox tool). */
export function twTestOutput(failing: readonly string[], passing: number): string {
  const lines = failing.slice(0, 3).map((id) => `FAIL ${id}`);
  if (failing.length > 3) lines.push(`... ${failing.length - 3} more`);
  lines.push(`${failing.length} failed, ${passing} passed`);
  return lines.join('\n');
}

/** `tw-test`'s output when all of a case's tests pass. */
export const allPassed = (c: Pick<FixCase, 'failing' | 'passing'>) => twTestOutput([], c.failing.length + c.passing);

/** `tw-suspects -n`'s lines: the ranking with each suspect's number. */
export function numberedSuspects(c: Pick<FixCase, 'suspects'>): string[] {
  return c.suspects.map((l, i) => `[${i + 1}] ${l}`);
}

/** The observation of `tw-suspects -n` on a case. */
export const numberedSuspectsObservation = (c: FixCase) =>
  obs(1, [`${c.failing.length} failed, ${c.passing} passed`, ...numberedSuspects(c)].join('\n'));

/**
 * What `tw-edit` prints for an edit of `path:line` from `code` to `edited`; `tw-apply` names the
 * variant it wrote and how many the line has (`variant`), so an agent sees when a line's are used up.
 */
export function twEditOutput(path: string, line: number, code: string, edited: string, variant?: { j: number; n: number }): string {
  const which = variant ? ` (variant ${variant.j} of ${variant.n})` : '';
  return [`edited ${path}:${line}${which}`, `- ${code.trim().slice(0, 100)}`, `+ ${edited.trim().slice(0, 100)}`].join('\n');
}

/** What `tw-show K` prints for the case's bug line (its context known). */
export function twShowOutput(c: Pick<FixCase, 'path' | 'line' | 'context'>): string | undefined {
  if (!c.context) return undefined;
  const hi = c.context.first + c.context.lines.length - 1;
  const width = String(hi).length;
  return [
    `${c.path}:${c.line}`,
    ...c.context.lines.map(
      (l, i) => `${c.context!.first + i === c.line ? '>' : ' '}${String(c.context!.first + i).padStart(width)} ${l.slice(0, 120)}`,
    ),
  ].join('\n');
}

/** What `tw-apply K J` prints when it refuses: the line `path:line` (its text `code`) has no variants, or none numbered `j` of `n`. */
export function twApplyRefusal(path: string, line: number, code: string, k: number, j: number, n: number): string {
  return n === 0
    ? `tw-apply: ${path}:${line} has no one-token variants: ${code.trim().slice(0, 100)}`
    : `tw-apply: no variant ${j}: tw-cands ${k} lists ${n} (1-${n})`;
}
