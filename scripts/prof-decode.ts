import * as fs from 'node:fs';
import { BENCH_SHAPES, randomWeights } from '../src/policy/bench-model';
import { writeModelFolder } from '../src/policy/hf';
import { loadPolicy } from '../src/policy';
import { byteLevelTokenizerConfig, byteLevelTokenizerJson } from '../src/policy/tokenizer';
(async () => {
  const out = '/tmp/q05';
  const config = BENCH_SHAPES['qwen2.5-0.5b'];
  if (!fs.existsSync(`${out}/config.json`)) writeModelFolder(out, randomWeights(config, 0), { dtype: 'bfloat16', tokenizerJson: byteLevelTokenizerJson(), tokenizerConfig: byteLevelTokenizerConfig() });
  const p = loadPolicy(out, { provider: 'cpu', profile: process.argv[2] ?? '' } as never);
  const ctx = p.newSequence(Array.from({ length: 1024 }, (_, i) => (i * 37) % 256));
  await p.sample([{ seq: ctx, maxNewTokens: 1, temperature: 1, stopIds: [] }]);
  for (const rows of [1, 8]) {
    const seqs = Array.from({ length: rows }, () => ctx.fork());
    const t = performance.now();
    await p.sample(seqs.map((seq, b) => ({ seq, seed: b, maxNewTokens: 12, temperature: 1, stopIds: [] })));
    console.log(rows, ((performance.now() - t) / 12).toFixed(1), 'ms/step');
  }
  await p.dispose();
})();
