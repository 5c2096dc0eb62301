import * as assert from 'node:assert/strict';
import { DIFFERENTIABLE_OPS, gradients } from '../../../src/onnx/autodiff';
import { Graph, OnnxSession, toModelProto } from '../../../src/onnx';
import { logSoftmaxComposed } from '../../../src/policy/training/graphs';
import { checkGradients, FdInput } from './fd';

const T = (name: string, shape: (number | string)[], extra: Partial<FdInput> = {}): FdInput => ({ name, shape, ...extra });
const covered = new Set<string>();
function op(name: string, ...ops: string[]) {
  return (title: string, fn: () => Promise<unknown>) =>
    it(`${name}: ${title}`, async () => {
      await fn();
      for (const o of [name, ...ops]) covered.add(o);
    });
}

describe('autodiff: finite-difference checks per op (float64)', function () {
  this.timeout(60000);

  op('Add')('with broadcasting over leading and size-1 axes', () =>
    checkGradients([T('a', [2, 3, 4]), T('b', [3, 1])], (g, [a, b]) => g.add(a, b)),
  );
  op('Sub')('with broadcasting', () => checkGradients([T('a', [4]), T('b', [2, 3, 4])], (g, [a, b]) => g.sub(a, b)));
  op('Mul')('with broadcasting on both sides', () => checkGradients([T('a', [2, 1, 4]), T('b', [3, 1])], (g, [a, b]) => g.mul(a, b)));
  op('Mul')('x·x (one input used twice accumulates)', () => checkGradients([T('a', [3, 2])], (g, [a]) => g.mul(a, a)));
  op('Div')('with broadcasting', () => checkGradients([T('a', [2, 3]), T('b', [3], { range: [0.5, 2] })], (g, [a, b]) => g.div(a, b)));
  op('Neg')('', () => checkGradients([T('a', [5])], (g, [a]) => g.neg(a)));
  op('Pow')('constant exponent 3 and 2', () =>
    checkGradients([T('a', [4], { range: [0.5, 2] })], (g, [a]) => g.add(g.pow(a, 3), g.pow(a, 2))),
  );
  op('Pow')('tensor exponent (both inputs)', () =>
    checkGradients([T('a', [2, 3], { range: [0.5, 2] }), T('b', [3], { range: [-1, 2] })], (g, [a, b]) => g.pow(a, b)),
  );
  op('Sqrt')('', () => checkGradients([T('a', [5], { range: [0.5, 3] })], (g, [a]) => g.sqrt(a)));
  op('Exp')('', () => checkGradients([T('a', [5])], (g, [a]) => g.exp(a)));
  op('Log')('', () => checkGradients([T('a', [5], { range: [0.5, 3] })], (g, [a]) => g.log(a)));
  op('Reciprocal')('', () => checkGradients([T('a', [5], { range: [0.5, 3] })], (g, [a]) => g.reciprocal(a)));
  op('Sigmoid')('', () => checkGradients([T('a', [6], { range: [-3, 3] })], (g, [a]) => g.sigmoid(a)));
  op('Mul', 'Sigmoid')('x·sigmoid(x) (SiLU, fused rule), either operand order, sigmoid also used elsewhere', async () => {
    await checkGradients([T('a', [2, 5], { range: [-4, 4] })], (g, [a]) => g.mul(a, g.sigmoid(a)));
    await checkGradients([T('a', [2, 5], { range: [-4, 4] })], (g, [a]) => g.mul(g.sigmoid(a), a));
    // The sigmoid's other consumer still sends its own gradient through the Sigmoid rule.
    await checkGradients([T('a', [7], { range: [-4, 4] }), T('u', [7])], (g, [a, u]) => {
      const s = g.sigmoid(a);
      return g.add(g.mul(g.mul(a, s), u), g.mul(s, s));
    });
  });
  op('Tanh')('', () => checkGradients([T('a', [6], { range: [-2, 2] })], (g, [a]) => g.tanh(a)));
  op('Relu')('away from the kink', () => checkGradients([T('a', [6], { values: [-1, -0.5, -0.2, 0.3, 0.7, 2] })], (g, [a]) => g.relu(a)));
  op('Abs')('away from the kink', () => checkGradients([T('a', [4], { values: [-1, -0.3, 0.4, 2] })], (g, [a]) => g.abs(a)));
  op('Sin')('', () => checkGradients([T('a', [5], { range: [-3, 3] })], (g, [a]) => g.sin(a)));
  op('Cos')('', () => checkGradients([T('a', [5], { range: [-3, 3] })], (g, [a]) => g.cos(a)));
  op('Softmax')('last axis', () => checkGradients([T('a', [2, 5])], (g, [a]) => g.softmax(a, -1)));
  op('Softmax')('middle axis', () => checkGradients([T('a', [2, 3, 2])], (g, [a]) => g.softmax(a, 1)));
  op('LogSoftmax')('last axis', () => checkGradients([T('a', [3, 4])], (g, [a]) => g.logSoftmax(a, -1)));
  op(
    'ReduceMax',
    'Sub',
    'Exp',
    'Log',
  )('log-softmax composed with a stop-gradient max (policy/training)', () =>
    checkGradients([T('a', [3, 5], { range: [-4, 4] })], (g, [a]) => logSoftmaxComposed(g, a)),
  );
  op('MatMul', 'Gemm')('[B,T,K] @ [K,N] (Gemm path)', () =>
    checkGradients([T('a', [2, 3, 4]), T('b', [4, 5])], (g, [a, b]) => g.matmul(a, b)),
  );
  op('MatMul')('2-D @ 2-D', () => checkGradients([T('a', [3, 4]), T('b', [4, 2])], (g, [a, b]) => g.matmul(a, b)));
  op('MatMul', 'Transpose')('x·Wᵀ (a linear layer, W [out, in]): gradients for both x and W', () =>
    checkGradients([T('x', [2, 3, 4]), T('w', [5, 4])], (g, [x, w]) => g.matmul(x, g.transpose(w, [1, 0]))),
  );
  it("MatMul: x·Wᵀ's backward pass reads W itself, so the transposed copy has only the forward product as its consumer (it fuses instead of being kept)", () => {
    const g = Graph.create('linear');
    const x = g.input('x', 'float32', [6, 4]);
    const w = g.input('w', 'float32', [5, 4]);
    const wt = g.transpose(w, [1, 0]);
    const loss = g.reduceSum(g.mul(g.matmul(x, wt), g.matmul(x, wt)), [0, 1]);
    gradients(g, loss, [x]);
    const readers = g.nodes.filter((n) => n.inputs.includes(wt));
    assert.deepEqual(
      readers.map((n) => n.op),
      ['MatMul', 'MatMul'],
      'only the two forward products read Wᵀ',
    );
    assert.ok(
      g.nodes.some((n) => n.op === 'Gemm' && n.inputs.includes(w)),
      'dx = dY·W reads W',
    );
  });
  op('MatMul')('batched [2,3,4] @ [2,4,5]', () => checkGradients([T('a', [2, 3, 4]), T('b', [2, 4, 5])], (g, [a, b]) => g.matmul(a, b)));
  op('MatMul')('broadcast batch dims [2,1,3,4] @ [3,4,2]', () =>
    checkGradients([T('a', [2, 1, 3, 4]), T('b', [3, 4, 2])], (g, [a, b]) => g.matmul(a, b)),
  );
  op('MatMul')('2-D A against batched B', () => checkGradients([T('a', [3, 4]), T('b', [2, 4, 2])], (g, [a, b]) => g.matmul(a, b)));
  op('MatMul')('symbolic batch dim, weight operand', () =>
    checkGradients([T('a', ['B', 3, 4], { dims: [2, 3, 4] }), T('b', [4, 2])], (g, [a, b]) => g.reduceSum(g.matmul(a, b), [0])),
  );
  op('ReduceSum')('axes, keepdims=0', () => checkGradients([T('a', [2, 3, 4])], (g, [a]) => g.reduceSum(a, [0, 2])));
  op('ReduceSum')('keepdims=1, negative axis', () => checkGradients([T('a', [2, 3])], (g, [a]) => g.reduceSum(a, [-1], true)));
  op('ReduceSum')('all axes', () => checkGradients([T('a', [2, 3])], (g, [a]) => g.reduceSum(a)));
  op('ReduceMean')('static dims', () => checkGradients([T('a', [2, 3, 4])], (g, [a]) => g.reduceMean(a, [1])));
  op(
    'ReduceMean',
    'ReduceProd',
    'Shape',
  )('over a symbolic dim', () => checkGradients([T('a', [2, 'N'], { dims: [2, 5] })], (g, [a]) => g.reduceMean(a, [1])));
  op('ReduceMax')('distinct values', () => checkGradients([T('a', [3, 4])], (g, [a]) => g.reduceMax(a, [1])));
  op('ReduceMin')('keepdims', () => checkGradients([T('a', [3, 4])], (g, [a]) => g.reduceMin(a, [0], true)));
  op('ReduceSumSquare')('', () => checkGradients([T('a', [3, 4])], (g, [a]) => g.reduceSumSquare(a, [1])));
  op('Reshape')('with -1', () =>
    checkGradients([T('a', [2, 3, 4])], (g, [a]) => g.mul(g.reshape(a, [6, -1]), g.tensor('float64', [4], [1, 2, 3, 4]))),
  );
  op('Reshape')('symbolic leading dim', () =>
    checkGradients([T('a', ['B', 6], { dims: [2, 6] })], (g, [a]) => g.reduceSum(g.tanh(g.reshape(a, [0, 2, 3])), [0])),
  );
  op('Transpose')('', () =>
    checkGradients([T('a', [2, 3, 4])], (g, [a]) => g.mul(g.transpose(a, [2, 0, 1]), g.tensor('float64', [4, 1, 1], [1, -2, 3, 0.5]))),
  );
  op('Unsqueeze')('', () => checkGradients([T('a', [2, 3])], (g, [a]) => g.exp(g.unsqueeze(a, [0, 2]))));
  op('Squeeze')('', () => checkGradients([T('a', [2, 1, 3])], (g, [a]) => g.exp(g.squeeze(a, [1]))));
  op('Expand')('', () => checkGradients([T('a', [3, 1])], (g, [a]) => g.tanh(g.expand(a, [2, 3, 4]))));
  op('Cast')('non-float casts carry no gradient (mask), float casts pass it', () =>
    checkGradients([T('a', [5], { values: [-1, 0.5, -0.2, 0.3, 2] })], (g, [a]) =>
      g.mul(g.cast(g.cast(a, 'float64'), 'float64'), g.cast(g.greater(a, 0), 'float64')),
    ),
  );
  op('Cast')('through float32 (float32 precision)', () =>
    checkGradients([T('a', [3], { range: [0.5, 1] })], (g, [a]) => g.cast(g.exp(g.cast(a, 'float32')), 'float64'), {
      h: 1e-3,
      rtol: 1e-3,
      atol: 1e-5,
    }),
  );
  op('Where', 'Greater')('with broadcasting of the branches', () =>
    checkGradients([T('a', [2, 3]), T('b', [3])], (g, [a, b]) => g.where(g.greater(a, 0), a, b), { seed: 11 }),
  );
  op('Max')('elementwise, broadcasting', () => checkGradients([T('a', [2, 3]), T('b', [3])], (g, [a, b]) => g.max(a, b), { seed: 3 }));
  op('Min')('elementwise', () => checkGradients([T('a', [2, 3]), T('b', [2, 3])], (g, [a, b]) => g.min(a, b), { seed: 5 }));
  op('Clip')('constant bounds (PPO ratio clipping)', () =>
    checkGradients([T('a', [6], { values: [0.5, 0.75, 0.95, 1.05, 1.3, 2] })], (g, [a]) => g.clip(a, 0.8, 1.2)),
  );
  op('Clip')('lower bound only', () => checkGradients([T('a', [4], { values: [-1, -0.3, 0.4, 2] })], (g, [a]) => g.clip(a, 0)));
  op('Gather', 'ScatterND')('embedding lookup with repeated ids', () =>
    checkGradients([T('w', [5, 3]), T('ids', [2, 3], { fixed: { dtype: 'int64', data: [0, 2, 2, 4, 0, 0] } })], (g, [w, ids]) =>
      g.gather(w, ids, 0),
    ),
  );
  op('GatherElements', 'ScatterElements')('picking one log-prob per row', () =>
    checkGradients([T('a', [3, 4]), T('ids', [3, 1], { fixed: { dtype: 'int64', data: [1, 3, 0] } })], (g, [a, ids]) =>
      g.gatherElements(g.logSoftmax(a, -1), ids, 1),
    ),
  );
  op('Concat', 'Split')('static sizes', () => checkGradients([T('a', [2, 2]), T('b', [2, 3])], (g, [a, b]) => g.tanh(g.concat([a, b], 1))));
  op('Concat', 'Slice')('symbolic sizes', () =>
    checkGradients([T('a', [2, 'M'], { dims: [2, 2] }), T('b', [2, 'N'], { dims: [2, 3] })], (g, [a, b]) =>
      g.reduceSum(g.mul(g.exp(g.concat([a, b], 1)), g.concat([a, b], 1)), [1]),
    ),
  );
  // Raw nodes with negative axes (the builder helpers normalise axes; g.node does not).
  op('Concat', 'Split')('negative axis, static sizes (raw node)', () =>
    checkGradients([T('a', [2, 2]), T('b', [2, 3])], (g, [a, b]) =>
      g.tanh(g.node('Concat', [a, b], { axis: -1 }, { outputs: [{ dtype: 'float64', shape: [2, 5] }] })[0]),
    ),
  );
  op('Concat', 'Slice')('negative axis, symbolic sizes (raw node)', () =>
    checkGradients([T('a', [2, 'M'], { dims: [2, 2] }), T('b', [2, 'N'], { dims: [2, 3] })], (g, [a, b]) => {
      const c = g.node('Concat', [a, b], { axis: -1 }, { outputs: [{ dtype: 'float64', shape: [2, 'MN'] }] })[0];
      return g.reduceSum(g.mul(g.exp(c), c), [1]);
    }),
  );
  op('Gather', 'ScatterND')('axis -2 of a matrix is axis 0 (raw node)', () =>
    checkGradients(
      [T('w', [5, 3]), T('ids', [4], { fixed: { dtype: 'int64', data: [0, 2, 2, 4] } })],
      (g, [w, ids]) => g.node('Gather', [w, ids], { axis: -2 }, { outputs: [{ dtype: 'float64', shape: [4, 3] }] })[0],
    ),
  );
  op('Split', 'Concat')('negative axis (raw node)', () =>
    checkGradients([T('a', [2, 5])], (g, [a]) => {
      const [x, y] = g.node(
        'Split',
        [a, g.ints([2, 3])],
        { axis: -1 },
        {
          outputs: [
            { dtype: 'float64', shape: [2, 2] },
            { dtype: 'float64', shape: [2, 3] },
          ],
        },
      );
      return g.add(g.reduceSum(g.exp(x), [1]), g.reduceSum(g.mul(y, y), [1]));
    }),
  );
  op('Split')('some outputs unused', () => checkGradients([T('a', [2, 5])], (g, [a]) => g.exp(g.split(a, [2, 3], 1)[1])));
  op('Slice', 'Pad')('static dims, negative start', () =>
    checkGradients([T('a', [3, 6])], (g, [a]) => g.exp(g.slice(a, [1, -4], [3, 5], [0, 1]))),
  );
  op('Slice', 'Pad')('symbolic dim (rotary half-split)', () =>
    checkGradients([T('a', [2, 'D'], { dims: [2, 6] })], (g, [a]) =>
      g.reduceSum(g.mul(g.slice(a, [0], [3], [1]), g.slice(a, [3], [6], [1])), [1]),
    ),
  );
  op('Slice', 'Concat')('static halves that tile the axis (gradient by Concat)', () =>
    checkGradients([T('a', [2, 6])], (g, [a]) => {
      const lo = g.slice(a, [0], [3], [1]);
      const hi = g.slice(a, [3], [6], [1]);
      return g.add(g.concat([g.neg(g.mul(hi, hi)), g.exp(lo)], 1), g.mul(a, a));
    }),
  );
  op('Trilu')('lower triangle', () => checkGradients([T('a', [3, 3])], (g, [a]) => g.trilu(a, false)));
  op('Identity')('', () => checkGradients([T('a', [3])], (g, [a]) => g.identity(g.exp(a))));

  it('covers every op that has a backward rule', () => {
    const missing = DIFFERENTIABLE_OPS.filter((o) => !covered.has(o) && o !== 'Flatten');
    assert.deepEqual(missing, []);
  });
});

