// A run directory (design.md "Run directory"): `.turnwise/runs/<run-id>/` with config.json,
// tasks.jsonl, splits.json, status.json, metrics.jsonl, iterations/<n>/{trajectories,eval}.jsonl
// and checkpoints/<n>/. Every file is written atomically. An iteration is complete once its
// metrics line is written, and that line is written last (after its trajectories and its
// checkpoint), so a crash at any point leaves the previous iteration as the last complete one.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError } from './errors';
import type { MetricsRow } from './events';
import { parseJsonl, toJsonl, writeFileAtomic, writeJsonAtomic } from './fs';
import { SCHEMA, type Task, type Trajectory } from './schema';

export const RUNS_DIR = path.join('.turnwise', 'runs');

export type RunState = 'running' | 'finished' | 'failed' | 'stopped';

/** status.json: what a reader needs to show a run without reading everything else. */
export interface RunStatus {
  schema: typeof SCHEMA.runStatus;
  runId: string;
  state: RunState;
  /** Process writing the run while `running` (a reader checks it is alive). */
  pid?: number;
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

const TRAJ_FILES = { train: 'trajectories.jsonl', heldout: 'eval.jsonl' } as const;

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

  /** Creates a new run directory; refuses one that exists. */
  static create(runsRoot: string, runId: string, config: unknown): RunDir {
    const dir = path.resolve(runsRoot, runId);
    if (fs.existsSync(dir)) {
      throw new TurnwiseError('invalid-input', `run directory ${dir} already exists`, { hint: 'resume it with --resume, or start a new run' });
    }
    fs.mkdirSync(dir, { recursive: true });
    const run = new RunDir(dir, runId);
    writeJsonAtomic(run.file('config.json'), config);
    return run;
  }

  /** Opens an existing run directory (a path, or a run id under `runsRoot`). */
  static open(ref: string, runsRoot?: string): RunDir {
    const candidates = [path.resolve(ref), ...(runsRoot ? [path.resolve(runsRoot, ref)] : [])];
    const dir = candidates.find((d) => fs.existsSync(path.join(d, 'config.json')));
    if (!dir) {
      const existing = candidates.find((d) => fs.existsSync(d));
      throw new TurnwiseError(
        'not-found',
        existing ? `${existing} is not a Turnwise run directory (no config.json)` : `no run "${ref}"${runsRoot ? ` (looked in ${path.resolve(runsRoot)})` : ''}`,
        { hint: `give a run id listed under ${RUNS_DIR}, or the path of a run directory` },
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
    return readJsonFile(this.file('config.json')) as T;
  }

  writeTasks(tasks: readonly Task[], splits: { train: string[]; heldout: string[] }): void {
    writeFileAtomic(this.file('tasks.jsonl'), toJsonl(tasks));
    writeJsonAtomic(this.file('splits.json'), { schema: SCHEMA.runSplits, ...splits } satisfies RunSplits);
  }

  readTasks(): Task[] {
    const text = readText(this.file('tasks.jsonl'));
    const { rows, errors } = parseJsonl<Task>(text);
    if (errors.length) throw new TurnwiseError('invalid-file', `${this.file('tasks.jsonl')}:${errors[0].line}: ${errors[0].reason}`, { hint: 'the run directory is damaged: start a new run' });
    return rows;
  }

  readSplits(): RunSplits {
    return readJsonFile(this.file('splits.json')) as RunSplits;
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
    const f = path.join(this.iterationDir(n), TRAJ_FILES[split]);
    if (!fs.existsSync(f)) return [];
    const { rows, errors } = parseJsonl<Trajectory>(readText(f));
    if (errors.length) throw new TurnwiseError('invalid-file', `${f}:${errors[0].line}: ${errors[0].reason}`);
    return rows;
  }

  readMetrics(): MetricsRow[] {
    const f = this.file('metrics.jsonl');
    if (!fs.existsSync(f)) return [];
    return parseJsonl<MetricsRow>(readText(f)).rows.filter((r) => Number.isInteger(r.iteration));
  }

  /**
   * Commits iteration `row.iteration`: rewrites metrics.jsonl with the row appended (atomic),
   * replacing any earlier row of the same iteration.
   */
  appendMetrics(row: MetricsRow): void {
    const rows = this.readMetrics().filter((r) => r.iteration < row.iteration);
    writeFileAtomic(this.file('metrics.jsonl'), toJsonl([...rows, row]));
  }

  /** The last iteration whose metrics line and checkpoint are both on disk; -1 when none. */
  lastCompleteIteration(): number {
    let last = -1;
    for (const r of this.readMetrics()) {
      if (fs.existsSync(path.join(this.checkpointDir(r.iteration), 'model.safetensors'))) last = Math.max(last, r.iteration);
    }
    return last;
  }

  /**
   * Removes what an interrupted iteration left after `n` (its trajectories, a checkpoint, a
   * metrics line) so a resumed run redoes it from a clean state. Returns the iterations removed.
   */
  discardAfter(n: number): number[] {
    const removed = new Set<number>();
    for (const sub of ['iterations', 'checkpoints']) {
      let names: string[] = [];
      try {
        names = fs.readdirSync(this.file(sub));
      } catch {
        continue;
      }
      for (const name of names) {
        // Leftover temp folders of an interrupted checkpoint write are ours to remove too.
        const m = /^(\d+)(\.tmp-.*)?$/.exec(name);
        if (!m || Number(m[1]) <= n) continue;
        fs.rmSync(this.file(sub, name), { recursive: true, force: true });
        if (!m[2]) removed.add(Number(m[1]));
      }
    }
    const rows = this.readMetrics();
    if (rows.some((r) => r.iteration > n)) writeFileAtomic(this.file('metrics.jsonl'), toJsonl(rows.filter((r) => r.iteration <= n)));
    return [...removed].sort((a, b) => a - b);
  }

  readStatus(): RunStatus | undefined {
    try {
      return readJsonFile(this.file('status.json')) as RunStatus;
    } catch {
      return undefined;
    }
  }

  writeStatus(s: Omit<RunStatus, 'schema' | 'runId' | 'updatedAt'>): void {
    writeJsonAtomic(this.file('status.json'), { schema: SCHEMA.runStatus, runId: this.runId, ...s, updatedAt: new Date().toISOString() } satisfies RunStatus);
  }
}

function readText(file: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new TurnwiseError('not-found', `cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, { hint: 'the run directory is incomplete or damaged' });
  }
}

function readJsonFile(file: string): unknown {
  const text = readText(file);
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new TurnwiseError('invalid-file', `${file} is not valid JSON: ${(e as Error).message}`, { hint: 'the run directory is damaged: start a new run' });
  }
}
