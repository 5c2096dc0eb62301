// PolicyWorker.dispose() while a session run is in flight (what a SIGINT/SIGTERM during
// generation or an update does: the run stops, the harness closes its policy). Terminating the worker
// thread mid-run used to abort the process from inside onnxruntime-node ("terminate called after
// throwing an instance of 'Napi::Error'", exit 134) in 4 of these 5 cases. Real worker, real ONNX
// Runtime, each case its own process (an abort cannot be caught in-process). The delays only
// place dispose() at different points of the call; nothing is asserted about time.
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';

const FIXTURE = path.join(__dirname, 'fixtures', 'dispose-in-flight.ts');

describe('policy/worker: dispose while a run is in flight', function () {
  this.timeout(180_000);
  for (const delay of [0, 20, 50, 100, 200]) {
    it(`dispose ${delay} ms after a call was sent: the process exits 0, the call is answered or rejected, later calls are refused`, () => {
      const r = spawnSync(process.execPath, ['--require', 'tsx/cjs', FIXTURE, String(delay)], { encoding: 'utf8' });
      const out = `${r.stdout}\n${r.stderr}`;
      assert.ok(!out.includes('terminate called'), `native abort:\n${out}`);
      assert.equal(r.signal, null, `killed by ${r.signal}:\n${out}`);
      assert.equal(r.status, 0, out);
      const res = JSON.parse(r.stdout.trim().split('\n').pop()!) as {
        inFlight: { rows?: number; finite?: boolean; error?: string };
        after: string;
      };
      // Answered if it finished before dispose(), else rejected saying so; never left hanging.
      if (res.inFlight.error !== undefined) assert.match(res.inFlight.error, /disposed; logprobs did not finish/);
      else assert.deepEqual(res.inFlight, { rows: 8, finite: true });
      assert.match(res.after, /disposed/, 'a call after dispose() is refused');
    });
  }
});
