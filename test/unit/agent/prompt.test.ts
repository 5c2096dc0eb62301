// What the policy sees of a task and of an observation: two failing ids and the count; the
// exit code then the output with its middle elided, head and tail kept.
import * as assert from 'node:assert/strict';
import {
  capMiddle,
  formatErrorObservation,
  OBS_PROMPT_CHARS,
  observationText,
  promptSegments,
  taskText,
  TASK_TESTS_SHOWN,
} from '../../../src/agent/prompt';

describe('agent/prompt', () => {
  it('taskText shows one id plainly', () => {
    assert.equal(
      taskText({ fail_to_pass: ['tests/t.py::test_a'], source: 'mutation' }),
      'Fix the code so this test passes:\ntests/t.py::test_a',
    );
  });

  it(`taskText shows ${TASK_TESTS_SHOWN} of 41 ids and the count of the rest`, () => {
    const ids = Array.from({ length: 41 }, (_, i) => `tests/test_x.py::test_case_${i}`);
    const t = taskText({ fail_to_pass: ids, source: 'failing-tests' });
    assert.match(t, /^Fix the code so these 41 tests pass:\n/);
    assert.ok(t.includes(ids[0]) && t.includes(ids[1]));
    assert.ok(!t.includes(ids[2]));
    assert.match(t, /\(\+39 more\)$/);
    assert.ok(t.length < 200);
  });

  it('taskText keeps the tail of a very long id', () => {
    const id = `tests/${'deep/'.repeat(40)}test_x.py::test_the_end`;
    const t = taskText({ fail_to_pass: [id], source: 'mutation' });
    assert.ok(t.endsWith('test_x.py::test_the_end'));
    assert.ok(t.length < 140);
  });

  it('observationText: exit code, stdout then stderr, trailing space trimmed', () => {
    assert.equal(observationText({ exitCode: 2, stdout: 'out\n\n', stderr: 'err\n' }), 'exit 2\nout\nerr');
    assert.equal(observationText({ exitCode: 0, stdout: '', stderr: '' }), 'exit 0');
    assert.equal(observationText({ exitCode: null, stdout: '', stderr: '', timedOut: true }), 'timeout');
    assert.equal(observationText({ exitCode: null, stdout: 'x', stderr: '' }), 'exit ?\nx');
  });

  it('observationText caps long output: head and tail kept, the middle counted', () => {
    const out = Array.from({ length: 400 }, (_, i) => `L${String(i).padStart(3, '0')}`).join('\n');
    const t = observationText({ exitCode: 1, stdout: out, stderr: '' });
    const body = t.slice('exit 1\n'.length);
    assert.ok(body.startsWith('L000\nL001'));
    assert.ok(body.endsWith('L398\nL399'));
    const m = /…\[(\d+) chars\]…/.exec(body);
    assert.ok(m, body);
    const head = Math.floor((OBS_PROMPT_CHARS * 2) / 3);
    assert.equal(Number(m![1]), out.length - OBS_PROMPT_CHARS);
    assert.equal(body.indexOf('\n…['), head);
    assert.ok(body.length < OBS_PROMPT_CHARS + 40);
  });

  it('capMiddle leaves text within the cap untouched', () => {
    assert.equal(capMiddle('abc', 3), 'abc');
    assert.equal(capMiddle('abcd', 3).replace(/\n…\[\d+ chars\]…\n/, ''), 'abd');
  });

  it('a format error observation says it was not run and what to do', () => {
    assert.match(formatErrorObservation('empty action'), /^not run: empty action\. Reply with one bash command, or submit\.$/);
  });

  it('promptSegments: task, marker, then agent/obs pairs from firstTurn', () => {
    const turns = [0, 1, 2].map((k) => ({ action: `a${k}`, observation: `o${k}` }));
    assert.deepEqual(promptSegments('T', turns, 2), [
      { role: 'task', text: 'T' },
      { role: 'obs', text: '[2 earlier turns omitted]' },
      { role: 'agent', text: 'a2' },
      { role: 'obs', text: 'o2' },
    ]);
    assert.deepEqual(promptSegments('T', turns, 1)[1], { role: 'obs', text: '[1 earlier turn omitted]' });
  });
});
