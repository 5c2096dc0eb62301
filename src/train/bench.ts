// The training benchmarks. `bench rollout`: episodes per minute one at a time vs `concurrency`
// in flight with batched generation, on the same tasks, policy and seeds, with the timings that
// explain the ratio. `bench learn`: held-out resolved rate after the warm start and after N RL
// iterations with the grpo and turnwise estimators, identical seeds, tasks and budget.
// The summaries are pure functions over what the runs return (unit-tested); the rest drives
// real sandboxes and the ONNX policy.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { seedOf } from '../core/random';
import { TurnwiseError } from '../core/errors';
import type { MetricsRow, RunEvent } from '../core/events';
import { RunDir } from '../core/run';
import { mean } from '../core/stats';
import { Semaphore } from '../core/workers';
import type { Task, Trajectory } from '../core/schema';
import { cachedTurnFraction, ObservationCache } from '../agent/cache';
import { runRollouts, type EpisodeJob, type RolloutResult, type Span } from '../agent/scheduler';
import { poolProvider } from '../agent/docker';
import { CHECKPOINT_FILES, loadCheckpoint, saveCheckpoint } from '../policy/checkpoint';
import type { SandboxPool } from '../sandbox';
import { synthesizeMutationTasks } from '../tasks/synth';
import { readTaskFile, writeTaskFile } from '../tasks/taskfile';
import { assertWorkspaceHoldsTasks } from '../tasks/origin';
import { detectRunner } from '../tasks/runners';
import { commandSlotCount, connectRunPool, resolveTrainConfig, TRAIN_DEFAULTS, type TrainConfig, DEMO_SETTINGS } from './config';
import { openRig } from './rig';
import { trainRun } from './run';
import { pairedChange, sumPaired, type PairedChange } from './compare';
import { meanPassAtKT, sampledPassAtKT, type PassAtKT } from './pass-at-k';

const round = (x: number, digits = 3) => (Number.isFinite(x) ? Math.round(x * 10 ** digits) / 10 ** digits : null);

/**
 * Copies a checkpoint to `dest` through load + save, so a checkpoint that another process
 * rewrites meanwhile (the embedded one is, by the warm start) is read whole or not at all.
 */
export async function snapshotCheckpoint(src: string, dest: string, o: { optimizer?: boolean } = {}): Promise<string> {
  let last: unknown;
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      const ck = loadCheckpoint(src, { optimizer: o.optimizer ?? false });
      saveCheckpoint(dest, o.optimizer ? ck : { ...ck, optimizer: undefined });
      // Files beside the weights travel too (warmstart.json names the tasks the warm start was
      // shown, which a run must never hold out).
      for (const f of fs.readdirSync(src)) {
        const file = path.join(src, f);
        if (!CHECKPOINT_FILES.includes(f) && fs.statSync(file).isFile()) fs.copyFileSync(file, path.join(dest, f));
      }
      return dest;
    } catch (e) {
      last = e;
      await new Promise((r) => setTimeout(r, 1000 * (attempt + 1)));
    }
  }
  throw last instanceof Error ? last : new TurnwiseError('invalid-file', `cannot copy the checkpoint ${src}`);
}

/** Seconds during which a generate span and at least one exec span were running at once. */
export function overlapSeconds(spans: readonly Span[]): number {
  const execs = spans.filter((s) => s.kind === 'exec').sort((a, b) => a.start - b.start);
  // Union of exec intervals, then intersect with each generate span.
  const merged: [number, number][] = [];
  for (const s of execs) {
    const last = merged[merged.length - 1];
    if (last && s.start <= last[1]) last[1] = Math.max(last[1], s.end);
    else merged.push([s.start, s.end]);
  }
  let ms = 0;
  for (const g of spans) {
    if (g.kind !== 'generate') continue;
    for (const [a, b] of merged) ms += Math.max(0, Math.min(b, g.end) - Math.max(a, g.start));
  }
  return ms / 1000;
}

/** What one pass measured: the scheduler's timings and the model's token counters. */
export interface PassInput {
  concurrency: number;
  result: RolloutResult;
  /** Batch sizes the model saw (from the spans). */
  batches: number[];
  sampledTokens: number;
  promptTokens: number;
  overlapS: number;
  loadAvg1m: number;
  /** Machine-wide busy CPU seconds during the pass (all processes: the policy, Docker, the containers); null where unknown. */
  cpuBusyS?: number | null;
}

