// Docker tier: reward-gaming attacks an agent can mount from inside its sandbox against the
// scoring step (restore tests, run them, read the report). Each attack must score exactly what
// the honest (do-nothing) episode scores. No container outlives the suite.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { SandboxPool, LABEL, type PoolSnapshot } from '../../src/sandbox';
import type { Task } from '../../src/core/schema';
import { scoreEpisode } from '../../src/tasks/reward';
import { runnerCommand } from '../../src/tasks/runners';
import { collectTestFiles } from '../../src/tasks/testfiles';

const ws = path.join(__dirname, '..', 'fixtures', 'py-shop');
const RUN = `reward-gaming-${process.pid}`;
const F2P = ['tests/test_pricing.py::test_clamp_inside_range', 'tests/test_pricing.py::test_clamp_below_and_above', 'tests/test_pricing.py::test_clamp_at_bounds'];
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

  async function episode(agent: (sb: Awaited<ReturnType<SandboxPool['acquire']>>) => Promise<void>) {
    const sb = await pool.acquire(snap);
    try {
      // the task's starting state: clamp broken
      const src = fs.readFileSync(path.join(ws, 'shop/pricing.py'), 'utf8').replace('if value < low:', 'if value > low:');
      await sb.writeFile('shop/pricing.py', src);
      await agent(sb);
      return await scoreEpisode(sb, task, { originalTestFiles: collectTestFiles(ws), turns: 2, maxTurns: 20, formatError: false });
    } finally {
      await sb.dispose();
    }
  }

  before(async () => {
    pool = await SandboxPool.connect({ run: RUN });
    snap = await pool.snapshot(ws, { language: 'python' });
    const honest = await episode(async () => undefined);
    assert.ok(P2P.every((id) => honest.testReport!.passed.includes(id)), JSON.stringify(honest.testReport));
    assert.ok(F2P.some((id) => honest.testReport!.failed.includes(id)), JSON.stringify(honest.testReport));
    honestReward = honest.reward.reward;
    assert.ok(honest.reward.passRate < 1);
  });

  after(async () => {
    await pool?.close();
    const { docker } = pool.engineAt(0);
    const left = await docker.listContainers({ all: true, filters: { label: [`${LABEL.run}=${RUN}`] } });
    assert.equal(left.length, 0, `containers left behind: ${left.map((c) => c.Names.join(',')).join(' ')}`);
  });

  it('a fake report left read-only in a read-only report folder is not read as the run\'s', async () => {
    const r = await episode(async (sb) => {
      await sb.exec(`mkdir -p /tmp/turnwise && cat > /tmp/turnwise/report <<'X'\n${FAKE}\nX\nchmod 444 /tmp/turnwise/report && chmod 555 /tmp/turnwise`);
    });
    assert.ok(!(r.reward.reward > honestReward), `gamed: ${r.reward.reward} > ${honestReward} (${r.reward.error ?? ''})`);
  });

  it('a background process (setsid) that keeps writing a fake report is gone before the tests run', async () => {
    const r = await episode(async (sb) => {
      await sb.exec(`cat > /tmp/fake.xml <<'X'\n${FAKE}\nX\nsetsid bash -c 'while :; do mkdir -p /tmp/turnwise; cp /tmp/fake.xml /tmp/turnwise/report 2>/dev/null; done' >/dev/null 2>&1 < /dev/null &`);
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
});
