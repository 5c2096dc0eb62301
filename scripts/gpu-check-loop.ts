// For scripts/gpu-check.sh: a short LoRA RL loop at a bench shape on scripted episodes, without
// Docker. Each iteration does what a run's iteration does to the policy: samples a group of
// continuations per prompt (the policy's own sampler, tokens drawn in the graph), rewards each by
// a fixed rule over its tokens (the share of even token ids: a reward the policy can learn to
// raise), scores the rows with the float policy, takes one LoRA ppo-token step on the group
// advantages, and puts the new adapter under the sampler. Per iteration: the time of each phase,
// the mean reward, the step's metrics and the host bytes fed or uploaded per run (meterFeeds).
//   npx tsx scripts/gpu-check-loop.ts --shape qwen2.5-0.5b --provider webgpu --iterations 3
import { BENCH_SHAPES, randomWeights } from '../src/bench/model';
import { meterFeeds, type ExecutionProviderName } from '../src/onnx';
import { initAdapter, LORA_MODULES, type LoraConfig } from '../src/policy/files/lora';
import { Policy } from '../src/policy/inference/policy';
import { PolicyTrainer, type TrainBatch } from '../src/policy/training/trainer';

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
};

(async () => {
  const shape = arg('shape', 'qwen2.5-0.5b');
  const provider = arg('provider', 'webgpu') as ExecutionProviderName;
  const iterations = Number(arg('iterations', '3'));
  const prompts = Number(arg('prompts', '2'));
  const group = Number(arg('group', '4'));
  const tokens = Number(arg('tokens', '32'));
  const promptTokens = Number(arg('prompt-tokens', '96'));
  const config = BENCH_SHAPES[shape];
  if (!config) throw new Error(`unknown shape ${shape} (known: ${Object.keys(BENCH_SHAPES).join(', ')})`);
  const warnings: string[] = [];
  const settings = { provider, rolloutPrecision: 'float32' as const, onWarning: (m: string) => warnings.push(m) };
  const lora: LoraConfig = {
    r: 16,
    lora_alpha: 32,
    lora_dropout: 0,
    target_modules: [...LORA_MODULES],
    use_rslora: false,
    base_model_name_or_path: shape,
  };
  const t0 = performance.now();
  const adapter = initAdapter(config, lora, 1);
  const policy = new Policy(randomWeights(config, 0), undefined, settings, adapter);
  const trainer = new PolicyTrainer(policy.baseWeights(), undefined, settings, { adapter }, policy.baseFeeds(), { keepMoments: true });
  const setupS = (performance.now() - t0) / 1000;
  const ranOn = await policy.provider;
  if (ranOn !== provider)
    throw new Error(`asked for ${provider}, which did not load here (it fell back to ${ranOn}): ${warnings.join('; ')}`);
  const V = config.vocab_size;
  const promptIds = Array.from({ length: prompts }, (_, p) => Array.from({ length: promptTokens }, (_, i) => (i * 131 + p * 17 + 7) % V));
  const seq = promptTokens + tokens;
  const rows: Record<string, unknown>[] = [];
  for (let it = 0; it < iterations; it++) {
    const meter = meterFeeds();
    const ts = performance.now();
    const seqs = promptIds.flatMap((p) => Array.from({ length: group }, () => policy.newSequence(p)));
    const drawn = await policy.sample(
      seqs.map((s, b) => ({ seq: s, seed: it * 1000 + b, maxNewTokens: tokens, temperature: 1, stopIds: [] })),
    );
    const sampleS = (performance.now() - ts) / 1000;
    const rewards = drawn.map((r) => r.tokenIds.filter((id) => id % 2 === 0).length / Math.max(1, r.tokenIds.length));
    const tsc = performance.now();
    const full = seqs.map((s) => s.tokens.slice(0, seq));
    const scored = await policy.tokenLogprobs(full);
    const scoreS = (performance.now() - tsc) / 1000;
    // Group advantages (reward minus the group's mean) on each row's sampled tokens.
    const batch: TrainBatch = { inputIds: [], lossMask: [], advantages: [], oldLogp: [], attentionMask: [] };
    full.forEach((ids, b) => {
      const g = Math.floor(b / group) * group;
      const mean = rewards.slice(g, g + group).reduce((x, y) => x + y, 0) / group;
      for (let t = 0; t < seq; t++) {
        const real = t < ids.length;
        (batch.inputIds as number[]).push(real ? ids[t] : 0);
        (batch.attentionMask as number[]).push(real ? 1 : 0);
        (batch.lossMask as number[]).push(real && t >= promptTokens ? 1 : 0);
        (batch.advantages as number[]).push(rewards[b] - mean);
        (batch.oldLogp as number[]).push(real ? scored[b][t] : 0);
      }
    });
    const tt = performance.now();
    const [m] = await trainer.train({ loss: 'ppo-token', batch: full.length, seq }, [batch], { lr: 1e-4 });
    policy.setAdapter(trainer.adapter()!);
    const trainS = (performance.now() - tt) / 1000;
    meter.stop();
    const fed = meter.records.reduce((n, r) => n + r.hostBytes + r.uploadBytes, 0);
    rows.push({
      iteration: it,
      sample_s: +sampleS.toFixed(3),
      sample_tokens_per_s: +((drawn.length * tokens) / sampleS).toFixed(2),
      score_s: +scoreS.toFixed(3),
      train_s: +trainS.toFixed(3),
      train_tokens_per_s: +((full.length * seq) / trainS).toFixed(1),
      mean_reward: +(rewards.reduce((x, y) => x + y, 0) / rewards.length).toFixed(4),
      loss: m.loss,
      grad_norm: m.grad_norm,
      runs: meter.records.length,
      fed_bytes_per_run: Math.round(fed / Math.max(1, meter.records.length)),
    });
    process.stderr.write(`iteration ${it}: ${JSON.stringify(rows[rows.length - 1])}\n`);
  }
  await trainer.dispose();
  await policy.dispose();
  process.stdout.write(
    JSON.stringify({
      schema: 'turnwise/gpu-check-loop@1',
      shape,
      provider: ranOn,
      work: { prompts, group, tokens, prompt_tokens: promptTokens, lora_r: lora.r },
      setup_s: +setupS.toFixed(3),
      iterations: rows,
      warnings,
      ok: ranOn === provider && warnings.length === 0 && rows.every((r) => Number.isFinite(r.loss as number)),
    }) + '\n',
  );
})().catch((e) => {
  process.stderr.write(`${(e as Error).message}\n`);
  process.exit(1);
});
