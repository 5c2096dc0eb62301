// Branching: an iteration's rollout budget spent where outcomes can differ. A group whose
// episodes all ended the same way (all resolved, or none) gives the update nothing about the fix:
// its advantages come from the reward's small penalties. Under a fixed budget, sampling such a
// task again from the start mostly repeats that outcome; sampling it again from an intermediate
// state of one of its own episodes (the first t commands replayed in a fresh sandbox, then the
// policy writes the rest) reaches the states where the policy hesitated, as InfoTree does for
// rollouts under a fixed budget (RIFB).
//
// Per iteration: the first groups (groupSize episodes per task) are played; then `branchEpisodes`
// more go to the uniform groups, split by what each task's earlier branches did (a task whose
// branches keep ending as its group did gets less: allocateBranches); within a group the branch
// points are chosen by an uncertainty-weighted upper confidence bound over the states its
// episodes share (branchPoints). Credit is shared as a tree: the turns a branch replayed are
// trained once, in its parent, with the mean advantage of every episode that went through them
// (shareTreeCredit).
import { seedOf } from '../core/random';
import type { Trajectory } from '../core/schema';
import { mean } from '../core/stats';
import type { EpisodeJob } from '../agent/scheduler';
import { isScored } from '../core/trajectory';
import { endedAlike, groupOutcomes, scoredGroups } from './task-picking';

/** A first-phase group whose scored episodes all ended the same way. */
export interface UniformGroup {
  groupId: string;
  taskId: string;
  /** Its scored first-phase episodes, in play order. */
  members: Trajectory[];
  /** Whether they all resolved the task (or none did). */
  resolved: boolean;
}

/** What a task's branches did in earlier iterations: branches played, and those whose outcome differed from their group's. */
export interface BranchStats {
  tried: number;
  flipped: number;
}

/** One planned branch: replay `parent`'s turns 0..at−1, then sample. */
export interface BranchPoint {
  parent: Trajectory;
  at: number;
  /** The distinct actions the group's episodes wrote at turn `at` in that state, in play order: what the branch should not repeat. */
  written: string[];
}

/** The groups of first-phase episodes (no `branch`, task-picking.ts scoredGroups) that all ended alike, in play order. */
export function uniformGroups(trajs: readonly Trajectory[]): UniformGroup[] {
  return [...scoredGroups(trajs.filter((t) => !t.branch))]
    .filter(([, members]) => endedAlike(members))
    .map(([groupId, members]) => ({ groupId, taskId: members[0].taskId, members, resolved: members[0].reward.resolved }));
}

/**
 * Per task, what its branches did in `trajs` (earlier iterations' train episodes): a branch
 * flipped when its outcome differs from its group's first episodes (which were all alike, or it
 * would not have been played).
 */
export function branchStats(trajs: readonly Trajectory[], into = new Map<string, BranchStats>()): Map<string, BranchStats> {
  const firstOutcome = new Map<string, boolean>();
  for (const t of trajs) if (!t.branch && isScored(t) && !firstOutcome.has(t.groupId)) firstOutcome.set(t.groupId, t.reward.resolved);
  for (const t of trajs) {
    if (!t.branch || !isScored(t)) continue;
    const first = firstOutcome.get(t.groupId);
    if (first === undefined) continue;
    const s = into.get(t.taskId) ?? { tried: 0, flipped: 0 };
    s.tried++;
    if (t.reward.resolved !== first) s.flipped++;
    into.set(t.taskId, s);
  }
  return into;
}

/**
 * A task's share weight: the mean of a Beta(1 + flipped, 1 + tried − flipped) posterior on the
 * chance that one of its branches ends otherwise than its group, so an untried task weighs 1/2
 * and one whose branches never flip fades (1/(n + 2) after n).
 */
export function branchWeight(s: BranchStats | undefined): number {
  return ((s?.flipped ?? 0) + 1) / ((s?.tried ?? 0) + 2);
}

/**
 * Splits `budget` branch episodes over the groups by their tasks' weights (largest remainder; a
 * seeded order breaks ties), so a budget smaller than the groups goes to the likeliest. Groups
 * with no state to branch from (every episode one turn) get none.
 */
