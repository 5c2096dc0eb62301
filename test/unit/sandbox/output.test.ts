import * as assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { CappedOutput, DemuxParser, SentinelScanner } from '../../../src/sandbox/output';

function frame(stream: number, data: Buffer): Buffer {
  const h = Buffer.alloc(8);
  h[0] = stream;
  h.writeUInt32BE(data.length, 4);
  return Buffer.concat([h, data]);
}

/** Splits a buffer at random points (seeded by a simple LCG so failures reproduce). */
function chop(buf: Buffer, seed: number): Buffer[] {
  const parts: Buffer[] = [];
  let s = seed;
  for (let i = 0; i < buf.length;) {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    const n = 1 + (s % 13);
    parts.push(buf.subarray(i, i + n));
    i += n;
  }
  return parts;
}

describe('sandbox/output', () => {
  it('DemuxParser routes stdout and stderr frames however the bytes are split', () => {
    const a = randomBytes(300);
    const b = randomBytes(77);
    const c = randomBytes(5);
    const wire = Buffer.concat([frame(1, a), frame(2, b), frame(1, c), frame(2, Buffer.alloc(0))]);
    for (const seed of [1, 2, 3, 42]) {
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      const p = new DemuxParser((s, d) => (s === 1 ? out : err).push(Buffer.from(d)));
      for (const part of chop(wire, seed)) p.push(part);
      assert.deepEqual(Buffer.concat(out), Buffer.concat([a, c]));
      assert.deepEqual(Buffer.concat(err), b);
    }
  });

  it('CappedOutput keeps exactly the head and tail, counts the rest, whatever the chunking', () => {
    const data = Buffer.from(Array.from({ length: 5000 }, (_, i) => String.fromCharCode(97 + (i % 26))).join(''));
    for (const seed of [7, 8, 9]) {
      const cap = new CappedOutput(100);
      for (const part of chop(data, seed)) cap.write(part);
      assert.equal(cap.total, 5000);
      assert.equal(cap.truncated, true);
      const text = cap.text();
      assert.ok(text.startsWith(data.subarray(0, 50).toString()));
      assert.ok(text.endsWith(data.subarray(4950).toString()));
      assert.match(text, /\[\.\.\. 4900 bytes elided \.\.\.\]/);
    }
    // A big single chunk goes through the fast path and gives the same answer.
    const one = new CappedOutput(100);
    one.write(data);
    const many = new CappedOutput(100);
    for (const part of chop(data, 3)) many.write(part);
    assert.equal(one.text(), many.text());
  });

  it('CappedOutput under the cap returns the bytes unchanged and not truncated', () => {
    const cap = new CappedOutput(100);
    cap.write(Buffer.from('hello '));
    cap.write(Buffer.from('world'));
    assert.equal(cap.text(), 'hello world');
    assert.equal(cap.truncated, false);
  });

  it('SentinelScanner finds a marker split across chunks and passes all earlier bytes on', () => {
    const marker = Buffer.from('\0TWabc123:', 'latin1');
    const body = Buffer.from('output with \0TWabc12 a near-miss and \0 NULs\n');
    const wire = Buffer.concat([body, marker, Buffer.from('0:1:0\0'), Buffer.from('late')]);
    for (const seed of [1, 5, 11, 99]) {
      const got: Buffer[] = [];
      const sc = new SentinelScanner(marker, (d) => got.push(Buffer.from(d)));
      let after = Buffer.alloc(0);
      for (const part of chop(wire, seed)) after = Buffer.concat([after, sc.push(part)]);
      assert.equal(sc.fields, '0:1:0');
      assert.deepEqual(Buffer.concat(got), body);
      assert.equal(after.toString(), 'late');
    }
  });
});
