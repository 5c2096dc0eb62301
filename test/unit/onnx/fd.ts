// Finite-difference gradient checking in float64 against real ONNX Runtime sessions.
import * as assert from 'node:assert/strict';
import { gradients } from '../../../src/onnx/autodiff';
import { Dim, Graph, OnnxSession, Value, toModelProto } from '../../../src/onnx';

/** Deterministic uniform numbers in [lo, hi). */
export function rng(seed: number): (lo?: number, hi?: number) => number {
  let s = seed >>> 0 || 1;
  return (lo = -1, hi = 1) => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return lo + ((s >>> 0) / 2 ** 32) * (hi - lo);
  };
}

export interface FdInput {
  name: string;
  /** Declared shape (may be symbolic). */
  shape: Dim[];
  /** Concrete dims fed at run time (defaults to `shape` when it is all numbers). */
  dims?: number[];
  /** Value range, or explicit values. */
  range?: [number, number];
  values?: number[];
  /** Not differentiated (e.g. int64 indices or bool masks), fed as given. */
  fixed?: { dtype: 'int64' | 'bool' | 'float64'; data: number[] };
}

/**
 * Builds `f(inputs)` in float64, reduces it to a scalar with fixed random weights (so every
 * output element is checked), appends the backward pass and compares each gradient with
 * central differences. Returns the max error seen.
 */
export async function checkGradients(
  inputs: FdInput[],
  f: (g: Graph, xs: Value[]) => Value,
  opts: { seed?: number; h?: number; rtol?: number; atol?: number } = {},
): Promise<number> {
  const r = rng(opts.seed ?? 7);
  const g = Graph.create('fd');
  const xs = inputs.map((i) => g.input(i.name, i.fixed ? i.fixed.dtype : 'float64', i.shape));
  const y = f(g, xs);
  const outDims = y.shape;
  // Weighted sum with weights fed as an input so the graph is independent of the output's runtime size.
  const wIn = g.input('__w', 'float64', outDims);
  const loss = y.rank === 0 ? g.mul(y, wIn) : g.reduceSum(g.mul(y, wIn));
  g.output(loss, 'loss');
  const wrt = xs.filter((_, i) => !inputs[i].fixed);
  const grads = gradients(g, loss, wrt);
  grads.forEach((d, i) => g.output(d, `d_${wrt[i].name}`));
  const s = await OnnxSession.create(toModelProto(g), { provider: 'cpu', threads: 1 });
  const feeds: Record<string, { dtype: 'float64' | 'int64' | 'bool'; dims: number[]; data: Float64Array | BigInt64Array | Uint8Array }> =
    {};
  for (const inp of inputs) {
    const dims = inp.dims ?? (inp.shape as number[]);
    const n = dims.reduce((a, b) => a * b, 1);
    if (inp.fixed) {
      const d = inp.fixed;
      feeds[inp.name] = {
        dtype: d.dtype,
        dims,
        data:
          d.dtype === 'int64'
            ? BigInt64Array.from(d.data, (v) => BigInt(v))
            : d.dtype === 'bool'
              ? Uint8Array.from(d.data)
              : Float64Array.from(d.data),
      };
    } else {
      const vals = inp.values ?? Array.from({ length: n }, () => r(...(inp.range ?? [-1, 1])));
      assert.equal(vals.length, n, `${inp.name}: ${vals.length} values for dims ${dims}`);
      feeds[inp.name] = { dtype: 'float64', dims, data: Float64Array.from(vals) };
    }
  }
  if (!y.shape.every((d) => typeof d === 'number'))
    throw new Error('FD harness: the checked output needs a static shape (reduce symbolic dims)');
  const wDims = y.shape as number[];
  const wN = wDims.reduce((a, b) => a * b, 1);
  feeds.__w = { dtype: 'float64', dims: wDims, data: Float64Array.from({ length: wN }, () => r(0.5, 1.5) * (r() < 0 ? -1 : 1)) };
  const out = await s.run(feeds);
  const h = opts.h ?? 1e-6;
  const rtol = opts.rtol ?? 1e-6;
  const atol = opts.atol ?? 1e-8;
  let worst = 0;
  for (const x of wrt) {
    const feed = feeds[x.name].data as Float64Array;
    const analytic = out[`d_${x.name}`].data as Float64Array;
    assert.deepEqual(Array.from(out[`d_${x.name}`].dims), Array.from(feeds[x.name].dims), `d_${x.name} has the shape of ${x.name}`);
    for (let k = 0; k < feed.length; k++) {
      const orig = feed[k];
      feed[k] = orig + h;
      const lp = ((await s.run(feeds, ['loss'])).loss.data as Float64Array)[0];
      feed[k] = orig - h;
      const lm = ((await s.run(feeds, ['loss'])).loss.data as Float64Array)[0];
      feed[k] = orig;
      const num = (lp - lm) / (2 * h);
      const err = Math.abs(analytic[k] - num);
      worst = Math.max(worst, err / Math.max(1, Math.abs(num)));
      assert.ok(
        err <= atol + rtol * Math.abs(num),
        `d loss/d ${x.name}[${k}]: autodiff ${analytic[k]} vs finite difference ${num} (err ${err})`,
      );
    }
  }
  await s.release();
  return worst;
}
