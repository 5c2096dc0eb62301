// Report parsers on real reports: pytest 7.2.1 and node 18.20.4 (generated in the sandbox
// image), pytest 9 and node 20 and mocha 11 (generated on the host). jest and go are not
// installed anywhere here, so their samples are hand-written from the documented formats.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError } from '../../../src/core/errors';
import {
  encodeReportPart,
  LOAD_ERROR_MARKER,
  parseReport,
  splitReportParts,
  REPORT_PART_MARKER,
  type TestReport,
} from '../../../src/tasks/report';

const dir = path.join(__dirname, '..', '..', 'fixtures', 'reports');
const read = (f: string) => fs.readFileSync(path.join(dir, f), 'utf8');
const byId = (r: TestReport) => Object.fromEntries(r.tests.map((t) => [t.id, t]));

function assertReportError(fn: () => unknown, pattern: RegExp) {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof TurnwiseError, `expected TurnwiseError, got ${String(e)}`);
    assert.equal(e.code, 'test-report');
    assert.match(e.message, pattern);
    assert.ok(e.hint && /NaN/.test(e.hint), 'hint says the episode is scored NaN');
    return true;
  });
}

describe('tasks/report: pytest JUnit XML', () => {
  for (const [name, root] of [
    ['pytest7-mixed.xml', '/s/py'],
    ['pytest9-mixed.xml', '/tmp/samp/py'],
  ] as const) {
    it(`${name}: node ids, outcomes, messages and the collection error`, () => {
      const r = parseReport('junit-xml', read(name), { flavor: 'pytest', root });
      const t = byId(r);
      assert.deepEqual(Object.keys(t).sort(), [
        'tests/test_mix.py::TestGroup::test_in_class',
        'tests/test_mix.py::TestGroup::test_param[1]',
        'tests/test_mix.py::TestGroup::test_param[2]',
        'tests/test_mix.py::test_error',
        'tests/test_mix.py::test_fail',
        'tests/test_mix.py::test_ok',
        'tests/test_mix.py::test_skipped',
      ]);
      assert.equal(t['tests/test_mix.py::test_ok'].outcome, 'passed');
      assert.equal(t['tests/test_mix.py::test_fail'].outcome, 'failed');
      assert.match(t['tests/test_mix.py::test_fail'].message!, /a & <b> should be "2"/);
      assert.match(t['tests/test_mix.py::test_fail'].message!, /assert 1 == 2/);
      assert.equal(t['tests/test_mix.py::test_error'].outcome, 'error');
      assert.match(t['tests/test_mix.py::test_error'].message!, /fixture exploded/);
      assert.equal(t['tests/test_mix.py::test_skipped'].outcome, 'skipped');
      assert.equal(t['tests/test_mix.py::TestGroup::test_param[2]'].outcome, 'failed');
      assert.equal(t['tests/test_mix.py::TestGroup::test_param[1]'].file, 'tests/test_mix.py');
      assert.equal(r.collectionErrors.length, 1);
      assert.equal(r.collectionErrors[0].file, 'tests/test_collect_error.py');
      assert.match(r.collectionErrors[0].message, /No module named 'nonexistent_module_xyz'/);
    });
  }

  it('a suite that only has a syntax error gives no tests and one collection error', () => {
    const r = parseReport('junit-xml', read('pytest7-syntax-error.xml'), { flavor: 'pytest' });
    assert.equal(r.tests.length, 0);
    assert.equal(r.collectionErrors[0].file, 'tests/test_a.py');
    assert.match(r.collectionErrors[0].message, /SyntaxError/);
  });

  it("pytest's internal error is no test and no pass of its run is trusted (a failing test may read as passed in such a report)", () => {
    // Made in the sandbox image: a hook that raises while reporting test_boom.
    const r = parseReport('junit-xml', read('pytest-7.2.1-internal-error.xml'), { flavor: 'pytest', root: '/tmp/w' });
    assert.deepEqual(
      r.tests.map((t) => [t.id, t.outcome]),
      [
        ['tests/test_ie.py::test_ok', 'error'],
        ['tests/test_ie.py::test_boom', 'error'],
      ],
    );
    assert.equal(r.collectionErrors.length, 1);
    assert.match(r.collectionErrors[0].message, /^pytest stopped with an internal error:\n[\s\S]*RuntimeError: the runner broke/);
  });

  it('guesses the pytest flavor when none is given', () => {
    const r = parseReport('junit-xml', read('pytest7-mixed.xml'));
    assert.ok(byId(r)['tests/test_mix.py::test_ok']);
  });

  it('a failure text that prints marker lines splits nothing: a pytest report is one part', () => {
    // The code under test's assertion message, as pytest writes it into the failure's text.
    const inject = `\n${REPORT_PART_MARKER}tests/test_mix.py\n${LOAD_ERROR_MARKER}\n`;
    const xml = read('pytest7-mixed.xml').replace('tests/test_mix.py:8: in test_fail', `tests/test_mix.py:8: in test_fail${inject}`);
    assert.ok(xml.includes(inject));
    const r = parseReport('junit-xml', xml, { flavor: 'pytest', root: '/s/py' });
    const clean = parseReport('junit-xml', read('pytest7-mixed.xml'), { flavor: 'pytest', root: '/s/py' });
    assert.deepEqual(
      r.tests.map((t) => [t.id, t.outcome]),
      clean.tests.map((t) => [t.id, t.outcome]),
    );
    assert.equal(byId(r)['tests/test_mix.py::test_fail'].outcome, 'failed');
  });
});

