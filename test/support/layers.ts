// The import rules of docs/design.md "Layers", as data, and a checker over source text.
import * as fs from 'node:fs';
import * as path from 'node:path';

/** layer → the layers it may import (itself always allowed). */
export const ALLOWED: Record<string, readonly string[]> = {
  core: [],
  ast: ['core'],
  sandbox: ['core'],
  onnx: ['core'],
  tasks: ['core', 'sandbox', 'ast'],
  agent: ['core', 'sandbox', 'ast', 'tasks'],
  credit: ['core', 'ast'],
  policy: ['core', 'onnx'],
  train: ['core', 'ast', 'sandbox', 'onnx', 'tasks', 'agent', 'credit', 'policy'],
  cli: ['core', 'ast', 'sandbox', 'onnx', 'tasks', 'agent', 'credit', 'policy', 'train'],
  extension: ['core', 'ast', 'sandbox', 'onnx', 'tasks', 'agent', 'credit', 'policy', 'train'],
};

const IMPORT_RE = /(?:^|[\s;])(?:import|export)\s[^'"`;]*?from\s*['"]([^'"]+)['"]|(?:^|[\s;(=])import\s*['"]([^'"]+)['"]|\b(?:require|import)\s*\(\s*['"]([^'"]+)['"]\s*\)/gm;

export function importsOf(source: string): string[] {
  const out: string[] = [];
  // Comments may mention imports; drop them first (strings with // are rare in import lines).
  const code = source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"])\/\/.*$/gm, '$1');
  for (const m of code.matchAll(IMPORT_RE)) out.push(m[1] ?? m[2] ?? m[3]);
  return out;
}

export interface Violation {
  file: string;
  spec: string;
  reason: string;
}

/** Checks one file's imports. `file` is relative to src/ (e.g. "credit/grpo.ts"). */
export function checkFile(file: string, source: string): Violation[] {
  const layer = file.split(/[\\/]/)[0];
  const allowed = ALLOWED[layer];
  if (!allowed) return [{ file, spec: '', reason: `folder src/${layer} is not a layer of docs/design.md` }];
  const violations: Violation[] = [];
  for (const spec of importsOf(source)) {
    if (spec === 'vscode' && layer !== 'extension') {
      violations.push({ file, spec, reason: 'only src/extension/ may import vscode' });
      continue;
    }
    if (!spec.startsWith('.')) continue;
    const target = path.posix.normalize(path.posix.join(path.posix.dirname(file.replace(/\\/g, '/')), spec));
    if (target.startsWith('..')) {
      violations.push({ file, spec, reason: 'imports from outside src/' });
      continue;
    }
    const targetLayer = target.split('/')[0];
    if (targetLayer !== layer && !allowed.includes(targetLayer)) {
      violations.push({ file, spec, reason: `${layer} may not import ${targetLayer} (allowed: ${allowed.join(', ') || 'nothing'})` });
    }
  }
  return violations;
}

export function listSources(srcDir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (/\.(ts|tsx|js|mjs|cjs)$/.test(e.name)) out.push(path.relative(srcDir, p));
    }
  };
  walk(srcDir);
  return out.sort();
}
