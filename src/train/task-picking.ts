// Which train tasks an iteration poses. `uniform`: a seeded shuffle of the train split, its first
// tasksPerIteration (cycled when the split is smaller). `informative`: the same draw weighted by
// what each task's latest groups could teach. A group whose episodes were all resolved, or none
// of them, carries no signal about fixing the bug: whatever its advantages are, they come from the
// penalties (a repeated command, a long episode), and its rollouts cost as much as any. On a
// repository's own tasks most groups are like that (a task the policy always fixes, one whose bug
// it never finds), so a uniform draw spends most of an iteration on them. A task's weight halves
// for each of its latest groups in a row that went alike, down to 1/16: one that keeps going
// alike is still posed now and then, since the policy may have learned enough for it to go
// either way. (Alike by reward would not do: the penalties set the rewards of a group that failed
// throughout apart by a few hundredths.)
import { seedOf } from '../core/random';
import type { RunDir } from '../core/run';
import type { Trajectory } from '../core/schema';
import { isScored } from '../core/trajectory';

export const TASK_SAMPLINGS = ['uniform', 'informative'] as const;
export type TaskSampling = (typeof TASK_SAMPLINGS)[number];

/** Groups in a row that went alike beyond which a task's weight stops halving (weight 1/16). */
export const MAX_ALIKE_STREAK = 4;

/** One group's outcome for task picking: its task and whether its scored episodes were all resolved or none. */
export interface GroupOutcome {
  taskId: string;
  alike: boolean;
}

/**
 * The scored episodes (a sandbox failure has no score) of each group with two or more of them, by
 * group id in the order the groups were posed: a group with fewer says nothing about its task.
 */
export function scoredGroups(trajectories: readonly Trajectory[]): Map<string, Trajectory[]> {
  const groups = new Map<string, Trajectory[]>();
  for (const t of trajectories) {
    const g = groups.get(t.groupId) ?? groups.set(t.groupId, []).get(t.groupId)!;
    if (isScored(t)) g.push(t);
  }
  for (const [id, g] of groups) if (g.length < 2) groups.delete(id);
  return groups;
}

/** Whether a group's episodes were all resolved or none of them. */
export const endedAlike = (g: readonly Trajectory[]) => g.every((t) => (t.reward.resolved === true) === (g[0].reward.resolved === true));

/** The groups of one iteration's train episodes (scoredGroups), in the order they were posed, each alike when they all ended alike. */
export function groupOutcomes(trajectories: readonly Trajectory[]): GroupOutcome[] {
  return [...scoredGroups(trajectories).values()].map((g) => ({ taskId: g[0].taskId, alike: endedAlike(g) }));
}

/** The train episodes of a run's iterations 1..`last`, oldest first: what a resume reads its history from. */
export function pastTrainEpisodes(run: Pick<RunDir, 'readTrajectories'>, last: number): Trajectory[][] {
  return Array.from({ length: Math.max(0, last) }, (_, i) => run.readTrajectories(i + 1, 'train'));
}

/** The train groups of a run's iterations 1..`last`, oldest first, read back from their episodes. */
export function pastGroupOutcomes(run: Pick<RunDir, 'readTrajectories'>, last: number): GroupOutcome[] {
  return pastTrainEpisodes(run, last).flatMap((t) => groupOutcomes(t));
}

/** Per task, how many of its latest groups in a row went alike (`outcomes` oldest first; capped). */
export function alikeStreaks(outcomes: Iterable<GroupOutcome>): Map<string, number> {
  const streak = new Map<string, number>();
  for (const o of outcomes) streak.set(o.taskId, o.alike ? Math.min(MAX_ALIKE_STREAK, (streak.get(o.taskId) ?? 0) + 1) : 0);
  return streak;
}

/** A task's weight in the `informative` draw: 1, halved per alike group in a row. */
export function taskWeight(streak: number): number {
  return 0.5 ** Math.min(MAX_ALIKE_STREAK, Math.max(0, streak));
}

/**
 * The `count` tasks iteration `iteration` poses, in order (the split cycled when it holds fewer).
 * Weighted sampling without replacement by exponential clocks: each task draws u in (0, 1) from
 * the seed and waits −ln(1 − u) / weight; the first to finish are posed. With equal weights that
 * is the `uniform` order itself, so `informative` departs from it only where the history does.
 */
export function pickTasks<T extends { id: string }>(
  train: readonly T[],
  count: number,
  seed: number,
  iteration: number,
  sampling: TaskSampling,
  streaks?: ReadonlyMap<string, number>,
): T[] {
  if (!train.length) return [];
  const keys = new Map(
    train.map((t) => {
      const s = seedOf(seed, iteration, t.id);
      return [t.id, sampling === 'uniform' ? s : -Math.log1p(-(s + 0.5) / 2 ** 32) / taskWeight(streaks?.get(t.id) ?? 0)];
    }),
  );
  const order = [...train].sort((a, b) => keys.get(a.id)! - keys.get(b.id)!);
  return Array.from({ length: Math.max(0, count) }, (_, i) => order[i % order.length]);
}
