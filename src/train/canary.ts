// The reward canary: once per iteration of a run and once per evaluation, the no-op episode and
// the reference fix of one task are scored again through the same path as the agent's episodes
// (tasks/scoring-check.ts), in the run's own sandboxes. The tasks passed that check when they were
// made; a disagreement now means the reward stopped telling the truth since (the workspace, the
// image, the scorer), and the run stops before any update learns from it.
import { TurnwiseError } from '../core/errors';
import type { Task } from '../core/schema';
import { checkTaskScoring, type ScoringCheck } from '../tasks/scoring-check';
import type { EvalHarness } from './harness';
import type { TrainConfig } from './config';

export interface CanaryResult {
  check: ScoringCheck;
  /** Wall time of the two scored episodes (they run at once, beside the rollouts). */
  durationMs: number;
}

/**
 * The canary's task for a turn `k` (an iteration, an evaluation): the tasks in turn, mutation
 * tasks first (they have a reference fix, so both directions are checked).
 */
export function canaryTask(tasks: readonly Task[], k: number): Task | undefined {
  if (tasks.length === 0) return undefined;
  const withFix = tasks.filter((t) => t.mutation);
  const pool = withFix.length ? withFix : tasks;
  return pool[((k % pool.length) + pool.length) % pool.length];
}

/**
 * Scores the canary task's no-op and reference fix. Throws a TurnwiseError naming the task and
 * what was wrong when either disagrees with what the task says; `where` names the iteration or
 * evaluation for the message.
 */
export async function runCanary(
  harness: Pick<EvalHarness, 'pool' | 'snapshot' | 'originals'>,
  task: Task,
  c: Pick<TrainConfig, 'maxTurns' | 'reward' | 'testTimeoutMs'>,
  where: string,
): Promise<CanaryResult> {
  const t0 = Date.now();
  const once = () =>
    checkTaskScoring(task, {
      acquire: (role) => harness.pool.acquire(harness.snapshot, { rollout: `canary-${role}` }),
      originals: harness.originals,
      maxTurns: c.maxTurns,
      weights: c.reward,
      timeoutMs: c.testTimeoutMs,
      parallel: true,
    });
  let check = await once();
  // A sandbox that failed to start says nothing of the reward: one more try before stopping.
  if (check.problem?.kind === 'sandbox-error') check = await once();
  if (!check.ok) {
    const detail = check.problem!.detail;
    const limitS = Math.round(c.testTimeoutMs / 1000);
    throw new TurnwiseError('test-report', `the reward canary failed ${where}: task ${task.id}: ${check.problem!.kind}: ${detail}`, {
      hint:
        check.noop?.timedOut || check.reference?.timedOut
          ? `the scoring test run took longer than testTimeoutMs (${limitS} s): raise testTimeoutMs (the setting turnwise.sandbox.testTimeoutMs) well above the suite's time on this machine (\`turnwise tasks synth\` prints it)`
          : `the reward no longer tells a fix from no fix on this workspace, so nothing was learned from this iteration's rewards; check the task with \`turnwise tasks check TASKS.jsonl --workspace DIR\` (the run's tasks.jsonl), and make the tasks again (\`turnwise tasks synth\`) if the workspace, its tests or the sandbox image changed`,
    });
  }
  return { check, durationMs: Date.now() - t0 };
}
