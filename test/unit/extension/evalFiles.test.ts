// Evaluate Policy's results files and endpoint checks, and the list the reward panel's
// comparison offers (read from each file's header line).
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { SCHEMA, type Task, type Trajectory } from '../../../src/core/schema';
import { checkpointModel, endpointModel, evalResultsHeader, writeEvalResults } from '../../../src/eval/results';
import {
  comparisonView,
  endpointUrlProblem,
  evalOutFile,
  EVALS_DIR,
  keyEnvProblem,
  listEvalFiles,
} from '../../../src/extension/model/evalFiles';
import { evalReport } from '../../../src/eval/report';

const task = {
  schema: SCHEMA.task,
  id: 'a',
  source: 'file',
  instruction: 'fix',
  language: 'python',
  testCommand: 'pytest',
  fail_to_pass: ['t'],
  pass_to_pass: [],
} as unknown as Task;
const ep = (k: number | null, resolved: boolean): Trajectory =>
  ({
    schema: SCHEMA.trajectory,
    taskId: 'a',
    groupId: 'g',
    trajId: k === null ? 'eval-0-0' : `evals-0-0-${k}`,
    checkpoint: 'c',
    seed: k ?? -1,
    turns: [{ index: 0, action: 'submit', observation: '', exitCode: null, durationMs: 0 }],
    reward: {
      passRate: resolved ? 1 : 0,
      resolved,
      turns: 1,
      maxTurns: 3,
      formatError: false,
      efficiencyPenalty: 0,
      formatPenalty: 0,
      reward: 0,
    },
  }) as Trajectory;

describe('extension/model/evalFiles', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-evalfiles-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('an endpoint URL is http(s) with no user, password or query (a key goes in a variable); a key variable is a name that is set, never echoed', () => {
    assert.equal(endpointUrlProblem('http://127.0.0.1:8000/v1'), undefined);
    assert.equal(endpointUrlProblem('https://api.example.com/v1'), undefined);
    assert.match(endpointUrlProblem('127.0.0.1:8000')!, /http|URL/);
    assert.match(endpointUrlProblem('http://me:sk-123@host/v1')!, /no user or password in the URL/);
    assert.match(endpointUrlProblem('http://host/v1?key=sk-123')!, /no query in the URL/);
    assert.equal(keyEnvProblem('', {}), undefined, 'no key');
    assert.equal(keyEnvProblem('MY_KEY', { MY_KEY: 'x' }), undefined);
    const pasted = keyEnvProblem('sk-proj-abc123', {})!;
    assert.match(pasted, /the name of an environment variable .* not the key itself/);
    assert.doesNotMatch(pasted, /sk-proj/);
    assert.match(keyEnvProblem('UNSET_VAR', {})!, /no variable of this name is set/);
    assert.doesNotMatch(keyEnvProblem('UNSET_VAR', {})!, /UNSET_VAR/);
  });

  it('results go to .turnwise/evals/<UTC time>-<label>.jsonl; the list reads headers (newest first), skips what is not results', () => {
    const out = evalOutFile(dir, 'qwen@gpu.example:8000', new Date('2025-03-04T05:06:07.890Z'));
    assert.equal(out, path.join(dir, EVALS_DIR, '20250304-050607Z-qwen-gpu.example-8000.jsonl'));
    const older = path.join(dir, EVALS_DIR, 'a.jsonl');
    const trajs = [ep(null, true), ep(0, true), ep(1, false)];
    const hdr = (model: ReturnType<typeof checkpointModel>, now: Date) =>
      evalResultsHeader({
        model,
        tasks: [task],
        tasksSource: 't',
        seed: 3,
        samples: 2,
        maxTurns: 3,
        sampling: { temperature: 1, topP: 1 },
        trajectories: trajs,
        complete: true,
        now,
      });
    writeEvalResults(older, hdr(checkpointModel('/r/run1/checkpoints/2'), new Date('2025-01-01T00:00:00Z')), trajs);
    writeEvalResults(out, hdr(endpointModel('http://gpu.example:8000', 'qwen'), new Date('2025-03-04T05:06:07Z')), trajs);
    fs.writeFileSync(path.join(dir, EVALS_DIR, 'plain.jsonl'), JSON.stringify(trajs[0]) + '\n');
    fs.writeFileSync(path.join(dir, EVALS_DIR, 'junk.jsonl'), 'not json\n');
    const l = listEvalFiles([dir]);
    assert.deepEqual(
      l.map((e) => [e.name, e.label, e.kind, e.tasks, e.samples, e.seed]),
      [
        [path.relative(dir, out), 'qwen @ gpu.example:8000', 'endpoint', 1, 2, 3],
        [path.join(EVALS_DIR, 'a.jsonl'), 'run1 · checkpoint 2', 'checkpoint', 1, 2, 3],
        [path.join(EVALS_DIR, 'plain.jsonl'), 'plain', 'episodes', 0, 0, null],
      ],
    );
    // The panel's comparison: the report without per-episode rows.
    const view = comparisonView(evalReport([older, out]));
    assert.equal(view.models.length, 2);
    assert.deepEqual(view.models[0].pass_at_k_t, { '1': { '1': 0.5, '2': 0.5, '3': 0.5 }, '2': { '1': 1, '2': 1, '3': 1 } });
    assert.equal((view as unknown as { per_episode?: unknown }).per_episode, undefined);
  });
});
