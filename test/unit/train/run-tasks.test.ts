// runTasks: a run's split read back from its directory is checked as a record (no train task
// there is damage, named with the file), never replaced by a new split.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { TurnwiseError } from '../../../src/core/errors';
import { RunDir } from '../../../src/core/run';
import { SCHEMA, type Task } from '../../../src/core/schema';
import { resolveTrainConfig } from '../../../src/train/config';
import { runTasks } from '../../../src/train/run-tasks';

const task = (id: string): Task =>
  ({
    schema: SCHEMA.task,
    id,
    source: 'file',
    instruction: 'fix it',
    language: 'python',
    testCommand: 'pytest',
    fail_to_pass: ['t.py::a'],
    pass_to_pass: [],
  }) as Task;

describe('train/run-tasks: runTasks', () => {
  let root: string;
  beforeEach(() => (root = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-run-tasks-'))));
  afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

  it('reads the split back; one without a train task is a damaged splits.json, and nothing is rewritten', async () => {
    const ws = path.join(root, 'ws');
    fs.mkdirSync(ws);
    const c = resolveTrainConfig({ workspace: ws, taskSource: 'file', tasksFile: path.join(root, 'unused.jsonl') });
    const run = RunDir.create(path.join(root, 'runs'), 'r1', { schema: SCHEMA.runConfig });
    const o = { pool: undefined as never, emit: () => undefined, log: () => undefined, check: () => undefined };
    run.writeTasks([task('a'), task('b')], { train: ['b'], heldout: ['a'] });
    const ok = await runTasks(run, c, o);
    assert.deepEqual([ok.train.map((t) => t.id), ok.heldout.map((t) => t.id)], [['b'], ['a']]);

    run.writeTasks([task('a'), task('b')], { train: [], heldout: ['a', 'b'] });
    const before = fs.readFileSync(run.file('splits.json'), 'utf8');
    await assert.rejects(
      runTasks(run, c, o),
      (e: unknown) => e instanceof TurnwiseError && e.code === 'invalid-file' && /splits\.json holds no train task/.test(e.message),
    );
    assert.equal(fs.readFileSync(run.file('splits.json'), 'utf8'), before);
  });
});
