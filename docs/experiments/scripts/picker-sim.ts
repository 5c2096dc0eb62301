// How far task picking alone could lift the mixed-outcome ratio in a run of a given length, from
// what a `bench transfer --json` run's train groups did. Each posed task gets the resolve rate of
// its first-phase episodes over the whole run ((k + ½) / (n + 1)); the train tasks the run never
// posed get rates drawn from the posed ones. Then, 400 times over, a run of the same number of
// iterations poses tasksPerIteration tasks per iteration, draws each group of G from its task's
// rate, and counts the groups with both outcomes, under three pickers:
//   uniform      the seeded shuffle (task-picking.ts `uniform`),
//   informative  task-picking.ts's own weights (halved per alike group in a row, down to 1/16),
//   hindsight    the tasksPerIteration tasks with the highest chance of a mixed group (knows the rates).
// The rates are held fixed (a policy that learns settles its tasks, so a real run's ratio falls
// over the run): the figures say what the picker can do with what it sees, not what a run gets.
// --group G and --tasks N pose N tasks of G episodes per iteration instead of the run's own.
//   npx tsx docs/experiments/scripts/picker-sim.ts RESULT.json [RESULT2.json …] [--group G --tasks N]
import { readTransferResult } from '../../../src/bench/transfer-compare';
import { RunDir } from '../../../src/core/run';
import { seededRandom } from '../../../src/core/random';
import { mean } from '../../../src/core/stats';
import { alikeStreaks, taskWeight, type GroupOutcome } from '../../../src/train/task-picking';
import { mixedChance, trainTaskOutcomes } from './task-outcomes';

const REPLICAS = 400;

function simulate(
  rates: number[],
  picker: 'uniform' | 'informative' | 'hindsight',
  iterations: number,
  perIteration: number,
  G: number,
  seed: number,
) {
  const rand = seededRandom(seed);
  const past: GroupOutcome[] = [];
  let mixed = 0;
  let groups = 0;
  for (let n = 0; n < iterations; n++) {
    const streaks = alikeStreaks(past);
    const ids = rates.map((_, i) => i);
    const posed =
      picker === 'hindsight'
        ? ids.sort((a, b) => mixedChance(rates[b], G) - mixedChance(rates[a], G)).slice(0, perIteration)
        : ids
            .map((i) => ({ i, key: -Math.log(1 - rand()) / (picker === 'uniform' ? 1 : taskWeight(streaks.get(String(i)) ?? 0)) }))
            .sort((a, b) => a.key - b.key)
            .slice(0, perIteration)
            .map((x) => x.i);
    for (const i of posed) {
      let k = 0;
      for (let e = 0; e < G; e++) if (rand() < rates[i]) k++;
      const alike = k === 0 || k === G;
      past.push({ taskId: String(i), alike });
      groups++;
      if (!alike) mixed++;
    }
  }
  return mixed / groups;
}

const argv = process.argv.slice(2);
const flag = (name: string) => {
  const i = argv.indexOf(name);
  return i >= 0 ? Number(argv.splice(i, 2)[1]) : undefined;
};
const groupOverride = flag('--group');
const tasksOverride = flag('--tasks');
for (const file of argv) {
  for (const repo of readTransferResult(file).repos) {
    if (!repo.run_dir) continue;
    const run = RunDir.open(repo.run_dir);
    const last = run.lastCompleteIteration();
    const { per, perIteration, G } = trainTaskOutcomes(run, last);
    const posed = [...per.values()].map((e) => (e.k + 0.5) / (e.n + 1));
    const fill = seededRandom(7);
    const trainTasks = repo.train_tasks ?? posed.length;
    const rates = [
      ...posed,
      ...Array.from({ length: Math.max(0, trainTasks - posed.length) }, () => posed[Math.floor(fill() * posed.length)]),
    ];
    const [tasks, group] = [tasksOverride ?? perIteration, groupOverride ?? G];
    const row: Record<string, unknown> = {
      repo: repo.name,
      file,
      iterations: last,
      train_tasks: rates.length,
      posed: posed.length,
      per_iteration: tasks,
      G: group,
    };
    for (const picker of ['uniform', 'informative', 'hindsight'] as const) {
      row[picker] = Number(mean(Array.from({ length: REPLICAS }, (_, s) => simulate(rates, picker, last, tasks, group, s + 1))).toFixed(3));
    }
    process.stdout.write(JSON.stringify(row) + '\n');
  }
}
