// What the transfer reports cite about a `bench transfer --json` result, read back from the run
// folders it names: per repository, the held-out episodes first → last (paired by task and seed,
// the sign test over episodes and the test by task), the train iterations' metrics averaged over
// the first five, the last five and all of them (mixed-outcome ratio, resolved, KL, branch
// episodes and how many changed their group's outcome, seconds of rollout and update), the train
// groups by outcome (all resolved, none, mixed), the train tasks by outcome with the mixed ratio a
// hindsight picker would reach, and the held-out failure labels of the sampled
// episodes first → last.
//   npx tsx docs/experiments/scripts/transfer-runs.ts RESULT.json [RESULT2.json …] [--json]
import { failureBreakdown, FAILURE_LABELS } from '../../../src/agent/diagnosis';
import { readTransferResult } from '../../../src/bench/transfer-compare';
import { RunDir } from '../../../src/core/run';
import type { MetricsRow } from '../../../src/core/events';
import type { Task, Trajectory } from '../../../src/core/schema';
import { mean } from '../../../src/core/stats';
import { compareEvaluations, episodeKind, formatPaired, type PairedChange } from '../../../src/eval/compare';
import { endedAlike, scoredGroups } from '../../../src/train/task-picking';
import { mixedChance, trainTaskOutcomes } from './task-outcomes';

const KEYS = ['groups/mixed', 'groups/mixed_first', 'resolved', 'kl', 'rollout/branch_episodes', 'time/rollout_s', 'time/update_s'];

function window(rows: readonly MetricsRow[]): Record<string, number | null> {
  return Object.fromEntries(
    KEYS.map((k) => {
      const m = mean(rows.map((r) => r[k]).filter((v): v is number => typeof v === 'number'));
      return [k, Number.isFinite(m) ? Number(m.toFixed(3)) : null];
    }),
  );
}

/** Train groups by outcome over the run, and the branch episodes whose outcome differs from their group's first episodes. */
function groupsOf(run: RunDir, last: number) {
  const classes = { all_resolved: 0, none_resolved: 0, mixed: 0 };
  let branches = 0;
  let flipped = 0;
  for (let n = 1; n <= last; n++) {
    const train = run.readTrajectories(n, 'train');
    const first = train.filter((t) => !t.branch);
    for (const g of scoredGroups(first).values()) {
      if (!endedAlike(g)) classes.mixed++;
      else if (g[0].reward.resolved) classes.all_resolved++;
      else classes.none_resolved++;
    }
    const firstOutcome = new Map<string, boolean>();
    for (const t of first) if (!t.failure && !firstOutcome.has(t.groupId)) firstOutcome.set(t.groupId, !!t.reward.resolved);
    for (const t of train) {
      if (!t.branch || t.failure) continue;
      branches++;
      if (firstOutcome.has(t.groupId) && firstOutcome.get(t.groupId) !== !!t.reward.resolved) flipped++;
    }
  }
  return { groups: classes, branches, branches_that_changed_the_outcome: flipped, tasks: tasksOf(run, last) };
}

/**
 * The train tasks by what their first-phase episodes did over the whole run: posed, every episode
 * resolved, none, some; and the mixed-outcome ratio a picker that knew each task's resolve rate p
 * over the run (hindsight) would expect from the tasksPerIteration tasks with the highest chance
 * of a mixed group of G, 1 − p^G − (1 − p)^G: a ceiling on what picking alone could reach.
 */
function tasksOf(run: RunDir, last: number) {
  const { per, perIteration, G } = trainTaskOutcomes(run, last);
  const rates = [...per.values()];
  const best = rates
    .map((e) => mixedChance(e.k / e.n, G))
    .sort((a, b) => b - a)
    .slice(0, perIteration);
  return {
    posed: rates.length,
    all_resolved: rates.filter((e) => e.k === e.n).length,
    none_resolved: rates.filter((e) => e.k === 0).length,
    some_resolved: rates.filter((e) => e.k > 0 && e.k < e.n).length,
    hindsight_picker_mixed: best.length ? Number(mean(best).toFixed(3)) : null,
  };
}

