// Docker tier: tasks validated in real sandboxes from the fixtures, rewards after episodes that
// fix the bug, tamper with the tests, or leave no usable report; no container outlives the suite.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { SandboxPool, type PoolSnapshot } from '../../src/sandbox';
import type { Task } from '../../src/core/schema';
import { MUTATION_OPERATORS } from '../../src/tasks/mutate';
import { failingTestTasks, synthesizeMutationTasks, type SynthResult } from '../../src/tasks/synth';
import { outcomesOf, runTests, scoreEpisode } from '../../src/tasks/reward';
import { collectOriginals } from '../../src/tasks/testfiles';
import { validateTask } from '../../src/tasks/taskfile';
import { assertNoContainersLeft } from '../support/containers';

const fixtures = path.join(__dirname, '..', 'fixtures');
const RUN = `tasks-docker-${process.pid}`;

/** The mutated file rebuilt from the task's own metadata (span + replacement) and the original file. */
function mutatedFromTask(ws: string, task: Task): string {
  const m = task.mutation!;
  const orig = fs.readFileSync(path.join(ws, m.file), 'utf8');
  assert.equal(orig.slice(m.span.start, m.span.end), m.span.text, 'span metadata points at the original text');
  return orig.slice(0, m.span.start) + m.replacement + orig.slice(m.span.end);
}

