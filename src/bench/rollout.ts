// `turnwise bench rollout`: episodes per minute one at a time vs `concurrency` in flight with
// batched generation, on the same tasks, policy and seeds, with the timings that explain the
// ratio. The summaries are pure functions over what the passes return (unit-tested); the rest
// drives real sandboxes and the ONNX policy.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { machineCpuBusySeconds } from '../core/cpu';
import { seedOf } from '../core/random';
import { TurnwiseError } from '../core/errors';
import { mean } from '../core/stats';
import { Semaphore } from '../core/workers';
import type { Task, Trajectory } from '../core/schema';
import { cachedTurnFraction, ObservationCache } from '../agent/cache';
import { runRollouts, type EpisodeJob, type RolloutResult, type Span } from '../agent/scheduler';
import { poolProvider } from '../agent/docker';
import { snapshotCheckpoint } from '../policy/files/checkpoint';
import type { SandboxPool } from '../sandbox';
import { synthesizeMutationTasks } from '../tasks/synth';
import { readTaskFile } from '../tasks/taskfile';
import { assertWorkspaceHoldsTasks } from '../tasks/origin';
import { detectRunner } from '../tasks/runners';
import { commandSlotCount, connectRunPool, TRAIN_DEFAULTS, type TrainConfig } from '../train/config';
import { openHarness } from '../train/harness';

const round = (x: number, digits = 3) => (Number.isFinite(x) ? Math.round(x * 10 ** digits) / 10 ** digits : null);

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
 * Largest |Δ log-prob| between the passes over the turns both sampled the same tokens for after
 * the same history (the rounding difference of the batch shapes), or null when no turn is
 * comparable. An episode is compared up to its first turn whose command or output differs: after
 * it the prompts differ (a command that timed out on a loaded machine in one pass only), and so
 * may every log-prob.
 */
export function logprobDrift(a: readonly Trajectory[], b: readonly Trajectory[]): number | null {
  let max: number | null = null;
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    for (let k = 0; k < Math.min(a[i].turns.length, b[i].turns.length); k++) {
      const x = a[i].turns[k];
      const y = b[i].turns[k];
      if (!x.tokenIds || !y.tokenIds || !x.logprobs || !y.logprobs || x.tokenIds.join() !== y.tokenIds.join()) break;
      for (let j = 0; j < Math.min(x.logprobs.length, y.logprobs.length); j++)
        max = Math.max(max ?? 0, Math.abs(x.logprobs[j] - y.logprobs[j]));
      if (x.observation !== y.observation) break;
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
  ctx: {
    tasks: number;
    maxTurns: number;
    seed: number;
    model: string;
    workspace: string;
    setupS: number;
    sameActions: number | null;
    logprobMaxDiff?: number | null;
    cpus?: number;
    commandSlots?: number;
  },
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
export function repeatedRolloutSummary(
  pairs: readonly { seq: RolloutPassStats; conc: RolloutPassStats }[],
  ctx: Parameters<typeof rolloutSummary>[2],
): RolloutBenchResult {
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
  config?: Partial<
    Pick<
      TrainConfig,
      | 'executionProvider'
      | 'maxActionTokens'
      | 'temperature'
      | 'topP'
      | 'commandTimeoutMs'
      | 'testTimeoutMs'
      | 'dockerHost'
      | 'batchWaitMs'
      | 'cacheObservations'
      | 'commandConcurrency'
    >
  >;
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
  let harness: Awaited<ReturnType<typeof openHarness>> | undefined;
  try {
    log(`copying the checkpoint ${o.model}`);
    const model = await snapshotCheckpoint(o.model, path.join(tmp, 'model'));
    pool = await connectRunPool(runId, c);
    let tasks: Task[];
    if (o.tasksFile) {
      tasks = readTaskFile(o.tasksFile).slice(0, o.tasks ?? Infinity);
      assertWorkspaceHoldsTasks(tasks, o.workspace, o.tasksFile);
    } else {
      log(`synthesizing ${o.tasks ?? 8} tasks from ${o.workspace}`);
      tasks = (await synthesizeMutationTasks({ workspace: o.workspace, pool, seed, max: o.tasks ?? 8 })).tasks;
    }
    if (tasks.length === 0)
      throw new TurnwiseError('invalid-input', `no task for the rollout benchmark in ${o.workspace}`, {
        hint: 'use a workspace whose tests exercise its code, or pass --tasks-file',
      });
    const runner = detectRunner(o.workspace);
    // No harness-wide cache: each pass below gets its own.
    harness = await openHarness({
      runId,
      workspace: o.workspace,
      language: runner.language,
      checkpoint: model,
      config: { ...c, cacheObservations: false },
      pool,
      onLog: (m) => log(`warning: ${m}`),
    });
    const episodes = o.episodes ?? tasks.length;
    const jobsFor = (pass: string, n = episodes): EpisodeJob[] =>
      Array.from({ length: n }, (_, i) => {
        const task = tasks[i % tasks.length];
        return { task, episodeId: `bench-${pass}-${i}`, groupId: `bench-${task.id}`, seed: seedOf(seed, i), split: 'train' };
      });
    const pass = async (
      name: string,
      conc: number,
      jobs: EpisodeJob[],
      turns: number,
    ): Promise<{ stats: RolloutPassStats; result: RolloutResult }> => {
      // Both passes start with a full warm pool (its size = episodes in flight), so neither pays cold starts the other does not.
      pool!.warm(harness!.snapshot, conc);
      await pool!.whenWarm(harness!.snapshot, 120_000);
      const spans: Span[] = [];
      const s0 = harness!.model.sampledTokens;
      const p0 = harness!.model.promptTokens;
      const cpu0 = machineCpuBusySeconds();
      let done = 0;
      const result = await runRollouts(jobs, {
        provider: poolProvider(harness!.pool, harness!.snapshot),
        model: harness!.model,
        checkpoint: model,
        originals: harness!.originals,
        concurrency: conc,
        maxBatch: conc,
        batchWaitMs: c.batchWaitMs,
        maxTurns: turns,
        commandTimeoutMs: c.commandTimeoutMs,
        testTimeoutMs: c.testTimeoutMs,
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
        sampledTokens: harness!.model.sampledTokens - s0,
        promptTokens: harness!.model.promptTokens - p0,
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
    pool.warm(harness.snapshot, 0);
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
    await harness?.close().catch(() => undefined);
    await pool?.close().catch(() => undefined);
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/** Why a rollout benchmark's figures measure nothing (a pass whose every episode failed), or undefined. */
export function allEpisodesFailed(r: { sequential: RolloutPassStats; concurrent: RolloutPassStats }): string | undefined {
  for (const [name, p] of [
    ['sequential', r.sequential],
    ['concurrent', r.concurrent],
  ] as const) {
    if (p.episodes > 0 && p.failed === p.episodes)
      return `every episode of the ${name} pass failed (the first: ${p.first_failure ?? 'no reason recorded'}); the figures measure nothing`;
  }
  return undefined;
}
