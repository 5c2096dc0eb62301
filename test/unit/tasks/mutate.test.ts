// Mutation operators on real tree-sitter trees (the WASM grammars the extension ships).
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  MUTATION_OPERATORS,
  dedupeCandidates,
  mutationCandidates,
  orderCandidates,
  type MutationCandidate,
} from '../../../src/tasks/mutate';
import { createParser } from '../../../src/ast/treesitter';

const fixtures = path.join(__dirname, '..', '..', 'fixtures');
const src = (rel: string) => fs.readFileSync(path.join(fixtures, rel), 'utf8');

async function all(files: Array<[string, 'python' | 'javascript' | 'typescript']>, root: string): Promise<MutationCandidate[]> {
  const out: MutationCandidate[] = [];
  for (const [f, lang] of files) out.push(...(await mutationCandidates(f, src(path.join(root, f)), lang)));
  return out;
}

const find = (cs: MutationCandidate[], op: string, original: string, replacement: string, enclosing?: string) =>
  cs.find(
    (c) =>
      c.operator === op &&
      c.original === original &&
      c.replacement === replacement &&
      (enclosing === undefined || c.enclosing === enclosing),
  );

describe('tasks/mutate: Python', () => {
  let cs: MutationCandidate[];
  before(async () => {
    cs = await all(
      [
        ['shop/pricing.py', 'python'],
        ['shop/inventory.py', 'python'],
      ],
      'py-shop',
    );
  });

  it('every operator has at least one candidate on the py-shop fixture', () => {
    const ops = new Set(cs.map((c) => c.operator));
    assert.deepEqual(
      [...MUTATION_OPERATORS].filter((o) => !ops.has(o)),
      [],
    );
  });

  it('produces the expected concrete mutations with their enclosing function', () => {
    assert.ok(find(cs, 'flip-comparison', '<', '<=', 'clamp'));
    assert.ok(find(cs, 'flip-comparison', 'not in', 'in', 'Inventory.find'), 'two-word operator "not in"');
    assert.ok(find(cs, 'swap-arithmetic', '+=', '-=', 'total'));
    assert.ok(find(cs, 'swap-arithmetic', '//', '*', 'installments'));
    assert.ok(find(cs, 'swap-boolean', 'and', 'or', 'total'));
    assert.ok(find(cs, 'negate-condition', 'express', 'not (express)', 'shipping'));
    assert.ok(find(cs, 'off-by-one', '100', '101', 'shipping'));
    assert.ok(find(cs, 'off-by-one', 'len(seq)', 'len(seq) - 1', 'first_index'), 'range bound');
    assert.ok(find(cs, 'swap-arguments', 'percent, 0', '0, percent', 'discount'));
    assert.ok(find(cs, 'delete-statement', 'self.log.append(("add", name, qty))', 'pass', 'Inventory.add'));
    assert.ok(find(cs, 'delete-statement', 'raise ValueError("quantity must be positive")', 'pass', 'Inventory.add'));
    assert.ok(find(cs, 'delete-return', 'return None', 'pass', 'Inventory.find'));
    assert.ok(find(cs, 'change-constant', 'None', 'False', 'Inventory.find'));
    assert.ok(find(cs, 'change-constant', 'False', 'True', 'Inventory.remove'));
  });

  it('the mutated source is the original with exactly the span replaced, and still parses', async () => {
    const parser = await createParser('python');
    for (const c of cs) {
      const orig = src(path.join('py-shop', c.file));
      assert.equal(orig.slice(c.start, c.end), c.original);
      assert.equal(c.mutatedSource, orig.slice(0, c.start) + c.replacement + orig.slice(c.end));
      const t = parser.parse(c.mutatedSource)!;
      assert.equal(t.rootNode.hasError, false, `${c.operator} ${c.original} → ${c.replacement}`);
      t.delete();
    }
  });

  it('never mutates docstrings or string concatenation with +', async () => {
    const cands = await mutationCandidates('m.py', '"""doc"""\ndef f(x):\n    """Doc."""\n    return "a" + x\n', 'python');
    assert.equal(cands.filter((c) => c.operator === 'delete-statement').length, 0);
    assert.equal(cands.filter((c) => c.operator === 'swap-arithmetic').length, 0);
  });

  it('negating `not x` drops the not instead of stacking another', async () => {
    const cands = await mutationCandidates('m.py', 'def f(x):\n    while not x:\n        x = 1\n    return x\n', 'python');
    assert.ok(find(cands, 'negate-condition', 'not x', 'x', 'f'));
  });

  it('a file that does not parse yields no candidates', async () => {
    assert.deepEqual(await mutationCandidates('bad.py', 'def f(:\n  return 1\n', 'python'), []);
  });
});

