// The held-out split: deterministic per seed, disjoint, covering every task, never empty on
// either side when there are two tasks or more and a fraction > 0.
import * as assert from 'node:assert/strict';
import { SCHEMA, type Task } from '../../../src/core/schema';
import { splitTasks } from '../../../src/train/split';

const tasks = (n: number): Task[] =>
  Array.from(
    { length: n },
    (_, i) =>
      ({
        schema: SCHEMA.task,
        id: `t${i}`,
        source: 'mutation',
        instruction: '',
        language: 'python',
        testCommand: 'pytest',
        fail_to_pass: ['a'],
        pass_to_pass: [],
      }) as Task,
  );

describe('train/split: splitTasks', () => {
  it('deterministic per seed, and independent of input order', () => {
    const ts = tasks(20);
    const a = splitTasks(ts, 0.25, 7);
    assert.deepEqual(splitTasks(ts, 0.25, 7), a);
    const b = splitTasks([...ts].reverse(), 0.25, 7);
    assert.deepEqual([...b.heldout].sort(), [...a.heldout].sort());
    assert.notDeepEqual(splitTasks(ts, 0.25, 8).heldout.sort(), [...a.heldout].sort(), 'another seed, another split');
  });

  for (const n of [1, 2, 3, 5, 8, 32]) {
    for (const f of [0, 0.1, 0.25, 0.5, 0.9]) {
      it(`${n} tasks, fraction ${f}: disjoint, complete, sizes as asked`, () => {
        const s = splitTasks(tasks(n), f, 1);
        const all = [...s.train, ...s.heldout];
        assert.equal(new Set(all).size, n);
        assert.equal(all.length, n);
        assert.ok(s.train.length >= 1, 'something to train on');
        if (f === 0) assert.equal(s.heldout.length, 0);
        else if (n >= 2) assert.ok(s.heldout.length >= 1, 'held-out not empty');
        if (n >= 2 && f > 0) assert.ok(Math.abs(s.heldout.length - Math.max(1, Math.min(n - 1, Math.round(n * f)))) === 0);
      });
    }
  }
});

describe('train/split: tasks the warm start saw', () => {
  it('are never held out', () => {
    const ts = tasks(10);
    const seen = new Set(['t0', 't1', 't2', 't3', 't4', 't5']);
    for (let seed = 0; seed < 20; seed++) {
      const s = splitTasks(ts, 0.3, seed, seen);
      assert.ok(
        s.heldout.every((id) => !seen.has(id)),
        s.heldout.join(','),
      );
      assert.equal(s.heldout.length, 3);
    }
  });
});