export interface RolloutPassStats {
  concurrency: number;
  episodes: number;
  failed: number;
  /** Why the first failed episode failed (absent when none did). */
  first_failure?: string;
  turns: number;
  wall_s: number | null;
  episodes_per_min: number | null;
  /** Time the model was generating (batches one after another: wall time, not summed). */
  generation_s: number | null;
  /** Summed over episodes: sandbox start, task setup, commands and edit tracking. */
  sandbox_s: number | null;
  /** Summed over episodes: the test run that scores each episode. */
  reward_s: number | null;
  /** Generation seconds during which some sandbox command ran too. */
  overlap_s: number | null;
  generation_frac_of_wall: number | null;
  batches: number;
  mean_batch: number | null;
  sampled_tokens: number;
  prompt_tokens: number;
  /** Sampled tokens per generation second. */
  tokens_per_s: number | null;
  load_avg_1m: number | null;
  /** Machine-wide busy CPU seconds during the pass (policy, Docker and containers together). */
  cpu_busy_s: number | null;
  /** cpu_busy_s / wall_s: cores kept busy on average. A pass cannot run faster than cpu_busy_s / cpus. */
  cores_busy: number | null;
  /** Summed over requests: seconds an episode's generation request waited for its batch to be sent (the batch wait and the previous batch's run). */
  held_s: number | null;
  /** Fraction of the commands replayed from the pass's observation cache (agent/cache.ts). */
  cached_turns: number;
}

export function passStats(p: PassInput): RolloutPassStats {
  const r = p.result;
  const wallS = r.wallMs / 1000;
  const genS = r.generateMs / 1000;
  const firstFailure = r.trajectories.find((t) => t.failure)?.failure;
  return {
    concurrency: p.concurrency,
    episodes: r.trajectories.length,
    failed: r.trajectories.filter((t) => t.failure).length,
    ...(firstFailure ? { first_failure: firstFailure } : {}),
    turns: r.trajectories.reduce((a, t) => a + t.turns.length, 0),
    wall_s: round(wallS),
    episodes_per_min: round(wallS > 0 ? r.trajectories.length / (wallS / 60) : NaN),
    generation_s: round(genS),
    sandbox_s: round(r.sandboxMs / 1000),
    reward_s: round(r.rewardMs / 1000),
    overlap_s: round(p.overlapS),
    generation_frac_of_wall: round(wallS > 0 ? genS / wallS : NaN),
    batches: p.batches.length,
    mean_batch: round(mean(p.batches)),
    sampled_tokens: p.sampledTokens,
    prompt_tokens: p.promptTokens,
    tokens_per_s: round(genS > 0 ? p.sampledTokens / genS : NaN, 1),
    load_avg_1m: round(p.loadAvg1m, 2),
    cpu_busy_s: p.cpuBusyS == null ? null : round(p.cpuBusyS),
    cores_busy: p.cpuBusyS == null || !(wallS > 0) ? null : round(p.cpuBusyS / wallS, 2),
    held_s: round(r.heldMs / 1000),
    cached_turns: round(cachedTurnFraction(r.trajectories)) ?? 0,
  };
}

/**
 * Busy CPU seconds of the whole machine so far (Linux /proc/stat: everything but idle and
 * iowait), or null elsewhere. The difference over a pass says how much of the machine it used.
 */
export function machineCpuBusySeconds(statText?: string): number | null {
  let text = statText;
  if (text === undefined) {
    try {
      text = fs.readFileSync('/proc/stat', 'utf8');
    } catch {
      return null;
    }
  }
  const line = text.split('\n').find((l) => l.startsWith('cpu '));
  if (!line) return null;
  // user nice system idle iowait irq softirq steal (guest times are already inside user/nice).
  const f = line.trim().split(/\s+/).slice(1, 9).map(Number);
  if (f.length < 8 || f.some((x) => !Number.isFinite(x))) return null;
  const busy = f[0] + f[1] + f[2] + f[5] + f[6] + f[7];
  return busy / 100; // USER_HZ is 100 on Linux for /proc/stat
}

/**
 * Fraction of episodes whose actions are the same in both passes. Seeded sampling does not depend
 * on the batch, but ONNX Runtime rounds differently across batch shapes (the concurrent pass
 * batches by timing): log-probs differ in their last bits (logprobDrift), so a token drawn within
 * that much of a boundary, or a greedy near-tie, can flip now and then. Near 1, not always 1.
 */
export function sameActionsFraction(a: readonly Trajectory[], b: readonly Trajectory[]): number | null {
  const n = Math.min(a.length, b.length);
  if (n === 0) return null;
  let same = 0;
  for (let i = 0; i < n; i++) {
    const x = a[i].turns.map((t) => t.action);
    const y = b[i].turns.map((t) => t.action);
    if (x.length === y.length && x.every((s, k) => s === y[k])) same++;
  }
  return same / n;
}

/**
 * Largest |Δ log-prob| between the passes over the turns both sampled the same tokens for (the
 * rounding difference of the batch shapes), or null when no turn is comparable.
 */
