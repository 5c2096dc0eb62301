// A run directory (docs/run-directory.md): `.turnwise/runs/<run-id>/` with config.json,
// tasks.jsonl, splits.json, status.json, metrics.jsonl, iterations/<n>/{trajectories,eval}.jsonl,
// checkpoints/<n>/ and, while a process works in it, lock.json. Every file is written atomically.
// An iteration is complete when its own files say so: its checkpoint and trajectories are
// written first, then its marker iterations/<n>/iteration.json (the metrics row, naming the run).
// metrics.jsonl is a log rebuilt from the markers, so a damaged log never decides what is
// complete, and nothing with a marker is ever deleted: a crash at any point leaves the previous
// iteration as the last complete one, and what the cut one left is all that a resume discards.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { TurnwiseError } from './errors';
import type { MetricsRow } from './events';
import { fsErrorReason, parseJsonl, toJsonl, writeFileAtomic, writeJsonAtomic } from './fs';
import { SCHEMA, type Task, type Trajectory } from './schema';

/**
 * The weights file of a checkpoint folder: model.safetensors, or adapter_model.safetensors for a
 * LoRA run's checkpoint (an adapter over its base). The model's file when neither is there.
 */
export function checkpointWeightsFile(dir: string): string {
  const adapter = path.join(dir, 'adapter_model.safetensors');
  return fs.existsSync(adapter) && !fs.existsSync(path.join(dir, 'model.safetensors')) ? adapter : path.join(dir, 'model.safetensors');
}

export const RUNS_DIR = path.join('.turnwise', 'runs');

export type RunState = 'running' | 'finished' | 'failed' | 'stopped';

/** Schema of an iteration's marker, iterations/<n>/iteration.json. */
export const ITERATION_SCHEMA = 'turnwise/iteration@1';
/** Schema of lock.json, held while a process works in a run directory. */
export const RUN_LOCK_SCHEMA = 'turnwise/run-lock@1';

/** status.json: what a reader needs to show a run without reading everything else. */
export interface RunStatus {
  schema: typeof SCHEMA.runStatus;
  runId: string;
  state: RunState;
  /** Process writing the run while `running` (a reader checks it is alive). */
  pid?: number;
  /** Host of that process (a pid names a process on one machine only). */
  host?: string;
  iterations: number;
  lastCompleteIteration: number;
  updatedAt: string;
  error?: { code: string; message: string; hint?: string };
}

export interface RunSplits {
  schema: typeof SCHEMA.runSplits;
  train: string[];
  heldout: string[];
}

const TRAJ_FILES = { train: 'trajectories.jsonl', heldout: 'heldout.jsonl' } as const;
/** What the held-out episodes' file was called in runs written before `heldout.jsonl`. */
const LEGACY_HELDOUT_FILE = 'eval.jsonl';

/**
 * The file holding an iteration's episodes of one split: `trajectories.jsonl` (train) or
 * `heldout.jsonl` (held-out; an older run's `eval.jsonl` when only that one is there).
 */
export function trajectoriesFile(iterationDir: string, split: 'train' | 'heldout'): string {
  const f = path.join(iterationDir, TRAJ_FILES[split]);
  if (split === 'heldout' && !fs.existsSync(f)) {
    const legacy = path.join(iterationDir, LEGACY_HELDOUT_FILE);
    if (fs.existsSync(legacy)) return legacy;
  }
  return f;
}

/** iterations/<n>/iteration.json: the marker that commits iteration n (its metrics row). */
export interface IterationRecord {
  schema: typeof ITERATION_SCHEMA;
  runId: string;
  iteration: number;
  committedAt: string;
  metrics: MetricsRow;
}

/** lock.json: who works in a run directory now. */
export interface RunLockRecord {
  schema: typeof RUN_LOCK_SCHEMA;
  pid: number;
  host: string;
  startedAt: string;
  /** Tells this holder's lock from a later one with a reused pid. */
  token: string;
  /** The process's start time in clock ticks since boot (Linux), to tell it from a later process given the same pid. */
  processStart?: number;
}

