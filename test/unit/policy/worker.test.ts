import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { TurnwiseError } from '../../../src/core/errors';
import { initPolicyDir } from '../../../src/policy';
import { presetConfig } from '../../../src/policy/model/config';
import { TrainablePolicy, type PolicyService } from '../../../src/policy/trainable';
import type { TrainBatch } from '../../../src/policy/training/trainer';
import { initWeights } from '../../../src/policy/model/weights';
import { PolicyWorker } from '../../../src/policy/worker';
import { maxAbsDiff, SMALL_CONFIG } from './helpers';

const V = SMALL_CONFIG.vocab_size;
const ids = (n: number, k: number) => Array.from({ length: n }, (_, i) => (i * k + 3) % V);
const settings = { provider: 'cpu' as const, threads: 1 };

/** Two turns of two episodes, then a train step and one more turn: what an RL iteration does. */
async function script(p: PolicyService) {
  const a = await p.newSequence(ids(12, 5));
  const b = await p.newSequence(ids(30, 7));
  const turn1 = await p.sample([
    { seq: a, seed: 1, maxNewTokens: 6, temperature: 1.1, stopIds: [] },
    { seq: b, seed: 2, maxNewTokens: 9, temperature: 1.1, stopIds: [] },
  ]);
  await p.extend([
    { seq: a, ids: ids(7, 3) },
    { seq: b, ids: ids(2, 9) },
  ]);
  const turn2 = await p.sample([
    { seq: b, seed: 3, maxNewTokens: 5, temperature: 0.8, stopIds: [] },
    { seq: a, seed: 4, maxNewTokens: 5, ids: ids(3, 2), stopIds: [] },
  ]);
  const rows = [await p.tokens(a), await p.tokens(b)];
  const before = await p.logprobs(rows);
  const seq = 32;
  const batch: TrainBatch = { inputIds: rows[1].slice(0, seq), lossMask: rows[1].slice(0, seq).map((_, i) => (i > 10 ? 1 : 0)) };
  // A learning-rate function crosses the thread as the rates of this call's steps.
  const metrics = await p.train({ loss: 'sft', batch: 1, seq }, [batch, batch], { lr: (step: number) => 0.01 * (step + 1) });
  const after = await p.logprobs(rows);
  const reference = await p.logprobs(rows, { model: 'reference' });
  const turn3 = await p.sample([{ seq: a, seed: 5, maxNewTokens: 4, ids: [1, 2], stopIds: [] }]);
  await p.release(a);
  return { turn1, turn2, turn3, rows, before, after, reference, metrics, finalTokens: await p.tokens(b) };
}

