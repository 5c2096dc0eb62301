// safetensors read/write (our own code): 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets}}, then raw little-endian tensor bytes. Reads F32, F16,
// BF16 (widened to float32) and I64; writes F32, I64, and F16/BF16 (float32 data rounded to
// nearest even, as torch casts it). Every malformed byte is refused with
// an error naming the file and the problem, before any tensor is used.
import * as fs from 'node:fs';
import { TurnwiseError } from '../../core/errors';

export type SafeDType = 'F32' | 'F16' | 'BF16' | 'I64';

export interface SafeTensor {
  /** The dtype stored in the file (F16/BF16 data is widened to float32 on read). */
  dtype: SafeDType;
  shape: number[];
  data: Float32Array | BigInt64Array;
}

export type TensorMap = Map<string, SafeTensor>;

/** A float32 tensor to write whose values are made only when its turn comes (see safetensorsParts). */
export interface LazyTensor {
  dtype: SafeDType;
  shape: number[];
  make: () => Float32Array;
}

const DTYPE_BYTES: Record<SafeDType, number> = { F32: 4, F16: 2, BF16: 2, I64: 8 };
/** Headers larger than this are refused rather than parsed (the format's own limit is 100 MB). */
const MAX_HEADER = 100_000_000;

export function numel(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

export function f32Tensor(shape: number[], data: Float32Array): SafeTensor {
  return { dtype: 'F32', shape, data };
}

/** float32 → bfloat16 bits, rounded to nearest even (NaN stays NaN). */
export function f32ToBf16Bits(x: number): number {
  const u = new Uint32Array(new Float32Array([x]).buffer)[0];
  if ((u & 0x7fffffff) > 0x7f800000) return (u >>> 16) | 0x40; // a quiet NaN
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
}

const f32Box = new Float32Array(1);
const u32Box = new Uint32Array(f32Box.buffer);

/** float32 → IEEE half bits, rounded to nearest, ties to even; overflow to ±Inf, underflow through subnormals, NaN kept. */
export function f32ToF16Bits(x: number): number {
  f32Box[0] = x;
  const b = u32Box[0];
  const sign = (b >>> 16) & 0x8000;
  const exp = (b >>> 23) & 0xff;
  let mant = b & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    // A half subnormal: m · 2^-24, m = the 24-bit significand shifted right by 14 − e.
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >>> shift;
    const rem = mant & ((1 << shift) - 1);
    const mid = 1 << (shift - 1);
    if (rem > mid || (rem === mid && half & 1)) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rem = mant & 0x1fff;
  // A carry out of the significand moves to the exponent, up to infinity: still the right rounding.
  if (rem > 0x1000 || (rem === 0x1000 && half & 1)) half++;
  return sign | half;
}

function tensorBytes(name: string, t: SafeTensor): Uint8Array {
  if (t.dtype === 'F32' || t.dtype === 'I64') return new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
  if (!(t.data instanceof Float32Array)) throw new TurnwiseError('internal', `cannot write ${name} as ${t.dtype}: its data is not float32`);
  const u16 = new Uint16Array(t.data.length);
  if (t.dtype === 'BF16') {
    // f32ToBf16Bits over the float32 bits in place: the same rounding, without a conversion per call.
    const u32 = new Uint32Array(t.data.buffer, t.data.byteOffset, t.data.length);
    for (let i = 0; i < u16.length; i++) {
      const u = u32[i];
      u16[i] = (u & 0x7fffffff) > 0x7f800000 ? (u >>> 16) | 0x40 : ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
    }
  } else for (let i = 0; i < u16.length; i++) u16[i] = f32ToF16Bits(t.data[i]);
  return new Uint8Array(u16.buffer);
}

interface Layout {
  head: Buffer;
  entries: { name: string; t: SafeTensor | LazyTensor }[];
  dataBytes: number;
}

function layoutOf(tensors: ReadonlyMap<string, SafeTensor | LazyTensor>, metadata: Record<string, string>): Layout {
  const header: Record<string, unknown> = {};
  if (Object.keys(metadata).length > 0) header.__metadata__ = metadata;
  let offset = 0;
  const entries: Layout['entries'] = [];
  for (const [name, t] of tensors) {
    const want = numel(t.shape);
    if ('data' in t && t.data.length !== want)
      throw new TurnwiseError('internal', `tensor ${name} has ${t.data.length} values but shape [${t.shape}] needs ${want}`);
    const size = want * DTYPE_BYTES[t.dtype];
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + size] };
    entries.push({ name, t });
    offset += size;
  }
  let json = JSON.stringify(header);
  // Pad with spaces so the data starts 8-byte aligned, as the reference implementation does.
  while ((8 + Buffer.byteLength(json)) % 8 !== 0) json += ' ';
  return { head: Buffer.from(json, 'utf8'), entries, dataBytes: offset };
}

