// The CLI as users install it: `npm pack` of the built package, `npm install -g` of the tarball
// into a temporary prefix (dependencies from the npm registry or the local cache), then
// `turnwise doctor --json` and `turnwise demo --quick` run from outside the checkout, with the
// embedded model, the grammars, the sandbox images' sources and the demo workspace coming from
// the installed package. The demo run is the docker tier's check of the demo itself too: events
// in order, metrics, checkpoints that load, every held-out task evaluated, no container left.
// Needs `npm run build` first (the package carries dist/).
import * as assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import Docker from 'dockerode';
import { parseEventLine, type RunEvent } from '../../src/core/events';
import { RunDir } from '../../src/core/run';
import { loadCheckpoint } from '../../src/policy/files/checkpoint';
import type { DoctorReport } from '../../src/train/doctor';

const root = path.join(__dirname, '..', '..');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

function run(
  cmd: string,
  args: string[],
  opts: { cwd: string; env?: NodeJS.ProcessEnv },
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const p = spawn(cmd, args, { cwd: opts.cwd, env: opts.env ?? process.env });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => (stdout += d));
    p.stderr.on('data', (d) => (stderr += d));
    p.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The environment a user's shell would have: nothing pointing back into this checkout. */
function userEnv(prefix: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env))
    if (!k.startsWith('TURNWISE_') && !k.startsWith('npm_') && k !== 'NODE_OPTIONS') env[k] = v;
  env.PATH = `${path.join(prefix, 'bin')}${path.delimiter}${process.env.PATH ?? ''}`;
  // Tasks the demo synthesizes are kept beside the install, not in this machine's ~/.cache.
  env.TURNWISE_TASK_CACHE = path.join(path.dirname(prefix), 'task-cache');
  return env;
}