export function logprobDrift(a: readonly Trajectory[], b: readonly Trajectory[]): number | null {
  let max: number | null = null;
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    for (let k = 0; k < Math.min(a[i].turns.length, b[i].turns.length); k++) {
      const x = a[i].turns[k];
      const y = b[i].turns[k];
      if (!x.tokenIds || !y.tokenIds || !x.logprobs || !y.logprobs || x.tokenIds.join() !== y.tokenIds.join()) continue;
      for (let j = 0; j < Math.min(x.logprobs.length, y.logprobs.length); j++) max = Math.max(max ?? 0, Math.abs(x.logprobs[j] - y.logprobs[j]));
    }
  }
  return max;
}

export interface RolloutBenchResult {
  episodes_per_min_sequential: number | null;
  episodes_per_min_concurrent: number | null;
  /** concurrent / sequential episodes per minute. */
  speedup: number | null;
  target_speedup: number;
  mean_batch: number | null;
  generation_s_sequential: number | null;
  generation_s_concurrent: number | null;
  sandbox_s_sequential: number | null;
  sandbox_s_concurrent: number | null;
  tokens_per_s_sequential: number | null;
  tokens_per_s_concurrent: number | null;
  /** Cores kept busy on average in each pass (machine-wide); see `speedup_cpu_bound`. */
  cores_busy_sequential: number | null;
  cores_busy_concurrent: number | null;
  /**
   * The speedup the machine's cores would allow if the concurrent pass needed the sequential
   * pass's CPU seconds and kept every core busy: cpus × sequential wall / sequential CPU seconds.
   * Batching generation lowers the CPU seconds and so can beat it; contention raises them.
   */
  speedup_cpu_bound: number | null;
  /** Fraction of episodes with identical actions in both passes (near 1: same seeds gave the same work; see sameActionsFraction). */
  same_actions: number | null;
  /** Largest |Δ log-prob| between the passes on turns with the same tokens: ONNX Runtime's rounding across batch shapes. */
  logprob_max_diff: number | null;
  tasks: number;
  episodes: number;
  max_turns: number;
  concurrency: number;
  /** Command slots the concurrent pass's episodes shared (TrainConfig.commandConcurrency); null: no limit. */
  command_slots: number | null;
  seed: number;
  model: string;
  workspace: string;
  cpus: number;
  setup_s: number | null;
  sequential: RolloutPassStats;
  concurrent: RolloutPassStats;
  /**
   * With several repeats: each repeat's figures in the order run. The fields above are those of
   * the repeat with the median speedup (the lower middle for an even count), not a mixture.
   */
  repeats?: RolloutRepeat[];
  speedup_min?: number | null;
  speedup_max?: number | null;
}

export interface RolloutRepeat {
  episodes_per_min_sequential: number | null;
  episodes_per_min_concurrent: number | null;
  speedup: number | null;
  cores_busy_sequential: number | null;
  cores_busy_concurrent: number | null;
}

export function rolloutSummary(
  seq: RolloutPassStats,
  conc: RolloutPassStats,
  ctx: { tasks: number; maxTurns: number; seed: number; model: string; workspace: string; setupS: number; sameActions: number | null; logprobMaxDiff?: number | null; cpus?: number; commandSlots?: number },
): RolloutBenchResult {
  const s = seq.episodes_per_min;
  const c = conc.episodes_per_min;
  return {
    episodes_per_min_sequential: s,
    episodes_per_min_concurrent: c,
    speedup: s && c !== null ? round(c / s) : null,
    target_speedup: 2.5,
    mean_batch: conc.mean_batch,
    generation_s_sequential: seq.generation_s,
    generation_s_concurrent: conc.generation_s,
    sandbox_s_sequential: seq.sandbox_s,
    sandbox_s_concurrent: conc.sandbox_s,
    tokens_per_s_sequential: seq.tokens_per_s,
    tokens_per_s_concurrent: conc.tokens_per_s,
    cores_busy_sequential: seq.cores_busy,
    cores_busy_concurrent: conc.cores_busy,
    speedup_cpu_bound: seq.cpu_busy_s && seq.wall_s ? round(((ctx.cpus ?? os.cpus().length) * seq.wall_s) / seq.cpu_busy_s) : null,
    same_actions: ctx.sameActions === null ? null : round(ctx.sameActions),
    logprob_max_diff: ctx.logprobMaxDiff ?? null,
    tasks: ctx.tasks,
    episodes: seq.episodes,
    max_turns: ctx.maxTurns,
    concurrency: conc.concurrency,
    command_slots: ctx.commandSlots ?? null,
    seed: ctx.seed,
    model: ctx.model,
    workspace: ctx.workspace,
    cpus: ctx.cpus ?? os.cpus().length,
    setup_s: round(ctx.setupS),
    sequential: seq,
    concurrent: conc,
  };
}

