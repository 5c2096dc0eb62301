// Session settings: whether intra-op worker threads spin (off unless asked; never with one thread).
import * as assert from 'node:assert/strict';
import { Graph, OnnxSession, resolveSpinning, toModelProto } from '../../../src/onnx';

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