describe('autodiff: graph shape of backward rules', () => {
  it('slices that tile an axis (rotary halves) backprop through one Concat, not Pads and Adds', () => {
    const g = Graph.create();
    const x = g.input('x', 'float32', [2, 8]);
    const a = g.slice(x, [0], [4], [1]);
    const b = g.slice(x, [4], [8], [1]);
    const rot = g.concat([g.neg(b), a], 1);
    const loss = g.reduceSum(g.add(g.mul(rot, g.tensor('float32', [8], [1, 2, 3, 4, 5, 6, 7, 8])), g.mul(x, x)));
    const before = g.nodes.length;
    const [dx] = gradients(g, loss, [x]);
    const ops = g.nodes.slice(before).map((n) => n.op);
    assert.ok(!ops.includes('Pad'), ops.join(','));
    assert.equal(ops.filter((o) => o === 'Concat').length, 1);
    assert.equal(dx.producer?.op, 'Add');
  });

  it('SiLU (x·sigmoid(x)) backprops with 4 full-size ops and no gradient through the Sigmoid', () => {
    const g = Graph.create();
    const x = g.input('x', 'float32', [4, 16]);
    const dy = g.input('dy', 'float32', [4, 16]);
    const y = g.mul(x, g.sigmoid(x));
    const before = g.nodes.length;
    gradients(g, y, [x], dy);
    const ops = g.nodes.slice(before).map((n) => n.op);
    assert.deepEqual([...ops].sort(), ['Add', 'Mul', 'Mul', 'Sub']);
  });
});

describe('autodiff: stopGradient', () => {
  it('passes the value through and no gradient: d/dx (x·sg(x)) is sg(x), not 2x', async () => {
    const g = Graph.create();
    const x = g.input('x', 'float64', [3]);
    const y = g.reduceSum(g.mul(x, g.stopGradient(x)));
    const [dx] = gradients(g, y, [x]);
    g.output(dx, 'dx');
    g.output(y, 'y');
    const s = await OnnxSession.create(toModelProto(g), { provider: 'cpu' });
    const out = await s.run({ x: { dtype: 'float64', dims: [3], data: Float64Array.of(1, -2, 3) } });
    assert.deepEqual(Array.from(out.dx.data as Float64Array), [1, -2, 3]);
    assert.equal((out.y.data as Float64Array)[0], 14);
    await s.release();
  });
  it('a loss that depends on x only through a stop-gradient has zero gradient', () => {
    const g = Graph.create();
    const x = g.input('x', 'float64', [2]);
    const [dx] = gradients(g, g.reduceSum(g.exp(g.stopGradient(x))), [x]);
    assert.equal(dx.producer?.op, 'Expand'); // zerosLike: no backward nodes were built
  });
});