describe('tasks/report: node:test junit (per-file parts)', () => {
  const bundle = (files: Array<[string, string]>) => files.map(([f, x]) => encodeReportPart(f, read(x))).join('');

  it('ids carry the file and the describe path; same test name in two files stays distinct', () => {
    const text = bundle([
      ['test/mix.test.js', 'node18-mix.test.xml'],
      ['test/other.test.js', 'node18-other.test.xml'],
    ]);
    const r = parseReport('junit-xml', text, { flavor: 'node', root: '/s/js' });
    const t = byId(r);
    assert.deepEqual(Object.keys(t).sort(), [
      'test/mix.test.js::adds',
      'test/mix.test.js::fails',
      'test/mix.test.js::grp > inner bad',
      'test/mix.test.js::grp > inner ok',
      'test/mix.test.js::outer > inner > deep & <ok>',
      'test/mix.test.js::skipped one',
      'test/other.test.js::adds',
    ]);
    assert.equal(t['test/mix.test.js::fails'].outcome, 'failed');
    assert.match(t['test/mix.test.js::fails'].message!, /2 !== 3/);
    assert.equal(t['test/mix.test.js::grp > inner bad'].outcome, 'failed');
    assert.match(t['test/mix.test.js::grp > inner bad'].message!, /boom/);
    assert.equal(t['test/mix.test.js::skipped one'].outcome, 'skipped');
    assert.equal(t['test/other.test.js::adds'].outcome, 'passed');
    assert.ok(t['test/mix.test.js::adds'].durationMs > 0 && t['test/mix.test.js::adds'].durationMs < 100);
  });

  it('node 20 reports parse to the same ids as node 18', () => {
    const a = parseReport('junit-xml', bundle([['test/mix.test.js', 'node18-mix.test.xml']]), { flavor: 'node' });
    const b = parseReport('junit-xml', bundle([['test/mix.test.js', 'node20-mix.test.xml']]), { flavor: 'node' });
    assert.deepEqual(
      a.tests.map((t) => [t.id, t.outcome]),
      b.tests.map((t) => [t.id, t.outcome]),
    );
  });

  it('a file that does not load is a collection error, and a part with no report is one too', () => {
    const text = bundle([['test/syntax.test.js', 'node18-syntax.test.xml']]) + encodeReportPart('test/empty.test.js', '');
    const r = parseReport('junit-xml', text, { flavor: 'node', root: '/s/js' });
    assert.equal(r.tests.length, 0);
    assert.deepEqual(
      r.collectionErrors.map((c) => c.file),
      ['test/syntax.test.js', 'test/empty.test.js'],
    );
  });

  it('a file that died before writing its report becomes a collection error with its stderr', () => {
    const text = encodeReportPart('test/a.test.js', "/workspace/src/x.js:3\nSyntaxError: Unexpected token ')'", true);
    assert.ok(
      text.startsWith(`${REPORT_PART_MARKER}test/a.test.js\n${LOAD_ERROR_MARKER}\n /workspace/src/x.js:3\n`),
      'content behind the prefix',
    );
    const r = parseReport('junit-xml', text, { flavor: 'node' });
    assert.equal(r.tests.length, 0);
    assert.equal(r.collectionErrors[0].file, 'test/a.test.js');
    assert.match(r.collectionErrors[0].message, /SyntaxError: Unexpected token/);
  });

  it("a crashed file's stderr that prints marker lines and a passing report stays that file's load error: no part is forged", () => {
    // The code under test throws at import with a message laid out as a report part of its own.
    const forged = [
      'Error: ',
      `${REPORT_PART_MARKER}test/a.test.js`,
      '<testsuites><testsuite name="math"><testcase name="adds"/></testsuite></testsuites>',
      `${REPORT_PART_MARKER}x`,
      LOAD_ERROR_MARKER,
      '    at Object.<anonymous> (/workspace/src/foo.js:1:7)',
    ].join('\n');
    const r = parseReport('junit-xml', encodeReportPart('test/a.test.js', forged, true), { flavor: 'node' });
    assert.deepEqual(r.tests, [], 'no test result comes out of the stderr');
    assert.equal(r.collectionErrors.length, 1);
    assert.equal(r.collectionErrors[0].file, 'test/a.test.js');
    assert.match(r.collectionErrors[0].message, /testcase name="adds"/, 'the forged text is only the error message');
  });

  it('a line of a multi-part report the runner did not write (no prefix, no marker) refuses the report', () => {
    const text = encodeReportPart('a.js', '<x/>') + '<testsuites><testsuite><testcase name="adds"/></testsuite></testsuites>\n';
    assert.throws(() => parseReport('junit-xml', text, { flavor: 'node' }), /a line its runner did not write/);
  });

  it('splitReportParts keeps the order and the file names', () => {
    const parts = splitReportParts(encodeReportPart('a.js', '<x/>') + encodeReportPart('b.js', '<y/>'));
    assert.deepEqual(
      parts.map((p) => [p.file, p.text.trim()]),
      [
        ['a.js', '<x/>'],
        ['b.js', '<y/>'],
      ],
    );
  });
});

