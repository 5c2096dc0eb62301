// `turnwise bench rollout --json` at a tiny size, with the real ONNX policy (the embedded
// checkpoint, copied by the benchmark) in real sandboxes: the JSON's figures agree with each
// other (speedup = concurrent / sequential, counts match) and no container is left behind.
import * as assert from 'node:assert/strict';
import Docker from 'dockerode';
import { main } from '../../src/cli/main';
import { LABEL } from '../../src/sandbox';

describe('docker: turnwise bench rollout --json', function () {
  this.timeout(600_000);

  it('runs both passes on the same episodes and reports consistent figures', async () => {
    let stdout = '';
    let stderr = '';
    const code = await main(
      [
        'bench',
        'rollout',
        '--tasks',
        '2',
        '--episodes',
        '3',
        '--concurrency',
        '3',
        '--max-turns',
        '2',
        '--seed',
        '5',
        '--repeats',
        '2',
        '--json',
      ],
      {
        out: (t) => (stdout += t),
        err: (t) => (stderr += `${t}\n`),
      },
    );
    assert.equal(code, 0, stderr.slice(-2000));
    const r = JSON.parse(stdout);
    for (const k of [
      'episodes_per_min_sequential',
      'episodes_per_min_concurrent',
      'speedup',
      'mean_batch',
      'generation_s_sequential',
      'generation_s_concurrent',
      'sandbox_s_sequential',
      'sandbox_s_concurrent',
      'tokens_per_s_sequential',
      'tokens_per_s_concurrent',
    ]) {
      assert.equal(typeof r[k], 'number', `${k} is ${r[k]}`);
      assert.ok(r[k] >= 0, `${k} = ${r[k]}`);
    }
    assert.ok(Math.abs(r.speedup - r.episodes_per_min_concurrent / r.episodes_per_min_sequential) < 0.01, `speedup ${r.speedup}`);
    assert.equal(r.episodes, 3);
    assert.equal(r.tasks, 2);
    assert.equal(r.concurrency, 3);
    assert.equal(r.sequential.concurrency, 1);
    for (const p of [r.sequential, r.concurrent]) {
      assert.equal(p.episodes, 3);
      assert.equal(p.failed, 0);
      assert.ok(p.turns >= 3 && p.turns <= 3 * 2, `turns ${p.turns}`);
      assert.ok(Math.abs(p.episodes_per_min - p.episodes / (p.wall_s / 60)) < 0.01);
      assert.ok(p.sampled_tokens > 0);
      assert.ok(p.generation_s <= p.wall_s);
    }
    // One at a time: every batch is one request and no command runs while the model generates.
    assert.equal(r.sequential.mean_batch, 1);
    assert.equal(r.sequential.overlap_s, 0);
    assert.equal(r.sequential.batches, r.sequential.turns);
    assert.ok(r.concurrent.mean_batch >= 1 && r.concurrent.mean_batch <= 3);
    // Same seeds, and sampling that does not depend on the batch: the same work in both passes,
    // up to ONNX Runtime's rounding. The concurrent pass batches by timing, and other batch shapes
    // round log-probs differently (measured with the embedded policy: batch 3 against batch 1, every
    // one of 120 rows differed, by at most 8e-6, and all 120 sampled the same tokens), so a token
    // drawn that close to a boundary can flip: one of the 3 episodes may differ, not more. With
    // other seeds in the concurrent pass, next to no action would match.
    assert.ok(r.same_actions >= 2 / 3, `same actions ${r.same_actions}`);
    if (r.same_actions === 1) {
      assert.equal(r.concurrent.turns, r.sequential.turns);
      assert.equal(r.concurrent.sampled_tokens, r.sequential.sampled_tokens);
    }
    // The rounding itself: present or not, it stays in the last bits of the log-probs.
    assert.equal(typeof r.logprob_max_diff, 'number');
    assert.ok(r.logprob_max_diff >= 0 && r.logprob_max_diff < 1e-3, `log-probs differ by ${r.logprob_max_diff} between the passes`);
    // Each pass has its own observation cache, so both replay the same commands (episode 3
    // repeats task 1; in the concurrent pass it waits for episode 1's run instead of rerunning).
    if (r.same_actions === 1) assert.equal(r.concurrent.cached_turns, r.sequential.cached_turns);
    assert.ok(r.sequential.cached_turns >= 0 && r.sequential.cached_turns < 1);
    // Two repeats: both listed, the reported one is one of them, the range covers them.
    assert.equal(r.repeats.length, 2);
    assert.ok(r.repeats.some((x: { speedup: number }) => x.speedup === r.speedup));
    assert.equal(r.speedup_min, Math.min(...r.repeats.map((x: { speedup: number }) => x.speedup)));
    assert.equal(r.speedup_max, Math.max(...r.repeats.map((x: { speedup: number }) => x.speedup)));
    const left = await new Docker().listContainers({ all: true, filters: { label: [`${LABEL.run}=bench-rollout-${process.pid}`] } });
    assert.deepEqual(left, []);
  });
});
