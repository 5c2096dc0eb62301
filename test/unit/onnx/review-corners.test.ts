// Corner cases a finite-difference check cannot reach (points where the function is not smooth
// or where a helper's declared shape could disagree with what ONNX Runtime computes).
import * as assert from 'node:assert/strict';
import { gradients } from '../../../src/onnx/autodiff';
import { Graph, OnnxSession, toModelProto } from '../../../src/onnx';

async function run(g: Graph, feeds: Record<string, number[]>, dims: Record<string, number[]>) {
  const s = await OnnxSession.create(toModelProto(g), { provider: 'cpu' });
  try {
    const f: Record<string, { dtype: 'float64'; dims: number[]; data: Float64Array }> = {};
    for (const [k, v] of Object.entries(feeds)) f[k] = { dtype: 'float64', dims: dims[k], data: Float64Array.from(v) };
    const out = await s.run(f);
    return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, { dims: [...v.dims], data: Array.from(v.data as Float64Array) }]));
  } finally {
    await s.release();
  }
}

describe('autodiff corner cases (review)', () => {
  it('Pow at base 0: d/da a^0 is 0 and d/db 0^b is 0 for b >= 0 (PyTorch), not NaN', async () => {
    const g = Graph.create();
    const a = g.input('a', 'float64', [3]);
    const b = g.input('b', 'float64', [3]);
    const loss = g.reduceSum(g.add(g.pow(a, b), g.pow(a, 0)));
    const [da, db] = gradients(g, loss, [a, b]);
    g.output(da, 'da');
    g.output(db, 'db');
    // a = 0 with b = 0, 2, 0.5; b's gradient at a = 0 is 0 (the limit of b·0^b·log 0 from the right is 0).
    const r = await run(g, { a: [0, 0, 0], b: [0, 2, 0.5] }, { a: [3], b: [3] });
    assert.deepEqual(r.db.data, [0, 0, 0]);
    // d/da 0^0 = 0 (b·a^(b-1) with b = 0), d/da 0^2 = 0; 0^0.5 has an infinite slope.
    assert.equal(r.da.data[0], 0);
    assert.equal(r.da.data[1], 0);
    assert.equal(r.da.data[2], Infinity);
  });

  it('reductions over an empty axis list are the identity (ONNX would reduce every axis)', async () => {
    const g = Graph.create();
    const x = g.input('x', 'float64', [2, 3]);
    const s = g.reduceSum(x, [], false);
    const m = g.reduceMean(x, [], false);
    assert.deepEqual(s.shape, [2, 3]);
    g.output(s, 's');
    g.output(m, 'm');
    const r = await run(g, { x: [1, 2, 3, 4, 5, 6] }, { x: [2, 3] });
    assert.deepEqual(r.s.dims, [2, 3]);
    assert.deepEqual(r.s.data, [1, 2, 3, 4, 5, 6]);
    assert.deepEqual(r.m.dims, [2, 3]);
  });
});
