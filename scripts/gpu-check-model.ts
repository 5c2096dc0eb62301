// For scripts/gpu-check.sh: writes a model folder at a bench shape (random BF16 weights) and
// compares its logits on a GPU provider with the CPU's, over a prompt and through the KV cache;
// and, from each GPU provider's own session log, which nodes of the shape's prefill, decode
// (one row and several), and LoRA training graphs it would run on the CPU.
//   npx tsx scripts/gpu-check-model.ts --shape qwen2.5-0.5b --out DIR --providers cuda,webgpu
import * as fs from 'node:fs';
import { BENCH_SHAPES, randomWeights } from '../src/bench/model';
import { writeModelFolder } from '../src/policy/files/hf';
import { loadPolicy } from '../src/policy';
import { byteLevelTokenizerConfig, byteLevelTokenizerJson } from '../src/policy/files/tokenizer';
import { toModelProto } from '../src/onnx';
import { nodePlacements } from '../src/onnx/placements';
import { buildDecodeLoopGraph, buildStepGraph } from '../src/policy/model/graphs';
import { LORA_MODULES } from '../src/policy/files/lora';
import { buildTrainGraph } from '../src/policy/training/graphs';

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
};

(async () => {
  const shape = arg('shape', 'qwen2.5-0.5b');
  const out = arg('out', '');
  if (!out) throw new Error('--out DIR is required');
  const config = BENCH_SHAPES[shape];
  if (!config) throw new Error(`unknown shape ${shape}`);
  if (!fs.existsSync(`${out}/config.json`))
    writeModelFolder(out, randomWeights(config, 0), {
      dtype: 'bfloat16',
      tokenizerJson: byteLevelTokenizerJson(),
      tokenizerConfig: byteLevelTokenizerConfig(),
    });
  const prompt = Array.from({ length: 64 }, (_, i) => (i * 37) % 256);
  const run = async (provider: 'cpu' | 'cuda' | 'webgpu') => {
    const p = loadPolicy(out, { provider, onWarning: (m) => process.stderr.write(`warning: ${m}\n`) });
    const got = await p.provider;
    const [logits] = await p.logits([prompt]);
    const seq = p.newSequence(prompt);
    const greedy = await p.sample([{ seq, maxNewTokens: 8, temperature: 0, stopIds: [] }]);
    await p.dispose();
    return { provider: got, logits, ids: greedy[0].tokenIds };
  };
  const cpu = await run('cpu');
  const lora = { r: 16, lora_alpha: 32, use_rslora: false, target_modules: [...LORA_MODULES] };
  const graphs = [
    { name: 'prefill', bytes: toModelProto(buildStepGraph(config, 'prefill')) },
    { name: 'decode', bytes: toModelProto(buildStepGraph(config, 'decode')) },
    { name: 'decode, several rows', bytes: toModelProto(buildStepGraph(config, 'decode', undefined, 'all', 'weights-left')) },
    {
      name: 'decode, tokens drawn in the graph',
      bytes: toModelProto(buildStepGraph(config, 'decode', undefined, 'sample', 'weights-left')),
    },
    { name: 'decode loop (8 steps per run on a GPU)', bytes: toModelProto(buildDecodeLoopGraph(config, undefined, 'weights-left')) },
    { name: 'LoRA training step', bytes: toModelProto(buildTrainGraph(config, { loss: 'ppo-token', batch: 1, seq: 1024, lora })) },
  ];
  const results: Record<string, unknown> = {};
  for (const want of arg('providers', 'cuda,webgpu').split(',') as ('cuda' | 'webgpu')[]) {
    const g = await run(want);
    let max = 0;
    for (let i = 0; i < cpu.logits.length; i++) max = Math.max(max, Math.abs(cpu.logits[i] - g.logits[i]));
    const placements = nodePlacements(want, graphs).map((p) => {
      const byOp: Record<string, number> = {};
      for (const n of p.onCpu) byOp[n.split(' ')[0]] = (byOp[n.split(' ')[0]] ?? 0) + 1;
      return {
        graph: p.graph,
        nodes: Object.values(p.providers).reduce((a, v) => a + v.count, 0),
        cpu_nodes: p.cpuNodes,
        cpu_ops: byOp,
        ...(p.error ? { error: p.error } : {}),
      };
    });
    results[want] = {
      ran_on: g.provider,
      max_abs_logit_diff: max,
      greedy_ids_match: JSON.stringify(g.ids) === JSON.stringify(cpu.ids),
      placements,
      ok: g.provider === want && max < 1e-2 && placements.every((p) => !p.error),
    };
  }
  process.stdout.write(JSON.stringify({ shape, folder: out, tokens: prompt.length, results }) + '\n');
})().catch((e) => {
  process.stderr.write(`${(e as Error).message}\n`);
  process.exit(1);
});
