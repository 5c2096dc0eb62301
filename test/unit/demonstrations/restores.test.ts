// sedRestores is the warm start's "any correct fix" metric: it applies the policy's sed script to
// the mutated line (demonstrations/sed.ts, GNU sed's semantics in JavaScript), so an equivalent command
// counts and a near miss does not, and nothing the policy wrote runs on the host.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { FixCase } from '../../../src/demonstrations/fix-cases';
import { attemptCommand } from '../../../src/demonstrations/forms';
import { editOf, parseLineEdit, sedRestores, simulateTurn } from '../../../src/demonstrations/simulator';

const c = { path: 'shop/grid.py', line: 12, mutatedLine: '    return size >= 7 and a.b', originalLine: '    return size > 7 and a.b' };

describe('demonstrations/simulator: sedRestores (a generated command fixes the mutated line when run)', () => {
  it('the demonstrated command and an equivalent one restore the line', () => {
    assert.equal(sedRestores("sed -i '12s/>=/>/' shop/grid.py", c), true);
    assert.equal(sedRestores("sed -i '12s/size >= 7/size > 7/' shop/grid.py", c), true);
    assert.equal(sedRestores("sed -i '12s/>= 7/> 7/g' shop/grid.py", c), true);
  });
  it('a wrong line, file, direction or a broken script does not', () => {
    assert.equal(sedRestores("sed -i '11s/>=/>/' shop/grid.py", c), false);
    assert.equal(sedRestores("sed -i '12s/>=/>/' shop/grids.py", c), false);
    assert.equal(sedRestores("sed -i '12s/>=/</' shop/grid.py", c), false);
    assert.equal(sedRestores("sed -i '12s/>=/>' shop/grid.py", c), false);
    assert.equal(sedRestores('tw-test', c), false);
  });
  it('sed regex semantics, not string replace: an unescaped dot matches any character', () => {
    // `a.b` as a pattern also matches `axb`; here it matches itself, and the replacement is literal.
    assert.equal(sedRestores("sed -i '12s/>= 7 and a.b/> 7 and a.b/' shop/grid.py", c), true);
    assert.equal(sedRestores("sed -i '12s/.*/    return size > 7 and a.b/' shop/grid.py", c), true);
  });

  it("a script with sed's `e` or `w` flag runs nothing and writes nothing on the host", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-sed-'));
    try {
      const mark = path.join(dir, 'pwned');
      const line = { ...c, mutatedLine: `touch ${mark}` };
      assert.equal(sedRestores(`sed -i '12s/.*/touch ${mark.replace(/\//g, '\\/')}/e' shop/grid.py`, line), false);
      assert.equal(sedRestores(`sed -i '12s/x/y/w ${mark}' shop/grid.py`, line), false);
      const fc: FixCase = { ...line, fix: "sed -i '12s/>=/>/' shop/grid.py", failing: ['t::a'], passing: 1, suspects: [] };
      assert.equal(simulateTurn({ line: line.mutatedLine, stray: false }, fc, `sed -i '12s/^/x/e' shop/grid.py`), 'exit 1');
      assert.equal(fs.existsSync(mark), false, 'the policy text ran as a command');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('simulateTurn: an attempt loop against the bug line (wrong edit undone, the fix kept, tests reported)', () => {
    const fc: FixCase = { ...c, fix: "sed -i '12s/>=/>/' shop/grid.py", failing: ['tests/test_grid.py::test_a'], passing: 4, suspects: [] };
    const st = { line: fc.mutatedLine, stray: false };
    assert.equal(simulateTurn(st, fc, 'tw-test'), 'exit 1\nFAIL tests/test_grid.py::test_a\n1 failed, 4 passed');
    // A wrong edit, tested, then undone: exit 0 (git checkout), the task's line back.
    assert.equal(
      simulateTurn(st, fc, attemptCommand("sed -i '12s/7/8/' shop/grid.py", 'shop/grid.py')),
      'exit 0\nFAIL tests/test_grid.py::test_a\n1 failed, 4 passed',
    );
    assert.equal(st.line, fc.mutatedLine);
    // A wrong edit without the undo stays.
    assert.equal(simulateTurn(st, fc, "sed -i '12s/7/8/' shop/grid.py"), 'exit 0');
    assert.equal(st.line, '    return size >= 8 and a.b');
    assert.equal(simulateTurn(st, fc, 'git checkout -- shop/grid.py'), 'exit 0');
    assert.equal(st.line, fc.mutatedLine);
    // An edit of another line spoils the state until it is undone.
    simulateTurn(st, fc, "sed -i '3s/a/b/' shop/grid.py");
    assert.equal(st.stray, true);
    assert.match(simulateTurn(st, fc, attemptCommand(fc.fix, 'shop/grid.py')), /^exit 0\nFAIL/, 'the stray edit still fails the tests');
    assert.equal(st.stray, false, 'and the checkout undid it');
    // The fix, tested: all pass, kept.
    assert.equal(simulateTurn(st, fc, attemptCommand(fc.fix, 'shop/grid.py')), 'exit 0\n0 failed, 5 passed');
    assert.equal(st.line, fc.originalLine);
    // Anything else is a wasted turn; a broken sed script fails.
    assert.equal(simulateTurn(st, fc, 'ls -la'), 'exit 0');
    assert.equal(simulateTurn({ line: fc.mutatedLine, stray: false }, fc, "sed -i '12s/[/x/' shop/grid.py"), 'exit 1');
  });

  it('parseLineEdit: one parser for the edit, the attempt and its undo', () => {
    assert.deepEqual(parseLineEdit("sed -i '12s/>=/>/' shop/grid.py"), { line: 12, script: 's/>=/>/', path: 'shop/grid.py', test: false });
    assert.deepEqual(parseLineEdit(attemptCommand("sed -i '12s/>=/>/' shop/grid.py", 'shop/grid.py')), {
      line: 12,
      script: 's/>=/>/',
      path: 'shop/grid.py',
      test: true,
      undo: 'shop/grid.py',
    });
    assert.deepEqual(parseLineEdit("sed -i '3s/a/b/' x.py && tw-test"), { line: 3, script: 's/a/b/', path: 'x.py', test: true });
    // Not line edits: no address, a quote inside the script (bash would split it), trailing commands.
    for (const cmd of [
      "sed -i 's/a/b/' x.py",
      "sed -i '3s/a'b'/c/' x.py",
      "sed -i '3s/a/b/' x.py; ls",
      "sed -i '3d' x.py",
      'git checkout x.py',
    ]) {
      assert.equal(parseLineEdit(cmd), undefined, cmd);
    }
  });

  it('editOf: the sed of an attempt is judged like the sed alone', () => {
    assert.equal(editOf(attemptCommand("sed -i '12s/>=/>/' shop/grid.py", 'shop/grid.py')), "sed -i '12s/>=/>/' shop/grid.py");
    assert.equal(editOf("sed -i '12s/>=/>/' shop/grid.py && tw-test"), "sed -i '12s/>=/>/' shop/grid.py");
    assert.equal(editOf("sed -i '12s/>=/>/' shop/grid.py"), "sed -i '12s/>=/>/' shop/grid.py");
    assert.equal(editOf('tw-test && submit'), 'tw-test && submit');
  });
});
