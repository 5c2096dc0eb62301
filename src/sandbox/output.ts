// Streaming pieces of exec: the Docker multiplexed-stream parser, a head+tail output cap, and
// the sentinel scanner that finds where one command's output ends. All work chunk by chunk
// in O(cap) memory, whatever the command prints.

/** Parses Docker's multiplexed attach stream (8-byte frame headers) without buffering payloads. */
export class DemuxParser {
  private header = Buffer.alloc(8);
  private headerFill = 0;
  private remaining = 0;
  private stream = 0;

  constructor(private readonly onFrame: (stream: 1 | 2, data: Buffer) => void) {}

  push(chunk: Buffer): void {
    let off = 0;
    while (off < chunk.length) {
      if (this.remaining === 0) {
        const take = Math.min(8 - this.headerFill, chunk.length - off);
        chunk.copy(this.header, this.headerFill, off, off + take);
        this.headerFill += take;
        off += take;
        if (this.headerFill < 8) return;
        this.headerFill = 0;
        this.stream = this.header[0];
        this.remaining = this.header.readUInt32BE(4);
        continue;
      }
      const take = Math.min(this.remaining, chunk.length - off);
      const part = chunk.subarray(off, off + take);
      off += take;
      this.remaining -= take;
      // Stream 0 (stdin echo) never carries data here; anything not stderr counts as stdout.
      this.onFrame(this.stream === 2 ? 2 : 1, part);
    }
  }
}

/**
 * Keeps the first and last `maxBytes / 2` bytes of a stream and counts what fell in between.
 * The tail is a ring buffer, so memory is fixed no matter how much passes through.
 */
export class CappedOutput {
  private readonly headCap: number;
  private readonly tailCap: number;
  private readonly head: Buffer;
  private headLen = 0;
  private readonly tail: Buffer;
  private tailStart = 0;
  private tailLen = 0;
  total = 0;

  constructor(maxBytes: number) {
    const cap = Math.max(2, Math.floor(maxBytes));
    this.headCap = Math.ceil(cap / 2);
    this.tailCap = cap - this.headCap;
    this.head = Buffer.alloc(this.headCap);
    this.tail = Buffer.alloc(this.tailCap);
  }

  write(chunk: Buffer): void {
    this.total += chunk.length;
    let data = chunk;
    if (this.headLen < this.headCap) {
      const take = Math.min(this.headCap - this.headLen, data.length);
      data.copy(this.head, this.headLen, 0, take);
      this.headLen += take;
      data = data.subarray(take);
    }
    if (data.length === 0 || this.tailCap === 0) return;
    if (data.length >= this.tailCap) {
      data.copy(this.tail, 0, data.length - this.tailCap);
      this.tailStart = 0;
      this.tailLen = this.tailCap;
      return;
    }
    for (let i = 0; i < data.length;) {
      const writeAt = (this.tailStart + this.tailLen) % this.tailCap;
      if (this.tailLen < this.tailCap) {
        const n = Math.min(data.length - i, this.tailCap - writeAt, this.tailCap - this.tailLen);
        data.copy(this.tail, writeAt, i, i + n);
        this.tailLen += n;
        i += n;
      } else {
        const n = Math.min(data.length - i, this.tailCap - this.tailStart);
        data.copy(this.tail, this.tailStart, i, i + n);
        this.tailStart = (this.tailStart + n) % this.tailCap;
        i += n;
      }
    }
  }

  get truncated(): boolean {
    return this.total > this.headLen + this.tailLen;
  }

  /** The kept bytes as text, with a marker where the middle was dropped. */
  text(): string {
    const ordered =
      this.tailLen < this.tailCap || this.tailStart === 0
        ? this.tail.subarray(0, this.tailLen)
        : Buffer.concat([this.tail.subarray(this.tailStart), this.tail.subarray(0, this.tailStart)]);
    const head = this.head.subarray(0, this.headLen);
    if (!this.truncated) return Buffer.concat([head, ordered]).toString('utf8');
    const dropped = this.total - this.headLen - this.tailLen;
    return `${head.toString('utf8')}\n[... ${dropped} bytes elided ...]\n${ordered.toString('utf8')}`;
  }
}

/**
 * Finds `marker` followed by fields and a terminating NUL in a byte stream. Bytes before the
 * marker are passed on as output; a possible partial marker at a chunk's end is held back.
 */
export class SentinelScanner {
  private pending: Buffer = Buffer.alloc(0);
  private found = false;
  private fieldsBuf: Buffer = Buffer.alloc(0);
  /** The text between the marker and the terminating NUL, once seen. */
  fields: string | undefined;

  constructor(
    private readonly marker: Buffer,
    private readonly onOutput: (data: Buffer) => void,
  ) {}

  get done(): boolean {
    return this.fields !== undefined;
  }

  /** Feeds bytes; returns the bytes that came after the terminated sentinel (normally none). */
  push(chunk: Buffer): Buffer {
    if (this.fields !== undefined) return chunk;
    if (this.found) return this.pushFields(chunk);
    const data = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    const at = data.indexOf(this.marker);
    if (at >= 0) {
      if (at > 0) this.onOutput(data.subarray(0, at));
      this.found = true;
      this.pending = Buffer.alloc(0);
      return this.pushFields(data.subarray(at + this.marker.length));
    }
    // Hold back the longest suffix that could be the start of the marker.
    let keep = 0;
    const max = Math.min(this.marker.length - 1, data.length);
    for (let k = max; k > 0; k--) {
      if (data.subarray(data.length - k).equals(this.marker.subarray(0, k))) {
        keep = k;
        break;
      }
    }
    if (data.length - keep > 0) this.onOutput(data.subarray(0, data.length - keep));
    this.pending = keep ? Buffer.from(data.subarray(data.length - keep)) : Buffer.alloc(0);
    return Buffer.alloc(0);
  }

  private pushFields(chunk: Buffer): Buffer {
    const end = chunk.indexOf(0);
    if (end < 0) {
      this.fieldsBuf = Buffer.concat([this.fieldsBuf, chunk]);
      if (this.fieldsBuf.length > 256) throw new Error('malformed sentinel from the sandbox shell');
      return Buffer.alloc(0);
    }
    this.fields = Buffer.concat([this.fieldsBuf, chunk.subarray(0, end)]).toString('latin1');
    return chunk.subarray(end + 1);
  }

  /** Bytes held back as a possible partial marker (flushed as output when giving up). */
  flush(): void {
    if (!this.found && this.pending.length) this.onOutput(this.pending);
    this.pending = Buffer.alloc(0);
  }
}
