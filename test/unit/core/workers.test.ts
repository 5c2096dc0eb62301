// The worker pool of core/workers.ts: the bound on jobs in flight, result order, what an abort
// and a failing job stop, and pulling from a source that decides as results come in. Semaphore:
// the bound on holders, arrival order, the slot given back on failure.
import * as assert from 'node:assert/strict';
import { mapConcurrent, runWorkers, Semaphore } from '../../../src/core/workers';

const tick = (ms = 0) => new Promise((r) => setTimeout(r, ms));

describe('core/workers', () => {
  describe('runWorkers', () => {
    it('never has more than `count` jobs in flight, and uses all of them', async () => {
      let inFlight = 0;
      let peak = 0;
      let n = 0;
      const seenWorkers = new Set<number>();
      await runWorkers(
        3,
        () => (n < 20 ? n++ : undefined),
        async (job, w) => {
          inFlight++;
          peak = Math.max(peak, inFlight);
          seenWorkers.add(w);
          await tick((job * 7) % 5);
          inFlight--;
        },
      );
      assert.equal(n, 20);
      assert.equal(peak, 3);
      assert.deepEqual([...seenWorkers].sort(), [0, 1, 2]);
    });

    it('a worker index is never shared by two jobs at once (per-worker state is safe)', async () => {
      const busy = new Set<number>();
      let n = 0;
      await runWorkers(
        4,
        () => (n < 30 ? n++ : undefined),
        async (_job, w) => {
          assert.ok(!busy.has(w), `worker ${w} given two jobs at once`);
          busy.add(w);
          await tick(1);
          busy.delete(w);
        },
      );
    });

    it('lets the source stop on results so far: nothing is pulled after it says done', async () => {
      const done: number[] = [];
      let pulls = 0;
      await runWorkers(
        2,
        () => {
          pulls++;
          return done.length >= 5 ? undefined : pulls;
        },
        async (job) => {
          await tick(1);
          done.push(job);
        },
      );
      // At most one job per other worker was already in flight when the fifth finished.
      assert.ok(done.length >= 5 && done.length <= 6, `${done.length} jobs ran`);
    });

    it('an abort stops new jobs; the ones in flight finish; the call resolves', async () => {
      const ac = new AbortController();
      const started: number[] = [];
      const finished: number[] = [];
      let n = 0;
      await runWorkers(
        2,
        () => (n < 100 ? n++ : undefined),
        async (job) => {
          started.push(job);
          if (job === 3) ac.abort();
          await tick(2);
          finished.push(job);
        },
        ac.signal,
      );
      assert.ok(started.length <= 5, `started ${started.length} jobs after the abort`);
      assert.deepEqual(
        [...finished].sort((a, b) => a - b),
        [...started].sort((a, b) => a - b),
      );
    });

    it('starts nothing when the signal has already aborted', async () => {
      let pulls = 0;
      await runWorkers(
        2,
        () => pulls++,
        async () => undefined,
        AbortSignal.abort(),
      );
      assert.equal(pulls, 0);
    });

    it('a failing job stops new jobs, waits for the ones in flight, then rejects with the first error', async () => {
      let n = 0;
      let slowFinished = false;
      await assert.rejects(
        runWorkers(
          3,
          () => (n < 100 ? n++ : undefined),
          async (job) => {
            if (job === 0) {
              await tick(30);
              slowFinished = true;
              throw new Error('job 0 broke later');
            }
            if (job === 1) throw new Error('job 1 broke');
            await tick(1);
          },
        ),
        /job 1 broke/,
      );
      assert.ok(slowFinished, 'rejected while a job was still running');
      assert.equal(n, 3, 'no job was started after the failure');
    });

    it('a source that throws is a failure like a job that throws', async () => {
      await assert.rejects(
        runWorkers(
          2,
          () => {
            throw new Error('no more');
          },
          async () => undefined,
        ),
        /no more/,
      );
    });

    it('refuses fewer than one worker', async () => {
      await assert.rejects(
        runWorkers(
          0,
          () => undefined,
          async () => undefined,
        ),
        RangeError,
      );
      await assert.rejects(
        runWorkers(
          NaN,
          () => undefined,
          async () => undefined,
        ),
        RangeError,
      );
    });
  });

  describe('mapConcurrent', () => {
    it('results in item order whatever order the jobs finish in', async () => {
      const items = [30, 5, 20, 1, 10, 0];
      const order: number[] = [];
      const out = await mapConcurrent(items, 3, async (ms, i) => {
        await tick(ms);
        order.push(i);
        return `${i}:${ms}`;
      });
      assert.deepEqual(out, ['0:30', '1:5', '2:20', '3:1', '4:10', '5:0']);
      assert.notDeepEqual(order, [0, 1, 2, 3, 4, 5]);
    });

    it('never runs more than `concurrency` at once, nor more workers than items', async () => {
      let inFlight = 0;
      let peak = 0;
      const run = (items: number[], concurrency: number) =>
        mapConcurrent(items, concurrency, async (x) => {
          inFlight++;
          peak = Math.max(peak, inFlight);
          await tick(1);
          inFlight--;
          return x * 2;
        });
      assert.deepEqual(await run([1, 2, 3, 4, 5, 6, 7], 2), [2, 4, 6, 8, 10, 12, 14]);
      assert.equal(peak, 2);
      peak = 0;
      assert.deepEqual(await run([1, 2], 8), [2, 4]);
      assert.equal(peak, 2);
      assert.deepEqual(await run([], 4), []);
    });

    it('items not started before an abort stay undefined; started ones keep their result', async () => {
      const ac = new AbortController();
      const out = await mapConcurrent(
        Array.from({ length: 10 }, (_, i) => i),
        2,
        async (x) => {
          if (x === 2) ac.abort();
          await tick(1);
          return x;
        },
        ac.signal,
      );
      assert.deepEqual(out.slice(0, 3), [0, 1, 2]);
      assert.deepEqual(out.slice(4), [undefined, undefined, undefined, undefined, undefined, undefined]);
      assert.equal(out.length, 10);
    });

    it('rejects when an item rejects', async () => {
      await assert.rejects(
        mapConcurrent([1, 2, 3], 2, async (x) => {
          if (x === 2) throw new Error('two');
          return x;
        }),
        /two/,
      );
    });
  });

  describe('Semaphore', () => {
    it('at most `size` holders; the others start in arrival order as slots free', async () => {
      const s = new Semaphore(2);
      let inside = 0;
      let peak = 0;
      const started: number[] = [];
      const job = (i: number, ms: number) =>
        s.use(async () => {
          started.push(i);
          peak = Math.max(peak, ++inside);
          await tick(ms);
          inside--;
          return i;
        });
      const out = await Promise.all([job(0, 30), job(1, 5), job(2, 5), job(3, 5), job(4, 5)]);
      assert.deepEqual(out, [0, 1, 2, 3, 4]);
      assert.equal(peak, 2);
      assert.deepEqual(started, [0, 1, 2, 3, 4], 'first come, first served');
      assert.equal(s.inUse, 0);
    });

    it('a holder that throws gives its slot back (to the next in line)', async () => {
      const s = new Semaphore(1);
      const a = s.use(async () => {
        await tick(5);
        throw new Error('boom');
      });
      const b = s.use(async () => 'b ran');
      await assert.rejects(a, /boom/);
      assert.equal(await b, 'b ran');
      assert.equal(s.inUse, 0);
      assert.throws(() => new Semaphore(0), /at least one slot/);
    });
  });
});