/**
 * The bytes of a safetensors file as parts: the header, then each tensor's data, converted only
 * when its turn comes (what writeFileAtomic takes, so a multi-gigabyte file is never one buffer);
 * a LazyTensor's values are made then too, so the file is written holding one tensor at a time.
 */
export function* safetensorsParts(
  tensors: ReadonlyMap<string, SafeTensor | LazyTensor>,
  metadata: Record<string, string> = {},
): Generator<Uint8Array> {
  const { head, entries } = layoutOf(tensors, metadata);
  const len = new Uint8Array(8);
  new DataView(len.buffer).setBigUint64(0, BigInt(head.length), true);
  yield len;
  yield head;
  for (const { name, t } of entries) {
    if ('data' in t) {
      yield tensorBytes(name, t);
      continue;
    }
    const data = t.make();
    const want = numel(t.shape);
    if (data.length !== want)
      throw new TurnwiseError('internal', `tensor ${name} was made with ${data.length} values but shape [${t.shape}] needs ${want}`);
    yield tensorBytes(name, { dtype: t.dtype, shape: t.shape, data });
  }
}

/** Serializes tensors in the order given; `metadata` goes to __metadata__. */
export function encodeSafetensors(tensors: TensorMap, metadata: Record<string, string> = {}): Uint8Array {
  const { head, dataBytes } = layoutOf(tensors, metadata);
  const out = new Uint8Array(8 + head.length + dataBytes);
  let at = 0;
  for (const p of safetensorsParts(tensors, metadata)) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function bad(source: string, what: string): TurnwiseError {
  return new TurnwiseError('invalid-file', `${source} is not a valid safetensors file: ${what}`, {
    hint: 'the file is damaged or truncated; use an earlier checkpoint or re-create it',
  });
}

function f16ToF32(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

interface Entry {
  name: string;
  dtype: SafeDType;
  shape: number[];
  begin: number;
  end: number;
}

/** Checks a parsed header against a data section of `dataLen` bytes: every entry, no gap, no overlap. */
function checkHeader(header: unknown, dataLen: number, source: string): { entries: Entry[]; metadata: Record<string, string> } {
  if (header === null || typeof header !== 'object' || Array.isArray(header)) throw bad(source, 'header is not a JSON object');
  let metadata: Record<string, string> = {};
  const entries: Entry[] = [];
  for (const [name, info] of Object.entries(header as Record<string, unknown>)) {
    if (name === '__metadata__') {
      if (info && typeof info === 'object') metadata = info as Record<string, string>;
      continue;
    }
    const i = info as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    if (!i || typeof i !== 'object') throw bad(source, `entry ${name} is not an object`);
    const dtype = i.dtype as SafeDType;
    if (!(typeof dtype === 'string' && dtype in DTYPE_BYTES))
      throw bad(source, `tensor ${name} has unsupported dtype ${JSON.stringify(i.dtype)} (supported: F32, F16, BF16, I64)`);
    if (!Array.isArray(i.shape) || !i.shape.every((d) => Number.isInteger(d) && d >= 0))
      throw bad(source, `tensor ${name} has a bad shape ${JSON.stringify(i.shape)}`);
    const off = i.data_offsets;
    if (!Array.isArray(off) || off.length !== 2 || !off.every((d) => Number.isInteger(d) && d >= 0) || off[0] > off[1]) {
      throw bad(source, `tensor ${name} has bad data_offsets ${JSON.stringify(off)}`);
    }
    const [begin, end] = off as [number, number];
    if (end > dataLen) throw bad(source, `tensor ${name} ends at byte ${end} but the data section has ${dataLen} bytes (truncated?)`);
    const shape = i.shape as number[];
    const n = numel(shape);
    if (end - begin !== n * DTYPE_BYTES[dtype])
      throw bad(source, `tensor ${name} has ${end - begin} bytes but ${dtype}[${shape}] needs ${n * DTYPE_BYTES[dtype]}`);
    entries.push({ name, dtype, shape, begin, end });
  }
  const spans = [...entries].sort((a, b) => a.begin - b.begin);
  let pos = 0;
  for (const e of spans) {
    if (e.begin !== pos) throw bad(source, `tensor ${e.name} starts at byte ${e.begin}, expected ${pos} (overlapping or gapped data)`);
    pos = e.end;
  }
  if (pos !== dataLen) throw bad(source, `${dataLen - pos} trailing bytes after the last tensor`);
  return { entries, metadata };
}

function parseHeaderJson(bytes: Uint8Array, source: string): unknown {
  try {
    return JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8'));
  } catch (e) {
    throw bad(source, `header is not JSON (${(e as Error).message})`);
  }
}

/** A tensor from its stored bytes (`raw` is owned by the tensor: an aligned copy). */
function tensorOf(e: Entry, raw: Uint8Array): SafeTensor {
  const n = numel(e.shape);
  let data: Float32Array | BigInt64Array;
  if (e.dtype === 'F32') data = new Float32Array(raw.buffer, raw.byteOffset, n);
  else if (e.dtype === 'I64') data = new BigInt64Array(raw.buffer, raw.byteOffset, n);
  else {
    const u16 = new Uint16Array(raw.buffer, raw.byteOffset, n);
    const f = new Float32Array(n);
    if (e.dtype === 'BF16') {
      const u32 = new Uint32Array(f.buffer);
      for (let k = 0; k < n; k++) u32[k] = u16[k] << 16;
    } else for (let k = 0; k < n; k++) f[k] = f16ToF32(u16[k]);
    data = f;
  }
  return { dtype: e.dtype, shape: e.shape, data };
}

/** Parses a safetensors buffer. `source` names the file in errors. */
export function decodeSafetensors(buf: Uint8Array, source = 'safetensors'): { tensors: TensorMap; metadata: Record<string, string> } {
  if (buf.length < 8) throw bad(source, `only ${buf.length} bytes, shorter than the 8-byte header length`);
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const headerLen = view.getBigUint64(0, true);
  if (headerLen > BigInt(Math.min(MAX_HEADER, buf.length - 8)))
    throw bad(source, `header length ${headerLen} exceeds the file (${buf.length} bytes)`);
  const hl = Number(headerLen);
  const dataStart = 8 + hl;
  const { entries, metadata } = checkHeader(parseHeaderJson(buf.subarray(8, dataStart), source), buf.length - dataStart, source);
  const tensors: TensorMap = new Map();
  for (const e of entries) {
    const at = buf.byteOffset + dataStart + e.begin;
    // Copy out: the source buffer's alignment is not guaranteed.
    tensors.set(e.name, tensorOf(e, new Uint8Array(buf.buffer.slice(at, at + (e.end - e.begin)) as ArrayBuffer)));
  }
  return { tensors, metadata };
}

function readExactly(fd: number, into: Uint8Array, position: number, file: string): void {
  for (let at = 0; at < into.length;) {
    const n = fs.readSync(fd, into, at, Math.min(1 << 30, into.length - at), position + at);
    if (n === 0) throw bad(file, `the file ended while reading (it changed while being read?)`);
    at += n;
  }
}

function openFile(file: string, hint: string): number {
  try {
    return fs.openSync(file, 'r');
  } catch (e) {
    throw new TurnwiseError('not-found', `cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, { hint });
  }
}

/** The checked header of an open file and where its data starts. */
function fileHeader(fd: number, file: string): { entries: Entry[]; metadata: Record<string, string>; dataStart: number } {
  const size = fs.fstatSync(fd).size;
  if (size < 8) throw bad(file, `only ${size} bytes, shorter than the 8-byte header length`);
  const len = new Uint8Array(8);
  readExactly(fd, len, 0, file);
  const hl = new DataView(len.buffer).getBigUint64(0, true);
  if (hl > BigInt(Math.min(MAX_HEADER, size - 8))) throw bad(file, `header length ${hl} exceeds the file (${size} bytes)`);
  const head = new Uint8Array(Number(hl));
  readExactly(fd, head, 8, file);
  const dataStart = 8 + head.length;
  return { ...checkHeader(parseHeaderJson(head, file), size - dataStart, file), dataStart };
}

/**
 * Reads a safetensors file tensor by tensor: no buffer of the whole file (so files over 2 GiB,
 * which one read cannot hold, load, and the peak is one tensor's stored bytes above the result).
 * Errors name `file` when it is not readable or not valid safetensors.
 */
export function readSafetensorsFile(
  file: string,
  hint = 'the file is missing or unreadable',
): { tensors: TensorMap; metadata: Record<string, string> } {
  const fd = openFile(file, hint);
  try {
    const { entries, metadata, dataStart } = fileHeader(fd, file);
    const tensors: TensorMap = new Map();
    for (const e of entries) {
      const raw = new Uint8Array(e.end - e.begin);
      readExactly(fd, raw, dataStart + e.begin, file);
      tensors.set(e.name, tensorOf(e, raw));
    }
    return { tensors, metadata };
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * The tensor names, dtypes and shapes of a safetensors file, from its header alone (the data is
 * not read): what a folder holds can be checked without loading gigabytes.
 */
export function readSafetensorsHeader(file: string): Map<string, { dtype: SafeDType; shape: number[] }> {
  const fd = openFile(file, 'the file is missing or unreadable');
  try {
    return new Map(fileHeader(fd, file).entries.map((e) => [e.name, { dtype: e.dtype, shape: e.shape }]));
  } finally {
    fs.closeSync(fd);
  }
}
