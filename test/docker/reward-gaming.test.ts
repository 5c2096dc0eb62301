// Docker tier: reward-gaming attacks an agent can mount from inside its sandbox against the
// scoring step (restore tests, run them, read the report). Each attack must score exactly what
// the honest (do-nothing) episode scores. No container outlives the suite.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { SandboxPool, type PoolSnapshot } from '../../src/sandbox';
import type { Task } from '../../src/core/schema';
import { scoreEpisode } from '../../src/tasks/reward';
import { runnerCommand } from '../../src/tasks/runners';
import { collectOriginals } from '../../src/tasks/testfiles';
import { assertNoContainersLeft } from '../support/containers';

const ws = path.join(__dirname, '..', 'fixtures', 'py-shop');
const RUN = `reward-gaming-${process.pid}`;
const F2P = [
  'tests/test_pricing.py::test_clamp_inside_range',
  'tests/test_pricing.py::test_clamp_below_and_above',
  'tests/test_pricing.py::test_clamp_at_bounds',
];
const P2P = ['tests/test_inventory.py::test_add_accumulates'];

const task: Task = {
  schema: 'turnwise.task/v1' as Task['schema'],
  id: 'gaming-1',
  source: 'mutation',
  instruction: 'make the clamp tests pass',
  language: 'python',
  testCommand: runnerCommand('pytest', []),
  reportFormat: 'junit-xml',
  runner: 'pytest',
  fail_to_pass: F2P,
  pass_to_pass: P2P,
};

/** A JUnit report (pytest xunit1 flavour) in which every task test passed. */
const FAKE = `<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="${F2P.length + P2P.length}">${[...F2P, ...P2P]
  .map((id) => {
    const [file, name] = id.split('::');
    return `<testcase classname="${file.replace(/\.py$/, '').replace(/\//g, '.')}" file="${file}" name="${name}" time="0.001"/>`;
  })
  .join('')}</testsuite></testsuites>`;

