// ActionBatcher: how action requests form batches. The model here is a recording stand-in (what
// is under test is the batching, not the policy); the real policy behind it is exercised by the
// docker tier's episode tests and by `bench rollout`.
import { strict as assert } from 'node:assert';
import { ActionBatcher, concatRollouts, type RolloutResult } from '../../../src/agent/scheduler';
import type { ActionModel, ActRequest, ActResult } from '../../../src/agent/types';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function recordingModel(genMs = 5): ActionModel & { batches: string[][] } {
  const batches: string[][] = [];
  return {
    batches,
    async act(reqs: readonly ActRequest[]): Promise<ActResult[]> {
      batches.push(reqs.map((r) => r.episodeId));
      await sleep(genMs);
      return reqs.map((r) => ({ text: `echo ${r.episodeId}`, tokenIds: [1], logprobs: [-0.1], finishReason: 'stop' as const }));
    },
    release() {},
  };
}

const req = (episodeId: string): ActRequest => ({ episodeId, task: 't', turns: [], seed: 1 });

describe('agent/ActionBatcher', () => {
  it('without a wait, a request goes alone as soon as the model is free', async () => {
    const model = recordingModel();
    const b = new ActionBatcher(model, { maxBatch: 8 });
    for (const id of ['a', 'b', 'c']) b.register(id);
    const first = b.act(req('a'));
    await sleep(20);
    await Promise.all([first, b.act(req('b'))]);
    assert.deepEqual(model.batches, [['a'], ['b']]);
  });

  it('with a wait, holds a batch until every registered episode asks, then sends it at once', async () => {
    const model = recordingModel();
    const b = new ActionBatcher(model, { maxBatch: 8, waitMs: 5_000 });
    for (const id of ['a', 'b', 'c']) b.register(id);
    const t0 = Date.now();
    const ps = [b.act(req('a'))];
    await sleep(30);
    ps.push(b.act(req('b')));
    await sleep(30);
    assert.equal(model.batches.length, 0, 'nothing sent while c is still running a command');
    ps.push(b.act(req('c')));
    const out = await Promise.all(ps);
    assert.deepEqual(model.batches, [['a', 'b', 'c']]);
    assert.deepEqual(
      out.map((r) => r.text),
      ['echo a', 'echo b', 'echo c'],
      'each caller gets its own row',
    );
    assert.ok(Date.now() - t0 < 2_000, 'sent when the batch was complete, not at the deadline');
    assert.ok(b.heldMs >= 50, `held time summed over requests, got ${b.heldMs}`);
  });

  it('sends a partial batch at the deadline, and at once when the missing episode retires', async () => {
    const model = recordingModel();
    const b = new ActionBatcher(model, { maxBatch: 8, waitMs: 80 });
    for (const id of ['a', 'b']) b.register(id);
    const t0 = Date.now();
    await b.act(req('a'));
    const waited = Date.now() - t0;
    assert.ok(waited >= 75 && waited < 1_000, `a waited for b up to the deadline: ${waited} ms`);

    const slow = new ActionBatcher(model, { maxBatch: 8, waitMs: 60_000 });
    for (const id of ['x', 'y']) slow.register(id);
    const p = slow.act(req('x'));
    await sleep(20);
    slow.retire('y'); // y finished its turns: nobody else will ask
    const t1 = Date.now();
    await p;
    assert.ok(Date.now() - t1 < 1_000, 'the retire released the held batch');
    assert.deepEqual(model.batches.slice(-1), [['x']]);
  });

  it('a full batch never waits, and requests of unregistered callers are not held', async () => {
    const model = recordingModel();
    const b = new ActionBatcher(model, { maxBatch: 2, waitMs: 60_000 });
    for (const id of ['a', 'b', 'c']) b.register(id);
    await Promise.all([b.act(req('a')), b.act(req('b'))]);
    assert.deepEqual(model.batches, [['a', 'b']]);
    const t0 = Date.now();
    await b.act(req('stranger'));
    assert.ok(Date.now() - t0 < 1_000);
  });
});

describe('concatRollouts', () => {
  const phase = (meanBatch: number, batches: number, n: number): RolloutResult => ({
    trajectories: [],
    wallMs: n,
    generateMs: 2 * n,
    sandboxMs: 3 * n,
    rewardMs: 4 * n,
    meanBatch,
    batches,
    heldMs: 5 * n,
  });

  it('weighs each phase’s mean batch by its batches, not its episodes, and sums the times', () => {
    // 24 first episodes in 10 batches of 6 on average, then 8 branches in 8 batches of 1: 68 / 18.
    const r = concatRollouts(phase(6, 10, 1), phase(1, 8, 10));
    assert.equal(r.batches, 18);
    assert.ok(Math.abs(r.meanBatch - 68 / 18) < 1e-12, String(r.meanBatch));
    assert.deepEqual([r.wallMs, r.generateMs, r.sandboxMs, r.rewardMs, r.heldMs], [11, 22, 33, 44, 55]);
    assert.equal(concatRollouts(phase(0, 0, 0), phase(0, 0, 0)).meanBatch, 0);
  });
});
