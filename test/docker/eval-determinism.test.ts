// Docker tier: an evaluation of one checkpoint gives the same episodes however many run at once.
// Greedy decoding is only as stable as the logits: ONNX Runtime's kernels can round differently
// for a different batch shape, and one flipped argmax changes an episode. Evaluations therefore
// generate one row at a time; this runs the same held-out tasks with 1 and with 5 episodes in
// flight (real sandboxes, the shipped policy) and compares every action.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { synthesizeMutationTasks } from '../../src/tasks/synth';
import { resolveTrainConfig, connectRunPool } from '../../src/train/config';
import { evaluateTasks } from '../../src/train/evaluate';
import { openHarness } from '../../src/train/harness';
import type { Task, Trajectory } from '../../src/core/schema';

const root = path.join(__dirname, '..', '..');
const demo = path.join(root, 'examples', 'demo-python');

describe('docker: evaluation does not depend on how many episodes run at once', function () {
  this.timeout(900_000);
  let dir: string;

  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-eval-det-'));
    fs.cpSync(path.join(root, 'models', 'turnwise-tiny'), path.join(dir, 'model'), { recursive: true });
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('greedy and sampled evaluations: identical actions with 1 and 5 episodes in flight', async () => {
    const model = path.join(dir, 'model');
    const runId = `eval-det-${process.pid}`;
    const base = resolveTrainConfig({ workspace: demo, maxTurns: 3, executionProvider: 'cpu', seed: 5, concurrency: 5 });
    const pool = await connectRunPool(runId, base);
    try {
      const tasks: Task[] = (await synthesizeMutationTasks({ workspace: demo, pool, seed: 11, max: 5 })).tasks;
      assert.ok(tasks.length >= 4, `tasks synthesized: ${tasks.length}`);
      const harness = await openHarness({ runId, workspace: demo, language: 'python', checkpoint: model, config: base, pool });
      try {
        // Actions, and the log-probs of their tokens to the last bit: a different batch shape shows
        // there long before it flips an argmax.
        const actions = (ts: Trajectory[]) =>
          ts.map(
            (t) =>
              `${t.taskId} ${t.trajId.split('-').slice(2).join('-')}: ${t.turns.map((u) => `${u.action} [${(u.logprobs ?? []).join(',')}]`).join(' ⏎ ')}`,
          );
        const run = async (concurrency: number, samples?: number) => {
          const r = await evaluateTasks(harness, tasks, {
            iteration: 0,
            seed: base.seed,
            config: { ...base, concurrency },
            checkpoint: model,
            samples,
          });
          assert.equal(r.trajectories.filter((t) => t.failure).length, 0, 'no failed episode');
          return { actions: actions(r.trajectories), meanBatch: r.meanBatch };
        };
        const one = await run(1);
        const five = await run(5);
        assert.equal(five.meanBatch, 1, 'evaluations generate one row at a time');
        assert.deepEqual(five.actions, one.actions, 'greedy episodes');
        const s1 = await run(1, 1);
        const s5 = await run(5, 1);
        assert.deepEqual(s5.actions, s1.actions, 'sampled episodes (same seeds)');
      } finally {
        await harness.close();
      }
    } finally {
      await pool.close();
    }
  });
});
