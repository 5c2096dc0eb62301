// The sandbox simulated for fix cases (only the bug line matters): the prompt turns before the fix,
// and what each command would print, in both the `sed` form and the numbered form (`tw-suspects
// -n`, `tw-edit K OLD NEW`, `tw-cands K`, `tw-apply K J`). A sed script the policy writes is
// applied in JavaScript (sed.ts): policy text never reaches a program on the host.
import { taskText } from '../agent/prompt';
import type { FixCase } from './fix-cases';
import { numberedSuspects, obs, twApplyRefusal, twEditOutput, twShowOutput, twTestOutput } from './tool-output';
import { lineCandidates, twCandsOutput } from './line-candidates';
import { sedLine } from './sed';

/** How an episode addresses the bug: `sed` on a path, or by suspect number (`tw-edit K …`). */
export type FixForm = 'sed' | 'numbered';

/** The prompt a fix case's episode is at when the fix is due: task, then `tw-suspects` (`-n` in the numbered form) and its output. */
export function fixPromptTurns(c: FixCase, form: FixForm = 'sed'): { task: string; turns: { action: string; observation: string }[] } {
  const ranking = form === 'numbered' ? numberedSuspects(c) : c.suspects;
  return {
    task: taskText({ fail_to_pass: c.failing, source: 'mutation' }),
    turns: [
      {
        action: form === 'numbered' ? 'tw-suspects -n' : 'tw-suspects',
        observation: `exit 1\n${[`${c.failing.length} failed, ${c.passing} passed`, ...ranking].join('\n')}`,
      },
    ],
  };
}

/**
 * Whether `cmd`, a `sed -i 'N<script>' PATH` for the case's file and line, turns the mutated line
 * back into the original as GNU sed would (demonstrations/sed.ts, in JavaScript: the policy's script never
 * reaches a program on the host): a command other than the demonstrated one can fix the bug too
 * (`s/>= 7/> 7/` for `s/>=/>/`).
 */
export function sedRestores(cmd: string, c: Pick<FixCase, 'path' | 'line' | 'mutatedLine' | 'originalLine'>): boolean {
  const e = parseLineEdit(cmd);
  if (!e || e.test || e.line !== c.line || e.path !== c.path) return false;
  return sedLine(e.script, c.mutatedLine) === c.originalLine;
}

/** A line edit as the demonstrations write it: `sed -i 'N<script>' PATH`, alone or as an attempt. */
export interface LineEdit {
  line: number;
  /** The sed script after the line address (`s/old/new/`). */
  script: string;
  path: string;
  /** Followed by `&& tw-test`. */
  test: boolean;
  /** The file of a trailing `|| git checkout [-q] [--] FILE` (the attempt's undo). */
  undo?: string;
}

const LINE_EDIT = /^sed -i '(\d+)(s[^']*)' (\S+)(?:( && tw-test)(?: \|\| git checkout (?:-q )?(?:-- )?(\S+))?)?$/;

/** Parses a line edit or an attempt (demonstrations.ts attemptCommand); undefined for anything else. */
export function parseLineEdit(cmd: string): LineEdit | undefined {
  const m = LINE_EDIT.exec(cmd);
  if (!m) return undefined;
  return { line: Number(m[1]), script: m[2], path: m[3], test: !!m[4], ...(m[5] ? { undo: m[5] } : {}) };
}

/** The `sed` of a command that is one, or of an attempt (demonstrations.ts attemptCommand); else the command. */
export function editOf(cmd: string): string {
  const e = parseLineEdit(cmd);
  return e ? `sed -i '${e.line}${e.script}' ${e.path}` : cmd;
}

/**
 * One simulated turn of a fix case's episode: what the sandbox would do with `cmd` when only the
 * bug line matters. Understood: `sed -i 'N…' PATH`, optionally `&& tw-test`, optionally
 * `|| git checkout [-q] [--] PATH`; `tw-test`; `git checkout [-q] [--] PATH`. Anything else is
 * run as a no-op (exit 0, no output): the model only wastes the turn. An edit of another line
 * that is not undone spoils the episode (`stray`).
 */
