// What the Runs view and the panels show about the run directories under .turnwise/runs:
// runs, their iterations with metrics, the tasks of an iteration and their trajectories.
// Reads only what a level needs (status.json and metrics.jsonl for a run; one scan of a
// trajectories file for an iteration) and caches scans by file size and mtime.
// Plain Node (no vscode): unit-tested in test/unit/extension/.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { MetricsRow } from '../../core/events';
import { RUNS_DIR, RunDir, runDisplayState, trajectoriesFile, type RunState, type RunStatus } from '../../core/run';
import { scanTrajectoryFile, readTrajectoryAt, type ScanResult, type TrajectorySummary } from './trajScan';
import type { Trajectory } from '../../core/schema';
import { runModelOf, type RunModel } from './runModel';
import { pct } from './turnView';

export { RUNS_DIR };

/** 'interrupted': status.json says running but its process is gone (a crash; resumable). */
export type RunDisplayState = RunState | 'interrupted' | 'unknown';

export interface RunSummary {
  runId: string;
  dir: string;
  state: RunDisplayState;
  estimator?: string;
  /** Planned iterations (status.json). */
  iterations?: number;
  lastCompleteIteration?: number;
  last?: MetricsRow;
  error?: RunStatus['error'];
  /** The model the run trained and its LoRA adapter (config.json); undefined when the config names none. */
  model?: RunModel;
}

export interface IterationSummary {
  iteration: number;
  metrics?: MetricsRow;
  trainFile?: string;
  heldoutFile?: string;
}

export interface TaskSummary {
  taskId: string;
  split: 'train' | 'heldout';
  episodes: number;
  resolved: number;
  meanReward: number | null;
  meanPassRate: number | null;
  trajectories: TrajectorySummary[];
}

export function runsRoot(workspace: string): string {
  return path.join(workspace, RUNS_DIR);
}

/** `<name>__<estimator>__<seed>__<time>` (core/run.ts newRunId). */
export function estimatorFromRunId(runId: string): string | undefined {
  const parts = runId.split('__');
  return parts.length >= 4 ? parts[parts.length - 3] : undefined;
}

function readJson<T>(file: string): T | undefined {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8')) as T;
  } catch {
    return undefined;
  }
}

export function readMetrics(dir: string): MetricsRow[] {
  let text: string;
  try {
    text = fs.readFileSync(path.join(dir, 'metrics.jsonl'), 'utf8');
  } catch {
    return [];
  }
  const rows: MetricsRow[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    try {
      const r = JSON.parse(line) as MetricsRow;
      if (Number.isInteger(r.iteration)) rows.push(r);
    } catch {
      // a half-written line is skipped; the next write replaces the file atomically
    }
  }
  return rows;
}

export function summarizeRun(dir: string): RunSummary {
  const runId = path.basename(dir);
  const status = readJson<RunStatus>(path.join(dir, 'status.json'));
  const config = readJson<Record<string, unknown>>(path.join(dir, 'config.json'));
  const metrics = readMetrics(dir);
  // One rule for every reader: running with its process gone (on this host) is interrupted.
  const state: RunDisplayState = runDisplayState(status);
  const cfgEstimator = config && typeof config.estimator === 'string' ? config.estimator : undefined;
  return {
    runId,
    dir,
    state,
    estimator: cfgEstimator ?? estimatorFromRunId(runId),
    iterations: status?.iterations,
    lastCompleteIteration: status?.lastCompleteIteration,
    last: metrics[metrics.length - 1],
    error: status?.error,
    model: runModelOf(dir, config),
  };
}

/** When a run started, from the timestamp its id ends with (`…__20261205-225857`, UTC, maybe `-2`); undefined for an id without one. */
export function runStartedAt(runId: string): Date | undefined {
  const m = /__(\d{4})(\d{2})(\d{2})-(\d{2})(\d{2})(\d{2})(?:-\d+)?$/.exec(runId);
  if (!m) return undefined;
  const [y, mo, d, h, mi, se] = m.slice(1).map(Number);
  return new Date(Date.UTC(y, mo - 1, d, h, mi, se));
}

/**
 * A run's row in the Runs view, by what tells runs apart: the label its start time (local),
 * estimator and model; the description its state, progress, latest held-out resolved rate (the
 * train pass rate before any held-out evaluation) and its id.
 */
export function runRow(r: RunSummary): { label: string; description: string } {
  const start = runStartedAt(r.runId);
  const two = (n: number) => String(n).padStart(2, '0');
  const when = start
    ? `${start.getFullYear()}-${two(start.getMonth() + 1)}-${two(start.getDate())} ${two(start.getHours())}:${two(start.getMinutes())}`
    : undefined;
  const label = when ? [when, r.estimator, r.model?.label].filter(Boolean).join(' · ') : r.runId;
  const num = (x: unknown) => (typeof x === 'number' && Number.isFinite(x) ? x : undefined);
  const done = r.lastCompleteIteration !== undefined && r.lastCompleteIteration >= 0 ? r.lastCompleteIteration : undefined;
  const heldout = num(r.last?.['heldout/resolved']);
  const pass = num(r.last?.['tests/pass_rate']);
  const rate = heldout !== undefined ? `held-out ${pct(heldout)}` : pass !== undefined ? `pass ${pct(pass)}` : undefined;
  const description = [r.state, done !== undefined ? `${done}/${r.iterations ?? '?'} it` : undefined, rate, when ? r.runId : undefined]
    .filter(Boolean)
    .join(' · ');
  return { label, description };
}

