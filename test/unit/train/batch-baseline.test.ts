// The batch term (src/train/batch-baseline.ts) and its config field, on hand-computed cases.
import * as assert from 'node:assert/strict';
import { SCHEMA, type Trajectory } from '../../../src/core/schema';
import { addBatchBaseline } from '../../../src/train/batch-baseline';
import { resolveTrainConfig } from '../../../src/train/config';

const episode = (id: string, testScore: number, advantages: (number | undefined)[], tokens?: number[]): Trajectory =>
  ({
    schema: SCHEMA.trajectory,
    taskId: 't',
    groupId: id[0],
    trajId: id,
    checkpoint: 'c',
    reward: { resolved: testScore === 1, testScore, reward: testScore },
    turns: advantages.map((a, index) => ({
      index,
      action: 'x',
      observation: '',
      exitCode: 0,
      durationMs: 1,
      ...(a !== undefined ? { advantage: a, advantageComponents: { backbone: a } } : {}),
      ...(tokens && index === 0 ? { tokenAdvantages: tokens } : {}),
    })),
  }) as unknown as Trajectory;

const close = (a: number, b: number) => assert.ok(Math.abs(a - b) < 1e-12, `${a} ≠ ${b}`);

describe('train/batch-baseline: the batch term', () => {
  it('adds w · (score − batch mean) / 0.5 to every turn, token advantages and components included', () => {
    // Group a: both resolved (the group baseline gave 0); group b: one of two resolved.
    const eps = [
      episode('a1', 1, [0, 0], [0, 0, 0]),
      episode('a2', 1, [0]),
      episode('b1', 1, [0.5, 0.5]),
      episode('b2', 0.5, [-0.5, undefined]),
    ];
    const mean = addBatchBaseline(eps, 0.5);
    close(mean, 3.5 / 4);
    // 0.5 · (1 − 0.875) / 0.5 = 0.125; 0.5 · (0.5 − 0.875) / 0.5 = −0.375.
    close(eps[0].turns[0].advantage!, 0.125);
    close(eps[0].turns[1].advantage!, 0.125);
    assert.deepEqual(
      eps[0].turns[0].tokenAdvantages!.map((x) => +x.toFixed(12)),
      [0.125, 0.125, 0.125],
    );
    close(eps[1].turns[0].advantage!, 0.125);
    close(eps[2].turns[0].advantage!, 0.625);
    close(eps[3].turns[0].advantage!, -0.875);
    assert.deepEqual(eps[3].turns[0].advantageComponents, { backbone: -0.5, batch: -0.375 });
    // A turn with no advantage (not trained) stays without one.
    assert.equal(eps[3].turns[1].advantage, undefined);
    // The terms sum to zero over the batch's episodes.
    close(
      [0.125, 0.125, 0.125, -0.375].reduce((a, b) => a + b, 0),
      0,
    );
  });

  it('is off at weight 0, and leaves episodes without a test score out of the mean', () => {
    const eps = [episode('a1', 1, [0.2]), episode('a2', 0, [-0.2])];
    assert.ok(Number.isNaN(addBatchBaseline(eps, 0)));
    assert.deepEqual(
      eps.map((e) => e.turns[0].advantage),
      [0.2, -0.2],
    );
    const broken = episode('b1', NaN, [0]);
    const mean = addBatchBaseline([...eps, broken], 1);
    close(mean, 0.5);
    close(eps[0].turns[0].advantage!, 0.2 + 1);
    close(eps[1].turns[0].advantage!, -0.2 - 1);
    assert.equal(broken.turns[0].advantage, 0);
  });

  it('the config field: 0 by default, a number in [0, 10]', () => {
    assert.equal(resolveTrainConfig({}).batchBaseline, 0);
    assert.equal(resolveTrainConfig({ batchBaseline: 0.5 }).batchBaseline, 0.5);
    assert.throws(() => resolveTrainConfig({ batchBaseline: -1 }), /batchBaseline/);
    assert.throws(() => resolveTrainConfig({ batchBaseline: '1' }), /batchBaseline/);
  });
});
