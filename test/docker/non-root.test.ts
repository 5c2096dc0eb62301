// Docker tier: a user in the `docker` group runs Turnwise without sudo. As root (CI) the test
// makes a system user whose only extra group is the one that owns the engine's socket, and runs
// the built CLI as that user (runuser, no shell, its own HOME): `doctor --json` must find the
// engine, the images and the embedded model, and `tasks failing` must snapshot a workspace, start
// a sandbox and run the suite there. Run as any other user, the same commands run as that user.
import * as assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { DoctorReport } from '../../src/train/doctor';

const root = path.join(__dirname, '..', '..');
const cli = path.join(root, 'dist', 'cli.js');
const demo = path.join(root, 'examples', 'demo-python');
const USER = 'turnwise-nonroot';
const SOCKET = '/var/run/docker.sock';

function run(
  cmd: string,
  args: string[],
  o: { cwd: string; env: NodeJS.ProcessEnv },
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const p = spawn(cmd, args, { cwd: o.cwd, env: o.env });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => (stdout += d));
    p.stderr.on('data', (d) => (stderr += d));
    p.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

const sh = (cmd: string, args: string[]) => run(cmd, args, { cwd: '/', env: process.env });

describe('docker: a user in the docker group runs the CLI without sudo', function () {
  this.timeout(600_000);
  const asRoot = process.getuid?.() === 0;
  let home: string;
  let made = false;
  /** The CLI as the test's user: the made one under root, else this process's. */
  const turnwise = (args: string[]) => {
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: home,
      ...(process.env.DOCKER_HOST ? { DOCKER_HOST: process.env.DOCKER_HOST } : {}),
    };
    return asRoot
      ? run('runuser', ['-u', USER, '--', process.execPath, cli, ...args], { cwd: home, env })
      : run(process.execPath, [cli, ...args], { cwd: home, env });
  };

  before(async function () {
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-nonroot-'));
    if (!asRoot) return;
    const st = fs.statSync(SOCKET);
    assert.notEqual(
      st.gid,
      0,
      `${SOCKET} belongs to root's group: a docker group is what a user is given, and the engine was started without one`,
    );
    const group = (await sh('getent', ['group', String(st.gid)])).stdout.split(':')[0];
    assert.ok(group, `no group name for gid ${st.gid}`);
    if ((await sh('id', ['-u', USER])).code !== 0) {
      const r = await sh('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', '--groups', group, USER]);
      assert.equal(r.code, 0, r.stderr);
      made = true;
    }
    const id = (await sh('id', ['-Gn', USER])).stdout.trim().split(/\s+/);
    assert.ok(id.includes(group) && !id.includes('root') && !id.includes('sudo'), `${USER} is in ${id.join(', ')}`);
    const uid = Number((await sh('id', ['-u', USER])).stdout.trim());
    fs.chownSync(home, uid, -1);
    fs.chmodSync(home, 0o700);
  });

  after(async () => {
    if (made) await sh('userdel', [USER]);
    fs.rmSync(home, { recursive: true, force: true });
  });

  it('doctor finds the engine, the sandbox images and the embedded policy', async () => {
    const r = await turnwise(['doctor', '--json']);
    const report = JSON.parse(r.stdout) as DoctorReport;
    const status = (name: string) => report.checks.find((c) => c.name === name)?.status;
    assert.equal(status('docker'), 'ok', r.stdout);
    assert.equal(status('sandbox images'), 'ok', r.stdout);
    assert.equal(status('embedded policy'), 'ok', r.stdout);
  });

  it('tasks failing snapshots a workspace, runs its suite in a sandbox and writes the tasks', async () => {
    // A copy of the demo workspace the user owns, with one test that fails.
    const ws = path.join(home, 'ws');
    fs.cpSync(demo, ws, { recursive: true });
    fs.writeFileSync(path.join(ws, 'tests', 'test_nonroot.py'), 'def test_fails():\n    assert 1 + 1 == 3\n');
    if (asRoot) await sh('chown', ['-R', `${USER}:`, ws]);
    const out = path.join(home, 'tasks.jsonl');
    const r = await turnwise(['tasks', 'failing', '--workspace', ws, '--out', out, '--json']);
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    const tasks = fs
      .readFileSync(out, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { fail_to_pass: string[] });
    assert.ok(
      tasks.some((t) => t.fail_to_pass.includes('tests/test_nonroot.py::test_fails')),
      JSON.stringify(tasks),
    );
  });
});
