// Docker tier: the agent tools in the Python sandbox image, run for real. `tw-suspects` ranks by
// Ochiai, then re-ranks by mutation analysis: these cases are built so that Ochiai alone gets the
// order wrong (the bug line ties with, or ranks below, lines every failing test runs), so a tool
// without the re-ranking fails them. Lines only the imports ran (constants, class bodies) and def
// lines with a default are suspects too. The workspace must be left as it was (the mutants are
// tried on a copy), and a variant that loops forever must not hang the tool.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { SandboxPool, LABEL, type PoolSnapshot } from '../../src/sandbox';
import { keepableObservation } from '../../src/agent/cache';

const demo = path.join(__dirname, '..', '..', 'examples', 'demo-python');
const RUN = `agent-tools-${process.pid}`;

const suspectLines = (stdout: string) =>
  stdout
    .trim()
    .split('\n')
    .filter((l) => /^\S+:\d+: /.test(l));

describe('docker: agent tools in the Python sandbox (tw-suspects mutation ranking)', function () {
  this.timeout(300_000);
  let pool: SandboxPool;
  let dir: string;
  before(async () => {
    pool = await SandboxPool.connect({ run: RUN });
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-tools-'));
  });
  after(async () => {
    fs.rmSync(dir, { recursive: true, force: true });
    await pool?.close();
    const left = await pool.engineAt(0).docker.listContainers({ all: true, filters: { label: [`${LABEL.run}=${RUN}`] } });
    assert.equal(left.length, 0);
  });

  /** A snapshot of a Python workspace made of `files` (relative path to text) in a folder `name` of the test's temp folder. */
  async function snapshotOf(name: string, files: Record<string, string>): Promise<PoolSnapshot> {
    const ws = path.join(dir, name);
    for (const [rel, text] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(ws, rel)), { recursive: true });
      fs.writeFileSync(path.join(ws, rel), text);
    }
    return pool.snapshot(ws, { language: 'python' });
  }

  async function inSandbox<T>(
    snap: PoolSnapshot,
    f: (exec: (cmd: string) => Promise<{ exitCode: number | null; stdout: string; stderr: string }>) => Promise<T>,
    timeoutMs = 60_000,
  ): Promise<T> {
    const sb = await pool.acquire(snap, { rollout: 'tools' });
    try {
      return await f((cmd) => sb.exec(cmd, { timeoutMs }));
    } finally {
      await sb.dispose();
    }
  }

  it('a negated condition: Ochiai ranks the constructor first, the mutation analysis the bug', async () => {
    const snap = await pool.snapshot(demo, { language: 'python' });
    await inSandbox(snap, async (exec) => {
      const bug = await exec(
        `sed -i '14s/if qty <= 0:/if not (qty <= 0):/' inventory/stock.py && sed -n 14p inventory/stock.py && md5sum inventory/stock.py`,
      );
      assert.match(bug.stdout, /if not \(qty <= 0\):/);
      const ochiai = await exec('TW_MUTATE=0 tw-suspects');
      assert.equal(ochiai.exitCode, 1);
      assert.ok(
        !suspectLines(ochiai.stdout)[0].startsWith('inventory/stock.py:14: '),
        `precondition: Ochiai alone does not rank the bug first\n${ochiai.stdout}`,
      );
      const ranked = await exec('tw-suspects');
      assert.equal(ranked.exitCode, 1, ranked.stderr);
      assert.match(ranked.stdout, /^8 failed, 5 passed\n/);
      const lines = suspectLines(ranked.stdout);
      assert.equal(lines[0], 'inventory/stock.py:14: if not (qty <= 0):');
      // The same lines as Ochiai's top 5, re-ordered: nothing invented, nothing about the fix.
      assert.deepEqual([...lines].sort(), [...suspectLines(ochiai.stdout)].sort());
      // The workspace is untouched: same file, nothing new, no mutant copies left behind.
      const after = await exec(`md5sum inventory/stock.py; git status --porcelain; ls /tmp | grep -c tw-mutants || true`);
      assert.equal(after.stdout.split('\n')[0], bug.stdout.split('\n')[1]);
      assert.deepEqual(after.stdout.trim().split('\n').slice(1), [' M inventory/stock.py', '0']);
    });
  });

  it('a ranking the time guard cut short keeps the Ochiai order and says so in its last line, which the observation cache will not keep', async () => {
    const snap = await pool.snapshot(demo, { language: 'python' });
    await inSandbox(snap, async (exec) => {
      await exec(`sed -i '14s/if qty <= 0:/if not (qty <= 0):/' inventory/stock.py`);
      const ochiai = await exec('TW_MUTATE=0 tw-suspects');
      const full = await exec('tw-suspects');
      // A 1 ms command limit puts the guard (80% of it) behind the tool before its first mutant.
      const cut = await exec('TW_COMMAND_TIMEOUT_MS=1 tw-suspects');
      assert.equal(cut.exitCode, 1, cut.stderr);
      const lines = cut.stdout.trim().split('\n');
      assert.match(lines[lines.length - 1], /^\(ranking cut short by the time limit/);
      assert.equal(lines.slice(0, -1).join('\n'), ochiai.stdout.trim(), 'the lines not reached keep the Ochiai order');
      assert.ok(!full.stdout.includes('cut short'), full.stdout);
      assert.ok(keepableObservation(full.stdout, false) && !keepableObservation(cut.stdout, false));
    });
  });

  it("the ranking does not depend on the machine's load: the same lines under CPU contention that makes it slower than a time budget would allow", async () => {
    const snap = await pool.snapshot(demo, { language: 'python' });
    await inSandbox(
      snap,
      async (exec) => {
        await exec(`sed -i '14s/if qty <= 0:/if not (qty <= 0):/' inventory/stock.py`);
        const t0 = Date.now();
        const idle = await exec('tw-suspects');
        const idleMs = Date.now() - t0;
        assert.equal(suspectLines(idle.stdout)[0], 'inventory/stock.py:14: if not (qty <= 0):', idle.stdout);
        // Busy loops in the same container (it has one CPU), doubled until the tool runs past the
        // 12 s time budget the re-ranking once had (which then cut it short and ranked by Ochiai
        // alone: the constructor first). Doubled, not computed from the idle time: contention
        // stretches a pytest run far more than the loops' share of the CPU would say (30x the wall
        // time for 8 loops), and by how much depends on the kernel.
        const tries: string[] = [];
        let busyMs = 0;
        for (let hogs = 1; busyMs <= 12_000 && hogs <= 64; hogs *= 2) {
          const t1 = Date.now();
          const busy = await exec(
            `for i in $(seq ${hogs}); do (while :; do :; done) & done; tw-suspects; rc=$?; kill $(jobs -p) 2>/dev/null; exit $rc`,
          );
          busyMs = Date.now() - t1;
          tries.push(`${hogs} loops: ${busyMs} ms`);
          const what = `idle ${idleMs} ms; ${tries.join(', ')}`;
          assert.equal(busy.exitCode, 1, `${what}\n${busy.stdout}${busy.stderr}`);
          assert.equal(busy.stdout, idle.stdout, what);
        }
        assert.ok(busyMs > 12_000, `precondition: contention made the tool slower than 12 s (idle ${idleMs} ms; ${tries.join(', ')})`);
      },
      180_000,
    );
  });

  it('a variant that loops forever is cut off, and the bug line after it still ranks first', async () => {
    // Ochiai ties lines 2-5 (every test runs them all) and keeps them in line order; line 4's
    // variants `i -= 1`, `i *= 1`, ... never end.
    const snap = await snapshotOf('loop', {
      'counter.py': 'def count_up(n):\n    i = 0\n    while i < n:\n        i += 1\n    return i + 1\n',
      'tests/test_counter.py':
        'from counter import count_up\n\n\ndef test_three():\n    assert count_up(3) == 3\n\n\ndef test_zero():\n    assert count_up(0) == 0\n',
    });
    await inSandbox(snap, async (exec) => {
      const t0 = Date.now();
      const r = await exec('tw-suspects');
      const ms = Date.now() - t0;
      assert.equal(r.exitCode, 1, `${r.stdout}\n${r.stderr}`);
      assert.match(r.stdout, /^2 failed, 0 passed\n/);
      assert.equal(suspectLines(r.stdout)[0], 'counter.py:5: return i + 1', r.stdout);
      // Not a timing assertion on speed: a tool without the per-variant cut-off runs into the
      // 60 s command timeout (exit null) instead of answering.
      assert.ok(ms < 59_000, `${ms} ms`);
      const ps = await exec('ps -eo args | grep -c "[t]urnwise_tools" || true');
      assert.equal(ps.stdout.trim(), '0', 'no mutant child left running');
    });
  });

  it("a suite slower than the floor of the per-variant CPU limit: the variants still run (the limits come from the suite's own run), and the bug ranks first", async () => {
    // Ochiai ties lines 2-3 and keeps line order; line 2 has no one-token variant, so the
    // re-ranking tries line 3 alone, whose `* 1` fixes it. The test spends ~1.2 CPU s in C
    // (PBKDF2, calibrated here), more than the 1 s floor: with a fixed 1 s limit every variant's
    // run is cut off, none scores, and the Ochiai order (line 2 first) stands.
    const snap = await snapshotOf('slow', {
      'totals.py': 'def doubled_total(n):\n    total = sum(range(n))\n    return total * 2\n',
      'tests/test_totals.py': [
        'import hashlib',
        'import pathlib',
        '',
        'from totals import doubled_total',
        '',
        'ROUNDS = int((pathlib.Path(__file__).parent / "rounds.txt").read_text())',
        '',
        '',
        'def test_total():',
        '    hashlib.pbkdf2_hmac("sha256", b"x", b"y", ROUNDS)',
        '    assert doubled_total(10) == 45',
        '',
      ].join('\n'),
      'tests/rounds.txt': '1\n',
    });
    // A command limit whose guard (80% of it) a loaded machine does not reach: about 6 CPU s of
    // variant runs.
    await inSandbox(
      snap,
      async (exec) => {
        const rate = await exec(
          `python3 -c 'import hashlib,time; t=time.process_time(); hashlib.pbkdf2_hmac("sha256", b"x", b"y", 200000); print(200000 / (time.process_time() - t))'`,
        );
        const rounds = Math.ceil(1.2 * Number(rate.stdout.trim()));
        assert.ok(rounds > 0, rate.stdout + rate.stderr);
        assert.equal((await exec(`echo ${rounds} > tests/rounds.txt`)).exitCode, 0);
        const ochiai = await exec('TW_MUTATE=0 tw-suspects');
        assert.equal(suspectLines(ochiai.stdout)[0], 'totals.py:2: total = sum(range(n))', ochiai.stdout);
        const ranked = await exec('tw-suspects');
        assert.equal(ranked.exitCode, 1, ranked.stdout + ranked.stderr);
        assert.equal(suspectLines(ranked.stdout)[0], 'totals.py:3: return total * 2', ranked.stdout);
      },
      180_000,
    );
  });

  // A module of constants and a function with a default, and its tests, added to the demo inside
  // the sandbox: the kinds of line a coverage of test calls alone never lists.
  const UNITS = `printf 'GRAMS_PER_KG = 1000\nSECONDS_PER_DAY = 86400\n\n\ndef per_day(total, days=7):\n    return total / days\n' > inventory/units.py && printf 'from inventory import units\n\n\ndef test_day():\n    assert units.SECONDS_PER_DAY == 24 * 3600\n\n\ndef test_kg():\n    assert units.GRAMS_PER_KG == 1000\n\n\ndef test_per_day():\n    assert units.per_day(14) == 2\n' > tests/test_units.py`;

  it('a bug in a constant that only the import runs: the import-time lines are suspects, and the mutation analysis ranks the bug first', async () => {
    const snap = await pool.snapshot(demo, { language: 'python' });
    await inSandbox(snap, async (exec) => {
      assert.equal((await exec(UNITS)).exitCode, 0);
      assert.equal((await exec('tw-test')).exitCode, 0, 'the added module passes its tests');
      await exec(`sed -i 's/86400/86401/' inventory/units.py`);
      // The failing test runs no line of the source: only the import did.
      const ochiai = await exec('TW_MUTATE=0 tw-suspects');
      assert.ok(suspectLines(ochiai.stdout).includes('inventory/units.py:2: SECONDS_PER_DAY = 86401'), ochiai.stdout);
      // Docstrings and imports the imports ran are not suspects.
      assert.ok(
        suspectLines(ochiai.stdout).every((l) => !/: ("""|import |from )/.test(l)),
        ochiai.stdout,
      );
      const ranked = await exec('tw-suspects');
      assert.equal(ranked.exitCode, 1);
      assert.match(ranked.stdout, /^1 failed, 15 passed\n/);
      assert.equal(suspectLines(ranked.stdout)[0], 'inventory/units.py:2: SECONDS_PER_DAY = 86401', ranked.stdout);
    });
  });

  it('a bug in a default argument: the def line is a suspect and ranks first', async () => {
    const snap = await pool.snapshot(demo, { language: 'python' });
    await inSandbox(snap, async (exec) => {
      assert.equal((await exec(`${UNITS} && sed -i 's/days=7/days=6/' inventory/units.py`)).exitCode, 0);
      const ranked = await exec('tw-suspects');
      assert.equal(ranked.exitCode, 1);
      assert.equal(suspectLines(ranked.stdout)[0], 'inventory/units.py:5: def per_day(total, days=6):', ranked.stdout);
      // A def line without a default is still no suspect.
      assert.ok(
        suspectLines(ranked.stdout).every((l) => !/: (def|class) [^=]*$/.test(l)),
        ranked.stdout,
      );
    });
  });

  it('code that breaks pytest itself (an os.name patched and left behind): tw-test and tw-suspects say the run stopped early and do not pass it', async () => {
    const snap = await pool.snapshot(demo, { language: 'python' });
    await inSandbox(snap, async (exec) => {
      const before = await exec('tw-test');
      assert.equal(before.exitCode, 0, before.stdout);
      // pytest's own reporting then builds a WindowsPath on Linux and ends the session (exit 3)
      // after the test that did it: the tests that ran all passed.
      await exec(`printf 'import os\n\ndef test_aa_patches():\n    os.name = "nt"\n' > tests/test_aa_patch.py`);
      for (const tool of ['tw-test', 'tw-suspects']) {
        const r = await exec(tool);
        assert.equal(r.exitCode, 1, `${tool} must not pass a run that stopped early:\n${r.stdout}`);
        assert.match(r.stdout, /pytest stopped early \(exit 3, internal error\), not every test ran: \S/, r.stdout);
      }
    });
  });

  it('a deleted statement (no one-token variant fixes it): the Ochiai order is kept', async () => {
    const snap = await pool.snapshot(demo, { language: 'python' });
    await inSandbox(snap, async (exec) => {
      await exec(`sed -i '29s/raise ValueError("ship more than reserved")/pass/' inventory/stock.py`);
      const ochiai = await exec('TW_MUTATE=0 tw-suspects');
      const ranked = await exec('tw-suspects');
      assert.equal(ranked.exitCode, 1);
      assert.ok(suspectLines(ranked.stdout).length > 0);
      assert.equal(ranked.stdout, ochiai.stdout);
    });
  });
});
