// What pytest reads of a workspace's configuration: its own section's addopts, not another tool's
// options in the same file (tox's commands naming `mypy -p pkg` made the package under test look
// like a pytest plugin, so scoring put the mutated file back and every no-op scored resolved).
import * as assert from 'node:assert/strict';
import { pytestAddopts, pytestPluginsOf, shellWords } from '../../../src/tasks/pytest-config';
import { runnerLoadedFiles } from '../../../src/tasks/testfiles';

describe('tasks/pytest-config', () => {
  it("a tox.ini's [testenv] commands are tox's: no plugin, and the package under test is not test machinery", () => {
    const tox = '[tox]\nenvlist = py3\n\n[testenv]\ndeps = -rrequirements-dev.txt\ncommands =\n    py.test test_schedule.py schedule -v --cov schedule --cov-report term-missing\n    python -m mypy -p schedule --install-types --non-interactive\n';
    assert.deepEqual(pytestAddopts('tox.ini', tox), []);
    assert.deepEqual(pytestPluginsOf('tox.ini', tox), []);
    assert.deepEqual(runnerLoadedFiles(new Map([['tox.ini', Buffer.from(tox)]]), new Set(['schedule/__init__.py', 'test_schedule.py'])), []);
  });

  it("reads each file's own pytest section", () => {
    assert.deepEqual(pytestPluginsOf('tox.ini', '[testenv]\ncommands = pytest -p wrong\n[pytest]\naddopts = -p myplug --strict-markers\n'), ['myplug']);
    assert.deepEqual(pytestPluginsOf('setup.cfg', '[pytest]\naddopts = -p wrong\n[tool:pytest]\naddopts =\n    -p one\n\n    -ptwo -p no:cacheprovider\n[flake8]\nselect = -p nope\n'), ['one', 'two']);
    assert.deepEqual(pytestPluginsOf('pytest.ini', '# comment\n[pytest]\n; another\naddopts: -p "quoted.mod" -q\n'), ['quoted.mod']);
    assert.deepEqual(pytestPluginsOf('pyproject.toml', '[tool.mypy]\naddopts = "-p no"\n[tool.pytest.ini_options]\nminversion = "6.0"\naddopts = [\n  "-p", "a.b",  # a plugin\n  "-pc",\n]\n[tool.other]\nx = 1\n'), ['a.b', 'c']);
    assert.deepEqual(pytestPluginsOf('pyproject.toml', "[tool.pytest.ini_options]\naddopts = '-p lit -ra'\n"), ['lit']);
    assert.deepEqual(pytestPluginsOf('pyproject.toml', '[tool.pytest.ini_options]\naddopts = """\n  -p multi\n  -q\n"""\n'), ['multi']);
    assert.deepEqual(pytestPluginsOf('conftest.py', '[pytest]\naddopts = -p x\n'), [], 'not a configuration file');
  });

  it('splits as shlex does', () => {
    assert.deepEqual(shellWords(`-k "a and b" -m 'slow or x' plain\\ word -o x="y z"`), ['-k', 'a and b', '-m', 'slow or x', 'plain word', '-o', 'x=y z']);
  });
});
