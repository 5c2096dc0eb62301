// Streams a trajectories.jsonl file into one small summary per line (ids, reward, turns) and
// the byte range of the line, without parsing the turns: a run's Runs-view nodes need the
// numbers, and the full trajectory is read later, by its byte range, when it is opened.
// The turns are ~95% of a line and full of escaped quotes, so they are not walked at all: the
// top-level keys before them are read forward, the ones after them backward from the line's
// closing brace. Walking backward, a value ending in `]` is the turns array (a trajectory has no
// other top-level array), which must open exactly where the forward walk found "turns":.
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
  /** The episode tampered with the tests (its reward is 0). */
  tampered?: boolean;
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
  // Short strings (keys, ids) end sooner than a native indexOf call returns.
  const near = Math.min(end, i + 48);
  for (let j = i + 1; j < near; j++) {
    const c = b[j];
    if (c === BS) break;
    if (c === Q) return j + 1;
  }
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

/** The top-level key whose value is not walked (the bulk of a line). */
const BULK_KEY = 'turns';

/** The keys read, as bytes, to recognize a key without decoding it. */
const KNOWN_KEYS = [...WANTED, BULK_KEY].map((k) => ({ k, bytes: Buffer.from(k) }));

/** The key whose quotes are at b[open] and b[close - 1], when it is one of KNOWN_KEYS; else undefined. */
function knownKey(b: Buffer, open: number, close: number): string | undefined {
  const n = close - open - 2;
  for (const { k, bytes } of KNOWN_KEYS) {
    if (bytes.length !== n) continue;
    let same = true;
    for (let x = 0; x < n; x++) {
      if (b[open + 1 + x] !== bytes[x]) {
        same = false;
        break;
      }
    }
    if (same) return k;
  }
  // An escaped key ("\u0074urns") still reads as what it spells.
  for (let x = open + 1; x < close - 1; x++) if (b[x] === BS) return JSON.parse(b.toString('utf8', open, close)) as string;
  return undefined;
}

/** The JSON value in b[i, end): a plain string is sliced, anything else parsed. */
function valueAt(b: Buffer, i: number, end: number): unknown {
  if (b[i] === Q) {
    let plain = true;
    for (let x = i + 1; x < end - 1; x++) {
      if (b[x] === BS) {
        plain = false;
        break;
      }
    }
    if (plain) return b.toString('utf8', i + 1, end - 1);
  }
  return JSON.parse(b.toString('utf8', i, end));
}

/**
 * Reads the wanted top-level fields of the JSON object in b[start, end) forward, stopping at
 * the key BULK_KEY. Returns the offset of that key's value, or -1 when the object ended without
 * it. Throws on malformed input.
 */
function headFields(b: Buffer, start: number, end: number, out: Record<string, unknown>): number {
  let i = skipWs(b, start, end);
  if (b[i] !== 0x7b) throw new Error('not an object');
  i = skipWs(b, i + 1, end);
  if (b[i] === 0x7d) return -1;
  for (;;) {
    if (b[i] !== Q) throw new Error('expected a key');
    const keyEnd = skipString(b, i, end);
    const key = knownKey(b, i, keyEnd);
    i = skipWs(b, keyEnd, end);
    if (b[i] !== 0x3a) throw new Error('expected :');
    i = skipWs(b, i + 1, end);
    if (key === BULK_KEY) return i;
    const vEnd = skipValue(b, i, end);
    if (key !== undefined && WANTED.has(key)) out[key] = valueAt(b, i, vEnd);
    i = skipWs(b, vEnd, end);
    if (b[i] === 0x2c) {
      i = skipWs(b, i + 1, end);
      continue;
    }
    if (b[i] === 0x7d) {
      if (skipWs(b, i + 1, end) !== end) throw new Error('text after the object');
      return -1;
    }
    throw new Error('expected , or }');
  }
}

/** Index of the last non-whitespace byte at or before `i` (start - 1 when none). */
function skipWsBack(b: Buffer, i: number, start: number): number {
  while (i >= start) {
    const c = b[i];
    if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
    i--;
  }
  return i;
}

/** A quote at `q` is a delimiter when an even number of backslashes precede it. */
function isDelimiter(b: Buffer, q: number, start: number): boolean {
  let k = q - 1;
  while (k >= start && b[k] === BS) k--;
  return (q - 1 - k) % 2 === 0;
}

/** Offset of the opening quote of the string whose closing quote is at `close`. */
function stringStartBack(b: Buffer, close: number, start: number): number {
  let j = close - 1;
  for (;;) {
    const q = b.lastIndexOf(Q, j);
    if (q < start) throw new Error('unterminated string');
    if (isDelimiter(b, q, start)) return q;
    j = q - 1;
  }
}

/** Offset of the first byte of the JSON value whose last byte is at `last`. */
function valueStartBack(b: Buffer, last: number, start: number): number {
  const c = b[last];
  if (c === Q) return stringStartBack(b, last, start);
  if (c === 0x7d || c === 0x5d) {
    let depth = 0;
    let j = last;
    while (j >= start) {
      const d = b[j];
      if (d === Q) {
        j = stringStartBack(b, j, start) - 1;
        continue;
      }
      if (d === 0x7d || d === 0x5d) depth++;
      else if (d === 0x7b || d === 0x5b) {
        depth--;
        if (depth === 0) return j;
      }
      j--;
    }
    throw new Error('unterminated container');
  }
  let j = last;
  while (j >= start) {
    const d = b[j];
    if (d === 0x2c || d === 0x3a || d === 0x7b || d === 0x5b || d === 0x20 || d === 0x0a || d === 0x0d || d === 0x09) break;
    j--;
  }
  if (j === last) throw new Error('empty value');
  return j + 1;
}

/**
 * Reads the wanted top-level fields backward from the object's closing brace up to the BULK_KEY
 * array, which opens at `bulk` (found by headFields) and is not walked. Throws on malformed input.
 */
function tailFields(b: Buffer, start: number, end: number, bulk: number, out: Record<string, unknown>): void {
  if (b[bulk] !== 0x5b) throw new Error(`"${BULK_KEY}" is not an array`);
  let i = skipWsBack(b, end - 1, start);
  if (b[i] !== 0x7d) throw new Error('not an object');
  i = skipWsBack(b, i - 1, start);
  for (;;) {
    if (b[i] === 0x5d) {
      if (i <= bulk) throw new Error('the walks crossed');
      return; // the BULK_KEY array [bulk, i]: everything after it has been read
    }
    const vStart = valueStartBack(b, i, start);
    if (vStart <= bulk) throw new Error('the walks crossed');
    let k = skipWsBack(b, vStart - 1, start);
    if (b[k] !== 0x3a) throw new Error('expected :');
    k = skipWsBack(b, k - 1, start);
    if (b[k] !== Q) throw new Error('expected a key');
    const keyStart = stringStartBack(b, k, start);
    const key = knownKey(b, keyStart, k + 1);
    if (key !== undefined && WANTED.has(key) && !(key in out)) out[key] = valueAt(b, vStart, i + 1);
    k = skipWsBack(b, keyStart - 1, start);
    if (b[k] !== 0x2c) throw new Error('expected ,');
    i = skipWsBack(b, k - 1, start);
  }
}

/** The wanted top-level fields of the JSON object in b[start, end). Throws on malformed input. */
function topLevelFields(b: Buffer, start: number, end: number): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const bulk = headFields(b, start, end, out);
  if (bulk >= 0) tailFields(b, start, end, bulk, out);
  return out;
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
    ...(typeof r.tampered === 'string' ? { tampered: true } : {}),
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
