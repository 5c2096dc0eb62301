// The pure parts of `tasks reach` (the episodes themselves run in the docker tier): reading the
// numbered suspects out of an observation, the tools' fix of a task from its workspace, and the
// summary by outcome.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Task } from '../../../src/core/schema';
import { shownSuspects, summarizeReach, toolsFix, type ReachRow } from '../../../src/train/tools-reach';

describe('train/tools-reach', () => {
  it('shownSuspects: the numbered lines only, by number; counts and notes are not suspects', () => {
    const obs = [
      '2 failed, 14 passed',
      '[1] calc/ops.py:12: if a < b:',
      '[2] calc/ops.py:3: return x + y',
      '[3] lib/a b.py:7: z = 1',
      '  [4] indented.py:1: not one',
      '(ranking cut short by the time limit: the machine is busy; run tw-suspects again for the full one)',
    ].join('\n');
    const s = shownSuspects(obs);
    assert.deepEqual(
      [...s],
      [
        [1, { path: 'calc/ops.py', line: 12 }],
        [2, { path: 'calc/ops.py', line: 3 }],
      ],
    );
    assert.equal(shownSuspects('0 failed, 3 passed').size, 0);
  });

  it('toolsFix: the mutated line and the tw-cands variant that restores it; none for a task without a mutation', () => {
    const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-reach-'));
    try {
      const src = 'def f(a, b):\n    if a < b:\n        return a\n    return b\n';
      fs.writeFileSync(path.join(ws, 'm.py'), src);
      const start = src.indexOf('<');
      const task = {
        id: 't',
        mutation: {
          file: 'm.py',
          operator: 'flip-comparison',
          nodeKind: 'comparison_operator',
          span: { start, end: start + 1, text: '<' },
          replacement: '<=',
        },
      } as unknown as Task;
      const fix = toolsFix(ws, task)!;
      assert.equal(fix.file, 'm.py');
      assert.equal(fix.line, 2);
      assert.ok(fix.variant !== null && fix.variant >= 1, 'the engine flips < to <=, and tw-cands flips it back');
      // A change tw-cands does not undo (< to >=: it offers >= → > only): no variant.
      const other = { ...task, mutation: { ...task.mutation!, replacement: '>=' } } as Task;
      assert.deepEqual(toolsFix(ws, other), { file: 'm.py', line: 2, variant: null });
      assert.equal(toolsFix(ws, { id: 'x' } as Task), undefined);
      // The file no longer holds the original text there: no fix.
      fs.writeFileSync(path.join(ws, 'm.py'), src.replace('<', '>'));
      assert.equal(toolsFix(ws, task), undefined);
    } finally {
      fs.rmSync(ws, { recursive: true, force: true });
    }
  });

  it('summarizeReach: tasks per outcome, every outcome present, and how many were suspected or had a variant', () => {
    const row = (outcome: ReachRow['outcome'], suspect: number | null, variant: number | null, cutShort = false): ReachRow => ({
      taskId: outcome,
      suspect,
      variant,
      command: null,
      resolved: outcome === 'resolved',
      outcome,
      cutShort,
    });
    const s = summarizeReach([
      row('resolved', 1, 2),
      row('not-suspected', null, 3, true),
      row('no-variant', 2, null),
      row('resolved', 4, 1),
    ]);
    assert.deepEqual(s.outcomes, {
      resolved: 2,
      'not-a-mutation': 0,
      'not-suspected': 1,
      'no-variant': 1,
      'tests-fail': 0,
      'episode-failed': 0,
    });
    assert.deepEqual([s.tasks, s.suspected, s.withVariant, s.cutShort], [4, 3, 3, 1]);
  });
});
