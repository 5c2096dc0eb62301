// Real-engine tests of what a sandbox stops: network, root, fork bombs, memory hogs, hung
// commands, floods of output; and that the host process stays small while it happens.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { TurnwiseError } from '../../src/core/errors';
import { DockerSandbox } from '../../src/sandbox/container';
import { connectEngine } from '../../src/sandbox/engine';
import { ensureLanguageImage } from '../../src/sandbox/images';
import { reapOrphans } from '../../src/sandbox/reaper';
import { buildSnapshot } from '../../src/sandbox/snapshot';

const RUN = `test-sbx-iso-${process.pid}`;

describe('sandbox isolation (docker)', function () {
  this.timeout(120_000);
  const { docker, target } = connectEngine();
  let image: string;
  let sb: DockerSandbox;
  let ws: string;

  before(async () => {
    const lang = await ensureLanguageImage(docker, target, 'python');
    ws = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-iso-'));
    fs.writeFileSync(path.join(ws, 'hello.py'), 'print("hi")\n');
    image = (await buildSnapshot(docker, target, ws, { baseImage: lang.tag })).image;
    sb = await DockerSandbox.start(docker, target, { image, run: RUN });
  });

  after(async () => {
    await sb?.dispose();
    await reapOrphans(docker, target, { run: RUN, all: true });
    fs.rmSync(ws, { recursive: true, force: true });
  });

  it('has no network: only loopback, and connecting out fails', async () => {
    const r = await sb.exec('ls /sys/class/net; python3 -c "import socket; socket.create_connection((\'1.1.1.1\', 53), timeout=2)"');
    assert.equal(r.stdout.trim(), 'lo');
    assert.notEqual(r.exitCode, 0);
    assert.match(r.stderr, /Network is unreachable|unreachable/);
  });

  it('runs as the non-root agent user with no capabilities and no-new-privileges', async () => {
    const r = await sb.exec('id -u; id -un; grep -E "^(CapEff|CapBnd|NoNewPrivs)" /proc/self/status; touch /etc/x 2>&1; echo rc=$?');
    const lines = r.stdout.trim().split('\n');
    assert.equal(lines[0], '1000');
    assert.equal(lines[1], 'agent');
    assert.match(r.stdout, /CapEff:\s+0000000000000000/);
    assert.match(r.stdout, /CapBnd:\s+0000000000000000/);
    assert.match(r.stdout, /NoNewPrivs:\s+1/);
    assert.match(r.stdout, /Permission denied/);
    assert.match(r.stdout, /rc=1/);
  });

  it('serves the snapshot in /workspace, owned by the agent, with a committed git repo', async () => {
    const r = await sb.exec('cat hello.py; stat -c %U hello.py; git log --format=%s; git status --porcelain | wc -l');
    assert.equal(r.stdout, 'print("hi")\nagent\nturnwise snapshot\n0\n');
  });

  it('stops a fork bomb at the PID limit, and the sandbox still answers', async () => {
    // The bomb keeps forking in the background while the command sleeps; the PID limit makes
    // fork fail, and the command's end (or its timeout) kills the whole process group.
    const t0 = Date.now();
    const r = await sb.exec(':(){ :|:& };:; sleep 3', { timeoutMs: 8000 });
    assert.match(r.stderr, /fork: (retry: )?Resource temporarily unavailable/);
    assert.ok(Date.now() - t0 < 8000 + 3000, 'the bomb outlived its timeout');
    // Until init has reaped the killed bomb, its processes may still fill the PID limit and the
    // shell's own fork for `cat` fails: read the limit again for up to 5 s.
    let limit = '';
    for (const end = Date.now() + 5000; limit === '' && Date.now() < end;) {
      limit = (await sb.exec('cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max')).stdout.trim();
      if (limit === '') await new Promise((res) => setTimeout(res, 200));
    }
    assert.equal(limit, '256');
    // The group is killed when the command ends; on a loaded machine the init process may still
    // be reaping a few dozen of them a moment later, so give it up to 5 s (a bomb that survived
    // would still be there).
    let procs: number;
    for (const end = Date.now() + 5000; ;) {
      const after = await sb.exec('echo alive; ps -e --no-headers | wc -l');
      assert.equal(after.exitCode, 0);
      const [alive, n] = after.stdout.trim().split('\n');
      assert.equal(alive, 'alive');
      procs = Number(n);
      if (procs < 10 || Date.now() > end) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    assert.ok(procs < 10, `bomb processes left after 5 s: ${procs}`);
  });

  it('reports an OOM kill as oomKilled, and the sandbox survives it', async () => {
    await using small = await DockerSandbox.start(docker, target, { image, run: RUN, limits: { memoryBytes: 256 * 1024 ** 2 } });
    const r = await small.exec('python3 -c "x = b\'a\' * (600 * 1024 * 1024); print(len(x))"', { timeoutMs: 30_000 });
    assert.equal(r.oomKilled, true);
    assert.equal(r.exitCode, 137);
    assert.equal(r.timedOut, false);
    assert.equal(r.stdout, '');
    const ok = await small.exec('python3 -c "print(sum(range(10)))"');
    assert.equal(ok.stdout, '45\n');
    assert.equal(ok.oomKilled, false);
  });

  it('kills a hung command at its timeout and reports timedOut', async () => {
    const r = await sb.exec('echo start; sleep 600', { timeoutMs: 1000 });
    assert.equal(r.timedOut, true);
    assert.equal(r.stdout, 'start\n');
    assert.ok(r.durationMs >= 1000 && r.durationMs < 4000, `took ${r.durationMs} ms`);
    const left = await sb.exec('pgrep -c sleep || true');
    assert.equal(left.stdout.trim(), '0');
  });

  it("a command can neither signal the shell server nor open its descriptors (it could answer the host's requests itself), and the server keeps answering", async () => {
    const r = await sb.exec(
      'srv=$(ps -o ppid= -p $PPID | tr -d " "); while [ "$(stat -c %u /proc/$srv)" != 0 ]; do srv=$(ps -o ppid= -p $srv | tr -d " "); done; ' +
        'echo server=$srv uid=$(stat -c %u /proc/$srv); kill -STOP $srv 2>&1; echo kill=$?; cat /proc/$srv/fd/0 2>&1 | head -c 200; echo; ls -l /proc/$srv/fd/ 2>&1 | head -3',
    );
    assert.match(r.stdout, /server=\d+ uid=0/);
    assert.match(r.stdout, /Operation not permitted/);
    assert.match(r.stdout, /kill=1/);
    assert.match(r.stdout, /Permission denied/);
    const after = await sb.exec('echo still');
    assert.equal(after.stdout, 'still\n');
    assert.equal(after.exitCode, 0);
  });

  it('a long command (read through a descriptor) cannot learn its request id from its own name', async () => {
    const pad = `# ${'x'.repeat(120_000)}\n`;
    const r = await sb.exec(`${pad}echo "name=$0"; ls /run/turnwise 2>&1 | head -2`);
    assert.equal(r.exitCode, 0, r.stderr);
    assert.match(r.stdout, /^name=\/dev\/fd\/3\n/);
    assert.match(r.stdout, /Permission denied/);
  });

  it('an image without setpriv (which runs every command as the sandbox user) does not start, and the error names it', async () => {
    // The snapshot image with setpriv removed, committed from a one-off root container.
    const c = await docker.createContainer({ Image: image, User: '0:0', Entrypoint: [], Cmd: ['rm', '-f', '/usr/bin/setpriv'] });
    const tag = `turnwise-test/no-setpriv:${process.pid}`;
    try {
      await c.start();
      await c.wait();
      await c.commit({ repo: tag.split(':')[0], tag: tag.split(':')[1] });
      await assert.rejects(DockerSandbox.start(docker, target, { image: tag, run: RUN, readyTimeoutMs: 30_000 }), (e: unknown) => {
        assert.ok(e instanceof TurnwiseError, String(e));
        assert.match(String(e.hint), /setpriv/);
        return true;
      });
    } finally {
      await c.remove({ force: true }).catch(() => undefined);
      await docker
        .getImage(tag)
        .remove({ force: true })
        .catch(() => undefined);
    }
  });

  it('gives up on a wedged shell at the caller deadline and says so on the next exec', async () => {
    const wedge = await DockerSandbox.start(docker, target, { image, run: RUN });
    try {
      // Freeze the container from the engine: no sentinel can come.
      const t0 = Date.now();
      const pending = wedge.exec('sleep 0.2; echo late', { timeoutMs: 500 });
      await docker.getContainer(wedge.id).pause();
      const r = await pending;
      assert.equal(r.timedOut, true);
      assert.equal(r.exitCode, null);
      assert.ok(Date.now() - t0 < 15_000);
      assert.equal(wedge.alive, false);
      await assert.rejects(wedge.exec('true'), (e: unknown) => e instanceof TurnwiseError && e.code === 'sandbox-failed');
      await docker
        .getContainer(wedge.id)
        .unpause()
        .catch(() => undefined);
    } finally {
      await wedge.dispose();
    }
  });

  it('caps 1 GB of output at head + tail while host memory stays within +100 MB', async () => {
    global.gc?.();
    const before = process.memoryUsage().rss;
    let peak = before;
    const probe = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
    const r = await sb.exec('head -c 1073741824 /dev/zero | tr "\\0" x; echo; echo END >&2', { timeoutMs: 110_000, maxOutputBytes: 4096 });
    clearInterval(probe);
    peak = Math.max(peak, process.memoryUsage().rss);
    assert.equal(r.exitCode, 0);
    assert.equal(r.truncated, true);
    assert.match(r.stdout, /^x{2048}\n\[\.\.\. 1073737729 bytes elided \.\.\.\]\nx{2047}\n$/);
    assert.equal(r.stderr, 'END\n');
    assert.ok(peak - before < 100 * 1024 ** 2, `host RSS grew by ${((peak - before) / 1024 ** 2).toFixed(0)} MB`);
  });

  it('reads and writes files through the archive API, byte for byte, owned by the agent', async () => {
    const bin = Buffer.from(Array.from({ length: 70_000 }, (_, i) => (i * 7) % 256));
    await sb.writeFile('deep/new/dir/blob.bin', bin);
    assert.deepEqual(await sb.readFile('/workspace/deep/new/dir/blob.bin'), bin);
    const r = await sb.exec('stat -c "%U %s" deep/new/dir/blob.bin && echo more >> deep/new/dir/blob.bin');
    assert.equal(r.stdout, 'agent 70000\n');
    await sb.writeFile('hello.py', 'print("changed")\n');
    assert.equal((await sb.exec('python3 hello.py')).stdout, 'changed\n');
    await assert.rejects(sb.readFile('nope.txt'), (e: unknown) => e instanceof TurnwiseError && e.code === 'not-found');
    await assert.rejects(sb.readFile('deep'), (e: unknown) => e instanceof TurnwiseError && /not a file/.test(e.message));
  });

  it('refuses a file over the read limit without downloading it, and keeps working', async () => {
    await sb.exec('head -c 300000000 /dev/zero > big.bin');
    const t0 = Date.now();
    await assert.rejects(
      sb.readFile('big.bin', 1024 * 1024),
      (e: unknown) => e instanceof TurnwiseError && /over the 1048576-byte read limit/.test(e.message),
    );
    // Refusing at the tar header takes ~40 ms; draining 300 MB through the archive API ~800 ms.
    assert.ok(Date.now() - t0 < 400, `refusal took ${Date.now() - t0} ms (reading it all takes ~800 ms here)`);
    await sb.writeFile('small.txt', 'ok');
    assert.equal((await sb.readFile('small.txt')).toString(), 'ok');
    await sb.exec('rm -f big.bin');
  });
});
