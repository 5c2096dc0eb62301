// The shell server protocol, run against a real local bash (the same script the containers
// run): framing with multibyte text, exit codes, env/cwd, timeouts and leftover processes.
import * as assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { SentinelScanner } from '../../../src/sandbox/output';
import { SHELL_SERVER, encodeRequest, parseSentinelFields, sentinelMarker, shellQuote } from '../../../src/sandbox/shell';

class LocalShell {
  private child: ChildProcessWithoutNullStreams;
  private n = 0;
  constructor() {
    this.child = spawn('bash', ['-c', SHELL_SERVER], {
      stdio: 'pipe',
      env: { ...process.env, TW_UID: '', TW_RUN_DIR: fs.mkdtempSync(path.join(os.tmpdir(), 'tw-shell-run-')) },
    });
  }
  /** Consumes the READY marker on both streams. */
  ready() {
    const wait = (s: NodeJS.ReadableStream) =>
      new Promise<void>((resolve) => {
        const sc = new SentinelScanner(Buffer.from('\0TWREADY', 'latin1'), () => undefined);
        const on = (d: Buffer) => {
          sc.push(d);
          if (sc.done) {
            s.off('data', on);
            resolve();
          }
        };
        s.on('data', on);
      });
    return Promise.all([wait(this.child.stdout), wait(this.child.stderr)]);
  }
  run(cmd: string, timeoutMs = 5000, cwd = os.tmpdir(), env: Record<string, string> = {}) {
    const id = `id${this.n++}`;
    return new Promise<{ out: string; err: string; rc: number; timedOut: boolean }>((resolve) => {
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      const so = new SentinelScanner(sentinelMarker(id), (d) => out.push(Buffer.from(d)));
      const se = new SentinelScanner(sentinelMarker(id), (d) => err.push(Buffer.from(d)));
      const check = () => {
        if (!so.done || !se.done) return;
        this.child.stdout.off('data', onOut);
        this.child.stderr.off('data', onErr);
        const f = parseSentinelFields(so.fields!);
        resolve({ out: Buffer.concat(out).toString(), err: Buffer.concat(err).toString(), rc: f.exitCode, timedOut: f.timedOut });
      };
      const onOut = (d: Buffer) => (so.push(d), check());
      const onErr = (d: Buffer) => (se.push(d), check());
      this.child.stdout.on('data', onOut);
      this.child.stderr.on('data', onErr);
      this.child.stdin.write(encodeRequest(id, cmd, timeoutMs, cwd, env));
    });
  }
  close() {
    this.child.kill('SIGKILL');
  }
}

describe('sandbox/shell protocol (local bash)', function () {
  this.timeout(20000);
  let sh: LocalShell;
  before(async () => {
    sh = new LocalShell();
    await sh.ready();
  });
  after(() => sh.close());

  it('runs commands with multibyte text, heredocs and exit codes, separately on each stream', async () => {
    const r = await sh.run("printf 'héllo ✓\\n'; cat <<'EOF'\nline $x\nEOF\necho oops >&2; exit 7");
    assert.equal(r.out, 'héllo ✓\nline $x\n');
    assert.equal(r.err, 'oops\n');
    assert.equal(r.rc, 7);
    assert.equal(r.timedOut, false);
    const next = await sh.run('echo still here');
    assert.equal(next.out, 'still here\n');
  });

  it('applies cwd and env per command, and nothing carries over', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-sh-'));
    const r = await sh.run('pwd; echo "$A|$B"; cd /; export C=1', 5000, dir, { A: "it's", B: 'x y\nz' });
    assert.equal(r.out, `${fs.realpathSync(dir)}\nit's|x y\nz\n`);
    const r2 = await sh.run('pwd; echo "${C:-unset}"', 5000, dir);
    assert.equal(r2.out, `${fs.realpathSync(dir)}\nunset\n`);
    // Each command sees its own time limit (tools fit their work inside it).
    assert.equal((await sh.run('echo $TW_COMMAND_TIMEOUT_MS', 4321)).out, '4321\n');
    assert.equal((await sh.run('echo $TW_COMMAND_TIMEOUT_MS', 1234.6)).out, '1235\n');
    const bad = await sh.run('true', 5000, path.join(dir, 'missing'));
    assert.equal(bad.rc, 126);
    assert.match(bad.err, /No such file or directory/);
    fs.rmSync(dir, { recursive: true });
  });

  it('kills a command at its timeout (TERM, then KILL for one that ignores TERM) and reports it', async () => {
    const t0 = Date.now();
    const r = await sh.run('echo before; sleep 30', 500);
    assert.equal(r.timedOut, true);
    assert.equal(r.out, 'before\n');
    assert.ok(Date.now() - t0 < 3000);
    const stubborn = await sh.run("trap '' TERM; sleep 30", 300);
    assert.equal(stubborn.timedOut, true);
    assert.equal(stubborn.rc, 137);
    // A command that merely exits 124 quickly is not a timeout.
    const fake = await sh.run('exit 124', 5000);
    assert.equal(fake.timedOut, false);
    assert.equal(fake.rc, 124);
  });

  it('kills background processes the command left behind', async () => {
    const r = await sh.run('sleep 300 & echo $!', 5000);
    const pid = Number(r.out.trim());
    await new Promise((res) => setTimeout(res, 100));
    // Gone, or a zombie waiting for whichever init adopted it.
    const stat = fs.existsSync(`/proc/${pid}/stat`) ? fs.readFileSync(`/proc/${pid}/stat`, 'utf8') : '';
    assert.ok(stat === '' || stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z'), `sleep ${pid} still runs: ${stat}`);
  });

  it('runs a command longer than one argument may be (128 KiB)', async () => {
    const body = 'x'.repeat(300_000);
    const r = await sh.run(`cat <<'EOF' | wc -c\n${body}\nEOF`);
    assert.equal(r.rc, 0, r.err);
    assert.equal(r.out.trim(), String(body.length + 1));
  });

  it('encodeRequest counts bytes, not characters, and rejects bad env names', () => {
    const req = encodeRequest('ab', 'echo ✓', 1500, '/w');
    const [header] = req.toString('utf8').split('\n');
    const [id, ms, plen, clen] = header.split(' ');
    assert.deepEqual([id, ms], ['ab', '1500']);
    assert.equal(Number(clen), Buffer.byteLength('echo ✓'));
    assert.equal(Number(plen), Buffer.byteLength(`cd -- ${shellQuote('/w')} || exit 126`));
    assert.throws(() => encodeRequest('x', 'true', 1000, '/', { 'A-B': '1' }), /not valid/);
  });
});
