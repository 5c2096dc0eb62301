// Held-out outcomes of demo runs, first evaluation against last, per run and pooled over runs:
// resolved episodes (greedy and sampled pooled), the pairs that changed (same task and seed) with
// the exact sign test, the share of groups with mixed outcomes (with and without branches), and
// the failure labels of the held-out episodes before and after.
//   npx tsx docs/experiments/scripts/demo-arms.ts RUNS_DIR [RUNS_DIR …]
import * as fs from 'node:fs';
import * as path from 'node:path';
import { RunDir } from '../../../src/core/run';
import { FAILURE_LABELS, failureBreakdown } from '../../../src/agent/diagnosis';
import { signTestP } from '../../../src/core/stats';
import type { Task, Trajectory } from '../../../src/core/schema';
import { mixedGroups } from '../../../src/train/branching';

for (const root of process.argv.slice(2)) {
  let gained = 0;
  let lost = 0;
  let before = 0;
  let after = 0;
  let pairs = 0;
  const firstEps: Trajectory[] = [];
  const lastEps: Trajectory[] = [];
  const tasks = new Map<string, Task>();
  console.log(`## ${root}`);
  for (const name of fs.readdirSync(root).sort()) {
    const run = RunDir.open(path.join(root, name));
    const metrics = run.readMetrics();
    const config = run.readConfig<{ iterations: number; seed: number }>();
    if (metrics.length < config.iterations + 1) continue;
    for (const line of fs.readFileSync(run.file('tasks.jsonl'), 'utf8').split('\n').filter(Boolean)) {
      const t = JSON.parse(line) as Task;
      tasks.set(t.id, t);
    }
    const last = metrics[metrics.length - 1].iteration;
    const key = (t: Trajectory) => `${t.trajId.split('-')[0]}|${t.taskId}|${t.seed}`;
    const a = new Map(run.readTrajectories(0, 'heldout').map((t) => [key(t), t]));
    const b = new Map(run.readTrajectories(last, 'heldout').map((t) => [key(t), t]));
    let g = 0;
    let l = 0;
    let n = 0;
    let x = 0;
    let y = 0;
    for (const [k, ta] of a) {
      const tb = b.get(k);
      if (!tb) continue;
      const ra = !ta.failure && ta.reward.resolved;
      const rb = !tb.failure && tb.reward.resolved;
      n++;
      x += ra ? 1 : 0;
      y += rb ? 1 : 0;
      if (!ra && rb) g++;
      if (ra && !rb) l++;
      firstEps.push(ta);
      lastEps.push(tb);
    }
    const train = Array.from({ length: last }, (_, i) => run.readTrajectories(i + 1, 'train'));
    const mean = (v: number[]) => v.filter(Number.isFinite).reduce((s, z) => s + z, 0) / v.filter(Number.isFinite).length;
    console.log(
      `seed ${config.seed}: ${x}/${n} → ${y}/${n} (+${g} −${l})  mixed ${mean(train.map((t) => mixedGroups(t).mixed)).toFixed(2)} (first episodes ${mean(train.map((t) => mixedGroups(t).mixedFirst)).toFixed(2)})  branch episodes ${mean(train.map((t) => t.filter((e) => e.branch).length)).toFixed(1)} per iteration  ${mean(metrics.slice(1).map((m) => (m['time/iteration_s'] as number) ?? NaN)).toFixed(0)} s per iteration`,
    );
    gained += g;
    lost += l;
    before += x;
    after += y;
    pairs += n;
  }
  console.log(
    `pooled: ${before}/${pairs} → ${after}/${pairs} (+${gained} −${lost}, sign test p = ${(signTestP(gained, lost) ?? 1).toFixed(4)})`,
  );
  const fb = failureBreakdown(firstEps, tasks);
  const fa = failureBreakdown(lastEps, tasks);
  console.log('held-out failure labels, share of episodes, first → last evaluation:');
  for (const label of FAILURE_LABELS)
    if (fb[label] > 0 || fa[label] > 0) console.log(`  ${label.padEnd(24)} ${fb[label].toFixed(2)} → ${fa[label].toFixed(2)}`);
}
