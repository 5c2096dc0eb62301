// The async scheduler: many episodes in flight, each an async loop that alternates between
// waiting for the model and running its command in its own sandbox. Requests for actions are
// batched: whatever episodes are waiting when the model becomes free go in one batch, so
// generation for some episodes overlaps sandbox commands of others. The model runs off the
// event loop (train/ puts the policy in a worker thread), so sandbox I/O never waits on it.
import { mean } from '../core/stats';
import { formatError } from '../core/errors';
import { mapConcurrent, type Semaphore } from '../core/workers';
import { SCHEMA, type Task, type Trajectory } from '../core/schema';
import type { Sandbox } from '../sandbox/types';
import { computeReward, type RewardWeights } from '../tasks/reward';
import type { ScoringOriginals } from '../tasks/testfiles';
import type { ObservationCache } from './cache';
import { DEFAULT_MAX_TURNS, runEpisode, type BranchPrefix } from './episode';
import type { ActionModel, ActRequest, ActResult, SandboxProvider } from './types';

/** One interval of work, for overlap checks and timing breakdowns. */
export interface Span {
  kind: 'generate' | 'exec';
  start: number;
  end: number;
  /** Requests in the batch (generate). */
  size?: number;
}

/**
 * Collects concurrent `act` calls into batches for the model, one batch at a time.
 *
 * With `waitMs` > 0 a batch that is not full is held back, up to `waitMs` after its oldest
 * request, while other episodes are still running commands and will ask soon. It pays where a
 * fuller batch costs about what a small one does (a GPU; decoding on CPU is ~7x cheaper per row
 * at batch 8) and generation is a large share of the work; on 2 CPU cores it did not (a turn's
 * generation is mostly the prefill of its observation, which costs per row): see
 * docs/experiments/2026-12-01-bench-rollout.md. A batch goes at once when every episode that can still ask is waiting, or when it
 * is full.
 */
export class ActionBatcher {
  private queue: { req: ActRequest; at: number; resolve: (r: ActResult) => void; reject: (e: unknown) => void }[] = [];
  private busy = false;
  private timer: NodeJS.Timeout | undefined;
  /** Episodes that may still ask for an action (registered and not retired). */
  private asking = new Set<string>();
  /** Total time the model spent generating, and the batch sizes it saw. */
  generateMs = 0;
  batches: number[] = [];
  /** Total time requests waited between asking and their batch being sent (a batch wait, or the
   *  batch before still running), summed over requests. */
  heldMs = 0;

  constructor(
    private readonly model: ActionModel,
    private readonly opts: { maxBatch?: number; spans?: Span[]; waitMs?: number } = {},
  ) {}

  /** An episode started: until `retire`, it counts as one that will ask for actions. */
  register(episodeId: string): void {
    this.asking.add(episodeId);
  }

  /** An episode will ask for no more actions: a held batch need not wait for it. */
  retire(episodeId: string): void {
    if (this.asking.delete(episodeId)) this.schedule();
  }

  act(req: ActRequest): Promise<ActResult> {
    return new Promise((resolve, reject) => {
      this.queue.push({ req, at: Date.now(), resolve, reject });
      this.schedule();
    });
  }

  /** Pumps on the next tick, so every episode that becomes ready in this tick joins the batch. */
  private schedule(): void {
    setImmediate(() => void this.pump());
  }

