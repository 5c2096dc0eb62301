// Gradient accumulation (buildAccumulationGraph): one optimizer step over micro-batches whose
// loss denominators are the whole step's equals the one-batch step, and its summed gradient
// equals finite differences of the whole step's loss.
import * as assert from 'node:assert/strict';
import {
  Graph,
  HostTensor,
  OnnxSession,
  Trainer,
  TrainingGraphSpec,
  Value,
  buildAccumulationGraph,
  gradOutput,
  initTrainState,
  toModelProto,
  TRAIN_IO,
  DEFAULT_HYPER,
} from '../../../src/onnx';
import { rng } from './fd';

const IN = 3;
const HID = 5;
const OUT = 4;

/** A tanh MLP with a weighted mean NLL Σ w·nll / Σ w: the denominator is a step-wide normaliser. */
function weightedSpec(dtype: 'float32' | 'float64'): Omit<TrainingGraphSpec, 'steps'> {
  const orOne = (g: Graph, x: Value) => g.where(g.greater(x, 0), x, 1);
  return {
    dtype,
    params: [
      { name: 'w1', shape: [IN, HID] },
      { name: 'b1', shape: [HID] },
      { name: 'w2', shape: [HID, OUT] },
      { name: 'b2', shape: [OUT] },
    ],
    batch: [
      { name: 'x', dtype, shape: ['B', IN] },
      { name: 'labels', dtype: 'int64', shape: ['B'] },
      { name: 'w', dtype, shape: ['B'] },
    ],
    metricNames: ['weighted_nll_sum'],
    normalisers: (g, b) => ({ den: orOne(g, g.reduceSum(b.w)) }),
    forward: (g, p, b, norms) => {
      const h = g.tanh(g.add(g.matmul(b.x, p.w1), p.b1));
      const logp = g.logSoftmax(g.add(g.matmul(h, p.w2), p.b2), -1);
      const nll = g.neg(g.squeeze(g.gatherElements(logp, g.unsqueeze(b.labels, [1]), 1), [1]));
      const sum = g.reduceSum(g.mul(nll, b.w));
      const den = norms?.den ?? orOne(g, g.reduceSum(b.w));
      return { loss: g.div(sum, den), metrics: { weighted_nll_sum: g.div(sum, den) } };
    },
  };
}

interface Data {
  x: number[];
  labels: number[];
  w: number[];
}

function data(n: number, seed: number): Data {
  const r = rng(seed);
  const d: Data = { x: [], labels: [], w: [] };
  for (let i = 0; i < n; i++) {
    d.x.push(r(), r(), r());
    d.labels.push(Math.floor(r(0, OUT)));
    d.w.push(i % 4 === 3 ? 0 : r(0.1, 2));
  }
  return d;
}

function params(seed: number, dtype: 'float32' | 'float64'): Record<string, Float32Array | Float64Array> {
  const r = rng(seed);
  const make = (n: number) => {
    const vals = Array.from({ length: n }, () => r(-0.8, 0.8));
    return dtype === 'float64' ? Float64Array.from(vals) : Float32Array.from(vals);
  };
  return { w1: make(IN * HID), b1: make(HID), w2: make(HID * OUT), b2: make(OUT) };
}

/** The whole batch, or `micro` micro-batches of its rows stacked on a leading axis. */
function feeds(d: Data, dtype: 'float32' | 'float64', micro?: number): Record<string, HostTensor> {
  const n = d.labels.length;
  const lead = micro ? [micro, n / micro] : [n];
  const F = dtype === 'float64' ? Float64Array : Float32Array;
  return {
    x: { dtype, dims: [...lead, IN], data: F.from(d.x) },
    labels: { dtype: 'int64', dims: lead, data: BigInt64Array.from(d.labels, BigInt) },
    w: { dtype, dims: lead, data: F.from(d.w) },
  };
}

/** The step's loss in float64 on the host (the formula the graph builds). */
function hostLoss(p: Record<string, ArrayLike<number>>, d: Data): number {
  let sum = 0;
  let den = 0;
  for (let i = 0; i < d.labels.length; i++) {
    const h = Array.from({ length: HID }, (_, j) => {
      let a = p.b1[j];
      for (let k = 0; k < IN; k++) a += d.x[i * IN + k] * p.w1[k * HID + j];
      return Math.tanh(a);
    });
    const z = Array.from({ length: OUT }, (_, j) => {
      let a = p.b2[j];
      for (let k = 0; k < HID; k++) a += h[k] * p.w2[k * OUT + j];
      return a;
    });
    const m = Math.max(...z);
    const lse = m + Math.log(z.reduce((s, v) => s + Math.exp(v - m), 0));
    sum += d.w[i] * (lse - z[d.labels[i]]);
    den += d.w[i];
  }
  return sum / (den > 0 ? den : 1);
}