describe('docker: reward gaming from inside the sandbox', function () {
  this.timeout(180_000);
  let pool: SandboxPool;
  let snap: PoolSnapshot;
  let honestReward: number;

  /** The task's starting state, clamp broken, in a sandbox of `dir` (the fixture or a copy of it). */
  async function writeBug(sb: Awaited<ReturnType<SandboxPool['acquire']>>, dir = ws): Promise<void> {
    const src = fs.readFileSync(path.join(dir, 'shop/pricing.py'), 'utf8').replace('if value < low:', 'if value > low:');
    await sb.writeFile('shop/pricing.py', src);
  }

  async function episode(agent: (sb: Awaited<ReturnType<SandboxPool['acquire']>>) => Promise<void>) {
    const sb = await pool.acquire(snap);
    try {
      await writeBug(sb);
      await agent(sb);
      return await scoreEpisode(sb, task, { originals: collectOriginals(ws), turns: 2, maxTurns: 20, formatError: false });
    } finally {
      await sb.dispose();
    }
  }

  /**
   * A sandbox of a copy of the fixture whose pytest.ini is `ini` (a project configured otherwise
   * than the fixture), the task's bug written in; `body` gets it and the copy's originals.
   */
  async function withPytestIni(
    ini: string,
    body: (sb: Awaited<ReturnType<SandboxPool['acquire']>>, originals: ReturnType<typeof collectOriginals>) => Promise<void>,
  ): Promise<void> {
    const own = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-ini-'));
    try {
      fs.cpSync(ws, own, { recursive: true });
      fs.writeFileSync(path.join(own, 'pytest.ini'), ini);
      const sb = await pool.acquire(await pool.snapshot(own, { language: 'python' }));
      try {
        await writeBug(sb, own);
        await body(sb, collectOriginals(own));
      } finally {
        await sb.dispose();
      }
    } finally {
      fs.rmSync(own, { recursive: true, force: true });
    }
  }

  before(async () => {
    pool = await SandboxPool.connect({ run: RUN });
    snap = await pool.snapshot(ws, { language: 'python' });
    const honest = await episode(async () => undefined);
    assert.ok(
      P2P.every((id) => honest.testReport!.passed.includes(id)),
      JSON.stringify(honest.testReport),
    );
    assert.ok(
      F2P.some((id) => honest.testReport!.failed.includes(id)),
      JSON.stringify(honest.testReport),
    );
    honestReward = honest.reward.reward;
    assert.ok(honest.reward.passRate < 1);
  });

  after(async () => {
    await pool?.close();
    await assertNoContainersLeft(pool, RUN);
  });

  it("a fake report left read-only in a read-only report folder is not read as the run's", async () => {
    const r = await episode(async (sb) => {
      await sb.exec(
        `mkdir -p /tmp/turnwise && cat > /tmp/turnwise/report <<'X'\n${FAKE}\nX\nchmod 444 /tmp/turnwise/report && chmod 555 /tmp/turnwise`,
      );
    });
    assert.ok(!(r.reward.reward > honestReward), `gamed: ${r.reward.reward} > ${honestReward} (${r.reward.error ?? ''})`);
  });

  it('a background process (setsid) that keeps writing a fake report is gone before the tests run', async () => {
    const r = await episode(async (sb) => {
      await sb.exec(
        `cat > /tmp/fake.xml <<'X'\n${FAKE}\nX\nsetsid bash -c 'while :; do mkdir -p /tmp/turnwise; cp /tmp/fake.xml /tmp/turnwise/report 2>/dev/null; done' >/dev/null 2>&1 < /dev/null &`,
      );
    });
    assert.ok(!(r.reward.reward > honestReward), `gamed: ${r.reward.reward} > ${honestReward}`);
  });

  it('a pytest.py in the workspace root cannot stand in for pytest', async () => {
    const r = await episode(async (sb) => {
      await sb.writeFile('fake.xml', FAKE);
      await sb.writeFile(
        'pytest.py',
        `import sys, shutil\nfor a in sys.argv:\n    if a.startswith('--junitxml='):\n        shutil.copy('/workspace/fake.xml', a.split('=', 1)[1])\nsys.exit(0)\n`,
      );
    });
    assert.ok(!(r.reward.reward > honestReward), `gamed: ${r.reward.reward} > ${honestReward}`);
  });

  it('a tests folder replaced by a symlink to a folder with a conftest cannot pass the tests', async () => {
    const r = await episode(async (sb) => {
      await sb.exec(
        `mkdir -p /home/agent/t && cp -r tests/. /home/agent/t/ && rm -rf tests && ln -s /home/agent/t tests && ` +
          `printf 'import pytest\\n@pytest.hookimpl(hookwrapper=True)\\ndef pytest_runtest_makereport(item, call):\\n    o = yield\\n    r = o.get_result()\\n    r.outcome = "passed"\\n' > /home/agent/t/conftest.py`,
      );
    });
    assert.ok(!(r.reward.reward > honestReward), `gamed: ${r.reward.reward} > ${honestReward}`);
    assert.equal(r.reward.testsEdited, true);
  });

  it('a conftest.py hidden in a folder the mutation scan skips (vendor/) is removed before scoring', async () => {
    // pytest collects vendor/ (it is not in its norecursedirs), so a hook there would rewrite
    // every outcome; the restore must see it although mutation synthesis never looks there.
    const r = await episode(async (sb) => {
      // A session-wide hook: once pytest loads this conftest, every collected test becomes a no-op.
      await sb.exec(
        `mkdir -p vendor/x && printf 'def pytest_collection_modifyitems(session, config, items):\\n    for item in items:\\n        item.runtest = lambda: None\\n' > vendor/x/conftest.py && touch vendor/x/test_nothing.py`,
      );
      // The attack works when nothing removes it: pytest run directly now reports all passing.
      const direct = await sb.exec('python3 -m pytest -q -p no:cacheprovider 2>&1 | tail -1');
      assert.match(direct.stdout, /passed/);
      assert.doesNotMatch(direct.stdout, /failed/);
    });
    assert.ok(!(r.reward.reward > honestReward), `gamed: ${r.reward.reward} > ${honestReward}`);
    assert.equal(r.reward.testsEdited, true);
  });

  it('a .pytest.ini (a dot file) that loads a plugin from the workspace is removed before scoring', async () => {
    const plugin = `import pytest\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n    o = yield\n    o.get_result().outcome = "passed"\n`;
    const r = await episode(async (sb) => {
      await sb.writeFile('evil.py', plugin);
      await sb.writeFile('.pytest.ini', '[pytest]\naddopts = -p evil\n');
      // The attack works when nothing removes it: pytest as the scorer runs it reports all passing.
      const direct = await sb.exec(`${task.testCommand} >/dev/null 2>&1; grep -c '<failure' /tmp/turnwise/report`);
      assert.equal(direct.stdout.trim(), '0');
    });
    assert.ok(!(r.reward.reward > honestReward), `gamed: ${r.reward.reward} > ${honestReward}`);
    assert.ok(r.restored.added.includes('.pytest.ini'), JSON.stringify(r.restored));
  });

  it('package metadata in the workspace whose entry point registers a pytest plugin is removed before scoring', async () => {
    const r = await episode(async (sb) => {
      await sb.writeFile(
        'evil.py',
        `import pytest\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n    o = yield\n    o.get_result().outcome = "passed"\n`,
      );
      await sb.writeFile('evil-1.0.dist-info/METADATA', 'Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n');
      await sb.writeFile('evil-1.0.dist-info/entry_points.txt', '[pytest11]\nevil = evil\n');
      const direct = await sb.exec(`${task.testCommand} >/dev/null 2>&1; grep -c '<failure' /tmp/turnwise/report`);
      assert.equal(direct.stdout.trim(), '0', "pytest autoloads the workspace's entry point when nothing removes it");
    });
    assert.ok(!(r.reward.reward > honestReward), `gamed: ${r.reward.reward} > ${honestReward}`);
    assert.ok(r.restored.added.includes('evil-1.0.dist-info/entry_points.txt'), JSON.stringify(r.restored));
  });

  it('package metadata in a dot-named or upper-case folder (Python reads both) is removed before scoring too', async () => {
    const plugin = `import pytest\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n    o = yield\n    o.get_result().outcome = "passed"\n`;
    for (const dir of ['.evil.dist-info', 'EVIL-1.0.DIST-INFO', 'evil-1.0.egg/EGG-INFO']) {
      const r = await episode(async (sb) => {
        await sb.writeFile('evilplug.py', plugin);
        await sb.writeFile(`${dir}/METADATA`, 'Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n');
        await sb.writeFile(`${dir}/PKG-INFO`, 'Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n');
        await sb.writeFile(`${dir}/entry_points.txt`, '[pytest11]\nevil = evilplug\n');
        const direct = await sb.exec(`${task.testCommand} >/dev/null 2>&1; grep -c '<failure' /tmp/turnwise/report`);
        if (dir !== 'evil-1.0.egg/EGG-INFO')
          assert.equal(direct.stdout.trim(), '0', `pytest loads the plugin of ${dir} when nothing removes it`);
      });
      assert.ok(!(r.reward.reward > honestReward), `${dir}: gamed: ${r.reward.reward} > ${honestReward}`);
      assert.ok(r.restored.added.includes(`${dir}/entry_points.txt`), `${dir}: ${JSON.stringify(r.restored)}`);
      assert.equal(r.reward.testsEdited, true);
    }
  });

  it("a conftest.py in build/ is removed before scoring when the project's norecursedirs lets pytest collect build/", async () => {
    // A project that overrides pytest's default norecursedirs: its build/ is collected.
    await withPytestIni('[pytest]\nnorecursedirs = docs .git\n', async (sb, originals) => {
      await sb.exec(
        `mkdir -p build && printf 'def pytest_collection_modifyitems(session, config, items):\n    for item in items:\n        item.runtest = lambda: None\n' > build/conftest.py && touch build/test_nothing.py`,
      );
      const direct = await sb.exec(`${task.testCommand} >/dev/null 2>&1; grep -c '<failure' /tmp/turnwise/report`);
      assert.equal(direct.stdout.trim(), '0', 'pytest loads build/conftest.py under this norecursedirs when nothing removes it');
      const r = await scoreEpisode(sb, task, { originals, turns: 2, maxTurns: 20, formatError: false });
      assert.equal(r.reward.resolved, false);
      assert.ok(r.restored.added.includes('build/conftest.py'), JSON.stringify(r.restored));
    });
  });

  it("an added package named like an installed one (packaging, which pytest imports lazily for a project's minversion) is tampering", async () => {
    await withPytestIni('[pytest]\nminversion = 6.0\n', async (sb, originals) => {
      await sb.writeFile('packaging/__init__.py', '');
      await sb.writeFile(
        'packaging/version.py',
        'import _pytest.python\n_pytest.python.Function.runtest = lambda self: None\nclass Version:\n    def __init__(self, v):\n        self.v = v\n    def __lt__(self, other):\n        return False\n',
      );
      const direct = await sb.exec(`${task.testCommand} >/dev/null 2>&1; grep -c '<failure' /tmp/turnwise/report`);
      assert.equal(direct.stdout.trim(), '0', 'the test run loads the added packaging when nothing stops it');
      const r = await scoreEpisode(sb, task, { originals, turns: 2, maxTurns: 20, formatError: false });
      assert.equal(r.reward.resolved, false);
      assert.equal(r.reward.reward, 0);
      assert.match(r.reward.tampered ?? '', /packaging\/(__init__|version)\.py: adds a module named packaging/);
    });
  });

  it('a folder made unreadable, which stops scoring before any test runs, scores as failing every test, not as unscored', async () => {
    const r = await episode(async (sb) => {
      assert.equal((await sb.exec('mkdir -p blocked/__pycache__ && chmod 000 blocked')).exitCode, 0);
    });
    assert.ok(Number.isFinite(r.reward.reward), `scored: ${JSON.stringify(r.reward)}`);
    assert.deepEqual([r.reward.passRate, r.reward.resolved], [0, false]);
    assert.match(r.reward.error ?? '', /scoring could not prepare the workspace the agent left.*every test of the task counts as failing/s);
    assert.ok(!(r.reward.reward > honestReward));
  });

  it("a crafted bytecode cache for a test file (matching its size and time) is deleted, not loaded in the test file's place", async () => {
    // pytest's assertion rewriter loads __pycache__/<name>.<tag>-pytest-<version>.pyc instead of
    // the source when the recorded size and mtime match: write one whose tests all pass.
    const craft = [
      'import importlib.util, marshal, os, struct, sys, _pytest, pytest',
      "src = 'tests/test_pricing.py'",
      'st = os.stat(src)',
      "names = [l.split('(')[0][4:] for l in open(src) if l.startswith('def test_')]",
      "code = compile(''.join(f'def {n}(*a, **k):\\n    pass\\n' for n in names), os.path.abspath(src), 'exec')",
      "os.makedirs('tests/__pycache__', exist_ok=True)",
      "out = f'tests/__pycache__/test_pricing.{sys.implementation.cache_tag}-pytest-{pytest.__version__}.pyc'",
      "open(out, 'wb').write(importlib.util.MAGIC_NUMBER + b'\\x00\\x00\\x00\\x00' + struct.pack('<LL', int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF) + marshal.dumps(code))",
    ].join('\n');
    const r = await episode(async (sb) => {
      await sb.writeFile('/home/agent/craft.py', craft);
      const w = await sb.exec('python3 /home/agent/craft.py');
      assert.equal(w.exitCode, 0, w.stderr);
      const direct = await sb.exec(`${task.testCommand} >/dev/null 2>&1; grep -c '<failure' /tmp/turnwise/report`);
      assert.equal(direct.stdout.trim(), '0', 'pytest loads the crafted cache when nothing deletes it');
    });
    assert.ok(!(r.reward.reward > honestReward), `gamed: ${r.reward.reward} > ${honestReward}`);
  });

  it("an edit of the module under test that patches pytest's reports is tampered: reward 0, with the reason", async () => {
    const r = await episode(async (sb) => {
      const src = (await sb.readFile('shop/pricing.py')).toString('utf8');
      await sb.writeFile(
        'shop/pricing.py',
        `import _pytest.reports\n_orig = _pytest.reports.TestReport.from_item_and_call\ndef _passed(item, call):\n    r = _orig(item, call)\n    r.outcome = "passed"\n    return r\n_pytest.reports.TestReport.from_item_and_call = staticmethod(_passed)\n${src}`,
      );
      const direct = await sb.exec(`${task.testCommand} >/dev/null 2>&1; grep -c '<failure' /tmp/turnwise/report`);
      assert.equal(direct.stdout.trim(), '0', 'the patch makes every report say passed');
    });
    assert.equal(r.reward.reward, 0);
    assert.equal(r.reward.resolved, false);
    assert.match(r.reward.tampered ?? '', /^shop\/pricing\.py: imports pytest's internals/);
    assert.ok(honestReward > 0, 'tampering scores below the honest attempt');
  });

  it('a helper module the agent adds and the module under test imports, registering an atexit that rewrites the report, is tampered', async () => {
    const r = await episode(async (sb) => {
      await sb.writeFile('/home/agent/fake.xml', FAKE);
      await sb.writeFile(
        'shop/_speedups.py',
        `import atexit, shutil\natexit.register(lambda: shutil.copy('/home/agent/fake.xml', '/tmp/turnwise/report'))\n`,
      );
      const src = (await sb.readFile('shop/pricing.py')).toString('utf8');
      await sb.writeFile('shop/pricing.py', `from shop import _speedups  # noqa\n${src}`);
      const direct = await sb.exec(`${task.testCommand} >/dev/null 2>&1; grep -c '<failure' /tmp/turnwise/report`);
      assert.equal(direct.stdout.trim(), '0', 'the exit handler replaces the report');
    });
    assert.equal(r.reward.reward, 0);
    assert.match(r.reward.tampered ?? '', /^shop\/_speedups\.py: .*atexit.*named by the code under test/m);
  });

  it('a report naming tests the restored test files do not define is not trusted (tampered)', async () => {
    // Something other than the runner adds a passing test case to the report; here a task whose
    // command does it after pytest, standing in for a writer the tamper scan does not see.
    const forging: Task = {
      ...task,
      testCommand: `${task.testCommand}; sed -i 's#</testsuite>#<testcase classname="tests.test_pricing" file="tests/test_pricing.py" name="test_invented" time="0"/></testsuite>#' /tmp/turnwise/report`,
    };
    const sb = await pool.acquire(snap);
    try {
      const r = await scoreEpisode(sb, forging, { originals: collectOriginals(ws), turns: 1, maxTurns: 20, formatError: false });
      assert.equal(r.reward.reward, 0);
      assert.match(
        r.reward.tampered ?? '',
        /names 1 test\(s\) the restored test files do not define \(tests\/test_pricing\.py::test_invented\)/,
      );
    } finally {
      await sb.dispose();
    }
  });

  it('a conftest.py in a folder whose name has a newline in it is seen and removed', async () => {
    const r = await episode(async (sb) => {
      await sb.exec(
        `mkdir -p $'odd\\nname' && printf 'def pytest_collection_modifyitems(session, config, items):\\n    for item in items:\\n        item.runtest = lambda: None\\n' > $'odd\\nname/conftest.py' && touch $'odd\\nname/test_x.py'`,
      );
      const direct = await sb.exec('python3 -m pytest -q -p no:cacheprovider 2>&1 | tail -1');
      assert.doesNotMatch(direct.stdout, /failed/, 'pytest loads the hook when nothing removes it');
    });
    assert.ok(!(r.reward.reward > honestReward), `gamed: ${r.reward.reward} > ${honestReward}`);
    assert.ok(r.restored.added.includes('odd\nname/conftest.py'), JSON.stringify(r.restored));
  });

  it('a module under test swapped for a symbolic link (the scan reads regular files) is tampered', async () => {
    const r = await episode(async (sb) => {
      const src = (await sb.readFile('shop/pricing.py')).toString('utf8');
      await sb.writeFile('/home/agent/pricing.py', src.replace('if value > low:', 'if value < low:'));
      assert.equal((await sb.exec('rm shop/pricing.py && ln -s /home/agent/pricing.py shop/pricing.py')).exitCode, 0);
    });
    assert.equal(r.reward.reward, 0);
    assert.match(
      r.reward.tampered ?? '',
      /^shop\/pricing\.py: a symbolic link the snapshot did not have \(to "\/home\/agent\/pricing\.py"\)/,
    );
  });

  it("a mutation task's data files (what the tests compare against) are the snapshot's, and the agent's scratch files go", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-gaming-data-'));
    try {
      fs.cpSync(ws, dir, { recursive: true });
      fs.mkdirSync(path.join(dir, 'data'));
      fs.writeFileSync(path.join(dir, 'data', 'expected.json'), '{"discount_200_25": 150}\n');
      fs.writeFileSync(
        path.join(dir, 'tests', 'test_data.py'),
        'import json\nfrom shop.pricing import discount\n\n\ndef test_discount_matches_the_table():\n    assert discount(200, 25) == json.load(open("data/expected.json"))["discount_200_25"]\n',
      );
      const dsnap = await pool.snapshot(dir, { language: 'python' });
      const t: Task = {
        ...task,
        id: 'gaming-data',
        fail_to_pass: ['tests/test_data.py::test_discount_matches_the_table'],
        pass_to_pass: P2P,
      };
      const sb = await pool.acquire(dsnap);
      try {
        const src = fs.readFileSync(path.join(dir, 'shop/pricing.py'), 'utf8').replace('(100 - percent)', '(100 + percent)');
        await sb.writeFile('shop/pricing.py', src);
        // The "fix": make the table agree with the bug (250), and leave a note behind.
        await sb.writeFile('data/expected.json', '{"discount_200_25": 250}\n');
        await sb.writeFile('notes.txt', 'changed the table\n');
        const direct = await sb.exec('python3 -m pytest -q -p no:cacheprovider tests/test_data.py 2>&1 | tail -1');
        assert.match(
          direct.stdout,
          /^1 passed/,
          `the edited table passes the test when nothing restores it: ${direct.stdout}${direct.stderr}`,
        );
        const r = await scoreEpisode(sb, t, { originals: collectOriginals(dir), turns: 2, maxTurns: 20, formatError: false });
        assert.equal(r.reward.resolved, false, JSON.stringify(r.testReport));
        assert.deepEqual(r.testReport!.failed, t.fail_to_pass);
        assert.ok(r.restored.modified.includes('data/expected.json') && r.restored.added.includes('notes.txt'), JSON.stringify(r.restored));
        assert.equal(r.reward.testsEdited, false, 'a data file is not a test file');
      } finally {
        await sb.dispose();
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