  private async pump(): Promise<void> {
    if (this.busy || this.queue.length === 0) return;
    const maxBatch = this.opts.maxBatch ?? 16;
    const waitMs = this.opts.waitMs ?? 0;
    if (waitMs > 0 && this.queue.length < maxBatch) {
      // Requests from episodes that are not registered (direct callers) never wait.
      const expected = Math.min(maxBatch, Math.max(this.asking.size, 1));
      const waiting = new Set(this.queue.map((q) => q.req.episodeId));
      const unregistered = [...waiting].some((id) => !this.asking.has(id));
      const left = this.queue[0].at + waitMs - Date.now();
      if (!unregistered && waiting.size < expected && left > 0) {
        clearTimeout(this.timer);
        this.timer = setTimeout(() => this.schedule(), left);
        return;
      }
    }
    clearTimeout(this.timer);
    this.timer = undefined;
    this.busy = true;
    const batch = this.queue.splice(0, maxBatch);
    const start = Date.now();
    for (const b of batch) this.heldMs += start - b.at;
    try {
      const results = await this.model.act(batch.map((b) => b.req));
      batch.forEach((b, i) => b.resolve(results[i]));
    } catch (e) {
      for (const b of batch) b.reject(e);
    } finally {
      const end = Date.now();
      this.generateMs += end - start;
      this.batches.push(batch.length);
      this.opts.spans?.push({ kind: 'generate', start, end, size: batch.length });
      this.busy = false;
      if (this.queue.length) this.schedule();
    }
  }
}

export interface EpisodeJob {
  task: Task;
  episodeId: string;
  groupId: string;
  seed: number;
  split: 'train' | 'heldout';
  /** A branch: the parent episode's first turns, replayed before the model writes (EpisodeOptions.prefix). */
  prefix?: BranchPrefix;
}

export interface RolloutOptions {
  provider: SandboxProvider;
  model: ActionModel;
  checkpoint: string;
  /** Test files of the snapshot (restored before scoring). */
  originals: ScoringOriginals;
  /** Episodes in flight (= sandboxes held) at once. */
  concurrency: number;
  maxBatch?: number;
  /** Hold a batch that is not full up to this long for episodes still running commands (ActionBatcher). */
  batchWaitMs?: number;
  maxTurns?: number;
  commandTimeoutMs?: number;
  testTimeoutMs?: number;
  rewardWeights?: Partial<RewardWeights>;
  iteration?: number;
  signal?: AbortSignal;
  onEpisode?: (t: Trajectory) => void;
  /** Record generate/exec intervals here (tests, benchmarks). */
  spans?: Span[];
  /** Replayed observations of read-only tool commands, shared by these episodes (agent/cache.ts). */
  observationCache?: ObservationCache;
  /** Slots the episodes' commands and scoring runs share (EpisodeOptions.commandSlots); none: no limit. */
  commandSlots?: Semaphore;
  /** Recovery feedback in the observations (EpisodeOptions.recoveryFeedback; training rollouts only). */
  recoveryFeedback?: boolean;
}

export interface RolloutResult {
  trajectories: Trajectory[];
  /** Wall time, time the model was generating, and summed sandbox time over episodes. */
  wallMs: number;
  generateMs: number;
  /** Summed over episodes: sandbox commands and setup, and scoring (tests run with the test files restored). */
  sandboxMs: number;
  rewardMs: number;
  meanBatch: number;
  /** Generation batches run (meanBatch is over these). */
  batches: number;
  /** Summed over actions: time a request waited for a fuller batch (0 without `batchWaitMs`). */
  heldMs: number;
}