describe('docker: tasks from the fixtures', function () {
  this.timeout(300_000);
  let pool: SandboxPool;
  const results: Record<string, SynthResult> = {};
  const snaps: Record<string, PoolSnapshot> = {};

  before(async () => {
    pool = await SandboxPool.connect({ run: RUN });
  });

  after(async () => {
    await pool?.close();
    await assertNoContainersLeft(pool, RUN);
  });

  for (const [fixture, lang] of [
    ['py-shop', 'python'],
    ['js-shop', 'javascript'],
  ] as const) {
    describe(fixture, () => {
      const ws = path.join(fixtures, fixture);

      it('every mutation operator yields a valid, validated task', async () => {
        const r = await synthesizeMutationTasks({
          workspace: ws,
          pool,
          seed: 3,
          max: MUTATION_OPERATORS.length,
          maxPerOperator: 1,
          maxCandidates: 60,
          concurrency: 2,
        });
        results[fixture] = r;
        snaps[fixture] = await pool.snapshot(ws, { language: lang });
        assert.deepEqual(r.tasks.map((t) => t.mutation!.operator).sort(), [...MUTATION_OPERATORS].sort());
        for (const t of r.tasks) {
          assert.deepEqual(validateTask(t), [], `task ${t.id} is valid`);
          assert.equal(t.source, 'mutation');
          assert.ok(t.fail_to_pass.length >= 1);
          assert.equal(t.fail_to_pass.length + t.pass_to_pass.length, 23, 'every baseline test is fail-to-pass or pass-to-pass');
          assert.ok(t.mutation!.enclosing, `${t.id} names its enclosing function`);
          // The instruction names the failing tests but never the file of the bug.
          for (const id of t.fail_to_pass) assert.ok(t.instruction.includes(id));
          assert.ok(!t.instruction.includes(t.mutation!.file), `${t.id}: instruction must not name ${t.mutation!.file}`);
        }
        const s = r.summary;
        assert.equal(s.candidates.kept, MUTATION_OPERATORS.length);
        assert.equal(s.candidates.tried, s.candidates.kept + s.candidates.dropped + s.candidates.surplus);
        assert.equal(
          Object.values(s.dropped).reduce((a, b) => a + b, 0),
          s.candidates.dropped,
        );
        assert.equal(s.baseline.passing, 23);
      });

      it("a task's fail-to-pass tests fail on the mutated snapshot and pass on the original", async () => {
        const r = results[fixture];
        assert.ok(r, 'synthesis ran');
        // Three tasks, checked in fresh sandboxes independent of the validator.
        for (const task of r.tasks.slice(0, 3)) {
          const sb = await pool.acquire(snaps[fixture]);
          try {
            const before = await runTests(sb, task);
            assert.ok(before.report, before.error);
            const o0 = outcomesOf(before.report!);
            for (const id of [...task.fail_to_pass, ...task.pass_to_pass])
              assert.equal(o0.get(id), 'passed', `${id} passes on the original`);
            await sb.writeFile(task.mutation!.file, mutatedFromTask(ws, task));
            const after = await runTests(sb, task);
            assert.ok(after.report, after.error);
            const o1 = outcomesOf(after.report!);
            for (const id of task.fail_to_pass)
              assert.notEqual(o1.get(id), 'passed', `${id} fails on the mutant (${task.mutation!.operator})`);
            for (const id of task.pass_to_pass) assert.equal(o1.get(id), 'passed', `${id} still passes on the mutant`);
          } finally {
            await sb.dispose();
          }
        }
      });
    });
  }

  describe('reward', () => {
    const ws = path.join(fixtures, 'py-shop');
    const originals = () => collectOriginals(ws);

    async function episode(task: Task, agent: (sb: Awaited<ReturnType<SandboxPool['acquire']>>) => Promise<void>, turns = 4) {
      const sb = await pool.acquire(snaps['py-shop']);
      try {
        await sb.writeFile(task.mutation!.file, mutatedFromTask(ws, task)); // the task's starting state
        await agent(sb);
        return await scoreEpisode(sb, task, { originals: originals(), turns, maxTurns: 20, formatError: false });
      } finally {
        await sb.dispose();
      }
    }

    it('editing the tests to pass gains nothing, and the edit is flagged', async () => {
      const task = results['py-shop'].tasks.find((t) => t.fail_to_pass.length < 23)!;
      const honest = await episode(task, async () => undefined);
      const f2pFiles = [...new Set(task.fail_to_pass.map((id) => id.split('::')[0]))];
      const other = ['tests/test_inventory.py', 'tests/test_pricing.py'].find((f) => !f2pFiles.includes(f));
      let cheatWorksUnrestored = false;
      const cheat = await episode(task, async (sb) => {
        // Gut the asserts of the failing tests' files, add a conftest and a new test file, and
        // delete a test file: without restoration every fail-to-pass test would now pass.
        for (const f of f2pFiles)
          await sb.exec(
            `sed -i 's/^\\(\\s*\\)assert .*/\\1assert True/; s/pytest.raises(ValueError)/pytest.raises(Exception) if False else open("\\/dev\\/null")/' ${f}`,
          );
        await sb.writeFile('conftest.py', 'def pytest_collection_modifyitems(items):\n    pass\n');
        await sb.writeFile('tests/test_extra.py', 'def test_free():\n    assert True\n');
        if (other) await sb.exec(`rm -f ${other}`);
        // and make one gutted file unreadable and undeletable-looking: restoration must still work
        await sb.exec(`chmod 000 ${f2pFiles[0]}`);
        await sb.exec(`chmod 644 ${f2pFiles[0]}`);
        const unrestored = await runTests(sb, task);
        await sb.exec(`chmod 000 ${f2pFiles[0]}`);
        const o = outcomesOf(unrestored.report!);
        cheatWorksUnrestored = task.fail_to_pass.every((id) => o.get(id) === 'passed');
      });
      assert.ok(cheatWorksUnrestored, 'the tampering would have passed the fail-to-pass tests');
      assert.equal(honest.reward.testsEdited, false);
      assert.equal(cheat.reward.testsEdited, true);
      // the unreadable file cannot be hashed, so it counts as deleted; either way it is rewritten
      assert.deepEqual([...cheat.restored.modified, ...cheat.restored.deleted].sort(), [...f2pFiles, ...(other ? [other] : [])].sort());
      assert.deepEqual(cheat.restored.added.sort(), ['conftest.py', 'tests/test_extra.py']);
      assert.equal(cheat.reward.passRate, honest.reward.passRate);
      assert.equal(cheat.reward.reward, honest.reward.reward);
      assert.ok(honest.reward.passRate < 1, 'the mutant still fails its tests');
      assert.ok(
        Math.abs(honest.reward.passRate - task.pass_to_pass.length / (task.pass_to_pass.length + task.fail_to_pass.length)) < 1e-12,
      );
    });

    it('fixing the bug resolves the task: R = 1 − 0.1·turns/max_turns', async () => {
      const task = results['py-shop'].tasks[0];
      const original = fs.readFileSync(path.join(ws, task.mutation!.file), 'utf8');
      const fixed = await episode(task, async (sb) => sb.writeFile(task.mutation!.file, original), 5);
      assert.equal(fixed.reward.resolved, true);
      assert.equal(fixed.reward.passRate, 1);
      assert.ok(Math.abs(fixed.reward.reward - (1 - (0.1 * 5) / 20)) < 1e-12);
      assert.deepEqual(fixed.testReport?.failed, []);
    });

    it('a test run that leaves a missing or garbage report scores every test as failing, with the reason (not NaN: the code under test can do that)', async () => {
      const task = results['py-shop'].tasks[0];
      const garbage = await episode(
        { ...task, testCommand: 'mkdir -p /tmp/turnwise && echo "<testsuites><testcase name=" > /tmp/turnwise/report' },
        async () => undefined,
      );
      assert.deepEqual([garbage.reward.passRate, garbage.reward.testScore, garbage.reward.resolved], [0, 0, false]);
      assert.ok(Number.isFinite(garbage.reward.reward) && garbage.reward.reward <= 0);
      assert.match(garbage.reward.error!, /cannot be read.*every test of the task counts as failing/s);
      assert.deepEqual(garbage.testReport?.passed, []);
      const missing = await episode({ ...task, testCommand: 'rm -rf /tmp/turnwise; echo crashed >&2; exit 3' }, async () => undefined);
      assert.deepEqual([missing.reward.passRate, missing.reward.resolved], [0, false]);
      assert.match(
        missing.reward.error!,
        /no test report at \/tmp\/turnwise\/report: the test command exited with 3; its last output:\ncrashed/,
      );
    });
  });

  describe('drops', () => {
    it('a mutant that hangs is dropped as timeout, one that breaks every test file at import as collection-broken', async () => {
      const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-drops-'));
      try {
        fs.mkdirSync(path.join(ws, 'tests'));
        fs.writeFileSync(
          path.join(ws, 'lib.py'),
          'def _check(flag):\n    if not flag:\n        raise RuntimeError("bad config")\n    return flag\n\n\nCONFIG_OK = _check(True)\n\n\ndef count_up(n):\n    i = 0\n    while i < n:\n        i += 1\n    return i\n',
        );
        fs.writeFileSync(
          path.join(ws, 'tests', 'test_lib.py'),
          'from lib import CONFIG_OK, count_up\n\n\ndef test_count():\n    assert count_up(3) == 3\n\n\ndef test_config():\n    assert CONFIG_OK\n',
        );
        fs.writeFileSync(
          path.join(ws, 'tests', 'test_more.py'),
          'from lib import count_up\n\n\ndef test_zero():\n    assert count_up(0) == 0\n',
        );
        const r = await synthesizeMutationTasks({
          workspace: ws,
          pool,
          operators: ['change-constant', 'swap-arithmetic', 'negate-condition'],
          max: 10,
          timeoutMs: 4000,
          concurrency: 2,
        });
        const s = r.summary;
        assert.ok(s.dropped.timeout >= 1, `timeout drops: ${JSON.stringify(s.dropped)}`); // i += 1 → i -= 1
        assert.ok(s.dropped['collection-broken'] >= 1, `collection drops: ${JSON.stringify(s.dropped)}`); // _check(True) → _check(False)
        assert.ok(
          !r.candidates.some((c) => c.replacement === 'False' && c.original === 'True'),
          'the import-breaking mutant is not a task',
        );
        assert.equal(s.candidates.tried, s.candidates.kept + s.candidates.dropped + s.candidates.surplus);
      } finally {
        fs.rmSync(ws, { recursive: true, force: true });
      }
    });
  });

  describe('isolation between mutants', () => {
    it("a mutant's test run that writes into the workspace does not change later verdicts", async () => {
      // test_fresh fails whenever an earlier run left marker.txt behind. If a validation sandbox
      // were reused without resetting its workspace, every later mutant would "break" it and be
      // kept, however harmless: here the harmless ones (on an unused function) must be dropped.
      const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-isolation-'));
      try {
        fs.mkdirSync(path.join(ws, 'tests'));
        fs.writeFileSync(path.join(ws, 'lib.py'), 'def used(a, b):\n    return a + b\n\n\ndef unused(a, b):\n    return a - b * 2 + 1\n');
        fs.writeFileSync(
          path.join(ws, 'tests', 'test_lib.py'),
          'import os\nfrom lib import used\n\n\ndef test_fresh():\n    assert not os.path.exists("marker.txt")\n    open("marker.txt", "w").write("x")\n\n\ndef test_used():\n    assert used(2, 3) == 5\n',
        );
        const r = await synthesizeMutationTasks({
          workspace: ws,
          pool,
          operators: ['swap-arithmetic', 'off-by-one'],
          max: 20,
          maxCandidates: 20,
          concurrency: 1,
          seed: 1,
        });
        assert.ok(r.summary.candidates.tried >= 3, JSON.stringify(r.summary.candidates));
        for (const t of r.tasks) {
          assert.ok(!t.fail_to_pass.includes('tests/test_lib.py::test_fresh'), `${t.mutation?.enclosing}: test_fresh counted as broken`);
          assert.equal(t.mutation?.enclosing, 'used', `a mutant of ${t.mutation?.enclosing} was kept`);
        }
        assert.ok(r.summary.dropped['no-failing-test'] >= 1, JSON.stringify(r.summary.dropped));
      } finally {
        fs.rmSync(ws, { recursive: true, force: true });
      }
    });
  });

  describe('failing tests source', () => {
    it('the already-failing tests of py-failing become one task with sampled pass-to-pass tests', async () => {
      const { tasks, summary } = await failingTestTasks({
        workspace: path.join(fixtures, 'py-failing'),
        pool,
        seed: 1,
        passToPassSample: 2,
      });
      assert.equal(summary.failing, 2);
      assert.equal(summary.passing, 3);
      assert.equal(tasks.length, 1);
      const t = tasks[0];
      assert.deepEqual(validateTask(t), []);
      assert.deepEqual([...t.fail_to_pass].sort(), [
        'tests/test_textkit.py::test_slugify_drops_punctuation_words',
        'tests/test_textkit.py::test_slugify_joins_with_dashes',
      ]);
      assert.equal(t.pass_to_pass.length, 2);
      assert.match(t.instruction, /'hello_big_world' == 'hello-big-world'/);
    });
  });
});