/** A file of a run directory that is not as it should be: what is wrong and what to do. */
export interface RunProblem {
  file: string;
  problem: string;
  fix: string;
}

/** What a run directory holds, read without changing anything (RunDir.inventory). */
export interface RunInventory {
  /** Committed iterations, ascending (each has its marker, or a legacy metrics line, and a checkpoint). */
  committed: number[];
  /** Their metrics rows, in order. */
  rows: MetricsRow[];
  /** The last of an unbroken 0..n of committed iterations; -1 when none. */
  lastComplete: number;
  /** Iterations on disk past lastComplete that were never committed (an interrupted one's leftovers). */
  leftovers: number[];
  /** Committed iterations whose marker is to be (re)written from a legacy or intact metrics line. */
  markersToWrite: number[];
  /** What stops a resume (a complete iteration that cannot be used as it is, or would be lost). */
  damage: RunProblem[];
  /** What a resume reports and goes on with (a log rebuilt, episodes missing). */
  warnings: RunProblem[];
  /** metrics.jsonl differs from the committed rows (damaged, missing, stale): rebuilt on a resume. */
  metricsLogStale: boolean;
}

/** Whether a process with this pid runs on this machine (EPERM: it does, as another user). */
export function pidAlive(pid: number | undefined): boolean {
  if (!pid || !Number.isInteger(pid) || pid < 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * The state a reader shows: status.json's, except that a run whose status says `running` while
 * its process (on this host) is gone is `interrupted` (killed, or the machine went down).
 */
export function runDisplayState(status: RunStatus | undefined): RunState | 'interrupted' | 'unknown' {
  if (!status || typeof status.state !== 'string') return 'unknown';
  if (status.state !== 'running') return status.state;
  if (status.host && status.host !== os.hostname()) return 'running';
  return pidAlive(status.pid) ? 'running' : 'interrupted';
}

/** A process's start time (clock ticks since boot, /proc/<pid>/stat field 22), or undefined where there is no /proc. */
function processStart(pid: number): number | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) is in parentheses and may hold spaces: count fields after it.
    const v = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
    return Number.isFinite(v) ? v : undefined;
  } catch {
    return undefined;
  }
}

/** Whether the process a lock names still runs: its pid is alive and, where known, started when the lock's did. */
function lockHolderAlive(l: RunLockRecord): boolean {
  if (!pidAlive(l.pid)) return false;
  if (l.processStart === undefined) return true;
  const now = processStart(l.pid);
  return now === undefined || now === l.processStart;
}

const ITERATION_MARKER = 'iteration.json';
const LOCK_FILE = 'lock.json';
let lockCounter = 0;

/** `<name>__<estimator>__<seed>__<yyyymmdd-hhmmss>`, cleanrl-style: readable and sortable. */
export function newRunId(parts: { name: string; estimator: string; seed: number }, now: Date = new Date()): string {
  const t = now.toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
  const clean = (s: string) => s.replace(/[^A-Za-z0-9_.-]+/g, '-').replace(/^-+|-+$/g, '') || 'run';
  return `${clean(parts.name)}__${clean(parts.estimator)}__${parts.seed}__${t}`;
}

export class RunDir {
  private constructor(
    readonly dir: string,
    readonly runId: string,
  ) {}

  /**
   * Creates a new run directory; refuses one that exists, saying whether a process is running
   * in it (then it is not to be resumed) or it can be resumed.
   */
  static create(runsRoot: string, runId: string, config: unknown): RunDir {
    const dir = path.resolve(runsRoot, runId);
    fs.mkdirSync(path.resolve(runsRoot), { recursive: true });
    try {
      // Not recursive: the one atomic step that tells this process's run from another's.
      fs.mkdirSync(dir);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      const held = readLock(path.join(dir, LOCK_FILE));
      if (typeof held !== 'string' && held.host === os.hostname() && lockHolderAlive(held)) {
        throw new TurnwiseError(
          'invalid-input',
          `run directory ${dir} already exists, and process ${held.pid} is running in it (since ${held.startedAt})`,
          { hint: `start a run of another name, or wait for process ${held.pid} to finish` },
        );
      }
      throw new TurnwiseError('invalid-input', `run directory ${dir} already exists`, {
        hint: 'resume it with --resume, or start a new run',
      });
    }
    const run = new RunDir(dir, runId);
    writeJsonAtomic(run.file('config.json'), config);
    return run;
  }

