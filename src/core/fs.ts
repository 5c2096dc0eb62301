// Atomic file and directory writes, checked reads of user files, and line-numbered JSONL
// reading: every artifact Turnwise writes survives a crash mid-write (temp + fsync + rename),
// and a path of the wrong kind is refused with a message that names it.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { TurnwiseError } from './errors';
import { escapeControlChars } from './text';

let tmpCounter = 0;

/**
 * Why `file` cannot be written, or undefined when it looks writable: it is a folder, a parent
 * on its path is a file, or the nearest existing folder is not writable. Checked before work
 * starts, so a long run does not end in a raw ENOTDIR/EISDIR/EACCES on a temp file.
 */
/** ~/.cache/turnwise/<part> (XDG_CACHE_HOME respected): where Turnwise keeps what it can make again. */
export function turnwiseCacheDir(part: string): string {
  return path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'turnwise', part);
}

export function outputPathProblem(file: string): string | undefined {
  const target = path.resolve(file);
  let st: fs.Stats | undefined;
  try {
    st = fs.statSync(target);
  } catch {
    st = undefined;
  }
  if (st?.isDirectory()) return `${target} is a folder, not a file`;
  let dir = path.dirname(target);
  for (;;) {
    let d: fs.Stats | undefined;
    try {
      d = fs.statSync(dir);
    } catch {
      d = undefined;
    }
    if (d) {
      if (!d.isDirectory()) return `${dir} is a file, so ${target} cannot be created under it`;
      try {
        fs.accessSync(dir, fs.constants.W_OK);
      } catch {
        return `the folder ${dir} is not writable (permission denied), so ${target} cannot be written`;
      }
      return undefined;
    }
    const up = path.dirname(dir);
    if (up === dir) return undefined;
    dir = up;
  }
}

/** Throws a TurnwiseError('invalid-input') naming `option` when `file` cannot be written. */
export function assertWritableOutput(file: string, option = '--out'): void {
  const problem = outputPathProblem(file);
  if (problem)
    throw new TurnwiseError('invalid-input', `${option}: ${problem}`, { hint: `give ${option} a file path in a folder you can write to` });
}

/** A write failure as a user reads it: the real path (not the temp file) and why. */
function writeError(file: string, e: unknown): TurnwiseError {
  const code = (e as NodeJS.ErrnoException).code;
  const why =
    outputPathProblem(file) ??
    (code === 'ENOSPC'
      ? 'the disk is full'
      : code === 'EROFS'
        ? 'the file system is read-only'
        : code === 'EACCES' || code === 'EPERM'
          ? 'permission denied'
          : (code ?? (e as Error).message));
  return new TurnwiseError('invalid-input', `cannot write ${path.resolve(file)}: ${why}`, {
    hint: code === 'ENOSPC' ? 'free some disk space and run again' : 'choose a path in a folder you can write to',
    cause: e,
  });
}

/** Writes all of `bytes` (one write call may write less, and at most 2 GiB). */
function writeAll(fd: number, bytes: Uint8Array): void {
  const step = 1 << 30;
  for (let at = 0; at < bytes.length;) {
    at += fs.writeSync(fd, bytes, at, Math.min(step, bytes.length - at));
  }
}

/**
 * Writes `data` to `file` so that readers see either the old or the new content, never a mix.
 * `data` may come as parts (produced one after another, so a file of several gigabytes need not
 * be one buffer in memory).
 */
export function writeFileAtomic(file: string, data: string | Uint8Array | Iterable<Uint8Array>): void {
  const tmp = `${file}.tmp-${process.pid}-${tmpCounter++}`;
  try {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    const fd = fs.openSync(tmp, 'w');
    try {
      if (typeof data === 'string') writeAll(fd, Buffer.from(data, 'utf8'));
      else if (data instanceof Uint8Array) writeAll(fd, data);
      else for (const part of data) writeAll(fd, part);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, file);
  } catch (e) {
    try {
      fs.rmSync(tmp, { force: true });
    } catch {
      // the temp file could not even be created (its folder is a file or unwritable)
    }
    if (e instanceof TurnwiseError) throw e;
    throw writeError(file, e);
  }
}