/**
 * Several (sequential, concurrent) pairs of one benchmark: the summary of the pair with the
 * median speedup, with every pair's figures and the range beside it. Pass timings on a busy
 * 2-core machine swing by a fifth between identical runs; one pair alone can mislead.
 */
export function repeatedRolloutSummary(pairs: readonly { seq: RolloutPassStats; conc: RolloutPassStats }[], ctx: Parameters<typeof rolloutSummary>[2]): RolloutBenchResult {
  if (pairs.length === 0) throw new TurnwiseError('internal', 'repeatedRolloutSummary needs at least one pair of passes');
  const all = pairs.map((p) => rolloutSummary(p.seq, p.conc, ctx));
  if (all.length === 1) return all[0];
  // Nulls (a pass that produced nothing) sort first: the median is never flattered by them.
  const order = all.map((r, i) => i).sort((a, b) => (all[a].speedup ?? -Infinity) - (all[b].speedup ?? -Infinity));
  const median = all[order[Math.floor((order.length - 1) / 2)]];
  const speedups = all.map((r) => r.speedup).filter((x): x is number => x !== null);
  return {
    ...median,
    repeats: all.map((r) => ({
      episodes_per_min_sequential: r.episodes_per_min_sequential,
      episodes_per_min_concurrent: r.episodes_per_min_concurrent,
      speedup: r.speedup,
      cores_busy_sequential: r.cores_busy_sequential,
      cores_busy_concurrent: r.cores_busy_concurrent,
    })),
    speedup_min: speedups.length ? Math.min(...speedups) : null,
    speedup_max: speedups.length ? Math.max(...speedups) : null,
  };
}

export interface RolloutBenchOptions {
  workspace: string;
  /** Checkpoint folder (copied to a temp folder first). */
  model: string;
  /** A task file; else `tasks` mutation tasks are synthesized from the workspace with `seed`. */
  tasksFile?: string;
  tasks?: number;
  /** Episodes per pass (default: one per task). */
  episodes?: number;
  concurrency?: number;
  maxTurns?: number;
  seed?: number;
  /** (sequential, concurrent) pairs to run; the result is the median one's (default 1). */
  repeats?: number;
  config?: Partial<Pick<TrainConfig, 'executionProvider' | 'maxActionTokens' | 'temperature' | 'topP' | 'commandTimeoutMs' | 'dockerHost' | 'batchWaitMs' | 'cacheObservations' | 'commandConcurrency'>>;
  onProgress?: (message: string) => void;
  signal?: AbortSignal;
}

