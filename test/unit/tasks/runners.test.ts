import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { TurnwiseError } from '../../../src/core/errors';
import { commandForTests, detectRunner, runnerCommand } from '../../../src/tasks/runners';
import { collectOriginals, inTestScan, isMutableSource, isTestInfraFile, originalSource } from '../../../src/tasks/testfiles';

const fixtures = path.join(__dirname, '..', '..', 'fixtures');

describe('tasks/runners: detection and commands', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-run-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));
  const write = (rel: string, text: string) => {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), text);
  };

  it('py-shop is pytest with JUnit XML (xunit1, collection errors do not stop the run)', () => {
    const r = detectRunner(path.join(fixtures, 'py-shop'));
    assert.equal(r.kind, 'pytest');
    assert.equal(r.language, 'python');
    assert.equal(r.reportFormat, 'junit-xml');
    assert.equal(r.flavor, 'pytest');
    assert.deepEqual(r.testFiles, ['tests/test_inventory.py', 'tests/test_pricing.py']);
    assert.match(
      r.command,
      /python3 -P -c 'import sys, pytest\n[\s\S]*sys.exit\(pytest.main\(plugins=\[TurnwiseNodeIds\(\)\]\)\)' -q .*-o junit_family=xunit1 .*--continue-on-collection-errors .*--junitxml=\/tmp\/turnwise\/report/,
    );
    assert.match(
      r.command,
      /item\.user_properties\.append\(\("turnwise\.nodeid", item\.nodeid\)\)/,
      "the report carries pytest's own node ids",
    );
  });

  it('js-shop is node:test with one junit report per test file', () => {
    const r = detectRunner(path.join(fixtures, 'js-shop'));
    assert.equal(r.kind, 'node-test');
    assert.equal(r.flavor, 'node');
    assert.deepEqual(r.testFiles, ['test/inventory.test.js', 'test/pricing.test.js']);
    assert.match(
      r.command,
      /node --test-reporter=junit --test-reporter-destination=\/tmp\/turnwise\/report\.d\/0\.xml test\/inventory\.test\.js/,
    );
    assert.match(r.command, /#turnwise-report file=test\/pricing\.test\.js/);
  });

  it('package.json decides jest and mocha; go.mod gives go test', () => {
    write('package.json', JSON.stringify({ devDependencies: { jest: '29' } }));
    write('src/a.test.js', "test('x', () => {})");
    let r = detectRunner(dir);
    assert.equal(r.kind, 'jest');
    assert.equal(r.reportFormat, 'jest-json');
    assert.match(r.command, /jest --ci --json --outputFile=/);
    write('package.json', JSON.stringify({ scripts: { test: 'mocha test/' } }));
    r = detectRunner(dir);
    assert.equal(r.kind, 'mocha');
    assert.match(r.command, /--reporter xunit --reporter-option output=\/tmp\/turnwise\/report/);
    fs.rmSync(path.join(dir, 'package.json'));
    fs.rmSync(path.join(dir, 'src'), { recursive: true });
    write('go.mod', 'module example.com/x\n');
    r = detectRunner(dir);
    assert.equal(r.kind, 'go-test');
    assert.equal(r.reportFormat, 'go-test-json');
  });

  it('the override replaces command and report format', () => {
    const r = detectRunner(path.join(fixtures, 'py-shop'), {
      command: 'make test-xml',
      reportFormat: 'junit-xml',
      reportPath: '/tmp/out.xml',
    });
    assert.equal(r.command, 'make test-xml');
    assert.equal(r.reportPath, '/tmp/out.xml');
    assert.throws(() => detectRunner(dir, { reportFormat: 'tap' as never }), /unknown report format "tap"/);
  });

  it('a folder without tests is a clear error', () => {
    write('README.md', 'hi');
    assert.throws(
      () => detectRunner(dir),
      (e: unknown) => e instanceof TurnwiseError && e.code === 'not-found' && /no test suite found/.test(e.message) && !!e.hint,
    );
  });

  it('scoring runs only the files that hold the task tests', () => {
    const r = detectRunner(path.join(fixtures, 'js-shop'));
    const cmd = commandForTests(r, ['test/pricing.test.js::clamp > at the bounds']);
    assert.match(cmd, /pricing\.test\.js/);
    assert.doesNotMatch(cmd, /inventory\.test\.js/);
    const py = detectRunner(path.join(fixtures, 'py-shop'));
    assert.match(
      commandForTests(py, ['tests/test_pricing.py::test_clamp_at_bounds']),
      /--junitxml=\/tmp\/turnwise\/report tests\/test_pricing\.py$/,
    );
    assert.equal(runnerCommand('go-test', []).endsWith('go test -json ./... > /tmp/turnwise/report'), true);
  });
});

