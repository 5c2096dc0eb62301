// The pure parts of the rollout benchmark: pass statistics, the summary (speedup = concurrent /
// sequential), generate/exec overlap, and how alike the two passes' episodes are.
import { strict as assert } from 'node:assert';
import type { Trajectory } from '../../../src/core/schema';
import type { RolloutResult, Span } from '../../../src/agent/scheduler';
import {
  allEpisodesFailed,
  logprobDrift,
  overlapSeconds,
  passStats,
  repeatedRolloutSummary,
  rolloutSummary,
  sameActionsFraction,
} from '../../../src/bench/rollout';

const traj = (actions: string[], failure?: string): Trajectory =>
  ({
    schema: 'turnwise/trajectory@1',
    taskId: 't',
    groupId: 'g',
    trajId: 'x',
    checkpoint: 'c',
    turns: actions.map((action, index) => ({ index, action, observation: '', exitCode: 0, durationMs: 0 })),
    reward: {
      passRate: 1,
      resolved: true,
      turns: actions.length,
      maxTurns: 4,
      formatError: false,
      efficiencyPenalty: 0,
      formatPenalty: 0,
      reward: 1,
    },
    ...(failure ? { failure } : {}),
  }) as Trajectory;

const result = (wallMs: number, trajs: Trajectory[], generateMs = 1000, heldMs = 0): RolloutResult => ({
  trajectories: trajs,
  wallMs,
  generateMs,
  sandboxMs: 4000,
  rewardMs: 2000,
  meanBatch: 0,
  batches: 0,
  heldMs,
});

