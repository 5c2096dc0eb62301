// Task files (JSONL, docs/design.md "On-disk formats"): validation of every line, so a user sees all bad lines
// at once and nothing runs until the file is valid.
import * as path from 'node:path';
import { TurnwiseError } from '../core/errors';
import { parseJsonl, readUserTextFile, summarizeLineErrors, toJsonl, writeFileAtomic, type LineError } from '../core/fs';
import { SCHEMA, type Task } from '../core/schema';
import { workspacePathProblem } from './origin';

const SOURCES = ['failing-tests', 'mutation', 'file'];
const LANGUAGES = ['python', 'javascript', 'typescript', 'go'];
const FORMATS = ['junit-xml', 'jest-json', 'go-test-json'];
const RUNNERS = ['pytest', 'node-test', 'mocha', 'jest', 'go-test'];
const KEYS = new Set([
  'schema',
  'id',
  'source',
  'instruction',
  'language',
  'testCommand',
  'reportFormat',
  'runner',
  'fail_to_pass',
  'pass_to_pass',
  'mutation',
  'origin',
]);
const MUTATION_KEYS = new Set(['file', 'nodeKind', 'operator', 'enclosing', 'span', 'replacement']);

const isStr = (v: unknown): v is string => typeof v === 'string' && v.trim() !== '';

function stringList(row: Record<string, unknown>, key: string, reasons: string[], nonEmpty: boolean): string[] {
  const v = row[key];
  if (!Array.isArray(v)) {
    reasons.push(`${key} must be an array of test ids`);
    return [];
  }
  const bad = v.findIndex((x) => !isStr(x));
  if (bad >= 0) reasons.push(`${key}[${bad}] must be a non-empty string`);
  if (nonEmpty && v.length === 0) reasons.push(`${key} must name at least one test`);
  const seen = new Set<string>();
  for (const x of v) {
    if (typeof x === 'string' && seen.has(x)) reasons.push(`${key} lists ${JSON.stringify(x)} twice`);
    seen.add(String(x));
  }
  return v.filter(isStr);
}

/** Every reason a row is not a valid Task (empty when it is). */
export function validateTask(value: unknown): string[] {
  const row = value as Record<string, unknown>;
  const reasons: string[] = [];
  if (row.schema !== SCHEMA.task) reasons.push(`schema must be "${SCHEMA.task}" (got ${JSON.stringify(row.schema)})`);
  if (!isStr(row.id)) reasons.push('id must be a non-empty string');
  if (!SOURCES.includes(row.source as string))
    reasons.push(`source must be one of ${SOURCES.join(', ')} (got ${JSON.stringify(row.source)})`);
  if (!isStr(row.instruction)) reasons.push('instruction must be a non-empty string');
  if (!LANGUAGES.includes(row.language as string))
    reasons.push(`language must be one of ${LANGUAGES.join(', ')} (got ${JSON.stringify(row.language)})`);
  if (!isStr(row.testCommand)) reasons.push('testCommand must be a non-empty string');
  if (row.reportFormat !== undefined && !FORMATS.includes(row.reportFormat as string))
    reasons.push(`reportFormat must be one of ${FORMATS.join(', ')}`);
  if (row.runner !== undefined && !RUNNERS.includes(row.runner as string)) reasons.push(`runner must be one of ${RUNNERS.join(', ')}`);
  const f2p = stringList(row, 'fail_to_pass', reasons, true);
  const p2p = stringList(row, 'pass_to_pass', reasons, false);
  const both = f2p.filter((t) => p2p.includes(t));
  if (both.length) reasons.push(`${JSON.stringify(both[0])} is in both fail_to_pass and pass_to_pass`);
  for (const k of Object.keys(row)) if (!KEYS.has(k)) reasons.push(`unknown field ${JSON.stringify(k)}`);
  if (row.source === 'mutation' && row.mutation === undefined) reasons.push('a mutation task needs a mutation object');
  if (row.mutation !== undefined) {
    const m = row.mutation as Record<string, unknown>;
    if (m === null || typeof m !== 'object' || Array.isArray(m)) reasons.push('mutation must be an object');
    else {
      for (const k of ['file', 'nodeKind', 'operator'] as const) if (!isStr(m[k])) reasons.push(`mutation.${k} must be a non-empty string`);
      const pathProblem = isStr(m.file) ? workspacePathProblem(m.file) : undefined;
      if (pathProblem)
        reasons.push(
          `mutation.file ${JSON.stringify(m.file)} ${pathProblem}: it must be a path inside the workspace, such as "src/app.py"`,
        );
      if (typeof m.replacement !== 'string') reasons.push('mutation.replacement must be a string');
      const s = m.span as Record<string, unknown> | undefined;
      if (
        !s ||
        typeof s !== 'object' ||
        !Number.isInteger(s.start) ||
        !Number.isInteger(s.end) ||
        typeof s.text !== 'string' ||
        (s.start as number) > (s.end as number)
      ) {
        reasons.push('mutation.span must be {start, end, text} with integer start ≤ end');
      }
      for (const k of Object.keys(m)) if (!MUTATION_KEYS.has(k)) reasons.push(`unknown field "mutation.${k}"`);
    }
  }
  if (row.origin !== undefined) reasons.push(...originProblems(row.origin));
  return reasons;
}

