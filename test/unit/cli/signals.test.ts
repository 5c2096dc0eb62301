// The first SIGINT/SIGTERM asks a long command to stop and says what stopping does; the
// listener is emitted in-process (no real signal: a second one would exit the test process).
import * as assert from 'node:assert/strict';
import { stopOnSignals } from '../../../src/cli/signals';
import type { CliIO } from '../../../src/cli/command';

describe('cli/signals: the first signal stops a command cleanly and says how', () => {
  const io = (lines: string[]) => ({ out: () => undefined, err: (m: string) => lines.push(m), json: false }) as unknown as CliIO;

  it("aborts the command's signal once, with the command's own words (a training run's by default)", () => {
    const before = process.listenerCount('SIGTERM');
    const stdoutBefore = process.stdout.listenerCount('error');
    const lines: string[] = [];
    const s = stopOnSignals(io(lines), 'stopping after the current step (the weights trained so far saved to /tmp/out)');
    try {
      assert.equal(s.signal.aborted, false);
      process.emit('SIGTERM', 'SIGTERM');
      assert.equal(s.signal.aborted, true);
      assert.match(
        lines.join('\n'),
        /SIGTERM: stopping after the current step \(the weights trained so far saved to \/tmp\/out\); press Ctrl-C again/,
      );
      assert.doesNotMatch(lines.join('\n'), /iteration/, 'a warm start has no iterations to discard');
    } finally {
      s.dispose();
    }
    const train: string[] = [];
    const t = stopOnSignals(io(train));
    try {
      process.emit('SIGTERM', 'SIGTERM');
      assert.match(train.join('\n'), /the unfinished iteration discarded/);
    } finally {
      t.dispose();
    }
    // Disposed: neither listens any longer, to the signal or to stdout's errors (a command run
    // many times in one process, as the tests do, would pile them up).
    assert.equal(process.listenerCount('SIGTERM'), before);
    assert.equal(process.stdout.listenerCount('error'), stdoutBefore);
  });
});
