// Where decode time goes on a GPU provider: 8 sampled tokens after 256 tokens of context, by
// decode steps per run (1, 8, 32), rows (1, 8) and sampling in the graph (topP 1) or on the host
// (topP 0.95), random weights at a bench shape; one JSON line per case (one timed call after an
// untimed one of 2 tokens). Bundle and run with Node where tsx is missing.
//   npx tsx docs/experiments/scripts/webgpu-decode.ts [webgpu|cpu] [qwen2.5-0.5b|tiny-test]
import { BENCH_SHAPES, randomWeights } from '../../../src/bench/model';
import { Policy } from '../../../src/policy';
(async () => {
  const provider = (process.argv[2] ?? 'webgpu') as 'webgpu' | 'cpu';
  let warned = '';
  const config = BENCH_SHAPES[process.argv[3] ?? 'qwen2.5-0.5b'];
  const w = randomWeights(config, 0);
  for (const [perRun, topP, rows] of [
    [8, 1, 1],
    [1, 1, 1],
    [1, 0.95, 1],
    [8, 1, 8],
    [1, 1, 8],
    [32, 1, 1],
  ] as [number, number, number][]) {
    const p = new Policy(w, undefined, { provider, onWarning: (m) => (warned = m) });
    p.decodeStepsPerRun = perRun;
    try {
      const ctx = p.newSequence(
        Array.from({ length: Math.min(256, Math.floor(config.max_position_embeddings / 2)) }, (_, i) => (i * 37) % 256),
      );
      const t0 = performance.now();
      await p.sample([{ seq: ctx.fork(), maxNewTokens: 1, temperature: 1, topP: 1, stopIds: [] }]);
      const prefill = performance.now() - t0;
      const run = async (steps: number) => {
        const t = performance.now();
        await p.sample(
          Array.from({ length: rows }, (_, b) => ({
            seq: ctx.fork(),
            seed: b + 1,
            maxNewTokens: steps,
            temperature: 1,
            topP,
            stopIds: [] as number[],
          })),
        );
        return performance.now() - t;
      };
      const warm = await run(2);
      const ms = [await run(8)];
      const r = {
        provider,
        ranOn: warned ? 'cpu' : provider,
        perRun,
        topP,
        rows,
        prefill256_ms: Math.round(prefill),
        warm_ms: Math.round(warm),
        decode8_ms: ms.map(Math.round),
        tok_s: +((rows * 8) / (Math.min(...ms) / 1000)).toFixed(2),
      };
      console.log(JSON.stringify(r));
    } catch (e) {
      console.log(JSON.stringify({ perRun, topP, rows, error: String(e) }));
    }
    await p.dispose();
  }
})();
