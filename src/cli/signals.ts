// Stopping a long command on a signal: the first SIGINT/SIGTERM asks it to stop cleanly, a
// second one stops it at once (train, demo, eval, warmstart).
import { disposeAllPolicyWorkers } from '../policy/worker';
import { disposeAllSandboxes } from '../sandbox';
import type { CliIO } from './command';

/**
 * SIGINT/SIGTERM abort the run (cleanly: for a training run, containers removed and the partial
 * iteration discarded; `stopping` says what the command does). A
 * second signal does not wait for that: it removes this process's sandboxes (a few seconds at
 * most) and exits; the run directory is marked stopped on exit (trainRun). A closed stdout (the
 * editor that started us went away) must not crash the cleanup either.
 */
export function stopOnSignals(
  io: CliIO,
  stopping = 'stopping after cleanup (containers removed, the unfinished iteration discarded)',
): { signal: AbortSignal; dispose: () => void } {
  const ac = new AbortController();
  let count = 0;
  const ignore = () => undefined;
  process.stdout.on('error', ignore);
  process.stderr.on('error', ignore);
  const onSig = (sig: NodeJS.Signals) => {
    count++;
    if (count === 1) {
      io.err(`\nturnwise: ${sig}: ${stopping}; press Ctrl-C again to force`);
      ac.abort();
    } else if (count === 2) {
      // Policy workers too: process.exit() mid-run would end their threads inside an ONNX
      // Runtime call and abort the process instead of exiting 130.
      void Promise.all([disposeAllSandboxes(3000), disposeAllPolicyWorkers(3000)]).finally(() => process.exit(130));
    } else {
      process.exit(130);
    }
  };
  process.on('SIGINT', onSig);
  process.on('SIGTERM', onSig);
  return {
    signal: ac.signal,
    dispose: () => {
      process.off('SIGINT', onSig);
      process.off('SIGTERM', onSig);
      process.stdout.off('error', ignore);
      process.stderr.off('error', ignore);
    },
  };
}