/** Wraps a sandbox so each exec is recorded as a span. */
function traced(sb: Sandbox, spans: Span[]): Sandbox {
  return new Proxy(sb, {
    get(target, prop, receiver) {
      if (prop === 'exec') {
        return async (...args: Parameters<Sandbox['exec']>) => {
          const start = Date.now();
          try {
            return await target.exec(...args);
          } finally {
            spans.push({ kind: 'exec', start, end: Date.now() });
          }
        };
      }
      const v = Reflect.get(target, prop, receiver);
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
}

/** Runs every job, at most `concurrency` at a time; results in job order. */
export async function runRollouts(jobs: readonly EpisodeJob[], o: RolloutOptions): Promise<RolloutResult> {
  const t0 = Date.now();
  const batcher = new ActionBatcher(o.model, { maxBatch: o.maxBatch, spans: o.spans, waitMs: o.batchWaitMs });
  const timing = { sandboxMs: 0, modelWaitMs: 0, rewardMs: 0 };
  const results = await mapConcurrent(
    jobs,
    o.concurrency,
    async (job): Promise<Trajectory> => {
      let sandbox: Sandbox | undefined;
      batcher.register(job.episodeId);
      try {
        try {
          const a = Date.now();
          sandbox = await o.provider.acquire({ rollout: job.episodeId, signal: o.signal });
          timing.sandboxMs += Date.now() - a;
        } catch (e) {
          const failed = failedTrajectory(job, o, `no sandbox: ${formatError(e)}`);
          o.onEpisode?.(failed);
          return failed;
        }
        const trajectory = await runEpisode({
          task: job.task,
          sandbox: o.spans ? traced(sandbox, o.spans) : sandbox,
          act: (req) => batcher.act(req),
          ...(o.model.actionFormat ? { format: o.model.actionFormat } : {}),
          episodeId: job.episodeId,
          groupId: job.groupId,
          checkpoint: o.checkpoint,
          seed: job.seed,
          originals: o.originals,
          maxTurns: o.maxTurns,
          commandTimeoutMs: o.commandTimeoutMs,
          testTimeoutMs: o.testTimeoutMs,
          rewardWeights: o.rewardWeights,
          iteration: o.iteration,
          split: job.split,
          signal: o.signal,
          timing,
          observationCache: o.observationCache,
          commandSlots: o.commandSlots,
          onActionsDone: () => batcher.retire(job.episodeId),
          ...(job.prefix ? { prefix: job.prefix } : {}),
          ...(o.recoveryFeedback ? { recoveryFeedback: true } : {}),
        });
        o.onEpisode?.(trajectory);
        return trajectory;
      } finally {
        batcher.retire(job.episodeId);
        o.model.release(job.episodeId);
        if (sandbox) await sandbox.dispose().catch(() => undefined);
      }
    },
    o.signal,
  );
  const done = results.filter((r): r is Trajectory => r !== undefined);
  return {
    trajectories: done,
    wallMs: Date.now() - t0,
    generateMs: batcher.generateMs,
    sandboxMs: timing.sandboxMs,
    rewardMs: timing.rewardMs,
    meanBatch: batcher.batches.length ? mean(batcher.batches) : 0,
    batches: batcher.batches.length,
    heldMs: batcher.heldMs,
  };
}

/** Two rollout phases run one after the other (an iteration's first groups, then its branches) as one result. */
export function concatRollouts(a: RolloutResult, b: RolloutResult): RolloutResult {
  const batches = a.batches + b.batches;
  return {
    trajectories: [...a.trajectories, ...b.trajectories],
    wallMs: a.wallMs + b.wallMs,
    generateMs: a.generateMs + b.generateMs,
    sandboxMs: a.sandboxMs + b.sandboxMs,
    rewardMs: a.rewardMs + b.rewardMs,
    meanBatch: batches ? (a.meanBatch * a.batches + b.meanBatch * b.batches) / batches : 0,
    batches,
    heldMs: a.heldMs + b.heldMs,
  };
}

function failedTrajectory(job: EpisodeJob, o: RolloutOptions, why: string): Trajectory {
  return {
    schema: SCHEMA.trajectory,
    taskId: job.task.id,
    groupId: job.groupId,
    trajId: job.episodeId,
    checkpoint: o.checkpoint,
    turns: [],
    reward: computeReward({
      outcomes: undefined,
      failToPass: job.task.fail_to_pass,
      passToPass: job.task.pass_to_pass,
      turns: 0,
      maxTurns: o.maxTurns ?? DEFAULT_MAX_TURNS,
      formatError: false,
      weights: o.rewardWeights,
      error: why,
    }),
    ...(o.iteration !== undefined ? { iteration: o.iteration } : {}),
    split: job.split,
    seed: job.seed,
    failure: why,
  };
}
