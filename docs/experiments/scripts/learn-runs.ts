// The learn benchmark's summary read back from its run folders (`bench-learn__<estimator>__<seed>__…`),
// for runs whose benchmark was stopped before it printed its JSON, and the failure labels of each
// estimator's held-out episodes at the first and the last evaluation. Only seeds on which every
// estimator finished count, so every comparison is on the same tasks and seeds.
//   npx tsx docs/experiments/scripts/learn-runs.ts RUNS_ROOT [--json]
import * as fs from 'node:fs';
import * as path from 'node:path';
import { learnRunOf, learnSummary, type LearnRun } from '../../../src/bench/learn';
import { FAILURE_LABELS, failureBreakdown } from '../../../src/agent/diagnosis';
import { RunDir } from '../../../src/core/run';
import type { Task, Trajectory } from '../../../src/core/schema';

const root = process.argv[2];
const asJson = process.argv.includes('--json');
const runs: LearnRun[] = [];
const evals = new Map<LearnRun, { first: Trajectory[]; last: Trajectory[] }>();
const tasks = new Map<string, Task>();
let iterations = 0;
for (const name of fs.readdirSync(root).sort()) {
  const m = /^bench-learn__([^_]+)__(\d+)__/.exec(name);
  if (!m) continue;
  const run = RunDir.open(path.join(root, name));
  const config = run.readConfig<{ iterations: number }>();
  const metrics = run.readMetrics();
  if (metrics.length < config.iterations + 1) continue; // unfinished
  iterations = config.iterations;
  for (const line of fs.readFileSync(run.file('tasks.jsonl'), 'utf8').split('\n').filter(Boolean)) {
    const t = JSON.parse(line) as Task;
    tasks.set(t.id, t);
  }
  const r = learnRunOf(run.dir, metrics, { seed: Number(m[2]), estimator: m[1], wallS: NaN });
  runs.push(r);
  evals.set(r, { first: run.readTrajectories(0, 'heldout'), last: r.lastEval ?? [] });
}
const estimators = [...new Set(runs.map((r) => r.estimator))];
const complete = [...new Set(runs.map((r) => r.seed))].filter((s) =>
  estimators.every((e) => runs.some((r) => r.seed === s && r.estimator === e)),
);
const kept = runs.filter((r) => complete.includes(r.seed));
const summary = learnSummary(kept, { iterations, runsRoot: root, config: {} });
if (asJson) {
  console.log(JSON.stringify(summary, null, 2));
} else {
  const f = (c: { gained: number; lost: number; pairs: number; p_value: number | null }) =>
    `+${c.gained} −${c.lost} of ${c.pairs} (p ${c.p_value === null ? '—' : c.p_value.toFixed(3)})`;
  console.log(`seeds ${complete.join(', ')}; ${iterations} iterations; warm start ${summary.resolved_warmstart}`);
  for (const e of estimators) {
    const x = summary.by_estimator[e];
    console.log(
      `${e.padEnd(10)} first → last: greedy ${x.paired ? f(x.paired.greedy) : '—'}, sampled ${x.paired ? f(x.paired.sampled) : '—'}`,
    );
  }
  for (const [k, p] of Object.entries(summary.head_to_head)) console.log(`${k.padEnd(22)} greedy ${f(p.greedy)}, sampled ${f(p.sampled)}`);
  console.log('held-out failure labels, share of episodes, first → last evaluation:');
  const rows = estimators.map((e) => {
    const mine = kept.filter((r) => r.estimator === e).map((r) => evals.get(r)!);
    return {
      e,
      b: failureBreakdown(
        mine.flatMap((x) => x.first),
        tasks,
      ),
      a: failureBreakdown(
        mine.flatMap((x) => x.last),
        tasks,
      ),
    };
  });
  for (const label of FAILURE_LABELS)
    console.log(`  ${label.padEnd(24)} ${rows.map((r) => `${r.e} ${r.b[label].toFixed(2)} → ${r.a[label].toFixed(2)}`).join('   ')}`);
}
