// The GGUF writer and reader: half-precision rounding, q8_0 blocks, key-values of every kind and
// tensors written and read back, the header as a maintained reader parses it (@huggingface/gguf,
// test/tools/llama-cpp), and a write that fails midway leaving nothing under the file's name.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { TurnwiseError } from '../../../src/core/errors';
import {
  decodeTensor,
  encodeTensor,
  fromHalfBits,
  gguf,
  GGUF_ALIGNMENT,
  readGgufFile,
  toHalfBits,
  writeGgufFile,
  type GgufTensor,
  type GgufValue,
} from '../../../src/policy/files/gguf';

const HF_GGUF = path.resolve(__dirname, '../../tools/llama-cpp/node_modules/@huggingface/gguf/dist/index.js');

describe('policy/files/gguf: GGUF v3 files', () => {
  let tmp: string;
  before(() => (tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-gguf-'))));
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('rounds float32 to half precision to nearest, ties to even, with subnormals, overflow and NaN', () => {
    const cases: [number, number][] = [
      [0, 0x0000],
      [-0, 0x8000],
      [1, 0x3c00],
      [-2, 0xc000],
      [65504, 0x7bff],
      [65520, 0x7c00], // halfway past the largest half: rounds up to infinity
      [1e6, 0x7c00],
      [-Infinity, 0xfc00],
      [2 ** -14, 0x0400], // smallest normal
      [2 ** -24, 0x0001], // smallest subnormal
      [2 ** -25, 0x0000], // halfway to it: ties to even (zero)
      [3 * 2 ** -26, 0x0001],
      [1 + 2 ** -11, 0x3c00], // a tie between 1 and 1 + 2^-10: the even one
      [1 + 3 * 2 ** -11, 0x3c02], // a tie between odd 0x3c01 and even 0x3c02
      [1 + 2 ** -11 + 2 ** -20, 0x3c01], // just past the tie
      [0.1, 0x2e66],
      [-1 / 3, 0xb555],
    ];
    for (const [x, bits] of cases) assert.equal(toHalfBits(x), bits, `${x} → 0x${bits.toString(16)}`);
    assert.ok(Number.isNaN(fromHalfBits(toHalfBits(NaN))));
    for (const [, bits] of cases) if (Number.isFinite(fromHalfBits(bits))) assert.equal(toHalfBits(fromHalfBits(bits)), bits);
    // Every finite half round-trips through its value.
    for (let h = 0; h < 0x7c00; h += 7) assert.equal(toHalfBits(fromHalfBits(h)), h);
  });

  it('q8_0 stores blocks of 32 as an f16 scale max|x|/127 and values rounded to the nearest step', () => {
    const x = Float32Array.from({ length: 64 }, (_, i) => (i < 32 ? Math.sin(i) * 3 : 0));
    x[5] = -3.5; // the block's largest magnitude is negative
    const bytes = encodeTensor(x, 'q8_0');
    assert.equal(bytes.length, 2 * 34);
    const view = new DataView(bytes.buffer);
    assert.equal(view.getUint16(0, true), toHalfBits(3.5 / 127));
    assert.equal(view.getInt8(2 + 5), -127);
    assert.equal(view.getUint16(34, true), 0, 'an all-zero block has scale 0');
    const back = decodeTensor(bytes, 64, 'q8_0');
    const d = fromHalfBits(toHalfBits(3.5 / 127));
    for (let i = 0; i < 32; i++) assert.ok(Math.abs(back[i] - x[i]) <= d * 0.5 + 1e-3 * d, `value ${i} within half a step`);
    for (let i = 32; i < 64; i++) assert.equal(back[i], 0);
    // 0.5 of a step rounds away from zero, as C's roundf does.
    const tie = new Float32Array(32);
    tie[0] = 127;
    tie[1] = 2.5;
    tie[2] = -2.5;
    const q = new DataView(encodeTensor(tie, 'q8_0').buffer);
    assert.deepEqual([q.getInt8(2), q.getInt8(3), q.getInt8(4)], [127, 3, -3]);
  });

  const metadata: [string, GgufValue][] = [
    ['general.architecture', gguf.str('qwen2')],
    ['general.name', gguf.str('naïve 模型')],
    ['qwen2.block_count', gguf.u32(3)],
    ['qwen2.attention.layer_norm_rms_epsilon', gguf.f32(1e-6)],
    ['some.signed', gguf.i32(-7)],
    ['tokenizer.ggml.add_bos_token', gguf.bool(true)],
    ['tokenizer.ggml.tokens', gguf.strings(['a', 'Ġb', '<|im_end|>', ''])],
    ['tokenizer.ggml.token_type', gguf.i32s([1, 1, 3, 5])],
    ['scores', gguf.f32s([0.5, -1.25])],
  ];
  const values = (n: number, k: number) => Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.3 + k) * (k + 1));
  const tensors = (): GgufTensor[] => [
    { name: 'token_embd.weight', dims: [64, 5], type: 'f16', data: () => encodeTensor(values(320, 0), 'f16') },
    { name: 'blk.0.attn_norm.weight', dims: [7], type: 'f32', data: () => encodeTensor(values(7, 1), 'f32') },
    { name: 'blk.0.ffn_up.weight', dims: [64, 3], type: 'q8_0', data: () => encodeTensor(values(192, 2), 'q8_0') },
  ];

  it('writes key-values and tensors that read back, each tensor at an offset of the alignment', () => {
    const file = path.join(tmp, 'roundtrip.gguf');
    const bytes = writeGgufFile(file, metadata, tensors());
    assert.equal(fs.statSync(file).size, bytes);
    const g = readGgufFile(file);
    assert.equal(g.version, 3);
    assert.deepEqual(g.metadata.get('general.alignment'), gguf.u32(GGUF_ALIGNMENT));
    for (const [k, v] of metadata) {
      const got = g.metadata.get(k)!;
      if (v.kind === 'f32') assert.equal(got.value, Math.fround(v.value));
      else if (v.kind === 'array' && v.of === 'f32') assert.deepEqual(got.value, v.value.map(Math.fround));
      else assert.deepEqual(got, v, k);
    }
    assert.deepEqual(
      g.tensors.map((t) => [t.name, t.dims, t.type]),
      tensors().map((t) => [t.name, t.dims, t.type]),
    );
    for (const t of g.tensors) assert.equal(t.offset % GGUF_ALIGNMENT, 0, `${t.name} is aligned`);
    assert.deepEqual(g.values('blk.0.attn_norm.weight'), values(7, 1));
    assert.deepEqual(g.values('token_embd.weight'), decodeTensor(encodeTensor(values(320, 0), 'f16'), 320, 'f16'));
    assert.deepEqual(g.values('blk.0.ffn_up.weight'), decodeTensor(encodeTensor(values(192, 2), 'q8_0'), 192, 'q8_0'));
  });

  it('the header as @huggingface/gguf (a maintained reader) parses it', async () => {
    if (!fs.existsSync(HF_GGUF))
      throw new Error(`@huggingface/gguf is not installed (${HF_GGUF} is missing): run \`bash scripts/setup-test-tools.sh unit\``);
    const { gguf: parse } = (await import(HF_GGUF)) as {
      gguf(
        file: string,
        o: { allowLocalFile: boolean },
      ): Promise<{
        metadata: Record<string, unknown>;
        tensorInfos: { name: string; shape: bigint[]; dtype: number; offset: bigint }[];
        tensorDataOffset: bigint;
      }>;
    };
    const file = path.join(tmp, 'roundtrip.gguf');
    writeGgufFile(file, metadata, tensors());
    const p = await parse(file, { allowLocalFile: true });
    assert.equal(p.metadata.version, 3);
    assert.equal(p.metadata['general.architecture'], 'qwen2');
    assert.equal(p.metadata['general.name'], 'naïve 模型');
    assert.equal(p.metadata['qwen2.block_count'], 3);
    assert.equal(p.metadata['some.signed'], -7);
    assert.equal(p.metadata['tokenizer.ggml.add_bos_token'], true);
    assert.deepEqual(p.metadata['tokenizer.ggml.tokens'], ['a', 'Ġb', '<|im_end|>', '']);
    assert.deepEqual(p.metadata['tokenizer.ggml.token_type'], [1, 1, 3, 5]);
    const ours = readGgufFile(file);
    assert.deepEqual(
      p.tensorInfos.map((t) => [t.name, t.shape.map(Number), t.dtype, Number(p.tensorDataOffset + t.offset)]),
      ours.tensors.map((t) => [t.name, t.dims, { f32: 0, f16: 1, q8_0: 8 }[t.type], t.offset]),
    );
  });

  it('a write that fails midway (a full disk) leaves no file under the name and no temporary file', () => {
    const file = path.join(tmp, 'full', 'model.gguf');
    fs.mkdirSync(path.dirname(file));
    const failing = tensors();
    failing[2] = {
      ...failing[2],
      data: () => {
        throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
      },
    };
    assert.throws(
      () => writeGgufFile(file, metadata, failing),
      (e: unknown) => e instanceof TurnwiseError && /the disk is full/.test(e.message) && /free some disk space/.test(e.hint ?? ''),
    );
    assert.deepEqual(fs.readdirSync(path.dirname(file)), [], 'nothing left in the folder');
    // A file already there is kept as it was.
    fs.writeFileSync(file, 'previous');
    assert.throws(() => writeGgufFile(file, metadata, failing), TurnwiseError);
    assert.deepEqual(fs.readdirSync(path.dirname(file)), ['model.gguf']);
    assert.equal(fs.readFileSync(file, 'utf8'), 'previous');
  });

  it('refuses a file that is not GGUF, or that ends inside its header, naming why', () => {
    const junk = path.join(tmp, 'junk.gguf');
    fs.writeFileSync(junk, 'not a model at all, just text');
    assert.throws(() => readGgufFile(junk), /does not start with "GGUF"/);
    const file = path.join(tmp, 'cut.gguf');
    writeGgufFile(file, metadata, tensors());
    fs.truncateSync(file, 100);
    assert.throws(() => readGgufFile(file), /inside the header/);
  });
});
