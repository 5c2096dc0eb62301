// GGUF files (version 3), the single-file model format of llama.cpp, Ollama and LM Studio: a
// header of typed key-values (the architecture, the tokenizer, the chat template), tensor infos
// (name, dimensions fastest first, type, offset), then the tensors' data, each aligned. The writer
// streams the file tensor by tensor; the reader parses a whole file (tests, inspection).
import * as fs from 'node:fs';
import { TurnwiseError } from '../../core/errors';
import { writeFileAtomic } from '../../core/fs';
import { f32ToF16Bits } from './safetensors';

const MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
export const GGUF_VERSION = 3;
/** general.alignment: where the data section and every tensor start (the format's default). */
export const GGUF_ALIGNMENT = 32;

/** The tensor types written here, with their ggml type ids and block layout. */
export const GGML_TYPES = {
  f32: { id: 0, blockValues: 1, blockBytes: 4 },
  f16: { id: 1, blockValues: 1, blockBytes: 2 },
  /** Blocks of 32 values: an f16 scale d = max|x| / 127, then 32 int8 q = round(x / d). */
  q8_0: { id: 8, blockValues: 32, blockBytes: 34 },
} as const;
export type GgmlType = keyof typeof GGML_TYPES;
const TYPE_BY_ID = new Map(Object.entries(GGML_TYPES).map(([k, v]) => [v.id as number, k as GgmlType]));

/** Value types of a key-value, by their id in the file. */
const VALUE_TYPES = {
  u8: 0,
  i8: 1,
  u16: 2,
  i16: 3,
  u32: 4,
  i32: 5,
  f32: 6,
  bool: 7,
  string: 8,
  array: 9,
  u64: 10,
  i64: 11,
  f64: 12,
} as const;
type NumberKind = Exclude<keyof typeof VALUE_TYPES, 'bool' | 'string' | 'array'>;
const KIND_BY_ID = new Map(Object.entries(VALUE_TYPES).map(([k, v]) => [v as number, k as keyof typeof VALUE_TYPES]));

export type GgufValue =
  | { kind: 'string'; value: string }
  | { kind: 'bool'; value: boolean }
  | { kind: NumberKind; value: number }
  | { kind: 'array'; of: 'string'; value: string[] }
  | { kind: 'array'; of: NumberKind; value: number[] };

/** Constructors for the values the model files use. */
export const gguf = {
  str: (value: string): GgufValue => ({ kind: 'string', value }),
  bool: (value: boolean): GgufValue => ({ kind: 'bool', value }),
  u32: (value: number): GgufValue => ({ kind: 'u32', value }),
  i32: (value: number): GgufValue => ({ kind: 'i32', value }),
  f32: (value: number): GgufValue => ({ kind: 'f32', value }),
  strings: (value: string[]): GgufValue => ({ kind: 'array', of: 'string', value }),
  i32s: (value: number[]): GgufValue => ({ kind: 'array', of: 'i32', value }),
  f32s: (value: number[]): GgufValue => ({ kind: 'array', of: 'f32', value }),
};

/** A tensor to write: dims in GGML order (fastest first: a Linear weight [out, in] is [in, out]); data made when written. */
export interface GgufTensor {
  name: string;
  dims: number[];
  type: GgmlType;
  /** The tensor's bytes in `type` (encodeTensor), asked for once, when the file reaches it. */
  data: () => Uint8Array;
}

export function tensorBytes(dims: readonly number[], type: GgmlType): number {
  const t = GGML_TYPES[type];
  const n = dims.reduce((a, b) => a * b, 1);
  if (dims[0] % t.blockValues !== 0)
    throw new TurnwiseError('internal', `a ${type} tensor's first dimension must be a multiple of ${t.blockValues}, got ${dims[0]}`);
  return (n / t.blockValues) * t.blockBytes;
}

const align = (n: number) => Math.ceil(n / GGUF_ALIGNMENT) * GGUF_ALIGNMENT;

// Half precision.

/** float32 → IEEE half bits, rounded to nearest, ties to even (safetensors.ts's, shared). */
export const toHalfBits = f32ToF16Bits;