describe('the CLI installed from its npm package (npm pack, npm install -g)', function () {
  this.timeout(900_000);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-install-'));
  const prefix = path.join(tmp, 'prefix');
  const cwd = path.join(tmp, 'somewhere');
  const runs = path.join(tmp, 'runs');
  let pkgDir = '';
  let bin = '';
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  before(async () => {
    assert.ok(fs.existsSync(path.join(root, 'dist', 'cli.js')), 'dist/cli.js is missing: run `npm run build` first');
    fs.mkdirSync(cwd, { recursive: true });
    const packed = await run(npm, ['pack', '--json', '--pack-destination', tmp], { cwd: root });
    assert.equal(packed.code, 0, packed.stderr.slice(-2000));
    const tarball = path.join(tmp, (JSON.parse(packed.stdout) as { filename: string }[])[0].filename);
    // No CUDA provider download (it comes from NuGet, not the npm registry); a GPU user leaves this out.
    const env = { ...userEnv(prefix), ONNXRUNTIME_NODE_INSTALL: 'skip', npm_config_prefer_offline: 'true' };
    const installed = await run(npm, ['install', '-g', '--prefix', prefix, '--no-audit', '--no-fund', tarball], { cwd, env });
    assert.equal(installed.code, 0, `${installed.stdout.slice(-1000)}\n${installed.stderr.slice(-2000)}`);
    pkgDir =
      process.platform === 'win32' ? path.join(prefix, 'node_modules', 'turnwise') : path.join(prefix, 'lib', 'node_modules', 'turnwise');
    bin = path.join(prefix, 'bin', 'turnwise');
  });

  it("the package holds the bundle, the embedded model, the grammars, the images' sources and the demo; not the packing machine's ONNX Runtime", () => {
    for (const f of [
      'dist/cli.js',
      'dist/policy-worker.js',
      'dist/models/turnwise-tiny/model.safetensors',
      'dist/models/turnwise-tiny/tokenizer.json',
      'dist/grammars/tree-sitter-bash.wasm',
      'dist/grammars/tree-sitter-python.wasm',
      'dist/grammars/web-tree-sitter.wasm',
      'sandbox-images/base/packages.txt',
      'sandbox-images/python/Dockerfile',
      'sandbox-images/node/Dockerfile',
      'scripts/bootstrap-base-image.sh',
      'examples/demo-python/inventory',
      'node_modules/onnxruntime-node/package.json',
    ]) {
      assert.ok(fs.existsSync(path.join(pkgDir, f)), `${f} in the installed package`);
    }
    assert.ok(
      !fs.existsSync(path.join(pkgDir, 'dist', 'node_modules')),
      'ONNX Runtime comes from the dependency, for the installing platform',
    );
    assert.ok(!fs.existsSync(path.join(pkgDir, 'src')), 'no sources');
    assert.ok(fs.existsSync(bin), `${bin} is the installed command`);
  });

  it('turnwise doctor --json, run from outside the checkout, is ok and finds everything in the installed package', async () => {
    const r = await run(bin, ['doctor', '--json'], { cwd, env: userEnv(prefix) });
    const report = JSON.parse(r.stdout) as DoctorReport;
    const byName = Object.fromEntries(report.checks.map((c) => [c.name, c]));
    for (const name of ['node', 'docker', 'sandbox images', 'agent tools', 'onnxruntime cpu', 'tree-sitter grammars', 'embedded policy']) {
      assert.equal(byName[name]?.status, 'ok', `${name}: ${byName[name]?.detail ?? 'missing'}`);
    }
    assert.ok(byName['embedded policy'].detail.includes(pkgDir), byName['embedded policy'].detail);
    assert.equal(report.ok, true);
    assert.equal(r.code, 0, r.stderr.slice(-2000));
  });

  it('turnwise demo --quick runs on the bundled demo workspace and writes its run where it is asked to', async () => {
    const r = await run(bin, ['demo', '--quick', '--json', '--runs', runs], { cwd, env: userEnv(prefix) });
    assert.equal(r.code, 0, r.stderr.slice(-3000));
    const events = r.stdout
      .split('\n')
      .map(parseEventLine)
      .filter((e): e is RunEvent => !!e);
    const types = events.map((e) => e.type);
    // Both events must be there: indexOf of a missing one is -1, which any order check would pass.
    const startedAt = types.indexOf('run-started');
    const firstIteration = types.indexOf('iteration-finished');
    assert.ok(startedAt >= 0, `no run-started event in: ${r.stdout.slice(0, 1000)}`);
    assert.ok(
      firstIteration > startedAt,
      `run-started (event ${startedAt}) comes before the first iteration-finished (event ${firstIteration})`,
    );
    const started = events[startedAt] as Extract<RunEvent, { type: 'run-started' }>;
    assert.deepEqual(
      events.filter((e) => e.type === 'iteration-finished').map((e) => (e as { iteration: number }).iteration),
      [0, 1],
    );
    assert.equal(types[types.length - 1], 'run-finished');
    assert.ok(started.heldoutTasks >= 1 && started.trainTasks >= 1);
    assert.ok(started.runDir.startsWith(runs), `${started.runDir} is under --runs`);
    // The run directory, as the package's embedded policy left it.
    const runDir = RunDir.open(started.runDir);
    const metrics = runDir.readMetrics();
    assert.equal(typeof metrics[0]['heldout/resolved'], 'number', 'iteration 0 evaluates the starting policy on the held-out tasks');
    assert.equal(typeof metrics[1]['reward/mean'], 'number');
    assert.equal(typeof metrics[1]['heldout/resolved'], 'number');
    for (const k of ['time/generation_s', 'time/sandbox_s', 'time/reward_s', 'time/advantages_s', 'time/update_s'])
      assert.equal(typeof metrics[1][k], 'number', k);
    for (const n of [0, 1]) assert.ok(loadCheckpoint(runDir.checkpointDir(n)).weights.tensors.size > 0);
    const split = runDir.readSplits();
    assert.equal(split.train.filter((id) => split.heldout.includes(id)).length, 0, 'train and held-out are disjoint');
    const evalTrajs = runDir.readTrajectories(1, 'heldout');
    assert.deepEqual(new Set(evalTrajs.map((t) => t.taskId)), new Set(split.heldout), 'every held-out task was evaluated');
    assert.equal(runDir.readStatus()?.state, 'finished');
    assert.ok(
      !fs.existsSync(path.join(pkgDir, '.turnwise')) && !fs.existsSync(path.join(pkgDir, 'examples', 'demo-python', '.turnwise')),
      'nothing written into the installed package',
    );
    const left = await new Docker().listContainers({ all: true, filters: { label: [`turnwise.run=${started.runId}`] } });
    assert.equal(left.length, 0, 'no container of the run is left');
  });
});