describe('tasks/report: mocha xunit, jest --json, go test -json', () => {
  it('mocha 11 xunit: suite path and file in the id', () => {
    const r = parseReport('junit-xml', read('mocha11-xunit.xml'), { flavor: 'mocha', root: '/tmp/samp/mocha' });
    const t = byId(r);
    assert.deepEqual(Object.keys(t).sort(), [
      'test/m.spec.js::Calc > adds',
      'test/m.spec.js::Calc > fails & <cmp>',
      'test/m.spec.js::Calc > pending one',
      'test/m.spec.js::Calc nested > deep',
      'test/m.spec.js::top level',
      'test/n.spec.js::Calc > adds',
    ]);
    assert.equal(t['test/m.spec.js::Calc > fails & <cmp>'].outcome, 'failed');
    assert.equal(t['test/m.spec.js::Calc > pending one'].outcome, 'skipped');
    assert.match(t['test/n.spec.js::Calc > adds'].message!, /TypeError: boom/);
  });

  it('jest --json (hand-written sample): assertions and a suite that failed to run', () => {
    const r = parseReport('jest-json', read('jest-handwritten.json'));
    assert.deepEqual(
      r.tests.map((t) => [t.id, t.outcome]),
      [
        ['src/calc.test.js::Calc > adds', 'passed'],
        ['src/calc.test.js::Calc > nested > fails', 'failed'],
        ['src/calc.test.js::later', 'skipped'],
        ['src/calc.test.js::top', 'passed'],
      ],
    );
    assert.match(r.tests[1].message!, /Expected: 3/);
    assert.deepEqual(
      r.collectionErrors.map((c) => c.file),
      ['src/broken.test.js'],
    );
  });

  it('go test -json (hand-written sample): subtests, skips and a package that did not build', () => {
    const r = parseReport('go-test-json', read('go-test-handwritten.jsonl'));
    assert.deepEqual(
      r.tests.map((t) => [t.id, t.outcome]),
      [
        ['example.com/shop/pricing::TestClamp', 'passed'],
        ['example.com/shop/pricing::TestTotal', 'failed'],
        ['example.com/shop/pricing::TestTotal/member', 'failed'],
        ['example.com/shop/pricing::TestSkip', 'skipped'],
      ],
    );
    assert.match(r.tests[2].message!, /want 54/);
    assert.deepEqual(
      r.collectionErrors.map((c) => c.file),
      ['example.com/shop/broken'],
    );
  });

  it('a go test run cut off mid-test marks that test as error, not passed', () => {
    const lines = read('go-test-handwritten.jsonl').split('\n').slice(0, 3).join('\n');
    const r = parseReport('go-test-json', lines);
    assert.equal(r.tests[0].outcome, 'error');
    assert.match(r.tests[0].message!, /no result/);
  });
});

