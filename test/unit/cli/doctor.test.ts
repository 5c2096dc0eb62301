// The doctor against engines that are not there. A stopped dockerd leaves its socket file
// behind with nothing listening (ECONNREFUSED); a missing engine has no socket (ENOENT).
// Both are reproduced with real sockets, so the shared engine is never stopped.
import * as assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import * as net from 'node:net';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from '../../../src/cli/main';
import { tidyProviderError } from '../../../src/onnx/doctor';
import type { DoctorReport } from '../../../src/train/doctor';

async function runCli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(args, { out: (t) => (out += t + '\n'), err: (t) => (err += t + '\n') });
  return { code, out, err };
}

describe('turnwise doctor', function () {
  this.timeout(60000);
  let dir: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-doctor-'));
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('exits non-zero and says how to start Docker when the socket does not exist', async () => {
    const sock = path.join(dir, 'missing.sock');
    const r = await runCli(['doctor', '--docker-host', `unix://${sock}`]);
    assert.equal(r.code, 1);
    assert.match(r.out, new RegExp(`✗ docker: Docker is not reachable at ${sock}: the socket does not exist`));
    assert.match(r.out, /fix: start the Docker engine/);
    assert.match(r.out, /✗ sandbox images: not checked: Docker is not reachable/);
    assert.match(r.out, /✗ agent tools: not checked: Docker is not reachable\n {4}fix: fix the docker check first/);
    assert.match(r.out, /problem\(s\) must be fixed before a run/);
  });

  it('reports a stopped engine (stale socket, nothing listening) in --json with the fix', async () => {
    const sock = path.join(dir, 'stale.sock');
    // Bind without listen, then exit without unlinking: exactly what a dead dockerd leaves.
    execFileSync('python3', ['-c', `import socket; s=socket.socket(socket.AF_UNIX); s.bind(${JSON.stringify(sock)})`]);
    assert.ok(fs.existsSync(sock));
    const r = await runCli(['doctor', '--docker-host', `unix://${sock}`, '--json']);
    assert.equal(r.code, 1);
    const report = JSON.parse(r.out) as DoctorReport;
    assert.equal(report.schema, 'turnwise/doctor@1');
    assert.equal(report.ok, false);
    const docker = report.checks.find((c) => c.name === 'docker')!;
    assert.equal(docker.status, 'fail');
    assert.match(docker.detail, /nothing is listening there/);
    assert.match(docker.fix ?? '', /start the Docker engine|DOCKER_HOST/);
    // The rest of the report is still produced: the CPU provider and grammars are checked for real.
    assert.equal(report.checks.find((c) => c.name === 'onnxruntime cpu')?.status, 'ok');
    assert.equal(report.checks.find((c) => c.name === 'tree-sitter grammars')?.status, 'ok');
    // No GPU here: the adapter line warns (lavapipe only, or no driver) and never fails the report.
    assert.equal(report.checks.find((c) => c.name === 'webgpu adapter')?.status, 'warn');
    // Every check, in report order (the order train/doctor.ts lists them in).
    assert.deepEqual(
      report.checks.map((c) => c.name),
      [
        'node',
        'docker',
        'sandbox images',
        'agent tools',
        'onnxruntime cpu',
        'onnxruntime cuda',
        'onnxruntime webgpu',
        'webgpu adapter',
        'tree-sitter grammars',
        'embedded policy',
      ],
    );
    for (const c of report.checks)
      assert.deepEqual(
        Object.keys(c).filter((k) => !['name', 'status', 'detail', 'fix'].includes(k)),
        [],
        c.name,
      );
  });

  it('exits (does not hang) when the Docker host accepts the connection and never answers', async function () {
    // ~17 s on an idle 2-core machine (the provider probes run in child processes); the bounds
    // leave room for a loaded machine, and a hang would exceed any of them.
    this.timeout(75000);
    // A silent server: what a wedged dockerd or a firewalled tcp:// host looks like to a client.
    const held: net.Socket[] = [];
    const server = net.createServer((c) => void held.push(c));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as net.AddressInfo).port;
    try {
      const t0 = Date.now();
      const child = spawn(
        process.execPath,
        ['--import', 'tsx', 'src/cli/main.ts', 'doctor', '--docker-host', `tcp://127.0.0.1:${port}`, '--json'],
        {
          stdio: ['ignore', 'pipe', 'ignore'],
        },
      );
      let out = '';
      child.stdout.on('data', (d) => (out += d));
      const code = await new Promise<number | null>((resolve) => {
        const kill = setTimeout(() => child.kill('SIGKILL'), 60000);
        child.on('exit', (c) => {
          clearTimeout(kill);
          resolve(c);
        });
      });
      const secs = (Date.now() - t0) / 1000;
      assert.equal(code, 1, `doctor was killed after ${secs.toFixed(1)} s: it hung on the silent engine`);
      assert.ok(secs < 45, `doctor took ${secs.toFixed(1)} s`);
      const docker = (JSON.parse(out) as DoctorReport).checks.find((c) => c.name === 'docker')!;
      assert.equal(docker.status, 'fail');
    } finally {
      for (const c of held) c.destroy();
      server.close();
    }
  });

  it('a command that needs no Docker is not held up by the start-up reaper on a silent DOCKER_HOST', async function () {
    this.timeout(45000);
    const held: net.Socket[] = [];
    const server = net.createServer((c) => void held.push(c));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as net.AddressInfo).port;
    const file = path.join(dir, 'tasks.jsonl');
    fs.writeFileSync(file, '{}\n');
    try {
      const t0 = Date.now();
      // The reaper runs at every CLI start; its request to the engine must not outlive its cap.
      const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'tasks', 'check', file], {
        stdio: 'ignore',
        env: { ...process.env, DOCKER_HOST: `tcp://127.0.0.1:${port}` },
      });
      const code = await new Promise<number | null>((resolve) => {
        const kill = setTimeout(() => child.kill('SIGKILL'), 20000);
        child.on('exit', (c) => {
          clearTimeout(kill);
          resolve(c);
        });
      });
      const secs = (Date.now() - t0) / 1000;
      assert.equal(code, 1, `tasks check was killed after ${secs.toFixed(1)} s: it hung on the silent engine`);
      assert.ok(secs < 15, `tasks check took ${secs.toFixed(1)} s`);
    } finally {
      for (const c of held) c.destroy();
      server.close();
    }
  });

  it('rejects a Docker host it cannot understand with a usage hint', async () => {
    const r = await runCli(['doctor', '--docker-host', 'ftp://x', '--json']);
    assert.equal(r.code, 1);
    assert.match(r.err, /unsupported Docker host scheme ftp:/);
    assert.match(r.err, /use unix:\/\/, tcp:\/\/ or ssh:\/\//);
  });

  it('unknown commands and options exit 2 with usage', async () => {
    assert.equal((await runCli(['frobnicate'])).code, 2);
    const r = await runCli(['doctor', '--nope']);
    assert.equal(r.code, 2);
    assert.match(r.err, /usage: turnwise doctor/);
  });
});

describe('doctor provider messages', () => {
  it('keeps the reason of an ORT provider failure and drops its source location', () => {
    const raw =
      '/onnxruntime_src/onnxruntime/core/providers/webgpu/webgpu_context.cc:136 onnxruntime::webgpu::WebGpuContext::Initialize(const onnxruntime::webgpu::WebGpuContextConfig&)::<lambda()> adapter_result.status == wgpu::RequestAdapterStatus::Success was false. Failed to get a WebGPU adapter: No supported adapters';
    assert.equal(tidyProviderError(raw), 'Failed to get a WebGPU adapter: No supported adapters');
    assert.equal(tidyProviderError('Failed to load shared library'), 'Failed to load shared library');
  });
});
