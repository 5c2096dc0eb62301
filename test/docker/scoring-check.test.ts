// Docker tier: the reward tells the truth on workspaces of the shapes where it once did not, and
// the scoring check (the no-op and the reference fix scored as an agent's episode is) finds the
// tasks and repositories where it cannot.
//   - tox.ini whose [testenv] runs `mypy -p <package>`: the package under test was taken for a
//     pytest plugin, restored before scoring, and every no-op scored resolved;
//   - parametrized ids holding `::`: the report check split them on every `::` and zeroed every
//     episode as tampered;
//   - task files whose tasks cannot tell a fix from no fix: named with the reason; a suite that
//     cannot be collected: refused; tests made at run time under names no file spells: scored;
//   - a package.json whose `main` names the module under test: it was taken for a runner setup
//     file, put back before scoring and never mutated.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from '../../src/cli/main';
import type { Task } from '../../src/core/schema';
import { SandboxPool } from '../../src/sandbox';
import { checkTasksInWorkspace } from '../../src/tasks/scoring-check';
import { synthesizeMutationTasks } from '../../src/tasks/synth';
import { writeTaskFile } from '../../src/tasks/taskfile';
import { benchScoringCorpus, pickCorpusRepos } from '../../src/bench/scoring-corpus';
import { collectOriginals } from '../../src/tasks/testfiles';
import { assertNoContainersLeft } from '../support/containers';

const RUN = `scoring-check-${process.pid}`;

function write(dir: string, files: Record<string, string>): string {
  for (const [rel, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), text);
  }
  return dir;
}

const SCHEDULE_PKG = `"""A tiny job scheduler."""


class Job:
    def __init__(self, interval):
        if interval <= 0:
            raise ValueError("interval must be positive")
        self.interval = interval
        self.unit = None

    def every(self, unit):
        self.unit = unit
        return self

    def seconds(self):
        if self.unit == "minutes":
            return self.interval * 60
        if self.unit == "hours":
            return self.interval * 3600
        return self.interval


def next_run(now, job):
    return now + job.seconds()
`;

const SCHEDULE_TESTS = `import pytest

from schedule import Job, next_run


def test_seconds_default():
    assert Job(5).seconds() == 5


def test_minutes():
    assert Job(2).every("minutes").seconds() == 120


def test_hours():
    assert Job(1).every("hours").seconds() == 3600


def test_next_run():
    assert next_run(100, Job(3).every("minutes")) == 280


def test_rejects_zero():
    with pytest.raises(ValueError):
        Job(0)
`;

/** The layout of schedule (github dbader/schedule): the package, its tests at the root, and a tox.ini that runs mypy on the package. */
const SCHEDULE_SHAPE = {
  'schedule/__init__.py': SCHEDULE_PKG,
  'test_schedule.py': SCHEDULE_TESTS,
  'tox.ini':
    '[tox]\nenvlist = py3{7,8,9,10,11}\nskip_missing_interpreters = true\n\n[testenv]\ndeps =\n    -rrequirements-dev.txt\ncommands =\n    py.test test_schedule.py schedule -v --cov schedule --cov-report term-missing\n    python -m mypy -p schedule --install-types --non-interactive\n',
  'setup.py': 'from setuptools import setup\n\nsetup(name="schedule", packages=["schedule"])\n',
  'requirements-dev.txt': 'pytest\nmypy\n',
};

/** sqlparse's shape: tests/ with parameter ids that hold `::`, brackets and spaces; setup.cfg's [tool:pytest]. */
const SQLPARSE_SHAPE = {
  'sqlp/__init__.py': '',
  'sqlp/split.py': `def split_cast(text):
    if "::" not in text:
        return text, None
    value, _, kind = text.partition("::")
    return value.strip(), kind.strip()


def columns(text):
    out = []
    for part in text.split(","):
        part = part.strip()
        if part:
            out.append(split_cast(part))
    return out
`,
  'tests/__init__.py': '',
  'tests/test_grouping.py': `import pytest

from sqlp.split import columns, split_cast


@pytest.mark.parametrize("s", ["sum(a)::integer, b", "x::y", "[a]::b c"])
def test_group_identifier_list(s):
    assert len(columns(s)) >= 1
    assert columns(s)[0][1] is not None


@pytest.mark.parametrize("text,want", [("a::int", ("a", "int")), ("b", ("b", None))], ids=["cast::int", "plain [no cast]"])
def test_split_cast(text, want):
    assert split_cast(text) == want


class TestColumns:
    @pytest.mark.parametrize("s,n", [("a, b", 2), ("a::x, b::y, c", 3)])
    def test_count(self, s, n):
        assert len(columns(s)) == n
`,
  'setup.cfg': '[tool:pytest]\nxfail_strict = True\n\n[flake8]\nexclude = tests\n',
};