/** Why a task's `origin` record is malformed (a hand-edited or foreign file). */
function originProblems(value: unknown): string[] {
  const o = value as Record<string, unknown>;
  if (o === null || typeof o !== 'object' || Array.isArray(o)) return ['origin must be an object {workspace, files}'];
  const reasons: string[] = [];
  if (typeof o.workspace !== 'string' || !path.isAbsolute(o.workspace))
    reasons.push('origin.workspace must be the absolute path of the folder the task was made from');
  const files = o.files as Record<string, unknown>;
  if (files === null || typeof files !== 'object' || Array.isArray(files))
    reasons.push('origin.files must be an object mapping workspace paths to sha256 hex digests');
  else {
    for (const [f, h] of Object.entries(files)) {
      const p = workspacePathProblem(f);
      if (p) reasons.push(`origin.files path ${JSON.stringify(f)} ${p}`);
      if (typeof h !== 'string' || !/^[0-9a-f]{64}$/.test(h))
        reasons.push(`origin.files[${JSON.stringify(f)}] must be a sha256 hex digest`);
    }
  }
  for (const k of Object.keys(o)) if (k !== 'workspace' && k !== 'files') reasons.push(`unknown field "origin.${k}"`);
  return reasons;
}

/** Parses task JSONL text; reports every bad line (including duplicate ids) with its number. */
export function parseTaskFile(text: string): { tasks: Task[]; errors: LineError[] } {
  const firstLine = new Map<string, number>();
  const { rows, errors } = parseJsonl<Task>(text, (row, line) => {
    const reasons = validateTask(row);
    const id = (row as { id?: unknown }).id;
    if (typeof id === 'string' && id !== '') {
      const prev = firstLine.get(id);
      if (prev !== undefined) reasons.push(`duplicate id ${JSON.stringify(id)} (first on line ${prev})`);
      else firstLine.set(id, line);
    }
    return reasons;
  });
  return { tasks: rows, errors };
}

const READ_HINT = 'check the path, or create tasks with `turnwise tasks synth` / `turnwise tasks failing`';

/** Reads and validates a task file; throws one error listing every bad line. */
export function readTaskFile(file: string): Task[] {
  const text = readUserTextFile(file, 'task file', { hint: READ_HINT });
  const { tasks, errors } = parseTaskFile(text);
  if (errors.length > 0) {
    const shown = summarizeLineErrors(file, errors);
    const lines = new Set(errors.map((e) => e.line)).size;
    throw new TurnwiseError('invalid-file', `${file} has ${lines} invalid line(s):\n${shown.join('\n')}`, {
      hint: 'fix the lines listed above; nothing was run',
    });
  }
  if (tasks.length === 0) throw new TurnwiseError('invalid-file', `${file} holds no tasks`, { hint: 'add one task per line (JSON)' });
  return tasks;
}

/** What `tasks check` reports about a task file: valid tasks per source and every bad line. */
export interface TaskFileCheck {
  file: string;
  /** True when every line is valid and there is at least one task. */
  ok: boolean;
  valid: number;
  invalidLines: number;
  bySource: Record<string, number>;
  /** The workspace folders the valid tasks record as their origin ([] for a file written before origins were recorded). */
  madeFrom: string[];
  errors: LineError[];
}

/** Validates a task file without running anything (a missing, binary or folder path throws). */
export function checkTaskFile(file: string): TaskFileCheck {
  const { tasks, errors } = parseTaskFile(readUserTextFile(file, 'task file', { hint: READ_HINT }));
  const bySource: Record<string, number> = {};
  for (const t of tasks) bySource[t.source] = (bySource[t.source] ?? 0) + 1;
  const madeFrom = [...new Set(tasks.map((t) => t.origin?.workspace).filter((w): w is string => !!w))];
  return {
    file,
    ok: errors.length === 0 && tasks.length > 0,
    valid: tasks.length,
    invalidLines: new Set(errors.map((e) => e.line)).size,
    bySource,
    madeFrom,
    errors,
  };
}

export function writeTaskFile(file: string, tasks: Task[]): void {
  writeFileAtomic(file, toJsonl(tasks));
}
