// `distinct` in a run's metrics: how far a group's episodes differ, the figure that shows a policy
// narrowing to one action sequence per task before its rewards do.
import * as assert from 'node:assert/strict';
import { SCHEMA, type Trajectory } from '../../../src/core/schema';
import { actionDiversity, episodeMetrics } from '../../../src/train/metrics';

const reward = {
  turns: 2,
  maxTurns: 6,
  formatError: false,
  efficiencyPenalty: 0,
  formatPenalty: 0,
  passRate: 0.5,
  resolved: false,
  reward: 0.5,
};

function traj(groupId: string, n: number, actions: string[], failure?: string): Trajectory {
  const turns = actions.map((action, index) => ({ index, action, observation: '', exitCode: 0, durationMs: 0 }));
  return {
    schema: SCHEMA.trajectory,
    taskId: groupId,
    groupId,
    trajId: `${groupId}-${n}`,
    checkpoint: 'c',
    seed: n,
    turns,
    reward,
    ...(failure ? { failure } : {}),
  } as Trajectory;
}

describe('train/metrics: distinct action sequences per group', () => {
  it('is 0 for a group whose episodes all took one path, 1 where each took its own, and averages the groups', () => {
    const same = [0, 1, 2, 3].map((n) => traj('g1', n, ['tw-suspects -n', 'tw-apply 1 1 && tw-test', 'submit']));
    const apart = [0, 1, 2, 3].map((n) => traj('g2', n, ['tw-suspects -n', `tw-apply 1 ${n + 1} && tw-test`, 'submit']));
    assert.equal(actionDiversity(same), 0);
    assert.equal(actionDiversity(apart), 1);
    assert.equal(actionDiversity([...same, ...apart]), 0.5);
    // Two of four: (2 − 1) / (4 − 1).
    const half = [0, 1, 2, 3].map((n) => traj('g3', n, ['tw-suspects -n', n < 2 ? 'submit' : 'tw-cands 1']));
    assert.ok(Math.abs(actionDiversity(half) - 1 / 3) < 1e-12);
  });

  it('tells sequences apart by every action and by where one ends, not by their text run together', () => {
    // Joined with a space these two would read the same; as sequences they differ.
    const a = traj('g', 0, ['tw-show 1', 'submit']);
    const b = traj('g', 1, ['tw-show', '1 submit']);
    assert.equal(actionDiversity([a, b]), 1);
    // A longer episode that begins like a shorter one is another path.
    assert.equal(actionDiversity([traj('h', 0, ['tw-cands 1']), traj('h', 1, ['tw-cands 1', 'submit'])]), 1);
  });

  it('leaves out failed episodes and single-episode groups (greedy evaluation), NaN when nothing is left', () => {
    const greedy = ['t1', 't2'].map((g) => traj(g, 0, ['submit']));
    assert.ok(Number.isNaN(actionDiversity(greedy)));
    const withFailure = [traj('g', 0, ['submit']), traj('g', 1, ['submit']), traj('g', 2, ['tw-cands 1'], 'sandbox exited')];
    assert.equal(actionDiversity(withFailure), 0);
  });

  it('is in the metrics row with its prefix', () => {
    const m = episodeMetrics('heldout/sampled/', [traj('g', 0, ['a']), traj('g', 1, ['b'])]);
    assert.equal(m['heldout/sampled/distinct'], 1);
  });
});
