// `bench transfer --compare`: two transfer benches' last held-out evaluations paired by task and
// seed per repository, from run folders written here with RunDir (the layout a bench leaves), and
// the CLI reading the two results files.
import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Task, Trajectory } from '../../../src/core/schema';
import { RunDir } from '../../../src/core/run';
import { compareTransferResults, formatTransferComparison, readTransferResult } from '../../../src/bench/transfer-compare';
import type { TransferResult } from '../../../src/bench/transfer';
import { main } from '../../../src/cli/main';

/** A held-out episode: greedy (`eval-`) when k is undefined, else sample k (`evals-`). */
const ep = (task: string, seed: number, resolved: boolean, k?: number, observation = ''): Trajectory =>
  ({
    schema: 'turnwise/trajectory@1',
    taskId: task,
    seed,
    groupId: `${k === undefined ? 'eval' : 'evals'}-${task}`,
    trajId: k === undefined ? `eval-${task}` : `evals-${task}-${k}`,
    checkpoint: 'c',
    turns: [{ index: 0, action: 'tw-suspects', observation, exitCode: 0, durationMs: 1 }],
    reward: {
      passRate: resolved ? 1 : 0,
      resolved,
      turns: 1,
      maxTurns: 4,
      formatError: false,
      efficiencyPenalty: 0,
      formatPenalty: 0,
      reward: +resolved,
    },
  }) as Trajectory;

/**
 * A run folder of one bench repository: held-out tasks `heldout`, evaluations at iterations 0 and
 * `last` (the one compared), each a function of the task giving [greedy resolved, samples resolved…].
 */
function writeRun(
  root: string,
  id: string,
  o: {
    heldout: string[];
    last: number;
    outcome: (task: string) => boolean[];
    /** The first evaluation's outcomes (absent: nothing resolved). */
    first?: (task: string) => boolean[];
    config?: Record<string, unknown>;
    startModel?: string;
  },
): string {
  const run = RunDir.create(root, id, {
    schema: 'turnwise/run-config@1',
    runId: id,
    lr: 1e-4,
    estimator: 'turnwise',
    ...o.config,
    startModel: o.startModel,
  });
  run.writeTasks(
    o.heldout.map((t) => ({ id: t }) as Task),
    { train: [], heldout: o.heldout },
  );
  const episodes = (it: number) =>
    o.heldout.flatMap((task, i) => {
      const [greedy, ...samples] = it === o.last ? o.outcome(task) : (o.first?.(task) ?? [false, false, false]);
      return [ep(task, 100 + i, greedy), ...samples.map((r, k) => ep(task, 1000 + 10 * i + k, r, k))];
    });
  run.writeTrajectories(0, 'heldout', episodes(0));
  run.writeTrajectories(o.last, 'heldout', episodes(o.last));
  const rows = [0, o.last].map((iteration) => JSON.stringify({ schema: 'turnwise/metrics@1', iteration, 'heldout/resolved': 0 }));
  fs.writeFileSync(path.join(run.dir, 'metrics.jsonl'), rows.join('\n') + '\n');
  return run.dir;
}

const result = (repos: { name: string; run_dir: string | null; error?: string }[], estimator: string): TransferResult =>
  ({
    schema: 'turnwise/bench-transfer@1',
    model: 'm',
    rl: true,
    estimator,
    minutes: 30,
    iterations: 1000,
    samples: 2,
    seed: 0,
    rl_seed: estimator === 'gear' ? 1 : 0,
    cache_dir: '/c',
    repos: repos.map((r) => ({ ...r, name: r.name })),
    totals: {},
    config: {},
  }) as unknown as TransferResult;