describe('policy/worker: the trained policy in a worker thread', function () {
  this.timeout(120000);
  const weights = initWeights(SMALL_CONFIG, 21, 0.3);

  it('gives the same samples, log-probs and training metrics as in this thread; after train() it samples the new weights', async () => {
    const local = new TrainablePolicy(weights, { settings });
    const worker = new PolicyWorker();
    try {
      await worker.loadWeights(weights, { settings });
      const here = await script(local);
      const there = await script(worker);
      assert.deepEqual(there.turn1, here.turn1);
      assert.deepEqual(there.turn2, here.turn2);
      assert.deepEqual(there.turn3, here.turn3);
      assert.deepEqual(there.finalTokens, here.finalTokens);
      assert.deepEqual(there.metrics, here.metrics);
      for (const k of ['before', 'after', 'reference'] as const) there[k].forEach((r, i) => assert.ok(maxAbsDiff(r, here[k][i]) < 1e-6, k));
      // Training changed what is sampled and scored; the reference stayed at the starting weights.
      assert.ok(maxAbsDiff(here.after[1], here.before[1]) > 1e-3, "log-probs after train() are the new weights'");
      assert.ok(maxAbsDiff(here.reference[1], here.before[1]) < 1e-6);
      assert.equal(here.before[0][0], 0);
      assert.equal((await worker.info()).step, 2);
      await assert.rejects(
        worker.tokens(1),
        (e: unknown) => e instanceof TurnwiseError && e.code === 'invalid-input' && /no sequence 1/.test(e.message) && !!e.hint,
      );
    } finally {
      await local.dispose();
      await worker.dispose();
    }
  });

  it('an error in the worker comes back as a TurnwiseError with its code and hint', async () => {
    const worker = new PolicyWorker();
    try {
      await assert.rejects(worker.newSequence([1]), (e: unknown) => e instanceof TurnwiseError && /no policy is loaded/.test(e.message));
      await worker.loadWeights(weights, { settings });
      const s = await worker.newSequence([1, 2]);
      await assert.rejects(
        worker.extend([{ seq: s, ids: [V + 5] }]),
        (e: unknown) =>
          e instanceof TurnwiseError &&
          e.code === 'invalid-input' &&
          /outside the vocabulary/.test(e.message) &&
          /tokenizer/.test(e.hint ?? ''),
      );
      // The worker goes on after an error.
      const [r] = await worker.sample([{ seq: s, maxNewTokens: 3, temperature: 0, stopIds: [] }]);
      assert.equal(r.tokenIds.length, 3);
    } finally {
      await worker.dispose();
    }
  });

  it('a crash rejects every pending call and every later one; dispose rejects pending calls', async () => {
    const worker = new PolicyWorker();
    await worker.loadWeights(weights, { settings });
    const s = await worker.newSequence(ids(20, 3));
    const [pending, crash, queued] = await Promise.allSettled([
      worker.sample([{ seq: s, maxNewTokens: 50, stopIds: [] }]),
      worker.crashForTest(),
      worker.logprobs([ids(10, 3)]),
    ]);
    for (const r of [crash, queued]) {
      assert.equal(r.status, 'rejected');
      assert.match((r as PromiseRejectedResult).reason.message, /the policy worker crashed: simulated crash.*did not finish/);
    }
    // The sample may have finished before the crash; if not, it was rejected the same way.
    if (pending.status === 'rejected') assert.match(pending.reason.message, /crashed/);
    await assert.rejects(worker.info(), /the policy worker crashed/);
    await worker.dispose();

    const other = new PolicyWorker();
    await other.loadWeights(weights, { settings });
    const s2 = await other.newSequence(ids(20, 3));
    const inFlight = other.sample([{ seq: s2, maxNewTokens: 100, stopIds: [] }]).then(
      () => 'answered',
      (e: Error) => e.message,
    );
    await other.dispose();
    assert.match(await inFlight, /disposed; sample did not finish/);
    await assert.rejects(other.info(), /disposed/);
  });

  it('scores 4 × 1024 tokens of turnwise-tiny off the event loop: the loop keeps turning until the answer comes', async () => {
    // What matters is where the work runs, not how fast, so the check counts event-loop turns
    // while the request is pending instead of timing anything. Scoring on this thread holds the
    // loop for each ONNX Runtime call: the same request on an in-process TrainablePolicy let it
    // turn once. On the worker thread the loop turns every few microseconds while it waits
    // (thousands of times here); 10 leaves a margin of orders of magnitude for faster machines,
    // since 4 × 1024 tokens cost milliseconds of forward passes on any CPU.
    const tiny = initWeights(presetConfig('tiny'), 0);
    const worker = new PolicyWorker();
    try {
      await worker.loadWeights(tiny, { settings: { provider: 'cpu' } });
      const rows = Array.from({ length: 4 }, (_, r) => Array.from({ length: 1024 }, (_, i) => (i * (r + 3)) % 256));
      await worker.logprobs([rows[0].slice(0, 16)]); // the session is built before the request watched
      let pending = true;
      let turnsWhilePending = 0;
      const request = worker.logprobs(rows).finally(() => (pending = false));
      await new Promise<void>((resolve) => {
        const turn = () => {
          if (!pending) return resolve();
          turnsWhilePending++;
          setImmediate(turn);
        };
        setImmediate(turn);
      });
      const out = await request;
      assert.equal(out.length, 4);
      assert.equal(out[3].length, 1024);
      assert.ok(
        turnsWhilePending >= 10,
        `the event loop turned ${turnsWhilePending} time(s) while the worker scored: the work held this thread`,
      );
    } finally {
      await worker.dispose();
    }
  });

  it('loads a checkpoint directory and saves the trained state as one', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-worker-'));
    try {
      initPolicyDir(path.join(dir, 'start'), { seed: 3 });
      const worker = new PolicyWorker();
      try {
        const info = await worker.loadCheckpoint(path.join(dir, 'start'), { provider: 'cpu' });
        assert.equal(info.config.vocab_size, 260);
        assert.equal(info.step, 0);
        assert.ok(info.tokenizerJson);
        const row = Array.from({ length: 16 }, (_, i) => 65 + i);
        await worker.train({ loss: 'sft', batch: 1, seq: 16 }, [{ inputIds: row, lossMask: row.map(() => 1) }], { lr: 1e-3 });
        await worker.saveCheckpoint(path.join(dir, 'next'));
        const saved = new PolicyWorker();
        try {
          const info2 = await saved.loadCheckpoint(path.join(dir, 'next'), { provider: 'cpu' }, { referenceDir: path.join(dir, 'start') });
          assert.equal(info2.step, 1);
          const [a] = await worker.logprobs([row]);
          const [b] = await saved.logprobs([row]);
          assert.ok(maxAbsDiff(a, b) < 1e-6);
          const [refA] = await worker.logprobs([row], { model: 'reference' });
          const [refB] = await saved.logprobs([row], { model: 'reference' });
          assert.ok(maxAbsDiff(refA, refB) < 1e-6, 'the reference given by referenceDir is the starting checkpoint');
        } finally {
          await saved.dispose();
        }
      } finally {
        await worker.dispose();
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