  /**
   * Creates a new run directory named `baseId`, or `baseId-2`, `-3`, … when that name is taken
   * (two runs of one name, estimator and seed started in the same second): each process gets a
   * folder of its own, the name decided by an atomic mkdir. `config` is given the final id.
   */
  static createUnique(runsRoot: string, baseId: string, config: (runId: string) => unknown): RunDir {
    fs.mkdirSync(path.resolve(runsRoot), { recursive: true });
    for (let k = 1; k < 10_000; k++) {
      const runId = k === 1 ? baseId : `${baseId}-${k}`;
      const dir = path.resolve(runsRoot, runId);
      try {
        fs.mkdirSync(dir);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'EEXIST') continue;
        throw e;
      }
      const run = new RunDir(dir, runId);
      writeJsonAtomic(run.file('config.json'), config(runId));
      return run;
    }
    throw new TurnwiseError('invalid-input', `no free run directory name for ${baseId} under ${path.resolve(runsRoot)}`, {
      hint: 'remove old runs, or give the run another name',
    });
  }

  /** Opens an existing run directory (a path, or a run id under `runsRoot`). */
  static open(ref: string, runsRoot?: string): RunDir {
    const candidates = [path.resolve(ref), ...(runsRoot ? [path.resolve(runsRoot, ref)] : [])];
    const dir = candidates.find((d) => fs.existsSync(path.join(d, 'config.json')));
    if (!dir) {
      const existing = candidates.find((d) => fs.existsSync(d));
      throw new TurnwiseError(
        'not-found',
        existing
          ? `${existing} is not a Turnwise run directory (no config.json)`
          : `no run "${ref}"${runsRoot ? ` (looked in ${path.resolve(runsRoot)})` : ''}`,
        {
          hint: `give a run id listed under ${RUNS_DIR}, or the path of a run directory${existing ? '; if this is one, restore its config.json from a backup' : ''}`,
        },
      );
    }
    return new RunDir(dir, path.basename(dir));
  }

  /** Run ids under `runsRoot`, newest first (ids sort by their timestamp suffix). */
  static list(runsRoot: string): string[] {
    let names: string[];
    try {
      names = fs.readdirSync(runsRoot);
    } catch {
      return [];
    }
    return names
      .filter((n) => fs.existsSync(path.join(runsRoot, n, 'config.json')))
      .sort((a, b) => {
        const ta = a.split('__').pop() ?? a;
        const tb = b.split('__').pop() ?? b;
        return tb.localeCompare(ta) || b.localeCompare(a);
      });
  }

  file(...parts: string[]): string {
    return path.join(this.dir, ...parts);
  }

  readConfig<T = unknown>(): T {
    return readRunJson(this.file('config.json')) as T;
  }

  writeTasks(tasks: readonly Task[], splits: { train: string[]; heldout: string[] }): void {
    writeFileAtomic(this.file('tasks.jsonl'), toJsonl(tasks));
    writeJsonAtomic(this.file('splits.json'), { schema: SCHEMA.runSplits, ...splits } satisfies RunSplits);
  }

  /** The run's tasks; a missing, unreadable or damaged file is an error naming it (and the line). */
  readTasks(): Task[] {
    const f = this.file('tasks.jsonl');
    const text = readText(f, "the run's tasks");
    const { rows, errors } = parseJsonl<Task>(text, (row) =>
      typeof (row as { id?: unknown }).id === 'string' ? [] : ['a task without a string "id"'],
    );
    if (errors.length) throw new TurnwiseError('invalid-file', `${f}:${errors[0].line}: ${errors[0].reason}`, { hint: DAMAGED_HINT });
    if (rows.length === 0) throw new TurnwiseError('invalid-file', `${f} holds no task`, { hint: DAMAGED_HINT });
    return rows;
  }

  /**
   * The run's train / held-out split, checked: two lists of task ids, each id one of `tasks`
   * (when given). A split that names other tasks (another run's file) is an error naming it.
   */
  readSplits(tasks?: readonly Task[]): RunSplits {
    const f = this.file('splits.json');
    const v = readRunJson(f, "the run's train / held-out split") as Partial<RunSplits> | null;
    const isIds = (x: unknown): x is string[] => Array.isArray(x) && x.every((id) => typeof id === 'string');
    for (const k of ['train', 'heldout'] as const) {
      if (!v || typeof v !== 'object' || !isIds(v[k])) {
        throw new TurnwiseError(
          'invalid-file',
          `${f}: "${k}" must be a list of task ids, got ${JSON.stringify(v && typeof v === 'object' ? v[k] : v)?.slice(0, 80)}`,
          { hint: DAMAGED_HINT },
        );
      }
    }
    const splits = v as RunSplits;
    if (tasks) {
      const ids = new Set(tasks.map((t) => t.id));
      const unknown = [...splits.train, ...splits.heldout].filter((id) => !ids.has(id));
      if (unknown.length) {
        throw new TurnwiseError(
          'invalid-file',
          `${f} names ${unknown.length} task id(s) that ${this.file('tasks.jsonl')} does not hold (first: ${JSON.stringify(unknown[0])}): the two files are not of one run`,
          {
            hint: DAMAGED_HINT,
          },
        );
      }
    }
    return splits;
  }

  iterationDir(n: number): string {
    return this.file('iterations', String(n));
  }

  checkpointDir(n: number): string {
    return this.file('checkpoints', String(n));
  }

  writeTrajectories(n: number, split: 'train' | 'heldout', trajectories: readonly Trajectory[]): string {
    const f = path.join(this.iterationDir(n), TRAJ_FILES[split]);
    writeFileAtomic(f, toJsonl(trajectories));
    return f;
  }

  /** Trajectories of iteration n (empty when the file is absent). Bad lines throw. */
  readTrajectories(n: number, split: 'train' | 'heldout' = 'train'): Trajectory[] {
    const f = trajectoriesFile(this.iterationDir(n), split);
    if (!fs.existsSync(f)) return [];
    const { rows, errors } = parseJsonl<Trajectory>(readText(f));
    if (errors.length) throw new TurnwiseError('invalid-file', `${f}:${errors[0].line}: ${errors[0].reason}`);
    return rows;
  }

  /** metrics.jsonl as a reader shows it: its readable rows (a damaged line is skipped). */
  readMetrics(): MetricsRow[] {
    const f = this.file('metrics.jsonl');
    if (!isFile(f)) return [];
    return parseJsonl<MetricsRow>(readText(f)).rows.filter((r) => Number.isInteger(r.iteration));
  }

  /**
   * Commits iteration `row.iteration` (its checkpoint and trajectories are already written):
   * writes its marker, then the metrics log rebuilt from the committed rows before it plus this
   * one. Both atomic; the marker is what counts.
   */
  commitIteration(row: MetricsRow): void {
    const n = row.iteration;
    if (!isFile(checkpointWeightsFile(this.checkpointDir(n)))) {
      throw new TurnwiseError('internal', `iteration ${n} cannot be committed before its checkpoint ${this.checkpointDir(n)} is written`);
    }
    const before = this.inventory().rows.filter((r) => r.iteration < n);
    this.writeMarker(n, row);
    writeFileAtomic(this.file('metrics.jsonl'), toJsonl([...before, row]));
  }

  /**
   * What the run directory holds, read-only: which iterations are committed (by their own
   * markers; a run written before markers existed by its metrics lines and checkpoints), what an
   * interrupted iteration left, what is damaged and what is only worth a warning.
   */
  /** What is wrong with a complete iteration's episodes file, read as it is (undefined: nothing). */
  private episodesProblem(file: string, n: number, row: MetricsRow): string | undefined {
    const { rows, errors } = parseJsonl<Partial<Trajectory>>(readText(file));
    const want = (row as Record<string, unknown>)['train/episodes'];
    if (rows.length === 0 && errors.length === 0)
      return `iteration ${n}'s episodes file is empty${typeof want === 'number' ? ` (the iteration ran ${want})` : ''}`;
    if (errors.length)
      return `line ${errors[0].line} of iteration ${n}'s episodes is ${errors[0].reason} (cut or damaged; ${rows.length} episode(s) read${typeof want === 'number' ? ` of ${want}` : ''})`;
    // A run's episodes name the checkpoint they were sampled from, <run>/checkpoints/<n − 1>.
    const foreign = rows.find(
      (t) =>
        typeof t.checkpoint === 'string' &&
        path.basename(path.dirname(t.checkpoint)) === 'checkpoints' &&
        path.basename(path.dirname(path.dirname(t.checkpoint))) !== this.runId,
    );
    if (foreign) return `it holds episodes of another run (sampled from ${foreign.checkpoint})`;
    if (typeof want === 'number' && rows.length < want) return `it holds ${rows.length} of iteration ${n}'s ${want} episodes`;
    return undefined;
  }

  inventory(): RunInventory {
    const damage: RunProblem[] = [];
    const warnings: RunProblem[] = [];
    const logFile = this.file('metrics.jsonl');
    const log = new Map<number, MetricsRow>();
    let logProblem: string | undefined;
    for (const f of [logFile, this.file('status.json')]) {
      // Both are rebuilt from the rest, but a folder in their place may hold someone's files.
      if (fs.existsSync(f) && !isFile(f))
        damage.push({
          file: f,
          problem: 'it is not a file',
          fix: `move it away; Turnwise writes ${path.basename(f)} anew from the run's complete iterations`,
        });
    }
    if (isFile(logFile)) {
      {
        const { rows, errors } = parseJsonl<MetricsRow>(readText(logFile));
        for (const r of rows) if (Number.isInteger(r.iteration) && r.iteration >= 0) log.set(r.iteration, r);
        if (errors.length)
          logProblem = `line ${errors[0].line} is ${errors[0].reason}${errors.length > 1 ? ` (and ${errors.length - 1} more line(s))` : ''}`;
      }
    }
    const numbers = new Set<number>();
    for (const sub of ['iterations', 'checkpoints']) {
      for (const name of listDir(this.file(sub))) if (/^\d+$/.test(name)) numbers.add(Number(name));
    }
    for (const n of log.keys()) numbers.add(n);
    const committed: number[] = [];
    const rows: MetricsRow[] = [];
    const markersToWrite: number[] = [];
    const uncommitted: number[] = [];
    for (const n of [...numbers].sort((a, b) => a - b)) {
      const marker = path.join(this.iterationDir(n), ITERATION_MARKER);
      const model = checkpointWeightsFile(this.checkpointDir(n));
      let row: MetricsRow | undefined;
      if (fs.existsSync(marker) && !isFile(marker)) {
        damage.push({
          file: marker,
          problem: 'it is not a file',
          fix: `move it away: iteration ${n}'s marker is then ${log.has(n) ? 'rewritten from its line in metrics.jsonl' : 'gone, and its files are kept'}`,
        });
        continue;
      }
      if (fs.existsSync(marker)) {
        const rec = readMarker(marker);
        if (typeof rec === 'string') {
          if (log.has(n) && isFile(model)) {
            row = log.get(n);
            markersToWrite.push(n);
            warnings.push({ file: marker, problem: rec, fix: 'rewritten from its line in metrics.jsonl' });
          } else {
            damage.push({
              file: marker,
              problem: rec,
              fix: `restore it from a backup (iteration ${n}'s checkpoint and episodes are kept as they are)`,
            });
            continue;
          }
        } else if (rec.runId !== this.runId || rec.iteration !== n) {
          damage.push({
            file: marker,
            problem: `it is the marker of ${rec.runId !== this.runId ? `run ${rec.runId}` : `iteration ${rec.iteration}`}, not of ${this.runId}'s iteration ${n}`,
            fix: "restore this run's own file from a backup",
          });
          continue;
        } else row = rec.metrics;
      } else if (log.has(n) && fs.existsSync(model)) {
        // A run written before iterations had markers (or a lost marker): its metrics line and checkpoint commit it.
        row = log.get(n);
        markersToWrite.push(n);
      }
      if (!row) {
        uncommitted.push(n);
        continue;
      }
      committed.push(n);
      rows.push(row);
      if (!fs.existsSync(model))
        damage.push({
          file: model,
          problem: `iteration ${n} is complete but its checkpoint is missing`,
          fix: `restore ${this.checkpointDir(n)} from a backup`,
        });
      else if (!isFile(model))
        damage.push({ file: model, problem: 'it is not a file', fix: `restore ${this.checkpointDir(n)} from a backup` });
      if (n > 0) {
        const t = path.join(this.iterationDir(n), TRAJ_FILES.train);
        if (!isFile(t))
          warnings.push({
            file: t,
            problem: `iteration ${n}'s episodes are ${fs.existsSync(t) ? 'not a file' : 'missing'}`,
            fix: 'the run goes on without them; views show no episodes for that iteration',
          });
        else {
          const problem = this.episodesProblem(t, n, row);
          if (problem)
            warnings.push({
              file: t,
              problem,
              fix: 'the run goes on (the update of that iteration is done); views show the episodes that can be read; restore the file from a backup to keep them all',
            });
        }
      }
    }
    let lastComplete = -1;
    while (committed.includes(lastComplete + 1)) lastComplete++;
    for (const n of committed) {
      if (n <= lastComplete) continue;
      const gap = lastComplete + 1;
      damage.push({
        file: path.join(this.iterationDir(gap), ITERATION_MARKER),
        problem: `iteration ${n} is complete but iteration ${gap} is not (no marker)`,
        fix: `restore iteration ${gap}'s files (${this.iterationDir(gap)}, ${this.checkpointDir(gap)}) from a backup; nothing was deleted`,
      });
      break;
    }
    const leftovers = uncommitted.filter((n) => n > lastComplete);
    for (const n of uncommitted) {
      if (n <= lastComplete && fs.existsSync(this.iterationDir(n))) {
        damage.push({
          file: path.join(this.iterationDir(n), ITERATION_MARKER),
          problem: `iteration ${n} has files but no marker, while later iterations are complete`,
          fix: 'restore the marker from a backup; nothing was deleted',
        });
      }
    }
    const logRows = [...log.values()].sort((a, b) => a.iteration - b.iteration);
    const metricsLogStale = logProblem !== undefined || JSON.stringify(logRows) !== JSON.stringify(rows);
    if (logProblem)
      warnings.push({
        file: logFile,
        problem: logProblem,
        fix: "rebuilt from the iterations' own markers (iterations/<n>/iteration.json)",
      });
    else if (metricsLogStale && rows.length)
      warnings.push({
        file: logFile,
        problem: fs.existsSync(logFile) ? "it does not match the iterations' markers" : 'it is missing',
        fix: "rebuilt from the iterations' own markers (iterations/<n>/iteration.json)",
      });
    return { committed, rows, lastComplete, leftovers, markersToWrite, damage, warnings, metricsLogStale };
  }

  /** Writes the markers a legacy or damaged-marker run lacks and rebuilds metrics.jsonl from the committed rows. */
  /** Writes iteration n's marker: from then on the iteration is complete, whatever the metrics log says. */
  private writeMarker(n: number, row: MetricsRow): void {
    const marker: IterationRecord = {
      schema: ITERATION_SCHEMA,
      runId: this.runId,
      iteration: n,
      committedAt: new Date().toISOString(),
      metrics: row,
    };
    writeJsonAtomic(path.join(this.iterationDir(n), ITERATION_MARKER), marker);
  }

  repairLog(inv: RunInventory = this.inventory()): void {
    for (const n of inv.markersToWrite) {
      const row = inv.rows[inv.committed.indexOf(n)];
      this.writeMarker(n, row);
    }
    if (inv.metricsLogStale) writeFileAtomic(this.file('metrics.jsonl'), toJsonl(inv.rows));
  }

  /** The last iteration of an unbroken run of complete ones from 0; -1 when none. */
  lastCompleteIteration(): number {
    return this.inventory().lastComplete;
  }

  /**
   * Removes what an interrupted iteration left after `n` (its trajectories, a checkpoint, temp
   * folders of a checkpoint write) so a resumed run redoes it from a clean state. An iteration
   * with a marker is never removed, whatever `n` says. Returns the iterations removed.
   */
  discardAfter(n: number): number[] {
    const removed = new Set<number>();
    const committed = (k: number) => fs.existsSync(path.join(this.iterationDir(k), ITERATION_MARKER));
    for (const sub of ['iterations', 'checkpoints']) {
      for (const name of listDir(this.file(sub))) {
        // Leftover temp folders of an interrupted checkpoint write are ours to remove too.
        const m = /^(\d+)(\.tmp-.*|\.turnwise-tmp-.*)?$/.exec(name);
        if (!m || Number(m[1]) <= n) continue;
        if (!m[2] && committed(Number(m[1]))) continue;
        fs.rmSync(this.file(sub, name), { recursive: true, force: true });
        if (!m[2]) removed.add(Number(m[1]));
      }
    }
    const rows = this.readMetrics();
    if (rows.some((r) => r.iteration > n && !committed(r.iteration)))
      writeFileAtomic(this.file('metrics.jsonl'), toJsonl(rows.filter((r) => r.iteration <= n || committed(r.iteration))));
    return [...removed].sort((a, b) => a - b);
  }

  /** status.json, or undefined when it is missing or unreadable (it only summarizes the rest). */
  readStatus(): RunStatus | undefined {
    try {
      const s = JSON.parse(fs.readFileSync(this.file('status.json'), 'utf8')) as RunStatus;
      return s && typeof s === 'object' && typeof s.state === 'string' ? s : undefined;
    } catch {
      return undefined;
    }
  }

  writeStatus(s: Omit<RunStatus, 'schema' | 'runId' | 'updatedAt' | 'host'>): void {
    writeJsonAtomic(this.file('status.json'), {
      schema: SCHEMA.runStatus,
      runId: this.runId,
      ...s,
      ...(s.pid !== undefined ? { host: os.hostname() } : {}),
      updatedAt: new Date().toISOString(),
    } satisfies RunStatus);
  }

  /**
   * Takes the run directory's lock (lock.json naming this process and host), or throws naming
   * the process that holds it. Taken atomically (the complete file is hard-linked into place,
   * which fails if one is there); a lock whose process is gone (on this host; a pid given to a
   * later process does not count, by the process's start time) is taken over.
   * Released by the returned function, and on process exit.
   */
  lock(): { release: () => void; tookOverFrom?: RunLockRecord } {
    const f = this.file(LOCK_FILE);
    const start = processStart(process.pid);
    const mine: RunLockRecord = {
      schema: RUN_LOCK_SCHEMA,
      pid: process.pid,
      host: os.hostname(),
      startedAt: new Date().toISOString(),
      token: `${process.pid}-${Date.now()}-${lockCounter++}`,
      ...(start !== undefined ? { processStart: start } : {}),
    };
    let tookOverFrom: RunLockRecord | undefined;
    for (let attempt = 0; ; attempt++) {
      const tmp = `${f}.tmp-${mine.token}`;
      writeFileAtomic(tmp, JSON.stringify(mine) + '\n');
      try {
        fs.linkSync(tmp, f);
        break;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST')
          throw new TurnwiseError(
            'invalid-input',
            `cannot lock ${this.dir}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
            { hint: 'check that the run directory is writable', cause: e },
          );
      } finally {
        fs.rmSync(tmp, { force: true });
      }
      const held = readLock(f);
      if (typeof held === 'string') {
        throw new TurnwiseError(
          'invalid-file',
          `${f} cannot be read (${held}), so Turnwise cannot tell whether another process works in this run`,
          {
            hint: `if no Turnwise process works in ${this.dir} (check with \`ps\`), delete ${f}`,
          },
        );
      }
      const here = held.host === os.hostname();
      if (!here || lockHolderAlive(held) || attempt > 0) {
        throw new TurnwiseError(
          'invalid-input',
          `${this.runId} is in use by process ${held.pid}${here ? '' : ` on ${held.host}`} (since ${held.startedAt}): two processes must not write one run`,
          {
            hint: here
              ? `wait for process ${held.pid} to finish, or stop it (kill ${held.pid}) and resume then`
              : `if no Turnwise process runs on ${held.host} any more, delete ${f}`,
          },
        );
      }
      // Stale (its process is gone): moved aside, and taken over only if what moved is the lock judged stale.
      const aside = `${f}.stale-${mine.token}`;
      try {
        fs.renameSync(f, aside);
      } catch {
        continue;
      }
      const moved = readLock(aside);
      if (typeof moved !== 'string' && moved.token !== held.token) {
        fs.renameSync(aside, f);
        continue;
      }
      fs.rmSync(aside, { force: true });
      tookOverFrom = held;
    }
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      process.off('exit', release);
      const now = readLock(f);
      if (typeof now !== 'string' && now.token === mine.token) fs.rmSync(f, { force: true });
    };
    process.on('exit', release);
    return { release, ...(tookOverFrom ? { tookOverFrom } : {}) };
  }
}