describe('bench transfer --compare', () => {
  let root: string;
  let startModel: string;
  beforeEach(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-transfer-compare-'));
    startModel = path.join(root, 'start-model');
    fs.mkdirSync(startModel);
    fs.writeFileSync(path.join(startModel, 'model.safetensors'), 'weights');
  });
  afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

  const tasks = Array.from({ length: 10 }, (_, i) => `t${i}`);

  it('pairs the last evaluations by task and seed: counts, sign test, the settings that differ, pooled sums', () => {
    // Repository x: A resolves sample 0 of t0..t1 only; B resolves both samples of all ten and the greedy of t0.
    const ax = writeRun(root, 'ax', { heldout: tasks, last: 5, outcome: (t) => [false, t === 't0' || t === 't1', false], startModel });
    const bx = writeRun(root, 'bx', {
      heldout: tasks,
      last: 7,
      outcome: (t) => [t === 't0', true, true],
      config: { estimator: 'gear', lr: 5e-5 },
      startModel,
    });
    // Repository y: B loses one sample A had; A is still at its warm start (iteration 0 is its last).
    const ay = writeRun(root, 'ay', { heldout: ['u'], last: 3, outcome: () => [true, true, false], startModel });
    const by = writeRun(root, 'by', {
      heldout: ['u'],
      last: 3,
      outcome: () => [true, false, false],
      config: { estimator: 'gear', lr: 5e-5 },
      startModel,
    });
    const c = compareTransferResults(
      result(
        [
          { name: 'x', run_dir: ax },
          { name: 'y', run_dir: ay },
          { name: 'z', run_dir: null, error: 'fetch failed' },
        ],
        'turnwise',
      ),
      result(
        [
          { name: 'x', run_dir: bx },
          { name: 'y', run_dir: by },
          { name: 'z', run_dir: by },
          { name: 'w', run_dir: null },
        ],
        'gear',
      ),
      { a: 'A.json', b: 'B.json' },
    );
    const [x, y] = c.repos;
    assert.equal(x.name, 'x');
    assert.deepEqual(x.a, { iteration: 5, greedy: 0, sampled: 2 });
    assert.deepEqual(x.b, { iteration: 7, greedy: 1, sampled: 20 });
    // 18 samples gained, none lost: p = 2 / 2^18; by task, ten tasks all up: 2 / 2^10.
    assert.deepEqual([x.sampled.pairs, x.sampled.gained, x.sampled.lost], [20, 18, 0]);
    assert.ok(Math.abs(x.sampled.p_value! - 2 / 2 ** 18) < 1e-12);
    assert.ok(Math.abs(x.sampled.p_value_tasks! - 2 / 2 ** 10) < 1e-12);
    assert.deepEqual(x.greedy, { pairs: 10, gained: 1, lost: 0, p_value: 1, task_nets: { t0: 1 }, p_value_tasks: 1 });
    assert.equal(x.better, 'b');
    assert.deepEqual(y.sampled, { pairs: 2, gained: 0, lost: 1, p_value: 1, task_nets: { u: -1 }, p_value_tasks: 1 });
    assert.equal(y.better, 'neither');
    assert.deepEqual([c.pooled.sampled.pairs, c.pooled.sampled.gained, c.pooled.sampled.lost], [22, 18, 1]);
    assert.equal(Object.keys(c.pooled.sampled.task_nets).length, 11, 'pooled by task over both repositories');
    assert.deepEqual(c.b_better, ['x']);
    assert.deepEqual(c.a_better, []);
    assert.deepEqual(c.differences, { estimator: ['turnwise', 'gear'], lr: [1e-4, 5e-5] }, 'the run ids and paths are not settings');
    assert.equal(c.same_start_weights, true);
    assert.deepEqual(
      c.skipped.map((s) => s.name + ': ' + s.reason),
      ['z: no run folder in A (fetch failed)', 'w: only in B'],
    );
    const text = formatTransferComparison(c).join('\n');
    assert.match(text, /settings that differ: estimator turnwise → gear; lr 0.0001 → 0.00005/);
    assert.match(
      text,
      /x +it\. 5 vs 7; sampled 2 vs 20: B \+18 −0 of 20 \(p 7\.6e-6, by task 0\.002\); greedy 0 vs 1: B \+1 −0 of 10 \(p 1\.000\)/,
    );
    assert.match(text, /B better on 1 of 2 repositories \(x\), A better on 0/);
  });

  it('--start compares the first held-out evaluations: a bench with RL against one without, by the policies they started from', () => {
    // A started resolving nothing and RL'd to everything; B (no RL: its first evaluation is its
    // last) started resolving both samples of every task.
    const ax = writeRun(root, 'ax', { heldout: tasks, last: 4, outcome: () => [true, true, true], startModel });
    const bx = writeRun(root, 'bx', { heldout: tasks, last: 0, outcome: () => [false, true, true], startModel });
    const a = result([{ name: 'x', run_dir: ax }], 'turnwise');
    const b = result([{ name: 'x', run_dir: bx }], 'turnwise');
    const last = compareTransferResults(a, b, { a: 'A.json', b: 'B.json' });
    assert.deepEqual([last.repos[0].a.iteration, last.repos[0].b.iteration], [4, 0]);
    assert.equal(last.repos[0].better, 'neither', 'after RL, A resolves every sample too');
    const start = compareTransferResults(a, b, { a: 'A.json', b: 'B.json' }, 'start');
    assert.equal(start.at, 'start');
    assert.deepEqual(start.repos[0].a, { iteration: 0, greedy: 0, sampled: 0 });
    assert.deepEqual(start.repos[0].b, { iteration: 0, greedy: 0, sampled: 20 });
    assert.equal(start.repos[0].better, 'b');
    assert.match(formatTransferComparison(start).join('\n'), /first held-out evaluation, the policy it started from/);
  });

  it('A better where B lost at p < 0.05; other held-out tasks, other weights and the clock are said', () => {
    const ax = writeRun(root, 'ax', { heldout: tasks, last: 2, outcome: () => [true, true, true], startModel });
    const bx = writeRun(root, 'bx', { heldout: tasks, last: 2, outcome: () => [true, false, false] });
    const otherModel = path.join(root, 'other');
    fs.mkdirSync(otherModel);
    fs.writeFileSync(path.join(otherModel, 'model.safetensors'), 'other weights');
    fs.rmSync(path.join(bx, 'config.json'));
    fs.writeFileSync(path.join(bx, 'config.json'), JSON.stringify({ lr: 1e-4, estimator: 'turnwise', startModel: otherModel }));
    const ay = writeRun(root, 'ay', { heldout: ['p', 'q'], last: 1, outcome: () => [true] });
    const by = writeRun(root, 'by', { heldout: ['p', 'r'], last: 1, outcome: () => [true] });
    const c = compareTransferResults(
      result(
        [
          { name: 'x', run_dir: ax },
          { name: 'y', run_dir: ay },
        ],
        'turnwise',
      ),
      result(
        [
          { name: 'x', run_dir: bx },
          { name: 'y', run_dir: by },
        ],
        'turnwise',
      ),
      { a: 'A.json', b: 'B.json' },
    );
    assert.equal(c.repos[0].better, 'a');
    assert.deepEqual(c.a_better, ['x']);
    assert.equal(c.same_start_weights, false);
    assert.deepEqual(c.differences, {});
    assert.match(c.skipped[0].reason, /held-out tasks differ/);
    const text = formatTransferComparison(c).join('\n');
    assert.match(text, /starting weights: differ/);
    assert.doesNotMatch(text, /the same bench twice/);
  });

  it('one task that flipped all of its samples is no win: significant by episode, not by task', () => {
    // 16 held-out tasks with 8 samples each; B resolves all 8 samples of t0 where A resolved none.
    const many = Array.from({ length: 16 }, (_, i) => `t${i}`);
    const ax = writeRun(root, 'ax', { heldout: many, last: 1, outcome: () => [false, ...Array(8).fill(false)] });
    const bx = writeRun(root, 'bx', { heldout: many, last: 1, outcome: (t) => [false, ...Array(8).fill(t === 't0')] });
    const c = compareTransferResults(result([{ name: 'x', run_dir: ax }], 'turnwise'), result([{ name: 'x', run_dir: bx }], 'gear'), {
      a: 'A.json',
      b: 'B.json',
    });
    const x = c.repos[0];
    assert.deepEqual([x.sampled.gained, x.sampled.lost, x.sampled.pairs], [8, 0, 128]);
    assert.ok(x.sampled.p_value! < 0.01, 'the sign test over episodes calls it significant');
    assert.equal(x.sampled.p_value_tasks, 1);
    assert.equal(x.better, 'neither');
    assert.deepEqual(c.b_better, []);
  });

  it('the CLI: two files compared as text and JSON; a file that is not a bench result, or one file, refused', async () => {
    const ax = writeRun(root, 'ax', { heldout: tasks, last: 2, outcome: () => [false, true, false], startModel });
    const bx = writeRun(root, 'bx', { heldout: tasks, last: 2, outcome: () => [false, true, false], startModel });
    const fa = path.join(root, 'a.json');
    const fb = path.join(root, 'b.json');
    fs.writeFileSync(fa, JSON.stringify(result([{ name: 'x', run_dir: ax }], 'turnwise')));
    fs.writeFileSync(fb, JSON.stringify(result([{ name: 'x', run_dir: bx }], 'turnwise')));
    const cli = async (...argv: string[]) => {
      const out: string[] = [];
      const err: string[] = [];
      const code = await main(argv, { out: (s) => out.push(s), err: (s) => err.push(s) });
      return { code, out: out.join('\n'), err: err.join('\n') };
    };
    const text = await cli('bench', 'transfer', '--compare', fa, fb);
    assert.equal(text.code, 0, text.err);
    assert.match(text.out, /x +it\. 2 vs 2; sampled 10 vs 10: B \+0 −0 of 20 \(p —\)/);
    assert.match(text.out, /the same bench twice/);
    const json = await cli('bench', 'transfer', '--compare', fa, fb, '--json');
    assert.equal(json.code, 0, json.err);
    assert.equal(JSON.parse(json.out).schema, 'turnwise/bench-transfer-compare@1');
    fs.writeFileSync(path.join(root, 'bad.json'), '{"schema":"turnwise/eval@1"}');
    const bad = await cli('bench', 'transfer', '--compare', fa, path.join(root, 'bad.json'));
    assert.notEqual(bad.code, 0);
    assert.match(bad.err, /is not a transfer bench result/);
    const one = await cli('bench', 'transfer', '--compare', fa);
    assert.notEqual(one.code, 0);
    assert.match(one.err, /--compare takes two results files/);
    const extra = await cli('bench', 'transfer', '--compare', fa, fb, '--repos', 'x');
    assert.match(extra.err, /takes no --repos/);
    assert.throws(() => readTransferResult(path.join(root, 'missing.json')), /cannot read/);
  });
});
