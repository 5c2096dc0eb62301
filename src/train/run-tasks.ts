// A run's tasks and their split: made once from the run's config (a task file, the workspace's
// failing tests, or mutations of its code, synthesized in the run's sandboxes) and written to the
// run directory; read back from there on a resume.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError } from '../core/errors';
import type { RunEventBody } from '../core/events';
import type { RunDir } from '../core/run';
import type { Task } from '../core/schema';
import type { SandboxPool } from '../sandbox';
import { DEFAULT_BASELINE_TIMEOUT_MS, failingTestTasks, snapshotFor, synthesizeMutationTasks } from '../tasks/synth';
import { readCachedTasks, taskCacheDir, writeCachedTasks, type TaskCacheKey } from '../tasks/cache';
import { detectRunner, type RunnerOverride } from '../tasks/runners';
import { readTaskFile } from '../tasks/taskfile';
import { assertWorkspaceHoldsTasks } from '../tasks/origin';
import { demonstrationTaskIds } from '../demonstrations/record';
import type { TrainConfig } from './config';
import { embeddedModelDir } from './embedded';
import { splitTasks } from './split';

/** The tasks a run trains on and evaluates on. */
export interface RunTasks {
  byId: ReadonlyMap<string, Task>;
  train: Task[];
  heldout: Task[];
}

/**
 * The run's tasks and split: read back when the run has them, else made from the config, split
 * and written. Throws when no task is left to train on: a split read back without one is a damaged
 * file; a split just made without one is a configuration to change.
 */
export async function runTasks(
  run: RunDir,
  c: TrainConfig,
  o: {
    pool: SandboxPool;
    emit: (b: RunEventBody) => void;
    log: (message: string, level?: 'info' | 'warn') => void;
    check: () => void;
    signal?: AbortSignal;
  },
): Promise<RunTasks> {
  let tasks: Task[];
  let splits: { train: string[]; heldout: string[] };
  const readBack = fs.existsSync(run.file('splits.json'));
  if (readBack) {
    // A resume poses the run's tasks again: refused if the workspace no longer holds their files.
    tasks = readTaskFile(run.file('tasks.jsonl'));
    assertWorkspaceHoldsTasks(tasks, c.workspace, run.file('tasks.jsonl'));
    splits = run.readSplits(tasks);
  } else {
    o.emit({ type: 'phase', iteration: 0, phase: 'tasks', detail: `${c.taskSource} tasks from ${c.workspace}` });
    tasks = await resolveTasks(c, o.pool, o.emit, o.log, o.signal);
    o.check();
    if (tasks.length === 0) throw noTaskError(c);
    // Tasks the starting model saw as demonstrations stay in the train split.
    const seen = new Set(demonstrationTaskIds(c.model || embeddedModelDir()));
    splits = splitTasks(tasks, c.heldoutFraction, c.taskSeed, seen);
    const kept = tasks.filter((t) => seen.has(t.id)).length;
    if (kept) o.log(`${kept} task(s) were demonstrations of the starting model's warm start: they stay in the train split`);
    run.writeTasks(tasks, splits);
  }
  const byId = new Map(tasks.map((t) => [t.id, t]));
  const train = splits.train.map((id) => byId.get(id)!).filter(Boolean);
  const heldout = splits.heldout.map((id) => byId.get(id)!).filter(Boolean);
  if (train.length === 0) {
    throw readBack
      ? new TurnwiseError('invalid-file', `${run.file('splits.json')} holds no train task`, {
          hint: 'restore it from a backup of the run directory; nothing was changed',
        })
      : new TurnwiseError('invalid-input', `all ${tasks.length} task(s) are held out; none is left to train on`, {
          hint: 'lower heldoutFraction or add tasks',
        });
  }
  return { byId, train, heldout };
}

/**
 * Makes the tasks of a new run from its config (synthesis runs in sandboxes of `pool`), or reads
 * them back from the task cache (tasks/cache.ts) when `reuseTasks` is on and a run already made
 * them from the same workspace content with the same settings.
 */
