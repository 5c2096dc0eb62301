// A tampered episode (reward 0, tasks/tamper.ts) is counted where a run and an evaluation report
// their episodes: `episodes/tampered` in metrics and `tampered` in the evaluation summary.
import * as assert from 'node:assert/strict';
import { SCHEMA, type Trajectory } from '../../../src/core/schema';
import { summarizeEval } from '../../../src/train/evaluate';
import { episodeMetrics } from '../../../src/train/metrics';

function traj(id: string, reward: Trajectory['reward']): Trajectory {
  return {
    schema: SCHEMA.trajectory,
    taskId: id,
    groupId: id,
    trajId: id,
    checkpoint: 'c',
    seed: 0,
    turns: [{ index: 0, action: 'submit', observation: '', exitCode: 0, durationMs: 0 }],
    reward,
  } as Trajectory;
}

describe('train/metrics, train/evaluate: tampered episodes in the summaries', () => {
  it('counts them, keeps their reason per task, and scores them as unresolved zeros', () => {
    const base = { turns: 1, maxTurns: 8, formatError: false, efficiencyPenalty: 0, formatPenalty: 0 };
    const s = summarizeEval([
      traj('a', { ...base, passRate: 1, resolved: true, reward: 0.99 }),
      traj('b', { ...base, passRate: 0, resolved: false, reward: 0, tampered: 'shop/x.py: registers exit handlers (atexit)' }),
    ]);
    assert.equal(s.tampered, 1);
    assert.equal(s.resolved, 0.5);
    assert.equal(s.tasks.find((t) => t.taskId === 'b')!.tampered, 'shop/x.py: registers exit handlers (atexit)');
    assert.equal(s.tasks.find((t) => t.taskId === 'a')!.tampered, undefined);
  });

  it("a run's metrics row counts them as episodes/tampered, scored as unresolved zeros", () => {
    const base = { turns: 1, maxTurns: 8, formatError: false, efficiencyPenalty: 0, formatPenalty: 0 };
    const m = episodeMetrics('train/', [
      traj('a', { ...base, passRate: 1, resolved: true, reward: 0.99 }),
      traj('b', { ...base, passRate: 0, resolved: false, reward: 0, tampered: 'shop/x.py: patches pytest reports' }),
      traj('c', { ...base, passRate: 0, resolved: false, reward: 0, tampered: 'report names tests the test files do not define' }),
    ]);
    assert.equal(m['train/episodes/tampered'], 2);
    assert.equal(m['train/episodes'], 3);
    assert.ok(Math.abs(m['train/resolved'] - 1 / 3) < 1e-12);
    assert.ok(Math.abs(m['train/reward/mean'] - 0.33) < 1e-12);
    assert.equal(episodeMetrics('eval/', [traj('a', { ...base, passRate: 1, resolved: true, reward: 1 })])['eval/episodes/tampered'], 0);
  });
});
