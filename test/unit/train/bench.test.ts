// The pure parts of the training benchmarks: pass statistics, the rollout summary (speedup =
// concurrent / sequential), generate/exec overlap, and the learn benchmark's curves.
import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { initPolicyDir } from '../../../src/policy';
import type { MetricsRow } from '../../../src/core/events';
import type { Trajectory } from '../../../src/core/schema';
import type { RolloutResult, Span } from '../../../src/agent/scheduler';
import { signTestP } from '../../../src/core/stats';
import { RunDir } from '../../../src/core/run';
import { allEpisodesFailed, firstImprovement, runPassAtKT, learnSummary, machineCpuBusySeconds, meanCurve, metricCurve, overlapSeconds, passStats, repeatedRolloutSummary, rolloutSummary, logprobDrift, sameActionsFraction, snapshotCheckpoint, type LearnRun } from '../../../src/train/bench';

const traj = (actions: string[], failure?: string): Trajectory =>
  ({
    schema: 'turnwise/trajectory@1',
    taskId: 't',
    groupId: 'g',
    trajId: 'x',
    checkpoint: 'c',
    turns: actions.map((action, index) => ({ index, action, observation: '', exitCode: 0, durationMs: 0 })),
    reward: { passRate: 1, resolved: true, turns: actions.length, maxTurns: 4, formatError: false, efficiencyPenalty: 0, formatPenalty: 0, reward: 1 },
    ...(failure ? { failure } : {}),
  }) as Trajectory;

const result = (wallMs: number, trajs: Trajectory[], generateMs = 1000, heldMs = 0): RolloutResult => ({ trajectories: trajs, wallMs, generateMs, sandboxMs: 4000, rewardMs: 2000, meanBatch: 0, heldMs });

const row = (iteration: number, m: Record<string, number | null>): MetricsRow => ({ schema: 'turnwise/metrics@1', iteration, ...m }) as MetricsRow;

