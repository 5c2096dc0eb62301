// How fast ONNX Runtime's CPU provider streams a projection's weight at a few rows: 24 weights of
// the MLP's shape (4,864 × 896, float32, 418 MB together: past any cache) each multiplied by the
// same rows, as x·Wᵀ (one row: what a batch-1 decode step runs) and as (W·xᵀ) through Gemm (what a
// batched decode step runs), with 2 threads and 1. Prints ms per product and the weight bytes
// read per second. Then the weight held transposed ([in, out]) as x·V at 1 and 8 rows and
// as Gemm(x, V) at 8. Last, Gemm(x, W, transB) with W an initializer of the session, which
// ONNX Runtime packs once at load (the policy's packed decode weights), at 1, 8 and 16 rows.
//   npx tsx docs/experiments/scripts/product-rows.ts
import { Graph, OnnxSession, toModelProto, type Value } from '../../../src/onnx';

const [OUT, IN, L] = [4864, 896, 24];
const weights = Array.from({ length: L }, (_, l) => new Float32Array(OUT * IN).map((_, i) => Math.sin(i + l) * 0.01));

async function bench(
  name: string,
  rows: number,
  build: (g: Graph, w: Value, x: Value) => Value,
  threads = 0,
  shape = [OUT, IN],
  held = false,
): Promise<void> {
  const g = Graph.create(name.replace(/\W+/g, '_'));
  const x = g.input('x', 'float32', [rows, IN]);
  for (let l = 0; l < L; l++) g.output(build(g, g.input(`w${l}`, 'float32', shape), x), `y${l}`);
  if (held) weights.forEach((w, l) => g.holdInput(`w${l}`, { dtype: 'float32', dims: shape, data: w }));
  const s = await OnnxSession.create(toModelProto(g), { provider: 'cpu', threads });
  const feeds: Parameters<OnnxSession['run']>[0] = {
    x: { dtype: 'float32', dims: [rows, IN], data: new Float32Array(rows * IN).fill(0.1) },
  };
  if (!held) weights.forEach((w, l) => (feeds[`w${l}`] = { dtype: 'float32', dims: shape, data: w }));
  for (let i = 0; i < 2; i++) await s.run(feeds);
  let best = Infinity;
  for (let r = 0; r < 8; r++) {
    const t = performance.now();
    await s.run(feeds);
    best = Math.min(best, performance.now() - t);
  }
  await s.release();
  process.stdout.write(
    JSON.stringify({
      product: name,
      rows,
      threads: threads || 'all',
      ms: +(best / L).toFixed(3),
      gbs: +((OUT * IN * 4 * L) / best / 1e6).toFixed(1),
    }) + '\n',
  );
}

(async () => {
  const xw = (g: Graph, w: Value, x: Value) => g.matmul(x, g.transpose(w, [1, 0]));
  const wx = (g: Graph, w: Value, x: Value) => g.gemm(w, x, { transB: true });
  await bench('x·Wᵀ', 1, xw);
  for (const n of [2, 4, 8, 16]) await bench('Gemm(W, x, transB)', n, wx);
  await bench('MatMul(W, xᵀ)', 8, (g, w, x) => g.matmul(w, g.transpose(x, [1, 0])));
  await bench('x·Wᵀ', 8, xw);
  await bench('Gemm(W, x, transB)', 8, wx, 1);
  await bench('x·Wᵀ', 1, xw, 1);
  // The weight held as Wᵀ ([in, out]), so that no product transposes it.
  const xv = (g: Graph, v: Value, x: Value) => g.matmul(x, v);
  await bench('x·V, V = Wᵀ held', 1, xv, 0, [IN, OUT]);
  await bench('x·V, V = Wᵀ held', 8, xv, 0, [IN, OUT]);
  await bench('Gemm(x, V)', 8, (g, v, x) => g.gemm(x, v), 0, [IN, OUT]);
  // W an initializer, packed at load.
  const xwp = (g: Graph, w: Value, x: Value) => g.gemm(x, w, { transB: true });
  for (const n of [1, 8, 16]) await bench('Gemm(x, W, transB), W packed', n, xwp, 0, [OUT, IN], true);
})();
