// safetensors read/write (our own code): 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets}}, then raw little-endian tensor bytes. Reads F32, F16,
// BF16 (widened to float32) and I64; writes F32, I64, and F16/BF16 (float32 data rounded to
// nearest even, as torch casts it). Every malformed byte is refused with
// an error naming the file and the problem, before any tensor is used.
import * as fs from 'node:fs';
import { TurnwiseError } from '../core/errors';

export type SafeDType = 'F32' | 'F16' | 'BF16' | 'I64';

export interface SafeTensor {
  /** The dtype stored in the file (F16/BF16 data is widened to float32 on read). */
  dtype: SafeDType;
  shape: number[];
  data: Float32Array | BigInt64Array;
}

export type TensorMap = Map<string, SafeTensor>;

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

/** float32 → IEEE half bits, rounded to nearest even; overflow to ±Inf, underflow through subnormals. */
export function f32ToF16Bits(x: number): number {
  const u = new Uint32Array(new Float32Array([x]).buffer)[0];
  const sign = (u >>> 16) & 0x8000;
  const exp = (u >>> 23) & 0xff;
  let mant = u & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    let m = mant >>> shift;
    const rest = mant & ((1 << shift) - 1);
    if (rest > half || (rest === half && m & 1)) m++;
    return sign | m;
  }
  let m = mant >>> 13;
  const rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && m & 1)) {
    m++;
    if (m === 0x400) {
      m = 0;
      e++;
      if (e >= 0x1f) return sign | 0x7c00;
    }
  }
  return sign | (e << 10) | m;
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

/** Serializes tensors in the order given; `metadata` goes to __metadata__. */
export function encodeSafetensors(tensors: TensorMap, metadata: Record<string, string> = {}): Uint8Array {
  const header: Record<string, unknown> = {};
  if (Object.keys(metadata).length > 0) header.__metadata__ = metadata;
  let offset = 0;
  const parts: { data: Uint8Array; at: number }[] = [];
  for (const [name, t] of tensors) {
    const want = numel(t.shape);
    if (t.data.length !== want) throw new TurnwiseError('internal', `tensor ${name} has ${t.data.length} values but shape [${t.shape}] needs ${want}`);
    const bytes = tensorBytes(name, t);
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + bytes.length] };
    parts.push({ data: bytes, at: offset });
    offset += bytes.length;
  }
  let json = JSON.stringify(header);
  // Pad with spaces so the data starts 8-byte aligned, as the reference implementation does.
  while ((8 + Buffer.byteLength(json)) % 8 !== 0) json += ' ';
  const head = Buffer.from(json, 'utf8');
  const out = new Uint8Array(8 + head.length + offset);
  new DataView(out.buffer).setBigUint64(0, BigInt(head.length), true);
  out.set(head, 8);
  for (const p of parts) out.set(p.data, 8 + head.length + p.at);
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

