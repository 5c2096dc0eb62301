// Evaluation of a policy on tasks: one greedy episode per task (pass@1) or sampled episodes,
// seeded by the task alone so every evaluation of a run draws the same numbers; the summary of
// an evaluation per task; and what `turnwise eval --run` evaluates of a run (one split, one
// checkpoint, the run's own settings).
import * as fs from 'node:fs';
import { TurnwiseError } from '../core/errors';
import { checkpointWeightsFile, RunDir, runDisplayState } from '../core/run';
import { seedOf } from '../core/random';
import type { Task, Trajectory } from '../core/schema';
import { runRollouts, type EpisodeJob, type RolloutResult } from '../agent/scheduler';
import { readTaskFile } from '../tasks/taskfile';
import { readRunConfig, type TrainConfig } from './config';
import { episodeMetrics } from './metrics';
import { rolloutOptions, type EvalHarness } from './harness';
import { canaryTask, runCanary, type CanaryResult } from './canary';

export interface EvalTaskRow {
  taskId: string;
  resolved: boolean;
  passRate: number | null;
  turns: number;
  formatErrors: number;
  failure?: string;
  /** Why the episode counts as tampered with (reward 0). */
  tampered?: string;
}

export interface EvalSummary {
  /** The fraction of tasks whose (greedy) episode passes every selected test: pass@1. */
  resolved: number;
  pass_rate: number;
  'turns/mean': number;
  format_error_rate: number;
  episodes: number;
  failed: number;
  /** Episodes whose reward is 0 because they tampered with the tests (tasks/tamper.ts). */
  tampered: number;
  /** How far a task's episodes differ (train/metrics actionDiversity): NaN (null in JSON) for one episode per task. */
  distinct: number;
  tasks: EvalTaskRow[];
}

export function summarizeEval(trajs: readonly Trajectory[]): EvalSummary {
  const m = episodeMetrics('', trajs);
  return {
    resolved: m.resolved,
    pass_rate: m.pass_rate,
    'turns/mean': m['turns/mean'],
    format_error_rate: m.format_errors,
    episodes: trajs.length,
    failed: m['episodes/failed'],
    tampered: m['episodes/tampered'],
    distinct: m.distinct,
    tasks: trajs.map((t) => ({
      taskId: t.taskId,
      resolved: t.reward.resolved,
      passRate: Number.isFinite(t.reward.passRate) ? t.reward.passRate : null,
      turns: t.turns.length,
      formatErrors: t.turns.filter((x) => x.formatError).length,
      ...(t.failure ? { failure: t.failure } : {}),
      ...(t.reward.tampered !== undefined ? { tampered: t.reward.tampered } : {}),
    })),
  };
}

/**
 * The seed a run's held-out evaluations draw their episodes from: its taskSeed, not its seed.
 * Runs that differ only in `seed` (another draw of the same RL on the same tasks) then evaluate
 * with the same episode seeds, so their episodes pair by task and seed: a comparison of two
 * methods can pool several RL seeds of each, which a comparison of one run per method cannot
 * tell from the spread between seeds. `turnwise eval --run` defaults to it as well.
 */
export function evaluationSeed(c: Pick<TrainConfig, 'taskSeed'>): number {
  return c.taskSeed;
}

/**
 * Runs `tasks` once each with greedy decoding (held-out evaluation), or `samples` sampled
 * episodes each at the run's temperature. A task's sampling seed does not depend on the
 * iteration: every evaluation of a run draws the same random numbers, so a change in the held-out
 * rate between iterations comes from the policy, not from new sampling noise.
 */
export interface EvaluateOptions {
  iteration: number;
  seed: number;
  config: TrainConfig;
  checkpoint: string;
  signal?: AbortSignal;
  onEpisode?: (t: Trajectory) => void;
}

export async function evaluateTasks(
  harness: EvalHarness,
  tasks: readonly Task[],
  o: EvaluateOptions & { samples?: number },
): Promise<RolloutResult> {
  const jobs: EpisodeJob[] = o.samples
    ? // k sampled episodes per task, seeded by (task, k) only: every evaluation draws the same numbers.
      tasks.flatMap((task, i) =>
        Array.from({ length: o.samples! }, (_, k) => ({
          task,
          episodeId: `evals-${o.iteration}-${i}-${k}`,
          groupId: `evals-${o.iteration}-${task.id}`,
          seed: seedOf(o.seed, 'eval-sample', task.id, k),
          split: 'heldout' as const,
        })),
      )
    : tasks.map((task, i) => ({
        task,
        episodeId: `eval-${o.iteration}-${i}`,
        groupId: `eval-${o.iteration}-${task.id}`,
        seed: seedOf(o.seed, 'eval', task.id),
        split: 'heldout',
      }));
  // pass@1 of the policy's best guess: greedy decoding unless sampling is asked for.
  const model = o.samples ? harness.model : harness.actionModel({ temperature: 0, topP: 1 });
  // One row per generation call: ONNX Runtime's kernels round differently across batch shapes,
  // and batches form by timing, so batched evaluations of one checkpoint differed in the last bits
  // of every log-prob and now and then in a greedy argmax (bench learn saw 1/8 vs 2/8 resolved).
  // Episodes still run concurrently; on CPU, batching saved little here (mean batch ~1.1). A
  // batch of one is always full, so the run's batchWaitMs never holds it.
  return runRollouts(jobs, { ...rolloutOptions(harness, o.config, o.checkpoint, o.iteration, o.signal, o.onEpisode), model, maxBatch: 1 });
}