/** Makes renames inside `dir` durable (best effort: not every platform can open a directory). */
export function fsyncDir(dir: string): void {
  let fd: number | undefined;
  try {
    fd = fs.openSync(dir, 'r');
    fs.fsyncSync(fd);
  } catch {
    // directories cannot be fsynced on some platforms (Windows); the renames still happened
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}

/**
 * The file inside a directory that replaceDirAtomic moved aside. Recovery only ever touches a
 * sibling that has both Turnwise's name (`<name>.turnwise-old-*`) and this marker naming the
 * target, so a user's own `<name>.old-v1` or `<name>.turnwise-old-x` folder is never taken.
 */
export const SWAP_MARKER = '.turnwise-swap';
const SWAP_SCHEMA = 'turnwise/swap@1';
let dirCounter = 0;

function isOwnLeftover(dir: string, targetName: string): boolean {
  try {
    const m = JSON.parse(fs.readFileSync(path.join(dir, SWAP_MARKER), 'utf8')) as { schema?: unknown; target?: unknown };
    return m.schema === SWAP_SCHEMA && m.target === targetName && fs.statSync(dir).isDirectory();
  } catch {
    return false;
  }
}

/**
 * The complete previous directory an interrupted replaceDirAtomic left beside `target`
 * (newest first), or undefined. Read-only: renames nothing, so a read command can load from it.
 */
export function interruptedSwapOf(target: string): string | undefined {
  const t = path.resolve(target);
  if (fs.existsSync(t)) return undefined;
  const parent = path.dirname(t);
  const name = path.basename(t);
  let entries: string[];
  try {
    entries = fs.readdirSync(parent);
  } catch {
    return undefined;
  }
  return entries
    .filter((e) => e.startsWith(`${name}.turnwise-old-`))
    .map((e) => path.join(parent, e))
    .filter((p) => isOwnLeftover(p, name))
    .sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs)[0];
}

/** Puts back what an interrupted replaceDirAtomic left (only Turnwise's own, marked leftovers). */
export function recoverInterruptedSwap(target: string): void {
  const t = path.resolve(target);
  const old = interruptedSwapOf(t);
  if (!old) return;
  fs.renameSync(old, t);
  fs.rmSync(path.join(t, SWAP_MARKER), { force: true });
  fsyncDir(path.dirname(t));
}

/**
 * Replaces the directory `target` by one `build` fills, so that `target` always names either
 * the complete old directory or the complete new one. A directory cannot be renamed over a
 * non-empty one, so the swap takes two renames (target → `<target>.turnwise-old-*`, temp →
 * target); a crash between them leaves the previous directory, marked, which the next swap
 * (or recoverInterruptedSwap) puts back and interruptedSwapOf finds without renaming.
 */
export function replaceDirAtomic(target: string, build: (tmpDir: string) => void): void {
  const t = path.resolve(target);
  const name = path.basename(t);
  const tmp = `${t}.turnwise-tmp-${process.pid}-${dirCounter++}`;
  recoverInterruptedSwap(t);
  fs.rmSync(tmp, { recursive: true, force: true });
  fs.mkdirSync(tmp, { recursive: true });
  try {
    build(tmp);
    fsyncDir(tmp);
    let old: string | undefined;
    if (fs.existsSync(t)) {
      old = `${t}.turnwise-old-${process.pid}-${dirCounter++}`;
      // Marked before it moves, so the leftover of a crash right after the rename is recognisable.
      writeFileAtomic(path.join(t, SWAP_MARKER), JSON.stringify({ schema: SWAP_SCHEMA, target: name, pid: process.pid }) + '\n');
      fs.renameSync(t, old);
    }
    try {
      fs.renameSync(tmp, t);
    } catch (e) {
      if (old) {
        fs.renameSync(old, t);
        fs.rmSync(path.join(t, SWAP_MARKER), { force: true });
      }
      throw e;
    }
    fsyncDir(path.dirname(t));
    if (old) fs.rmSync(old, { recursive: true, force: true });
  } catch (e) {
    fs.rmSync(tmp, { recursive: true, force: true });
    fs.rmSync(path.join(t, SWAP_MARKER), { force: true });
    throw e;
  }
}

