// Demonstrations for the supervised warm start. A mutation task's fix is known (the original
// span), so a teacher can write the episode a good agent would have: find the suspect lines,
// undo the mutation with one `sed`, check with the tests, submit. Two sources:
//  - generated Python modules (random functions from templates) mutated by the real mutation
//    engine (tasks/mutate.ts), with tool output simulated in the exact format of the sandbox's
//    `tw-suspects` / `tw-test` (sandbox-images/python/tools/turnwise_tools.py);
//  - a workspace's own mutation tasks (train split only), whose tool output is recorded for
//    real in a sandbox (workspaceCasesFor in warmstart/workspace-demonstrations.ts).
// Plus a copy curriculum of short tasks in the same chat format (copy a location, undo an
// operator, assemble a sed command, fix one given line): a byte-level model of 3M parameters
// first has to learn to copy from its context (measured: docs/model-card-turnwise-tiny.md).
import { observationText, SUBMIT, taskText, type Segment } from '../agent/prompt';
import { ARITH_SWAP, BOOL_SWAP, COMPARISON_FLIP, MUTATION_OPERATORS, mutationCandidates, type MutationCandidate } from '../tasks/mutate';
import { lineCandidates, twCandsOutput } from './line-candidates';

/** One training example: the segments, and which are actions (trained at full weight). */
export interface Demonstration {
  kind: string;
  segments: Segment[];
}

type Rng = () => number;
const pick = <T>(r: Rng, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];
const int = (r: Rng, lo: number, hi: number) => lo + Math.floor(r() * (hi - lo + 1));

const NOUNS = [
  'qty',
  'total',
  'price',
  'limit',
  'count',
  'items',
  'size',
  'stock',
  'rate',
  'score',
  'level',
  'budget',
  'width',
  'height',
  'start',
  'end',
  'step',
  'value',
  'amount',
  'index',
  'weight',
  'cost',
  'days',
  'hours',
  'balance',
  'quota',
  'capacity',
  'available',
  'threshold',
  'target',
  'minimum',
  'maximum',
  'offset',
  'delta',
  'speed',
  'depth',
  'tax',
  'fee',
  'rows',
  'cols',
];
const VERBS = [
  'compute',
  'check',
  'needs',
  'count',
  'apply',
  'clamp',
  'scale',
  'is',
  'has',
  'total',
  'pick',
  'find',
  'split',
  'merge',
  'round',
  'cap',
];
const MODULES = [
  'pricing',
  'billing',
  'stock',
  'orders',
  'grid',
  'stats',
  'calendar',
  'ledger',
  'shipping',
  'scores',
  'quota',
  'rates',
  'cart',
  'report',
  'budget',
  'levels',
];
const PACKAGES = ['shop', 'app', 'core', 'lib', 'inventory', 'billing', 'tools', 'engine', 'src', 'util'];
const CMP = ['<', '<=', '>', '>=', '==', '!='];
const ARITH = ['+', '-', '*', '//'];

function ident(r: Rng, taken: Set<string>): string {
  for (let i = 0; i < 20; i++) {
    const n = pick(r, NOUNS);
    if (!taken.has(n)) {
      taken.add(n);
      return n;
    }
  }
  const n = `${pick(r, NOUNS)}_${taken.size}`;
  taken.add(n);
  return n;
}

