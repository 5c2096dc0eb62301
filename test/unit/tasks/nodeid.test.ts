// pytest node ids read as pytest writes them. The corpus (test/fixtures/pytest-nodeids, made by
// its make.sh with the sandbox image's pytest) holds ids whose parameter part carries `::`, `[`,
// `]`, `/`, spaces, quotes, backslashes, escaped unicode, `ids=` functions, `pytest.param(id=…)`,
// fixture params, nested and parametrized classes, unittest cases (one inheriting its test from a
// base class), a doctest in a test file, of a module and of a document; the real suites' ids come
// from Debian's upstream tarballs of the scoring corpus.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { isPytestDoctestId, parsePytestNodeId, pytestNodeFile } from '../../../src/tasks/nodeid';
import { parseJunit } from '../../../src/tasks/report';
import { unknownReportIds } from '../../../src/tasks/reward';
import { collectOriginals } from '../../../src/tasks/testfiles';

const DIR = path.join(__dirname, '../../fixtures/pytest-nodeids');
const lines = (f: string) =>
  fs
    .readFileSync(path.join(DIR, f), 'utf8')
    .split('\n')
    .filter((l) => l.includes('::'));
const generated = lines('collected-ids.txt');
const real = lines('real-suites.txt').filter((l) => !l.startsWith('#'));

/** The id put back together from its parts. */
const join = (p: ReturnType<typeof parsePytestNodeId>) =>
  `${p.file}::${p.names.join('::')}${p.params !== undefined ? `[${p.params}]` : ''}`;

