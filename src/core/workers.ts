// N async workers pulling jobs until none are left, the signal aborts, or a job fails: the one
// place the rollout scheduler and mutation validation get their bounded concurrency from.

/**
 * Runs `work` on the jobs `next()` hands out, `count` workers at a time. Each worker pulls a
 * job, awaits it, and pulls again; it stops when `next()` returns undefined (so `next` may skip
 * or end early on results so far) or when `signal` has aborted (checked before every pull: jobs
 * already started run on, and get the signal themselves if they should stop).
 *
 * A job (or `next`) that throws stops every worker from starting another; the call rejects with
 * the first error once the jobs in flight have settled, so nothing runs on behind the caller's
 * back (its pools and sandboxes can be closed safely). A caller that wants one failure to spare
 * the rest catches inside `work`.
 */
export async function runWorkers<J>(
  count: number,
  next: () => J | undefined,
  work: (job: J, worker: number) => Promise<void>,
  signal?: AbortSignal,
): Promise<void> {
  if (!(count >= 1)) throw new RangeError(`runWorkers needs at least one worker, got ${count}`);
  let failure: { error: unknown } | undefined;
  const worker = async (w: number) => {
    while (!failure && !signal?.aborted) {
      try {
        const job = next();
        if (job === undefined) return;
        await work(job, w);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.floor(count) }, (_, w) => worker(w)));
  if (failure) throw failure.error;
}

/**
 * `fn` over `items`, at most `concurrency` at a time (never more workers than items), results in
 * item order. Items not started because `signal` aborted are left undefined; errors as runWorkers.
 */
export async function mapConcurrent<T, R>(
  items: readonly T[],
  concurrency: number,
  fn: (item: T, index: number) => Promise<R>,
  signal?: AbortSignal,
): Promise<Array<R | undefined>> {
  const results = new Array<R | undefined>(items.length).fill(undefined);
  let next = 0;
  await runWorkers(
    Math.max(1, Math.min(concurrency, items.length)),
    () => (next < items.length ? next++ : undefined),
    async (i) => {
      results[i] = await fn(items[i], i);
    },
    signal,
  );
  return results;
}

/**
 * At most `size` holders at a time; the others wait in arrival order. `use` holds a slot for the
 * duration of `f` and gives it back however `f` ends. Size Infinity never waits.
 */
export class Semaphore {
  private held = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(readonly size: number) {
    if (!(size >= 1)) throw new RangeError(`a semaphore needs at least one slot, got ${size}`);
  }

  /** Holders right now. */
  get inUse(): number {
    return this.held;
  }

  async use<T>(f: () => Promise<T>): Promise<T> {
    if (this.held >= this.size) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.held++;
    try {
      return await f();
    } finally {
      // Hand the slot straight to the next in line (held stays the same), or free it.
      const next = this.waiting.shift();
      if (next) next();
      else this.held--;
    }
  }
}
