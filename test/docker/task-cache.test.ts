// Docker tier: a training run's tasks come from the task cache (tasks/cache.ts) when a run already
// made them from the same workspace content and settings, and are synthesized again (in real
// sandboxes) when the content changed or reuseTasks is off. Uses its own cache folder.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { RunEventBody } from '../../src/core/events';
import { RunDir } from '../../src/core/run';
import { StoppedError } from '../../src/core/stop';
import type { SandboxPool } from '../../src/sandbox';
import { connectRunPool, resolveTrainConfig, runConfigRecord, type TrainConfig } from '../../src/train/config';
import { runTasks } from '../../src/train/run-tasks';

const demo = path.join(__dirname, '..', '..', 'examples', 'demo-python');

describe('docker: a run reuses the tasks an earlier run made from the same workspace', function () {
  this.timeout(300_000);
  let dir: string;
  let pool: SandboxPool;
  let cacheBefore: string | undefined;
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-task-cache-'));
    cacheBefore = process.env.TURNWISE_TASK_CACHE;
    process.env.TURNWISE_TASK_CACHE = path.join(dir, 'cache');
    pool = await connectRunPool(`tw-task-cache-${process.pid}`, resolveTrainConfig({}));
  });
  after(async () => {
    process.env.TURNWISE_TASK_CACHE = cacheBefore;
    await pool?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  let n = 0;
  /** runTasks of a new run directory; `stopAtSynthesis` stops a synthesis at its first progress report. */
  async function tasksOf(c: TrainConfig, stopAtSynthesis = false) {
    const run = RunDir.create(path.join(dir, 'runs'), `run-${++n}`, runConfigRecord(c, {}));
    const events: RunEventBody[] = [];
    const ac = new AbortController();
    const emit = (e: RunEventBody) => {
      events.push(e);
      if (stopAtSynthesis && synthesizing(e)) ac.abort();
    };
    const logs: string[] = [];
    try {
      const r = await runTasks(run, c, { pool, emit, log: (m) => logs.push(m), check: () => undefined, signal: ac.signal });
      return { r, run, events, logs, stopped: false };
    } catch (e) {
      if (!(e instanceof StoppedError)) throw e;
      return { run, events, logs, stopped: true };
    }
  }
  /** A progress report of synthesis (snapshot, baseline or validation), which tasks read back never give. */
  const synthesizing = (e: RunEventBody) => e.type === 'phase' && e.phase === 'tasks' && e.total !== undefined;
  const synthesized = (events: RunEventBody[]) => events.some(synthesizing);

  it('the same content and settings read the tasks back without a sandbox; changed content or reuseTasks false synthesize again', async () => {
    const ws = path.join(dir, 'ws');
    fs.cpSync(demo, ws, { recursive: true });
    const c = resolveTrainConfig({ workspace: ws, maxTasks: 4, heldoutFraction: 0.25 });

    const first = await tasksOf(c);
    assert.ok(synthesized(first.events), 'the first run synthesized its tasks');
    assert.ok(!first.logs.some((m) => /reusing/.test(m)), first.logs.join('\n'));
    const kept = fs.readdirSync(path.join(dir, 'cache')).sort();
    assert.equal(kept.length, 2, kept.join(', '));
    assert.match(kept[0]!, /^mutation-[0-9a-f]{32}\.jsonl$/);
    assert.match(kept[1]!, /^mutation-[0-9a-f]{32}\.key\.json$/);

    // A copy of the same files elsewhere: the same content, so the same tasks, split and all.
    const copy = path.join(dir, 'ws-copy');
    fs.cpSync(ws, copy, { recursive: true });
    const second = await tasksOf({ ...c, workspace: copy });
    assert.ok(!synthesized(second.events), 'nothing was synthesized');
    assert.match(
      second.logs.join('\n'),
      /reusing 4 mutation task\(s\) made .* UTC from the same workspace content and task settings \(.*mutation-[0-9a-f]{32}\.jsonl\)/,
    );
    assert.deepEqual(
      second.r!.train.map((t) => t.id),
      first.r!.train.map((t) => t.id),
    );
    assert.deepEqual(
      second.r!.heldout.map((t) => t.id),
      first.r!.heldout.map((t) => t.id),
    );
    // The same tasks, each recording the folder this run read (the copy), not the first run's.
    const secondTasks = second.run.readTasks();
    assert.deepEqual(
      secondTasks.map((t) => ({ ...t, origin: { ...t.origin!, workspace: ws } })),
      first.run.readTasks(),
    );
    assert.ok(secondTasks.every((t) => t.origin?.workspace === copy));

    // Another seed is another key.
    const seeded = await tasksOf({ ...c, taskSeed: 5 }, true);
    assert.ok(seeded.stopped && synthesized(seeded.events), 'another taskSeed synthesizes');

    // One changed byte of the workspace: its snapshot hash changes, and the tasks are made again.
    const src = path.join(copy, 'inventory', 'stock.py');
    fs.appendFileSync(src, '\n# changed\n');
    const changed = await tasksOf({ ...c, workspace: copy }, true);
    assert.ok(changed.stopped && synthesized(changed.events), 'changed content synthesizes');

    const fresh = await tasksOf({ ...c, reuseTasks: false }, true);
    assert.ok(fresh.stopped && synthesized(fresh.events), 'reuseTasks false synthesizes');
    assert.equal(fs.readdirSync(path.join(dir, 'cache')).length, 2, 'stopped syntheses keep nothing');
  });
});
