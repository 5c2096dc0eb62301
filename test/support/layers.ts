// The import rules of docs/design.md "Layers", as data, and a checker over source text.
import * as fs from 'node:fs';
import * as path from 'node:path';

// The layers below the run orchestration, and those each row above adds.
const MODEL_AND_TOOLS = ['core', 'ast', 'sandbox', 'onnx', 'tasks', 'agent', 'credit', 'policy'];
const BELOW_TRAIN = [...MODEL_AND_TOOLS, 'demonstrations', 'eval'];
const BELOW_ENTRY_POINTS = [...BELOW_TRAIN, 'train', 'warmstart', 'serve', 'bench'];

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
  demonstrations: ['core', 'ast', 'tasks', 'agent'],
  eval: ['core', 'agent'],
  train: BELOW_TRAIN,
  warmstart: [...BELOW_TRAIN, 'train'],
  serve: ['core', 'onnx', 'agent', 'policy'],
  bench: [...BELOW_TRAIN, 'train', 'warmstart'],
  cli: BELOW_ENTRY_POINTS,
  extension: BELOW_ENTRY_POINTS,
};

const IMPORT_RE =
  /(?:^|[\s;])(?:import|export)\s[^'"`;]*?from\s*['"]([^'"]+)['"]|(?:^|[\s;(=])import\s*['"]([^'"]+)['"]|\b(?:require|import)\s*\(\s*['"]([^'"]+)['"]\s*\)/gm;

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

/** The relative imports between source files: file (relative to src/) → the files it imports. */
export function importGraph(srcDir: string): Map<string, string[]> {
  const files = listSources(srcDir).map((f) => f.replace(/\\/g, '/'));
  const known = new Set(files);
  const resolve = (from: string, spec: string): string | undefined => {
    const base = path.posix.normalize(path.posix.join(path.posix.dirname(from), spec));
    for (const cand of [base, `${base}.ts`, `${base}.tsx`, `${base}.js`, `${base}/index.ts`]) if (known.has(cand)) return cand;
    return undefined;
  };
  const graph = new Map<string, string[]>();
  for (const f of files) {
    const deps = importsOf(fs.readFileSync(path.join(srcDir, f), 'utf8'))
      .filter((s) => s.startsWith('.'))
      .map((s) => resolve(f, s))
      .filter((t): t is string => t !== undefined && t !== f);
    graph.set(f, [...new Set(deps)].sort());
  }
  return graph;
}

/** Import circles: each strongly connected group of two or more files (Tarjan), files sorted. */
export function importCycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const groups: string[][] = [];
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const group: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        group.push(w);
      } while (w !== v);
      if (group.length > 1) groups.push(group.sort());
    }
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return groups.sort((a, b) => (a[0] < b[0] ? -1 : 1));
}