/** IEEE half bits → number. */
export function fromHalfBits(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** Each value as float16 would hold it (what a model exported at f16 computes with). */
export function roundToHalf(values: Float32Array): Float32Array {
  const out = new Float32Array(values.length);
  for (let i = 0; i < values.length; i++) out[i] = fromHalfBits(toHalfBits(values[i]));
  return out;
}

/** Round half away from zero, as C's roundf. */
const roundAway = (x: number) => Math.sign(x) * Math.round(Math.abs(x));

/** Values (row-major, rows of `dims[0]`) as the bytes of a `type` tensor. */
export function encodeTensor(values: Float32Array, type: GgmlType): Uint8Array {
  // A view, not a copy (the embedding of a 0.5B model is half a gigabyte); the file is little-endian, as the platforms Turnwise runs on.
  if (type === 'f32') return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
  if (type === 'f16') {
    const out = new Uint8Array(values.length * 2);
    const view = new DataView(out.buffer);
    for (let i = 0; i < values.length; i++) view.setUint16(i * 2, toHalfBits(values[i]), true);
    return out;
  }
  if (values.length % 32 !== 0) throw new TurnwiseError('internal', `q8_0 needs a multiple of 32 values, got ${values.length}`);
  const blocks = values.length / 32;
  const out = new Uint8Array(blocks * 34);
  const view = new DataView(out.buffer);
  for (let k = 0; k < blocks; k++) {
    let amax = 0;
    for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(values[k * 32 + j]));
    // The scale is stored as f16; the values are divided by the unrounded one (llama.cpp's rule).
    const d = Math.fround(amax / 127);
    const inv = d ? Math.fround(1 / d) : 0;
    view.setUint16(k * 34, toHalfBits(d), true);
    for (let j = 0; j < 32; j++) view.setInt8(k * 34 + 2 + j, roundAway(Math.fround(values[k * 32 + j] * inv)));
  }
  return out;
}

/** The values a `type` tensor's bytes hold (what llama.cpp computes with). */
export function decodeTensor(bytes: Uint8Array, count: number, type: GgmlType): Float32Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Float32Array(count);
  if (type === 'f32') for (let i = 0; i < count; i++) out[i] = view.getFloat32(i * 4, true);
  else if (type === 'f16') for (let i = 0; i < count; i++) out[i] = fromHalfBits(view.getUint16(i * 2, true));
  else
    for (let k = 0; k < count / 32; k++) {
      const d = fromHalfBits(view.getUint16(k * 34, true));
      for (let j = 0; j < 32; j++) out[k * 32 + j] = d * view.getInt8(k * 34 + 2 + j);
    }
  return out;
}

// Writing.

/** Little-endian bytes, grown as written. */
class ByteWriter {
  private buf = new Uint8Array(1 << 16);
  private view = new DataView(this.buf.buffer);
  length = 0;
  private room(n: number): number {
    if (this.length + n > this.buf.length) {
      const next = new Uint8Array(Math.max(this.buf.length * 2, this.length + n));
      next.set(this.buf.subarray(0, this.length));
      this.buf = next;
      this.view = new DataView(next.buffer);
    }
    const at = this.length;
    this.length += n;
    return at;
  }
  // room() may replace the buffer: it is always called before the view is read.
  u8(v: number) {
    this.number('u8', v);
  }
  u32(v: number) {
    this.number('u32', v);
  }
  u64(v: number) {
    this.number('u64', v);
  }
  number(kind: NumberKind, v: number) {
    const sizes: Record<NumberKind, number> = { u8: 1, i8: 1, u16: 2, i16: 2, u32: 4, i32: 4, f32: 4, u64: 8, i64: 8, f64: 8 };
    const at = this.room(sizes[kind]);
    const w = this.view;
    if (kind === 'u8') w.setUint8(at, v);
    else if (kind === 'i8') w.setInt8(at, v);
    else if (kind === 'u16') w.setUint16(at, v, true);
    else if (kind === 'i16') w.setInt16(at, v, true);
    else if (kind === 'u32') w.setUint32(at, v, true);
    else if (kind === 'i32') w.setInt32(at, v, true);
    else if (kind === 'f32') w.setFloat32(at, v, true);
    else if (kind === 'f64') w.setFloat64(at, v, true);
    else if (kind === 'u64') w.setBigUint64(at, BigInt(v), true);
    else w.setBigInt64(at, BigInt(v), true);
  }
  string(s: string) {
    const b = Buffer.from(s, 'utf8');
    this.u64(b.length);
    const at = this.room(b.length);
    this.buf.set(b, at);
  }
  /** Zeros up to the alignment. */
  pad() {
    this.room(align(this.length) - this.length);
  }
  bytes(): Uint8Array {
    return this.buf.slice(0, this.length);
  }
}

