// Stopping long preparations on a signal. A loop of awaits that resolve at once (tree-sitter
// parses, generated modules) never lets the event loop run a signal handler or a timer, so a
// Ctrl-C would wait for the whole loop; `stopPoint` gives them a turn and stops the loop there.
import { TurnwiseError } from './errors';

/** Thrown by `stopPoint` once the signal is aborted: the work was stopped on request (the CLI exits 130). */
export class StoppedError extends TurnwiseError {
  constructor(what: string) {
    super('stopped', `stopped while ${what}`);
    this.name = 'StoppedError';
  }
}

/**
 * Lets pending signal handlers and timers run (one turn of the event loop), then throws a
 * StoppedError naming what was under way if `signal` is aborted. Call it every few items of a
 * long CPU-bound loop.
 */
export async function stopPoint(signal: AbortSignal | undefined, what: string): Promise<void> {
  if (!signal) return;
  await new Promise<void>((resolve) => setImmediate(resolve));
  if (signal.aborted) throw new StoppedError(what);
}

/**
 * What to throw for `e`, an error of work under `signal`: a StoppedError naming `what` once the
 * signal is aborted (a signal's cleanup removes this process's sandboxes, sandbox/lifecycle.ts, so
 * what fails after it is the stop, not a fault of the work), else `e` itself.
 */
export function stoppedOr(e: unknown, signal: AbortSignal | undefined, what: string): unknown {
  return signal?.aborted && !(e instanceof StoppedError) ? new StoppedError(what) : e;
}
