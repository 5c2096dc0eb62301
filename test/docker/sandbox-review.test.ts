// Docker tier: a file name that bash would read as code, and an acquire racing the pool's close.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { LABEL, SandboxPool, type PoolSnapshot } from '../../src/sandbox';
import { assertNoContainersLeft } from '../support/containers';

const RUN = `test-sbx-review-${process.pid}`;

describe('sandbox review (docker)', function () {
  this.timeout(120_000);
  let pool: SandboxPool;
  let snap: PoolSnapshot;
  let ws: string;

  before(async () => {
    ws = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-review-'));
    fs.writeFileSync(path.join(ws, 'hello.py'), 'print("hi")\n');
    pool = await SandboxPool.connect({ run: RUN });
    snap = await pool.snapshot(ws, { language: 'python' });
  });

  after(async () => {
    await pool?.close();
    fs.rmSync(ws, { recursive: true, force: true });
    await assertNoContainersLeft(pool, RUN);
  });

  it('writeFile into a new folder whose name holds a quote and $(...) creates it literally, running nothing', async () => {
    const sb = await pool.acquire(snap);
    try {
      const dir = "new'$(touch /tmp/pwned)'dir";
      await sb.writeFile(`${dir}/f.txt`, 'data');
      assert.equal((await sb.readFile(`${dir}/f.txt`)).toString(), 'data');
      const r = await sb.exec('test -e /tmp/pwned && echo ran || echo clean');
      assert.equal(r.stdout.trim(), 'clean');
    } finally {
      await sb.dispose();
    }
  });

  it('an acquire still starting when the pool closes leaves no container and rejects', async () => {
    const p = pool.acquire(snap);
    const c = SandboxPool.connect({ run: RUN }); // unrelated: keeps timing realistic
    await new Promise((r) => setTimeout(r, 20));
    await pool.close();
    await c;
    const outcome = await p.then(
      async (sb) => ({ alive: sb.alive, sb }),
      (e: Error) => ({ error: e.message }),
    );
    if ('sb' in outcome) await outcome.sb.dispose();
    assert.ok('error' in outcome, 'acquire after close must reject, not hand out a sandbox nobody will remove');
    const left = await pool.engineAt(0).docker.listContainers({ all: true, filters: { label: [`${LABEL.run}=${RUN}`] } });
    assert.equal(left.length, 0);
  });

  it('an acquire waiting for a free slot when the pool closes rejects instead of hanging', async () => {
    const p2 = await SandboxPool.connect({ run: RUN, engines: [{ capacity: 1 }] });
    const first = await p2.acquire(snap);
    const waiting = p2.acquire(snap).then(
      (sb) => sb.dispose().then(() => 'got one'),
      (e: Error) => e.message,
    );
    await new Promise((r) => setTimeout(r, 50));
    await p2.close();
    const res = await Promise.race([waiting, new Promise((r) => setTimeout(() => r('hung'), 5000))]);
    assert.match(String(res), /closed/);
    void first;
  });
});
