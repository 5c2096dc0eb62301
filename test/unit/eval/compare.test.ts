// Two evaluations compared episode by episode (bench learn's paired change, `turnwise eval --compare`).
import { strict as assert } from 'node:assert';
import type { Trajectory } from '../../../src/core/schema';
import { signFlipP, signTestP } from '../../../src/core/stats';
import { CUT_SHORT_MARKER } from '../../../src/agent/cache';
import { compareEvaluations, pairedChange, sumPaired } from '../../../src/eval/compare';

const ep = (taskId: string, seed: number, resolved: boolean, sampled: boolean, failure?: string, observations: string[] = []) =>
  ({
    taskId,
    seed,
    trajId: sampled ? `evals-0-0-${seed}` : 'eval-0-0',
    turns: observations.map((observation, index) => ({ index, action: 'tw-suspects', observation, exitCode: 1, durationMs: 1 })),
    reward: { resolved },
    ...(failure ? { failure } : {}),
  }) as unknown as Trajectory;

describe('eval/compare: paired evaluations', () => {
  it('pairs episodes by task and seed, greedy and sampled apart; failed or unpaired episodes are left out', () => {
    const before = [
      ep('a', 1, false, true),
      ep('a', 2, true, true),
      ep('b', 1, false, true),
      ep('b', 3, false, true),
      ep('a', 9, false, false),
      ep('c', 1, false, true, 'no sandbox'),
    ];
    const after = [
      ep('a', 1, true, true),
      ep('a', 2, false, true),
      ep('b', 1, true, true),
      ep('d', 1, true, true),
      ep('a', 9, true, false),
      ep('c', 1, true, true),
    ];
    const s = pairedChange(before, after, 'sampled');
    // Task a: +1 −1 (net 0, left out of the nets); task b: +1.
    assert.deepEqual(s, { pairs: 3, gained: 2, lost: 1, p_value: 1, task_nets: { b: 1 }, p_value_tasks: 1 });
    assert.deepEqual(pairedChange(before, after, 'greedy'), {
      pairs: 1,
      gained: 1,
      lost: 0,
      p_value: 1,
      task_nets: { a: 1 },
      p_value_tasks: 1,
    });
    // Summed: task b's nets add up (the same task under another seed is one cluster), c is new.
    const sum = sumPaired([s, { pairs: 10, gained: 4, lost: 0, p_value: null, task_nets: { b: 3, c: 1 }, p_value_tasks: null }]);
    assert.deepEqual({ pairs: sum.pairs, gained: sum.gained, lost: sum.lost }, { pairs: 13, gained: 6, lost: 1 });
    assert.ok(Math.abs(sum.p_value! - signTestP(6, 1)!) < 1e-12);
    assert.deepEqual(sum.task_nets, { b: 4, c: 1 });
    assert.equal(sum.p_value_tasks, signFlipP([4, 1]));
    assert.equal(sum.p_value_tasks, 0.5, 'two tasks that both gained: 2 of 4 sign patterns reach |5|');
  });

  it('one task that flipped all of its samples is one change by task: the sign test says p < 0.01, the test by task p = 1', () => {
    const before = Array.from({ length: 8 }, (_, k) => ep('a', k, false, true));
    const after = Array.from({ length: 8 }, (_, k) => ep('a', k, true, true));
    const s = pairedChange([...before, ep('b', 0, true, true)], [...after, ep('b', 0, true, true)], 'sampled');
    assert.deepEqual([s.gained, s.lost, s.task_nets], [8, 0, { a: 8 }]);
    assert.ok(s.p_value! < 0.01);
    assert.equal(s.p_value_tasks, 1);
  });

  it('compareEvaluations: per-task rows, the unpaired on each side, and cut-short tw-suspects answers counted', () => {
    const cut = `a.py:3: x\n${CUT_SHORT_MARKER}: the machine is busy)`;
    // `before` is a larger evaluation (another task set): its extra task has no twin.
    const before = [
      ep('a', 7, false, false),
      ep('a', 1, false, true),
      ep('a', 2, true, true),
      ep('b', 1, true, true, undefined, [cut, 'ok']),
      ep('z', 1, true, true),
    ];
    const after = [
      ep('a', 7, true, false),
      ep('a', 1, true, true),
      ep('a', 2, true, true),
      ep('b', 1, false, true, undefined, [cut]),
      ep('a', 5, true, true, 'runner failed'),
    ];
    const c = compareEvaluations(before, after);
    assert.deepEqual(c.greedy, { pairs: 1, gained: 1, lost: 0, p_value: 1, task_nets: { a: 1 }, p_value_tasks: 1 });
    assert.deepEqual(c.sampled, { pairs: 3, gained: 1, lost: 1, p_value: 1, task_nets: { a: 1, b: -1 }, p_value_tasks: 1 });
    assert.deepEqual(c.tasks, [
      { taskId: 'a', kind: 'greedy', pairs: 1, before: 0, after: 1, gained: 1, lost: 0 },
      { taskId: 'a', kind: 'sampled', pairs: 2, before: 1, after: 2, gained: 1, lost: 0 },
      { taskId: 'b', kind: 'sampled', pairs: 1, before: 1, after: 0, gained: 0, lost: 1 },
    ]);
    assert.deepEqual(c.unpaired, { before: 1, after: 1 }, 'z has no twin after; the failed episode after is not paired');
    assert.deepEqual(c.cut_short, { before: 1, after: 1 });
  });
});