/** Largest user file read whole into memory (task files, trajectories): 256 MiB. */
export const MAX_READ_BYTES = 256 * 1024 * 1024;

/** Why a file operation failed, in words where they help (a missing file as `missing`), else the error's code. */
export function fsErrorReason(e: unknown, missing = 'it does not exist'): string {
  const code = (e as NodeJS.ErrnoException).code;
  if (code === 'ENOENT') return missing;
  if (code === 'ENOTDIR') return 'a part of the path is a file, not a folder';
  if (code === 'EACCES') return 'permission denied';
  return code ?? (e as Error).message;
}

/**
 * Reads a user's text file, refusing with a message that says what is wrong: missing, a
 * folder, too large, or binary (a NUL byte in the first 8 KiB; its bytes are never echoed).
 * `what` names the file in messages ("task file"), `hint` says where a good one comes from.
 */
export function readUserTextFile(file: string, what = 'file', options: { hint?: string; maxBytes?: number } = {}): string {
  const abs = path.resolve(file);
  const max = options.maxBytes ?? MAX_READ_BYTES;
  let st: fs.Stats;
  try {
    st = fs.statSync(abs);
  } catch (e) {
    throw new TurnwiseError('not-found', `cannot read ${what} ${abs}: ${fsErrorReason(e)}`, { hint: options.hint ?? 'check the path' });
  }
  if (st.isDirectory())
    throw new TurnwiseError('invalid-input', `${what} ${abs} is a folder, not a file`, {
      hint: options.hint ?? 'give the path of a file inside it',
    });
  if (!st.isFile())
    throw new TurnwiseError('invalid-input', `${what} ${abs} is not a regular file`, {
      hint: options.hint ?? 'give the path of a regular file',
    });
  if (st.size > max) {
    throw new TurnwiseError(
      'invalid-input',
      `${what} ${abs} is ${(st.size / 1048576).toFixed(0)} MiB, more than the ${(max / 1048576).toFixed(0)} MiB Turnwise reads at once`,
      {
        hint: 'split it into smaller files',
      },
    );
  }
  let buf: Buffer;
  try {
    buf = fs.readFileSync(abs);
  } catch (e) {
    throw new TurnwiseError('not-found', `cannot read ${what} ${abs}: ${fsErrorReason(e)}`, {
      hint: options.hint ?? 'check the path and its permissions',
    });
  }
  if (buf.subarray(0, 8192).includes(0)) {
    throw new TurnwiseError('invalid-file', `${what} ${abs} is a binary file, not text`, {
      hint: options.hint ?? 'give the path of a text file',
    });
  }
  return buf.toString('utf8');
}

/**
 * Parses a JSON file Turnwise was given (a model folder's config.json, an adapter's
 * adapter_config.json), a UTF-8 byte-order mark skipped. Refuses naming the file: 'not-found'
 * "cannot read FILE: CODE" with `hints.unreadable`, 'invalid-file' "FILE is not valid JSON (why)"
 * with `hints.invalid`.
 */