/** `turnwise bench rollout`: the same episodes one at a time, then `concurrency` in flight. */
export async function benchRollout(o: RolloutBenchOptions): Promise<RolloutBenchResult> {
  const t0 = Date.now();
  const log = o.onProgress ?? (() => undefined);
  const concurrency = o.concurrency ?? 8;
  const maxTurns = o.maxTurns ?? 4;
  const seed = o.seed ?? 0;
  const c = { ...TRAIN_DEFAULTS, ...o.config, concurrency };
  // The command slots a run with these settings would have (one pass at a time holds them).
  const slots = commandSlotCount(c);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'turnwise-bench-rollout-'));
  const runId = `bench-rollout-${process.pid}`;
  let pool: SandboxPool | undefined;
  let rig: Awaited<ReturnType<typeof openRig>> | undefined;
  try {
    log(`copying the checkpoint ${o.model}`);
    const model = await snapshotCheckpoint(o.model, path.join(tmp, 'model'));
    pool = await connectRunPool(runId, c);
    let tasks: Task[];
    if (o.tasksFile) {
      tasks = readTaskFile(o.tasksFile).slice(0, o.tasks ?? Infinity);
      assertWorkspaceHoldsTasks(tasks, o.workspace, o.tasksFile);
    }
    else {
      log(`synthesizing ${o.tasks ?? 8} tasks from ${o.workspace}`);
      tasks = (await synthesizeMutationTasks({ workspace: o.workspace, pool, seed, max: o.tasks ?? 8 })).tasks;
    }
    if (tasks.length === 0) throw new TurnwiseError('invalid-input', `no task for the rollout benchmark in ${o.workspace}`, { hint: 'use a workspace whose tests exercise its code, or pass --tasks-file' });
    const runner = detectRunner(o.workspace);
    // No rig-wide cache: each pass below gets its own.
    rig = await openRig({ runId, workspace: o.workspace, language: runner.language, checkpoint: model, config: { ...c, cacheObservations: false }, pool, onLog: (m) => log(`warning: ${m}`) });
    const episodes = o.episodes ?? tasks.length;
    const jobsFor = (pass: string, n = episodes): EpisodeJob[] =>
      Array.from({ length: n }, (_, i) => {
        const task = tasks[i % tasks.length];
        return { task, episodeId: `bench-${pass}-${i}`, groupId: `bench-${task.id}`, seed: seedOf(seed, i), split: 'train' };
      });
    const pass = async (name: string, conc: number, jobs: EpisodeJob[], turns: number): Promise<{ stats: RolloutPassStats; result: RolloutResult }> => {
      // Both passes start with a full warm pool (its size = episodes in flight), so neither pays cold starts the other does not.
      pool!.warm(rig!.snapshot, conc);
      await pool!.whenWarm(rig!.snapshot, 120_000);
      const spans: Span[] = [];
      const s0 = rig!.model.sampledTokens;
      const p0 = rig!.model.promptTokens;
      const cpu0 = machineCpuBusySeconds();
      let done = 0;
      const result = await runRollouts(jobs, {
        provider: poolProvider(rig!.pool, rig!.snapshot),
        model: rig!.model,
        checkpoint: model,
        originals: rig!.originals,
        concurrency: conc,
        maxBatch: conc,
        batchWaitMs: c.batchWaitMs,
        maxTurns: turns,
        commandTimeoutMs: c.commandTimeoutMs,
        rewardWeights: c.reward,
        signal: o.signal,
        spans,
        // Its own cache per pass: no pass replays what an earlier one ran.
        ...(c.cacheObservations ? { observationCache: new ObservationCache() } : {}),
        ...(slots !== undefined ? { commandSlots: new Semaphore(slots) } : {}),
        onEpisode: () => log(`  ${name}: ${++done}/${jobs.length} episodes`),
      });
      const stats = passStats({
        concurrency: conc,
        result,
        batches: spans.filter((s) => s.kind === 'generate').map((s) => s.size ?? 1),
        sampledTokens: rig!.model.sampledTokens - s0,
        promptTokens: rig!.model.promptTokens - p0,
        overlapS: overlapSeconds(spans),
        loadAvg1m: os.loadavg()[0],
        cpuBusyS: cpu0 === null ? null : (machineCpuBusySeconds() ?? cpu0) - cpu0,
      });
      return { stats, result };
    };
    // Warm-up (untimed): builds the policy's sessions for batch 1 and batch `concurrency`.
    log('warm-up');
    await pass('warm-up', concurrency, jobsFor('warmup', Math.min(concurrency, episodes)), 1);
    const repeats = o.repeats ?? 1;
    const pairs: { seq: RolloutPassStats; conc: RolloutPassStats }[] = [];
    let sameActions: number | null = null;
    let logprobMaxDiff: number | null = null;
    let timedMs = 0;
    for (let k = 0; k < repeats; k++) {
      const of = repeats > 1 ? ` (repeat ${k + 1}/${repeats})` : '';
      log(`sequential: ${episodes} episodes, one at a time${of}`);
      const seq = await pass('sequential', 1, jobsFor('seq'), maxTurns);
      log(`concurrent: ${episodes} episodes, ${concurrency} in flight${of}`);
      const conc = await pass('concurrent', concurrency, jobsFor('conc'), maxTurns);
      pairs.push({ seq: seq.stats, conc: conc.stats });
      timedMs += seq.result.wallMs + conc.result.wallMs;
      // The least agreement over the repeats: every pass should do the same work.
      const same = sameActionsFraction(seq.result.trajectories, conc.result.trajectories);
      sameActions = k === 0 || same === null || sameActions === null ? same : Math.min(sameActions, same);
      const drift = logprobDrift(seq.result.trajectories, conc.result.trajectories);
      if (drift !== null) logprobMaxDiff = Math.max(logprobMaxDiff ?? 0, drift);
    }
    pool.warm(rig.snapshot, 0);
    return repeatedRolloutSummary(pairs, {
      tasks: tasks.length,
      maxTurns,
      seed,
      model: o.model,
      workspace: o.workspace,
      setupS: (Date.now() - t0 - timedMs) / 1000,
      sameActions,
      logprobMaxDiff,
      ...(slots !== undefined ? { commandSlots: slots } : {}),
    });
  } finally {
    await rig?.close().catch(() => undefined);
    await pool?.close().catch(() => undefined);
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/** The learn benchmark's training settings (the demo's, with evaluation every iteration). */
export const LEARN_DEFAULTS: Partial<TrainConfig> = { ...DEMO_SETTINGS, iterations: 4, evalEvery: 1 };

export const LEARN_ESTIMATORS = ['grpo', 'turnwise'] as const;
export type LearnEstimator = (typeof LEARN_ESTIMATORS)[number];

const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);