describe('tasks/nodeid: pytest node ids', () => {
  it('takes the parameter part as one piece whatever it holds', () => {
    assert.deepEqual(parsePytestNodeId('tests/test_grouping.py::test_group_identifier_list[sum(a)::integer, b]'), {
      file: 'tests/test_grouping.py',
      names: ['test_group_identifier_list'],
      params: 'sum(a)::integer, b',
    });
    assert.deepEqual(parsePytestNodeId('t.py::TestA::TestB::test_c[x::y-1]'), {
      file: 't.py',
      names: ['TestA', 'TestB', 'test_c'],
      params: 'x::y-1',
    });
    assert.deepEqual(parsePytestNodeId('t.py::test_p[]]'), { file: 't.py', names: ['test_p'], params: ']' });
    assert.deepEqual(parsePytestNodeId('t.py::test_p[[]'), { file: 't.py', names: ['test_p'], params: '[' });
    assert.deepEqual(parsePytestNodeId('README.txt::README.txt'), { file: 'README.txt', names: ['README.txt'] });
    assert.deepEqual(parsePytestNodeId('tests/test_x.py'), { file: 'tests/test_x.py', names: [] });
    assert.equal(pytestNodeFile('a/b.py::c[d::e]'), 'a/b.py');
  });

  it('every id of the generated corpus and of the real suites splits into a file, identifiers and a parameter part that put back give the id', () => {
    assert.ok(generated.length >= 25 && real.length >= 100, `${generated.length} generated, ${real.length} real ids`);
    for (const id of [...generated, ...real]) {
      const p = parsePytestNodeId(id);
      assert.equal(join(p), id);
      assert.ok(!p.file.includes('::') && p.file !== '', id);
      if (isPytestDoctestId(id)) continue;
      for (const n of p.names) assert.match(n, /^[\p{L}_][\p{L}\p{N}_]*$/u, `${id}: ${JSON.stringify(n)}`);
    }
    // The old reading (a split on every `::`) got these wrong; the corpus must hold such ids.
    assert.ok(generated.filter((id) => id.split('::').length - 1 > parsePytestNodeId(id).names.length).length >= 5);
    assert.ok(
      real.some((id) => id.split('::').length - 1 > parsePytestNodeId(id).names.length),
      'a real suite with `::` inside a parameter id',
    );
  });

  it('doctest items are told from tests', () => {
    assert.deepEqual(generated.filter(isPytestDoctestId), [
      'README.txt::README.txt',
      'pkg.py::pkg.double',
      'tests/test_ids.py::tests.test_ids.helper',
    ]);
  });

  it("the runner's report gives pytest's own ids, the inherited test method's included", () => {
    const r = parseJunit(fs.readFileSync(path.join(DIR, 'with-nodeid-plugin.xml'), 'utf8'), { flavor: 'pytest', root: '/tmp/w' });
    assert.deepEqual(r.tests.map((t) => t.id).sort(), [...generated].sort());
    const inherited = r.tests.find((t) => t.id === 'tests/test_ids.py::TestChild::test_inherited');
    assert.equal(inherited?.file, 'tests/test_ids.py', 'the file of the id, not the base class');
    assert.equal(r.tests.find((t) => t.id.endsWith('test_skipped'))?.outcome, 'skipped');
  });

  it('a report without the node-id property (a custom test command) is read from its class names, except a test method inherited from another file', () => {
    const r = parseJunit(fs.readFileSync(path.join(DIR, 'without-plugin.xml'), 'utf8'), { flavor: 'pytest', root: '/tmp/w' });
    const got = new Set(r.tests.map((t) => t.id));
    assert.deepEqual(
      generated.filter((id) => !got.has(id)),
      ['tests/test_ids.py::TestChild::test_inherited'],
    );
  });

  it("the real run's report of the corpus suite is not taken for a forgery, and made-up ids are", () => {
    const originals = collectOriginals(path.join(DIR, 'suite'));
    const r = parseJunit(fs.readFileSync(path.join(DIR, 'with-nodeid-plugin.xml'), 'utf8'), { flavor: 'pytest', root: '/tmp/w' });
    assert.deepEqual(unknownReportIds(r, originals, 'pytest'), []);
    const forged = [
      'tests/test_ids.py::test_nowhere[a::b]',
      'tests/test_ids.py::TestNowhere::test_p',
      'tests/test_ids.py::not an identifier',
      'tests/missing.py::test_p',
    ];
    // A method of a class the file defines may be made at import time (zope.interface's
    // test_auto_* methods) or inherited: any identifier passes.
    // A class another test file defines, brought in by a star import, passes too.
    const generated = ['tests/test_ids.py::TestChild::test_made_at_import', 'tests/test_fixture_params.py::TestOuter::test_x'];
    const report = {
      format: 'junit-xml' as const,
      collectionErrors: [],
      tests: [...r.tests, ...[...forged, ...generated].map((id) => ({ id, outcome: 'passed' as const, durationMs: 0 }))],
    };
    assert.deepEqual(unknownReportIds(report, originals, 'pytest'), forged);
    // Classes built under names no file spells (lark's `globals()["Test" + parser]`): known when the
    // task's own tests, reported by the suite on the unchanged code, have that file and those names.
    const built = {
      ...report,
      tests: [{ id: 'tests/test_ids.py::TestEarleyBasic::test_alias[x::y]', outcome: 'passed' as const, durationMs: 0 }],
    };
    assert.deepEqual(unknownReportIds(built, originals, 'pytest'), ['tests/test_ids.py::TestEarleyBasic::test_alias[x::y]']);
    assert.deepEqual(unknownReportIds(built, originals, 'pytest', ['tests/test_ids.py::TestEarleyBasic::test_alias[a]']), []);
    assert.deepEqual(unknownReportIds(built, originals, 'pytest', ['tests/test_ids.py::TestEarleyBasic::test_other']), [
      'tests/test_ids.py::TestEarleyBasic::test_alias[x::y]',
    ]);
    // A test reported skipped or failed claims nothing: only passes are checked.
    const skipped = { ...built, tests: built.tests.map((t) => ({ ...t, outcome: 'skipped' as const })) };
    assert.deepEqual(unknownReportIds(skipped, originals, 'pytest'), []);
  });
});