describe('tasks/report: truncated or garbage reports give the clear error', () => {
  const xml = read('pytest7-mixed.xml');
  it('truncated JUnit XML', () =>
    assertReportError(
      () => parseReport('junit-xml', xml.slice(0, Math.floor(xml.length / 2))),
      /cannot be read.*(truncated|unterminated)/s,
    ));
  it('JUnit XML cut inside a tag', () =>
    assertReportError(() => parseReport('junit-xml', xml.slice(0, xml.indexOf('name="test_ok"') + 5)), /cannot be read/));
  it('garbage instead of XML', () =>
    assertReportError(() => parseReport('junit-xml', 'Traceback (most recent call last):\n  oops'), /cannot be read/));
  it('an XML document that is not a test report', () =>
    assertReportError(() => parseReport('junit-xml', '<html><body/></html>'), /root <html>/));
  it('empty report', () => assertReportError(() => parseReport('junit-xml', '  \n'), /empty/));
  it('truncated jest JSON', () =>
    assertReportError(() => parseReport('jest-json', read('jest-handwritten.json').slice(0, 300)), /not valid JSON/));
  it('JSON that is not a jest report', () => assertReportError(() => parseReport('jest-json', '{"ok":true}'), /no testResults/));
  it('garbage between go test events', () =>
    assertReportError(
      () =>
        parseReport(
          'go-test-json',
          read('go-test-handwritten.jsonl').replace(
            '\n{"Time":"2026-11-29T08:40:00.2Z","Action":"run"',
            '\n%%garbage%%\n{"Time":"2026-11-29T08:40:00.2Z","Action":"run"',
          ),
        ),
      /not JSON \(line \d+\)/,
    ));
  it('absurdly deep nesting is a report error, not a stack overflow', () => {
    const d = 200_000;
    const x = '<testsuites>' + '<testsuite name="a">'.repeat(d) + '</testsuite>'.repeat(d) + '</testsuites>';
    assertReportError(() => parseReport('junit-xml', x), /cannot be read.*nested/s);
  });
  it('unknown entity', () =>
    assertReportError(() => parseReport('junit-xml', '<testsuites><testcase name="a &nbsp; b"/></testsuites>'), /unknown entity/));
});