/** Per-iteration values of one metric, indexed by iteration (null where the row lacks it). */
export function metricCurve(metrics: readonly MetricsRow[], key: string, iterations: number): (number | null)[] {
  const byIt = new Map(metrics.map((m) => [m.iteration, m]));
  return Array.from({ length: iterations + 1 }, (_, i) => num(byIt.get(i)?.[key]));
}

/** Mean of several curves point by point (nulls left out; null where all are null). */
export function meanCurve(curves: readonly (number | null)[][]): (number | null)[] {
  const n = Math.max(0, ...curves.map((c) => c.length));
  return Array.from({ length: n }, (_, i) => {
    const xs = curves.map((c) => c[i]).filter((x): x is number => x !== null && x !== undefined);
    return xs.length ? round(mean(xs), 4) : null;
  });
}

/** First iteration ≥ 1 whose value is above the iteration-0 value (null: never). */
export function firstImprovement(curve: readonly (number | null)[]): number | null {
  const base = curve[0];
  if (base === null || base === undefined) return null;
  for (let i = 1; i < curve.length; i++) if (curve[i] !== null && curve[i]! > base + 1e-9) return i;
  return null;
}

/** A run's first and last held-out evaluations, paired (see pairedChange). */
export function runPairedChange(runDir: string, metrics: readonly MetricsRow[]): { greedy: PairedChange; sampled: PairedChange; last_eval: number } | undefined {
  const evals = metrics.filter((m) => typeof m['heldout/resolved'] === 'number').map((m) => m.iteration);
  if (evals.length < 2) return undefined;
  const run = RunDir.open(runDir);
  const first = run.readTrajectories(evals[0], 'heldout');
  const lastIt = evals[evals.length - 1];
  const last = run.readTrajectories(lastIt, 'heldout');
  return { greedy: pairedChange(first, last, 'greedy'), sampled: pairedChange(first, last, 'sampled'), last_eval: lastIt };
}

export interface LearnRun {
  seed: number;
  estimator: LearnEstimator;
  runDir: string;
  metrics: MetricsRow[];
  wallS: number;
  /** First vs last held-out evaluation, paired (absent when the run evaluated fewer than twice). */
  paired?: { greedy: PairedChange; sampled: PairedChange };
  /** PASS@(k,T) of the sampled held-out episodes at the first and the last evaluation (absent without samples). */
  passAtKT?: { first: PassAtKT | null; last: PassAtKT | null };
}

/** PASS@(k,T) of a run's first and last held-out evaluations (their sampled episodes); undefined when it sampled none. */
export function runPassAtKT(runDir: string, metrics: readonly MetricsRow[]): { first: PassAtKT | null; last: PassAtKT | null } | undefined {
  const evals = metrics.filter((m) => typeof m['heldout/resolved'] === 'number').map((m) => m.iteration);
  if (evals.length === 0) return undefined;
  const run = RunDir.open(runDir);
  const first = sampledPassAtKT(run.readTrajectories(evals[0], 'heldout'));
  const last = sampledPassAtKT(run.readTrajectories(evals[evals.length - 1], 'heldout'));
  return first || last ? { first, last } : undefined;
}

export interface LearnBenchResult {
  resolved_warmstart: number | null;
  resolved_grpo: number | null;
  resolved_turnwise: number | null;
  heldout_tasks: number | null;
  iterations: number;
  seeds: number[];
  /** Held-out resolved rate per iteration (index 0 = the warm start), mean over seeds. */
  curve_grpo: (number | null)[];
  curve_turnwise: (number | null)[];
  /** Mean train-episode reward per iteration (index 0: no training, null). */
  reward_curve_grpo: (number | null)[];
  reward_curve_turnwise: (number | null)[];
  /**
   * Held-out resolved rate of sampled episodes (config evalSamples per task, the same seeds at
   * every iteration), mean over seeds; all null when evalSamples is 0.
   */
  sampled_curve_grpo: (number | null)[];
  sampled_curve_turnwise: (number | null)[];
  /** Mean held-out episode reward per iteration. */
  heldout_reward_curve_grpo: (number | null)[];
  heldout_reward_curve_turnwise: (number | null)[];
  /** First iteration whose held-out resolved rate beats the warm start (null: none did). */
  first_improvement_grpo: number | null;
  first_improvement_turnwise: number | null;
  /**
   * Held-out episodes resolved at the last evaluation but not the first (gained) and the reverse
   * (lost), paired by task and seed, summed over seeds, with the sign test's p-value: the direct
   * answer to "did RL improve on the warm start", far less noisy than a difference of two rates.
   */
  paired_grpo: { greedy: PairedChange; sampled: PairedChange } | null;
  paired_turnwise: { greedy: PairedChange; sampled: PairedChange } | null;
  /**
   * PASS@(k,T) of the sampled held-out episodes (config evalSamples per task): the probability
   * that one of k episodes resolves a task within T actions, keyed by k then T, mean over seeds;
   * at the warm start (every run's first evaluation) and after each estimator's last iteration.
   * null when evalSamples is 0.
   */
  pass_at_k_t: { warmstart: PassAtKT | null; grpo: PassAtKT | null; turnwise: PassAtKT | null } | null;
  /** Both estimators' runs saw the same warm-start evaluation (same tasks, seeds and policy). */
  warmstart_agrees: boolean;
  runs: { seed: number; estimator: LearnEstimator; run_dir: string; wall_s: number | null; curve: (number | null)[]; pass_at_k_t?: { first: PassAtKT | null; last: PassAtKT | null } }[];
  runs_root: string;
  config: Record<string, unknown>;
}