const labels = (ts: readonly Trajectory[], tasks: ReadonlyMap<string, Task>) =>
  failureBreakdown(
    ts.filter((t) => episodeKind(t) === 'sampled'),
    tasks,
  );

type Summary = {
  repo: string;
  file: string;
  error?: string;
  iterations: number;
  resolved: { greedy: number[]; sampled: number[] };
  paired: { greedy: PairedChange; sampled: PairedChange };
  train: Record<string, Record<string, number | null>>;
  groups: Record<string, number>;
  branches: number;
  branches_that_changed_the_outcome: number;
  tasks: ReturnType<typeof tasksOf>;
  sampled_labels: Record<string, number[]>;
};

const files = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const asJson = process.argv.includes('--json');
const out: Partial<Summary>[] = [];
for (const file of files) {
  const r = readTransferResult(file);
  for (const repo of r.repos) {
    if (!repo.run_dir) {
      out.push({ file, repo: repo.name, error: repo.error ?? 'no run folder' });
      continue;
    }
    const run = RunDir.open(repo.run_dir);
    const metrics = run.readMetrics();
    const evals = metrics.filter((m) => typeof m['heldout/resolved'] === 'number').map((m) => m.iteration);
    const [first, last] = [evals[0], evals[evals.length - 1]];
    const before = run.readTrajectories(first, 'heldout');
    const after = run.readTrajectories(last, 'heldout');
    const c = compareEvaluations(before, after);
    const train = metrics.filter((m) => m.iteration >= 1 && typeof m['groups/mixed'] === 'number');
    const tasks = new Map(run.readTasks().map((t) => [t.id, t]));
    const lb = labels(before, tasks);
    const la = labels(after, tasks);
    out.push({
      file,
      repo: repo.name,
      iterations: last,
      resolved: {
        greedy: [
          c.tasks.filter((t) => t.kind === 'greedy').reduce((s, t) => s + t.before, 0),
          c.tasks.filter((t) => t.kind === 'greedy').reduce((s, t) => s + t.after, 0),
        ],
        sampled: [
          c.tasks.filter((t) => t.kind === 'sampled').reduce((s, t) => s + t.before, 0),
          c.tasks.filter((t) => t.kind === 'sampled').reduce((s, t) => s + t.after, 0),
        ],
      },
      paired: { greedy: c.greedy, sampled: c.sampled },
      train: { first5: window(train.slice(0, 5)), last5: window(train.slice(-5)), all: window(train) },
      ...groupsOf(run, last),
      sampled_labels: Object.fromEntries(FAILURE_LABELS.map((l) => [l, [Number(lb[l].toFixed(2)), Number(la[l].toFixed(2))]])),
    });
  }
}
if (asJson) console.log(JSON.stringify(out, null, 2));
else
  for (const x of out as Summary[]) {
    if (x.error) {
      console.log(`${x.repo}: ${x.error}`);
      continue;
    }
    console.log(`== ${x.repo} (${x.file}), ${x.iterations} iterations`);
    console.log(
      `  greedy ${x.resolved.greedy[0]} → ${x.resolved.greedy[1]}: ${formatPaired(x.paired.greedy)}; sampled ${x.resolved.sampled[0]} → ${x.resolved.sampled[1]}: ${formatPaired(x.paired.sampled, { byTask: true })}`,
    );
    for (const w of ['first5', 'last5', 'all']) console.log(`  ${w.padEnd(6)} ${JSON.stringify(x.train[w])}`);
    console.log(
      `  train groups ${JSON.stringify(x.groups)}; branches ${x.branches}, ${x.branches_that_changed_the_outcome} changed the outcome`,
    );
    console.log(`  train tasks ${JSON.stringify(x.tasks)}`);
    console.log(
      `  sampled held-out labels first → last: ${Object.entries(x.sampled_labels)
        .map(([l, [b, a]]) => `${l} ${b} → ${a}`)
        .join(', ')}`,
    );
  }
