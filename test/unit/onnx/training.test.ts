import * as assert from 'node:assert/strict';
import {
  Graph,
  HostTensor,
  PACK_BELOW,
  Value,
  buildTrainingGraph,
  OnnxSession,
  SessionCache,
  Trainer,
  TrainingGraphSpec,
  adamwReference,
  adamwStep,
  initTrainState,
  measureLoopSpeedup,
  resetProviderState,
  toModelProto,
} from '../../../src/onnx';
import { checkGradients, rng } from './fd';

/** A 2-layer tanh MLP with mean softmax cross-entropy: x [B,4] -> 8 -> 3 classes. */
function mlpSpec(dtype: 'float32' | 'float64' = 'float32', batchPerStep = false): Omit<TrainingGraphSpec, 'steps'> {
  return {
    dtype,
    batchPerStep,
    params: [
      { name: 'l1.weight', shape: [4, 8] },
      { name: 'l1.bias', shape: [8] },
      { name: 'l2.weight', shape: [8, 3] },
      { name: 'l2.bias', shape: [3] },
    ],
    batch: [
      { name: 'x', dtype, shape: ['B', 4] },
      { name: 'labels', dtype: 'int64', shape: ['B'] },
    ],
    metricNames: ['accuracy'],
    forward: (g, p, b) => mlpLoss(g, p['l1.weight'], p['l1.bias'], p['l2.weight'], p['l2.bias'], b.x, b.labels),
  };
}

function mlpLoss(g: Graph, w1: Graph['inputs'][0], b1: typeof w1, w2: typeof w1, b2: typeof w1, x: typeof w1, labels: typeof w1) {
  const h = g.tanh(g.add(g.matmul(x, w1), b1));
  const logits = g.add(g.matmul(h, w2), b2);
  const logp = g.logSoftmax(logits, -1);
  const picked = g.squeeze(g.gatherElements(logp, g.unsqueeze(labels, [1]), 1), [1]);
  const pred = g.node('ArgMax', [logits], { axis: 1, keepdims: 0 }, { outputs: [{ dtype: 'int64', shape: ['B'] }] })[0];
  const accuracy = g.reduceMean(g.cast(g.equal(pred, labels), logits.dtype));
  return { loss: g.neg(g.reduceMean(picked)), metrics: { accuracy } };
}

function toyData(n: number, seed: number, dtype: 'float32' | 'float64' = 'float32') {
  const r = rng(seed);
  const x: number[] = [];
  const y: number[] = [];
  for (let i = 0; i < n; i++) {
    const v = [r(), r(), r(), r()];
    x.push(...v);
    y.push(v[0] + v[1] > 0.3 ? 0 : v[2] > 0 ? 1 : 2);
  }
  const batch: Record<string, HostTensor> = {
    x: { dtype, dims: [n, 4], data: dtype === 'float32' ? Float32Array.from(x) : Float64Array.from(x) },
    labels: { dtype: 'int64', dims: [n], data: BigInt64Array.from(y, (v) => BigInt(v)) },
  };
  return batch;
}

function initParams(spec: Omit<TrainingGraphSpec, 'steps'>, seed: number) {
  const r = rng(seed);
  return Object.fromEntries(
    spec.params.map((p) => {
      const vals = Array.from({ length: p.shape.reduce((a, b) => a * b, 1) }, () => r(-0.5, 0.5));
      return [p.name, spec.dtype === 'float64' ? Float64Array.from(vals) : Float32Array.from(vals)];
    }),
  );
}

