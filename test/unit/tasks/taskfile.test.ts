import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { TurnwiseError } from '../../../src/core/errors';
import type { Task } from '../../../src/core/schema';
import { FILE_TASK } from '../../support/taskFixture';
import { parseTaskFile, readTaskFile, validateTask, writeTaskFile } from '../../../src/tasks/taskfile';

const good: Task = FILE_TASK;
const line = (o: unknown) => JSON.stringify(o);

describe('tasks/taskfile', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-tasks-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('a valid task has no reasons; a mutation task needs its mutation object', () => {
    assert.deepEqual(validateTask(good), []);
    assert.deepEqual(validateTask({ ...good, source: 'mutation' }), ['a mutation task needs a mutation object']);
    const withMutation = {
      ...good,
      source: 'mutation',
      mutation: { file: 'a.py', nodeKind: 'integer', operator: 'off-by-one', span: { start: 3, end: 4, text: '1' }, replacement: '2' },
    };
    assert.deepEqual(validateTask(withMutation), []);
  });

  it('lists every invalid line with its number and reason, and keeps the good ones', () => {
    const text = [
      line(good),
      '{"schema": "turnwise/task@1", broken',
      line({ ...good, id: 't2', fail_to_pass: [] }),
      '',
      line({ ...good, id: 't3', source: 'web', language: 'cobol' }),
      line({ ...good }),
      line({ ...good, id: 't4', fail_to_pass: ['x'], pass_to_pass: ['x'], extra: 1 }),
      '[]',
    ].join('\n');
    const { tasks, errors } = parseTaskFile(text);
    assert.deepEqual(
      tasks.map((t) => t.id),
      ['t1'],
    );
    const by = (n: number) => errors.filter((e) => e.line === n).map((e) => e.reason);
    assert.match(by(2)[0], /not valid JSON/);
    assert.deepEqual(by(3), ['fail_to_pass must name at least one test']);
    assert.equal(by(4).length, 0, 'blank lines are fine');
    assert.equal(by(5).length, 2);
    assert.match(by(5).join('|'), /source must be one of.*"web"/);
    assert.match(by(5).join('|'), /language must be one of.*"cobol"/);
    assert.deepEqual(by(6), ['duplicate id "t1" (first on line 1)']);
    assert.deepEqual(by(7), ['"x" is in both fail_to_pass and pass_to_pass', 'unknown field "extra"']);
    assert.deepEqual(by(8), ['not a JSON object']);
  });

  it('readTaskFile throws one error naming all bad lines, and nothing else happens', () => {
    const f = path.join(dir, 'tasks.jsonl');
    fs.writeFileSync(f, [line(good), 'nope', line({ ...good, id: 7 }), line({ ...good, id: 'ok2' })].join('\n'));
    assert.throws(
      () => readTaskFile(f),
      (e: unknown) => {
        assert.ok(e instanceof TurnwiseError);
        assert.equal(e.code, 'invalid-file');
        assert.match(e.message, /has 2 invalid line\(s\)/);
        assert.match(e.message, /tasks\.jsonl:2: not valid JSON/);
        assert.match(e.message, /tasks\.jsonl:3: id must be a non-empty string/);
        assert.doesNotMatch(e.message, /:1:|:4:/);
        assert.match(e.hint!, /nothing was run/);
        return true;
      },
    );
  });

  it('round-trips through writeTaskFile, and a missing or empty file is a clear error', () => {
    const f = path.join(dir, 'out.jsonl');
    writeTaskFile(f, [good, { ...good, id: 't2' }]);
    assert.deepEqual(
      readTaskFile(f).map((t) => t.id),
      ['t1', 't2'],
    );
    assert.throws(() => readTaskFile(path.join(dir, 'nope.jsonl')), /cannot read task file.*it does not exist/);
    fs.writeFileSync(path.join(dir, 'empty.jsonl'), '\n');
    assert.throws(() => readTaskFile(path.join(dir, 'empty.jsonl')), /holds no tasks/);
  });
});
