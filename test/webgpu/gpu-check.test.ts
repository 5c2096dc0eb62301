// The GPU check as it travels to a GPU machine: scripts/gpu-check.sh --bundle builds a folder that
// runs with plain node, outside any checkout and without npm packages. Here it runs on lavapipe
// (--no-gpu) at the tiny-test shape: every step but the doctor (which needs Docker) must pass,
// and WebGPU must feed no weight bytes per step after the first.
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const ROOT = path.resolve(__dirname, '../..');

describe('webgpu: the GPU check bundle', function () {
  this.timeout(600_000);
  let tmp: string;
  before(() => (tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-gpu-check-'))));
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('builds a folder under 60 MB that runs the check with plain node, away from the checkout', () => {
    const bundle = path.join(tmp, 'bundle');
    const b = spawnSync('bash', [path.join(ROOT, 'scripts/gpu-check.sh'), '--bundle', bundle], { encoding: 'utf8', cwd: ROOT });
    assert.equal(b.status, 0, b.stderr);
    const size = (p: string): number =>
      fs.statSync(p).isDirectory() ? fs.readdirSync(p).reduce((n, f) => n + size(path.join(p, f)), 0) : fs.statSync(p).size;
    assert.ok(size(bundle) <= 60 * 2 ** 20, `${size(bundle)} bytes`);
    assert.deepEqual(fs.readdirSync(path.join(bundle, 'node_modules')).sort(), ['onnxruntime-common', 'onnxruntime-node']);
    // A bare environment: no npm, no NODE_PATH, a working directory outside the checkout.
    const out = path.join(tmp, 'out');
    const r = spawnSync(
      'bash',
      [path.join(bundle, 'run.sh'), out, '--no-gpu', '--shape', 'tiny-test', '--providers', 'webgpu', '--steps', 'env,logits,bench,loop'],
      { encoding: 'utf8', cwd: tmp, env: { PATH: `${path.dirname(process.execPath)}:/usr/bin:/bin`, HOME: tmp } },
    );
    assert.equal(r.status, 0, `${r.stderr}\n${r.stdout.slice(-2000)}`);
    const s = JSON.parse(fs.readFileSync(path.join(out, 'summary.json'), 'utf8'));
    assert.equal(s.ok, true);
    assert.deepEqual(
      s.steps.map((x: { step: string }) => x.step),
      ['logits', 'bench-cpu', 'bench-webgpu', 'loop-webgpu'],
    );
    assert.match(s.env, /## ONNX Runtime CUDA provider libraries/);
    assert.equal(s.logits.results.webgpu.ran_on, 'webgpu');
    assert.ok(s.logits.results.webgpu.max_abs_logit_diff < 1e-4 && s.logits.results.webgpu.greedy_ids_match);
    assert.equal(s.bench_cpu.provider, 'cpu');
    assert.equal(s.bench_webgpu.provider, 'webgpu');
    assert.equal(s.bench_webgpu.fed_weight_bytes_per_decode_step, 0);
    assert.equal(s.bench_webgpu.fed_weight_bytes_per_train_step, 0);
    assert.equal(s.loop_webgpu.provider, 'webgpu');
    assert.equal(s.loop_webgpu.iterations.length, 3);
    assert.deepEqual(s.loop_webgpu.warnings, []);
  });

  it('refuses to run without an NVIDIA GPU unless told --no-gpu', () => {
    const bundle = path.join(tmp, 'bundle');
    const r = spawnSync('bash', [path.join(bundle, 'run.sh'), path.join(tmp, 'refused')], {
      encoding: 'utf8',
      env: { PATH: `${path.dirname(process.execPath)}:/usr/bin:/bin` },
    });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /no nvidia-smi: this machine has no NVIDIA driver \(run with --no-gpu/);
  });
});
