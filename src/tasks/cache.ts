// Tasks made before, kept by what made them: synthesis runs the workspace's suite once per mutant
// (minutes on a real repository), and a second run on the same workspace content with the same
// task settings would make the same tasks again. The key is everything the result depends on: the
// snapshot's content hash (every file of the workspace and the sandbox image it layers on), the
// test runner, the task source and its settings, and SYNTHESIS_VERSION, raised whenever synthesis
// or validation would keep other tasks. A cached file is an ordinary task file (readable by
// `tasksFile`); a damaged one is set aside and the tasks are made again, never a failed run.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { turnwiseCacheDir, writeFileAtomic } from '../core/fs';
import type { Task } from '../core/schema';
import { parseTaskFile, writeTaskFile } from './taskfile';

/**
 * Version of task synthesis and validation: tasks cached under an older one are made again.
 * 2: doctests of the code under test are not scored.
 */
export const SYNTHESIS_VERSION = 2;

/** What a run's tasks depend on besides the code that makes them. */
export interface TaskCacheKey {
  source: 'mutation' | 'failing-tests';
  /** The workspace snapshot's content hash (sandbox/snapshot.ts snapshotHash: files and base image). */
  snapshot: string;
  /** The test runner found for the workspace (kind and command, after the user's override). */
  runner: { kind: string; command: string; reportPath: string };
  seed: number;
  /** Most tasks kept (mutation source). */
  max?: number;
}

/**
 * The folder of cached tasks: TURNWISE_TASK_CACHE when set (`off` turns the cache off: undefined),
 * else ~/.cache/turnwise/tasks.
 */
export function taskCacheDir(): string | undefined {
  const env = process.env.TURNWISE_TASK_CACHE;
  if (env === 'off') return undefined;
  return env ? path.resolve(env) : turnwiseCacheDir('tasks');
}

/** The key as a file name stem: a hash of every field and SYNTHESIS_VERSION. */
export function taskCacheName(key: TaskCacheKey): string {
  const canonical = JSON.stringify([
    SYNTHESIS_VERSION,
    key.source,
    key.snapshot,
    key.runner.kind,
    key.runner.command,
    key.runner.reportPath,
    key.seed,
    key.max ?? null,
  ]);
  return `${key.source}-${createHash('sha256').update(canonical).digest('hex').slice(0, 32)}`;
}

/** The file holding the tasks of `key` in the cache folder `dir`. */
function cacheFile(dir: string, key: TaskCacheKey): string {
  return path.join(dir, `${taskCacheName(key)}.jsonl`);
}

export interface CachedTasks {
  tasks: Task[];
  file: string;
  /** When they were made (the file's time). */
  madeAt: Date;
}

/**
 * The tasks cached under `key`, or undefined (none, the cache is off, or the file is damaged: then
 * `onDamaged` is told why and the file is removed so that the tasks are made again).
 */
export function readCachedTasks(key: TaskCacheKey, onDamaged?: (why: string) => void): CachedTasks | undefined {
  const dir = taskCacheDir();
  if (!dir) return undefined;
  const file = cacheFile(dir, key);
  let text: string;
  let madeAt: Date;
  try {
    text = fs.readFileSync(file, 'utf8');
    madeAt = fs.statSync(file).mtime;
  } catch {
    return undefined;
  }
  const { tasks, errors } = parseTaskFile(text);
  if (errors.length > 0 || tasks.length === 0) {
    onDamaged?.(
      `${file} ${errors.length ? `has ${errors.length} invalid line(s) (line ${errors[0]!.line}: ${errors[0]!.reason})` : 'holds no task'}; making the tasks again`,
    );
    fs.rmSync(file, { force: true });
    return undefined;
  }
  return { tasks, file, madeAt };
}

/**
 * Keeps `tasks` under `key` (atomically: a reader never sees half a file). Returns the file, or
 * undefined when the cache is off or cannot be written (the run goes on without it; `onError` says why).
 */
export function writeCachedTasks(key: TaskCacheKey, tasks: Task[], onError?: (why: string) => void): string | undefined {
  const dir = taskCacheDir();
  if (!dir || tasks.length === 0) return undefined;
  const file = cacheFile(dir, key);
  try {
    fs.mkdirSync(dir, { recursive: true });
    writeTaskFile(file, tasks);
    // What made them, for a person reading the folder (the key itself is a hash).
    writeFileAtomic(file.replace(/\.jsonl$/, '.key.json'), JSON.stringify({ version: SYNTHESIS_VERSION, ...key }, null, 2) + '\n');
    return file;
  } catch (e) {
    onError?.(`could not keep the tasks in ${dir} (${(e as Error).message}); the next run makes them again`);
    return undefined;
  }
}
