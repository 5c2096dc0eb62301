// Session settings: when intra-op worker threads spin. The machine's load cannot be set from a
// test, so os.loadavg is replaced for the 'auto' cases (and restored).
import * as assert from 'node:assert/strict';
import * as os from 'node:os';
import { Graph, OnnxSession, resolveSpinning, toModelProto } from '../../../src/onnx';

describe('onnx runtime: intra-op spinning', () => {
  // The module object itself (an ES namespace import is read-only).
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const osModule = require('node:os') as { loadavg: () => number[] };
  const realLoadavg = osModule.loadavg;
  const cores = typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
  afterEach(() => {
    osModule.loadavg = realLoadavg;
  });
  const withLoad = (load: number) => {
    osModule.loadavg = () => [load, load, load];
  };

  it('explicit true/false wins over the load', () => {
    withLoad(1000);
    assert.equal(resolveSpinning({ spinning: true }), true);
    withLoad(0);
    assert.equal(resolveSpinning({ spinning: false }), false);
  });

  it('auto spins only while the 1-minute load is below the core count, never with one thread', function () {
    if (cores < 2) this.skip(); // one core: auto never spins, checked below
    withLoad(0);
    assert.equal(resolveSpinning({}), true);
    assert.equal(resolveSpinning({ spinning: 'auto' }), true);
    assert.equal(resolveSpinning({ threads: 1 }), false);
    withLoad(cores - 0.5);
    assert.equal(resolveSpinning({}), true);
    withLoad(cores);
    assert.equal(resolveSpinning({}), false);
    withLoad(cores * 3);
    assert.equal(resolveSpinning({ threads: 2 }), false);
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