export function readJsonFile(file: string, hints: { unreadable: string; invalid: string }): unknown {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new TurnwiseError('not-found', `cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, {
      hint: hints.unreadable,
    });
  }
  try {
    return JSON.parse(text.replace(/^\uFEFF/, ''));
  } catch (e) {
    throw new TurnwiseError('invalid-file', `${file} is not valid JSON (${(e as Error).message})`, { hint: hints.invalid });
  }
}

export function writeJsonAtomic(file: string, value: unknown): void {
  writeFileAtomic(file, JSON.stringify(value, null, 2) + '\n');
}

/** A problem with one line of a JSONL file; line numbers start at 1. */
export interface LineError {
  line: number;
  reason: string;
}

/**
 * Parses JSONL text. Blank lines are skipped. Every line that is not a JSON object is
 * reported; `validate` may report more reasons per line. Returns all rows and all errors,
 * so a caller can list every bad line at once.
 */
export function parseJsonl<T>(text: string, validate?: (row: unknown, line: number) => string[]): { rows: T[]; errors: LineError[] } {
  const rows: T[] = [];
  const errors: LineError[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i].trim();
    if (raw === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(raw);
    } catch (e) {
      errors.push({ line: i + 1, reason: `not valid JSON (${(e as Error).message})` });
      continue;
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      errors.push({ line: i + 1, reason: 'not a JSON object' });
      continue;
    }
    const problems = validate ? validate(value, i + 1) : [];
    if (problems.length > 0) for (const reason of problems) errors.push({ line: i + 1, reason });
    else rows.push(value as T);
  }
  return { rows, errors };
}

/**
 * Line errors as a user reads them: at most `limit` lines, control characters escaped, and a
 * problem repeated on many lines shown 3 times and then counted ("… and 263,458 more line(s)
 * with: not valid JSON"). Problems are the same when they read alike before any "(detail)".
 */
export function summarizeLineErrors(file: string, errors: readonly LineError[], limit = 50): string[] {
  const kindOf = (reason: string) => reason.split(' (')[0];
  const total = new Map<string, number>();
  for (const e of errors) total.set(kindOf(e.reason), (total.get(kindOf(e.reason)) ?? 0) + 1);
  const shown = new Map<string, number>();
  const out: string[] = [];
  for (const e of errors) {
    const k = kindOf(e.reason);
    const n = shown.get(k) ?? 0;
    if (out.length >= limit || n >= 3) continue;
    shown.set(k, n + 1);
    const reason = escapeControlChars(e.reason);
    out.push(`  ${file}:${e.line}: ${reason.length > 300 ? reason.slice(0, 299) + '…' : reason}`);
  }
  for (const [k, count] of total) {
    const n = shown.get(k) ?? 0;
    if (count > n) out.push(`  … and ${count - n} more line(s) with: ${escapeControlChars(k.length > 80 ? k.slice(0, 79) + '…' : k)}`);
  }
  return out;
}

/** Reads a JSONL file and throws one error listing its bad lines (summarized) when any is bad. */
export function readJsonlStrict<T>(file: string, validate?: (row: unknown, line: number) => string[], what = 'file'): T[] {
  const text = readUserTextFile(file, what);
  const { rows, errors } = parseJsonl<T>(text, validate);
  if (errors.length > 0) {
    const lines = new Set(errors.map((e) => e.line)).size;
    throw new TurnwiseError('invalid-file', `${file} has ${lines} invalid line(s):\n${summarizeLineErrors(file, errors).join('\n')}`, {
      hint: 'fix the lines listed above; nothing was run',
    });
  }
  return rows;
}

export function toJsonl(rows: readonly unknown[]): string {
  return rows.map((r) => JSON.stringify(r)).join('\n') + (rows.length ? '\n' : '');
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The first path under `dir` (relative, its undecodable bytes shown as \xNN) whose name is not
 * valid UTF-8, or undefined. Node reads such a name with U+FFFD in place of its bytes, so the file
 * it names can be listed but never opened: a workspace holding one is refused before any work,
 * not halfway with a raw ENOENT. Folders named in `skip` and symbolic links are not entered.
 */
export function nonUtf8Name(dir: string, skip: ReadonlySet<string> = new Set()): string | undefined {
  const show = (b: Buffer) =>
    [...b].map((x) => (x >= 0x20 && x < 0x7f ? String.fromCharCode(x) : `\\x${x.toString(16).padStart(2, '0')}`)).join('');
  const walk = (abs: Buffer, rel: string): string | undefined => {
    let entries: fs.Dirent<Buffer>[];
    try {
      entries = fs.readdirSync(abs, { withFileTypes: true, encoding: 'buffer' });
    } catch {
      return undefined;
    }
    for (const e of entries) {
      let name: string;
      try {
        name = strictUtf8.decode(e.name);
      } catch {
        return path.join(rel, show(e.name));
      }
      if (e.isDirectory() && !skip.has(name)) {
        const found = walk(Buffer.concat([abs, Buffer.from(path.sep), e.name]), path.join(rel, name));
        if (found) return found;
      }
    }
    return undefined;
  };
  return walk(Buffer.from(path.resolve(dir)), '');
}