/** Assembles the learn benchmark's result from its finished runs (pure). */
export function learnSummary(runs: readonly LearnRun[], ctx: { iterations: number; runsRoot: string; config: Record<string, unknown> }): LearnBenchResult {
  const seeds = [...new Set(runs.map((r) => r.seed))];
  const of = (e: LearnEstimator) => runs.filter((r) => r.estimator === e);
  const curves = (e: LearnEstimator, key: string) => meanCurve(of(e).map((r) => metricCurve(r.metrics, key, ctx.iterations)));
  const curveG = curves('grpo', 'heldout/resolved');
  const curveT = curves('turnwise', 'heldout/resolved');
  const warm = seeds.map((s) => runs.filter((r) => r.seed === s).map((r) => metricCurve(r.metrics, 'heldout/resolved', 0)[0]));
  const heldout = runs.map((r) => num(r.metrics.find((m) => m.iteration === 0)?.['heldout/episodes']));
  const paired = (e: LearnEstimator) => {
    const ps = of(e).flatMap((r) => (r.paired ? [r.paired] : []));
    return ps.length ? { greedy: sumPaired(ps.map((p) => p.greedy)), sampled: sumPaired(ps.map((p) => p.sampled)) } : null;
  };
  const passKT = {
    warmstart: meanPassAtKT(runs.map((r) => r.passAtKT?.first)),
    grpo: meanPassAtKT(of('grpo').map((r) => r.passAtKT?.last)),
    turnwise: meanPassAtKT(of('turnwise').map((r) => r.passAtKT?.last)),
  };
  return {
    resolved_warmstart: curveG[0] ?? curveT[0] ?? null,
    resolved_grpo: curveG[ctx.iterations] ?? null,
    resolved_turnwise: curveT[ctx.iterations] ?? null,
    heldout_tasks: heldout.find((h) => h !== null) ?? null,
    iterations: ctx.iterations,
    seeds,
    curve_grpo: curveG,
    curve_turnwise: curveT,
    reward_curve_grpo: curves('grpo', 'reward/mean'),
    reward_curve_turnwise: curves('turnwise', 'reward/mean'),
    sampled_curve_grpo: curves('grpo', 'heldout/sampled/resolved'),
    sampled_curve_turnwise: curves('turnwise', 'heldout/sampled/resolved'),
    heldout_reward_curve_grpo: curves('grpo', 'heldout/reward/mean'),
    heldout_reward_curve_turnwise: curves('turnwise', 'heldout/reward/mean'),
    first_improvement_grpo: firstImprovement(curveG),
    first_improvement_turnwise: firstImprovement(curveT),
    paired_grpo: paired('grpo'),
    paired_turnwise: paired('turnwise'),
    pass_at_k_t: passKT.warmstart || passKT.grpo || passKT.turnwise ? passKT : null,
    warmstart_agrees: warm.every((w) => w.every((x) => x === w[0])),
    runs: runs.map((r) => ({ seed: r.seed, estimator: r.estimator, run_dir: r.runDir, wall_s: round(r.wallS, 1), curve: metricCurve(r.metrics, 'heldout/resolved', ctx.iterations), ...(r.passAtKT ? { pass_at_k_t: r.passAtKT } : {}) })),
    runs_root: ctx.runsRoot,
    config: ctx.config,
  };
}

export interface LearnBenchOptions {
  workspace: string;
  /** Starting checkpoint (copied, optimizer state included, to the runs folder first). */
  model: string;
  iterations: number;
  /** Seeds 0 … seeds-1; each seed gets its own tasks and both estimators. */
  seeds?: number;
  /** Where the runs go (default: a new temp folder, kept). */
  runsRoot?: string;
  /** Training settings over LEARN_DEFAULTS (identical for both estimators). */
  config?: Partial<TrainConfig>;
  onEvent?: (e: RunEvent, run: { seed: number; estimator: LearnEstimator }) => void;
  onProgress?: (message: string) => void;
  signal?: AbortSignal;
}

