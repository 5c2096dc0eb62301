// What pytest reads of a workspace's configuration: its own section's addopts, not another tool's
// options in the same file (tox's commands naming `mypy -p pkg` made the package under test look
// like a pytest plugin, so scoring put the mutated file back and every no-op scored resolved).
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  fnmatch,
  matchesPythonFiles,
  pytestAddopts,
  pytestCollection,
  pytestPluginsOf,
  shellWords,
} from '../../../src/tasks/pytest-config';
import { detectRunner } from '../../../src/tasks/runners';
import { collectOriginals, runnerLoadedFiles } from '../../../src/tasks/testfiles';

function workspace(files: Record<string, string>): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-pytest-config-'));
  for (const [rel, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), text);
  }
  return dir;
}

describe('tasks/pytest-config', () => {
  it("a tox.ini's [testenv] commands are tox's: no plugin, and the package under test is not test machinery", () => {
    const tox =
      '[tox]\nenvlist = py3\n\n[testenv]\ndeps = -rrequirements-dev.txt\ncommands =\n    py.test test_schedule.py schedule -v --cov schedule --cov-report term-missing\n    python -m mypy -p schedule --install-types --non-interactive\n';
    assert.deepEqual(pytestAddopts('tox.ini', tox), []);
    assert.deepEqual(pytestPluginsOf('tox.ini', tox), []);
    assert.deepEqual(
      runnerLoadedFiles(new Map([['tox.ini', Buffer.from(tox)]]), new Set(['schedule/__init__.py', 'test_schedule.py'])),
      [],
    );
  });

  it("reads each file's own pytest section", () => {
    assert.deepEqual(
      pytestPluginsOf('tox.ini', '[testenv]\ncommands = pytest -p wrong\n[pytest]\naddopts = -p myplug --strict-markers\n'),
      ['myplug'],
    );
    assert.deepEqual(
      pytestPluginsOf(
        'setup.cfg',
        '[pytest]\naddopts = -p wrong\n[tool:pytest]\naddopts =\n    -p one\n\n    -ptwo -p no:cacheprovider\n[flake8]\nselect = -p nope\n',
      ),
      ['one', 'two'],
    );
    assert.deepEqual(pytestPluginsOf('pytest.ini', '# comment\n[pytest]\n; another\naddopts: -p "quoted.mod" -q\n'), ['quoted.mod']);
    assert.deepEqual(
      pytestPluginsOf(
        'pyproject.toml',
        '[tool.mypy]\naddopts = "-p no"\n[tool.pytest.ini_options]\nminversion = "6.0"\naddopts = [\n  "-p", "a.b",  # a plugin\n  "-pc",\n]\n[tool.other]\nx = 1\n',
      ),
      ['a.b', 'c'],
    );
    assert.deepEqual(pytestPluginsOf('pyproject.toml', "[tool.pytest.ini_options]\naddopts = '-p lit -ra'\n"), ['lit']);
    assert.deepEqual(pytestPluginsOf('pyproject.toml', '[tool.pytest.ini_options]\naddopts = """\n  -p multi\n  -q\n"""\n'), ['multi']);
    assert.deepEqual(pytestPluginsOf('conftest.py', '[pytest]\naddopts = -p x\n'), [], 'not a configuration file');
  });

  it('splits as shlex does', () => {
    assert.deepEqual(shellWords(`-k "a and b" -m 'slow or x' plain\\ word -o x="y z"`), [
      '-k',
      'a and b',
      '-m',
      'slow or x',
      'plain word',
      '-o',
      'x=y z',
    ]);
  });

  it('python_files patterns match as fnmatch does', () => {
    assert.equal(fnmatch('testmock.py', 'test*.py'), true);
    assert.equal(fnmatch('mocktest.py', 'test*.py'), false);
    assert.equal(fnmatch('a1.py', 'a[0-9].py'), true);
    assert.equal(fnmatch('x.py', '[!x].py'), false);
    assert.equal(fnmatch('a+b.py', 'a+b.py'), true, 'regex characters are literal');
    assert.equal(matchesPythonFiles('mock/tests/testmock.py', ['test*.py']), true);
    assert.equal(matchesPythonFiles('mock/tests/support.py', ['test*.py']), false);
  });

  it("a suite named by its configuration's python_files (mock's testmock.py) is found, and its test modules are restored before scoring", () => {
    const ws = workspace({
      'setup.cfg': '[metadata]\nname = mock\n\n[tool:pytest]\npython_files=test*.py\nfilterwarnings =\n    error::RuntimeWarning\n',
      'mock/__init__.py': '',
      'mock/mock.py': 'def f():\n    return 1\n',
      'mock/tests/__init__.py': '',
      'mock/tests/testmock.py': 'from mock.mock import f\n\ndef test_f():\n    assert f() == 1\n',
      'checks/checkthis.py': '',
    });
    try {
      assert.deepEqual(pytestCollection(ws).pythonFiles, ['test*.py']);
      assert.equal(pytestCollection(ws).config?.file, 'setup.cfg');
      const r = detectRunner(ws);
      assert.equal(r.kind, 'pytest');
      assert.deepEqual(r.testFiles, ['mock/tests/testmock.py']);
    } finally {
      fs.rmSync(ws, { recursive: true, force: true });
    }
    // Test modules outside the test folders, by python_files within testpaths: restored, never mutated.
    const ws2 = workspace({
      'pytest.ini': '[pytest]\npython_files = check_*.py\ntestpaths = checks\n',
      'pkg.py': 'X = 1\n',
      'checks/check_pkg.py': 'import pkg\n\ndef test_x():\n    assert pkg.X == 1\n',
      'tools/check_release.py': '',
    });
    try {
      const o = collectOriginals(ws2);
      assert.ok(o.tests.has('checks/check_pkg.py'));
      assert.ok(!o.tests.has('tools/check_release.py'), 'outside testpaths pytest does not collect it');
      assert.ok(!o.tests.has('pkg.py'));
      assert.equal(detectRunner(ws2).kind, 'pytest', 'a pytest.ini alone makes it a pytest workspace');
    } finally {
      fs.rmSync(ws2, { recursive: true, force: true });
    }
  });
});
