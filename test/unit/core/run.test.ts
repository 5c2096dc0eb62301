// The run directory's commit rule: an iteration is complete once both its metrics line and its
// checkpoint are on disk; what an interrupted iteration left is discarded before a resume.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { makeEvent, parseEventLine } from '../../../src/core/events';
import { newRunId, RunDir } from '../../../src/core/run';
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

  it('create refuses an existing run; open finds it by id or path and names what is missing', () => {
    assert.throws(() => RunDir.create(root, 'r1', {}), /already exists[\s\S]*/);
    assert.equal(RunDir.open('r1', root).dir, run.dir);
    assert.equal(RunDir.open(run.dir).runId, 'r1');
    assert.throws(() => RunDir.open('nope', root), (e: Error & { hint?: string }) => /no run "nope"/.test(e.message) && /run id/.test(e.hint ?? ''));
    fs.mkdirSync(path.join(root, 'empty'));
    assert.throws(() => RunDir.open('empty', root), /not a Turnwise run directory/);
  });

  it('lastCompleteIteration needs the metrics line AND the checkpoint', () => {
    assert.equal(run.lastCompleteIteration(), -1);
    ckpt(0);
    assert.equal(run.lastCompleteIteration(), -1, 'a checkpoint without its metrics line');
    run.appendMetrics(metric(0));
    assert.equal(run.lastCompleteIteration(), 0);
    run.appendMetrics(metric(1));
    assert.equal(run.lastCompleteIteration(), 0, 'a metrics line without its checkpoint');
    ckpt(1);
    assert.equal(run.lastCompleteIteration(), 1);
    ckpt(2);
    assert.equal(run.lastCompleteIteration(), 1);
  });

  it('appendMetrics replaces the row of the same iteration (and drops any later)', () => {
    run.appendMetrics(metric(0, { a: 1 }));
    run.appendMetrics(metric(1, { a: 2 }));
    run.appendMetrics(metric(1, { a: 3 }));
    assert.deepEqual(run.readMetrics().map((r) => [r.iteration, r.a]), [[0, 1], [1, 3]]);
    run.appendMetrics(metric(2));
    run.appendMetrics(metric(1, { a: 4 }));
    assert.deepEqual(run.readMetrics().map((r) => [r.iteration, r.a]), [[0, 1], [1, 4]]);
    const lines = fs.readFileSync(run.file('metrics.jsonl'), 'utf8').trim().split('\n');
    assert.equal(lines.length, 2);
  });

  it('readMetrics skips a torn last line (a crash mid-write of a non-atomic writer)', () => {
    run.appendMetrics(metric(0));
    fs.appendFileSync(run.file('metrics.jsonl'), '{"schema":"turnwise/metrics@1","itera');
    assert.deepEqual(run.readMetrics().map((r) => r.iteration), [0]);
  });

  it('discardAfter removes later iterations, checkpoints, temp checkpoint folders and metrics lines', () => {
    for (const n of [0, 1, 2]) {
      ckpt(n);
      run.writeTrajectories(n, 'train', []);
    }
    run.appendMetrics(metric(0));
    run.appendMetrics(metric(1));
    run.appendMetrics(metric(2));
    fs.mkdirSync(run.file('checkpoints', '3.tmp-123-abc'), { recursive: true });
    fs.mkdirSync(run.file('checkpoints', '1.tmp-9'), { recursive: true });
    fs.mkdirSync(run.iterationDir(3), { recursive: true });
    fs.writeFileSync(run.file('checkpoints', 'notes.txt'), 'the user\'s');
    const removed = run.discardAfter(1);
    assert.deepEqual(removed, [2, 3]);
    assert.deepEqual(fs.readdirSync(run.file('checkpoints')).sort(), ['0', '1', '1.tmp-9', 'notes.txt']);
    assert.deepEqual(fs.readdirSync(run.file('iterations')).sort(), ['0', '1']);
    assert.deepEqual(run.readMetrics().map((r) => r.iteration), [0, 1]);
    assert.equal(run.lastCompleteIteration(), 1);
    assert.deepEqual(run.discardAfter(1), [], 'idempotent');
    assert.deepEqual(run.discardAfter(-1), [0, 1]);
    assert.deepEqual(run.readMetrics(), []);
  });

  it('status round trip', () => {
    assert.equal(run.readStatus(), undefined);
    run.writeStatus({ state: 'stopped', iterations: 3, lastCompleteIteration: 1 });
    const s = run.readStatus()!;
    assert.equal(s.state, 'stopped');
    assert.equal(s.runId, 'r1');
    assert.equal(s.schema, SCHEMA.runStatus);
  });

  it('list: newest first by the id\'s timestamp', () => {
    const a = newRunId({ name: 'ws', estimator: 'grpo', seed: 0 }, new Date('2024-01-01T00:00:00Z'));
    const b = newRunId({ name: 'my ws!', estimator: 'grpo', seed: 0 }, new Date('2025-01-01T00:00:00Z'));
    assert.equal(b, 'my-ws__grpo__0__20250101-000000');
    RunDir.create(root, a, {});
    RunDir.create(root, b, {});
    assert.deepEqual(RunDir.list(root).filter((x) => x !== 'r1'), [b, a]);
  });
});

describe('core/events: parseEventLine', () => {
  it('round trip of every event made with makeEvent', () => {
    const e = makeEvent('r', { type: 'iteration-finished', iteration: 1, metrics: metric(1) });
    assert.deepEqual(parseEventLine(JSON.stringify(e)), e);
    assert.deepEqual(parseEventLine(`  ${JSON.stringify(makeEvent('r', { type: 'run-finished', iterations: 1, runDir: '/x' }))}  `)?.type, 'run-finished');
  });
  it('anything else is undefined, never a throw', () => {
    const bad = ['', 'hello', '{', '{"schema":"turnwise/event@1","type":"nope","runId":"r"}', '{"schema":"other","type":"log","runId":"r"}', '{"schema":"turnwise/event@1","type":"log"}', 'null', '[1]', '{"schema":"turnwise/event@1","type":"log","runId":3}'];
    for (const l of bad) assert.equal(parseEventLine(l), undefined, l);
  });
});
