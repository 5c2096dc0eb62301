// Streams a trajectories.jsonl file into one small summary per line (ids, reward, turns) and
// the byte range of the line, without parsing the turns: a run's Runs-view nodes need the
// numbers, and the full trajectory is read later, by its byte range, when it is opened.
// Plain Node (no vscode): unit-tested in test/unit/extension/.
import * as fs from 'node:fs';
import type { Trajectory } from '../../core/schema';

export interface TrajectorySummary {
  /** 1-based line number in the file. */
  line: number;
  /** Byte offset and length of the line (without its newline). */
  offset: number;
  length: number;
  taskId: string;
  trajId: string;
  groupId: string;
  iteration?: number;
  split?: 'train' | 'heldout';
  /** null when the episode is unscored (failure, or a NaN reward written as null). */
  reward: number | null;
  passRate: number | null;
  resolved: boolean;
  turns: number;
  formatError: boolean;
  failure?: string;
}

/** Top-level keys read from each line; everything else (turns above all) is skipped unparsed. */
const WANTED = new Set(['taskId', 'trajId', 'groupId', 'iteration', 'split', 'reward', 'failure']);

const Q = 0x22; // "
const BS = 0x5c; // \

function skipWs(b: Buffer, i: number, end: number): number {
  while (i < end) {
    const c = b[i];
    if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
    i++;
  }
  return i;
}

/** Index just past the closing quote of the string starting at `i` (b[i] is the opening quote). */
function skipString(b: Buffer, i: number, end: number): number {
  let j = i + 1;
  for (;;) {
    const q = b.indexOf(Q, j);
    if (q < 0 || q >= end) throw new Error('unterminated string');
    let k = q - 1;
    while (b[k] === BS) k--;
    if ((q - 1 - k) % 2 === 0) return q + 1;
    j = q + 1;
  }
}

/** Index just past the JSON value starting at `i`. Strings inside containers are skipped natively. */
function skipValue(b: Buffer, i: number, end: number): number {
  const c = b[i];
  if (c === Q) return skipString(b, i, end);
  if (c === 0x7b || c === 0x5b) {
    let depth = 0;
    let j = i;
    while (j < end) {
      const d = b[j];
      if (d === Q) {
        j = skipString(b, j, end);
        continue;
      }
      if (d === 0x7b || d === 0x5b) depth++;
      else if (d === 0x7d || d === 0x5d) {
        depth--;
        if (depth === 0) return j + 1;
      }
      j++;
    }
    throw new Error('unterminated container');
  }
  let j = i;
  while (j < end) {
    const d = b[j];
    if (d === 0x2c || d === 0x7d || d === 0x5d || d === 0x20 || d === 0x0a || d === 0x0d || d === 0x09) break;
    j++;
  }
  if (j === i) throw new Error('empty value');
  return j;
}

/** The wanted top-level fields of the JSON object in b[start, end). Throws on malformed input. */
function topLevelFields(b: Buffer, start: number, end: number): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  let i = skipWs(b, start, end);
  if (b[i] !== 0x7b) throw new Error('not an object');
  i = skipWs(b, i + 1, end);
  if (b[i] === 0x7d) return out;
  for (;;) {
    if (b[i] !== Q) throw new Error('expected a key');
    const keyEnd = skipString(b, i, end);
    const key = JSON.parse(b.toString('utf8', i, keyEnd)) as string;
    i = skipWs(b, keyEnd, end);
    if (b[i] !== 0x3a) throw new Error('expected :');
    i = skipWs(b, i + 1, end);
    const vEnd = skipValue(b, i, end);
    if (WANTED.has(key)) out[key] = JSON.parse(b.toString('utf8', i, vEnd));
    i = skipWs(b, vEnd, end);
    if (b[i] === 0x2c) {
      i = skipWs(b, i + 1, end);
      continue;
    }
    if (b[i] === 0x7d) return out;
    throw new Error('expected , or }');
  }
}

const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);

