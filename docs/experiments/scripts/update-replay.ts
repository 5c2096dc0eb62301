// Replays one iteration's policy update of a finished run, outside the run: the checkpoint before
// it, the iteration's own train episodes (their advantages as stored) and the run's settings go
// through train/update.ts's updatePolicy, as in the run; then the same rows are scored before and
// after, and the script prints, per optimizer step, the `kl` and `grad_norm` the run logged, and
// over the action tokens the k3 estimate of KL(after ‖ before), the largest fall of one token's
// log-prob and the tokens that carry most of the k3 (with their action's advantage). Compact
// (turnwise-tiny) runs of full fine-tuning only. With --warmup N the learning rate rises linearly
// over the first N optimizer steps (step k gets lr · (k + 1) / N), to see what a warm-up changes.
//   npx tsx docs/experiments/scripts/update-replay.ts RUN_DIR ITERATION [--warmup N] [--top K]
import { RunDir } from '../../../src/core/run';
import { taskText } from '../../../src/agent/prompt';
import { loadCheckpoint } from '../../../src/policy/files/checkpoint';
import { loadTokenizer } from '../../../src/policy/files/tokenizer';
import { TrainablePolicy } from '../../../src/policy/trainable';
import type { TrainArgs } from '../../../src/policy/trainable';
import { compactCodec } from '../../../src/train/compact-codec';
import { readRunConfig } from '../../../src/train/config';
import type { Harness } from '../../../src/train/harness';
import { turnTokenRows } from '../../../src/train/rows';
import { updatePolicy } from '../../../src/train/update';

function flag(name: string, fallback: number): number {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}

async function main(): Promise<void> {
  const [runRef, itArg] = process.argv.slice(2);
  if (!runRef || !itArg) throw new Error('usage: update-replay.ts RUN_DIR ITERATION [--warmup N] [--top K]');
  const warmup = flag('--warmup', 0);
  const top = flag('--top', 8);
  const run = RunDir.open(runRef);
  const n = Number(itArg);
  const c = readRunConfig(run);
  const tasks = new Map(run.readTasks().map((t) => [t.id, t]));
  const episodes = run.readTrajectories(n, 'train').filter((t) => !t.failure);
  const before = run.checkpointDir(n - 1);
  const ck = loadCheckpoint(before, { optimizer: false });
  if (ck.adapter) throw new Error('a LoRA run: this script replays full fine-tuning only');
  const tokenizer = loadTokenizer(ck.tokenizerJson!, ck.tokenizerConfig);
  const codec = compactCodec(tokenizer);
  const contextTokens = ck.weights.config.max_position_embeddings;
  const policy = TrainablePolicy.fromCheckpoint(before, { provider: 'cpu' });
  const rows = episodes.flatMap((t) =>
    turnTokenRows(codec, taskText(tasks.get(t.taskId)!), t, contextTokens - c.maxActionTokens).map((r) => ({ ...r, trajId: t.trajId })),
  );
  const lp0 = await policy.logprobs(
    rows.map((r) => r.ids),
    { temperature: c.temperature },
  );
  if (warmup > 0) {
    const train = policy.train.bind(policy);
    policy.train = (...args: TrainArgs) => {
      const [o, b, h] = args;
      const peak = h.lr as number;
      return train(o, b, { ...h, lr: (step: number) => peak * Math.min(1, (step + 1) / warmup) });
    };
  }
  // updatePolicy reads the harness's policy, codec and context length only.
  const harness = { policy, codec, contextTokens } as unknown as Harness;
  const u = await updatePolicy(harness, episodes, { config: c, iteration: n, tasks, updateTokens: 4096, check: () => undefined });
  const lp1 = await policy.logprobs(
    rows.map((r) => r.ids),
    { temperature: c.temperature },
  );
  const tokens: { k3: number; fall: number; advantage: number; trajId: string; text: string }[] = [];
  rows.forEach((r, i) => {
    for (let k = 0; k < r.logprobs.length; k++) {
      const d = lp0[i][r.actionStart + k] - lp1[i][r.actionStart + k];
      tokens.push({
        k3: Math.exp(d) - d - 1,
        fall: d,
        advantage: r.advantage,
        trajId: r.trajId,
        text: tokenizer.decode([r.ids[r.actionStart + k]], false),
      });
    }
  });
  const k3 = tokens.reduce((s, t) => s + t.k3, 0) / tokens.length;
  tokens.sort((a, b) => b.k3 - a.k3);
  console.log(
    JSON.stringify(
      {
        run: run.runId,
        iteration: n,
        warmup,
        steps: u.steps.map((s) => ({ kl: +s.kl.toFixed(4), grad_norm: +s.grad_norm.toFixed(3) })),
        action_tokens: tokens.length,
        k3_after_vs_before: +k3.toFixed(4),
        largest_fall: +tokens.reduce((m, t) => Math.max(m, t.fall), 0).toFixed(2),
        dlogp: u.moved,
        top: tokens.slice(0, top).map((t) => ({
          share: +(t.k3 / tokens.length / k3).toFixed(3),
          fall: +t.fall.toFixed(2),
          advantage: +t.advantage.toFixed(3),
          episode: t.trajId,
          token: t.text,
        })),
      },
      null,
      2,
    ),
  );
  await policy.dispose();
}

void main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
