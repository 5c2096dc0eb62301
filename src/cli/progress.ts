// A one-line progress bar on stderr for humans; silent when stderr is not a terminal or
// when --json is set, so machine output stays clean.
export class ProgressBar {
  private last = 0;
  private readonly enabled: boolean;
  constructor(
    private readonly label: string,
    private readonly total: number,
    opts: { json?: boolean; stream?: NodeJS.WriteStream } = {},
  ) {
    this.stream = opts.stream ?? process.stderr;
    this.enabled = !opts.json && !!this.stream.isTTY;
  }
  private readonly stream: NodeJS.WriteStream;

  update(done: number, note = ''): void {
    if (!this.enabled) return;
    const now = Date.now();
    if (now - this.last < 80 && done < this.total) return;
    this.last = now;
    const width = 28;
    const frac = this.total > 0 ? Math.min(1, done / this.total) : 0;
    const fill = Math.round(frac * width);
    this.stream.write(
      `\r${this.label} [${'#'.repeat(fill)}${'.'.repeat(width - fill)}] ${done}/${this.total} ${note}`.slice(0, 120).padEnd(60),
    );
  }

  done(note = ''): void {
    if (!this.enabled) return;
    this.update(this.total, note);
    this.stream.write('\n');
  }
}
