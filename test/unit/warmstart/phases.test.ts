// The warm start end to end at toy size (a fresh turnwise-tiny, a few seconds of real ONNX Runtime
// training on CPU): it writes a checkpoint that loads, and a phase continued with --from records
// its history: warmstart.json lists both phases and the checkpoint's warmstart-log.jsonl holds the
// first phase's rows, then the second's, each tagged with its phase.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { loadCheckpoint } from '../../../src/policy/files/checkpoint';
import { warmstart } from '../../../src/warmstart/run';
import type { WarmstartOptions } from '../../../src/warmstart/config';

describe('warmstart: phases', function () {
  this.timeout(300_000);
  let dir: string;
  before(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-warmstart-'))));
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  const toy = (o: Partial<WarmstartOptions>): WarmstartOptions => ({
    out: '',
    minutes: 0.08,
    rows: 2,
    rowTokens: 256,
    poolSize: 12,
    evalCases: 4,
    settings: { provider: 'cpu', threads: 1 },
    ...o,
  });

  it('a fresh phase, then one continued with --from: checkpoints load, history and curve carried', async () => {
    const a = path.join(dir, 'a');
    const b = path.join(dir, 'b');
    const ra = await warmstart(toy({ out: a, seed: 1 }));
    assert.ok(ra.steps >= 1, 'trained at least one step');
    assert.ok(ra.log.length >= 1 && ra.log.every((r) => r.phase === 1));
    const last = ra.log[ra.log.length - 1];
    assert.equal(typeof last.exact_fix, 'number', 'the final row carries the evaluation');
    const ck = loadCheckpoint(a, { optimizer: true });
    assert.ok(ck.optimizer, 'the optimizer state is saved for a continuation');

    const rb = await warmstart(toy({ out: b, from: a, seed: 2 }));
    assert.ok(rb.log.every((r) => r.phase === 2));
    const rec = JSON.parse(fs.readFileSync(path.join(b, 'warmstart.json'), 'utf8'));
    assert.equal(rec.phases.length, 2);
    assert.deepEqual(
      rec.phases.map((p: { steps: number }) => p.steps),
      [ra.steps, rb.steps],
    );
    const rows = fs
      .readFileSync(path.join(b, 'warmstart-log.jsonl'), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.deepEqual(
      rows.map((r) => r.phase),
      [...ra.log.map(() => 1), ...rb.log.map(() => 2)],
    );
    assert.deepEqual(
      rows.map((r) => r.step),
      [...ra.log, ...rb.log].map((r) => r.step),
    );
    // The first checkpoint's own files are untouched by the continuation.
    assert.equal(JSON.parse(fs.readFileSync(path.join(a, 'warmstart.json'), 'utf8')).phases.length, 1);
  });
});
