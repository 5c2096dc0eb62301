// Turn-level failure labels (src/agent/diagnosis.ts). Against a hand-labelled set of 88 turns of
// real episodes (turnwise-tiny on the demo workspace, labelled by reading each turn against the
// labels' meanings, before the labeller ran on them), and on made-up episodes for the labels the
// real ones do not show.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { failureBreakdown, failureLabels, labelTurns, passedSinceLastEdit, turnFailed, FAILURE_LABELS } from '../../../src/agent/diagnosis';
import { SCHEMA, type Task, type Trajectory, type Turn } from '../../../src/core/schema';

const FIXTURE = path.join(__dirname, '..', '..', 'fixtures', 'diagnosis', 'demo-episodes.jsonl');

interface Labelled {
  task: Task;
  trajectory: Trajectory;
  labels: string[][];
}

const fixture: Labelled[] = fs
  .readFileSync(FIXTURE, 'utf8')
  .split('\n')
  .filter(Boolean)
  .map((l) => JSON.parse(l) as Labelled);

const turn = (index: number, action: string, observation: string, extra: Partial<Turn> = {}): Turn => ({
  index,
  action,
  observation,
  exitCode: observation.startsWith('exit ') ? Number(observation.slice(5).split('\n')[0]) : null,
  durationMs: 1,
  ...extra,
});

function traj(turns: Turn[], resolved: boolean, maxTurns = 6): Trajectory {
  return {
    schema: SCHEMA.trajectory,
    taskId: 't',
    groupId: 'g',
    trajId: 'e',
    checkpoint: 'c',
    turns,
    reward: {
      passRate: resolved ? 1 : 0.5,
      resolved,
      turns: turns.length,
      maxTurns,
      formatError: false,
      efficiencyPenalty: 0,
      formatPenalty: 0,
      reward: resolved ? 1 : 0,
    },
  } as Trajectory;
}

const mutated = 'def f(x):\n    return x + 2\n';
const original = 'def f(x):\n    return x + 1\n';
const task = {
  id: 't',
  mutation: { file: 'pkg/m.py', nodeKind: 'integer', operator: 'const', span: { start: 25, end: 26, text: '1' }, replacement: '2' },
} as unknown as Task;