async function resolveTasks(
  c: TrainConfig,
  pool: SandboxPool,
  emit: (b: RunEventBody) => void,
  log: (message: string, level?: 'info' | 'warn') => void,
  signal?: AbortSignal,
): Promise<Task[]> {
  const override = c.testCommand ? { command: c.testCommand } : undefined;
  if (c.taskSource === 'file') return readTaskFile(c.tasksFile!);
  const key = c.reuseTasks ? await cacheKey(c, pool, override) : undefined;
  if (key) {
    const hit = readCachedTasks(key, (why) => log(why, 'warn'));
    if (hit) {
      log(
        `reusing ${hit.tasks.length} ${c.taskSource} task(s) made ${hit.madeAt.toISOString().slice(0, 16).replace('T', ' ')} UTC from the same workspace content and task settings (${hit.file}); set reuseTasks to false to make them again`,
      );
      // The same content may sit in another folder (a copy, another clone): the run's tasks name its own.
      const root = path.resolve(c.workspace);
      return hit.tasks.map((t) => (t.origin ? { ...t, origin: { ...t.origin, workspace: root } } : t));
    }
  }
  const tasks = await makeTasks(c, pool, emit, override, signal);
  if (key) writeCachedTasks(key, tasks, (why) => log(why, 'warn'));
  return tasks;
}

/** The cache key of the run's tasks, or undefined where they are not cached (a Go workspace's mutations: synthesis refuses them). */
async function cacheKey(c: TrainConfig, pool: SandboxPool, override: RunnerOverride | undefined): Promise<TaskCacheKey | undefined> {
  if (!taskCacheDir()) return undefined;
  const runner = detectRunner(c.workspace, override);
  if (c.taskSource === 'mutation' && runner.language === 'go') return undefined;
  const snap = await snapshotFor(pool, c.workspace, runner);
  return {
    source: c.taskSource as TaskCacheKey['source'],
    snapshot: snap.hash,
    runner: { kind: runner.kind, command: runner.command, reportPath: runner.reportPath },
    seed: c.taskSeed,
    ...(c.taskSource === 'mutation' ? { max: c.maxTasks } : {}),
  };
}

/** Synthesizes the run's tasks: mutations of the workspace's code, or its failing tests. */
async function makeTasks(
  c: TrainConfig,
  pool: SandboxPool,
  emit: (b: RunEventBody) => void,
  override: RunnerOverride | undefined,
  signal?: AbortSignal,
): Promise<Task[]> {
  if (c.taskSource === 'failing-tests') {
    const r = await failingTestTasks({ workspace: c.workspace, pool, seed: c.taskSeed, override, signal });
    return r.tasks;
  }
  const r = await synthesizeMutationTasks({
    workspace: c.workspace,
    pool,
    seed: c.taskSeed,
    max: c.maxTasks,
    override,
    signal,
    onProgress: (p) =>
      emit({
        type: 'phase',
        iteration: 0,
        phase: 'tasks',
        done: p.kept,
        total: p.total,
        // The baseline can take long (a whole suite, at most DEFAULT_BASELINE_TIMEOUT_MS): say what it waits for.
        detail:
          p.phase === 'baseline'
            ? `baseline: running the workspace's test suite once (at most ${DEFAULT_BASELINE_TIMEOUT_MS / 1000} s)`
            : `${p.phase ?? 'validate'}: ${p.tried} tried, ${p.kept} kept`,
      }),
  });
  return r.tasks;
}

/** Why a new run found no task, with what to do. */
function noTaskError(c: TrainConfig): TurnwiseError {
  return c.taskSource === 'failing-tests'
    ? new TurnwiseError('invalid-input', `no test of ${c.workspace} fails, so taskSource "failing-tests" finds no task`, {
        hint: 'use taskSource "mutation" (the default: bugs made from the workspace\'s own code) or "file" with a task file (`turnwise tasks synth --out`)',
      })
    : new TurnwiseError(
        'invalid-input',
        `no task survived validation in ${c.workspace}: no mutation of its source made one of its passing tests fail`,
        {
          hint: 'check that the tests exercise the code (`turnwise tasks synth --workspace … --json` shows why candidates were dropped), or use taskSource "failing-tests" / "file"',
        },
      );
}
