// A minimal protocol-buffers encoder: exactly what writing ONNX ModelProto files needs
// (varints, length-delimited fields, packed repeated scalars). No decoding.

export class ProtoWriter {
  private chunks: Uint8Array[] = [];
  private cur: number[] = [];
  private length = 0;

  private flushCur(): void {
    if (this.cur.length) {
      this.chunks.push(Uint8Array.from(this.cur));
      this.length += this.cur.length;
      this.cur = [];
    }
  }

  private varint(v: number | bigint): void {
    let n = BigInt.asUintN(64, BigInt(v));
    while (n >= 0x80n) {
      this.cur.push(Number(n & 0x7fn) | 0x80);
      n >>= 7n;
    }
    this.cur.push(Number(n));
  }

  private tag(field: number, wire: 0 | 1 | 2 | 5): void {
    this.varint((field << 3) | wire);
  }

  int(field: number, v: number | bigint): this {
    this.tag(field, 0);
    this.varint(v);
    return this;
  }

  float(field: number, v: number): this {
    this.tag(field, 5);
    const b = Buffer.alloc(4);
    b.writeFloatLE(v);
    for (const x of b) this.cur.push(x);
    return this;
  }

  bytes(field: number, data: Uint8Array): this {
    this.tag(field, 2);
    this.varint(data.length);
    this.flushCur();
    this.chunks.push(data);
    this.length += data.length;
    return this;
  }

  string(field: number, s: string): this {
    return this.bytes(field, Buffer.from(s, 'utf8'));
  }

  message(field: number, build: (w: ProtoWriter) => void): this {
    const w = new ProtoWriter();
    build(w);
    return this.bytes(field, w.finish());
  }

  packedInts(field: number, values: readonly (number | bigint)[]): this {
    const w = new ProtoWriter();
    for (const v of values) w.varint(v);
    return this.bytes(field, w.finish());
  }

  packedFloats(field: number, values: ArrayLike<number>): this {
    const f = Float32Array.from(values as ArrayLike<number>);
    return this.bytes(field, new Uint8Array(f.buffer, f.byteOffset, f.byteLength));
  }

  packedDoubles(field: number, values: ArrayLike<number>): this {
    const f = Float64Array.from(values as ArrayLike<number>);
    return this.bytes(field, new Uint8Array(f.buffer, f.byteOffset, f.byteLength));
  }

  /** Number of bytes written so far (lets callers check size limits without finishing). */
  get size(): number {
    return this.length + this.cur.length;
  }

  finish(): Uint8Array {
    this.flushCur();
    const out = new Uint8Array(this.length);
    let o = 0;
    for (const c of this.chunks) {
      out.set(c, o);
      o += c.length;
    }
    return out;
  }
}