describe('onnx training graphs', function () {
  this.timeout(60000);

  it('whole 2-layer MLP with softmax cross-entropy matches finite differences (float64)', async () => {
    const labels = [0, 2, 1, 1, 0];
    const worst = await checkGradients(
      [
        { name: 'w1', shape: [4, 8] },
        { name: 'b1', shape: [8] },
        { name: 'w2', shape: [8, 3] },
        { name: 'b2', shape: [3] },
        { name: 'x', shape: ['B', 4], dims: [5, 4], fixed: { dtype: 'float64', data: Array.from({ length: 20 }, (_, i) => Math.sin(i)) } },
        { name: 'labels', shape: ['B'], dims: [5], fixed: { dtype: 'int64', data: labels } },
      ],
      (g, [w1, b1, w2, b2, x, l]) => mlpLoss(g, w1, b1, w2, b2, x, l).loss,
    );
    assert.ok(worst < 1e-6);
  });

  it('AdamW graph equals the scalar PyTorch-semantics reference over several steps (float64)', async () => {
    const g = Graph.create('adamw');
    const n = 6;
    const p = g.input('p', 'float64', [n]);
    const q = g.input('q', 'float64', [n]);
    const grads = [g.input('gp', 'float64', [n]), g.input('gq', 'float64', [n])];
    const m = [g.input('mp', 'float64', [n]), g.input('mq', 'float64', [n])];
    const v = [g.input('vp', 'float64', [n]), g.input('vq', 'float64', [n])];
    const step = g.input('step', 'float64', []);
    const h = {
      lr: g.input('lr', 'float64', []),
      beta1: g.input('b1', 'float64', []),
      beta2: g.input('b2', 'float64', []),
      eps: g.input('eps', 'float64', []),
      weightDecay: g.input('wd', 'float64', []),
    };
    const out = adamwStep(g, [p, q], grads, m, v, step, h, [true, false]);
    ['p', 'q'].forEach((k, i) => {
      g.output(out.params[i], `${k}1`);
      g.output(out.m[i], `m${k}1`);
      g.output(out.v[i], `v${k}1`);
    });
    g.output(out.step, 'step1');
    const s = await OnnxSession.create(toModelProto(g), { provider: 'cpu' });
    const r = rng(3);
    const hyper = { lr: 0.01, beta1: 0.9, beta2: 0.95, eps: 1e-8, weightDecay: 0.1 };
    const ref = { p: Float64Array.from({ length: n }, () => r()), q: Float64Array.from({ length: n }, () => r()) };
    const refM = { p: new Float64Array(n), q: new Float64Array(n) };
    const refV = { p: new Float64Array(n), q: new Float64Array(n) };
    type State = { p: Float64Array; q: Float64Array; mp: Float64Array; mq: Float64Array; vp: Float64Array; vq: Float64Array; step: number };
    let cur: State = {
      p: ref.p.slice(),
      q: ref.q.slice(),
      mp: new Float64Array(n),
      mq: new Float64Array(n),
      vp: new Float64Array(n),
      vq: new Float64Array(n),
      step: 0,
    };
    const T = (a: Float64Array | number[], dims: number[] = [n]): HostTensor => ({ dtype: 'float64', dims, data: Float64Array.from(a) });
    for (let t = 0; t < 4; t++) {
      const gp = Array.from({ length: n }, () => r(-2, 2));
      const gq = Array.from({ length: n }, () => r(-2, 2));
      const o = await s.run({
        p: T(cur.p),
        q: T(cur.q),
        gp: T(gp),
        gq: T(gq),
        mp: T(cur.mp),
        mq: T(cur.mq),
        vp: T(cur.vp),
        vq: T(cur.vq),
        step: T([cur.step], []),
        lr: T([hyper.lr], []),
        b1: T([hyper.beta1], []),
        b2: T([hyper.beta2], []),
        eps: T([hyper.eps], []),
        wd: T([hyper.weightDecay], []),
      });
      adamwReference(ref.p, gp, refM.p, refV.p, t, hyper, true);
      adamwReference(ref.q, gq, refM.q, refV.q, t, hyper, false);
      cur = {
        p: o.p1.data as Float64Array,
        q: o.q1.data as Float64Array,
        mp: o.mp1.data as Float64Array,
        mq: o.mq1.data as Float64Array,
        vp: o.vp1.data as Float64Array,
        vq: o.vq1.data as Float64Array,
        step: (o.step1.data as Float64Array)[0],
      };
      assert.equal(cur.step, t + 1);
      for (let i = 0; i < n; i++) {
        assert.ok(Math.abs(cur.p[i] - ref.p[i]) < 1e-12, `step ${t} p[${i}] ${cur.p[i]} vs ${ref.p[i]}`);
        assert.ok(Math.abs(cur.q[i] - ref.q[i]) < 1e-12, `step ${t} q[${i}] ${cur.q[i]} vs ${ref.q[i]}`);
        assert.ok(Math.abs(cur.vp[i] - refV.p[i]) < 1e-12);
        assert.ok(Math.abs(cur.mq[i] - refM.q[i]) < 1e-12);
      }
    }
    // Decay matters: the decayed and undecayed params moved differently from a plain Adam step.
    assert.notDeepEqual(Array.from(cur.p), Array.from(cur.q));
  });

  it('clips gradients by global norm (reported norm is pre-clip) and applies AdamW to the clipped gradient', async () => {
    // loss = sum(c·p) has gradient c regardless of p: easy to predict.
    const c = [3, -4, 12]; // norm 13
    const spec: Omit<TrainingGraphSpec, 'steps'> = {
      dtype: 'float64',
      params: [{ name: 'p', shape: [3], decay: false }],
      batch: [{ name: 'c', dtype: 'float64', shape: [3] }],
      forward: (g, p, b) => ({ loss: g.reduceSum(g.mul(p.p, b.c)) }),
    };
    const trainer = new Trainer(spec, 'clip', { provider: 'cpu' });
    const p0 = Float64Array.of(0.1, 0.2, 0.3);
    const batch = { c: { dtype: 'float64' as const, dims: [3], data: Float64Array.from(c) } };
    for (const maxNorm of [1, 0]) {
      const { state, metrics } = await trainer.step(initTrainState({ p: p0 }), batch, {
        lr: 0.1,
        beta1: 0.9,
        beta2: 0.99,
        eps: 1e-8,
        weight_decay: 0,
        max_grad_norm: maxNorm,
      });
      assert.ok(Math.abs(metrics.grad_norm[0] - 13) < 1e-12);
      const coef = maxNorm > 0 ? Math.min(1, maxNorm / (13 + 1e-6)) : 1;
      const ref = p0.slice();
      const m = new Float64Array(3);
      const v = new Float64Array(3);
      adamwReference(
        ref,
        c.map((x) => x * coef),
        m,
        v,
        0,
        { lr: 0.1, beta1: 0.9, beta2: 0.99, eps: 1e-8, weightDecay: 0 },
        false,
      );
      for (let i = 0; i < 3; i++) {
        assert.ok(Math.abs(state.m.p[i] - m[i]) < 1e-12, `m with max_grad_norm ${maxNorm}: ${state.m.p[i]} vs ${m[i]}`);
        assert.ok(Math.abs(state.params.p[i] - ref[i]) < 1e-12);
      }
    }
    await trainer.release();
  });

  it('small tensors packed for AdamW (both decay groups, a scalar) and a large one update exactly like the reference, over a Loop too', async () => {
    const shapes: Record<string, number[]> = { big: [130, 128], w: [3, 4], b1: [5], b2: [2], s: [] };
    assert.ok(130 * 128 >= PACK_BELOW && 12 < PACK_BELOW);
    const names = Object.keys(shapes);
    const size = (n: string) => shapes[n].reduce((a, b) => a * b, 1);
    const spec: Omit<TrainingGraphSpec, 'steps'> = {
      dtype: 'float64',
      params: names.map((n) => ({ name: n, shape: shapes[n] })),
      batch: names.map((n) => ({ name: `c_${n}`, dtype: 'float64' as const, shape: shapes[n] })),
      // loss = Σ sum(c ⊙ p) + 0.5·Σ p²: gradient c + p, known in closed form.
      forward: (g, p, b) => {
        let loss: Value | undefined;
        for (const n of names) {
          const t = g.reduceSum(g.add(g.mul(p[n], b[`c_${n}`]), g.mul(g.mul(p[n], p[n]), 0.5)));
          loss = loss ? g.add(loss, t) : t;
        }
        return { loss: loss! };
      },
    };
    const r = rng(21);
    const p0 = Object.fromEntries(names.map((n) => [n, Float64Array.from({ length: size(n) }, () => r())]));
    const c = Object.fromEntries(names.map((n) => [n, Float64Array.from({ length: size(n) }, () => r(-2, 2))]));
    const batch = Object.fromEntries(names.map((n) => [`c_${n}`, { dtype: 'float64' as const, dims: shapes[n], data: c[n] }]));
    const hyper = { lr: 0.05, beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay: 0.1, max_grad_norm: 5 };
    // Reference: two steps of clipped AdamW, decay on rank >= 2 only.
    const ref = Object.fromEntries(names.map((n) => [n, p0[n].slice()]));
    const m = Object.fromEntries(names.map((n) => [n, new Float64Array(size(n))]));
    const v = Object.fromEntries(names.map((n) => [n, new Float64Array(size(n))]));
    for (let t = 0; t < 2; t++) {
      const grad = Object.fromEntries(names.map((n) => [n, Array.from(c[n], (x, i) => x + ref[n][i])]));
      const norm = Math.sqrt(names.reduce((acc, n) => acc + grad[n].reduce((a, x) => a + x * x, 0), 0));
      const coef = Math.min(1, hyper.max_grad_norm / (norm + 1e-6));
      assert.ok(coef < 1, 'clipping is active');
      for (const n of names)
        adamwReference(
          ref[n],
          grad[n].map((x) => x * coef),
          m[n],
          v[n],
          t,
          { ...hyper, weightDecay: hyper.weight_decay },
          shapes[n].length >= 2,
        );
    }
    const check = (got: ReturnType<typeof initTrainState>, what: string) => {
      for (const n of names)
        for (let i = 0; i < size(n); i++) {
          assert.ok(Math.abs(got.params[n][i] - ref[n][i]) < 1e-12, `${what} ${n}[${i}] ${got.params[n][i]} vs ${ref[n][i]}`);
          assert.ok(Math.abs(got.v[n][i] - v[n][i]) < 1e-12, `${what} v ${n}[${i}]`);
        }
    };
    const one = new Trainer(spec, 'packed', { provider: 'cpu' });
    let st = initTrainState(p0);
    for (let t = 0; t < 2; t++) st = (await one.step(st, batch, hyper)).state;
    check(st, 'separate');
    check((await one.step(initTrainState(p0), batch, hyper, 2)).state, 'loop');
    // Three AdamW units: `big`, `w` (the only small decayed tensor) and b1+b2+s packed; one Sqrt
    // each plus the global norm's and the bias correction's.
    const g = buildTrainingGraph({ ...spec, steps: 1 });
    assert.equal(g.nodes.filter((n) => n.op === 'Sqrt').length, 3 + 2);
    await one.release();
  });

  it('names every node of a training graph by phase (fwd, bwd, opt), inside a Loop body too', () => {
    for (const steps of [1, 3]) {
      const g = buildTrainingGraph({ ...mlpSpec(), steps });
      const body = steps === 1 ? g.nodes : (g.nodes.find((n) => n.op === 'Loop')!.attrs.body as unknown as Graph).nodes;
      const phase = (op: string) => new Set(body.filter((n) => n.op === op).map((n) => n.name.split('/')[0]));
      assert.deepEqual(phase('Tanh'), new Set(['fwd']));
      assert.ok(phase('Gemm').has('bwd') || phase('MatMul').has('bwd'), 'weight gradients are backward nodes');
      assert.deepEqual(phase('Sqrt'), new Set(['opt'])); // AdamW's √v and the global norm
      assert.ok(
        body.every((n) => /^(fwd|bwd|opt)\//.test(n.name) || ['Gather', 'Identity', 'Add'].includes(n.op)),
        body
          .filter((n) => !/^(fwd|bwd|opt)\//.test(n.name))
          .map((n) => n.name)
          .join(' '),
      );
    }
  });

  it('K steps in one Loop run equal K separate runs (float32, same batch)', async () => {
    const spec = mlpSpec();
    const trainer = new Trainer(spec, 'mlp', { provider: 'cpu', threads: 1 });
    const batch = toyData(16, 1);
    const s0 = initTrainState(initParams(spec, 2));
    let sep = s0;
    const sepLoss: number[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await trainer.step(sep, batch, { lr: 0.05 });
      sep = r.state;
      sepLoss.push(r.metrics.loss[0]);
    }
    const looped = await trainer.step(s0, batch, { lr: 0.05 }, 4);
    assert.equal(looped.state.step, 4);
    assert.equal(looped.metrics.loss.length, 4);
    let maxDiff = 0;
    for (const k of Object.keys(sep.params)) {
      for (const [a, b] of [
        [sep.params[k], looped.state.params[k]],
        [sep.m[k], looped.state.m[k]],
        [sep.v[k], looped.state.v[k]],
      ]) {
        for (let i = 0; i < a.length; i++) maxDiff = Math.max(maxDiff, Math.abs(a[i] - b[i]) / Math.max(1, Math.abs(a[i])));
      }
    }
    assert.ok(maxDiff <= 1e-6, `loop vs separate runs differ by ${maxDiff}`);
    looped.metrics.loss.forEach((l, i) => assert.ok(Math.abs(l - sepLoss[i]) <= 1e-6, `loss at step ${i}: ${l} vs ${sepLoss[i]}`));
    // The steps really updated: loss went down and params moved.
    assert.ok(sepLoss[3] < sepLoss[0]);
    await trainer.release();
  });

  it('a Loop over stacked minibatches equals separate runs on each minibatch', async () => {
    const K = 3;
    const spec = mlpSpec('float32', true);
    const trainer = new Trainer(spec, 'mlp-stacked', { provider: 'cpu', threads: 1 });
    const plain = new Trainer(mlpSpec('float32', false), 'mlp-plain', { provider: 'cpu', threads: 1 });
    const mbs = [0, 1, 2].map((i) => toyData(8, 10 + i));
    const stacked: Record<string, HostTensor> = {
      x: { dtype: 'float32', dims: [K, 8, 4], data: Float32Array.from(mbs.flatMap((b) => Array.from(b.x.data as Float32Array))) },
      labels: { dtype: 'int64', dims: [K, 8], data: BigInt64Array.from(mbs.flatMap((b) => Array.from(b.labels.data as BigInt64Array))) },
    };
    const s0 = initTrainState(initParams(spec, 4));
    let sep = s0;
    for (const b of mbs) sep = (await plain.step(sep, b, { lr: 0.02 })).state;
    const looped = await trainer.step(s0, stacked, { lr: 0.02 }, K);
    for (const k of Object.keys(sep.params)) {
      const a = sep.params[k];
      const b = looped.state.params[k];
      for (let i = 0; i < a.length; i++) assert.ok(Math.abs(a[i] - b[i]) <= 1e-6, `${k}[${i}] ${a[i]} vs ${b[i]}`);
    }
    await trainer.release();
    await plain.release();
  });

  it('shared batch inputs are fed once and used by every step of a stacked Loop', async () => {
    const spec: Omit<TrainingGraphSpec, 'steps'> = {
      dtype: 'float64',
      batchPerStep: true,
      params: [{ name: 'p', shape: [2] }],
      batch: [
        { name: 'c', dtype: 'float64', shape: [2] },
        { name: 'scale', dtype: 'float64', shape: [], shared: true },
      ],
      forward: (g, p, b) => ({ loss: g.mul(b.scale, g.reduceSum(g.mul(g.mul(p.p, p.p), b.c))) }),
    };
    const loop = new Trainer(spec, 'shared', { provider: 'cpu' });
    const one = new Trainer({ ...spec, batchPerStep: false }, 'shared1', { provider: 'cpu' });
    const cs = [
      [1, 2],
      [3, -1],
      [0.5, 0.5],
    ];
    const scale = { dtype: 'float64' as const, dims: [], data: Float64Array.of(0.7) };
    const s0 = initTrainState({ p: Float64Array.of(0.3, -0.6) });
    let sep = s0;
    const losses: number[] = [];
    for (const c of cs) {
      const r = await one.step(
        sep,
        { c: { dtype: 'float64', dims: [2], data: Float64Array.from(c) }, scale },
        { lr: 0.1, max_grad_norm: 0 },
      );
      sep = r.state;
      losses.push(r.metrics.loss[0]);
    }
    const r = await loop.step(
      s0,
      { c: { dtype: 'float64', dims: [3, 2], data: Float64Array.from(cs.flat()) }, scale },
      { lr: 0.1, max_grad_norm: 0 },
      3,
    );
    r.metrics.loss.forEach((l, i) => assert.ok(Math.abs(l - losses[i]) < 1e-12, `${l} vs ${losses[i]}`));
    assert.ok(Math.abs(losses[0] - 0.7 * (0.09 * 1 + 0.36 * 2)) < 1e-12);
    for (let i = 0; i < 2; i++) assert.ok(Math.abs(r.state.params.p[i] - sep.params.p[i]) < 1e-12);
    // Parameters of the wrong float width are refused by name, before ONNX Runtime sees them.
    await assert.rejects(
      one.step(
        initTrainState({ p: Float32Array.of(0.3, -0.6) }),
        { c: { dtype: 'float64', dims: [2], data: Float64Array.from(cs[0]) }, scale },
        { lr: 0.1 },
      ),
      /values of p is a Float32Array, but this training graph is float64/,
    );
    await loop.release();
    await one.release();
  });

  it('learns the toy task, reuses one session per shape class and takes new hyperparameters without rebuilding', async () => {
    const spec = mlpSpec();
    const cache = new SessionCache({ provider: 'cpu' });
    const trainer = new Trainer(spec, 'mlp', {}, cache);
    const batch = toyData(64, 5);
    let s = initTrainState(initParams(spec, 6));
    const first = (await trainer.step(s, batch, { lr: 0.03 })).metrics;
    const sess = await trainer.session(1);
    for (let i = 0; i < 10; i++) s = (await trainer.step(s, batch, { lr: i < 5 ? 0.03 : 0.01 }, 8)).state;
    const last = (await trainer.step(s, batch, { lr: 0 })).metrics;
    assert.ok(last.loss[0] < 0.5 * first.loss[0], `loss ${first.loss[0]} -> ${last.loss[0]}`);
    assert.ok(last.accuracy[0] > first.accuracy[0]);
    assert.equal(cache.size, 2, 'one session for K=1 and one for K=8');
    assert.equal(await trainer.session(1), sess);
    // A different batch size runs on the same session (symbolic batch dim).
    const other = await trainer.step(s, toyData(5, 9), { lr: 0 });
    assert.equal(other.metrics.loss.length, 1);
    assert.equal(cache.size, 2);
    await cache.clear();
  });

  it("two Trainers given the same key but different specs, sharing a cache, never run each other's graph", async () => {
    const cache = new SessionCache({ provider: 'cpu' });
    const a = mlpSpec();
    // Same parameters and batch, different loss: half the cross-entropy.
    const b: typeof a = {
      ...a,
      forward: (g, p, x) => {
        const r = a.forward(g, p, x);
        return { ...r, loss: g.mul(r.loss, 0.5) };
      },
    };
    const ta = new Trainer(a, 'same-key', {}, cache);
    const tb = new Trainer(b, 'same-key', {}, cache);
    const s = initTrainState(initParams(a, 3));
    const batch = toyData(16, 4);
    const la = (await ta.step(s, batch, { lr: 0 })).metrics.loss[0];
    const lb = (await tb.step(s, batch, { lr: 0 })).metrics.loss[0];
    assert.ok(Math.abs(lb - la / 2) < 1e-6, `${lb} vs ${la / 2}`);
    assert.equal(cache.size, 2);
    await cache.clear();
  });

  it('measureLoopSpeedup times K steps in one run against K runs and reports their ratio', async () => {
    const spec = mlpSpec();
    const trainer = new Trainer(spec, 'mlp-bench', { provider: 'cpu', threads: 1 });
    const res = await measureLoopSpeedup(trainer, initTrainState(initParams(spec, 1)), toyData(32, 2), { k: 8, repeats: 3 });
    assert.equal(res.k, 8);
    assert.ok(res.loop_ms > 0 && res.separate_ms > 0);
    // The ratio, not a speed threshold: how fast the Loop is on a machine is `turnwise bench train`'s
    // loop_speedup (a unit test that asserted it failed whenever other work shared the cores).
    assert.ok(Math.abs(res.loop_speedup - res.separate_ms / res.loop_ms) < 1e-9, JSON.stringify(res));
    await trainer.release();
  });

  it('asking for CUDA where its libraries are absent warns once and runs on CPU', async function () {
    resetProviderState();
    const warnings: string[] = [];
    const g = Graph.create();
    const x = g.input('x', 'float32', [2]);
    g.output(g.mul(x, 3), 'y');
    const model = toModelProto(g);
    const a = await OnnxSession.create(model, { provider: 'cuda', onWarning: (m) => warnings.push(m) });
    if (a.provider === 'cuda') this.skip(); // a machine with CUDA: nothing to fall back from
    const b = await OnnxSession.create(model, { provider: 'cuda', onWarning: (m) => warnings.push(m) });
    assert.equal(a.provider, 'cpu');
    assert.equal(b.provider, 'cpu');
    assert.equal(warnings.length, 1);
    assert.match(warnings[0], /cuda execution provider could not be loaded.*running on CPU/);
    const y = await b.run({ x: { dtype: 'float32', dims: [2], data: Float32Array.of(1, 2) } });
    assert.deepEqual(Array.from(y.y.data as Float32Array), [3, 6]);
    const auto = await OnnxSession.create(model, { provider: 'auto', onWarning: (m) => warnings.push(m) });
    assert.equal(auto.provider, 'cpu');
    assert.equal(warnings.length, 1, 'auto falls back silently');
  });
});