/**
 * An evaluation as every caller makes it (a run's held-out evaluations, `turnwise eval`): one
 * greedy episode per task, then `samples` sampled ones each, so that two evaluations of the same
 * tasks and seed pair episode by episode. Undefined when `signal` stopped it (an episode cut by
 * the signal ends in an error; the stop itself is not one): the episodes that finished before
 * went to `onEpisode`.
 */
export async function evaluateGreedyThenSampled(
  harness: EvalHarness,
  tasks: readonly Task[],
  o: EvaluateOptions & { samples: number },
): Promise<{ greedy: Trajectory[]; sampled: Trajectory[]; canary?: CanaryResult } | undefined> {
  const { samples, ...base } = o;
  // The reward canary of this evaluation (canary.ts), beside its episodes: a task of the set in
  // turn by the iteration; a failure stops the evaluation with its reason once the episodes are in.
  const ct = canaryTask(tasks, o.iteration);
  const canary = ct
    ? runCanary(harness, ct, o.config, `in the evaluation of iteration ${o.iteration}`).then(
        (r) => ({ r }),
        (e: unknown) => ({ e }),
      )
    : undefined;
  const stage = async (k?: number): Promise<Trajectory[] | undefined> => {
    try {
      const r = await evaluateTasks(harness, tasks, k ? { ...base, samples: k } : base);
      return o.signal?.aborted ? undefined : r.trajectories;
    } catch (e) {
      if (o.signal?.aborted) return undefined;
      throw e;
    }
  };
  const greedy = await stage();
  const sampled = greedy && samples > 0 ? await stage(samples) : [];
  const checked = await canary;
  if (!greedy || !sampled || o.signal?.aborted) return undefined;
  if (checked && 'e' in checked) throw checked.e;
  return { greedy, sampled, ...(checked ? { canary: checked.r } : {}) };
}

/**
 * What `turnwise eval --run` evaluates: one split of a run's tasks with one of its checkpoints
 * (default: the last complete iteration's) and the run's own settings (turns, action length,
 * time limits, temperature, seed), so an evaluation of a run's held-out tasks is made as the
 * run's own evaluations were.
 */
export function runEvalTarget(
  ref: string,
  o: { runsRoot?: string; split: 'train' | 'heldout'; iteration?: number },
): { run: RunDir; config: TrainConfig; tasks: Task[]; checkpoint: string; iteration: number; state: ReturnType<typeof runDisplayState> } {
  const run = RunDir.open(ref, o.runsRoot);
  const config = readRunConfig(run);
  const last = run.lastCompleteIteration();
  const iteration = o.iteration ?? last;
  if (last < 0 || iteration > last) {
    throw new TurnwiseError(
      'not-found',
      `${run.runId} has no complete iteration ${o.iteration ?? ''}`.trimEnd() +
        (last >= 0 ? ` (the last complete one is ${last})` : ' yet'),
      { hint: 'give --iteration N of a checkpoint the run has written (0: the starting checkpoint)' },
    );
  }
  const checkpoint = run.checkpointDir(iteration);
  if (!fs.existsSync(checkpointWeightsFile(checkpoint)))
    throw new TurnwiseError('not-found', `${run.runId}'s checkpoint ${iteration} is missing (${checkpoint})`, {
      hint: `give --iteration N of a checkpoint under ${run.file('checkpoints')}`,
    });
  const ids = new Set(run.readSplits()[o.split]);
  const tasks = readTaskFile(run.file('tasks.jsonl')).filter((t) => ids.has(t.id));
  if (tasks.length === 0)
    throw new TurnwiseError('invalid-input', `${run.runId} has no ${o.split} task`, {
      hint: o.split === 'heldout' ? 'the run held no task out (heldoutFraction 0): give --split train' : 'give --split heldout',
    });
  return { run, config, tasks, checkpoint, iteration, state: runDisplayState(run.readStatus()) };
}
