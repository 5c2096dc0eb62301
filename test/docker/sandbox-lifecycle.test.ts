// Real-engine tests of the container lifecycle: no leaks after SIGKILL or SIGTERM of the owner,
// the reaper sparing live owners, concurrent runs apart, the user's workspace untouched,
// snapshot caching, remote engines (tcp on loopback through a proxy) and clear errors.
import * as assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { TurnwiseError } from '../../src/core/errors';
import { DockerSandbox } from '../../src/sandbox/container';
import { connectEngine } from '../../src/sandbox/engine';
import { ensureLanguageImage } from '../../src/sandbox/images';
import { LABEL, ownerId } from '../../src/sandbox/owner';
import { SandboxPool } from '../../src/sandbox/pool';
import { reapOrphans } from '../../src/sandbox/reaper';
import { buildSnapshot } from '../../src/sandbox/snapshot';

const RUN = `test-sbx-life-${process.pid}`;
const FIXTURE = path.join(__dirname, '..', 'unit', 'sandbox', 'fixtures', 'owner-child.ts');
const ROOT = path.join(__dirname, '..', '..');

/** Hash of every file under dir, .git included: proves the host workspace was not touched. */
function treeHash(dir: string): string {
  const h = createHash('sha256');
  const walk = (rel: string) => {
    for (const e of fs.readdirSync(path.join(dir, rel), { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const r = path.join(rel, e.name);
      const st = fs.lstatSync(path.join(dir, r));
      h.update(`${r}\0${st.mode}\0`);
      if (e.isDirectory()) walk(r);
      else if (e.isFile()) h.update(fs.readFileSync(path.join(dir, r)));
    }
  };
  walk('');
  return h.digest('hex');
}

async function containersOf(docker: ReturnType<typeof connectEngine>['docker'], run: string) {
  return docker.listContainers({ all: true, filters: { label: [`${LABEL.run}=${run}`] } });
}

function startChild(run: string, image: string, count: number) {
  const child = spawn(process.execPath, ['--require', 'tsx/cjs', FIXTURE, run, image, String(count)], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const ids = new Promise<string[]>((resolve, reject) => {
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => {
      out += d;
      if (out.includes('\n')) resolve(JSON.parse(out.split('\n')[0]).ids);
    });
    child.stderr.on('data', (d) => (err += d));
    child.on('exit', (code) => reject(new Error(`fixture exited ${code}: ${err}`)));
  });
  return { child, ids };
}

const exited = (child: ReturnType<typeof spawn>) =>
  new Promise<void>((r) => (child.exitCode !== null || child.signalCode !== null ? r() : child.once('exit', () => r())));

describe('sandbox lifecycle (docker)', function () {
  this.timeout(120_000);
  const { docker, target } = connectEngine();
  let langImage: string;
  let ws: string;
  let snapImage: string;

  before(async () => {
    langImage = (await ensureLanguageImage(docker, target, 'python')).tag;
    ws = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-life-'));
    execFileSync('git', ['init', '-q', ws]);
    fs.writeFileSync(path.join(ws, '.gitignore'), 'secret.env\n');
    fs.writeFileSync(path.join(ws, 'calc.py'), 'def add(a, b):\n    return a + b\n');
    fs.writeFileSync(path.join(ws, 'test_calc.py'), 'from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n');
    fs.writeFileSync(path.join(ws, 'secret.env'), 'TOKEN=1\n');
    execFileSync('git', ['-C', ws, 'add', 'calc.py', '.gitignore']);
    execFileSync('git', ['-C', ws, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', 'host commit']);
    snapImage = (await buildSnapshot(docker, target, ws, { baseImage: langImage })).image;
  });

  after(async () => {
    for (const run of [RUN, `${RUN}-a`, `${RUN}-b`, `${RUN}-kill`, `${RUN}-term`, `${RUN}-tcp`, `${RUN}-close`])
      await reapOrphans(docker, target, { run, all: true });
    fs.rmSync(ws, { recursive: true, force: true });
  });

  it('snapshot: untracked-not-ignored files in, ignored and host .git out; cached by content hash', async () => {
    const again = await buildSnapshot(docker, target, ws, { baseImage: langImage });
    assert.equal(again.image, snapImage);
    assert.equal(again.built, false);
    await using sb = await DockerSandbox.start(docker, target, { image: snapImage, run: RUN });
    const r = await sb.exec('ls -A; git log --format=%s; python3 -m pytest -q 2>&1 | tail -1');
    assert.equal(r.stdout.split('\n').slice(0, 5).join(' '), '.git .gitignore calc.py test_calc.py turnwise snapshot');
    assert.match(r.stdout, /1 passed/);
    fs.appendFileSync(path.join(ws, 'calc.py'), '# changed\n');
    try {
      const changed = await buildSnapshot(docker, target, ws, { baseImage: langImage });
      assert.notEqual(changed.image, snapImage);
      assert.equal(changed.built, true);
      await docker.getImage(changed.image).remove({ force: true });
    } finally {
      execFileSync('git', ['-C', ws, 'checkout', '-q', 'calc.py']);
    }
  });

  it('the workspace stays byte-identical after rollouts that edit, delete and create files', async () => {
    const before = treeHash(ws);
    await using pool = await SandboxPool.connect({ run: RUN });
    const snap = await pool.snapshot(ws, { baseImage: langImage });
    await Promise.all(
      [0, 1, 2].map(async (i) => {
        await using sb = await pool.acquire(snap, { rollout: `r${i}` });
        await sb.exec(
          `sed -i 's/a + b/a - b/' calc.py && rm test_calc.py && echo new > created_${i}.txt && mkdir -p pkg && touch pkg/__init__.py`,
        );
        await sb.writeFile('calc.py', 'broken(\n');
        const diff = await sb.exec('git status --porcelain');
        assert.equal(diff.stdout, ` M calc.py\n D test_calc.py\n?? created_${i}.txt\n?? pkg/\n`);
        await sb.exec('git add -A && git commit -qm agent');
      }),
    );
    assert.equal(treeHash(ws), before);
  });

  it("two concurrent runs never touch each other's containers", async () => {
    const a = await SandboxPool.connect({ run: `${RUN}-a` });
    const b = await SandboxPool.connect({ run: `${RUN}-b` });
    try {
      const [a1, a2, b1] = await Promise.all([a.acquire(snapImage), a.acquire(snapImage), b.acquire(snapImage)]);
      await Promise.all([a1.exec('echo A1 > mine.txt'), a2.exec('echo A2 > mine.txt'), b1.exec('echo B1 > mine.txt')]);
      assert.deepEqual(await Promise.all([a1, a2, b1].map(async (s) => (await s.exec('cat mine.txt')).stdout)), ['A1\n', 'A2\n', 'B1\n']);
      assert.equal((await containersOf(docker, `${RUN}-a`)).length, 2);
      await a.close();
      assert.equal((await containersOf(docker, `${RUN}-a`)).length, 0);
      assert.equal((await containersOf(docker, `${RUN}-b`)).length, 1);
      assert.equal((await b1.exec('cat mine.txt')).stdout, 'B1\n');
      // The reaper, run by anyone, spares b's containers: their owner (this process) lives.
      await reapOrphans(docker, target);
      assert.equal((await containersOf(docker, `${RUN}-b`)).length, 1);
    } finally {
      await a.close();
      await b.close();
    }
    assert.equal((await containersOf(docker, `${RUN}-b`)).length, 0);
  });

  it("close() while sandboxes are still starting: when it resolves, the engine holds none of the pool's containers", async () => {
    const run = `${RUN}-close`;
    const pool = await SandboxPool.connect({ run, warm: 0 });
    pool.warm(snapImage, 2);
    // Acquires under way (created, booting, or not yet created) when close() is called.
    const acquires = [0, 1, 2].map((i) =>
      pool.acquire(snapImage, { rollout: `r${i}` }).then(
        () => 'started',
        (e: Error) => e.message,
      ),
    );
    await new Promise((r) => setTimeout(r, 150));
    // A container of this pool that the pool no longer knows (one whose removal failed under
    // load): carrying the pool's and this process's labels, close() finds and removes it.
    const stray = await docker.createContainer({
      Image: snapImage,
      Cmd: ['sleep', '600'],
      Labels: { [LABEL.run]: run, [LABEL.pool]: pool.poolId, [LABEL.owner]: ownerId(), [LABEL.host]: os.hostname() },
      HostConfig: { NetworkMode: 'none' },
    });
    await stray.start();
    await pool.close();
    // No waiting: close() itself guarantees it (a process exits right after it).
    assert.deepEqual(
      (await containersOf(docker, run)).map((c) => `${c.Names.join(',')} ${c.State}`),
      [],
    );
    const outcomes = await Promise.all(acquires);
    for (const o of outcomes) assert.ok(o === 'started' || /closed|shutting down|disposed|removed|stopped|sandbox/i.test(o), o);
    // Nothing more lands afterwards either (a create the engine answered late).
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal((await containersOf(docker, run)).length, 0);
  });

  it('after SIGKILL of the owning process, a new start leaves zero of its containers', async () => {
    const run = `${RUN}-kill`;
    const { child, ids } = startChild(run, snapImage, 2);
    const started = await ids;
    assert.equal(started.length, 2);
    assert.equal((await containersOf(docker, run)).length, 2);
    child.kill('SIGKILL');
    await exited(child);
    await reapOrphans(docker, target); // what every CLI / extension start does
    // AutoRemove may still be finishing a removal the closed attach stream started.
    for (let i = 0; i < 50 && (await containersOf(docker, run)).length > 0; i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal((await containersOf(docker, run)).length, 0);
  });

  it('the reaper removes containers whose owner pid is gone or reused, and only those', async () => {
    const mk = (owner: string) =>
      docker.createContainer({
        Image: snapImage,
        Cmd: ['true'],
        Labels: { [LABEL.run]: RUN, [LABEL.owner]: owner, [LABEL.host]: os.hostname() },
        HostConfig: { NetworkMode: 'none' },
      });
    const [pidText, start] = ownerId().split(':');
    const dead = await mk(`999999:${start}`);
    const reused = await mk(`${pidText}:1`); // our pid, another start time: a previous owner
    const mine = await mk(`${pidText}:${start}`);
    const res = await reapOrphans(docker, target, { run: RUN });
    assert.deepEqual(res.removed.sort(), [dead.id, reused.id].sort());
    assert.deepEqual(
      (await containersOf(docker, RUN)).map((c) => c.Id),
      [mine.id],
    );
    await mine.remove({ force: true });
  });

  it('SIGTERM of the owner removes its containers on the way out, without the reaper', async () => {
    const run = `${RUN}-term`;
    const { child, ids } = startChild(run, snapImage, 2);
    await ids;
    assert.equal((await containersOf(docker, run)).length, 2);
    child.kill('SIGTERM');
    await exited(child);
    assert.equal(child.signalCode, 'SIGTERM', 'the signal is re-raised after cleanup');
    for (let i = 0; i < 30 && (await containersOf(docker, run)).length > 0; i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal((await containersOf(docker, run)).length, 0);
  });

  it('pools several engines (local socket + tcp on loopback) by free capacity', async () => {
    const proxy = net.createServer((c) => {
      const up = net.connect('/var/run/docker.sock');
      c.pipe(up).pipe(c);
      c.on('error', () => up.destroy());
      up.on('error', () => c.destroy());
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    const port = (proxy.address() as net.AddressInfo).port;
    const pool = await SandboxPool.connect({
      run: `${RUN}-tcp`,
      engines: [
        { host: 'unix:///var/run/docker.sock', capacity: 1 },
        { host: `tcp://127.0.0.1:${port}`, capacity: 1 },
      ],
    });
    try {
      const s1 = await pool.acquire(snapImage);
      const s2 = await pool.acquire(snapImage);
      assert.deepEqual([s1.engine, s2.engine].sort(), ['/var/run/docker.sock', `tcp://127.0.0.1:${port}`]);
      const viaTcp = s1.engine.startsWith('tcp') ? s1 : s2;
      assert.equal((await viaTcp.exec('echo over tcp; id -u')).stdout, 'over tcp\n1000\n');
      await viaTcp.writeFile('t.txt', 'tcp file');
      assert.equal((await viaTcp.readFile('t.txt')).toString(), 'tcp file');
      // Both engines are full: the third acquire waits for a slot.
      let third: DockerSandbox | undefined;
      const pending = pool.acquire(snapImage).then((s) => (third = s));
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(third, undefined);
      const freedEngine = viaTcp.engine;
      await viaTcp.dispose();
      await pending;
      assert.equal(third!.engine, freedEngine);
    } finally {
      await pool.close();
      proxy.close();
    }
  });

  it('runs node:test in a Node snapshot', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-node-'));
    try {
      fs.writeFileSync(path.join(dir, 'sum.js'), 'module.exports = (a, b) => a + b;\n');
      fs.writeFileSync(
        path.join(dir, 'sum.test.js'),
        "const test = require('node:test');\nconst assert = require('node:assert');\nconst sum = require('./sum');\ntest('adds', () => assert.equal(sum(1, 2), 3));\n",
      );
      await using pool = await SandboxPool.connect({ run: RUN });
      const snap = await pool.snapshot(dir, { language: 'javascript' });
      await using sb = await pool.acquire(snap);
      const r = await sb.exec('node --test sum.test.js');
      assert.equal(r.exitCode, 0, r.stdout + r.stderr);
      assert.match(r.stdout, /# pass 1/);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('says what to do when the image is missing or Docker is unreachable', async () => {
    await assert.rejects(
      DockerSandbox.start(docker, target, { image: 'turnwise/snapshot:doesnotexist', run: RUN }),
      (e: unknown) => e instanceof TurnwiseError && e.code === 'docker-image-missing' && /turnwise images build/.test(e.hint ?? ''),
    );
    await assert.rejects(
      SandboxPool.connect({ run: RUN, engines: [{ host: 'unix:///nonexistent/docker.sock' }] }),
      (e: unknown) => e instanceof TurnwiseError && e.code === 'docker-unreachable' && /socket does not exist/.test(e.message),
    );
    const lang = await ensureLanguageImage(docker, target, 'python');
    assert.equal(lang.built, false, 'images build is idempotent');
  });
});