/** Parses a safetensors buffer. `source` names the file in errors. */
export function decodeSafetensors(buf: Uint8Array, source = 'safetensors'): { tensors: TensorMap; metadata: Record<string, string> } {
  if (buf.length < 8) throw bad(source, `only ${buf.length} bytes, shorter than the 8-byte header length`);
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const headerLen = view.getBigUint64(0, true);
  if (headerLen > BigInt(Math.min(MAX_HEADER, buf.length - 8))) throw bad(source, `header length ${headerLen} exceeds the file (${buf.length} bytes)`);
  const hl = Number(headerLen);
  let header: unknown;
  try {
    header = JSON.parse(Buffer.from(buf.buffer, buf.byteOffset + 8, hl).toString('utf8'));
  } catch (e) {
    throw bad(source, `header is not JSON (${(e as Error).message})`);
  }
  if (header === null || typeof header !== 'object' || Array.isArray(header)) throw bad(source, 'header is not a JSON object');
  const dataStart = 8 + hl;
  const dataLen = buf.length - dataStart;
  const tensors: TensorMap = new Map();
  let metadata: Record<string, string> = {};
  const spans: [number, number, string][] = [];
  for (const [name, info] of Object.entries(header as Record<string, unknown>)) {
    if (name === '__metadata__') {
      if (info && typeof info === 'object') metadata = info as Record<string, string>;
      continue;
    }
    const i = info as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    if (!i || typeof i !== 'object') throw bad(source, `entry ${name} is not an object`);
    const dtype = i.dtype as SafeDType;
    if (!(typeof dtype === 'string' && dtype in DTYPE_BYTES)) throw bad(source, `tensor ${name} has unsupported dtype ${JSON.stringify(i.dtype)} (supported: F32, F16, BF16, I64)`);
    if (!Array.isArray(i.shape) || !i.shape.every((d) => Number.isInteger(d) && d >= 0)) throw bad(source, `tensor ${name} has a bad shape ${JSON.stringify(i.shape)}`);
    const off = i.data_offsets;
    if (!Array.isArray(off) || off.length !== 2 || !off.every((d) => Number.isInteger(d) && d >= 0) || off[0] > off[1]) {
      throw bad(source, `tensor ${name} has bad data_offsets ${JSON.stringify(off)}`);
    }
    const [begin, end] = off as [number, number];
    if (end > dataLen) throw bad(source, `tensor ${name} ends at byte ${end} but the data section has ${dataLen} bytes (truncated?)`);
    const shape = i.shape as number[];
    const n = numel(shape);
    if (end - begin !== n * DTYPE_BYTES[dtype]) throw bad(source, `tensor ${name} has ${end - begin} bytes but ${dtype}[${shape}] needs ${n * DTYPE_BYTES[dtype]}`);
    spans.push([begin, end, name]);
    const at = buf.byteOffset + dataStart + begin;
    let data: Float32Array | BigInt64Array;
    // Copy out: the source buffer's alignment is not guaranteed.
    const raw = new Uint8Array(buf.buffer.slice(at, at + (end - begin)) as ArrayBuffer);
    if (dtype === 'F32') data = new Float32Array(raw.buffer);
    else if (dtype === 'I64') data = new BigInt64Array(raw.buffer);
    else {
      const u16 = new Uint16Array(raw.buffer);
      const f = new Float32Array(n);
      if (dtype === 'BF16') {
        const u32 = new Uint32Array(f.buffer);
        for (let k = 0; k < n; k++) u32[k] = u16[k] << 16;
      } else for (let k = 0; k < n; k++) f[k] = f16ToF32(u16[k]);
      data = f;
    }
    tensors.set(name, { dtype, shape, data });
  }
  spans.sort((a, b) => a[0] - b[0]);
  let pos = 0;
  for (const [begin, end, name] of spans) {
    if (begin !== pos) throw bad(source, `tensor ${name} starts at byte ${begin}, expected ${pos} (overlapping or gapped data)`);
    pos = end;
  }
  if (pos !== dataLen) throw bad(source, `${dataLen - pos} trailing bytes after the last tensor`);
  return { tensors, metadata };
}

/**
 * The tensor names, dtypes and shapes of a safetensors file, from its header alone (the data is
 * not read): what a folder holds can be checked without loading gigabytes.
 */
export function readSafetensorsHeader(file: string): Map<string, { dtype: SafeDType; shape: number[] }> {
  const fd = fs.openSync(file, 'r');
  try {
    const size = fs.fstatSync(fd).size;
    const lenBuf = Buffer.alloc(8);
    if (size < 8 || fs.readSync(fd, lenBuf, 0, 8, 0) !== 8) throw bad(file, `only ${size} bytes, shorter than the 8-byte header length`);
    const hl = lenBuf.readBigUInt64LE(0);
    if (hl > BigInt(Math.min(MAX_HEADER, size - 8))) throw bad(file, `header length ${hl} exceeds the file (${size} bytes)`);
    const head = Buffer.alloc(Number(hl));
    fs.readSync(fd, head, 0, head.length, 8);
    let header: unknown;
    try {
      header = JSON.parse(head.toString('utf8'));
    } catch (e) {
      throw bad(file, `header is not JSON (${(e as Error).message})`);
    }
    if (header === null || typeof header !== 'object' || Array.isArray(header)) throw bad(file, 'header is not a JSON object');
    const out = new Map<string, { dtype: SafeDType; shape: number[] }>();
    const dataLen = size - 8 - head.length;
    for (const [name, info] of Object.entries(header as Record<string, { dtype?: unknown; shape?: unknown; data_offsets?: unknown }>)) {
      if (name === '__metadata__') continue;
      const dtype = info?.dtype as SafeDType;
      if (!(typeof dtype === 'string' && dtype in DTYPE_BYTES)) throw bad(file, `tensor ${name} has unsupported dtype ${JSON.stringify(info?.dtype)} (supported: F32, F16, BF16, I64)`);
      if (!Array.isArray(info.shape) || !info.shape.every((d) => Number.isInteger(d) && d >= 0)) throw bad(file, `tensor ${name} has a bad shape ${JSON.stringify(info.shape)}`);
      const off = info.data_offsets as number[];
      if (!Array.isArray(off) || off.length !== 2 || off[1] > dataLen || off[1] - off[0] !== numel(info.shape as number[]) * DTYPE_BYTES[dtype]) throw bad(file, `tensor ${name} has bad data_offsets ${JSON.stringify(off)} for ${dtype}[${info.shape}] (truncated?)`);
      out.set(name, { dtype, shape: info.shape as number[] });
    }
    return out;
  } finally {
    fs.closeSync(fd);
  }
}
