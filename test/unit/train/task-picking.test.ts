// taskSampling: which train tasks an iteration poses. `uniform` is the seeded shuffle runs have
// always used; `informative` draws a task less often for each of its latest groups that scored
// alike (no group-relative signal), and reads that history back from the run directory on a resume.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { RunDir } from '../../../src/core/run';
import { seedOf } from '../../../src/core/random';
import { SCHEMA, type Trajectory } from '../../../src/core/schema';
import { resolveTrainConfig } from '../../../src/train/config';
import { alikeStreaks, groupOutcomes, MAX_ALIKE_STREAK, pastGroupOutcomes, pickTasks, taskWeight } from '../../../src/train/task-picking';

function traj(taskId: string, groupId: string, n: number, reward: number | null, failure?: string): Trajectory {
  const r = {
    turns: 1,
    maxTurns: 6,
    formatError: false,
    efficiencyPenalty: 0,
    formatPenalty: 0,
    passRate: 0,
    resolved: reward === 1,
    reward,
  };
  return {
    schema: SCHEMA.trajectory,
    taskId,
    groupId,
    trajId: `${groupId}-${n}`,
    checkpoint: 'c',
    seed: n,
    turns: [],
    reward: r,
    ...(failure ? { failure } : {}),
  } as unknown as Trajectory;
}

const tasks = Array.from({ length: 18 }, (_, i) => ({ id: `mut-${i}` }));

