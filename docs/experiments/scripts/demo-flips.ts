// The held-out pairs of demo runs that changed between the first evaluation and the last (same
// task and episode seed), counted by task, by sign, and by the turn and command where the episode
// after first differs from the one before.
//   npx tsx docs/experiments/scripts/demo-flips.ts RUN_DIR [RUN_DIR …]
import * as fs from 'node:fs';
import * as path from 'node:path';
import { RunDir } from '../../../src/core/run';
import type { Trajectory } from '../../../src/core/schema';

const counts = new Map<string, number>();
for (const dir of process.argv.slice(2)) {
  const run = RunDir.open(dir);
  const evaluated = fs
    .readdirSync(path.join(dir, 'iterations'))
    .map(Number)
    .filter((n) => fs.existsSync(path.join(dir, 'iterations', String(n), 'heldout.jsonl')))
    .sort((a, b) => a - b);
  const key = (t: Trajectory) => `${t.taskId} ${t.trajId.split('-').at(-1)}`;
  const first = new Map(run.readTrajectories(evaluated[0], 'heldout').map((t) => [key(t), t]));
  for (const after of run.readTrajectories(evaluated.at(-1)!, 'heldout')) {
    const before = first.get(key(after));
    if (!before || before.reward.resolved === after.reward.resolved) continue;
    const n = Math.min(before.turns.length, after.turns.length);
    let k = 0;
    while (k < n && before.turns[k].action === after.turns[k].action) k++;
    const command = k < n ? before.turns[k].action.split(/\s+/)[0] : '(same commands)';
    const label = `${after.taskId} ${after.reward.resolved ? 'gained' : 'lost'} at turn ${k + 1} (${command})`;
    counts.set(label, (counts.get(label) ?? 0) + 1);
  }
}
for (const [label, n] of [...counts].sort()) console.log(`${n}  ${label}`);