function writeValue(w: ByteWriter, v: GgufValue): void {
  if (v.kind === 'array') {
    w.u32(VALUE_TYPES[v.of]);
    w.u64(v.value.length);
    if (v.of === 'string') for (const s of v.value as string[]) w.string(s);
    else for (const n of v.value as number[]) w.number(v.of, n);
  } else if (v.kind === 'string') w.string(v.value);
  else if (v.kind === 'bool') w.u8(v.value ? 1 : 0);
  else w.number(v.kind, v.value);
}

/**
 * The bytes of a GGUF file, in parts: the header (key-values, then tensor infos, padded to the
 * alignment), then each tensor's data padded to the alignment. A tensor's data is made only when
 * its part is reached, so a file larger than memory can be written.
 */
export function* ggufParts(metadata: readonly (readonly [string, GgufValue])[], tensors: readonly GgufTensor[]): Generator<Uint8Array> {
  const keys = new Set<string>();
  for (const [k] of metadata) {
    if (keys.has(k)) throw new TurnwiseError('internal', `GGUF key ${k} given twice`);
    keys.add(k);
  }
  const w = new ByteWriter();
  w.u32(MAGIC);
  w.u32(GGUF_VERSION);
  w.u64(tensors.length);
  w.u64(metadata.length + (keys.has('general.alignment') ? 0 : 1));
  if (!keys.has('general.alignment')) {
    w.string('general.alignment');
    w.u32(VALUE_TYPES.u32);
    w.u32(GGUF_ALIGNMENT);
  }
  for (const [k, v] of metadata) {
    w.string(k);
    w.u32(v.kind === 'array' ? VALUE_TYPES.array : VALUE_TYPES[v.kind]);
    writeValue(w, v);
  }
  let offset = 0;
  const sizes: number[] = [];
  for (const t of tensors) {
    w.string(t.name);
    w.u32(t.dims.length);
    for (const d of t.dims) w.u64(d);
    w.u32(GGML_TYPES[t.type].id);
    w.u64(offset);
    const size = tensorBytes(t.dims, t.type);
    sizes.push(size);
    offset = align(offset + size);
  }
  w.pad();
  yield w.bytes();
  for (let i = 0; i < tensors.length; i++) {
    const data = tensors[i].data();
    if (data.length !== sizes[i])
      throw new TurnwiseError(
        'internal',
        `tensor ${tensors[i].name} has ${data.length} bytes, its ${tensors[i].type} dims need ${sizes[i]}`,
      );
    yield data;
    const padding = align(sizes[i]) - sizes[i];
    if (padding) yield new Uint8Array(padding);
  }
}

/** Writes a GGUF file atomically: to a temporary file in the same folder, renamed into place only when complete. */
export function writeGgufFile(file: string, metadata: readonly (readonly [string, GgufValue])[], tensors: readonly GgufTensor[]): number {
  let bytes = 0;
  const parts = ggufParts(metadata, tensors);
  writeFileAtomic(
    file,
    (function* () {
      for (const p of parts) {
        bytes += p.length;
        yield p;
      }
    })(),
  );
  return bytes;
}

// Reading.

export interface GgufTensorInfo {
  name: string;
  dims: number[];
  type: GgmlType;
  /** Offset of the data from the start of the file. */
  offset: number;
}

export interface GgufFile {
  version: number;
  metadata: Map<string, GgufValue>;
  tensors: GgufTensorInfo[];
  /** The tensor's values as float32. */
  values(name: string): Float32Array;
}

