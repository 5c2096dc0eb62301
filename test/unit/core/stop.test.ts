// Ctrl-C during a long preparation: the generated fix cases are made by a loop of awaits that
// resolve at once, which would keep a signal handler (or any timer) from running until the whole
// pool is made; with a signal, the loop gives them a turn and stops. The CLI test emits SIGINT
// in-process from a timer (a real signal would reach the test runner too), which also only
// runs if the loop yields.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from '../../../src/cli/main';
import { StoppedError } from '../../../src/core/stop';
import { casePool } from '../../../src/demonstrations/cases';

describe('core/stop: long preparations stop on a signal', function () {
  this.timeout(120_000);

  it('an abort from a timer stops the generation of a pool that would take minutes; without one the pool is the same', async () => {
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), 50);
    const t0 = Date.now();
    // 100,000 cases take minutes: a loop that never yields resolves only then, and never rejects.
    const err = await casePool(3, 100_000, ac.signal).then(
      () => undefined,
      (e: unknown) => e,
    );
    clearTimeout(timer);
    assert.ok(err instanceof StoppedError, `stopped: ${String(err)}`);
    assert.equal(err.code, 'stopped');
    assert.match(err.message, /^stopped while generating fix cases \(\d+ of 100000\)$/);
    assert.ok(Date.now() - t0 < 20_000, `${Date.now() - t0} ms`);
    // The stop points draw nothing: a pool made with a signal is the pool made without one.
    const plain = await casePool(3, 12);
    const withSignal = await casePool(3, 12, new AbortController().signal);
    assert.deepEqual(withSignal, plain);
  });

  it('`turnwise warmstart`: SIGINT while its fix cases are made exits 130 at once with what it was doing, and writes nothing', async () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-stop-'));
    const out = path.join(tmp, 'model');
    const lines: string[] = [];
    const before = process.listenerCount('SIGINT');
    // Once the command listens (stopOnSignals), one SIGINT: the first asks it to stop.
    const poll = setInterval(() => {
      if (process.listenerCount('SIGINT') > before) {
        clearInterval(poll);
        setTimeout(() => process.emit('SIGINT', 'SIGINT'), 200);
      }
    }, 5);
    try {
      const t0 = Date.now();
      const code = await main(['warmstart', '--out', out, '--steps', '50'], {
        out: (t) => lines.push(t),
        err: (t) => lines.push(t),
      });
      const text = lines.join('\n');
      assert.equal(code, 130, text);
      assert.match(text, /SIGINT: stopping/);
      assert.match(text, /turnwise warmstart: stopped while generating fix cases \(\d+ of \d+\)/);
      assert.ok(Date.now() - t0 < 30_000, `${Date.now() - t0} ms`);
      assert.equal(fs.existsSync(out), false, 'nothing written');
      assert.equal(process.listenerCount('SIGINT'), before, 'the command stopped listening');
    } finally {
      clearInterval(poll);
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });
});