/** One function: its name and source lines (4-space indentation). */
function genFunction(r: Rng): { name: string; lines: string[] } {
  const taken = new Set<string>();
  const a = ident(r, taken);
  const b = ident(r, taken);
  const c = ident(r, taken);
  const k = String(int(r, 0, 12));
  const k2 = String(int(r, 1, 9));
  const name = `${pick(r, VERBS)}_${pick(r, NOUNS)}`;
  const shapes: (() => string[])[] = [
    () => [`def ${name}(${a}, ${b}):`, `    return ${a} ${pick(r, CMP)} ${b}`],
    () => [
      `def ${name}(${a}, ${b}):`,
      `    if ${a} ${pick(r, CMP)} ${b}:`,
      `        return ${a} ${pick(r, ARITH)} ${k}`,
      `    return ${b}`,
    ],
    () => [`def ${name}(${a}, ${b}, ${c}):`, `    ${c} = (${a} ${pick(r, ARITH)} ${b}) ${pick(r, ARITH)} ${k2}`, `    return ${c}`],
    () => [
      `def ${name}(${a}):`,
      `    ${b} = 0`,
      `    for x in ${a}:`,
      `        if x ${pick(r, CMP)} ${k}:`,
      `            ${b} += x`,
      `    return ${b}`,
    ],
    () => [`def ${name}(${a}, ${b}):`, `    return ${a} ${pick(r, CMP)} ${k} and ${b} ${pick(r, CMP)} ${k2}`],
    () => [`def ${name}(${a}):`, `    if not ${a}:`, `        return None`, `    return ${a}[${int(r, 0, 1)}]`],
    () => [`def ${name}(${a}, ${b}):`, `    ${c} = []`, `    for i in range(${a}):`, `        ${c}.append(i * ${b})`, `    return ${c}`],
    () => [
      `def ${name}(${a}, ${b}):`,
      `    if ${a} ${pick(r, CMP)} ${b} or ${a} ${pick(r, CMP)} ${k}:`,
      `        return True`,
      `    return False`,
    ],
    () => [
      `def ${name}(${a}, ${b}):`,
      `    ${c} = ${a} ${pick(r, ARITH)} ${b}`,
      `    if ${c} ${pick(r, CMP)} ${k}:`,
      `        return ${k}`,
      `    return ${c} ${pick(r, ARITH)} ${k2}`,
    ],
    () => [`def ${name}(${a}, ${b}):`, `    ${c} = max(${a}, ${b}) - min(${a}, ${b})`, `    return ${c} ${pick(r, CMP)} ${k}`],
    () => [`def ${name}(${a}, ${b}):`, `    return ${a}.get(${b}, 0) ${pick(r, ARITH)} ${k2}`],
    () => [
      `def ${name}(${a}, ${b}, ${c}):`,
      `    if ${b} ${pick(r, CMP)} ${c}:`,
      `        raise ValueError("${b} out of range")`,
      `    ${a}[${b}] = ${a}.get(${b}, 0) ${pick(r, ARITH)} ${c}`,
      `    return ${a}[${b}]`,
    ],
    () => [`def ${name}(${a}, ${b}):`, `    if not ${a}:`, `        return 0`, `    return round(${b} / (sum(${a}) / ${k2}), 1)`],
  ];
  return { name, lines: pick(r, shapes)() };
}

/** The function as a method of a class: its first parameter becomes `self.<name>` state. */
function asMethod(f: { name: string; lines: string[] }): { name: string; lines: string[] } | undefined {
  const m = /^def (\w+)\((\w+)(, )?(.*)\):$/.exec(f.lines[0]);
  if (!m) return undefined;
  const attr = m[2];
  const re = new RegExp(`\\b${attr}\\b`, 'g');
  return {
    name: f.name,
    lines: [`    def ${m[1]}(self${m[4] ? `, ${m[4]}` : ''}):`, ...f.lines.slice(1).map((l) => `    ${l.replace(re, `self.${attr}`)}`)],
  };
}

export interface GeneratedModule {
  path: string;
  source: string;
  /** Function name → [first line, last line], 1-based. */
  functions: Map<string, [number, number]>;
}

export function generateModule(r: Rng): GeneratedModule {
  const pkg = pick(r, PACKAGES);
  const mod = pick(r, MODULES);
  const lines: string[] = [];
  if (r() < 0.5) lines.push(`"""${mod[0].toUpperCase()}${mod.slice(1)} rules."""`, '', '');
  const functions = new Map<string, [number, number]>();
  const n = int(r, 2, 4);
  const asClass = r() < 0.35;
  if (asClass) lines.push(`class ${mod[0].toUpperCase()}${mod.slice(1)}:`);
  for (let i = 0; i < n; i++) {
    const g = genFunction(r);
    const f = asClass ? asMethod(g) : g;
    if (!f || functions.has(f.name)) continue;
    const first = lines.length + 1;
    lines.push(...f.lines);
    functions.set(f.name, [first, lines.length]);
    lines.push(...(asClass ? [''] : ['', '']));
  }
  return { path: `${pkg}/${mod}.py`, source: lines.join('\n').replace(/\n+$/, '\n'), functions };
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
 * The one-line `sed` that turns the mutated line back into the original (fixSpan). Undefined
 * when the change spans lines or the line holds a single quote (the command is single-quoted).
 */
export function fixCommand(path: string, line: number, mutatedLine: string, originalLine: string): string | undefined {
  if (mutatedLine.includes("'") || originalLine.includes("'")) return undefined;
  const e = fixSpan(mutatedLine, originalLine);
  return e && `sed -i '${line}s/${sedPattern(e.old)}/${sedReplacement(e.neu)}/' ${path}`;
}

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

/** The facts a fix episode is written from. */
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
}

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
function topSuspect(c: Pick<FixCase, 'suspects'>): { path: string; line: number; code: string } | undefined {
  const m = /^(\S+):(\d+): (.*)$/.exec(c.suspects[0] ?? '');
  return m ? { path: m[1], line: Number(m[2]), code: m[3] } : undefined;
}

