// Atomic file writes and line-numbered JSONL reading: every artifact Turnwise writes
// survives a crash mid-write (temp file + fsync + rename).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError } from './errors';

let tmpCounter = 0;

/** Writes `data` to `file` so that readers see either the old or the new content, never a mix. */
export function writeFileAtomic(file: string, data: string | Uint8Array): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const tmp = `${file}.tmp-${process.pid}-${tmpCounter++}`;
  const fd = fs.openSync(tmp, 'w');
  try {
    fs.writeSync(fd, typeof data === 'string' ? Buffer.from(data, 'utf8') : data);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  try {
    fs.renameSync(tmp, file);
  } catch (e) {
    fs.rmSync(tmp, { force: true });
    throw e;
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
export function parseJsonl<T>(
  text: string,
  validate?: (row: unknown, line: number) => string[],
): { rows: T[]; errors: LineError[] } {
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

/** Reads a JSONL file and throws one error listing every bad line (up to 50) when any is bad. */
export function readJsonlStrict<T>(file: string, validate?: (row: unknown, line: number) => string[]): T[] {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new TurnwiseError('not-found', `cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  const { rows, errors } = parseJsonl<T>(text, validate);
  if (errors.length > 0) {
    const shown = errors.slice(0, 50).map((e) => `  ${file}:${e.line}: ${e.reason}`);
    if (errors.length > 50) shown.push(`  … and ${errors.length - 50} more`);
    throw new TurnwiseError('invalid-file', `${file} has ${errors.length} invalid line(s):\n${shown.join('\n')}`, {
      hint: 'fix the lines listed above; nothing was run',
    });
  }
  return rows;
}

export function toJsonl(rows: readonly unknown[]): string {
  return rows.map((r) => JSON.stringify(r)).join('\n') + (rows.length ? '\n' : '');
}
