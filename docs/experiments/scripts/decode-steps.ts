// Decode speed at the Qwen2.5-0.5B shape on the CPU provider, one step per run against steps
// looped in one run (decodeStepsPerRun), at 1 and 8 rows, 1,024 tokens of context; prints one
// JSON line per case (the fastest of 2 runs of 16 steps).
//   npx tsx docs/experiments/scripts/decode-steps.ts [--dir DIR]   (DIR: a model folder; default a
//   random BF16 one written to the system's temporary folder)
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { BENCH_SHAPES, randomWeights } from '../../../src/bench/model';
import { writeModelFolder } from '../../../src/policy/files/hf';
import { loadPolicy } from '../../../src/policy';
import { byteLevelTokenizerConfig, byteLevelTokenizerJson } from '../../../src/policy/files/tokenizer';
(async () => {
  const i = process.argv.indexOf('--dir');
  const out = i >= 0 ? process.argv[i + 1] : path.join(os.tmpdir(), 'turnwise-decode-steps-qwen2.5-0.5b');
  const config = BENCH_SHAPES['qwen2.5-0.5b'];
  if (!fs.existsSync(`${out}/config.json`))
    writeModelFolder(out, randomWeights(config, 0), {
      dtype: 'bfloat16',
      tokenizerJson: byteLevelTokenizerJson(),
      tokenizerConfig: byteLevelTokenizerConfig(),
    });
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
