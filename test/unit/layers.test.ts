import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { checkFile, importCycles, importGraph, importsOf, listSources } from '../support/layers';

const SRC = path.resolve(__dirname, '..', '..', 'src');

describe('layer rules (docs/design.md)', () => {
  it('every source file imports only what its layer may', () => {
    const violations = listSources(SRC).flatMap((f) => checkFile(f, fs.readFileSync(path.join(SRC, f), 'utf8')));
    assert.deepEqual(
      violations.map((v) => `src/${v.file}: ${v.spec}: ${v.reason}`),
      [],
    );
  });

  it('no import circles between source files (type-only imports included)', () => {
    assert.deepEqual(importCycles(importGraph(SRC)), []);
  });

  it('every layer folder of docs/design.md exists', () => {
    for (const l of ['core', 'ast', 'sandbox', 'tasks', 'agent', 'credit', 'onnx', 'policy', 'train', 'cli', 'extension']) {
      assert.ok(fs.statSync(path.join(SRC, l)).isDirectory(), `src/${l} missing`);
    }
  });

  describe('the checker itself', () => {
    it('finds static, dynamic, re-export and require imports, ignoring comments', () => {
      const src = `import a from './a';\nimport { b } from "../core/b";\nexport * from './c';\nconst d = require('../sandbox/d');\nconst e = await import('vscode');\nimport './side';\n// import x from '../policy/x';\n/* require('../train/y') */`;
      assert.deepEqual(importsOf(src), ['./a', '../core/b', './c', '../sandbox/d', 'vscode', './side']);
    });

    it('finds every circle, of two files or more, and nothing in a tree', () => {
      const g = new Map<string, string[]>([
        ['a.ts', ['b.ts']],
        ['b.ts', ['c.ts']],
        ['c.ts', ['a.ts', 'd.ts']],
        ['d.ts', []],
        ['e.ts', ['f.ts']],
        ['f.ts', ['e.ts']],
        ['g.ts', ['d.ts']],
      ]);
      assert.deepEqual(importCycles(g), [
        ['a.ts', 'b.ts', 'c.ts'],
        ['e.ts', 'f.ts'],
      ]);
      assert.deepEqual(
        importCycles(
          new Map([
            ['x.ts', ['y.ts']],
            ['y.ts', []],
          ]),
        ),
        [],
      );
    });

    it('flags vscode outside extension and upward or sideways imports', () => {
      const reasons = (file: string, src: string) => checkFile(file, src).map((v) => v.reason);
      assert.deepEqual(reasons('credit/x.ts', `import * as vscode from 'vscode';`), ['only src/extension/ may import vscode']);
      assert.deepEqual(reasons('core/x.ts', `import { a } from '../ast/a';`), ['core may not import ast (allowed: nothing)']);
      assert.equal(reasons('credit/x.ts', `import { p } from '../policy/p';`).length, 1);
      assert.equal(reasons('sandbox/x.ts', `import { t } from '../train/t';`).length, 1);
      assert.deepEqual(reasons('extension/x.ts', `import * as vscode from 'vscode'; import { r } from '../train/doctor';`), []);
      assert.deepEqual(reasons('train/x.ts', `import { r } from '../credit/a'; import { s } from '../sandbox/b';`), []);
    });
  });
});