const DAMAGED_HINT = 'restore the file from a backup of the run directory, or start a new run (`turnwise train`); nothing was changed';

function isFile(f: string): boolean {
  try {
    return fs.statSync(f).isFile();
  } catch {
    return false;
  }
}

function listDir(dir: string): string[] {
  try {
    return fs.readdirSync(dir);
  } catch {
    return [];
  }
}

/** An iteration marker, or why it cannot be used. */
function readMarker(file: string): IterationRecord | string {
  if (!isFile(file)) return 'it is not a file';
  let v: IterationRecord;
  try {
    v = JSON.parse(fs.readFileSync(file, 'utf8')) as IterationRecord;
  } catch (e) {
    return fs.statSync(file).size === 0 ? 'it is empty' : `it is not valid JSON (${(e as Error).message})`;
  }
  if (
    !v ||
    typeof v !== 'object' ||
    v.schema !== ITERATION_SCHEMA ||
    !v.metrics ||
    typeof v.metrics !== 'object' ||
    !Number.isInteger(v.iteration)
  )
    return `it is not an iteration marker (schema ${ITERATION_SCHEMA})`;
  return v;
}

/** lock.json's holder, or why it cannot be read. */
function readLock(file: string): RunLockRecord | string {
  let v: RunLockRecord;
  try {
    v = JSON.parse(fs.readFileSync(file, 'utf8')) as RunLockRecord;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return code ? code : `not valid JSON: ${(e as Error).message}`;
  }
  if (!v || typeof v !== 'object' || !Number.isInteger(v.pid) || typeof v.host !== 'string')
    return `not a lock record (schema ${RUN_LOCK_SCHEMA})`;
  return v;
}

function readText(file: string, what = 'file'): string {
  let st: fs.Stats;
  try {
    st = fs.statSync(file);
  } catch (e) {
    throw new TurnwiseError('not-found', `cannot read ${file} (${what}): ${fsErrorReason(e, 'it is missing')}`, { hint: DAMAGED_HINT });
  }
  if (!st.isFile()) throw new TurnwiseError('invalid-file', `${file} (${what}) is not a file`, { hint: DAMAGED_HINT });
  try {
    return fs.readFileSync(file, 'utf8').replace(/^\uFEFF/, '');
  } catch (e) {
    throw new TurnwiseError('not-found', `cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, {
      hint: 'check its permissions',
    });
  }
}

/** A JSON file of the run directory: one Turnwise wrote, so a problem with it is damage (DAMAGED_HINT). */
function readRunJson(file: string, what = 'file'): unknown {
  const text = readText(file, what);
  if (text.trim() === '') throw new TurnwiseError('invalid-file', `${file} (${what}) is empty`, { hint: DAMAGED_HINT });
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new TurnwiseError('invalid-file', `${file} (${what}) is not valid JSON: ${(e as Error).message}`, { hint: DAMAGED_HINT });
  }
}
