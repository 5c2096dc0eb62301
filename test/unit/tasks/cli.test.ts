// The task commands through the real CLI entry point (no Docker needed for these paths).
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from '../../../src/cli/main';
import { SCHEMA } from '../../../src/core/schema';

async function cli(argv: string[]) {
  let out = '';
  let err = '';
  const code = await main(argv, { out: (t) => (out += t + '\n'), err: (t) => (err += t + '\n') });
  return { code, out, err };
}

const task = {
  schema: SCHEMA.task,
  id: 't1',
  source: 'file',
  instruction: 'fix it',
  language: 'python',
  testCommand: 'pytest',
  fail_to_pass: ['a::b'],
  pass_to_pass: [],
};

describe('cli: turnwise tasks', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-cli-tasks-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('tasks check: a valid file passes with a count per source', async () => {
    const f = path.join(dir, 'ok.jsonl');
    fs.writeFileSync(f, JSON.stringify(task) + '\n' + JSON.stringify({ ...task, id: 't2' }) + '\n');
    const r = await cli(['tasks', 'check', f]);
    assert.equal(r.code, 0);
    assert.match(r.out, /2 valid task\(s\) \(file 2\)/);
  });

  it('tasks check: lists every bad line and exits 1; --json carries the same', async () => {
    const f = path.join(dir, 'bad.jsonl');
    fs.writeFileSync(
      f,
      [JSON.stringify(task), '{oops', JSON.stringify({ ...task, id: 't1' }), JSON.stringify({ ...task, id: 't3', fail_to_pass: 'a' })].join(
        '\n',
      ),
    );
    const r = await cli(['tasks', 'check', f]);
    assert.equal(r.code, 1);
    assert.match(r.out, /3 invalid line\(s\); nothing will run/);
    assert.match(r.out, /bad\.jsonl:2: not valid JSON/);
    assert.match(r.out, /bad\.jsonl:3: duplicate id "t1" \(first on line 1\)/);
    assert.match(r.out, /bad\.jsonl:4: fail_to_pass must be an array/);
    const j = await cli(['tasks', 'check', f, '--json']);
    const doc = JSON.parse(j.out);
    assert.equal(doc.ok, false);
    assert.equal(doc.valid, 1);
    assert.deepEqual([...new Set(doc.errors.map((e: { line: number }) => e.line))], [2, 3, 4]);
  });

  it('usage errors exit 2 and name the problem; a missing workspace is a clear error', async () => {
    let r = await cli(['tasks', 'synth', '--out', path.join(dir, 'x.jsonl')]);
    assert.equal(r.code, 2);
    assert.match(r.err, /--workspace is required/);
    r = await cli(['tasks', 'synth', '--workspace', dir, '--out', path.join(dir, 'x.jsonl'), '--test-command', 'make test']);
    assert.equal(r.code, 2);
    assert.match(r.err, /--test-command needs --report-format/);
    r = await cli(['tasks', 'failing', '--workspace', path.join(dir, 'nope'), '--out', path.join(dir, 'x.jsonl'), '--json']);
    assert.equal(r.code, 1);
    assert.equal(JSON.parse(r.out).error.code, 'not-found');
    r = await cli(['tasks', 'check']);
    assert.equal(r.code, 2);
  });
});
