import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { writeFileAtomic } from '../../../src/core/fs';
import {
  decodeSafetensors,
  encodeSafetensors,
  readSafetensorsFile,
  readSafetensorsHeader,
  safetensorsParts,
  type TensorMap,
} from '../../../src/policy/files/safetensors';

/** Builds a safetensors file by hand from a header object and raw data bytes. */
function handMade(header: object, data: number[]): Uint8Array {
  const h = Buffer.from(JSON.stringify(header));
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(h.length));
  return new Uint8Array(Buffer.concat([len, h, Buffer.from(data)]));
}

describe('policy/safetensors', () => {
  it('writes the format byte for byte: u64 LE header length, space-padded JSON, raw LE data', () => {
    const t: TensorMap = new Map([['w', { dtype: 'F32', shape: [2], data: Float32Array.of(1, -2) }]]);
    const buf = Buffer.from(encodeSafetensors(t));
    const hl = Number(buf.readBigUInt64LE(0));
    assert.equal((8 + hl) % 8, 0);
    assert.deepEqual(JSON.parse(buf.subarray(8, 8 + hl).toString()), { w: { dtype: 'F32', shape: [2], data_offsets: [0, 8] } });
    assert.deepEqual([...buf.subarray(8 + hl)], [0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0]);
  });

  it('round-trips F32 (bit-exact, NaN payloads and -0 included) and I64', () => {
    const f = new Float32Array([0.1, -0, Infinity, 3.4e38, 1e-45]);
    const u = new Uint32Array(f.buffer);
    const nan = new Float32Array(1);
    new Uint32Array(nan.buffer)[0] = 0x7fc00123;
    const t: TensorMap = new Map([
      ['a', { dtype: 'F32', shape: [5], data: f }],
      ['nan', { dtype: 'F32', shape: [1, 1], data: nan }],
      ['step', { dtype: 'I64', shape: [], data: BigInt64Array.of(-(2n ** 62n)) }],
      ['empty', { dtype: 'F32', shape: [0, 3], data: new Float32Array(0) }],
    ]);
    const back = decodeSafetensors(encodeSafetensors(t, { format: 'pt' }));
    assert.deepEqual(back.metadata, { format: 'pt' });
    assert.deepEqual([...new Uint32Array((back.tensors.get('a')!.data as Float32Array).slice().buffer)], [...u]);
    assert.equal(new Uint32Array((back.tensors.get('nan')!.data as Float32Array).slice().buffer)[0], 0x7fc00123);
    assert.equal((back.tensors.get('step')!.data as BigInt64Array)[0], -(2n ** 62n));
    assert.deepEqual(back.tensors.get('step')!.shape, []);
    assert.deepEqual(back.tensors.get('empty')!.shape, [0, 3]);
  });

  it('reads F16 and BF16 (widened to float32)', () => {
    // F16: 1.0 = 0x3c00, -2.5 = 0xc100, 2^-24 (smallest subnormal) = 0x0001. BF16: 1.0 = 0x3f80, -3.0 = 0xc040.
    const buf = handMade(
      { h: { dtype: 'F16', shape: [3], data_offsets: [0, 6] }, b: { dtype: 'BF16', shape: [2], data_offsets: [6, 10] } },
      [0x00, 0x3c, 0x00, 0xc1, 0x01, 0x00, 0x80, 0x3f, 0x40, 0xc0],
    );
    const { tensors } = decodeSafetensors(buf);
    assert.deepEqual([...tensors.get('h')!.data], [1, -2.5, 2 ** -24]);
    assert.equal(tensors.get('h')!.dtype, 'F16');
    assert.deepEqual([...tensors.get('b')!.data], [1, -3]);
  });

  it('refuses damaged files with a reason', () => {
    const good = encodeSafetensors(new Map([['w', { dtype: 'F32', shape: [4], data: new Float32Array(4) }]]));
    assert.throws(
      () => decodeSafetensors(good.subarray(0, good.length - 1), 'm.safetensors'),
      /m.safetensors is not a valid safetensors file: tensor w ends at byte 16 but the data section has 15 bytes/,
    );
    assert.throws(() => decodeSafetensors(good.subarray(0, 5)), /shorter than the 8-byte header/);
    const huge = Uint8Array.from(good);
    huge[5] = 1;
    assert.throws(() => decodeSafetensors(huge), /header length \d+ exceeds the file/);
    assert.throws(
      () => decodeSafetensors(handMade({ w: { dtype: 'F32', shape: [2], data_offsets: [0, 4] } }, [0, 0, 0, 0])),
      /has 4 bytes but F32\[2\] needs 8/,
    );
    assert.throws(
      () => decodeSafetensors(handMade({ w: { dtype: 'F64', shape: [1], data_offsets: [0, 8] } }, new Array(8).fill(0))),
      /unsupported dtype "F64"/,
    );
    assert.throws(
      () => decodeSafetensors(handMade({ w: { dtype: 'F32', shape: [1], data_offsets: [0, 4] } }, new Array(8).fill(0))),
      /4 trailing bytes/,
    );
    const notJson = Uint8Array.from(good);
    notJson[8] = 0x7e; // '{' → '~'
    assert.throws(() => decodeSafetensors(notJson), /header is not JSON/);
  });

  describe('files, read tensor by tensor and written in parts', () => {
    let tmp: string;
    before(() => (tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-st-'))));
    after(() => fs.rmSync(tmp, { recursive: true, force: true }));

    const mixed = (): TensorMap =>
      new Map<string, TensorMap extends Map<string, infer T> ? T : never>([
        ['a', { dtype: 'BF16', shape: [3, 2], data: Float32Array.of(1, -2, 0.5, 3.25, -0, 1e-3) }],
        ['b', { dtype: 'F16', shape: [2], data: Float32Array.of(65504, -0.25) }],
        ['c', { dtype: 'F32', shape: [1, 3], data: Float32Array.of(Math.PI, -1, 7) }],
        ['d', { dtype: 'I64', shape: [2], data: BigInt64Array.of(-5n, 1n << 40n) }],
      ]);

    it('the parts written are the encoded bytes, and the file reads back as the buffer decodes', () => {
      const file = path.join(tmp, 'mixed.safetensors');
      writeFileAtomic(file, safetensorsParts(mixed(), { format: 'pt' }));
      const bytes = fs.readFileSync(file);
      assert.deepEqual(new Uint8Array(bytes), encodeSafetensors(mixed(), { format: 'pt' }));
      const fromFile = readSafetensorsFile(file);
      const fromBuf = decodeSafetensors(bytes);
      assert.deepEqual(fromFile.metadata, { format: 'pt' });
      assert.deepEqual([...fromFile.tensors.keys()], ['a', 'b', 'c', 'd']);
      for (const [k, t] of fromBuf.tensors) assert.deepEqual(fromFile.tensors.get(k), t, k);
      assert.deepEqual(
        [...readSafetensorsHeader(file)].map(([k, h]) => [k, h.dtype, h.shape]),
        [
          ['a', 'BF16', [3, 2]],
          ['b', 'F16', [2]],
          ['c', 'F32', [1, 3]],
          ['d', 'I64', [2]],
        ],
      );
    });

    it('a truncated or missing file is refused naming it, as the buffer decoder refuses it', () => {
      const file = path.join(tmp, 'cut.safetensors');
      const good = encodeSafetensors(mixed());
      fs.writeFileSync(file, good.subarray(0, good.length - 3));
      assert.throws(
        () => readSafetensorsFile(file),
        (e: Error) => e.message.includes(file) && /ends at byte \d+ but the data section has \d+ bytes \(truncated\?\)/.test(e.message),
      );
      assert.throws(() => readSafetensorsHeader(file), /truncated/);
      assert.throws(
        () => readSafetensorsFile(path.join(tmp, 'none.safetensors'), 'copy the folder again'),
        (e: Error & { hint?: string }) => /cannot read .*none\.safetensors: ENOENT/.test(e.message) && e.hint === 'copy the folder again',
      );
    });

    // One read cannot return more than 2 GiB (readFileSync refuses such a file): a model whose
    // single weights file is larger (Llama 3.2 1B in BF16 is 2.47 GB) loads tensor by tensor.
    // The file is sparse: 2.1 GB of zeros except the last value.
    it('reads a file over 2 GiB, its last value included', function () {
      this.timeout(120_000);
      const n = 2 ** 29 + 16; // float32: 2 GiB + 64 bytes of data
      const file = path.join(tmp, 'big.safetensors');
      const head = Buffer.from(JSON.stringify({ big: { dtype: 'F32', shape: [n], data_offsets: [0, 4 * n] } }).padEnd(64, ' '));
      const len = Buffer.alloc(8);
      len.writeBigUInt64LE(BigInt(head.length));
      const fd = fs.openSync(file, 'w');
      fs.writeSync(fd, Buffer.concat([len, head]));
      fs.ftruncateSync(fd, 8 + head.length + 4 * n);
      fs.writeSync(fd, Buffer.from(Float32Array.of(42.5).buffer), 0, 4, 8 + head.length + 4 * (n - 1));
      fs.closeSync(fd);
      assert.ok(fs.statSync(file).size > 2 ** 31);
      const t = readSafetensorsFile(file).tensors.get('big')!;
      assert.equal(t.data.length, n);
      assert.equal(t.data[n - 1], 42.5);
      assert.equal(t.data[n - 2], 0);
      fs.rmSync(file);
    });
  });
});