describe('tasks/testfiles', () => {
  it('classifies tests, runner hooks and sources', () => {
    for (const f of [
      'tests/test_a.py',
      'pkg/a_test.py',
      'conftest.py',
      'sub/conftest.py',
      'test/helpers.js',
      'src/a.test.ts',
      'src/__tests__/x.js',
      'jest.config.js',
      'x_test.go',
      'sitecustomize.py',
      'pyproject.toml',
      'package.json',
      'evil-1.0.dist-info/entry_points.txt',
      '.evil.dist-info/entry_points.txt',
      'EVIL-1.0.DIST-INFO/entry_points.txt',
      'x.Egg-Info/entry_points.txt',
      'x.egg/EGG-INFO/entry_points.txt',
      'src/App.test.jsx',
      'src/spec.js',
      'src/test.ts',
      'src/__mocks__/chai.js',
      'src/__snapshots__/App.test.jsx.snap',
      'babel.config.ts',
      'src/.babelrc.cts',
    ]) {
      assert.equal(isTestInfraFile(f), true, f);
    }
    // Pruned folders (pytest's default norecursedirs) are left out of the scan, but for a conftest.py
    // (a project's norecursedirs may collect them) and package metadata (Python reads it anywhere on its path).
    for (const f of [
      'build/conftest.py',
      '.hidden/conftest.py',
      '.x.dist-info/entry_points.txt',
      'venv/X.DIST-INFO/METADATA',
      'tests/test_a.py',
    ])
      assert.equal(inTestScan(f), true, f);
    for (const f of ['build/helpers.py', '.hidden/pytest.ini', 'dist/helpers.js']) assert.equal(inTestScan(f), false, f);
    // jest runs test-named files wherever they are, and reads __snapshots__ and __mocks__ anywhere.
    for (const f of [
      'build/pwn.test.js',
      'dist/x.spec.tsx',
      '.hidden/App.test.jsx',
      'build/__mocks__/chai.js',
      'dist/__snapshots__/a.test.js.snap',
    ])
      assert.equal(inTestScan(f), true, f);
    for (const f of ['shop/pricing.py', 'src/index.ts', 'lib/contest.py', 'src/testing_utils.js'])
      assert.equal(isTestInfraFile(f), false, f);
    assert.equal(isMutableSource('shop/pricing.py'), true);
    assert.equal(isMutableSource('src/types.d.ts'), false);
    assert.equal(isMutableSource('tests/test_a.py'), false);
    assert.equal(isMutableSource('main.go'), false, 'Go is not mutated (yet)');
  });

  it('collectOriginals reads exactly the test files of a fixture, and hashes its sources', () => {
    const m = collectOriginals(path.join(fixtures, 'js-shop'));
    assert.deepEqual([...m.tests.keys()], ['package.json', 'test/inventory.test.js', 'test/pricing.test.js']);
    assert.match(m.tests.get('test/pricing.test.js')!.toString(), /installments put the remainder last/);
    assert.deepEqual([...m.sources.keys()], ['src/inventory.js', 'src/pricing.js']);
    assert.equal(originalSource(m, 'src/pricing.js'), fs.readFileSync(path.join(fixtures, 'js-shop', 'src/pricing.js'), 'utf8'));
  });
});