export function simulateTurn(st: SimState, c: FixCase, cmd: string): string {
  const numbered = simulateNumbered(st, c, cmd);
  if (numbered !== undefined) return numbered;
  const co = /^git checkout (?:-q )?(?:-- )?(\S+)$/.exec(cmd);
  if (co) return (simulatedCheckout(st, c, co[1]), 'exit 0');
  if (cmd === 'tw-test') {
    const t = simulatedTests(st, c);
    return obs(t.code, t.out);
  }
  const e = parseLineEdit(cmd);
  if (!e) return 'exit 0';
  const { script, path: file, test: andTest, undo } = e;
  let code = 0;
  if (file === c.path && e.line === c.line) {
    const next = sedLine(script, st.line);
    if (next === undefined) code = 1;
    else st.line = next;
  } else {
    st.stray = true;
  }
  return attemptTail(st, c, code, '', andTest, undo);
}

/** A simulated episode's state: the bug line as it stands, and whether another line was edited and left so. */
export type SimState = { line: string; stray: boolean };

/** `tw-test` in a simulated episode: all pass once the bug line is restored with no stray edit left. */
function simulatedTests(st: SimState, c: FixCase): { code: number; out: string } {
  return passes(st, c)
    ? { code: 0, out: twTestOutput([], c.failing.length + c.passing) }
    : { code: 1, out: twTestOutput(c.failing, c.passing) };
}

/** The tests pass: the bug line restored (or made the variant the workspace's tests accept too) and no stray edit left. */
function passes(st: SimState, c: FixCase): boolean {
  const also = c.firstPassingVariant ? lineCandidates(c.mutatedLine)[c.firstPassingVariant - 1] : undefined;
  return !st.stray && (st.line === c.originalLine || (also !== undefined && st.line === also));
}

/** `git checkout PATH` (or `.`): the case's file back as the task had it, any stray edit undone. */
function simulatedCheckout(st: SimState, c: FixCase, p: string): void {
  if (p === c.path || p === '.') st.line = c.mutatedLine;
  st.stray = false;
}

/**
 * The end of an edit's turn, whichever tool made the edit: after an edit that succeeded (`code`
 * 0), `&& tw-test`; after a failure, `|| git checkout PATH`, which exits 0. The observation, with
 * the edit's own output first.
 */
function attemptTail(st: SimState, c: FixCase, code: number, out: string, test: boolean, undo: string | undefined): string {
  if (code === 0 && test) {
    const t = simulatedTests(st, c);
    code = t.code;
    out = out ? `${out}\n${t.out}` : t.out;
  }
  if (code !== 0 && undo) {
    simulatedCheckout(st, c, undo);
    code = 0;
  }
  // As the episode loop shows a real one (observationText): long output cut in the middle.
  return obs(code, out);
}

/** Single-quoted or plain shell words: `tw-edit 2 'a < b' 'a <= b'` → ['tw-edit', '2', 'a < b', 'a <= b']; undefined for anything else (other quoting, `$`, globs). */
export function shellWords(s: string): string[] | undefined {
  const out: string[] = [];
  const re = /\s*(?:'([^']*)'|([^\s'"\\$`*?;&|<>()]+))(?=\s|$)/y;
  let m: RegExpExecArray | null;
  let at = 0;
  while (at < s.length && (m = re.exec(s))) {
    out.push(m[1] ?? m[2]);
    at = re.lastIndex;
    if (/^\s*$/.test(s.slice(at))) return out;
  }
  return at >= s.length && out.length ? out : undefined;
}

const ATTEMPT_TAIL = /^(.*?)(?: && (tw-test))?(?: \|\| git checkout (?:-q )?(?:-- )?(\S+))?$/;

/**
 * The numbered tools in a simulated episode: `tw-suspects -n`, `tw-show K`, `tw-cands K`, and
 * `tw-edit K OLD NEW` or `tw-apply K J` (optionally `&& tw-test`, optionally `|| git checkout
 * [-q] [--] PATH|.`), with their
 * refusals; undefined for any other command (simulateTurn's sed form then). Suspect K is the
 * case's ranking: the bug line's edits change the state, another suspect's edit is a stray one.
 */