function toSummary(f: Record<string, unknown>, line: number, offset: number, length: number): TrajectorySummary {
  const r = (f.reward ?? {}) as Partial<Trajectory['reward']>;
  return {
    line,
    offset,
    length,
    taskId: String(f.taskId ?? '?'),
    trajId: String(f.trajId ?? `line-${line}`),
    groupId: String(f.groupId ?? ''),
    iteration: typeof f.iteration === 'number' ? f.iteration : undefined,
    split: f.split === 'train' || f.split === 'heldout' ? f.split : undefined,
    reward: f.failure ? null : num(r.reward),
    passRate: f.failure ? null : num(r.passRate),
    resolved: r.resolved === true,
    turns: typeof r.turns === 'number' ? r.turns : 0,
    formatError: r.formatError === true,
    failure: typeof f.failure === 'string' ? f.failure : undefined,
  };
}

/** Summary of one line; falls back to JSON.parse when the fast scan meets something odd. */
export function summarizeLine(b: Buffer, start: number, end: number, line: number): TrajectorySummary | undefined {
  let fields: Record<string, unknown>;
  try {
    fields = topLevelFields(b, start, end);
  } catch {
    try {
      const v = JSON.parse(b.toString('utf8', start, end)) as unknown;
      if (!v || typeof v !== 'object' || Array.isArray(v)) return undefined;
      fields = v as Record<string, unknown>;
    } catch {
      return undefined;
    }
  }
  return toSummary(fields, line, start, end - start);
}

export interface ScanResult {
  summaries: TrajectorySummary[];
  /** Lines that are neither blank nor a JSON object (a damaged or half-written file). */
  badLines: number[];
  bytes: number;
}

/**
 * Summaries of every line of `file`, read in chunks (memory stays at one chunk plus the
 * summaries). A missing file gives an empty result.
 */
export async function scanTrajectoryFile(file: string, chunkBytes = 4 << 20): Promise<ScanResult> {
  const summaries: TrajectorySummary[] = [];
  const badLines: number[] = [];
  let fh: fs.promises.FileHandle;
  try {
    fh = await fs.promises.open(file, 'r');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { summaries, badLines, bytes: 0 };
    throw e;
  }
  try {
    let buf = Buffer.allocUnsafe(chunkBytes);
    let filled = 0; // bytes of buf holding data
    let base = 0; // file offset of buf[0]
    let line = 0;
    let eof = false;
    while (!eof) {
      if (filled === buf.length) {
        // A line longer than the buffer: grow it.
        const bigger = Buffer.allocUnsafe(buf.length * 2);
        buf.copy(bigger, 0, 0, filled);
        buf = bigger;
      }
      const { bytesRead } = await fh.read(buf, filled, buf.length - filled, base + filled);
      if (bytesRead === 0) eof = true;
      filled += bytesRead;
      let start = 0;
      for (;;) {
        let nl = buf.indexOf(0x0a, start);
        if (nl < 0 || nl >= filled) {
          if (!eof) break;
          if (start >= filled) break;
          nl = filled; // last line without a newline
        }
        line++;
        let end = nl;
        if (end > start && buf[end - 1] === 0x0d) end--;
        if (skipWs(buf, start, end) < end) {
          const s = summarizeLine(buf, start, end, line);
          if (s) {
            s.offset += base;
            summaries.push(s);
          } else badLines.push(line);
        }
        start = nl + 1;
      }
      // Keep the partial last line at the front of the buffer.
      buf.copy(buf, 0, start, filled);
      base += start;
      filled -= start;
    }
    return { summaries, badLines, bytes: base + filled };
  } finally {
    await fh.close();
  }
}

/** Reads the one trajectory whose line is at [offset, offset+length). */
export async function readTrajectoryAt(file: string, offset: number, length: number): Promise<Trajectory> {
  const fh = await fs.promises.open(file, 'r');
  try {
    const buf = Buffer.allocUnsafe(length);
    const { bytesRead } = await fh.read(buf, 0, length, offset);
    return JSON.parse(buf.toString('utf8', 0, bytesRead)) as Trajectory;
  } finally {
    await fh.close();
  }
}
