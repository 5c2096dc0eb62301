import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseJsonl, readJsonlStrict, writeFileAtomic } from '../../../src/core/fs';
import { TurnwiseError } from '../../../src/core/errors';

describe('core/fs', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-fs-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('writeFileAtomic replaces content and leaves no temp files', () => {
    const f = path.join(dir, 'sub', 'a.json');
    writeFileAtomic(f, 'one');
    writeFileAtomic(f, 'two');
    assert.equal(fs.readFileSync(f, 'utf8'), 'two');
    assert.deepEqual(fs.readdirSync(path.dirname(f)), ['a.json']);
  });

  it('parseJsonl reports every bad line with its 1-based number and skips blank lines', () => {
    const { rows, errors } = parseJsonl<{ a: number }>('{"a":1}\n\n[1]\nnope\n{"a":2}\n', (r) => ((r as { a: unknown }).a === 2 ? ['a must not be 2'] : []));
    assert.deepEqual(rows, [{ a: 1 }]);
    assert.deepEqual(
      errors.map((e) => [e.line, e.reason.split(' (')[0]]),
      [
        [3, 'not a JSON object'],
        [4, 'not valid JSON'],
        [5, 'a must not be 2'],
      ],
    );
  });

  it('readJsonlStrict throws one error listing all bad lines', () => {
    const f = path.join(dir, 't.jsonl');
    fs.writeFileSync(f, 'x\n{"ok":1}\ny\n');
    assert.throws(
      () => readJsonlStrict(f),
      (e: unknown) => e instanceof TurnwiseError && e.code === 'invalid-file' && /:1: /.test(e.message) && /:3: /.test(e.message) && /2 invalid line/.test(e.message),
    );
  });
});
