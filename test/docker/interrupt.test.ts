// Ctrl-C (SIGINT) or SIGTERM while sandboxes are being created or a snapshot is being built:
// afterwards zero containers of the run and zero images of the workspace remain.
import * as assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { connectEngine } from '../../src/sandbox/engine';
import { ensureLanguageImage } from '../../src/sandbox/images';
import { LABEL } from '../../src/sandbox/owner';

const FIXTURE = path.join(__dirname, 'fixtures', 'interrupt-child.ts');
const ROOT = path.join(__dirname, '..', '..');

/** Runs the fixture, sends `signal` `delayMs` after it says "ready", resolves when it has exited. */
function interrupt(args: string[], signal: NodeJS.Signals, delayMs: number): Promise<string> {
  const child = spawn(process.execPath, ['--require', 'tsx/cjs', FIXTURE, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => {
    out += d;
    if (out.startsWith('ready')) setTimeout(() => child.kill(signal), delayMs);
  });
  child.stderr.on('data', (d) => (err += d));
  return new Promise((resolve) => child.once('exit', () => resolve(out + err)));
}

describe('interrupted runs leave nothing behind (docker)', function () {
  this.timeout(240_000);
  const { docker, target } = connectEngine();
  let langImage: string;
  before(async () => {
    langImage = (await ensureLanguageImage(docker, target, 'python')).tag;
  });

  for (const [signal, delay] of [['SIGINT', 0], ['SIGTERM', 30], ['SIGINT', 80]] as const) {
    it(`${signal} ${delay} ms into sandbox creation: zero containers of the run`, async () => {
      const run = `test-interrupt-${process.pid}-${signal}-${delay}`;
      const log = await interrupt(['create', run, langImage], signal, delay);
      assert.ok(log.startsWith('ready'), log);
      const left = await docker.listContainers({ all: true, filters: { label: [`${LABEL.run}=${run}`] } });
      assert.deepEqual(left.map((c) => `${c.Id.slice(0, 12)} ${c.State}`), []);
    });
  }

  it('SIGINT during a snapshot build: no image of the workspace remains, tagged or not', async () => {
    const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-interrupt-'));
    try {
      fs.writeFileSync(path.join(ws, 'data.bin'), Buffer.alloc(300 * 1024 * 1024, 7));
      fs.writeFileSync(path.join(ws, 'a.py'), `x = ${Date.now()}\n`);
      const log = await interrupt(['snapshot', ws, langImage], 'SIGINT', 1500);
      assert.ok(log.startsWith('ready') && !log.includes('built'), `the build was not interrupted: ${log}`);
      await new Promise((r) => setTimeout(r, 1000));
      const left = await docker.listImages({ all: true, filters: { label: [`${LABEL.workspace}=${ws}`] } });
      assert.deepEqual(left.map((i) => i.Id.slice(7, 19)), []);
    } finally {
      fs.rmSync(ws, { recursive: true, force: true });
    }
  });
});