describe('tasks/mutate: JavaScript and TypeScript', () => {
  it('every operator has at least one candidate on the js-shop fixture', async () => {
    const cs = await all(
      [
        ['src/pricing.js', 'javascript'],
        ['src/inventory.js', 'javascript'],
      ],
      'js-shop',
    );
    const ops = new Set(cs.map((c) => c.operator));
    assert.deepEqual(
      [...MUTATION_OPERATORS].filter((o) => !ops.has(o)),
      [],
    );
    assert.ok(find(cs, 'swap-boolean', '&&', '||', 'total'));
    assert.ok(find(cs, 'flip-comparison', '===', '!==', 'Inventory.remove'));
    assert.ok(find(cs, 'negate-condition', '!this.items.has(name)', 'this.items.has(name)', 'Inventory.find'));
    assert.ok(find(cs, 'off-by-one', 'seq.length', 'seq.length - 1', 'firstIndex'));
    assert.ok(find(cs, 'change-constant', 'null', 'undefined', 'Inventory.find'));
    assert.ok(find(cs, 'delete-return', 'return true;', ';', 'Inventory.remove'));
  });

  it('TypeScript: mutates runtime code, never types; arrow functions get their variable name', async () => {
    const ts = `type N = 1 | 2;\ninterface P { n: 3 }\nexport const half = (x: number): number => x / 2;\nexport function ok(a: number, b: number): boolean {\n  return a < b && b !== 0;\n}\n`;
    const cs = await mutationCandidates('src/m.ts', ts, 'typescript');
    assert.ok(!cs.some((c) => c.original === '1' || c.original === '3'), 'literal types are not mutated');
    assert.ok(find(cs, 'swap-arithmetic', '/', '*', 'half'));
    assert.ok(find(cs, 'off-by-one', '2', '3', 'half'));
    assert.ok(find(cs, 'swap-boolean', '&&', '||', 'ok'));
    assert.ok(find(cs, 'flip-comparison', '<', '<=', 'ok'));
  });
});

describe('tasks/mutate: de-duplication and seeded order', () => {
  it('identical diffs are de-duplicated', async () => {
    // `x + 1` and `x + 1`: flipping the operator in either gives a different file, but the two
    // off-by-one edits 0→1 on `0` twice in one place would be identical; emulate with copies.
    const cs = await mutationCandidates('m.py', 'def f(x):\n    return x + 1\n', 'python');
    const { kept, duplicates } = dedupeCandidates([...cs, ...cs.slice(0, 2)]);
    assert.equal(duplicates, 2);
    assert.equal(kept.length, cs.length);
  });

  it('the same seed gives the same order, another seed another, and operators are interleaved', async () => {
    const cs = await mutationCandidates('shop/pricing.py', src('py-shop/shop/pricing.py'), 'python');
    const a = orderCandidates(cs, 7).map((c) => c.key);
    const b = orderCandidates(cs, 7).map((c) => c.key);
    const c = orderCandidates(cs, 8).map((c) => c.key);
    assert.deepEqual(a, b);
    assert.notDeepEqual(a, c);
    assert.equal(new Set(a).size, cs.length);
    const nOps = new Set(cs.map((x) => x.operator)).size;
    const firstOps = new Set(
      orderCandidates(cs, 7)
        .slice(0, nOps)
        .map((x) => x.operator),
    );
    assert.equal(firstOps.size, nOps, 'the first round tries each operator once');
  });
});

describe('tasks/mutate: off-by-one changes the bound itself', () => {
  it('a range/loop bound looser than `-` is parenthesized, so the -1 lands on the whole bound', async () => {
    const py = await mutationCandidates(
      'm.py',
      'def f(n, k, c):\n    for i in range(n >> k):\n        pass\n    for j in range(0, n if c else k):\n        pass\n',
      'python',
    );
    const pyBounds = py.filter((c) => c.operator === 'off-by-one' && c.replacement.endsWith(' - 1')).map((c) => c.replacement);
    assert.deepEqual(pyBounds.sort(), ['(n >> k) - 1', '(n if c else k) - 1']);
    const js = await mutationCandidates(
      'm.js',
      'function f(xs, k) {\n  for (let i = 0; i < xs.length >> k; i++) {}\n  for (let i = 0; i < xs.length; i++) {}\n}\n',
      'javascript',
    );
    const jsBounds = js.filter((c) => c.operator === 'off-by-one' && c.replacement.endsWith(' - 1')).map((c) => c.replacement);
    assert.deepEqual(jsBounds.sort(), ['(xs.length >> k) - 1', 'xs.length - 1']);
  });

  it('integers past 2^53 move by exactly one', async () => {
    const py = await mutationCandidates('m.py', 'LIMIT = 9007199254740993\n', 'python');
    assert.deepEqual(
      py
        .filter((c) => c.operator === 'off-by-one')
        .map((c) => c.replacement)
        .sort(),
      ['9007199254740992', '9007199254740994'],
    );
    const js = await mutationCandidates('m.js', 'const LIMIT = 18014398509481985;\n', 'javascript');
    assert.deepEqual(
      js
        .filter((c) => c.operator === 'off-by-one')
        .map((c) => c.replacement)
        .sort(),
      ['18014398509481984', '18014398509481986'],
    );
  });
});