/** Runs under `root`, newest first. */
export function listRuns(root: string): RunSummary[] {
  return RunDir.list(root).map((id) => summarizeRun(path.join(root, id)));
}

/** Iterations that have a folder or a metrics line, in order, each with its metrics row. */
export function listIterations(dir: string): IterationSummary[] {
  const byIter = new Map<number, IterationSummary>();
  const get = (n: number) => {
    let it = byIter.get(n);
    if (!it) byIter.set(n, (it = { iteration: n }));
    return it;
  };
  for (const row of readMetrics(dir)) get(row.iteration).metrics = row;
  let names: string[] = [];
  try {
    names = fs.readdirSync(path.join(dir, 'iterations'));
  } catch {
    // no iteration written yet
  }
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    const it = get(Number(name));
    const train = trajectoriesFile(path.join(dir, 'iterations', name), 'train');
    const heldout = trajectoriesFile(path.join(dir, 'iterations', name), 'heldout');
    if (fs.existsSync(train)) it.trainFile = train;
    if (fs.existsSync(heldout)) it.heldoutFile = heldout;
  }
  return [...byIter.values()].sort((a, b) => a.iteration - b.iteration);
}

/** Scans cached by path, size and mtime: a file being appended to is rescanned, others are not. */
export class TrajectoryScanCache {
  private readonly cache = new Map<string, { size: number; mtimeMs: number; result: Promise<ScanResult> }>();

  async scan(file: string): Promise<ScanResult> {
    let st: fs.Stats;
    try {
      st = await fs.promises.stat(file);
    } catch {
      return { summaries: [], badLines: [], bytes: 0 };
    }
    const hit = this.cache.get(file);
    if (hit && hit.size === st.size && hit.mtimeMs === st.mtimeMs) return hit.result;
    const result = scanTrajectoryFile(file);
    this.cache.set(file, { size: st.size, mtimeMs: st.mtimeMs, result });
    result.catch(() => this.cache.delete(file));
    return result;
  }

  invalidate(prefix?: string): void {
    for (const k of [...this.cache.keys()]) if (!prefix || k.startsWith(prefix)) this.cache.delete(k);
  }
}

/** Groups summaries by task, in the order tasks first appear. */
export function groupByTask(summaries: readonly TrajectorySummary[], split: 'train' | 'heldout'): TaskSummary[] {
  const byTask = new Map<string, TrajectorySummary[]>();
  for (const s of summaries) {
    let list = byTask.get(s.taskId);
    if (!list) byTask.set(s.taskId, (list = []));
    list.push(s);
  }
  const out: TaskSummary[] = [];
  for (const [taskId, trajectories] of byTask) {
    // One pass, no intermediate arrays: this runs over every episode when an iteration opens.
    let resolved = 0;
    let rSum = 0;
    let rN = 0;
    let pSum = 0;
    let pN = 0;
    for (const t of trajectories) {
      if (t.resolved) resolved++;
      if (t.reward !== null) {
        rSum += t.reward;
        rN++;
      }
      if (t.passRate !== null) {
        pSum += t.passRate;
        pN++;
      }
    }
    out.push({
      taskId,
      split,
      episodes: trajectories.length,
      resolved,
      meanReward: rN ? rSum / rN : null,
      meanPassRate: pN ? pSum / pN : null,
      trajectories,
    });
  }
  return out;
}

/** Where a trajectory lives: enough to read it again, and to name it in a URI. */
export interface TrajectoryRef {
  runDir: string;
  iteration: number;
  split: 'train' | 'heldout';
  trajId: string;
  offset: number;
  length: number;
}

export function trajectoryFile(ref: Pick<TrajectoryRef, 'runDir' | 'iteration' | 'split'>): string {
  return trajectoriesFile(path.join(ref.runDir, 'iterations', String(ref.iteration)), ref.split);
}

/** Reads a referenced trajectory; checks the line still holds it (a file rewritten since is rescanned). */
export async function loadTrajectory(ref: TrajectoryRef, cache?: TrajectoryScanCache): Promise<Trajectory> {
  const file = trajectoryFile(ref);
  try {
    const t = await readTrajectoryAt(file, ref.offset, ref.length);
    if (t.trajId === ref.trajId) return t;
  } catch {
    // fall through to a rescan
  }
  const scan = await (cache ?? new TrajectoryScanCache()).scan(file);
  const s = scan.summaries.find((x) => x.trajId === ref.trajId);
  if (!s) throw new Error(`trajectory ${ref.trajId} is not in ${file} any more`);
  return readTrajectoryAt(file, s.offset, s.length);
}