/** Parses a GGUF file of the types written here (f32, f16, q8_0); anything else is an error naming it. */
export function readGguf(bytes: Uint8Array, source = 'the GGUF file'): GgufFile {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = 0;
  const fail = (why: string): never => {
    throw new TurnwiseError('invalid-file', `${source} is not a readable GGUF file: ${why}`, {
      hint: 'export it again with `turnwise policy export --format gguf`',
    });
  };
  const need = (n: number) => {
    if (at + n > bytes.length) fail(`it ends at byte ${bytes.length}, inside the header`);
  };
  const u32 = () => (need(4), (at += 4), view.getUint32(at - 4, true));
  const u64 = () => {
    need(8);
    at += 8;
    const v = view.getBigUint64(at - 8, true);
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) fail(`a length of ${v} at byte ${at - 8}`);
    return Number(v);
  };
  const str = () => {
    const n = u64();
    need(n);
    at += n;
    return Buffer.from(bytes.buffer, bytes.byteOffset + at - n, n).toString('utf8');
  };
  const num = (kind: NumberKind): number => {
    const size = { u8: 1, i8: 1, u16: 2, i16: 2, u32: 4, i32: 4, f32: 4, u64: 8, i64: 8, f64: 8 }[kind];
    need(size);
    at += size;
    const p = at - size;
    if (kind === 'u8') return view.getUint8(p);
    if (kind === 'i8') return view.getInt8(p);
    if (kind === 'u16') return view.getUint16(p, true);
    if (kind === 'i16') return view.getInt16(p, true);
    if (kind === 'u32') return view.getUint32(p, true);
    if (kind === 'i32') return view.getInt32(p, true);
    if (kind === 'f32') return view.getFloat32(p, true);
    if (kind === 'f64') return view.getFloat64(p, true);
    if (kind === 'u64') return Number(view.getBigUint64(p, true));
    return Number(view.getBigInt64(p, true));
  };
  const kindOf = (id: number) => KIND_BY_ID.get(id) ?? fail(`unknown value type ${id}`);
  const value = (kind: keyof typeof VALUE_TYPES): GgufValue => {
    if (kind === 'string') return { kind, value: str() };
    if (kind === 'bool') return { kind, value: num('u8') !== 0 };
    if (kind === 'array') {
      const of = kindOf(u32());
      const n = u64();
      if (of === 'array' || of === 'bool') return fail(`an array of ${of}`);
      if (of === 'string') return { kind, of, value: Array.from({ length: n }, str) };
      return { kind, of, value: Array.from({ length: n }, () => num(of)) };
    }
    return { kind, value: num(kind) };
  };
  if (u32() !== MAGIC) fail('it does not start with "GGUF"');
  const version = u32();
  if (version !== GGUF_VERSION) fail(`version ${version}; version ${GGUF_VERSION} is read`);
  const nTensors = u64();
  const nKv = u64();
  const metadata = new Map<string, GgufValue>();
  for (let i = 0; i < nKv; i++) {
    const key = str();
    metadata.set(key, value(kindOf(u32())));
  }
  const alignment = metadata.get('general.alignment');
  const alignTo = alignment && alignment.kind === 'u32' ? alignment.value : GGUF_ALIGNMENT;
  const infos: { name: string; dims: number[]; type: GgmlType; rel: number }[] = [];
  for (let i = 0; i < nTensors; i++) {
    const name = str();
    const n = u32();
    const dims = Array.from({ length: n }, u64);
    const id = u32();
    const type = TYPE_BY_ID.get(id) ?? fail(`tensor ${name} has ggml type ${id}; f32, f16 and q8_0 are read`);
    infos.push({ name, dims, type, rel: u64() });
  }
  const dataStart = Math.ceil(at / alignTo) * alignTo;
  const tensors = infos.map((t) => ({ name: t.name, dims: t.dims, type: t.type, offset: dataStart + t.rel }));
  for (const t of tensors)
    if (t.offset + tensorBytes(t.dims, t.type) > bytes.length) fail(`tensor ${t.name}'s data runs past the end of the file`);
  const byName = new Map(tensors.map((t) => [t.name, t]));
  return {
    version,
    metadata,
    tensors,
    values(name) {
      const t = byName.get(name);
      if (!t) throw new TurnwiseError('not-found', `${source} has no tensor ${name}`);
      const count = t.dims.reduce((a, b) => a * b, 1);
      return decodeTensor(bytes.subarray(t.offset, t.offset + tensorBytes(t.dims, t.type)), count, t.type);
    },
  };
}

/** Reads and parses a GGUF file from disk. */
export function readGgufFile(file: string): GgufFile {
  let bytes: Uint8Array;
  try {
    bytes = fs.readFileSync(file);
  } catch (e) {
    throw new TurnwiseError('not-found', `cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, {
      hint: 'give the path of a .gguf file',
    });
  }
  return readGguf(bytes, file);
}