describe('train/task-picking: the tasks an iteration poses', () => {
  it('uniform is the seeded shuffle of the train split, its first tasksPerIteration, cycled when the split is smaller', () => {
    for (const n of [1, 2, 7]) {
      const expected = [...tasks].sort((a, b) => seedOf(5, n, a.id) - seedOf(5, n, b.id)).slice(0, 6);
      assert.deepEqual(pickTasks(tasks, 6, 5, n, 'uniform'), expected);
    }
    const two = tasks.slice(0, 2);
    const picked = pickTasks(two, 5, 0, 1, 'uniform').map((t) => t.id);
    assert.equal(picked.length, 5);
    assert.deepEqual(picked.slice(2), [picked[0], picked[1], picked[0]]);
    assert.notEqual(picked[0], picked[1]);
  });

  it('informative with no history (or every task alike as long) draws exactly as uniform does', () => {
    for (const n of [1, 3, 9]) {
      const uniform = pickTasks(tasks, 6, 2, n, 'uniform');
      assert.deepEqual(pickTasks(tasks, 6, 2, n, 'informative'), uniform);
      assert.deepEqual(pickTasks(tasks, 6, 2, n, 'informative', new Map(tasks.map((t) => [t.id, 3]))), uniform);
    }
  });

  it('a group counts as alike when its scored episodes were all resolved or none, whatever the penalties did to their rewards; failed episodes and lone episodes say nothing', () => {
    const out = groupOutcomes([
      traj('a', 'it1-t0', 0, 1),
      traj('a', 'it1-t0', 1, 1),
      traj('b', 'it1-t1', 0, 1),
      traj('b', 'it1-t1', 1, 0.45),
      traj('c', 'it1-t2', 0, 0.5),
      traj('c', 'it1-t2', 1, null, 'sandbox died'),
      traj('d', 'it1-t3', 0, 0),
      traj('d', 'it1-t3', 1, 0),
      traj('d', 'it1-t3', 2, 1, 'sandbox died'),
      // None resolved: rewards set apart by a repeat penalty, still no signal about the fix.
      traj('e', 'it1-t4', 0, 0.5),
      traj('e', 'it1-t4', 1, 0.45),
    ]);
    // c has one scored episode: left out. d's failed episode (whatever it says) does not count.
    assert.deepEqual(out, [
      { taskId: 'a', alike: true },
      { taskId: 'b', alike: false },
      { taskId: 'd', alike: true },
      { taskId: 'e', alike: true },
    ]);
  });

  it('a streak counts the latest alike groups in a row, restarts at a group that differed, and stops at the cap', () => {
    const s = alikeStreaks([
      { taskId: 'a', alike: true },
      { taskId: 'b', alike: true },
      { taskId: 'a', alike: true },
      { taskId: 'b', alike: false },
      ...Array.from({ length: 9 }, () => ({ taskId: 'c', alike: true })),
    ]);
    assert.equal(s.get('a'), 2);
    assert.equal(s.get('b'), 0);
    assert.equal(s.get('c'), MAX_ALIKE_STREAK);
    assert.equal(s.get('d'), undefined);
    assert.deepEqual([0, 1, 2, 4, 9].map(taskWeight), [1, 0.5, 0.25, 1 / 16, 1 / 16]);
  });

  it('informative draws a task in proportion to its weight: over many iterations a task alike twice in a row comes first one time in five against a fresh one', () => {
    const pair = [{ id: 'fresh' }, { id: 'stale' }];
    const streaks = new Map([['stale', 2]]);
    let fresh = 0;
    const N = 4000;
    for (let n = 1; n <= N; n++) if (pickTasks(pair, 1, 0, n, 'informative', streaks)[0].id === 'fresh') fresh++;
    // P(fresh first) = 1 / (1 + 1/4) = 0.8; sd of the count ≈ 25.
    assert.ok(Math.abs(fresh / N - 0.8) < 0.025, `fresh first in ${fresh} of ${N}`);
    // Uniform would not tell them apart.
    let uni = 0;
    for (let n = 1; n <= N; n++) if (pickTasks(pair, 1, 0, n, 'uniform')[0].id === 'fresh') uni++;
    assert.ok(Math.abs(uni / N - 0.5) < 0.03, `uniform: fresh first in ${uni} of ${N}`);
  });

  it('on 18 tasks of which 12 keep scoring alike, the six that still differ fill most of an iteration', () => {
    const streaks = new Map(tasks.slice(6).map((t) => [t.id, MAX_ALIKE_STREAK]));
    let informative = 0;
    for (let n = 1; n <= 200; n++)
      informative += pickTasks(tasks, 6, 0, n, 'informative', streaks).filter((t) => !streaks.has(t.id)).length;
    // Uniform would average 2 of 6; the weights 1 vs 1/16 give about 5.
    assert.ok(informative / 200 > 4.5, `mean ${informative / 200} of 6`);
  });

  it("reads a run's history back from its iterations' train episodes, oldest first, so a resume picks as the run would have", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-task-picking-'));
    try {
      const c = resolveTrainConfig({ workspace: dir, taskSampling: 'informative' });
      const run = RunDir.create(dir, 'r1', c);
      run.writeTrajectories(1, 'train', [
        traj('a', 'it1-t0', 0, 0),
        traj('a', 'it1-t0', 1, 0),
        traj('b', 'it1-t1', 0, 0),
        traj('b', 'it1-t1', 1, 1),
      ]);
      run.writeTrajectories(2, 'train', [traj('a', 'it2-t0', 0, 1), traj('a', 'it2-t0', 1, 1)]);
      // Held-out episodes are not part of it.
      run.writeTrajectories(2, 'heldout', [traj('z', 'it2-h0', 0, 0), traj('z', 'it2-h0', 1, 0)]);
      const past = pastGroupOutcomes(RunDir.open(run.dir), 2);
      assert.deepEqual(past, [
        { taskId: 'a', alike: true },
        { taskId: 'b', alike: false },
        { taskId: 'a', alike: true },
      ]);
      assert.deepEqual(pastGroupOutcomes(run, 1), past.slice(0, 2));
      assert.deepEqual(pastGroupOutcomes(run, 0), []);
      assert.equal(alikeStreaks(past).get('a'), 2);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the config field takes uniform or informative and refuses anything else, naming both', () => {
    assert.equal(resolveTrainConfig({ workspace: '.' }).taskSampling, 'uniform');
    assert.equal(resolveTrainConfig({ workspace: '.', taskSampling: 'informative' }).taskSampling, 'informative');
    assert.throws(
      () => resolveTrainConfig({ workspace: '.', taskSampling: 'curriculum' as never }),
      /taskSampling.*uniform or informative.*"curriculum"/,
    );
  });
});