export function allocateBranches(
  groups: readonly UniformGroup[],
  budget: number,
  stats: ReadonlyMap<string, BranchStats>,
  seed: number,
): Map<string, number> {
  const out = new Map<string, number>();
  const open = groups.filter((g) => g.members.some((m) => m.turns.length >= 2));
  if (!open.length || budget <= 0) return out;
  const w = open.map((g) => branchWeight(stats.get(g.taskId)));
  const total = w.reduce((a, b) => a + b, 0);
  const exact = w.map((x) => (budget * x) / total);
  const given = exact.map(Math.floor);
  let left = budget - given.reduce((a, b) => a + b, 0);
  const order = open
    .map((g, i) => ({ i, rem: exact[i] - given[i], key: seedOf(seed, 'branch-order', g.groupId) }))
    .sort((a, b) => b.rem - a.rem || a.key - b.key);
  for (const o of order) {
    if (left <= 0) break;
    given[o.i]++;
    left--;
  }
  open.forEach((g, i) => {
    if (given[i] > 0) out.set(g.groupId, given[i]);
  });
  return out;
}

/**
 * The policy's uncertainty when it wrote a turn: the surprisal (−log-prob, nats) of the action it
 * sampled, summed over its tokens: an estimate of the entropy of its choice of action there (most
 * of an action's tokens are near-certain; the few that choose are where it differs).
 */
export function turnUncertainty(t: { logprobs?: readonly number[] }): number {
  return -(t.logprobs ?? []).reduce((a, b) => a + b, 0);
}

/** The state an episode reached before its turn `at`: the commands of turns 0..at−1 (episodes that ran the same ones share it). */
const stateKey = (t: Trajectory, at: number): string => JSON.stringify(t.turns.slice(0, at).map((u) => u.action));

/**
 * `count` branch points in a group, by an uncertainty-weighted upper confidence bound (the UUCB
 * rule of InfoTree). A state is the commands of a prefix (turns 0..t−1, t ≥ 1, with a turn t to
 * write again); its score is the mean uncertainty of the turn-t actions written there plus
 * `exploration`·√(ln N / n), n the episodes and branches through it, N those of the group. Each
 * pick counts as a visit, so a second branch from one state needs a larger margin. Ties go to the
 * earlier state.
 */
export function branchPoints(members: readonly Trajectory[], count: number, exploration: number): BranchPoint[] {
  interface Node {
    parent: Trajectory;
    at: number;
    uncertainty: number[];
    written: Set<string>;
    visits: number;
  }
  const nodes = new Map<string, Node>();
  for (const m of members) {
    for (let at = 1; at < m.turns.length; at++) {
      const key = stateKey(m, at);
      const n = nodes.get(key) ?? { parent: m, at, uncertainty: [], written: new Set<string>(), visits: 0 };
      n.uncertainty.push(turnUncertainty(m.turns[at]));
      n.written.add(m.turns[at].action);
      n.visits++;
      nodes.set(key, n);
    }
  }
  const all = [...nodes.values()];
  if (!all.length) return [];
  let N = members.length;
  const out: BranchPoint[] = [];
  for (let i = 0; i < count; i++) {
    let best: Node | undefined;
    let bestScore = -Infinity;
    for (const n of all) {
      const score = mean(n.uncertainty) + exploration * Math.sqrt(Math.log(Math.max(N, 1)) / n.visits);
      if (score > bestScore + 1e-12 || (Math.abs(score - bestScore) <= 1e-12 && best && n.at < best.at)) {
        best = n;
        bestScore = score;
      }
    }
    out.push({ parent: best!.parent, at: best!.at, written: [...best!.written] });
    best!.visits++;
    N++;
  }
  return out;
}

/**
 * The branch jobs of iteration `iteration`: `budget` episodes over the uniform groups of the
 * first-phase episodes `first` (allocateBranches, branchPoints). A branch joins its parent's group
 * (its advantage baseline), its id `<group>-b<k>`.
 */
export function planBranches(
  first: readonly Trajectory[],
  o: {
    budget: number;
    exploration: number;
    /** Draws a branch's first own turn may take to write something its group has not (BranchPrefix.redraws); 0: one draw. */
    redraws: number;
    seed: number;
    iteration: number;
    stats: ReadonlyMap<string, BranchStats>;
    tasks: ReadonlyMap<string, EpisodeJob['task']>;
  },
): EpisodeJob[] {
  const groups = uniformGroups(first);
  const shares = allocateBranches(groups, o.budget, o.stats, seedOf(o.seed, o.iteration));
  const jobs: EpisodeJob[] = [];
  for (const g of groups) {
    const task = o.tasks.get(g.taskId);
    if (!task) continue;
    branchPoints(g.members, shares.get(g.groupId) ?? 0, o.exploration).forEach((p, k) => {
      jobs.push({
        task,
        episodeId: `${g.groupId}-b${k}`,
        groupId: g.groupId,
        seed: seedOf(o.seed, o.iteration, g.groupId, 'branch', k),
        split: 'train',
        prefix: {
          parent: p.parent.trajId,
          turns: p.parent.turns.slice(0, p.at),
          ...(o.redraws > 0 ? { avoid: p.written, redraws: o.redraws } : {}),
        },
      });
    });
  }
  return jobs;
}