/** `tw-test`'s output when all of a case's tests pass. */
const allPassed = (c: Pick<FixCase, 'failing' | 'passing'>) => twTestOutput([], c.failing.length + c.passing);

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

const obs = (exitCode: number, stdout: string) => observationText({ exitCode, stdout, stderr: '' });

/** The observation of `tw-suspects` on a case: its counts line, then the suspect lines. */
const suspectsObservation = (c: FixCase) => obs(1, [`${c.failing.length} failed, ${c.passing} passed`, ...c.suspects].join('\n'));

/** `tw-test`'s output when `failing` fail and `passing` pass (its format in the sandbox tool). */
export function twTestOutput(failing: readonly string[], passing: number): string {
  const lines = failing.slice(0, 3).map((id) => `FAIL ${id}`);
  if (failing.length > 3) lines.push(`... ${failing.length - 3} more`);
  lines.push(`${failing.length} failed, ${passing} passed`);
  return lines.join('\n');
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

/** `tw-suspects -n`'s lines: the ranking with each suspect's number. */
export function numberedSuspects(c: Pick<FixCase, 'suspects'>): string[] {
  return c.suspects.map((l, i) => `[${i + 1}] ${l}`);
}

/** The observation of `tw-suspects -n` on a case. */
export const numberedSuspectsObservation = (c: FixCase) =>
  obs(1, [`${c.failing.length} failed, ${c.passing} passed`, ...numberedSuspects(c)].join('\n'));

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

/** What `tw-edit` prints for an edit of `path:line` from `code` to `edited`. */
export function twEditOutput(path: string, line: number, code: string, edited: string): string {
  return [`edited ${path}:${line}`, `- ${code.trim().slice(0, 100)}`, `+ ${edited.trim().slice(0, 100)}`].join('\n');
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
  const j = fixVariant(c);
  if (k === 0 || j === 0) return undefined;
  const segs: Segment[] = [{ role: 'task', text: taskText({ fail_to_pass: c.failing, source: 'mutation' }) }];
  const turn = (action: string, observation?: string) => {
    segs.push({ role: 'agent', text: action });
    if (observation !== undefined) segs.push({ role: 'obs', text: observation });
  };
  // Each of `variants` (of suspect sk's line, in their order) written, its tests failing, and put back.
  const failedTries = (sk: number, path: string, line: number, code: string, variants: readonly string[]) => {
    // The edit, tw-test failing, then `git checkout -q .` succeeding: the command's exit code is 0.
    variants.forEach((v, i) =>
      turn(candidateAttempt(sk, i + 1), obs(0, `${twEditOutput(path, line, code, v)}\n${twTestOutput(c.failing, c.passing)}`)),
    );
  };
  // The suspects above the bug, parsed; the ranking cuts a line at 100 characters, and past that
  // its variants are not known here.
  const parsed = c.suspects.slice(0, k - 1).map((l) => /^(\S+):(\d+): (.*)$/.exec(l));
  if (parsed.some((m) => !m || m[3].length >= 100)) return undefined;
  const above = parsed.map((m) => ({ path: m![1], line: Number(m![2]), code: m![3], variants: lineCandidates(m![3]) }));
  // tw-suspects, a tw-cands per suspect down to the bug, every variant above it, the bug line's
  // variants before the fix, and the fix.
  const commands = 1 + k + above.reduce((s, x) => s + x.variants.length, 0) + (j - 1) + 1;
  if (commands > CANDS_MAX_TURNS) return undefined;
  turn('tw-suspects -n', numberedSuspectsObservation(c));
  above.forEach((x, i) => {
    turn(`tw-cands ${i + 1}`, obs(0, twCandsOutput(x.path, x.line, x.code)));
    failedTries(i + 1, x.path, x.line, x.code, x.variants);
  });
  turn(`tw-cands ${k}`, obs(0, twCandsOutput(c.path, c.line, c.mutatedLine)));
  failedTries(k, c.path, c.line, c.mutatedLine, lineCandidates(c.mutatedLine).slice(0, j - 1));
  turn(candidateAttempt(k, j), obs(0, `${twEditOutput(c.path, c.line, c.mutatedLine, c.originalLine)}\n${allPassed(c)}`));
  turn(SUBMIT);
  return { kind: k === 1 ? 'episode-cands' : 'episode-cands-lower', segments: segs };
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

/** Short copy/undo/assemble tasks in the chat format, built from a fix case. */
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