/**
 * Config fields the benchmark sets itself (each estimator, seed, task file and starting model in
 * turn); given in its settings they would be overwritten, so they are refused instead.
 */
export const LEARN_CONTROLLED_FIELDS = ['workspace', 'model', 'iterations', 'estimator', 'seed', 'taskSeed', 'taskSource', 'tasksFile'] as const;

/** `turnwise bench learn`: per seed, the same tasks trained once with each estimator. */
export async function benchLearn(o: LearnBenchOptions): Promise<LearnBenchResult> {
  const controlled = LEARN_CONTROLLED_FIELDS.filter((k) => o.config?.[k] !== undefined);
  if (controlled.length) {
    throw new TurnwiseError('invalid-input', `the learn benchmark sets ${controlled.map((k) => JSON.stringify(k)).join(', ')} itself; its settings may not`, {
      hint: 'remove those fields from the benchmark config (use --workspace, --model, --iterations and --seeds for the ones it takes as flags)',
    });
  }
  const base = { ...LEARN_DEFAULTS, ...o.config, iterations: o.iterations, workspace: path.resolve(o.workspace) };
  // Every field checked now, not after the checkpoint copy and minutes of task synthesis.
  resolveTrainConfig({ ...base, model: o.model, taskSource: 'file', tasksFile: 'tasks.jsonl', estimator: LEARN_ESTIMATORS[0] }, 'the learn benchmark settings');
  const log = o.onProgress ?? (() => undefined);
  const runsRoot = path.resolve(o.runsRoot ?? fs.mkdtempSync(path.join(os.tmpdir(), 'turnwise-bench-learn-')));
  fs.mkdirSync(runsRoot, { recursive: true });
  log(`copying the checkpoint ${o.model}`);
  const model = await snapshotCheckpoint(o.model, path.join(runsRoot, 'start-model'), { optimizer: true });
  const runs: LearnRun[] = [];
  for (let seed = 0; seed < (o.seeds ?? 1); seed++) {
    // One task file per seed, shared by both estimators: identical tasks and held-out split.
    const tasksFile = path.join(runsRoot, `tasks-seed${seed}.jsonl`);
    if (!fs.existsSync(tasksFile)) {
      log(`seed ${seed}: synthesizing up to ${base.maxTasks} tasks`);
      const pool = await connectRunPool(`bench-learn-${process.pid}`, { ...TRAIN_DEFAULTS, ...base });
      try {
        const r = await synthesizeMutationTasks({ workspace: base.workspace, pool, seed, max: base.maxTasks });
        if (r.tasks.length < 2) throw new TurnwiseError('invalid-input', `only ${r.tasks.length} task(s) survived validation in ${base.workspace}; the benchmark needs train and held-out tasks`, { hint: 'use a workspace with more tested code' });
        writeTaskFile(tasksFile, r.tasks);
      } finally {
        await pool.close();
      }
    }
    for (const estimator of LEARN_ESTIMATORS) {
      if (o.signal?.aborted) break;
      // Each seed its own tasks and split (taskSeed = seed); both estimators the same ones.
      const config = resolveTrainConfig({ ...base, model, taskSource: 'file', tasksFile, seed, taskSeed: seed, estimator }, 'the learn benchmark settings');
      log(`seed ${seed}: training with ${estimator} (${config.iterations} iterations)`);
      const t0 = Date.now();
      const r = await trainRun({ config, runsRoot, name: `bench-learn`, signal: o.signal, onEvent: (e) => o.onEvent?.(e, { seed, estimator }) });
      const change = runPairedChange(r.runDir, r.metrics);
      const passKT = runPassAtKT(r.runDir, r.metrics);
      runs.push({ seed, estimator, runDir: r.runDir, metrics: r.metrics, wallS: (Date.now() - t0) / 1000, ...(change ? { paired: { greedy: change.greedy, sampled: change.sampled } } : {}), ...(passKT ? { passAtKT: passKT } : {}) });
      if (r.state === 'stopped') break;
    }
  }
  const { workspace, ...rest } = base;
  return learnSummary(runs, { iterations: o.iterations, runsRoot, config: { workspace, model: o.model, ...rest } });
}

/** Why a rollout benchmark's figures measure nothing (a pass whose every episode failed), or undefined. */
export function allEpisodesFailed(r: { sequential: RolloutPassStats; concurrent: RolloutPassStats }): string | undefined {
  for (const [name, p] of [['sequential', r.sequential], ['concurrent', r.concurrent]] as const) {
    if (p.episodes > 0 && p.failed === p.episodes) return `every episode of the ${name} pass failed (the first: ${p.first_failure ?? 'no reason recorded'}); the figures measure nothing`;
  }
  return undefined;
}