describe('gradient accumulation graphs', function () {
  this.timeout(60000);

  it('the gradient summed over micro-batches matches finite differences of the whole step loss (float64)', async () => {
    const spec = weightedSpec('float64');
    const d = data(12, 3);
    const p = params(5, 'float64');
    const s = await OnnxSession.create(toModelProto(buildAccumulationGraph(spec, { outputGradients: true })), { provider: 'cpu' });
    const state = initTrainState(p);
    const scalar = (x: number): HostTensor => ({ dtype: 'float64', dims: [], data: Float64Array.of(x) });
    const f: Record<string, HostTensor> = { ...feeds(d, 'float64', 4), step: scalar(0) };
    for (const k of TRAIN_IO.hyper) f[k] = scalar(DEFAULT_HYPER[k]);
    for (const [name, a] of Object.entries(state.params)) {
      const shape = spec.params.find((x) => x.name === name)!.shape;
      f[name] = { dtype: 'float64', dims: shape, data: a };
      f[TRAIN_IO.m(name)] = { dtype: 'float64', dims: shape, data: state.m[name] };
      f[TRAIN_IO.v(name)] = { dtype: 'float64', dims: shape, data: state.v[name] };
    }
    const out = await s.run(f);
    assert.ok(Math.abs((out[TRAIN_IO.metric('loss')].data as Float64Array)[0] - hostLoss(p, d)) < 1e-12);
    const h = 1e-6;
    let worst = 0;
    for (const [name, a] of Object.entries(p)) {
      const grad = out[gradOutput(name)].data as Float64Array;
      for (let i = 0; i < a.length; i++) {
        const x0 = a[i];
        a[i] = x0 + h;
        const up = hostLoss(p, d);
        a[i] = x0 - h;
        const down = hostLoss(p, d);
        a[i] = x0;
        const fd = (up - down) / (2 * h);
        const err = Math.abs(fd - grad[i]) / Math.max(1e-3, Math.abs(fd));
        worst = Math.max(worst, err);
      }
    }
    assert.ok(worst < 1e-6, `worst relative error ${worst}`);
    await s.release();
  });

  for (const dtype of ['float64', 'float32'] as const) {
    it(`one step over 1, 2, 3 and 6 micro-batches equals the one-batch step: parameters, moments, metrics (${dtype})`, async () => {
      const spec = weightedSpec(dtype);
      const d = data(6, 11);
      const state = initTrainState(params(7, dtype));
      state.step = 3; // bias corrections of a later step
      const hyper = { lr: 0.05, weight_decay: 0.1, max_grad_norm: 0.5 };
      const trainer = new Trainer(spec, `acc-${dtype}`, { provider: 'cpu' });
      const one = await trainer.step(state, feeds(d, dtype), hyper);
      const tol = dtype === 'float64' ? 1e-12 : 2e-6;
      for (const micro of [1, 2, 3, 6]) {
        const acc = await trainer.accumulatedStep(state, feeds(d, dtype, micro), hyper);
        assert.equal(acc.state.step, 4);
        for (const k of ['loss', 'grad_norm', 'weighted_nll_sum'])
          assert.ok(
            Math.abs(acc.metrics[k][0] - one.metrics[k][0]) < tol * 10,
            `${k} at ${micro}: ${acc.metrics[k][0]} vs ${one.metrics[k][0]}`,
          );
        for (const part of ['params', 'm', 'v'] as const) {
          for (const [name, a] of Object.entries(one.state[part])) {
            const b = acc.state[part][name];
            const scale = Math.max(1e-3, ...Array.from(a, Math.abs));
            for (let i = 0; i < a.length; i++)
              assert.ok(Math.abs(a[i] - b[i]) <= tol * scale, `${part} ${name}[${i}] at ${micro} micro-batches: ${a[i]} vs ${b[i]}`);
          }
        }
      }
      assert.ok(one.metrics.grad_norm[0] > 0.5, 'clipping was active');
      await trainer.release();
    });
  }

  it('a graph with no per-example input is refused', () => {
    const spec = weightedSpec('float32');
    assert.throws(
      () => buildAccumulationGraph({ ...spec, batch: [{ name: 's', dtype: 'float32', shape: [] }] }),
      /at least one per-example batch input/,
    );
  });
});
