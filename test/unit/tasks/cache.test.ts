import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Task } from '../../../src/core/schema';
import { FILE_TASK } from '../../support/taskFixture';
import { readCachedTasks, taskCacheDir, taskCacheName, writeCachedTasks, type TaskCacheKey } from '../../../src/tasks/cache';
import { readTaskFile } from '../../../src/tasks/taskfile';

const task: Task = FILE_TASK;

const key: TaskCacheKey = {
  source: 'mutation',
  snapshot: 'a'.repeat(64),
  runner: { kind: 'pytest', command: 'python3 -m pytest', reportPath: '/tmp/r.xml' },
  seed: 0,
  max: 32,
};

describe('tasks/cache', () => {
  let dir: string;
  let before: string | undefined;
  beforeEach(() => {
    before = process.env.TURNWISE_TASK_CACHE;
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-task-cache-'));
    process.env.TURNWISE_TASK_CACHE = path.join(dir, 'cache');
  });
  afterEach(() => {
    process.env.TURNWISE_TASK_CACHE = before;
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('every field of the key names another file; the same key the same file', () => {
    const variants: TaskCacheKey[] = [
      { ...key, source: 'failing-tests' },
      { ...key, snapshot: 'b'.repeat(64) },
      { ...key, runner: { ...key.runner, kind: 'unittest' } },
      { ...key, runner: { ...key.runner, command: 'pytest -x' } },
      { ...key, runner: { ...key.runner, reportPath: '/tmp/other.xml' } },
      { ...key, seed: 1 },
      { ...key, max: 64 },
      { ...key, max: undefined },
    ];
    const names = new Set([key, ...variants].map(taskCacheName));
    assert.equal(names.size, variants.length + 1);
    assert.equal(taskCacheName({ ...key, runner: { ...key.runner } }), taskCacheName(key));
  });

  it('what is written is read back as a task file, with what made it beside it; another key finds nothing', () => {
    assert.equal(readCachedTasks(key), undefined);
    const file = writeCachedTasks(key, [task, { ...task, id: 't2' }])!;
    assert.equal(path.dirname(file), path.join(dir, 'cache'));
    assert.deepEqual(
      readTaskFile(file).map((t) => t.id),
      ['t1', 't2'],
    );
    const hit = readCachedTasks(key)!;
    assert.deepEqual(hit.tasks, [task, { ...task, id: 't2' }]);
    assert.equal(hit.file, file);
    assert.ok(Math.abs(hit.madeAt.getTime() - Date.now()) < 60_000);
    const made = JSON.parse(fs.readFileSync(file.replace(/\.jsonl$/, '.key.json'), 'utf8'));
    assert.equal(made.snapshot, key.snapshot);
    assert.equal(readCachedTasks({ ...key, seed: 7 }), undefined);
  });

  it('a damaged file is reported, removed and not used; no task is kept for an empty list', () => {
    const file = writeCachedTasks(key, [task])!;
    fs.writeFileSync(file, JSON.stringify(task) + '\n{"id": "cut off');
    const said: string[] = [];
    assert.equal(
      readCachedTasks(key, (w) => said.push(w)),
      undefined,
    );
    assert.equal(said.length, 1);
    assert.match(said[0]!, /invalid line\(s\) \(line 2: .*making the tasks again/);
    assert.ok(!fs.existsSync(file));
    assert.equal(writeCachedTasks(key, []), undefined);
    assert.equal(readCachedTasks(key), undefined);
  });

  it('TURNWISE_TASK_CACHE=off turns it off; a folder that cannot be made is reported and the run goes on', () => {
    process.env.TURNWISE_TASK_CACHE = 'off';
    assert.equal(taskCacheDir(), undefined);
    assert.equal(writeCachedTasks(key, [task]), undefined);
    assert.equal(readCachedTasks(key), undefined);
    const blocker = path.join(dir, 'a-file');
    fs.writeFileSync(blocker, '');
    process.env.TURNWISE_TASK_CACHE = path.join(blocker, 'cache');
    const said: string[] = [];
    assert.equal(
      writeCachedTasks(key, [task], (w) => said.push(w)),
      undefined,
    );
    assert.match(said[0]!, /could not keep the tasks in .*a-file\/cache .*the next run makes them again/);
  });
});
