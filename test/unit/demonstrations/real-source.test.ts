// Fix cases from real Python source: which files are read (tests, vendored trees and the
// transfer panel's packages never), the layouts kept, and that every case's numbered and sed
// fixes restore the mutated line. The package here is written by the test (real Python, real
// tree-sitter mutation engine), so the figures do not hang on what the machine has installed.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { seededRandom } from '../../../src/core/random';
import { bugSuspect, numberedEpisode, numberedFix } from '../../../src/demonstrations/forms';
import {
  defaultSourceRoots,
  enclosingFunction,
  isHeldOutSource,
  pythonSourceFiles,
  realSourceCases,
  realSourcePool,
} from '../../../src/demonstrations/real-source';
import { numberedRestores, sedRestores } from '../../../src/demonstrations/simulator';
import { warmstart } from '../../../src/warmstart/run';

const MODULE = `"""Ledger helpers."""


class Ledger:
    def __init__(self, limit=10):
        self.limit = limit
        self.rows = []

    def add(self, amount, note=None):
        if amount <= 0:
            raise ValueError("amount must be positive")
        if len(self.rows) >= self.limit:
            return False
        self.rows.append((amount, note))
        return True

    def total(self):
        s = 0
        for amount, _ in self.rows:
            s += amount
        return s


def _window(values, size):
    out = []
    for i in range(len(values) - size + 1):
        out.append(sum(values[i:i + size]) / size)
    return out


def clamp(x, lo, hi):
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x
`;

describe('demonstrations/real-source: fix cases from real Python source', function () {
  this.timeout(120_000);
  let root: string;
  before(() => {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-real-source-'));
    const put = (rel: string, text: string) => {
      fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
      fs.writeFileSync(path.join(root, rel), text);
    };
    put('books/__init__.py', MODULE);
    put('books/_core/ledger.py', MODULE);
    put('books/tests/test_ledger.py', MODULE); // a test folder: never read
    put('books/test_more.py', MODULE); // a test file: never read
    put('xmltodict.py', MODULE); // a transfer-panel module: never read
    put('colorama/ansi.py', MODULE); // a transfer-panel package: never read
    put('books/tiny.py', 'x = 1\n'); // below the size floor
    put('books/notes.txt', MODULE);
  });
  after(() => fs.rmSync(root, { recursive: true, force: true }));

  it('reads package modules in a fixed order, leaving out tests, panel packages and tiny files', () => {
    const files = pythonSourceFiles([root]);
    assert.deepEqual(
      files.map((f) => f.rel),
      ['books/__init__.py', 'books/_core/ledger.py'],
    );
    assert.equal(files[0].abs, path.join(root, 'books/__init__.py'));
  });

  it('finds the function around a line by indentation (methods included), none at module level', () => {
    const lines = MODULE.split('\n');
    const at = (s: string) => lines.findIndex((l) => l.includes(s)) + 1;
    assert.deepEqual(enclosingFunction(lines, at('if len(self.rows)')), { name: 'add', first: at('def add'), last: at('return True') });
    assert.deepEqual(enclosingFunction(lines, at('s += amount')), { name: 'total', first: at('def total'), last: at('return s') });
    assert.equal(enclosingFunction(lines, at('"""Ledger')), undefined);
    assert.equal(enclosingFunction(lines, at('class Ledger')), undefined);
  });

  it('every case keeps its package path, ranks its bug, shows its lines, and both fixes restore the line', async () => {
    const r = seededRandom(3);
    const files = pythonSourceFiles([root]);
    const cases = [...(await realSourceCases(r, files[0], 12)), ...(await realSourceCases(r, files[1], 12))];
    assert.ok(cases.length >= 12, `${cases.length} cases`);
    const paths = new Set(cases.map((c) => c.path));
    for (const p of paths)
      assert.ok(['books/__init__.py', 'src/books/__init__.py', 'books/_core/ledger.py', 'src/books/_core/ledger.py'].includes(p), p);
    for (const c of cases) {
      assert.notEqual(c.mutatedLine, c.originalLine);
      assert.ok(bugSuspect(c) >= 1 && bugSuspect(c) <= 5, `bug ranked: ${c.suspects.join(' | ')}`);
      assert.ok(c.suspects.length <= 5);
      const ctx = c.context!;
      assert.equal(ctx.lines[c.line - ctx.first], c.mutatedLine, 'tw-show context holds the mutated line');
      assert.ok(sedRestores(c.fix, c), `${c.fix} restores ${c.originalLine.trim()}`);
      const fix = numberedFix(c);
      assert.ok(fix && numberedRestores(fix, c), `${fix} restores ${c.originalLine.trim()}`);
      assert.match(c.failing[0], /^(tests\/|test\/)?test_(books|ledger)\.py::(\w+::)?test_\w+(\[[\w-]+\])?$/);
      // The numbered episode names no path in any action.
      const ep = numberedEpisode(seededRandom(c.line), c);
      if (ep) for (const s of ep.segments) if (s.role === 'agent') assert.ok(!s.text.includes('.py'), s.text);
    }
    // Paths are not all the same: the layout varies (src/ or not) and the files do.
    assert.ok(paths.size >= 2, [...paths].join(', '));
  });

  it('train and held-out cases come from disjoint files', async () => {
    const files = Array.from({ length: 60 }, (_, i) => ({ abs: path.join(root, 'books/__init__.py'), rel: `pkg${i}/mod.py` }));
    const held = files.filter((f) => isHeldOutSource(f));
    assert.ok(held.length >= 1 && held.length <= 20, `${held.length} of 60 held out`);
    assert.equal(isHeldOutSource(files[0]), isHeldOutSource({ ...files[0] }), 'by path, stable');
    const train = await realSourcePool(seededRandom(1), files, 10);
    const evalCases = await realSourcePool(seededRandom(2), files, 6, { heldOut: true });
    const heldPaths = new Set(held.map((f) => f.rel));
    for (const c of train) assert.ok(!heldPaths.has(c.path.replace(/^src\//, '')), c.path);
    for (const c of evalCases) assert.ok(heldPaths.has(c.path.replace(/^src\//, '')), c.path);
  });

  it('the default roots are existing Python library folders; a warm start with no source to read says what to do', async () => {
    for (const d of defaultSourceRoots()) assert.match(d, /python3(\.\d+)?(\/dist-packages)?$/);
    const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-no-source-'));
    try {
      await assert.rejects(
        warmstart({
          out: path.join(empty, 'm'),
          steps: 1,
          realShare: 0.5,
          sourceRoots: [empty],
          poolSize: 10,
          evalCases: 2,
          settings: { provider: 'cpu' },
        }),
        (e: Error & { hint?: string }) =>
          /no fix case could be made from Python source under/.test(e.message) && /--source-root DIR/.test(e.hint ?? ''),
      );
    } finally {
      fs.rmSync(empty, { recursive: true, force: true });
    }
  });
});
