// Session settings: whether intra-op worker threads spin (off unless asked; never with one thread).
import * as assert from 'node:assert/strict';
import { Graph, OnnxSession, SessionCache, resolveSpinning, toModelProto } from '../../../src/onnx';

describe('onnx runtime: intra-op spinning', () => {
  it('is off unless asked for, and never with one thread', () => {
    assert.equal(resolveSpinning({}), false);
    assert.equal(resolveSpinning({ threads: 2 }), false);
    assert.equal(resolveSpinning({ spinning: false }), false);
    assert.equal(resolveSpinning({ spinning: true }), true);
    assert.equal(resolveSpinning({ spinning: true, threads: 0 }), true);
    assert.equal(resolveSpinning({ spinning: true, threads: 1 }), false);
  });

  it('sessions with and without spinning compute the same', async () => {
    const g = Graph.create();
    const x = g.input('x', 'float32', [3]);
    g.output(g.mul(g.add(x, 1), 2), 'y');
    const model = toModelProto(g);
    const feeds = { x: { dtype: 'float32' as const, dims: [3], data: Float32Array.of(1, 2, 3) } };
    for (const spinning of [true, false]) {
      const s = await OnnxSession.create(model, { provider: 'cpu', threads: 2, spinning });
      assert.deepEqual(Array.from((await s.run(feeds)).y.data as Float32Array), [4, 6, 8]);
      await s.release();
    }
  });
});

describe('onnx runtime: releasing a session', () => {
  it('a cache eviction mid-run waits for the run, then refuses new runs with a clear error', async () => {
    // A MatMul big enough that the run is still going when the cache evicts its session.
    const n = 384;
    const build = (scale: number) => () => {
      const g = Graph.create();
      const a = g.input('a', 'float32', [n, n]);
      let y = a;
      for (let i = 0; i < 12; i++) y = g.matmul(y, a);
      g.output(g.mul(y, scale), 'y');
      return toModelProto(g);
    };
    const cache = new SessionCache({ provider: 'cpu', threads: 1 }, 1);
    const first = await cache.get('first', build(1));
    const data = new Float32Array(n * n).fill(1 / n);
    const running = first.run({ a: { dtype: 'float32', dims: [n, n], data } });
    await cache.get('second', build(2)); // capacity 1: evicts and releases `first` while it runs
    const out = await running;
    assert.ok(Math.abs((out.y.data as Float32Array)[0] - 1 / n) < 1e-5, `got ${(out.y.data as Float32Array)[0]}`);
    await assert.rejects(first.run({ a: { dtype: 'float32', dims: [n, n], data } }), /session was released/);
    await cache.clear();
  });
});