export function simulateNumbered(st: SimState, c: FixCase, cmd: string): string | undefined {
  if (cmd === 'tw-suspects -n' || cmd === 'tw-suspects --numbered') {
    const failing = passes(st, c) ? 0 : c.failing.length;
    return obs(failing ? 1 : 0, [`${failing} failed, ${c.passing + c.failing.length - failing} passed`, ...numberedSuspects(c)].join('\n'));
  }
  // (a command over several lines is not one of these tools' calls)
  const tail = ATTEMPT_TAIL.exec(cmd);
  const words = tail && shellWords(tail[1]);
  if (!tail || !words || !['tw-edit', 'tw-show', 'tw-cands', 'tw-apply'].includes(words[0])) return undefined;
  const ranked = c.suspects.map((l) => /^(\S+):(\d+): (.*)$/.exec(l));
  const suspect = (k: string) => (/^\d+$/.test(k) ? ranked[Number(k) - 1] : undefined);
  const isBug = (s: RegExpExecArray) => s[1] === c.path && Number(s[2]) === c.line;
  if (words[0] === 'tw-cands') {
    if (tail[2] || tail[3]) return undefined;
    const s = words.length === 2 ? suspect(words[1]) : undefined;
    if (!s) return `exit ${words.length === 2 ? 1 : 2}`;
    return obs(0, twCandsOutput(s[1], Number(s[2]), isBug(s) ? st.line : s[3]));
  }
  if (words[0] === 'tw-apply') {
    const usage = !(words.length === 3 && /^\d+$/.test(words[2]));
    const s = usage ? undefined : suspect(words[1]);
    const text = s ? (isBug(s) ? st.line : s[3]) : undefined;
    const variants = text !== undefined ? lineCandidates(text) : [];
    const j = Number(words[2]);
    const variant = variants[j - 1];
    if (!s || text === undefined) return attemptTail(st, c, usage ? 2 : 1, '', !!tail[2], tail[3]);
    // The tool's refusal, as it prints it (exit 1).
    if (variant === undefined)
      return attemptTail(st, c, 1, twApplyRefusal(s[1], Number(s[2]), text, Number(words[1]), j, variants.length), !!tail[2], tail[3]);
    if (isBug(s)) st.line = variant;
    else st.stray = true;
    return attemptTail(st, c, 0, twEditOutput(s[1], Number(s[2]), text, variant, { j, n: variants.length }), !!tail[2], tail[3]);
  }
  if (words[0] === 'tw-show') {
    if (tail[2] || tail[3]) return undefined;
    const s = words.length === 2 ? suspect(words[1]) : undefined;
    if (!s) return `exit ${words.length === 2 ? 1 : 2}`;
    const show = s[1] === c.path && Number(s[2]) === c.line ? twShowOutput(c) : undefined;
    return obs(0, show ?? `${s[1]}:${s[2]}`);
  }
  const s = words.length === 4 ? suspect(words[1]) : undefined;
  let code = 0;
  let out = '';
  const onBug = s && s[1] === c.path && Number(s[2]) === c.line;
  const text = onBug ? st.line : s?.[3];
  const [, , old, neu] = words;
  if (!s || text === undefined || old === '' || old === neu || text.split(old).length !== 2) code = words.length === 4 ? 1 : 2;
  else {
    const edited = text.replace(old, () => neu);
    out = twEditOutput(s[1], Number(s[2]), text, edited);
    if (onBug) st.line = edited;
    else st.stray = true;
  }
  return attemptTail(st, c, code, out, !!tail[2], tail[3]);
}

/** Whether `cmd`, a numbered edit (the case's numbered fix or another), restores the bug line with no stray edit left. */
export function numberedRestores(cmd: string, c: FixCase): boolean {
  const st = { line: c.mutatedLine, stray: false };
  const out = simulateNumbered(st, c, cmd);
  return out !== undefined && st.line === c.originalLine && !st.stray;
}
