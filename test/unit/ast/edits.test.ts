import { strict as assert } from 'node:assert';
import { createEditSigner, editLanguageOf, editSignature, type EditSignature } from '../../../src/ast/edits';

describe('ast/edits edit signatures (real tree-sitter grammars)', () => {
  let sign: (path: string, before: string, after: string) => EditSignature | undefined;
  before(async () => {
    sign = await createEditSigner();
  });
  const tokens = (p: string, a: string, b: string) => sign(p, a, b)!.tokens;

  describe('Python', () => {
    const cls = (op: string) =>
      `class Stack:\n    def push(self, x):\n        if self.n ${op} 10:\n            self.a.append(x)\n\n    def size(self):\n        return self.n\n`;
    it('operator flip inside a method: qualified name and the operator', () => {
      const s = sign('src/stack.py', cls('<'), cls('<='))!;
      assert.deepEqual(s.definitions, [{ name: 'Stack.push', change: 'modified' }]);
      assert.deepEqual(s.node, { kind: 'comparison_operator', old: '<', new: '<=' });
      assert.deepEqual(s.tokens, ['E:src/stack.py::Stack.push', 'N:comparison_operator:<→<=']);
    });
    it('renamed call', () => {
      assert.deepEqual(tokens('m.py', 'def f(x):\n    y = foo(x)\n    return y\n', 'def f(x):\n    y = bar(x)\n    return y\n'), [
        'E:m.py::f',
        'N:identifier:foo→bar',
      ]);
    });
    it('deleted statement', () => {
      assert.deepEqual(tokens('m.py', 'def f(x):\n    print(x)\n    x += 1\n    return x\n', 'def f(x):\n    print(x)\n    return x\n'), [
        'E:m.py::f',
        'N:expression_statement:x += 1→',
      ]);
    });
    it('added function (nested in a class: qualified)', () => {
      const a = 'class A:\n    def f(self):\n        return 1\n';
      const b = 'class A:\n    def f(self):\n        return 1\n\n    def g(self):\n        return 2\n';
      const s = sign('a.py', a, b)!;
      assert.deepEqual(s.definitions, [{ name: 'A.g', change: 'added' }]);
      assert.deepEqual(s.tokens, ['E:a.py::A.g', 'N:function_definition:→def g(self): return 2']);
    });
    it('removed function and unchanged text', () => {
      const s = sign('a.py', 'def f():\n    pass\n\ndef g():\n    pass\n', 'def f():\n    pass\n')!;
      assert.deepEqual(s.definitions, [{ name: 'g', change: 'removed' }]);
      assert.deepEqual(sign('a.py', 'x = 1\n', 'x = 1\n')!.tokens, []);
    });
    it('a change outside any definition has a node token but no definition', () => {
      assert.deepEqual(tokens('c.py', 'LIMIT = 10\n\ndef f():\n    return LIMIT\n', 'LIMIT = 11\n\ndef f():\n    return LIMIT\n'), [
        'N:integer:10→11',
      ]);
    });
  });

  describe('TypeScript', () => {
    it('operator flip in a class method', () => {
      const src = (op: string) => `export class Stack {\n  push(x: number): void {\n    if (this.n ${op} 10) this.a.push(x);\n  }\n}\n`;
      assert.deepEqual(tokens('src/stack.ts', src('<'), src('<=')), ['E:src/stack.ts::Stack.push', 'N:binary_expression:<→<=']);
    });
    it('renamed call in an arrow function bound to a const', () => {
      assert.deepEqual(tokens('m.ts', 'const f = (x: number) => foo(x);\n', 'const f = (x: number) => bar(x);\n'), [
        'E:m.ts::f',
        'N:identifier:foo→bar',
      ]);
    });
    it('deleted statement', () => {
      assert.deepEqual(
        tokens(
          'm.ts',
          'function f(x: number) {\n  log(x);\n  x++;\n  return x;\n}\n',
          'function f(x: number) {\n  log(x);\n  return x;\n}\n',
        ),
        ['E:m.ts::f', 'N:expression_statement:x++;→'],
      );
    });
    it('added function', () => {
      const s = sign('m.ts', 'function f() {}\n', 'function f() {}\nfunction g(a: string): string {\n  return a;\n}\n')!;
      assert.deepEqual(s.definitions, [{ name: 'g', change: 'added' }]);
      assert.equal(s.node!.kind, 'function_declaration');
    });
    it('two methods changed by one edit span are both reported', () => {
      const a = 'class K {\n  a() { return 1; }\n  b() { return 2; }\n}\n';
      const b = 'class K {\n  a() { return 3; }\n  b() { return 4; }\n}\n';
      assert.deepEqual(sign('k.ts', a, b)!.definitions, [
        { name: 'K.a', change: 'modified' },
        { name: 'K.b', change: 'modified' },
      ]);
    });
  });

  it('JavaScript and language detection', () => {
    assert.deepEqual(tokens('x.js', 'function f(a) { return a - 1; }\n', 'function f(a) { return a + 1; }\n'), [
      'E:x.js::f',
      'N:binary_expression:-→+',
    ]);
    assert.equal(editLanguageOf('a/b.tsx'), 'tsx');
    assert.equal(editLanguageOf('README.md'), undefined);
    assert.equal(sign('README.md', 'a', 'b'), undefined);
  });
  it('JavaScript object-literal methods are qualified by the variable that holds the object', () => {
    const src = (op: string) =>
      `const api = {\n  get(k) { return k ${op} 1; },\n  put: function (k) { return k; },\n  'del': (k) => k,\n};\n`;
    assert.deepEqual(tokens('api.js', src('-'), src('+')), ['E:api.js::api.get', 'N:binary_expression:-→+']);
    const a = "const api = {\n  put: function (k) { return k; },\n  'del': (k) => k,\n};\n";
    const b = "const api = {\n  put: function (k) { return -k; },\n  'del': (k) => !k,\n};\n";
    assert.deepEqual(sign('api.js', a, b)!.definitions, [
      { name: 'api.del', change: 'modified' },
      { name: 'api.put', change: 'modified' },
    ]);
    // The object itself is not a definition: an edit to a plain property is outside any.
    assert.deepEqual(sign('api.js', 'const api = { n: 1 };\n', 'const api = { n: 2 };\n')!.definitions, []);
  });
  it('python: a changed decorator modifies the decorated definition', async () => {
    const sig = (await editSignature(
      'app.py',
      '@app.route("/a")\ndef f():\n    return 1\n',
      '@app.route("/b")\ndef f():\n    return 1\n',
    ))!;
    assert.deepEqual(sig.definitions, [{ name: 'f', change: 'modified' }]);
    assert.equal(sig.tokens[0], 'E:app.py::f');
  });
});
