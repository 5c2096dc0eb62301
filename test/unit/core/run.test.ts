// The run directory's commit rule: an iteration is complete once both its metrics line and its
// checkpoint are on disk; what an interrupted iteration left is discarded before a resume.
import * as assert from 'node:assert/strict';
import { TurnwiseError } from '../../../src/core/errors';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { makeEvent, parseEventLine } from '../../../src/core/events';
import { newRunId, RUN_LOCK_SCHEMA, RunDir, runDisplayState, trajectoriesFile } from '../../../src/core/run';
import { SCHEMA } from '../../../src/core/schema';

const metric = (iteration: number, extra: Record<string, number> = {}) => ({ schema: SCHEMA.metrics, iteration, ...extra }) as never;

describe('core/run: RunDir', () => {
  let root: string;
  let run: RunDir;
  beforeEach(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-rundir-'));
    run = RunDir.create(root, 'r1', { schema: SCHEMA.runConfig, x: 1 });
  });
  afterEach(() => fs.rmSync(root, { recursive: true, force: true }));
  const ckpt = (n: number) => {
    fs.mkdirSync(run.checkpointDir(n), { recursive: true });
    fs.writeFileSync(path.join(run.checkpointDir(n), 'model.safetensors'), 'w');
  };

  it('held-out episodes go to heldout.jsonl; a run written with eval.jsonl reads back the same', () => {
    const ep = (id: string) => ({ schema: SCHEMA.trajectory, trajId: id, taskId: 't', turns: [] }) as never;
    const f = run.writeTrajectories(1, 'heldout', [ep('eval-1-t')]);
    assert.equal(path.basename(f), 'heldout.jsonl');
    assert.deepEqual(
      run.readTrajectories(1, 'heldout').map((t) => t.trajId),
      ['eval-1-t'],
    );
    // An older run: only eval.jsonl in the iteration folder.
    fs.mkdirSync(run.iterationDir(2), { recursive: true });
    fs.writeFileSync(path.join(run.iterationDir(2), 'eval.jsonl'), JSON.stringify(ep('eval-2-t')) + '\n');
    assert.equal(trajectoriesFile(run.iterationDir(2), 'heldout'), path.join(run.iterationDir(2), 'eval.jsonl'));
    assert.deepEqual(
      run.readTrajectories(2, 'heldout').map((t) => t.trajId),
      ['eval-2-t'],
    );
    // Where both are there, heldout.jsonl is the one; train episodes never come from either.
    fs.writeFileSync(path.join(run.iterationDir(2), 'heldout.jsonl'), JSON.stringify(ep('eval-2-new')) + '\n');
    assert.deepEqual(
      run.readTrajectories(2, 'heldout').map((t) => t.trajId),
      ['eval-2-new'],
    );
    assert.deepEqual(run.readTrajectories(2, 'train'), []);
  });

  it('create refuses an existing run; open finds it by id or path and names what is missing', () => {
    assert.throws(() => RunDir.create(root, 'r1', {}), /already exists[\s\S]*/);
    assert.equal(RunDir.open('r1', root).dir, run.dir);
    assert.equal(RunDir.open(run.dir).runId, 'r1');
    assert.throws(
      () => RunDir.open('nope', root),
      (e: Error & { hint?: string }) => /no run "nope"/.test(e.message) && /run id/.test(e.hint ?? ''),
    );
    fs.mkdirSync(path.join(root, 'empty'));
    assert.throws(() => RunDir.open('empty', root), /not a Turnwise run directory/);
  });

  it('an iteration is complete once its own marker is written (after its checkpoint); the metrics log does not decide', () => {
    assert.equal(run.lastCompleteIteration(), -1);
    assert.throws(() => run.commitIteration(metric(0)), /before its checkpoint/, 'no commit without a checkpoint');
    ckpt(0);
    assert.equal(run.lastCompleteIteration(), -1, 'a checkpoint without its marker');
    run.commitIteration(metric(0));
    assert.equal(run.lastCompleteIteration(), 0);
    assert.ok(fs.existsSync(path.join(run.iterationDir(0), 'iteration.json')));
    ckpt(1);
    run.commitIteration(metric(1, { a: 2 }));
    ckpt(2);
    assert.equal(run.lastCompleteIteration(), 1);
    // The log cut mid-line: both iterations are still complete, and the log is marked for rebuilding.
    fs.writeFileSync(run.file('metrics.jsonl'), fs.readFileSync(run.file('metrics.jsonl'), 'utf8').slice(0, 60));
    const inv = run.inventory();
    assert.equal(inv.lastComplete, 1);
    assert.deepEqual(inv.leftovers, [2]);
    assert.equal(inv.metricsLogStale, true);
    assert.match(inv.warnings.map((w) => `${w.file}: ${w.problem}`).join('\n'), /metrics\.jsonl: line 2 is not valid JSON/);
    run.repairLog(inv);
    assert.deepEqual(
      run.readMetrics().map((r) => [r.iteration, r.a]),
      [
        [0, undefined],
        [1, 2],
      ],
    );
  });

  it('a run written before markers: its metrics lines and checkpoints commit it, and a repair writes the markers', () => {
    ckpt(0);
    ckpt(1);
    fs.writeFileSync(run.file('metrics.jsonl'), [metric(0), metric(1), metric(2)].map((r) => JSON.stringify(r)).join('\n') + '\n');
    const inv = run.inventory();
    assert.deepEqual([inv.committed, inv.lastComplete, inv.markersToWrite], [[0, 1], 1, [0, 1]]);
    run.repairLog(inv);
    assert.ok(fs.existsSync(path.join(run.iterationDir(1), 'iteration.json')));
    assert.deepEqual(
      run.readMetrics().map((r) => r.iteration),
      [0, 1],
      'the line of iteration 2 (no checkpoint) leaves the log',
    );
  });

  it('a complete iteration that lost its checkpoint, or a gap before a complete one, is damage (named), never a leftover', () => {
    for (const n of [0, 1, 2]) {
      ckpt(n);
      run.commitIteration(metric(n));
    }
    fs.rmSync(run.checkpointDir(2), { recursive: true });
    let inv = run.inventory();
    assert.equal(inv.lastComplete, 2);
    assert.deepEqual(inv.leftovers, []);
    assert.match(inv.damage[0].file, /checkpoints\/2\/model\.safetensors$/);
    ckpt(2);
    fs.rmSync(path.join(run.iterationDir(1), 'iteration.json'));
    fs.writeFileSync(run.file('metrics.jsonl'), '');
    inv = run.inventory();
    assert.equal(inv.lastComplete, 0);
    assert.match(inv.damage.map((d) => d.problem).join('\n'), /iteration 2 is complete but iteration 1 is not/);
    assert.ok(!inv.leftovers.includes(2), 'iteration 2 is committed: not a leftover');
    assert.deepEqual(run.discardAfter(0), [1], 'only the unmarked iteration 1 goes');
    assert.ok(
      fs.existsSync(run.checkpointDir(2)) && fs.existsSync(path.join(run.iterationDir(2), 'iteration.json')),
      'a marked iteration is never removed',
    );
  });

  it('a marker of another run is damage naming it', () => {
    ckpt(0);
    run.commitIteration(metric(0));
    const other = RunDir.create(root, 'r2', {});
    fs.mkdirSync(other.checkpointDir(0), { recursive: true });
    fs.writeFileSync(path.join(other.checkpointDir(0), 'model.safetensors'), 'w');
    fs.mkdirSync(other.iterationDir(0), { recursive: true });
    fs.copyFileSync(path.join(run.iterationDir(0), 'iteration.json'), path.join(other.iterationDir(0), 'iteration.json'));
    const inv = other.inventory();
    assert.equal(inv.lastComplete, -1);
    assert.match(inv.damage[0].problem, /marker of run r1/);
  });

  it('discardAfter removes later uncommitted iterations, checkpoints and temp checkpoint folders', () => {
    for (const n of [0, 1]) {
      ckpt(n);
      run.writeTrajectories(n, 'train', []);
      run.commitIteration(metric(n));
    }
    ckpt(2);
    run.writeTrajectories(2, 'train', []);
    fs.mkdirSync(run.file('checkpoints', '3.tmp-123-abc'), { recursive: true });
    fs.mkdirSync(run.file('checkpoints', '3.turnwise-tmp-123-4'), { recursive: true });
    fs.mkdirSync(run.file('checkpoints', '1.tmp-9'), { recursive: true });
    fs.mkdirSync(run.iterationDir(3), { recursive: true });
    fs.writeFileSync(run.file('checkpoints', 'notes.txt'), "the user's");
    const removed = run.discardAfter(1);
    assert.deepEqual(removed, [2, 3]);
    assert.deepEqual(fs.readdirSync(run.file('checkpoints')).sort(), ['0', '1', '1.tmp-9', 'notes.txt']);
    assert.deepEqual(fs.readdirSync(run.file('iterations')).sort(), ['0', '1']);
    assert.deepEqual(
      run.readMetrics().map((r) => r.iteration),
      [0, 1],
    );
    assert.equal(run.lastCompleteIteration(), 1);
    assert.deepEqual(run.discardAfter(1), [], 'idempotent');
    assert.deepEqual(run.discardAfter(-1), [], 'committed iterations are never discarded');
    assert.equal(run.lastCompleteIteration(), 1);
  });

  it('readSplits checks the lists and that every id is a task of the run', () => {
    run.writeTasks([{ id: 'a' } as never, { id: 'b' } as never], { train: ['a'], heldout: ['b'] });
    assert.deepEqual(run.readSplits(run.readTasks()).train, ['a']);
    fs.writeFileSync(run.file('splits.json'), JSON.stringify({ train: 'abc', heldout: [] }));
    assert.throws(
      () => run.readSplits(),
      (e: Error & { hint?: string }) =>
        /splits\.json: "train" must be a list of task ids, got "abc"/.test(e.message) && /restore/.test(e.hint ?? ''),
    );
    fs.writeFileSync(run.file('splits.json'), JSON.stringify({ train: ['x'], heldout: [] }));
    assert.throws(() => run.readSplits(run.readTasks()), /names 1 task id\(s\) that .*tasks\.jsonl does not hold \(first: "x"\)/);
  });

  it('lock: refused while its process runs, taken over when it is gone or its pid now names a later process', () => {
    const sleeper = spawn('sleep', ['60'], { stdio: 'ignore' });
    try {
      const stat = fs.readFileSync(`/proc/${sleeper.pid}/stat`, 'utf8');
      const start = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
      const write = (processStart: number) =>
        fs.writeFileSync(
          run.file('lock.json'),
          JSON.stringify({ schema: RUN_LOCK_SCHEMA, pid: sleeper.pid, host: os.hostname(), startedAt: 'then', token: 't', processStart }),
        );
      write(start);
      assert.throws(() => run.lock(), new RegExp(`r1 is in use by process ${sleeper.pid} `));
      // The same pid, another start time: the lock's own process is gone (its pid was reused).
      write(start + 1);
      const l = run.lock();
      assert.equal(l.tookOverFrom?.pid, sleeper.pid);
      assert.equal(JSON.parse(fs.readFileSync(run.file('lock.json'), 'utf8')).pid, process.pid);
      assert.throws(() => run.lock(), new RegExp(`in use by process ${process.pid} `), 'a second lock in the same process is refused too');
      l.release();
      assert.ok(!fs.existsSync(run.file('lock.json')));
      fs.writeFileSync(run.file('lock.json'), '{"pid":');
      assert.throws(
        () => run.lock(),
        (e: Error & { hint?: string }) => /lock\.json cannot be read/.test(e.message) && /delete .*lock\.json/.test(e.hint ?? ''),
      );
    } finally {
      sleeper.kill('SIGKILL');
    }
  });

  it('status round trip', () => {
    assert.equal(run.readStatus(), undefined);
    run.writeStatus({ state: 'stopped', iterations: 3, lastCompleteIteration: 1 });
    const s = run.readStatus()!;
    assert.equal(s.state, 'stopped');
    assert.equal(s.runId, 'r1');
    assert.equal(s.schema, SCHEMA.runStatus);
    assert.equal(runDisplayState(s), 'stopped');
    run.writeStatus({ state: 'running', pid: process.pid, iterations: 3, lastCompleteIteration: 1 });
    assert.equal(runDisplayState(run.readStatus()), 'running');
    assert.equal(run.readStatus()!.host, os.hostname());
    fs.writeFileSync(run.file('status.json'), '{"state":');
    assert.equal(run.readStatus(), undefined, 'a damaged status.json reads as none');
  });

  it('two runs of one name, estimator and seed started in the same second get folders of their own', () => {
    const base = newRunId({ name: 'ws', estimator: 'grpo', seed: 0 }, new Date('2026-01-01T00:00:00Z'));
    const a = RunDir.createUnique(root, base, (id) => ({ runId: id }));
    const b = RunDir.createUnique(root, base, (id) => ({ runId: id }));
    const c = RunDir.createUnique(root, base, (id) => ({ runId: id }));
    assert.deepEqual([a.runId, b.runId, c.runId], [base, `${base}-2`, `${base}-3`]);
    assert.deepEqual(b.readConfig(), { runId: `${base}-2` }, 'the config names the folder it is in');
    assert.deepEqual(
      RunDir.list(root).filter((x) => x.startsWith('ws__')),
      [`${base}-3`, `${base}-2`, base],
    );
  });

  it('an id whose run is going is refused as running, with its pid, never with advice to resume it', () => {
    const running = RunDir.create(root, 'busy', {});
    const lock = running.lock();
    try {
      assert.throws(
        () => RunDir.create(root, 'busy', {}),
        (e: TurnwiseError) => {
          assert.match(e.message, new RegExp(`already exists, and process ${process.pid} is running in it`));
          assert.doesNotMatch(e.hint ?? '', /--resume/);
          return true;
        },
      );
    } finally {
      lock.release();
    }
    assert.throws(
      () => RunDir.create(root, 'busy', {}),
      (e: TurnwiseError) => /already exists$/.test(e.message) && /--resume/.test(e.hint ?? ''),
    );
  });

  it("list: newest first by the id's timestamp", () => {
    const a = newRunId({ name: 'ws', estimator: 'grpo', seed: 0 }, new Date('2024-01-01T00:00:00Z'));
    const b = newRunId({ name: 'my ws!', estimator: 'grpo', seed: 0 }, new Date('2025-01-01T00:00:00Z'));
    assert.equal(b, 'my-ws__grpo__0__20250101-000000');
    RunDir.create(root, a, {});
    RunDir.create(root, b, {});
    assert.deepEqual(
      RunDir.list(root).filter((x) => x !== 'r1'),
      [b, a],
    );
  });
});

describe('core/events: parseEventLine', () => {
  it('round trip of every event made with makeEvent', () => {
    const e = makeEvent('r', { type: 'iteration-finished', iteration: 1, metrics: metric(1) });
    assert.deepEqual(parseEventLine(JSON.stringify(e)), e);
    assert.deepEqual(
      parseEventLine(`  ${JSON.stringify(makeEvent('r', { type: 'run-finished', iterations: 1, runDir: '/x' }))}  `)?.type,
      'run-finished',
    );
  });
  it('anything else is undefined, never a throw', () => {
    const bad = [
      '',
      'hello',
      '{',
      '{"schema":"turnwise/event@1","type":"nope","runId":"r"}',
      '{"schema":"other","type":"log","runId":"r"}',
      '{"schema":"turnwise/event@1","type":"log"}',
      'null',
      '[1]',
      '{"schema":"turnwise/event@1","type":"log","runId":3}',
    ];
    for (const l of bad) assert.equal(parseEventLine(l), undefined, l);
  });
});