/**
 * Credit shared as a tree, after the estimator gave every turn of every scored episode its
 * advantage: a parent's turn k that `m` branches replayed with the state it had (k < shared)
 * takes the mean advantage (and mean components) of itself and those branches' turn k, since
 * every episode through that state is an outcome of its action; the branches' inherited turns keep
 * none (they are not trained on). Returns the turns whose advantage changed.
 */
export function shareTreeCredit(trajs: readonly Trajectory[]): number {
  const byId = new Map(trajs.map((t) => [t.trajId, t]));
  const through = new Map<Trajectory, Trajectory[]>();
  for (const b of trajs) {
    if (!b.branch || !isScored(b)) continue;
    const p = byId.get(b.branch.parent);
    if (p && isScored(p)) through.set(p, [...(through.get(p) ?? []), b]);
  }
  let changed = 0;
  for (const [p, branches] of through) {
    for (let k = 0; k < p.turns.length; k++) {
      const sharing = branches.filter((b) => k < b.branch!.shared && b.turns[k]);
      if (!sharing.length) continue;
      const turns = [p.turns[k], ...sharing.map((b) => b.turns[k])];
      const pk = p.turns[k];
      pk.advantage = mean(turns.map((u) => u.advantage ?? 0));
      // Per-token credit and the clip factor are shared the same way (a turn without them counts with its own advantage, 1).
      if (turns.some((u) => u.tokenAdvantages))
        pk.tokenAdvantages = (pk.tokenIds ?? []).map((_, j) => mean(turns.map((u) => u.tokenAdvantages?.[j] ?? u.advantage ?? 0)));
      if (turns.some((u) => u.clipScale !== undefined)) pk.clipScale = mean(turns.map((u) => u.clipScale ?? 1));
      const keys = new Set(turns.flatMap((u) => Object.keys(u.advantageComponents ?? {})));
      if (keys.size)
        pk.advantageComponents = Object.fromEntries([...keys].map((c) => [c, mean(turns.map((u) => u.advantageComponents?.[c] ?? 0))]));
      changed++;
    }
  }
  for (const b of trajs) {
    if (!b.branch) continue;
    for (const u of b.turns) {
      if (!u.inherited) continue;
      u.advantage = 0;
      delete u.advantageComponents;
      delete u.tokenAdvantages;
      delete u.clipScale;
    }
  }
  return changed;
}

/**
 * The iteration's outcome diversity: the share of its groups (task-picking.ts groupOutcomes) whose
 * episodes did not all end alike, over all its episodes and over its first ones only; NaN without a group.
 */
export function mixedGroups(trajs: readonly Trajectory[]): { mixed: number; mixedFirst: number } {
  const share = (ts: readonly Trajectory[]) => {
    const g = groupOutcomes(ts);
    return g.length ? g.filter((x) => !x.alike).length / g.length : NaN;
  };
  return { mixed: share(trajs), mixedFirst: share(trajs.filter((t) => !t.branch)) };
}

/**
 * The share of an iteration's scored branches whose first own action is none of the actions their
 * group's first episodes wrote in the same state (the state of the replayed commands): a branch
 * that writes one of those mostly repeats that episode's outcome. NaN without a branch.
 */
export function branchNewActions(trajs: readonly Trajectory[]): number {
  const written = new Map<string, Set<string>>();
  const key = (t: Trajectory, at: number) => `${t.groupId}\0${stateKey(t, at)}`;
  for (const t of trajs) {
    if (t.branch || !isScored(t)) continue;
    for (let at = 1; at < t.turns.length; at++) {
      const k = key(t, at);
      (written.get(k) ?? written.set(k, new Set()).get(k)!).add(t.turns[at].action);
    }
  }
  const branches = trajs.filter((t) => t.branch && isScored(t) && t.turns.length > t.branch.at);
  if (!branches.length) return NaN;
  const fresh = branches.filter((b) => !written.get(key(b, b.branch!.at))?.has(b.turns[b.branch!.at].action));
  return fresh.length / branches.length;
}

/**
 * The update's gradient mass: Σ |advantage| × action tokens over the turns the update trains on
 * (not inherited), per episode played. Under the token-mean loss it is how much push the
 * iteration's episodes give the policy; a group whose episodes all ended alike adds little.
 */
export function gradientMass(trajs: readonly Trajectory[]): number {
  let mass = 0;
  for (const t of trajs) for (const u of t.turns) if (!u.inherited) mass += Math.abs(u.advantage ?? 0) * (u.tokenIds?.length ?? 0);
  return trajs.length ? mass / trajs.length : NaN;
}
