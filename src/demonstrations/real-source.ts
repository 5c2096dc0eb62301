// Fix cases from real Python source: the modules installed on this machine (the standard
// library, Debian's python3-* packages) are read at training time, never copied into Turnwise,
// and mutated by the real mutation engine. Their paths keep the packages' own layouts (nested
// packages, `__init__.py`, `_private` modules), sometimes under `src/`, so a policy trained on
// them cannot fix a bug by recalling a path: it has to read the one `tw-suspects` prints.
// Tool output is simulated in the sandbox tools' exact formats, as for the generated modules.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { seedOf } from '../core/random';
import { stopPoint } from '../core/stop';
import { mutationCandidates } from '../tasks/mutate';
import { FIXABLE_OPERATORS, fixCommand, withTopCandidates, type FixCase } from './fix-cases';
import { showContext, simulatedSuspects, testIds } from './tool-output';
import { TRANSFER_PANEL } from '../tasks/panel';

type Rng = () => number;

/** One Python file: where it is on this machine and the path it has in its package. */
export interface SourceFile {
  abs: string;
  /** Path relative to its root (`json/decoder.py`, `email/mime/text.py`). */
  rel: string;
}

/** Where installed Python source is looked for when no roots are given. */
export function defaultSourceRoots(): string[] {
  const roots: string[] = [];
  for (const base of ['/usr/lib', '/usr/local/lib']) {
    let names: string[];
    try {
      names = fs.readdirSync(base);
    } catch {
      continue;
    }
    for (const n of names.sort()) {
      if (/^python3\.\d+$/.test(n)) roots.push(path.join(base, n));
      if (n === 'python3') roots.push(path.join(base, n, 'dist-packages'));
    }
  }
  return roots.filter((r) => fs.statSync(r, { throwIfNoEntry: false })?.isDirectory());
}

/**
 * Folders never read: tests (a demonstration's bug is in the code under test), the interpreter's
 * own build and tooling trees, vendored copies, and the packages of the transfer panel (its
 * repositories must stay unseen by the warm start: `turnwise bench transfer`).
 */
const SKIP_DIRS = new Set([
  'test',
  'tests',
  'testing',
  'idle_test',
  '__pycache__',
  'site-packages',
  'dist-packages',
  'config-3',
  'lib2to3',
  'idlelib',
  'turtledemo',
  'ensurepip',
  'tkinter',
  '_vendor',
  'vendor',
  'encodings',
]);
export const PANEL_MODULES: ReadonlySet<string> = new Set(
  TRANSFER_PANEL.flatMap((r) => [r.name, r.name.replace(/-/g, '_'), r.debianSource.replace(/^python-/, ''), 'tlz']),
);

/** Files of a usable size: big enough to hold functions, small enough to mutate quickly. */
export const SOURCE_BYTES: readonly [number, number] = [400, 40_000];

/**
 * The Python files under `roots` that fix cases may come from, in a fixed order (sorted paths):
 * plain files of SOURCE_BYTES, outside SKIP_DIRS, not named test_*.py, not of a panel package.
 * A root's dist-packages is its own root (its packages' paths start at the package).
 */
export function pythonSourceFiles(roots: readonly string[]): SourceFile[] {
  const out: SourceFile[] = [];
  const walk = (root: string, dir: string, depth: number) => {
    let ents: fs.Dirent[];
    try {
      ents = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of ents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
      const abs = path.join(dir, e.name);
      if (e.isDirectory()) {
        const top = depth === 0 ? e.name.replace(/-[\d.]+.*$/, '') : '';
        if (depth < 6 && !SKIP_DIRS.has(e.name) && !e.name.includes('.') && !PANEL_MODULES.has(top)) walk(root, abs, depth + 1);
        continue;
      }
      if (!e.isFile() || !e.name.endsWith('.py') || /^test_|_test\.py$|^conftest\.py$/.test(e.name)) continue;
      if (depth === 0 && PANEL_MODULES.has(e.name.slice(0, -3))) continue;
      const size = fs.statSync(abs, { throwIfNoEntry: false })?.size ?? 0;
      if (size >= SOURCE_BYTES[0] && size <= SOURCE_BYTES[1]) out.push({ abs, rel: path.relative(root, abs).split(path.sep).join('/') });
    }
  };
  for (const r of roots) walk(r, r, 0);
  return out;
}

/**
 * Train or held-out by file: a fixed share of files (by a hash of the path in its package) only
 * ever gives evaluation cases, so the warm start's held-out real-source figure is on modules
 * it never trained on.
 */
export function isHeldOutSource(f: SourceFile, share = 0.1): boolean {
  return (seedOf('real-source', f.rel) % 1000) / 1000 < share;
}