describe('bench/rollout: rollout summary', () => {
  it('passStats: episodes per minute, tokens per generation second, failed and turns counted', () => {
    const s = passStats({
      concurrency: 1,
      result: result(30_000, [traj(['ls', 'submit']), traj(['cat a'], 'boom')], 2000, 1234),
      batches: [1, 1, 1],
      sampledTokens: 100,
      promptTokens: 900,
      overlapS: 0,
      loadAvg1m: 3.456,
    });
    assert.equal(s.episodes, 2);
    assert.equal(s.failed, 1);
    assert.equal(s.turns, 3);
    assert.equal(s.episodes_per_min, 4);
    assert.equal(s.tokens_per_s, 50);
    assert.equal(s.mean_batch, 1);
    assert.equal(s.generation_frac_of_wall, 0.067);
    assert.equal(s.load_avg_1m, 3.46);
    assert.equal(s.held_s, 1.234, 'time requests waited for their batch, in seconds');
  });

  it('a pass whose every episode failed makes the benchmark fail, naming the first failure', () => {
    const stats = (trajs: Trajectory[]) =>
      passStats({
        concurrency: 1,
        result: result(1000, trajs),
        batches: [1],
        sampledTokens: 1,
        promptTokens: 0,
        overlapS: 0,
        loadAvg1m: 1,
      });
    const ok = stats([traj(['ls']), traj(['cat a'], 'boom')]);
    const bad = stats([traj(['ls'], 'no such file'), traj(['cat a'], 'boom')]);
    assert.equal(bad.first_failure, 'no such file');
    assert.equal(ok.first_failure, 'boom');
    assert.equal(allEpisodesFailed({ sequential: ok, concurrent: ok }), undefined, 'some episodes ran');
    assert.match(
      allEpisodesFailed({ sequential: ok, concurrent: bad })!,
      /every episode of the concurrent pass failed \(the first: no such file\)/,
    );
  });

  it('rolloutSummary: speedup = concurrent / sequential, the explaining figures taken from each pass', () => {
    const trajs = Array.from({ length: 8 }, () => traj(['ls']));
    const seq = passStats({
      concurrency: 1,
      result: result(120_000, trajs),
      batches: [1, 1],
      sampledTokens: 80,
      promptTokens: 0,
      overlapS: 0,
      loadAvg1m: 2,
    });
    const conc = passStats({
      concurrency: 8,
      result: result(40_000, trajs, 3000),
      batches: [4, 2, 2],
      sampledTokens: 80,
      promptTokens: 0,
      overlapS: 1.5,
      loadAvg1m: 2,
    });
    const r = rolloutSummary(seq, conc, {
      tasks: 8,
      maxTurns: 4,
      seed: 0,
      model: 'm',
      workspace: 'w',
      setupS: 10,
      sameActions: 1,
      cpus: 2,
    });
    assert.equal(r.episodes_per_min_sequential, 4);
    assert.equal(r.episodes_per_min_concurrent, 12);
    assert.equal(r.speedup, 3);
    assert.equal(r.mean_batch, 2.667);
    assert.equal(r.episodes, 8);
    assert.equal(r.concurrency, 8);
    assert.equal(r.generation_s_concurrent, 3);
    assert.equal(r.tokens_per_s_concurrent, 26.7);
    assert.deepEqual(r.concurrent, conc);
  });

  it("the CPU bound: cores busy per pass, and the speedup the sequential pass's CPU seconds allow", () => {
    const trajs = Array.from({ length: 8 }, () => traj(['ls']));
    // Sequential: 120 s wall using 150 CPU seconds (1.25 cores); on 2 cores at most 2 × 120 / 150 = 1.6×.
    const seq = passStats({
      concurrency: 1,
      result: result(120_000, trajs),
      batches: [1],
      sampledTokens: 8,
      promptTokens: 0,
      overlapS: 0,
      loadAvg1m: 1,
      cpuBusyS: 150,
    });
    const conc = passStats({
      concurrency: 8,
      result: result(80_000, trajs),
      batches: [4],
      sampledTokens: 8,
      promptTokens: 0,
      overlapS: 0,
      loadAvg1m: 2,
      cpuBusyS: 158,
    });
    assert.equal(seq.cores_busy, 1.25);
    assert.equal(conc.cores_busy, 1.98);
    const r = rolloutSummary(seq, conc, { tasks: 8, maxTurns: 4, seed: 0, model: 'm', workspace: 'w', setupS: 0, sameActions: 1, cpus: 2 });
    assert.equal(r.speedup_cpu_bound, 1.6);
    assert.equal(r.cores_busy_sequential, 1.25);
    // Unknown CPU time (not Linux): null, never a made-up bound.
    const blind = passStats({
      concurrency: 1,
      result: result(120_000, trajs),
      batches: [1],
      sampledTokens: 8,
      promptTokens: 0,
      overlapS: 0,
      loadAvg1m: 1,
      cpuBusyS: null,
    });
    assert.equal(blind.cores_busy, null);
    assert.equal(
      rolloutSummary(blind, conc, { tasks: 8, maxTurns: 4, seed: 0, model: 'm', workspace: 'w', setupS: 0, sameActions: 1, cpus: 2 })
        .speedup_cpu_bound,
      null,
    );
  });

  it('rolloutSummary: no speedup when the sequential pass produced nothing (null, not Infinity)', () => {
    const seq = passStats({
      concurrency: 1,
      result: result(0, []),
      batches: [],
      sampledTokens: 0,
      promptTokens: 0,
      overlapS: 0,
      loadAvg1m: 1,
    });
    const conc = passStats({
      concurrency: 8,
      result: result(1000, [traj(['ls'])]),
      batches: [1],
      sampledTokens: 1,
      promptTokens: 0,
      overlapS: 0,
      loadAvg1m: 1,
    });
    const r = rolloutSummary(seq, conc, { tasks: 1, maxTurns: 1, seed: 0, model: 'm', workspace: 'w', setupS: 0, sameActions: null });
    assert.equal(r.speedup, null);
    assert.equal(r.episodes_per_min_sequential, null);
    assert.equal(JSON.parse(JSON.stringify(r)).speedup, null);
  });

  it("repeatedRolloutSummary: the median repeat's figures (never a mixture), every repeat and the range beside them", () => {
    const trajs = Array.from({ length: 8 }, () => traj(['ls']));
    const ctx = { tasks: 8, maxTurns: 4, seed: 0, model: 'm', workspace: 'w', setupS: 0, sameActions: 1, cpus: 2 };
    // Sequential walls 120, 60, 80 s; concurrent 40 s each: speedups 3, 1.5, 2.
    const pair = (seqMs: number) => ({
      seq: passStats({
        concurrency: 1,
        result: result(seqMs, trajs),
        batches: [1],
        sampledTokens: 8,
        promptTokens: 0,
        overlapS: 0,
        loadAvg1m: 1,
      }),
      conc: passStats({
        concurrency: 8,
        result: result(40_000, trajs),
        batches: [4],
        sampledTokens: 8,
        promptTokens: 0,
        overlapS: 0,
        loadAvg1m: 1,
      }),
    });
    const r = repeatedRolloutSummary([pair(120_000), pair(60_000), pair(80_000)], ctx);
    assert.equal(r.speedup, 2);
    assert.equal(r.episodes_per_min_sequential, 6, 'the sequential figure of the median repeat (80 s), not the mean');
    assert.equal(r.sequential.wall_s, 80);
    assert.deepEqual(
      r.repeats?.map((x) => x.speedup),
      [3, 1.5, 2],
      'in the order run',
    );
    assert.equal(r.speedup_min, 1.5);
    assert.equal(r.speedup_max, 3);
    // Even count: the lower middle, so the figure is never the flattering one of two.
    assert.equal(repeatedRolloutSummary([pair(120_000), pair(60_000)], ctx).speedup, 1.5);
    // One repeat: exactly the single-pair summary, without repeat fields.
    assert.deepEqual(repeatedRolloutSummary([pair(60_000)], ctx), rolloutSummary(pair(60_000).seq, pair(60_000).conc, ctx));
    // A repeat whose sequential pass produced nothing counts as the lowest, not as Infinity.
    const empty = {
      seq: passStats({ concurrency: 1, result: result(0, []), batches: [], sampledTokens: 0, promptTokens: 0, overlapS: 0, loadAvg1m: 1 }),
      conc: pair(60_000).conc,
    };
    const withEmpty = repeatedRolloutSummary([empty, pair(60_000), pair(120_000)], ctx);
    assert.equal(withEmpty.speedup, 1.5);
    assert.equal(withEmpty.speedup_min, 1.5, 'the range is over the repeats that have a speedup');
    assert.throws(() => repeatedRolloutSummary([], ctx), /at least one pair/);
  });

  it('overlapSeconds: generation time covered by the union of exec spans', () => {
    const spans: Span[] = [
      { kind: 'generate', start: 0, end: 1000 },
      { kind: 'exec', start: 500, end: 800 },
      { kind: 'exec', start: 700, end: 1500 }, // overlaps the previous exec: counted once
      { kind: 'generate', start: 2000, end: 3000 },
      { kind: 'exec', start: 2900, end: 4000 },
    ];
    assert.equal(overlapSeconds(spans), 0.6);
    assert.equal(overlapSeconds([{ kind: 'generate', start: 0, end: 10 }]), 0);
  });

  it('sameActionsFraction: episodes compared in job order by their action lists', () => {
    assert.equal(sameActionsFraction([traj(['a', 'b']), traj(['c'])], [traj(['a', 'b']), traj(['d'])]), 0.5);
    assert.equal(sameActionsFraction([traj(['a'])], [traj(['a', 'b'])]), 0);
    assert.equal(sameActionsFraction([], []), null);
  });

  it('logprobDrift: the largest log-prob difference over turns that sampled the same tokens after the same history', () => {
    const turn = (tokenIds: number[], logprobs: number[], observation = '') => ({
      index: 0,
      action: 'a',
      observation,
      exitCode: 0,
      durationMs: 1,
      tokenIds,
      logprobs,
    });
    const ep = (...turns: ReturnType<typeof turn>[]) => ({ ...traj([]), turns });
    const a = [ep(turn([1, 2], [-0.5, -1.25]), turn([3], [-2])), ep(turn([4], [-0.1]))];
    const b = [ep(turn([1, 2], [-0.5000031, -1.25]), turn([9], [-7])), ep(turn([4], [-0.1000004]))];
    // The flipped turn ([3] vs [9]) is left out; the others differ by rounding.
    assert.ok(Math.abs(logprobDrift(a, b)! - 3.1e-6) < 1e-12);
    assert.equal(logprobDrift(a, a), 0);
    assert.equal(logprobDrift([ep(turn([3], [-2]))], [ep(turn([9], [-7]))]), null);
    assert.equal(logprobDrift([], []), null);
    // After an output that differs (a command timed out in one pass), the prompts differ: the turns after it are not compared.
    const x = [ep(turn([1], [-0.5], 'ok'), turn([2], [-1]))];
    const y = [ep(turn([1], [-0.5000002], 'timeout'), turn([2], [-3]))];
    assert.ok(Math.abs(logprobDrift(x, y)! - 2e-7) < 1e-12);
    // and after a turn that flipped, neither
    assert.equal(logprobDrift([ep(turn([3], [-2]), turn([5], [-1]))], [ep(turn([9], [-7]), turn([5], [-4]))]), null);
  });
});