describe('docker: the scoring check', function () {
  this.timeout(600_000);
  let pool: SandboxPool;
  let dir: string;

  before(async () => {
    pool = await SandboxPool.connect({ run: RUN });
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-scoring-'));
  });

  after(async () => {
    await pool?.close();
    fs.rmSync(dir, { recursive: true, force: true });
    await assertNoContainersLeft(pool, RUN);
  });

  it("a tox.ini that names the package under test in another tool's command: mutations of the package score unresolved with no fix and resolved with the reference", async () => {
    const ws = write(path.join(dir, 'schedule'), SCHEDULE_SHAPE);
    assert.ok(!collectOriginals(ws).tests.has('schedule/__init__.py'), 'the package under test is not test machinery');
    const r = await synthesizeMutationTasks({ workspace: ws, pool, seed: 1, max: 4, concurrency: 2 });
    assert.ok(r.tasks.length >= 3, `${r.tasks.length} tasks`);
    assert.ok(r.tasks.every((t) => t.mutation!.file === 'schedule/__init__.py'));
    assert.equal(r.summary.scoring.passed, r.summary.scoring.checked, JSON.stringify(r.summary.scoring));
    assert.ok(r.summary.scoring.checked >= r.tasks.length);
    // The check again from the task file's side (what `tasks check --workspace` runs), with the
    // scores it saw: the no-op fails its fail-to-pass tests, the reference passes everything.
    const { checks } = await checkTasksInWorkspace(r.tasks, { workspace: ws, pool });
    for (const c of checks) {
      assert.equal(c.ok, true, JSON.stringify(c.problem));
      assert.equal(c.noop!.resolved, false);
      assert.ok(c.noop!.passRate! < 1);
      assert.equal(c.noop!.testsChanged, undefined, 'the no-op changed no test file');
      assert.equal(c.reference!.resolved, true);
      assert.equal(c.reference!.passRate, 1);
      assert.equal(c.reference!.tampered, undefined);
    }
  });

  it('a package.json whose main, exports and files name the code under test: its mutations are tasks, scored unresolved with no fix and resolved with the reference', async () => {
    // These fields name the package's own modules; read as runner setup files, the module would
    // be put back before every scoring run (every fix undone) and never mutated.
    const ws = path.join(dir, 'js-main');
    fs.cpSync(path.join(__dirname, '..', 'fixtures', 'js-shop'), ws, { recursive: true });
    const pkg = JSON.parse(fs.readFileSync(path.join(ws, 'package.json'), 'utf8'));
    Object.assign(pkg, { main: './src/pricing.js', exports: { '.': './src/pricing.js' }, files: ['src/pricing.js', 'src/inventory.js'] });
    fs.writeFileSync(path.join(ws, 'package.json'), JSON.stringify(pkg, null, 2));
    const restored = collectOriginals(ws).tests;
    assert.ok(!restored.has('src/pricing.js') && !restored.has('src/inventory.js'), [...restored.keys()].join(', '));
    const r = await synthesizeMutationTasks({ workspace: ws, pool, seed: 1, max: 4, concurrency: 2 });
    assert.ok(
      r.tasks.some((t) => t.mutation!.file === 'src/pricing.js'),
      r.tasks.map((t) => t.mutation!.file).join(', '),
    );
    assert.equal(r.summary.scoring.passed, r.summary.scoring.checked, JSON.stringify(r.summary.scoring));
    const { checks } = await checkTasksInWorkspace(r.tasks, { workspace: ws, pool });
    for (const c of checks) {
      assert.equal(c.ok, true, JSON.stringify(c.problem));
      assert.equal(c.noop!.resolved, false);
      assert.equal(c.reference!.resolved, true);
      assert.equal(c.reference!.testsChanged, undefined, 'scoring put nothing back over the fix');
    }
  });

  it('parameter ids that hold `::`, brackets and spaces: the reference fix scores resolved, not tampered', async () => {
    const ws = write(path.join(dir, 'sqlp'), SQLPARSE_SHAPE);
    const r = await synthesizeMutationTasks({ workspace: ws, pool, seed: 2, max: 3, concurrency: 2 });
    assert.ok(r.tasks.length >= 2, `${r.tasks.length} tasks: ${JSON.stringify(r.summary.scoring)}`);
    assert.equal(r.summary.scoring.passed, r.summary.scoring.checked, JSON.stringify(r.summary.scoring));
    const ids = new Set(r.tasks.flatMap((t) => [...t.fail_to_pass, ...t.pass_to_pass]));
    for (const id of [
      'tests/test_grouping.py::test_group_identifier_list[sum(a)::integer, b]',
      'tests/test_grouping.py::test_split_cast[plain [no cast]]',
      'tests/test_grouping.py::TestColumns::test_count[a::x, b::y, c-3]',
    ])
      assert.ok(ids.has(id), `${id} in ${[...ids].join(' | ')}`);
  });

  it('task files whose tasks cannot tell a fix from no fix are named with the reason, and `tasks check --workspace` exits 1', async () => {
    const ws = write(path.join(dir, 'schedule2'), {
      ...SCHEDULE_SHAPE,
      'tox.ini': '[pytest]\naddopts = -p schedule.plugin\n',
      'schedule/plugin.py': 'def pytest_configure(config):\n    config.addinivalue_line("markers", "slow: a slow test")\n',
    });
    const r = await synthesizeMutationTasks({ workspace: ws, pool, seed: 1, max: 1, concurrency: 1 });
    assert.equal(r.tasks.length, 1);
    const good = r.tasks[0];
    const passing = good.pass_to_pass[0];
    // A fail-to-pass test that passes whatever the code; a test the suite does not have; a bug
    // in the file the runner configuration loads as a plugin (scoring puts it back).
    const noopPasses: Task = {
      ...good,
      id: 'bad-noop-passes',
      fail_to_pass: [...good.fail_to_pass, passing],
      pass_to_pass: good.pass_to_pass.slice(1),
    };
    const unreachable: Task = { ...good, id: 'bad-unreachable', pass_to_pass: [...good.pass_to_pass, 'test_schedule.py::test_not_there'] };
    const pluginText = fs.readFileSync(path.join(ws, 'schedule/plugin.py'), 'utf8');
    const at = pluginText.indexOf('"slow');
    const restored: Task = {
      ...good,
      id: 'bad-restored-target',
      mutation: { ...good.mutation!, file: 'schedule/plugin.py', span: { start: at, end: at + 1, text: '"' }, replacement: "'" },
    };
    const { checks, summary } = await checkTasksInWorkspace([good, noopPasses, unreachable, restored], { workspace: ws, pool });
    assert.deepEqual(
      checks.map((c) => [c.taskId, c.problem?.kind]),
      [
        [good.id, undefined],
        ['bad-noop-passes', 'noop-passes'],
        ['bad-unreachable', 'reference-unresolved'],
        ['bad-restored-target', 'restored-target'],
      ],
    );
    assert.match(checks[1].problem!.detail, new RegExp(passing.replace(/[.[\]()]/g, '\\$&')));
    assert.match(checks[2].problem!.detail, /test_not_there/);
    assert.equal(summary.passed, 1);
    assert.equal(summary.repositoryProblem, undefined, 'three different problems are no repository-level problem');

    const file = path.join(dir, 'bad-tasks.jsonl');
    writeTaskFile(file, [good, noopPasses]);
    let out = '';
    const code = await main(['tasks', 'check', file, '--workspace', ws], { out: (t) => (out += t + '\n'), err: () => undefined });
    assert.equal(code, 1, out);
    assert.match(out, /bad-noop-passes: noop-passes: fail-to-pass test\(s\) passed in the no-op episode/);
    assert.match(out, /scoring check .*: 1 of 2 passed/);
  });

  it('a suite that cannot be collected (a test module imports what the sandbox lacks) is refused at synth time with the file, the error and what to do', async () => {
    // schedule 1.1.0 as Debian ships it: its test file imports the third-party `mock`.
    const ws = write(path.join(dir, 'nomock'), { ...SCHEDULE_SHAPE, 'test_schedule.py': `import mock\n${SCHEDULE_TESTS}` });
    await assert.rejects(
      synthesizeMutationTasks({ workspace: ws, pool, seed: 0, max: 2, concurrency: 2 }),
      (e: Error & { hint?: string }) => {
        assert.match(
          e.message,
          /no test passes in .*1 test file\(s\) could not be loaded, the first test_schedule\.py: .*No module named 'mock'/,
        );
        assert.match(e.hint ?? '', /must load in the sandbox image/);
        return true;
      },
    );
  });

  it("`turnwise eval` on a task file whose task scores wrong exits non-zero with the canary's reason", async () => {
    const ws = write(path.join(dir, 'schedule3'), SCHEDULE_SHAPE);
    const r = await synthesizeMutationTasks({ workspace: ws, pool, seed: 1, max: 1, concurrency: 1 });
    const bad: Task = {
      ...r.tasks[0],
      id: 'bad-reference',
      pass_to_pass: [...r.tasks[0].pass_to_pass, 'test_schedule.py::test_not_there'],
    };
    const file = path.join(dir, 'eval-tasks.jsonl');
    writeTaskFile(file, [bad]);
    let text = '';
    const code = await main(['eval', '--tasks', file, '--workspace', ws, '--max-turns', '2'], {
      out: (t) => (text += t + '\n'),
      err: (t) => (text += t + '\n'),
    });
    assert.equal(code, 1, text);
    assert.match(
      text,
      /the reward canary failed in the evaluation of iteration 0: task bad-reference: reference-unresolved: .*test_not_there/,
    );
  });

  it("bench tasks --corpus counts each repository's checked and right-scored mutants (a cached tree stands in for the download)", async () => {
    const cache = path.join(dir, 'corpus-cache');
    const repo = pickCorpusRepos(['boltons'])[0];
    write(path.join(cache, 'src', repo.dir), SQLPARSE_SHAPE);
    fs.writeFileSync(path.join(cache, 'src', `.${repo.dir}.sha256`), `${repo.sha256}\n`);
    const r = await benchScoringCorpus({ repos: ['boltons'], tasksPerRepo: 2, cacheDir: cache });
    assert.equal(r.repos.length, 1);
    const x = r.repos[0];
    assert.equal(x.error, undefined);
    assert.ok(x.checked >= 2 && x.passed === x.checked && x.share === 1, JSON.stringify(x));
    assert.deepEqual([r.checked, r.passed, r.share, r.repos_all_right], [x.checked, x.passed, 1, 1]);
  });

  it("a suite whose tests are made at run time under names no file spells scores right: their ids are known from the suite's own run of the unchanged code", async () => {
    const ws = write(path.join(dir, 'dynamic'), {
      'calc.py': 'def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n',
      'tests/test_dynamic.py': [
        'from calc import add, sub',
        '',
        'CASES = {"plus": (add, 2, 3, 5), "minus": (sub, 5, 3, 2), "zero": (add, 0, 0, 0)}',
        '',
        'for _name, (_f, _a, _b, _want) in CASES.items():',
        '    def _case(f=_f, a=_a, b=_b, want=_want):',
        '        assert f(a, b) == want',
        '    globals()["test" + "_" + _name] = _case',
        '',
      ].join('\n'),
    });
    const r = await synthesizeMutationTasks({ workspace: ws, pool, seed: 0, max: 3, concurrency: 2 });
    assert.ok(r.tasks.length >= 2, JSON.stringify(r.summary.scoring));
    assert.equal(r.summary.scoring.passed, r.summary.scoring.checked, JSON.stringify(r.summary.scoring.rejected));
    assert.ok(
      r.tasks.every((t) =>
        [...t.fail_to_pass, ...t.pass_to_pass].every((id) => /^tests\/test_dynamic\.py::test_(plus|minus|zero)$/.test(id)),
      ),
    );
  });
});
