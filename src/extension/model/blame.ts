// The files an episode changed, rebuilt from the `edits` its turns recorded (never from the
// user's files): a file's text before/after any turn, and which turn last wrote each line
// ("blame by turn"), which the editor colors by that turn's advantage.
// Plain Node (no vscode): unit-tested in test/unit/extension/.
import type { FileEdit, Trajectory, Turn } from '../../core/schema';

export const splitLines = (text: string): string[] => (text === '' ? [] : text.replace(/\r\n/g, '\n').split('\n'));

/**
 * For each line of `b`, the index of the line of `a` it is kept from, or -1 when the line is
 * new or changed. Longest common subsequence on the part between the common prefix and suffix;
 * a middle too large to compare (> `cap` cells) counts as replaced.
 */
export function lineOrigins(a: readonly string[], b: readonly string[], cap = 4_000_000): number[] {
  const out = new Array<number>(b.length).fill(-1);
  let pre = 0;
  while (pre < a.length && pre < b.length && a[pre] === b[pre]) {
    out[pre] = pre;
    pre++;
  }
  let suf = 0;
  while (suf < a.length - pre && suf < b.length - pre && a[a.length - 1 - suf] === b[b.length - 1 - suf]) {
    out[b.length - 1 - suf] = a.length - 1 - suf;
    suf++;
  }
  const n = a.length - pre - suf;
  const m = b.length - pre - suf;
  if (n === 0 || m === 0 || n * m > cap) return out;
  // LCS table over the middle, filled from the end so the walk below goes forwards.
  const w = m + 1;
  const t = new Uint32Array((n + 1) * w);
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      t[i * w + j] = a[pre + i] === b[pre + j] ? t[(i + 1) * w + j + 1] + 1 : Math.max(t[(i + 1) * w + j], t[i * w + j + 1]);
    }
  }
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (a[pre + i] === b[pre + j]) {
      out[pre + j] = pre + i;
      i++;
      j++;
    } else if (t[(i + 1) * w + j] >= t[i * w + j + 1]) i++;
    else j++;
  }
  return out;
}

/** Changed line ranges of `after` ([start, end) 0-based), from lineOrigins. */
export function changedRanges(origins: readonly number[]): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (let j = 0; j < origins.length; j++) {
    if (origins[j] >= 0) continue;
    const last = out[out.length - 1];
    if (last && last[1] === j) last[1] = j + 1;
    else out.push([j, j + 1]);
  }
  return out;
}

export interface TurnEdit {
  turn: number;
  edit: FileEdit;
}

/** Paths the episode changed, in the order they were first touched. */
export function changedFiles(traj: Pick<Trajectory, 'turns'>): string[] {
  const seen = new Set<string>();
  for (const t of traj.turns) for (const e of t.edits ?? []) seen.add(e.path);
  return [...seen];
}

/** The edits of `path`, turn by turn. */
export function editsOf(traj: Pick<Trajectory, 'turns'>, path: string): TurnEdit[] {
  const out: TurnEdit[] = [];
  for (const t of traj.turns) for (const e of t.edits ?? []) if (e.path === path) out.push({ turn: t.index, edit: e });
  return out;
}

/**
 * Text of `path` after turn `turn` (`side: 'after'`) or just before it (`'before'`); null when the
 * file does not exist at that point, undefined when the recorded text was left out (truncated).
 */
export function textAt(
  traj: Pick<Trajectory, 'turns'>,
  path: string,
  turn: number,
  side: 'before' | 'after' = 'after',
): string | null | undefined {
  const edits = editsOf(traj, path);
  const upTo = side === 'after' ? turn : turn - 1;
  let last: TurnEdit | undefined;
  for (const e of edits) if (e.turn <= upTo) last = e;
  if (last) return last.edit.truncated ? undefined : last.edit.after;
  const next = edits.find((e) => e.turn > upTo);
  if (!next) return undefined;
  return next.edit.truncated ? undefined : next.edit.before;
}

export interface FileBlame {
  /** Text of the file after turn `upTo` ('' when it does not exist). */
  text: string;
  exists: boolean;
  /** Per line of `text`: the turn that last wrote it, or undefined (unchanged since the start). */
  lineTurns: Array<number | undefined>;
  /** Lines the turn `upTo` itself changed. */
  currentRanges: Array<[number, number]>;
}

/** Which turn last wrote each line of `path`, after turn `upTo`. */
export function blame(traj: Pick<Trajectory, 'turns'>, path: string, upTo: number): FileBlame | undefined {
  const edits = editsOf(traj, path);
  if (edits.length === 0) return undefined;
  const first = edits[0].edit;
  if (first.truncated) return undefined;
  let text = first.before ?? '';
  let exists = first.before !== null;
  let lines = splitLines(text);
  let lineTurns: Array<number | undefined> = lines.map(() => undefined);
  let currentRanges: Array<[number, number]> = [];
  for (const { turn, edit } of edits) {
    if (turn > upTo) break;
    if (edit.truncated) return undefined;
    // An edit whose `before` is not the text so far (a gap in the record): start from it afresh.
    const before = edit.before ?? '';
    if (before !== text) {
      lines = splitLines(before);
      lineTurns = lines.map(() => undefined);
    }
    const afterText = edit.after ?? '';
    const after = splitLines(afterText);
    const origins = lineOrigins(lines, after);
    lineTurns = origins.map((o) => (o >= 0 ? lineTurns[o] : turn));
    currentRanges = turn === upTo ? changedRanges(origins) : [];
    text = afterText;
    exists = edit.after !== null;
    lines = after;
  }
  return { text, exists, lineTurns, currentRanges };
}

/** First line (0-based) each turn still owns in a blame, by turn. */
export function firstLineByTurn(b: FileBlame): Map<number, number> {
  const out = new Map<number, number>();
  b.lineTurns.forEach((t, i) => {
    if (t !== undefined && !out.has(t)) out.set(t, i);
  });
  return out;
}

/** The turns that changed `path`. */
export function turnsTouching(traj: Pick<Trajectory, 'turns'>, path: string): Turn[] {
  return traj.turns.filter((t) => (t.edits ?? []).some((e) => e.path === path));
}
