// The pure parts of the learn benchmark: its curves, the summary over seeds and estimators, and
// PASS@(k,T) of a run's first and last held-out evaluations.
import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { MetricsRow } from '../../../src/core/events';
import type { Trajectory } from '../../../src/core/schema';
import { signTestP } from '../../../src/core/stats';
import { RunDir } from '../../../src/core/run';
import { firstImprovement, learnSummary, meanCurve, metricCurve, type LearnRun } from '../../../src/bench/learn';
import { runPassAtKT } from '../../../src/eval/pass-at-k';

const row = (iteration: number, m: Record<string, number | null>): MetricsRow =>
  ({ schema: 'turnwise/metrics@1', iteration, ...m }) as MetricsRow;

describe('bench/learn: learn curves', () => {
  const metrics = (heldout: (number | null)[], reward: (number | null)[]) =>
    heldout.map((h, i) =>
      row(i, { 'heldout/resolved': h, 'reward/mean': i === 0 ? null : reward[i - 1], ...(i === 0 ? { 'heldout/episodes': 4 } : {}) }),
    );

  it('metricCurve: indexed by iteration, null where a row or the key is missing', () => {
    const m = [row(0, { a: 0.25 }), row(2, { a: 0.5, b: 1 })];
    assert.deepEqual(metricCurve(m, 'a', 3), [0.25, null, 0.5, null]);
    assert.deepEqual(metricCurve(m, 'b', 2), [null, null, 1]);
  });

  it('meanCurve: point-by-point mean over seeds, nulls left out', () => {
    assert.deepEqual(
      meanCurve([
        [0, 0.5, null],
        [0.5, 1, null],
      ]),
      [0.25, 0.75, null],
    );
    assert.deepEqual(
      meanCurve([
        [1, null],
        [0.5, 0.5],
      ]),
      [0.75, 0.5],
    );
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
    const [g, tw] = [s.by_estimator.grpo, s.by_estimator.turnwise];
    assert.deepEqual(s.estimators, ['grpo', 'turnwise']);
    assert.equal(s.resolved_warmstart, 0.375);
    assert.equal(g.resolved, 0.5);
    assert.equal(tw.resolved, 0.75);
    assert.equal(s.heldout_tasks, 4);
    assert.deepEqual(s.seeds, [0, 1]);
    assert.deepEqual(g.curve, [0.375, 0.375, 0.5]);
    assert.deepEqual(tw.curve, [0.375, 0.625, 0.75]);
    assert.deepEqual(g.reward_curve, [null, 0.2, 0.3]);
    assert.deepEqual(tw.reward_curve, [null, 0.3, 0.4]);
    assert.deepEqual(g.sampled_curve, [null, null, null], 'no sampled evaluation in these runs');
    assert.equal(g.first_improvement, 2);
    assert.equal(tw.first_improvement, 1);
    assert.equal(s.warmstart_agrees, true);
    assert.deepEqual(
      s.runs.map((r) => r.run_dir),
      ['/r/g0', '/r/t0', '/r/g1', '/r/t1'],
    );
    assert.deepEqual(s.runs[1].curve, [0.25, 0.5, 0.5]);
    assert.equal(g.paired, null, 'no paired change without evaluation episodes');
    assert.deepEqual(s.head_to_head, {}, 'nor a head-to-head comparison');
    // Paired changes are summed over seeds per estimator, and tested as a sum.
    const pc = (gained: number, lost: number) => ({
      pairs: 8,
      gained,
      lost,
      p_value: signTestP(gained, lost),
      task_nets: { x: gained - lost },
      p_value_tasks: null,
    });
    runs[1].paired = { greedy: pc(1, 0), sampled: pc(3, 1) };
    runs[3].paired = { greedy: pc(2, 0), sampled: pc(4, 0) };
    const t = learnSummary(runs, { iterations: 2, runsRoot: '/r', config: {} }).by_estimator.turnwise.paired!;
    assert.deepEqual([t.greedy.pairs, t.greedy.gained, t.greedy.lost], [16, 3, 0]);
    assert.deepEqual([t.sampled.gained, t.sampled.lost], [7, 1]);
    assert.equal(t.sampled.p_value, signTestP(7, 1));
    assert.deepEqual(t.sampled.task_nets, { x: 6 }, 'one task under two seeds is one task by task');
  });

  it('learnSummary: any estimators, each against each other on the same held-out episodes of their last evaluations', () => {
    // A held-out episode of `task`, greedy or sampled (k), resolved or not.
    const ep = (task: string, k: number | null, resolved: boolean) =>
      ({
        taskId: task,
        trajId: k === null ? `eval-4-${task}` : `evals-4-${task}-${k}`,
        seed: k ?? 0,
        turns: [],
        reward: { resolved },
      }) as unknown as Trajectory;
    const last = (resolved: boolean[]) => resolved.map((x, i) => ep(`t${i % 3}`, i < 3 ? null : i, x));
    const m = metrics([0.25, 0.5], [0.1]);
    const runs: LearnRun[] = [
      { seed: 0, estimator: 'grpo', runDir: 'g0', metrics: m, wallS: 1, lastEval: last([false, false, true, false, false]) },
      { seed: 0, estimator: 'gear', runDir: 'e0', metrics: m, wallS: 1, lastEval: last([true, false, true, true, false]) },
      { seed: 0, estimator: 'a2tgpo', runDir: 'a0', metrics: m, wallS: 1, lastEval: last([false, true, false, false, false]) },
      { seed: 1, estimator: 'grpo', runDir: 'g1', metrics: m, wallS: 1, lastEval: last([false, false, false, false, false]) },
      { seed: 1, estimator: 'gear', runDir: 'e1', metrics: m, wallS: 1, lastEval: last([true, false, false, false, false]) },
    ];
    const s = learnSummary(runs, { iterations: 1, runsRoot: 'r', config: {} });
    assert.deepEqual(s.estimators, ['grpo', 'gear', 'a2tgpo']);
    // gear against grpo: seed 0 greedy +1 (t0), sampled +1 (k 3); seed 1 greedy +1 (t0)
    const h = s.head_to_head['gear vs grpo'];
    assert.deepEqual([h.greedy.pairs, h.greedy.gained, h.greedy.lost], [6, 2, 0]);
    assert.deepEqual([h.sampled.pairs, h.sampled.gained, h.sampled.lost], [4, 1, 0]);
    assert.equal(h.greedy.p_value, signTestP(2, 0));
    // and the reverse is its mirror; a2tgpo (seed 0 only) against grpo: greedy +1 (t1) −1 (t2)
    assert.deepEqual([s.head_to_head['grpo vs gear'].greedy.gained, s.head_to_head['grpo vs gear'].greedy.lost], [0, 2]);
    const a = s.head_to_head['a2tgpo vs grpo'];
    assert.deepEqual([a.greedy.pairs, a.greedy.gained, a.greedy.lost], [3, 1, 1]);
    assert.equal(Object.keys(s.head_to_head).length, 6);
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
          turns: [
            ...Array.from({ length: actions }, (_, i) => ({ index: i, action: `cmd ${i}`, observation: '', exitCode: 0, durationMs: 1 })),
            { index: actions, action: 'submit', observation: '', exitCode: null, durationMs: 0 },
          ],
          reward: {
            passRate: resolved ? 1 : 0,
            resolved,
            turns: actions + 1,
            maxTurns: 4,
            formatError: false,
            efficiencyPenalty: 0,
            formatPenalty: 0,
            reward: resolved ? 1 : 0,
          },
        }) as Trajectory;
      const greedy = (n: number, task: string): Trajectory => ({
        ...ep(n, task, 0, true, 1),
        trajId: `eval-${n}-${task}`,
        groupId: `eval-${n}-${task}`,
      });
      const run = RunDir.create(root, 'r1', {});
      // Iteration 0: task a resolved by 1 of 2 samples (after 2 actions), task b by none.
      run.writeTrajectories(0, 'heldout', [
        greedy(0, 'a'),
        ep(0, 'a', 0, true, 2),
        ep(0, 'a', 1, false, 4),
        ep(0, 'b', 0, false, 4),
        ep(0, 'b', 1, false, 4),
      ]);
      // Iteration 2: task a by both (after 1 action), task b by one (after 3).
      run.writeTrajectories(2, 'heldout', [
        ep(2, 'a', 0, true, 1),
        ep(2, 'a', 1, true, 1),
        ep(2, 'b', 0, true, 3),
        ep(2, 'b', 1, false, 4),
      ]);
      const m = [row(0, { 'heldout/resolved': 0.5 }), row(1, { 'heldout/resolved': null }), row(2, { 'heldout/resolved': 1 })];
      const p = runPassAtKT(run.dir, m)!;
      // First: k=1 T<2: 0, T≥2: (1/2 + 0)/2 = 0.25; k=2 T≥2: (1 + 0)/2 = 0.5.
      assert.deepEqual(p.first, { '1': { '1': 0, '2': 0.25, '3': 0.25, '4': 0.25 }, '2': { '1': 0, '2': 0.5, '3': 0.5, '4': 0.5 } });
      // Last: k=1 T=1,2: (1 + 0)/2 = 0.5, T≥3: (1 + 1/2)/2 = 0.75; k=2 T=1,2: 0.5, T≥3: 1.
      assert.deepEqual(p.last, { '1': { '1': 0.5, '2': 0.5, '3': 0.75, '4': 0.75 }, '2': { '1': 0.5, '2': 0.5, '3': 1, '4': 1 } });
      assert.equal(
        runPassAtKT(run.dir, [row(0, { 'heldout/resolved': 0.5 })])?.first?.['1']['4'],
        0.25,
        'one evaluation: first and last are the same',
      );
      const metrics2 = metrics([0.25, 0.5], [0.1]);
      const flat = { '1': { '1': 0, '2': 0, '3': 0, '4': 0 }, '2': { '1': 0, '2': 0, '3': 0, '4': 0 } };
      const runs: LearnRun[] = [
        { seed: 0, estimator: 'grpo', runDir: 'g0', metrics: metrics2, wallS: 1, passAtKT: { first: p.first, last: flat } },
        { seed: 0, estimator: 'turnwise', runDir: 't0', metrics: metrics2, wallS: 1, passAtKT: p },
        { seed: 1, estimator: 'grpo', runDir: 'g1', metrics: metrics2, wallS: 1, passAtKT: { first: p.first, last: p.first } },
        { seed: 1, estimator: 'turnwise', runDir: 't1', metrics: metrics2, wallS: 1, passAtKT: { first: p.first, last: p.last } },
      ];
      const s = JSON.parse(JSON.stringify(learnSummary(runs, { iterations: 1, runsRoot: 'r', config: {} })));
      assert.deepEqual(s.pass_at_k_t_warmstart, p.first);
      assert.deepEqual(s.by_estimator.turnwise.pass_at_k_t, p.last);
      // grpo: the mean of flat and first.
      assert.deepEqual(s.by_estimator.grpo.pass_at_k_t, {
        '1': { '1': 0, '2': 0.125, '3': 0.125, '4': 0.125 },
        '2': { '1': 0, '2': 0.25, '3': 0.25, '4': 0.25 },
      });
      assert.deepEqual(s.runs[1].pass_at_k_t, p);
      const none = learnSummary([{ seed: 0, estimator: 'grpo', runDir: 'g', metrics: metrics2, wallS: 1 }], {
        iterations: 1,
        runsRoot: 'r',
        config: {},
      });
      assert.equal(none.pass_at_k_t_warmstart, null, 'no sampled evaluation (evalSamples 0)');
      assert.equal(none.by_estimator.grpo.pass_at_k_t, null);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