describe('train/bench: rollout summary', () => {
  it('passStats: episodes per minute, tokens per generation second, failed and turns counted', () => {
    const s = passStats({ concurrency: 1, result: result(30_000, [traj(['ls', 'submit']), traj(['cat a'], 'boom')], 2000, 1234), batches: [1, 1, 1], sampledTokens: 100, promptTokens: 900, overlapS: 0, loadAvg1m: 3.456 });
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
    const stats = (trajs: Trajectory[]) => passStats({ concurrency: 1, result: result(1000, trajs), batches: [1], sampledTokens: 1, promptTokens: 0, overlapS: 0, loadAvg1m: 1 });
    const ok = stats([traj(['ls']), traj(['cat a'], 'boom')]);
    const bad = stats([traj(['ls'], 'no such file'), traj(['cat a'], 'boom')]);
    assert.equal(bad.first_failure, 'no such file');
    assert.equal(ok.first_failure, 'boom');
    assert.equal(allEpisodesFailed({ sequential: ok, concurrent: ok }), undefined, 'some episodes ran');
    assert.match(allEpisodesFailed({ sequential: ok, concurrent: bad })!, /every episode of the concurrent pass failed \(the first: no such file\)/);
  });

  it('rolloutSummary: speedup = concurrent / sequential, the explaining figures taken from each pass', () => {
    const trajs = Array.from({ length: 8 }, () => traj(['ls']));
    const seq = passStats({ concurrency: 1, result: result(120_000, trajs), batches: [1, 1], sampledTokens: 80, promptTokens: 0, overlapS: 0, loadAvg1m: 2 });
    const conc = passStats({ concurrency: 8, result: result(40_000, trajs, 3000), batches: [4, 2, 2], sampledTokens: 80, promptTokens: 0, overlapS: 1.5, loadAvg1m: 2 });
    const r = rolloutSummary(seq, conc, { tasks: 8, maxTurns: 4, seed: 0, model: 'm', workspace: 'w', setupS: 10, sameActions: 1, cpus: 2 });
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

  it('the CPU bound: cores busy per pass, and the speedup the sequential pass\'s CPU seconds allow', () => {
    const trajs = Array.from({ length: 8 }, () => traj(['ls']));
    // Sequential: 120 s wall using 150 CPU seconds (1.25 cores); on 2 cores at most 2 × 120 / 150 = 1.6×.
    const seq = passStats({ concurrency: 1, result: result(120_000, trajs), batches: [1], sampledTokens: 8, promptTokens: 0, overlapS: 0, loadAvg1m: 1, cpuBusyS: 150 });
    const conc = passStats({ concurrency: 8, result: result(80_000, trajs), batches: [4], sampledTokens: 8, promptTokens: 0, overlapS: 0, loadAvg1m: 2, cpuBusyS: 158 });
    assert.equal(seq.cores_busy, 1.25);
    assert.equal(conc.cores_busy, 1.98);
    const r = rolloutSummary(seq, conc, { tasks: 8, maxTurns: 4, seed: 0, model: 'm', workspace: 'w', setupS: 0, sameActions: 1, cpus: 2 });
    assert.equal(r.speedup_cpu_bound, 1.6);
    assert.equal(r.cores_busy_sequential, 1.25);
    // Unknown CPU time (not Linux): null, never a made-up bound.
    const blind = passStats({ concurrency: 1, result: result(120_000, trajs), batches: [1], sampledTokens: 8, promptTokens: 0, overlapS: 0, loadAvg1m: 1, cpuBusyS: null });
    assert.equal(blind.cores_busy, null);
    assert.equal(rolloutSummary(blind, conc, { tasks: 8, maxTurns: 4, seed: 0, model: 'm', workspace: 'w', setupS: 0, sameActions: 1, cpus: 2 }).speedup_cpu_bound, null);
  });

  it('machineCpuBusySeconds: everything but idle and iowait, in seconds of USER_HZ ticks', () => {
    const stat = 'cpu  1000 50 300 9000 400 20 30 0 0 0\ncpu0 500 25 150 4500 200 10 15 0 0 0\nintr 1 2 3\n';
    assert.equal(machineCpuBusySeconds(stat), 14); // (1000+50+300+20+30+0) / 100
    assert.equal(machineCpuBusySeconds('intr 1 2\n'), null);
    assert.equal(machineCpuBusySeconds('cpu  a b c\n'), null);
    if (process.platform === 'linux') assert.ok((machineCpuBusySeconds() ?? 0) > 0);
  });

  it('rolloutSummary: no speedup when the sequential pass produced nothing (null, not Infinity)', () => {
    const seq = passStats({ concurrency: 1, result: result(0, []), batches: [], sampledTokens: 0, promptTokens: 0, overlapS: 0, loadAvg1m: 1 });
    const conc = passStats({ concurrency: 8, result: result(1000, [traj(['ls'])]), batches: [1], sampledTokens: 1, promptTokens: 0, overlapS: 0, loadAvg1m: 1 });
    const r = rolloutSummary(seq, conc, { tasks: 1, maxTurns: 1, seed: 0, model: 'm', workspace: 'w', setupS: 0, sameActions: null });
    assert.equal(r.speedup, null);
    assert.equal(r.episodes_per_min_sequential, null);
    assert.equal(JSON.parse(JSON.stringify(r)).speedup, null);
  });

  it('repeatedRolloutSummary: the median repeat\'s figures (never a mixture), every repeat and the range beside them', () => {
    const trajs = Array.from({ length: 8 }, () => traj(['ls']));
    const ctx = { tasks: 8, maxTurns: 4, seed: 0, model: 'm', workspace: 'w', setupS: 0, sameActions: 1, cpus: 2 };
    // Sequential walls 120, 60, 80 s; concurrent 40 s each: speedups 3, 1.5, 2.
    const pair = (seqMs: number) => ({
      seq: passStats({ concurrency: 1, result: result(seqMs, trajs), batches: [1], sampledTokens: 8, promptTokens: 0, overlapS: 0, loadAvg1m: 1 }),
      conc: passStats({ concurrency: 8, result: result(40_000, trajs), batches: [4], sampledTokens: 8, promptTokens: 0, overlapS: 0, loadAvg1m: 1 }),
    });
    const r = repeatedRolloutSummary([pair(120_000), pair(60_000), pair(80_000)], ctx);
    assert.equal(r.speedup, 2);
    assert.equal(r.episodes_per_min_sequential, 6, 'the sequential figure of the median repeat (80 s), not the mean');
    assert.equal(r.sequential.wall_s, 80);
    assert.deepEqual(r.repeats?.map((x) => x.speedup), [3, 1.5, 2], 'in the order run');
    assert.equal(r.speedup_min, 1.5);
    assert.equal(r.speedup_max, 3);
    // Even count: the lower middle, so the figure is never the flattering one of two.
    assert.equal(repeatedRolloutSummary([pair(120_000), pair(60_000)], ctx).speedup, 1.5);
    // One repeat: exactly the single-pair summary, without repeat fields.
    assert.deepEqual(repeatedRolloutSummary([pair(60_000)], ctx), rolloutSummary(pair(60_000).seq, pair(60_000).conc, ctx));
    // A repeat whose sequential pass produced nothing counts as the lowest, not as Infinity.
    const empty = { seq: passStats({ concurrency: 1, result: result(0, []), batches: [], sampledTokens: 0, promptTokens: 0, overlapS: 0, loadAvg1m: 1 }), conc: pair(60_000).conc };
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

  it('logprobDrift: the largest log-prob difference over turns that sampled the same tokens', () => {
    const turn = (tokenIds: number[], logprobs: number[]) => ({ index: 0, action: 'a', observation: '', exitCode: 0, durationMs: 1, tokenIds, logprobs });
    const ep = (...turns: ReturnType<typeof turn>[]) => ({ ...traj([]), turns });
    const a = [ep(turn([1, 2], [-0.5, -1.25]), turn([3], [-2])), ep(turn([4], [-0.1]))];
    const b = [ep(turn([1, 2], [-0.5000031, -1.25]), turn([9], [-7])), ep(turn([4], [-0.1000004]))];
    // The flipped turn ([3] vs [9]) is left out; the others differ by rounding.
    assert.ok(Math.abs(logprobDrift(a, b)! - 3.1e-6) < 1e-12);
    assert.equal(logprobDrift(a, a), 0);
    assert.equal(logprobDrift([ep(turn([3], [-2]))], [ep(turn([9], [-7]))]), null);
    assert.equal(logprobDrift([], []), null);
  });
});

describe('train/bench: learn curves', () => {
  const metrics = (heldout: (number | null)[], reward: (number | null)[]) =>
    heldout.map((h, i) => row(i, { 'heldout/resolved': h, 'reward/mean': i === 0 ? null : reward[i - 1], ...(i === 0 ? { 'heldout/episodes': 4 } : {}) }));

  it('metricCurve: indexed by iteration, null where a row or the key is missing', () => {
    const m = [row(0, { a: 0.25 }), row(2, { a: 0.5, b: 1 })];
    assert.deepEqual(metricCurve(m, 'a', 3), [0.25, null, 0.5, null]);
    assert.deepEqual(metricCurve(m, 'b', 2), [null, null, 1]);
  });

  it('meanCurve: point-by-point mean over seeds, nulls left out', () => {
    assert.deepEqual(meanCurve([[0, 0.5, null], [0.5, 1, null]]), [0.25, 0.75, null]);
    assert.deepEqual(meanCurve([[1, null], [0.5, 0.5]]), [0.75, 0.5]);
    assert.deepEqual(meanCurve([]), []);
  });

  it('firstImprovement: the first iteration above iteration 0, or null', () => {
    assert.equal(firstImprovement([0.25, 0.25, 0.5, 0.75]), 2);
    assert.equal(firstImprovement([0.5, 0.25, 0.5]), null);
    assert.equal(firstImprovement([null, 1]), null);
  });

  it('learnSummary: warm start, final rates, curves and runs from two estimators and two seeds', () => {
    const runs: LearnRun[] = [
      { seed: 0, estimator: 'grpo', runDir: '/r/g0', metrics: metrics([0.25, 0.25, 0.5], [0.1, 0.2]), wallS: 10 },
      { seed: 0, estimator: 'turnwise', runDir: '/r/t0', metrics: metrics([0.25, 0.5, 0.5], [0.2, 0.3]), wallS: 11 },
      { seed: 1, estimator: 'grpo', runDir: '/r/g1', metrics: metrics([0.5, 0.5, 0.5], [0.3, 0.4]), wallS: 12 },
      { seed: 1, estimator: 'turnwise', runDir: '/r/t1', metrics: metrics([0.5, 0.75, 1], [0.4, 0.5]), wallS: 13 },
    ];
    const s = learnSummary(runs, { iterations: 2, runsRoot: '/r', config: { groupSize: 4 } });
    assert.equal(s.resolved_warmstart, 0.375);
    assert.equal(s.resolved_grpo, 0.5);
    assert.equal(s.resolved_turnwise, 0.75);
    assert.equal(s.heldout_tasks, 4);
    assert.deepEqual(s.seeds, [0, 1]);
    assert.deepEqual(s.curve_grpo, [0.375, 0.375, 0.5]);
    assert.deepEqual(s.curve_turnwise, [0.375, 0.625, 0.75]);
    assert.deepEqual(s.reward_curve_grpo, [null, 0.2, 0.3]);
    assert.deepEqual(s.reward_curve_turnwise, [null, 0.3, 0.4]);
    assert.deepEqual(s.sampled_curve_grpo, [null, null, null], 'no sampled evaluation in these runs');
    assert.equal(s.first_improvement_grpo, 2);
    assert.equal(s.first_improvement_turnwise, 1);
    assert.equal(s.warmstart_agrees, true);
    assert.deepEqual(s.runs.map((r) => r.run_dir), ['/r/g0', '/r/t0', '/r/g1', '/r/t1']);
    assert.deepEqual(s.runs[1].curve, [0.25, 0.5, 0.5]);
    assert.equal(s.paired_grpo, null, 'no paired change without evaluation episodes');
    // Paired changes are summed over seeds per estimator, and tested as a sum.
    const pc = (gained: number, lost: number) => ({ pairs: 8, gained, lost, p_value: signTestP(gained, lost) });
    runs[1].paired = { greedy: pc(1, 0), sampled: pc(3, 1) };
    runs[3].paired = { greedy: pc(2, 0), sampled: pc(4, 0) };
    const t = learnSummary(runs, { iterations: 2, runsRoot: '/r', config: {} }).paired_turnwise!;
    assert.deepEqual([t.greedy.pairs, t.greedy.gained, t.greedy.lost], [16, 3, 0]);
    assert.deepEqual([t.sampled.gained, t.sampled.lost], [7, 1]);
    assert.equal(t.sampled.p_value, signTestP(7, 1));
  });

  it('learnSummary: flags estimators whose warm-start evaluations differ on a seed', () => {
    const runs: LearnRun[] = [
      { seed: 0, estimator: 'grpo', runDir: 'a', metrics: metrics([0.25, 0.5], [0.1]), wallS: 1 },
      { seed: 0, estimator: 'turnwise', runDir: 'b', metrics: metrics([0.5, 0.5], [0.1]), wallS: 1 },
    ];
    assert.equal(learnSummary(runs, { iterations: 1, runsRoot: 'r', config: {} }).warmstart_agrees, false);
  });

  it('PASS@(k,T) of the first and last held-out evaluations, read from the run, in the JSON per run and mean over seeds', () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-learn-pass-'));
    try {
      // A sampled held-out episode of `task` resolved (or not) after `actions` commands and a submit; turn limit 4.
      const ep = (n: number, task: string, k: number, resolved: boolean, actions: number): Trajectory =>
        ({
          schema: 'turnwise/trajectory@1',
          taskId: task,
          groupId: `evals-${n}-${task}`,
          trajId: `evals-${n}-${task}-${k}`,
          checkpoint: 'c',
          turns: [...Array.from({ length: actions }, (_, i) => ({ index: i, action: `cmd ${i}`, observation: '', exitCode: 0, durationMs: 1 })), { index: actions, action: 'submit', observation: '', exitCode: null, durationMs: 0 }],
          reward: { passRate: resolved ? 1 : 0, resolved, turns: actions + 1, maxTurns: 4, formatError: false, efficiencyPenalty: 0, formatPenalty: 0, reward: resolved ? 1 : 0 },
        }) as Trajectory;
      const greedy = (n: number, task: string): Trajectory => ({ ...ep(n, task, 0, true, 1), trajId: `eval-${n}-${task}`, groupId: `eval-${n}-${task}` });
      const run = RunDir.create(root, 'r1', {});
      // Iteration 0: task a resolved by 1 of 2 samples (after 2 actions), task b by none.
      run.writeTrajectories(0, 'heldout', [greedy(0, 'a'), ep(0, 'a', 0, true, 2), ep(0, 'a', 1, false, 4), ep(0, 'b', 0, false, 4), ep(0, 'b', 1, false, 4)]);
      // Iteration 2: task a by both (after 1 action), task b by one (after 3).
      run.writeTrajectories(2, 'heldout', [ep(2, 'a', 0, true, 1), ep(2, 'a', 1, true, 1), ep(2, 'b', 0, true, 3), ep(2, 'b', 1, false, 4)]);
      const m = [row(0, { 'heldout/resolved': 0.5 }), row(1, { 'heldout/resolved': null }), row(2, { 'heldout/resolved': 1 })];
      const p = runPassAtKT(run.dir, m)!;
      // First: k=1 T<2: 0, T≥2: (1/2 + 0)/2 = 0.25; k=2 T≥2: (1 + 0)/2 = 0.5.
      assert.deepEqual(p.first, { '1': { '1': 0, '2': 0.25, '3': 0.25, '4': 0.25 }, '2': { '1': 0, '2': 0.5, '3': 0.5, '4': 0.5 } });
      // Last: k=1 T=1,2: (1 + 0)/2 = 0.5, T≥3: (1 + 1/2)/2 = 0.75; k=2 T=1,2: 0.5, T≥3: 1.
      assert.deepEqual(p.last, { '1': { '1': 0.5, '2': 0.5, '3': 0.75, '4': 0.75 }, '2': { '1': 0.5, '2': 0.5, '3': 1, '4': 1 } });
      assert.equal(runPassAtKT(run.dir, [row(0, { 'heldout/resolved': 0.5 })])?.first?.['1']['4'], 0.25, 'one evaluation: first and last are the same');
      const metrics2 = metrics([0.25, 0.5], [0.1]);
      const flat = { '1': { '1': 0, '2': 0, '3': 0, '4': 0 }, '2': { '1': 0, '2': 0, '3': 0, '4': 0 } };
      const runs: LearnRun[] = [
        { seed: 0, estimator: 'grpo', runDir: 'g0', metrics: metrics2, wallS: 1, passAtKT: { first: p.first, last: flat } },
        { seed: 0, estimator: 'turnwise', runDir: 't0', metrics: metrics2, wallS: 1, passAtKT: p },
        { seed: 1, estimator: 'grpo', runDir: 'g1', metrics: metrics2, wallS: 1, passAtKT: { first: p.first, last: p.first } },
        { seed: 1, estimator: 'turnwise', runDir: 't1', metrics: metrics2, wallS: 1, passAtKT: { first: p.first, last: p.last } },
      ];
      const s = JSON.parse(JSON.stringify(learnSummary(runs, { iterations: 1, runsRoot: 'r', config: {} })));
      assert.deepEqual(s.pass_at_k_t.warmstart, p.first);
      assert.deepEqual(s.pass_at_k_t.turnwise, p.last);
      // grpo: the mean of flat and first.
      assert.deepEqual(s.pass_at_k_t.grpo, { '1': { '1': 0, '2': 0.125, '3': 0.125, '4': 0.125 }, '2': { '1': 0, '2': 0.25, '3': 0.25, '4': 0.25 } });
      assert.deepEqual(s.runs[1].pass_at_k_t, p);
      const none = learnSummary([{ seed: 0, estimator: 'grpo', runDir: 'g', metrics: metrics2, wallS: 1 }], { iterations: 1, runsRoot: 'r', config: {} });
      assert.equal(none.pass_at_k_t, null, 'no sampled evaluation (evalSamples 0)');
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('train/bench: snapshotCheckpoint', () => {
  it('copies a whole checkpoint with the files beside it (warmstart.json), the optimizer only when asked', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-bench-ck-'));
    try {
      const src = path.join(dir, 'src');
      initPolicyDir(src, { seed: 1 });
      fs.writeFileSync(path.join(src, 'warmstart.json'), JSON.stringify({ demonstrationTaskIds: ['t1'] }));
      await snapshotCheckpoint(src, path.join(dir, 'a'));
      assert.deepEqual(JSON.parse(fs.readFileSync(path.join(dir, 'a', 'warmstart.json'), 'utf8')), { demonstrationTaskIds: ['t1'] });
      assert.ok(fs.existsSync(path.join(dir, 'a', 'model.safetensors')));
      assert.ok(!fs.existsSync(path.join(dir, 'a', 'optimizer.safetensors')));
      assert.deepEqual(fs.readFileSync(path.join(dir, 'a', 'model.safetensors')), fs.readFileSync(path.join(src, 'model.safetensors')));
      if (fs.existsSync(path.join(src, 'optimizer.safetensors'))) {
        await snapshotCheckpoint(src, path.join(dir, 'b'), { optimizer: true });
        assert.ok(fs.existsSync(path.join(dir, 'b', 'optimizer.safetensors')));
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
