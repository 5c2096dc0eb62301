import * as fs from 'node:fs';
import { BENCH_SHAPES, randomWeights } from '../src/policy/bench-model';
import { writeModelFolder } from '../src/policy/hf';
import { loadPolicy } from '../src/policy';
import { byteLevelTokenizerConfig, byteLevelTokenizerJson } from '../src/policy/tokenizer';
(async () => {
  const out = '/tmp/q05';
  const config = BENCH_SHAPES['qwen2.5-0.5b'];
  if (!fs.existsSync(`${out}/config.json`)) writeModelFolder(out, randomWeights(config, 0), { dtype: 'bfloat16', tokenizerJson: byteLevelTokenizerJson(), tokenizerConfig: byteLevelTokenizerConfig() });
  const p = loadPolicy(out, { provider: 'cpu' });
  const ctx = p.newSequence(Array.from({ length: 1024 }, (_, i) => (i * 37) % 256));
  await p.sample([{ seq: ctx, maxNewTokens: 1, temperature: 1, stopIds: [] }]);
  for (const perRun of [1, 8]) {
    p.decodeStepsPerRun = perRun;
    for (const rows of [1, 8]) {
      const go = async (n: number) => {
        const seqs = Array.from({ length: rows }, () => ctx.fork());
        const t = performance.now();
        await p.sample(seqs.map((seq, b) => ({ seq, seed: b, maxNewTokens: n, temperature: 1, stopIds: [] })));
        return performance.now() - t;
      };
      await go(3);
      let best = Infinity;
      for (let r = 0; r < 2; r++) best = Math.min(best, (await go(17)) / 16);
      console.log(JSON.stringify({ perRun, rows, ms_per_step: +best.toFixed(1), tokens_per_s: +((rows * 1000) / best).toFixed(2) }));
    }
  }
  await p.dispose();
})();
