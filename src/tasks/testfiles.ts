// Which files of a workspace are tests (never mutated; restored before scoring) and which
// are source (mutation targets). One classifier serves the host scan and the in-container scan.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Language } from '../core/schema';
import { listWorkspaceFiles as listSnapshotFiles } from '../sandbox/snapshot';

/** Folders never scanned: dependencies, caches, build output, VCS data. */
export const SKIP_DIRS = new Set([
  'node_modules', '.git', '.hg', '.svn', '.venv', 'venv', 'env', '__pycache__', '.pytest_cache', '.mypy_cache',
  '.tox', '.nox', 'dist', 'build', 'out', 'coverage', '.turnwise', 'target', 'vendor', '.next', '.cache',
]);

const TEST_DIRS = new Set(['test', 'tests', '__tests__', 'testing', 'spec']);

/**
 * Folders the test-infrastructure scan (the originals, and the restore inside the sandbox)
 * leaves out: only those the runners never look into (pytest's default norecursedirs: dot
 * folders, build, dist, node_modules, venv, *.egg, CVS, _darcs, {arch}; and __pycache__).
 * Pruning more (vendor/, out/, env/ like SKIP_DIRS does for mutation targets) would let an agent
 * hide a conftest.py where pytest still loads it.
 */
const TEST_SCAN_PRUNE = ['build', 'dist', 'node_modules', 'venv', 'CVS', '_darcs', '{arch}', '__pycache__'];

function prunedForTestScan(name: string): boolean {
  return name.startsWith('.') || name.endsWith('.egg') || TEST_SCAN_PRUNE.includes(name);
}

/**
 * Files that configure or hook the test runner: editing them could change what tests see
 * (pyproject.toml/setup.cfg can load a pytest plugin through addopts; package.json holds jest config).
 */
const RUNNER_CONFIG = [
  /^conftest\.py$/, /^pytest\.ini$/, /^tox\.ini$/, /^setup\.cfg$/, /^pyproject\.toml$/, /^package\.json$/, /^sitecustomize\.py$/, /^usercustomize\.py$/,
  /^jest\.config\.[cm]?[jt]s$/, /^jest\.setup\.[cm]?[jt]s$/, /^\.mocharc\.(js|cjs|json|jsonc|ya?ml)$/, /^vitest\.config\.[cm]?[jt]s$/,
];

/** Test file names by language (the runners' own discovery rules, union of common ones). */
const TEST_NAME: Array<[RegExp, Language]> = [
  [/^test_.*\.py$/, 'python'],
  [/^.*_test\.py$/, 'python'],
  [/^.*[.\-_](test|spec)\.[cm]?js$/, 'javascript'],
  [/^test(-.*)?\.[cm]?js$/, 'javascript'],
  [/^.*[.\-_](test|spec)\.[cm]?tsx?$/, 'typescript'],
  [/^.*_test\.go$/, 'go'],
];

const SOURCE_EXT: Record<string, Language> = {
  '.py': 'python',
  '.js': 'javascript',
  '.mjs': 'javascript',
  '.cjs': 'javascript',
  '.jsx': 'javascript',
  '.ts': 'typescript',
  '.mts': 'typescript',
  '.cts': 'typescript',
  '.tsx': 'typescript',
  '.go': 'go',
};

export function languageOfFile(rel: string): Language | undefined {
  return SOURCE_EXT[path.posix.extname(rel)];
}

/**
 * True for every file an agent must not be able to change to pass: test files by name, anything
 * inside a test folder, and runner configuration/hooks. `rel` is workspace-relative, '/'-separated.
 */
export function isTestInfraFile(rel: string): boolean {
  const parts = rel.split('/');
  const base = parts[parts.length - 1];
  if (parts.slice(0, -1).some((p) => TEST_DIRS.has(p))) return true;
  if (RUNNER_CONFIG.some((r) => r.test(base))) return true;
  return TEST_NAME.some(([r]) => r.test(base));
}

/** Source files that may be mutated: known language, not test infrastructure, not a declaration file. */
export function isMutableSource(rel: string): boolean {
  if (isTestInfraFile(rel)) return false;
  if (/\.d\.[cm]?ts$/.test(rel) || /\.min\.js$/.test(rel)) return false;
  const lang = languageOfFile(rel);
  return lang === 'python' || lang === 'javascript' || lang === 'typescript';
}

/** Lists workspace files (relative, sorted), skipping SKIP_DIRS and symlinks. */
export function listWorkspaceFiles(dir: string, maxFiles = 50_000): string[] {
  const out: string[] = [];
  const walk = (rel: string) => {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(path.join(dir, rel), { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      if (out.length >= maxFiles) return;
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) {
        if (!SKIP_DIRS.has(e.name)) walk(r);
      } else if (e.isFile()) out.push(r);
    }
  };
  walk('');
  return out.sort();
}

/**
 * Reads every test-infrastructure file of a workspace as the snapshot holds it (the same file set:
 * tracked plus untracked-but-not-ignored files in a git work tree), except in folders the runners
 * never enter: the originals restored before scoring. Symbolic links are not originals.
 */
export function collectTestFiles(dir: string): Map<string, Buffer> {
  const files = new Map<string, Buffer>();
  for (const f of listSnapshotFiles(dir)) {
    if (f.link !== undefined || f.rel.split('/').some(prunedForTestScan) || !isTestInfraFile(f.rel)) continue;
    files.set(f.rel, fs.readFileSync(path.join(dir, f.rel)));
  }
  return files;
}

/** `find` over the workspace with the test scan's pruning (see TEST_SCAN_PRUNE). */
export function findCommand(action: string, type: 'f' | 'l' = 'f'): string {
  const prune = ["-name '.*'", "-name '*.egg'", ...TEST_SCAN_PRUNE.map((d) => `-name '${d}'`)].join(' -o ');
  return `find . -mindepth 1 \\( ${prune} \\) -prune -o -type ${type} ${action}`;
}

/**
 * A bash command that prints `<sha256>  ./<path>` for every regular file under the workspace,
 * pruning the same folders as collectTestFiles (no file names on a command line).
 */
export function hashFilesCommand(): string {
  return `${findCommand('-print0')} | xargs -0 -r sha256sum --`;
}
