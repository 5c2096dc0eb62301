import * as assert from 'node:assert/strict';
import { Graph, OnnxSession, toModelProto } from '../../../src/onnx';

describe('onnx graph builder', () => {
  it('builds and runs a small graph with broadcasting, gather and a renamed output', async () => {
    const g = Graph.create('t');
    const x = g.input('x', 'float32', ['B', 3]);
    const w = g.input('w', 'float32', [3, 2]);
    const b = g.input('b', 'float32', [2]);
    const ids = g.input('ids', 'int64', ['B']);
    const y = g.add(g.matmul(x, w), b);
    assert.deepEqual(y.shape, ['B', 2]);
    const lp = g.logSoftmax(y, -1);
    const picked = g.squeeze(g.gatherElements(lp, g.unsqueeze(ids, [1]), 1), [1]);
    g.output(y, 'y');
    g.output(g.neg(g.reduceMean(picked)), 'loss');
    const s = await OnnxSession.create(toModelProto(g), { provider: 'cpu' });
    const X = [1, 2, 3, -1, 0, 2];
    const W = [0.5, -1, 1, 0, -0.5, 2];
    const B = [0.1, -0.2];
    const out = await s.run({
      x: { dtype: 'float32', dims: [2, 3], data: Float32Array.from(X) },
      w: { dtype: 'float32', dims: [3, 2], data: Float32Array.from(W) },
      b: { dtype: 'float32', dims: [2], data: Float32Array.from(B) },
      ids: { dtype: 'int64', dims: [2], data: BigInt64Array.of(1n, 0n) },
    });
    const ref: number[] = [];
    for (let i = 0; i < 2; i++) for (let j = 0; j < 2; j++) ref.push(B[j] + [0, 1, 2].reduce((a, k) => a + X[i * 3 + k] * W[k * 2 + j], 0));
    assert.deepEqual(out.y.dims, [2, 2]);
    Array.from(out.y.data as Float32Array).forEach((v, i) => assert.ok(Math.abs(v - ref[i]) < 1e-5, `${v} vs ${ref[i]}`));
    const lse = (a: number, c: number) => Math.log(Math.exp(a) + Math.exp(c));
    const expLoss = -(ref[1] - lse(ref[0], ref[1]) + (ref[2] - lse(ref[2], ref[3]))) / 2;
    assert.ok(Math.abs((out.loss.data as Float32Array)[0] - expLoss) < 1e-5);
    await s.release();
  });

  it('prefixes node names with nested scopes and restores the scope after a throw', () => {
    const g = Graph.create('scoped');
    const x = g.input('x', 'float32', [2]);
    const a = g.scope('fwd', () => g.scope('layer0', () => g.neg(x)));
    assert.throws(
      () =>
        g.scope('bwd', () => {
          g.exp(a);
          throw new Error('boom');
        }),
      /boom/,
    );
    g.sqrt(a);
    const names = g.nodes.map((n) => n.name);
    assert.deepEqual(names, ['fwd/layer0/Neg', 'bwd/Exp', 'Sqrt']);
  });

  it('shares equal small constants but keeps -0 and +0 apart (1/x tells them apart)', async () => {
    const g = Graph.create('zeros');
    assert.equal(g.scalar(2, 'float32'), g.scalar(2, 'float32'));
    const neg = g.scalar(-0, 'float32');
    const pos = g.scalar(0, 'float32');
    assert.notEqual(neg, pos);
    g.output(g.div(g.scalar(1, 'float32'), neg), 'a');
    g.output(g.div(g.scalar(1, 'float32'), pos), 'b');
    const s = await OnnxSession.create(toModelProto(g), { provider: 'cpu' });
    const out = await s.run({});
    assert.equal((out.a.data as Float32Array)[0], -Infinity);
    assert.equal((out.b.data as Float32Array)[0], Infinity);
    await s.release();
  });

  it('runs a Loop with carried values and scan outputs', async () => {
    const g = Graph.create('loop');
    const x = g.input('x', 'float64', [2]);
    const r = g.loop(4, [x], (b, iter, [c]) => {
      const next = b.mul(c, 2);
      return { carried: [next], scan: [b.reduceSum(next, [0])] };
    });
    g.output(r.carried[0], 'y');
    g.output(r.scan[0], 'sums');
    const s = await OnnxSession.create(toModelProto(g), { provider: 'cpu' });
    const out = await s.run({ x: { dtype: 'float64', dims: [2], data: Float64Array.of(1, 2) } });
    assert.deepEqual(Array.from(out.y.data as Float64Array), [16, 32]);
    assert.deepEqual(Array.from(out.sums.data as Float64Array), [6, 12, 24, 48]);
  });

  it("writes only the nodes an output needs, through a Loop body's reads of outer values too", async () => {
    const g = Graph.create('dead');
    const x = g.input('x', 'float32', [2]);
    const scale = g.mul(x, 3); // read only inside the loop body
    const unused = g.exp(g.mul(x, 5)); // no output needs it, nor its input
    void unused;
    const r = g.loop(2, [x], (b, _iter, [c]) => {
      b.neg(c); // dead inside the body
      return { carried: [b.add(c, scale)] };
    });
    g.output(r.carried[0], 'y');
    const live = g.liveNodes().map((n) => n.op);
    assert.deepEqual(live, ['Mul', 'Loop'], 'the dead Mul and Exp are left out, the Mul the body reads is kept');
    assert.equal(g.nodes.length, 4);
    const body = g.nodes.find((n) => n.op === 'Loop')!.attrs.body as Graph;
    assert.deepEqual(
      body.nodes.map((n) => n.op),
      ['Neg', 'Add', 'Identity'],
    );
    assert.deepEqual(
      body.liveNodes().map((n) => n.op),
      ['Add', 'Identity'],
      "the body's Neg is left out; its condition passes through",
    );
    const s = await OnnxSession.create(toModelProto(g), { provider: 'cpu' });
    const out = await s.run({ x: { dtype: 'float32', dims: [2], data: Float32Array.of(1, 2) } });
    assert.deepEqual(Array.from(out.y.data as Float32Array), [7, 14]);
    await s.release();
  });

  it('rejects mismatched shapes at build time', () => {
    const g = Graph.create();
    const a = g.input('a', 'float32', [2, 3]);
    const b = g.input('b', 'float32', [4, 3]);
    assert.throws(() => g.add(a, b), /cannot broadcast/);
    assert.throws(() => g.matmul(a, b), /inner dims differ/);
  });
});