describe('agent/diagnosis: failure labels', () => {
  it('agree with the hand labels on at least 90% of 88 real turns', () => {
    let turns = 0;
    let agree = 0;
    const misses: string[] = [];
    for (const f of fixture) {
      const got = failureLabels(f.trajectory, f.task);
      f.labels.forEach((want, i) => {
        turns++;
        if ([...want].sort().join() === [...got[i]].sort().join()) agree++;
        else misses.push(`${f.trajectory.trajId} turn ${i}: hand ${want.join('+') || '-'}, labeller ${got[i].join('+') || '-'}`);
      });
    }
    assert.ok(turns >= 50, `${turns} turns`);
    assert.ok(agree / turns >= 0.9, `agreement ${agree}/${turns}:\n${misses.join('\n')}`);
    // Every label the fixture holds is found somewhere.
    const held = new Set(fixture.flatMap((f) => f.labels.flat()));
    const found = new Set(fixture.flatMap((f) => failureLabels(f.trajectory, f.task).flat()));
    for (const l of held) assert.ok(found.has(l as never), `${l} never found`);
  });

  it('test never run, submit without a pass, wrong file, a command timeout', () => {
    const t = traj(
      [
        turn(0, 'timeout 99 tw-suspects', 'timeout\n'),
        turn(1, "sed -i 's/+ 2/+ 1/' pkg/other.py", 'exit 0\n', { edits: [{ path: 'pkg/other.py', before: 'a', after: 'b' }] }),
        turn(2, 'submit', ''),
      ],
      false,
    );
    assert.deepEqual(failureLabels(t, task), [['command-timeout'], ['wrong-file'], ['submit-without-pass', 'test-never-run']]);
    // A test file edited is not the wrong file (the scoring restores tests anyway).
    const tests = traj(
      [turn(0, 'echo x > tests/test_m.py', 'exit 0\n', { edits: [{ path: 'tests/test_m.py', before: 'a', after: 'b' }] })],
      false,
      8,
    );
    assert.deepEqual(failureLabels(tests, task), [['test-never-run']]);
  });

  it('the right fix in the workspace, then undone: labelled where it was undone', () => {
    const t = traj(
      [
        turn(0, "sed -i 's/+ 2/+ 1/' pkg/m.py", 'exit 0\n', { edits: [{ path: 'pkg/m.py', before: mutated, after: original }] }),
        turn(1, 'tw-test', 'exit 0\n0 failed, 3 passed'),
        turn(2, 'git checkout -q .', 'exit 0\n', { edits: [{ path: 'pkg/m.py', before: original, after: mutated }] }),
        turn(3, 'submit', ''),
      ],
      false,
    );
    const labels = failureLabels(t, task);
    assert.deepEqual(labels[2], ['right-fix-not-submitted']);
    // The undo is an edit too: nothing was tested after it.
    assert.deepEqual(labels[3], ['submit-without-pass', 'test-never-run']);
    // Resolved: no label for the fix.
    assert.deepEqual(failureLabels(traj(t.turns.slice(0, 2), true), task).flat(), []);
  });

  it('an edit whose tests fail, seen in its own turn or the next; repeats of a failed command; the turn limit', () => {
    const t = traj(
      [
        turn(0, 'tw-apply 1 1', 'exit 0\nedited pkg/m.py:2\n- return x + 2\n+ return x + 3', {
          edits: [{ path: 'pkg/m.py', before: mutated, after: 'x' }],
        }),
        turn(1, 'tw-test', 'exit 1\nFAIL tests/test_m.py::test_f\n1 failed, 2 passed'),
        turn(2, 'tw-edit 1 9 8', "exit 1\ntw-edit: '9' is not on pkg/m.py:2: return x + 3"),
        turn(3, 'tw-edit 1 9 8', "exit 1\ntw-edit: '9' is not on pkg/m.py:2: return x + 3"),
      ],
      false,
      4,
    );
    assert.deepEqual(failureLabels(t, task), [
      ['edit-tests-fail'],
      [],
      ['refused-edit'],
      ['refused-edit', 'repeated-failed-action', 'turn-limit'],
    ]);
  });

  it('a sandbox failure gets no labels; labelTurns writes them onto the turns; the breakdown is per episode', () => {
    const failed = { ...traj([turn(0, 'ls', 'exit 0\n')], false), failure: 'no sandbox' };
    assert.deepEqual(failureLabels(failed), [[]]);
    const a = traj([turn(0, 'tw-edit 1 a b', "exit 0\ntw-edit: 'a' is not on x"), turn(1, 'submit', '')], false);
    const b = traj([turn(0, 'tw-test', 'exit 0\n0 failed, 3 passed'), turn(1, 'submit', '')], true);
    labelTurns(a);
    labelTurns(b);
    assert.deepEqual(a.turns[0].labels, ['refused-edit']);
    assert.equal(b.turns[0].labels, undefined);
    const br = failureBreakdown([a, b, failed]);
    assert.equal(br['refused-edit'], 0.5, 'one of two scored episodes');
    assert.equal(br['submit-without-pass'], 0.5);
    assert.equal(br['turn-limit'], 0);
    assert.deepEqual(Object.keys(br), [...FAILURE_LABELS]);
  });
});

describe('agent/diagnosis: what recovery feedback reads', () => {
  it('turnFailed: a format error, a refused edit, a failing command; not a test run that reports failures', () => {
    assert.equal(turnFailed(turn(0, 'ls nope', 'exit 2\nls: cannot access')), true);
    assert.equal(turnFailed(turn(0, 'tw-edit 1 a b && tw-test || git checkout -q .', "exit 0\ntw-edit: 'a' is not on x")), true);
    assert.equal(turnFailed(turn(0, 'x', 'not run', { formatError: 'empty action' })), true);
    assert.equal(turnFailed(turn(0, 'tw-test', 'exit 1\n1 failed, 2 passed')), false, 'the tests failing is news, not a failed command');
    assert.equal(turnFailed(turn(0, 'tw-show 1', 'exit 0\n...')), false);
  });

  it('passedSinceLastEdit: the last test run after the last edit passed', () => {
    const edit = turn(0, 'tw-apply 1 1', 'exit 0\nedited m.py:2', { edits: [{ path: 'm.py', before: 'a', after: 'b' }] });
    const pass = turn(1, 'tw-test', 'exit 0\n0 failed, 3 passed');
    const fail = turn(1, 'tw-test', 'exit 1\n1 failed, 2 passed');
    assert.equal(passedSinceLastEdit([]), false);
    assert.equal(passedSinceLastEdit([edit]), false);
    assert.equal(passedSinceLastEdit([edit, pass]), true);
    assert.equal(passedSinceLastEdit([edit, fail]), false);
    assert.equal(passedSinceLastEdit([pass, edit]), false, 'an edit after the pass');
  });
});
