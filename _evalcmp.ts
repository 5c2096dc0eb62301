// temp: held-out eval of the warm start at two action budgets (not committed)
import * as fs from 'node:fs';
import { readTaskFile } from './src/tasks/taskfile';
import { resolveTrainConfig } from './src/train/config';
import { openRig, evaluateTasks, summarizeEval } from './src/train/run';
(async () => {
  const [tasksFile, splits, mat, samples] = process.argv.slice(2);
  const held = new Set(JSON.parse(fs.readFileSync(splits, 'utf8')).heldout);
  const tasks = readTaskFile(tasksFile).filter((t) => held.has(t.id));
  const c = resolveTrainConfig({ workspace: '/work/main/examples/demo-python', maxTurns: 6, concurrency: 6, seed: 0, maxActionTokens: Number(mat) });
  const model = '/work/main/dist/models/turnwise-tiny';
  const rig = await openRig({ runId: `evcmp-${process.pid}`, workspace: c.workspace, language: 'python', checkpoint: model, config: c, onLog: () => undefined });
  try {
    for (const s of [0, Number(samples)]) {
      const r = await evaluateTasks(rig, tasks, { iteration: 0, seed: 0, config: c, checkpoint: model, samples: s || undefined });
      const sum = summarizeEval(r.trajectories);
      fs.writeFileSync(`/tmp/ev/mat${mat}-s${s}.jsonl`, r.trajectories.map((t) => JSON.stringify(t)).join('\n'));
      console.log(JSON.stringify({ mat, samples: s, resolved: sum.resolved, fe: sum.format_error_rate, tasks: sum.tasks.map((t) => `${t.taskId.slice(4, 9)}:${t.resolved ? 1 : 0}/${t.formatErrors ?? 0}`).join(' ') }));
    }
  } finally {
    await rig.close();
  }
})();