/** The path a file gets in its demonstration: its package path, under `src/` in a third of them. */
function layoutPath(r: Rng, rel: string): string {
  return r() < 0.33 ? `src/${rel}` : rel;
}

/** The `def` enclosing line `n` (1-based) and the function's last line, by indentation. */
export function enclosingFunction(lines: readonly string[], n: number): { name: string; first: number; last: number } | undefined {
  const indentOf = (s: string) => s.length - s.trimStart().length;
  const at = indentOf(lines[n - 1] ?? '');
  for (let i = n - 1; i >= 1; i--) {
    const l = lines[i - 1];
    if (!l.trim()) continue;
    const m = /^(\s*)(?:async\s+)?def\s+(\w+)/.exec(l);
    if (m && m[1].length < at) {
      let last = i;
      for (let j = i + 1; j <= lines.length; j++) {
        const t = lines[j - 1];
        if (!t.trim()) continue;
        if (indentOf(t) <= m[1].length) break;
        last = j;
      }
      return n <= last ? { name: m[2], first: i, last } : undefined;
    }
    if (indentOf(l) < at && /^\s*class\s/.test(l)) return undefined;
  }
  return undefined;
}

/**
 * Up to `n` fix cases from one file: fixable one-token mutations inside a function, each with
 * its tests, a simulated `tw-suspects` ranking over the function's lines (now and then a line
 * of another function of the file ranked too, as a shared helper's is) and the lines around it.
 */
export async function realSourceCases(r: Rng, file: SourceFile, n = 4): Promise<FixCase[]> {
  let source: string;
  try {
    source = fs.readFileSync(file.abs, 'utf8');
  } catch {
    return [];
  }
  if (source.includes('\r') || source.includes('\t')) return [];
  const at = layoutPath(r, file.rel);
  const cands = (await mutationCandidates(at, source, 'python')).filter((c) => FIXABLE_OPERATORS.has(c.operator));
  const before = source.split('\n');
  const out: FixCase[] = [];
  while (out.length < n && cands.length > 0) {
    const c = cands.splice(Math.floor(r() * cands.length), 1)[0];
    const after = c.mutatedSource.split('\n');
    if (after.length !== before.length || before[c.line - 1] === after[c.line - 1] || before[c.line - 1].length > 100) continue;
    const fn = enclosingFunction(after, c.line);
    if (!fn || fn.last - fn.first > 60) continue;
    const fix = fixCommand(at, c.line, after[c.line - 1], before[c.line - 1]);
    if (!fix) continue;
    const suspects = simulatedSuspects(r, at, after, [fn.first, fn.last], c.line);
    if (r() < 0.3 && suspects.length > 2) {
      // A line of another function, ranked below the bug: several places run in a failing test.
      const other = before.findIndex(
        (l, i) =>
          i + 1 !== c.line &&
          /^\s+(return|if|for|while)\b/.test(l) &&
          l.length <= 100 &&
          (i + 1 < fn.first || i + 1 > fn.last) &&
          r() < 0.05,
      );
      if (other >= 0) suspects.splice(1 + Math.floor(r() * (suspects.length - 1)), 0, `${at}:${other + 1}: ${after[other].trim()}`);
      suspects.length = Math.min(suspects.length, 5);
      if (!suspects.some((s) => s.startsWith(`${at}:${c.line}: `))) continue;
    }
    out.push(
      await withTopCandidates({
        path: at,
        line: c.line,
        mutatedLine: after[c.line - 1],
        originalLine: before[c.line - 1],
        fix,
        failing: testIds(r, at, fn.name.replace(/^_+/, ''), 1 + Math.floor(r() * 3)),
        passing: 3 + Math.floor(r() * 60),
        suspects,
        context: showContext(after, c.line),
      }),
    );
  }
  return out;
}

/**
 * `n` fix cases drawn from `files` (train or held-out files only, as `heldOut` says), several
 * per file, reproducible for a seed and a machine's installed files.
 */
export async function realSourcePool(
  r: Rng,
  files: readonly SourceFile[],
  n: number,
  o: { heldOut?: boolean; perFile?: number; signal?: AbortSignal } = {},
): Promise<FixCase[]> {
  const usable = files.filter((f) => isHeldOutSource(f) === !!o.heldOut);
  const out: FixCase[] = [];
  if (usable.length === 0) return out;
  for (let tries = 0; out.length < n && tries < n * 4; tries++) {
    await stopPoint(o.signal, `making fix cases from Python source (${out.length} of ${n})`);
    const f = usable[Math.floor(r() * usable.length)];
    out.push(...(await realSourceCases(r, f, Math.min(o.perFile ?? 6, n - out.length))));
  }
  return out.slice(0, n);
}
