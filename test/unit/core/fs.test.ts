import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  interruptedSwapOf,
  outputPathProblem,
  parseJsonl,
  readJsonlStrict,
  readUserTextFile,
  replaceDirAtomic,
  summarizeLineErrors,
  SWAP_MARKER,
  writeFileAtomic,
} from '../../../src/core/fs';
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
    const { rows, errors } = parseJsonl<{ a: number }>('{"a":1}\n\n[1]\nnope\n{"a":2}\n', (r) =>
      (r as { a: unknown }).a === 2 ? ['a must not be 2'] : [],
    );
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
      (e: unknown) =>
        e instanceof TurnwiseError &&
        e.code === 'invalid-file' &&
        /:1: /.test(e.message) &&
        /:3: /.test(e.message) &&
        /2 invalid line/.test(e.message),
    );
  });

  it('replaceDirAtomic swaps whole directories and recovers only its own marked leftover', () => {
    const t = path.join(dir, 'ck');
    replaceDirAtomic(t, (tmp) => fs.writeFileSync(path.join(tmp, 'a'), '1'));
    replaceDirAtomic(t, (tmp) => fs.writeFileSync(path.join(tmp, 'b'), '2'));
    assert.deepEqual(fs.readdirSync(t), ['b']);
    assert.deepEqual(fs.readdirSync(dir), ['ck']);
    // A build that throws leaves the old directory as it was and no temp directory.
    assert.throws(
      () =>
        replaceDirAtomic(t, () => {
          throw new Error('boom');
        }),
      /boom/,
    );
    assert.deepEqual(fs.readdirSync(t), ['b']);
    assert.deepEqual(fs.readdirSync(dir), ['ck']);
    // A user's look-alike folders are never taken for a leftover, even with the target missing.
    fs.rmSync(t, { recursive: true });
    fs.mkdirSync(path.join(dir, 'ck.old-1'));
    fs.mkdirSync(path.join(dir, 'ck.turnwise-old-1-1'));
    fs.writeFileSync(path.join(dir, 'ck.turnwise-old-1-1', SWAP_MARKER), JSON.stringify({ schema: 'turnwise/swap@1', target: 'other' }));
    assert.equal(interruptedSwapOf(t), undefined);
    replaceDirAtomic(t, (tmp) => fs.writeFileSync(path.join(tmp, 'c'), '3'));
    assert.deepEqual(fs.readdirSync(dir).sort(), ['ck', 'ck.old-1', 'ck.turnwise-old-1-1']);
  });

  it('outputPathProblem names a folder, a file on the path, or a read-only folder before any work', () => {
    fs.writeFileSync(path.join(dir, 'f'), 'x');
    assert.match(outputPathProblem(dir)!, /is a folder, not a file/);
    assert.match(
      outputPathProblem(path.join(dir, 'f', 'sub', 'out.jsonl'))!,
      new RegExp(`${path.join(dir, 'f')} is a file, so .* cannot be created under it`),
    );
    assert.equal(outputPathProblem(path.join(dir, 'new', 'deeper', 'out.jsonl')), undefined);
    if (process.getuid?.() !== 0) {
      const ro = path.join(dir, 'ro');
      fs.mkdirSync(ro);
      fs.chmodSync(ro, 0o555);
      assert.match(outputPathProblem(path.join(ro, 'out.jsonl'))!, /not writable/);
      assert.throws(
        () => writeFileAtomic(path.join(ro, 'out.jsonl'), 'x'),
        (e: unknown) => e instanceof TurnwiseError && e.message.includes(path.join(ro, 'out.jsonl')) && !/tmp-/.test(e.message),
      );
      fs.chmodSync(ro, 0o755);
    }
    assert.throws(
      () => writeFileAtomic(path.join(dir, 'f', 'out.jsonl'), 'x'),
      (e: unknown) => e instanceof TurnwiseError && /is a file, so/.test(e.message) && !/tmp-|ENOTDIR/.test(e.message),
    );
  });

  it('readUserTextFile refuses a folder, a binary file and a file over the cap, never echoing bytes', () => {
    const bin = path.join(dir, 'b.bin');
    fs.writeFileSync(bin, Buffer.from([0x1b, 0x5b, 0x32, 0x4a, 0, 1, 2]));
    assert.throws(() => readUserTextFile(dir, 'task file'), /task file .* is a folder, not a file/);
    assert.throws(
      () => readUserTextFile(bin, 'task file'),
      (e: unknown) => e instanceof TurnwiseError && /binary file/.test(e.message) && !e.message.includes('\x1b'),
    );
    fs.writeFileSync(path.join(dir, 'big'), 'x'.repeat(2000));
    assert.throws(() => readUserTextFile(path.join(dir, 'big'), 'file', { maxBytes: 1000 }), /more than the/);
    assert.throws(() => readUserTextFile(path.join(dir, 'nope')), /does not exist/);
  });

  it('summarizeLineErrors prints a repeated problem a few times, then counts it', () => {
    const errors = Array.from({ length: 1000 }, (_, i) => ({ line: i + 1, reason: `not valid JSON (Unexpected token at ${i})` }));
    const lines = summarizeLineErrors('f', [...errors, { line: 1001, reason: 'not a JSON object' }]);
    assert.equal(lines.length, 5);
    assert.match(lines[4], /… and 997 more line\(s\) with: not valid JSON/);
  });
});
