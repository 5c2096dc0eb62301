// Docker tier: the demo run, shortened (`turnwise demo --quick`), through the built CLI
// with the embedded policy from dist/models: the events, the table, the run directory, and no
// container left behind. The full-length demo is the same code path with more iterations.
import * as assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import Docker from 'dockerode';
import { parseEventLine, type RunEvent } from '../../src/core/events';
import { RunDir } from '../../src/core/run';
import { loadCheckpoint } from '../../src/policy/files/checkpoint';

const root = path.join(__dirname, '..', '..');
const cli = path.join(root, 'dist', 'cli.js');

function runCli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [cli, ...args], { cwd: root, env: { ...process.env } });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => (stdout += d));
    p.stderr.on('data', (d) => (stderr += d));
    p.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('docker: the demo run, shortened (demo --quick)', function () {
  this.timeout(900_000);
  const runs = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-demo-'));
  after(() => fs.rmSync(runs, { recursive: true, force: true }));

  it('runs from the embedded policy: events in order, iteration 0 and 1 in metrics, checkpoints load, nothing left running', async () => {
    assert.ok(
      fs.existsSync(path.join(root, 'dist', 'models', 'turnwise-tiny', 'model.safetensors')),
      'the build carries the embedded policy',
    );
    const r = await runCli(['demo', '--quick', '--json', '--runs', runs]);
    assert.equal(r.code, 0, r.stderr.slice(-2000));
    const events = r.stdout
      .split('\n')
      .map(parseEventLine)
      .filter((e): e is RunEvent => !!e);
    const types = events.map((e) => e.type);
    // Both events must be there: indexOf of a missing one is -1, which any order check would pass.
    const startedAt = types.indexOf('run-started');
    const firstIteration = types.indexOf('iteration-finished');
    assert.ok(startedAt >= 0, `no run-started event among ${types.join(', ')}`);
    assert.ok(
      firstIteration > startedAt,
      `run-started (event ${startedAt}) comes before the first iteration-finished (event ${firstIteration})`,
    );
    assert.deepEqual(
      events.filter((e) => e.type === 'iteration-finished').map((e) => (e as { iteration: number }).iteration),
      [0, 1],
    );
    assert.equal(types[types.length - 1], 'run-finished');
    const started = events.find((e) => e.type === 'run-started') as Extract<RunEvent, { type: 'run-started' }>;
    assert.ok(started.heldoutTasks >= 1 && started.trainTasks >= 1);
    const run = RunDir.open(started.runDir);
    const metrics = run.readMetrics();
    assert.equal(typeof metrics[0]['heldout/resolved'], 'number', 'iteration 0 evaluates the starting policy on the held-out tasks');
    assert.equal(typeof metrics[1]['reward/mean'], 'number');
    assert.equal(typeof metrics[1]['heldout/resolved'], 'number');
    for (const k of ['time/generation_s', 'time/sandbox_s', 'time/reward_s', 'time/advantages_s', 'time/update_s'])
      assert.equal(typeof metrics[1][k], 'number', k);
    for (const n of [0, 1]) assert.ok(loadCheckpoint(run.checkpointDir(n)).weights.tensors.size > 0);
    const split = run.readSplits();
    assert.equal(split.train.filter((id) => split.heldout.includes(id)).length, 0, 'train and held-out are disjoint');
    const evalTrajs = run.readTrajectories(1, 'heldout');
    assert.deepEqual(new Set(evalTrajs.map((t) => t.taskId)), new Set(split.heldout), 'every held-out task was evaluated');
    assert.equal(run.readStatus()?.state, 'finished');
    const left = await new Docker().listContainers({ all: true, filters: { label: [`turnwise.run=${started.runId}`] } });
    assert.equal(left.length, 0, 'no container of the run is left');
  });
});
