// `turnwise eval --run`: which tasks, checkpoint and settings a run's evaluation uses, and what it
// refuses, on a run directory made here (no sandbox; the docker tier runs one for real).
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from '../../../src/cli/main';
import { RunDir } from '../../../src/core/run';
import { SCHEMA, type Task } from '../../../src/core/schema';
import { resolveTrainConfig, runConfigRecord } from '../../../src/train/config';
import { runEvalTarget } from '../../../src/train/evaluate';

const task = (id: string): Task =>
  ({
    schema: SCHEMA.task,
    id,
    source: 'file',
    instruction: 'fix it',
    language: 'python',
    testCommand: 'pytest',
    fail_to_pass: ['a::b'],
    pass_to_pass: [],
  }) as Task;

describe('train/evaluate: runEvalTarget (turnwise eval --run)', () => {
  let root: string;
  let run: RunDir;
  beforeEach(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-run-eval-'));
    const c = resolveTrainConfig({ workspace: root, maxTurns: 5, maxActionTokens: 100, seed: 3, concurrency: 6 });
    run = RunDir.create(root, 'r1', runConfigRecord(c, { runId: 'r1', startModel: '/m', createdAt: 'now' }));
    run.writeTasks([task('a'), task('b'), task('c')], { train: ['a', 'c'], heldout: ['b'] });
    for (const n of [0, 1, 2]) {
      fs.mkdirSync(run.checkpointDir(n), { recursive: true });
      fs.writeFileSync(path.join(run.checkpointDir(n), 'model.safetensors'), 'w');
    }
    run.commitIteration({ schema: SCHEMA.metrics, iteration: 0 } as never);
    run.commitIteration({ schema: SCHEMA.metrics, iteration: 1 } as never);
    // Iteration 2 wrote its checkpoint but no metrics line: it is not complete.
  });
  afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

  it("one split's tasks, the last complete checkpoint by default, the run's own settings", () => {
    // A run killed with -9 (status running, its process gone) reads as interrupted.
    const dead = spawnSync(process.execPath, ['-e', '0']).pid;
    run.writeStatus({ state: 'running', pid: dead, iterations: 2, lastCompleteIteration: 1 });
    assert.equal(runEvalTarget('r1', { runsRoot: root, split: 'heldout' }).state, 'interrupted');
    run.writeStatus({ state: 'running', pid: process.pid, iterations: 2, lastCompleteIteration: 1 });
    assert.equal(runEvalTarget('r1', { runsRoot: root, split: 'heldout' }).state, 'running');
    const t = runEvalTarget('r1', { runsRoot: root, split: 'heldout' });
    assert.deepEqual(
      t.tasks.map((x) => x.id),
      ['b'],
    );
    assert.equal(t.iteration, 1, 'iteration 2 has no metrics line');
    assert.equal(t.checkpoint, run.checkpointDir(1));
    assert.deepEqual([t.config.maxTurns, t.config.maxActionTokens, t.config.seed, t.config.concurrency], [5, 100, 3, 6]);
    const train = runEvalTarget(run.dir, { split: 'train', iteration: 0 });
    assert.deepEqual(
      train.tasks.map((x) => x.id),
      ['a', 'c'],
    );
    assert.equal(train.checkpoint, run.checkpointDir(0));
  });

  it('refuses an iteration the run has not completed, a checkpoint gone, an empty split', () => {
    assert.throws(
      () => runEvalTarget('r1', { runsRoot: root, split: 'heldout', iteration: 2 }),
      /no complete iteration 2 \(the last complete one is 1\)/,
    );
    fs.rmSync(run.checkpointDir(0), { recursive: true });
    assert.throws(() => runEvalTarget('r1', { runsRoot: root, split: 'heldout', iteration: 0 }), /checkpoint 0 is missing/);
    run.writeTasks([task('a')], { train: ['a'], heldout: [] });
    assert.throws(
      () => runEvalTarget('r1', { runsRoot: root, split: 'heldout' }),
      (e: Error & { hint?: string }) => /has no heldout task/.test(e.message) && /--split train/.test(e.hint ?? ''),
    );
  });

  it('the command refuses flags that clash with --run before any sandbox starts', async () => {
    const cli = async (argv: string[]) => {
      let out = '';
      let err = '';
      const code = await main(argv, { out: (x) => (out += x + '\n'), err: (x) => (err += x + '\n') });
      return { code, out, err };
    };
    const clash = await cli(['eval', '--run', run.dir, '--tasks', 'x.jsonl', '--max-turns', '3']);
    assert.equal(clash.code, 2);
    assert.match(clash.err, /--run evaluates with the run's own tasks, workspace and settings; it takes no --tasks, --max-turns/);
    const both = await cli(['eval', '--run', run.dir, '--iteration', '0', '--model', root]);
    assert.equal(both.code, 2);
    assert.match(both.err, /give --iteration N .* or --model DIR, not both/);
    const split = await cli(['eval', '--run', run.dir, '--split', 'test']);
    assert.equal(split.code, 2);
    assert.match(split.err, /--split must be heldout or train, got "test"/);
    const orphan = await cli(['eval', '--tasks', 'x.jsonl', '--iteration', '1']);
    assert.equal(orphan.code, 2);
    assert.match(orphan.err, /--iteration goes with --run RUN/);
    const missing = await cli(['eval', '--run', 'nope', '--runs', root]);
    assert.equal(missing.code, 1);
    assert.match(missing.err, /no run "nope"/);
  });
});
