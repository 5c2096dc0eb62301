// Which files of a workspace are tests (never mutated; restored before scoring) and which
// are source (mutation targets). One classifier serves the host scan and the in-container scan.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError } from '../core/errors';
import type { Language } from '../core/schema';
import { listWorkspaceFiles as listSnapshotFiles } from '../sandbox/snapshot';
import { DEFAULT_PYTHON_FILES, matchesPythonFiles, pytestCollection, pytestPluginsOf } from './pytest-config';

/** Folders never scanned: dependencies, caches, build output, VCS data. */
export const SKIP_DIRS = new Set([
  'node_modules',
  '.git',
  '.hg',
  '.svn',
  '.venv',
  'venv',
  'env',
  '__pycache__',
  '.pytest_cache',
  '.mypy_cache',
  '.tox',
  '.nox',
  'dist',
  'build',
  'out',
  'coverage',
  '.turnwise',
  'target',
  'vendor',
  '.next',
  '.cache',
]);

/**
 * Folders whose files are test infrastructure: test folders by convention, and jest's
 * `__snapshots__` (the expected values of snapshot tests) and `__mocks__` (jest uses a
 * `__mocks__` module in place of a package of that name for every test, with no call naming it).
 */
const TEST_DIRS = new Set(['test', 'tests', '__tests__', 'testing', 'spec', '__snapshots__', '__mocks__']);

/**
 * Folders the test-infrastructure scan (the originals, and the restore inside the sandbox)
 * leaves out: only those the runners never look into (pytest's default norecursedirs: dot
 * folders, build, dist, node_modules, venv, *.egg, CVS, _darcs, {arch}; and __pycache__, which
 * scoring deletes outright). Pruning more (vendor/, out/, env/ like SKIP_DIRS does for mutation
 * targets) would let an agent hide a conftest.py where pytest still loads it. Dot *files* are
 * scanned: `.mocharc.yml`, `.pytest.ini` and `.babelrc` configure runners.
 */
const TEST_SCAN_PRUNE = ['build', 'dist', 'node_modules', 'venv', 'CVS', '_darcs', '{arch}', '__pycache__'];

/** Whether the test scan skips a folder of this name. */
function prunedForTestScan(name: string): boolean {
  return name.startsWith('.') || name.endsWith('.egg') || TEST_SCAN_PRUNE.includes(name);
}

/** Whether the test scan skips a path: one of its folders is pruned, and it is not a file scanned everywhere. */
function underPrunedFolder(rel: string): boolean {
  const dirs = rel.split('/').slice(0, -1);
  // node_modules is restored as a whole (restoreDependencies), never file by file.
  return dirs.includes('node_modules') || (dirs.some(prunedForTestScan) && !scannedEverywhere(rel));
}

/**
 * Files the test scan covers inside pruned folders too. pytest loads a conftest.py from every
 * folder it collects, and a project's own norecursedirs may collect build/ or a dot folder, which
 * pytest's defaults leave out; jest runs every file its testMatch names, in build/, dist/ and
 * dot folders as well, and reads `__snapshots__` and `__mocks__` wherever they are. Python reads package metadata, and pytest its plugins' entry
 * points, from every `*.dist-info`, `*.egg-info` and `*.egg` folder on its path, whatever the
 * case of the name and dot-named ones included; the workspace is on that path.
 */
function scannedEverywhere(rel: string): boolean {
  const parts = rel.split('/');
  const base = parts[parts.length - 1];
  return (
    base === 'conftest.py' ||
    TEST_NAME.some(([r]) => r.test(base)) ||
    parts.slice(0, -1).some((p) => METADATA_DIR.test(p) || TEST_DIRS.has(p))
  );
}

/**
 * Files that configure or hook the test runner: editing them could change what tests see
 * (pyproject.toml/setup.cfg can load a pytest plugin through addopts; package.json holds jest
 * config; a Babel or SWC config transforms the test files jest runs).
 */
const RUNNER_CONFIG = [
  /^conftest\.py$/,
  /^\.?pytest\.ini$/,
  /^tox\.ini$/,
  /^setup\.cfg$/,
  /^pyproject\.toml$/,
  /^package\.json$/,
  /^sitecustomize\.py$/,
  /^usercustomize\.py$/,
  /^jest\.config\.([cm]?[jt]s|json)$/,
  /^jest\.setup\.[cm]?[jt]s$/,
  /^\.mocharc\.(js|cjs|json|jsonc|ya?ml)$/,
  /^vitest\.config\.[cm]?[jt]s$/,
  /^babel\.config\.([cm]?[jt]s|json)$/,
  /^\.babelrc(\.([cm]?[jt]s|json))?$/,
  /^\.swcrc$/,
];

/**
 * Files that load code by being there rather than by being imported: compiled modules, which
 * Python and Node prefer to (or load instead of) the source beside them and which no scan can
 * read, and package metadata, whose entry points pytest loads as plugins from the workspace.
 * An agent's such files are removed before scoring and the snapshot's put back.
 */
const LOADED_BY_PRESENCE = [/\.py[co]$/, /\.(so|pyd|node|dylib)$/];
const METADATA_DIR = /\.(dist-info|egg-info|egg)$/i;

/** Test file names by language (the runners' own discovery rules, union of common ones). */
const TEST_NAME: Array<[RegExp, Language]> = [
  [/^test_.*\.py$/, 'python'],
  [/^.*_test\.py$/, 'python'],
  // jest's default testMatch (`?(*.)+(spec|test).[jt]s?(x)`), bare names included, and mocha's
  // `-`/`_` forms; `.snap` files are snapshot tests' expected values.
  [/^(.*[.\-_])?(test|spec)\.[cm]?jsx?$/, 'javascript'],
  [/^test(-.*)?\.[cm]?js$/, 'javascript'],
  [/^(.*[.\-_])?(test|spec)\.[cm]?tsx?$/, 'typescript'],
  [/^.*\.snap$/, 'javascript'],
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
  const dirs = parts.slice(0, -1);
  if (dirs.some((p) => TEST_DIRS.has(p) || METADATA_DIR.test(p))) return true;
  if (RUNNER_CONFIG.some((r) => r.test(base)) || LOADED_BY_PRESENCE.some((r) => r.test(base))) return true;
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

/** What scoring compares the sandbox with: the snapshot's test infrastructure and its sources. */
export interface ScoringOriginals {
  /** The workspace folder on the host the snapshot was built from. */
  root: string;
  /** Test-infrastructure files (path → bytes), restored before scoring. */
  tests: ReadonlyMap<string, Buffer>;
  /** Every other file in a source language (path → sha256), the baseline of the tamper scan. */
  sources: ReadonlyMap<string, string>;
  /**
   * The rest of the files the test scan covers (path → sha256): data, docs, configuration.
   * Restored before scoring a mutation task, whose fix is in a source file, so that the tests'
   * expected values (a fixture JSON outside the test folders) are the snapshot's.
   */
  data: ReadonlyMap<string, string>;
  /** The snapshot's symbolic links outside node_modules (path → target). */
  links: ReadonlyMap<string, string>;
}

/**
 * Reads every test-infrastructure file of a workspace as the snapshot holds it (the same file set:
 * tracked plus untracked-but-not-ignored files in a git work tree), except in folders the runners
 * never enter: the originals restored before scoring; and hashes its other source files. Symbolic
 * links are not originals.
 */
export function collectOriginals(dir: string): ScoringOriginals {
  const tests = new Map<string, Buffer>();
  const sources = new Map<string, string>();
  const data = new Map<string, string>();
  const links = new Map<string, string>();
  const listed = listSnapshotFiles(dir).filter((f) => !f.rel.split('/').includes('node_modules'));
  for (const f of listed) if (f.link !== undefined) links.set(f.rel, f.link);
  const files = listed.filter((f) => f.link === undefined);
  const hash = (rel: string) =>
    createHash('sha256')
      .update(fs.readFileSync(path.join(dir, rel)))
      .digest('hex');
  for (const f of files) {
    if (isTestInfraFile(f.rel)) {
      if (!underPrunedFolder(f.rel)) tests.set(f.rel, fs.readFileSync(path.join(dir, f.rel)));
    } else if (languageOfFile(f.rel) !== undefined) {
      sources.set(f.rel, hash(f.rel));
    } else if (!underPrunedFolder(f.rel)) {
      data.set(f.rel, hash(f.rel));
    }
  }
  // A source file the runner configuration loads (a jest setup file, a mocha --require, a pytest
  // plugin named by -p or pytest_plugins), or that pytest collects as a test module under the
  // configuration's own python_files (mock's `testmock.py`), is test machinery too: restored, not scanned.
  const { pythonFiles, testPaths } = pytestCollection(dir);
  const underRoots = (rel: string) => !testPaths || testPaths.some((r) => rel === r || rel.startsWith(`${r}/`));
  const collected =
    pythonFiles === DEFAULT_PYTHON_FILES
      ? []
      : files.map((f) => f.rel).filter((rel) => rel.endsWith('.py') && matchesPythonFiles(rel, pythonFiles) && underRoots(rel));
  for (const rel of [...runnerLoadedFiles(tests, new Set(files.map((f) => f.rel))), ...collected]) {
    if (!tests.has(rel) && !underPrunedFolder(rel)) {
      tests.set(rel, fs.readFileSync(path.join(dir, rel)));
      sources.delete(rel);
    }
  }
  return { root: path.resolve(dir), tests, sources, data, links };
}

/**
 * The snapshot's bytes of a data file, read again from the host workspace. Throws when the file
 * changed there since the snapshot: what scoring would put back is no longer what it held.
 */
export function originalData(o: ScoringOriginals, rel: string): Buffer {
  const want = o.data.get(rel);
  let buf: Buffer | undefined;
  try {
    buf = fs.readFileSync(path.join(o.root, rel));
  } catch {
    buf = undefined;
  }
  if (want === undefined || !buf || createHash('sha256').update(buf).digest('hex') !== want) {
    throw new TurnwiseError(
      'invalid-input',
      `${rel} in ${o.root} changed since the run's snapshot was taken, so scoring cannot put it back as the snapshot held it`,
      {
        hint: 'leave the workspace as it is while a run or an evaluation is going, or start it again',
      },
    );
  }
  return buf;
}

/**
 * Keys of a JS test runner's configuration whose values name the code under test, the tests, or
 * patterns over them, never a file the runner loads as its own machinery: a path under one of
 * them is not put back before scoring (the agent's fix of the code under test must stand). Also
 * the fields that name a package's own modules (main, exports, ...) wherever they appear.
 */
const NOT_RUNNER_FILE_KEYS = new Set([
  'collectCoverageFrom',
  'coveragePathIgnorePatterns',
  'coverageDirectory',
  'roots',
  'rootDir',
  'modulePaths',
  'moduleDirectories',
  'testMatch',
  'testRegex',
  'testPathIgnorePatterns',
  'modulePathIgnorePatterns',
  'watchPathIgnorePatterns',
  'transformIgnorePatterns',
  'spec',
  'ignore',
  'extension',
  'files',
  'include',
  'exclude',
  'main',
  'module',
  'types',
  'typings',
  'exports',
  'bin',
  'browser',
  // Modules jest loads in place of others, for the tests and the code under test alike: a stand-in
  // in `__mocks__` or a test folder is test infrastructure by its place; a source module named
  // here (`'^config$': '<rootDir>/src/config.js'`) is code under test, whose fix must stand.
  'moduleNameMapper',
]);

/** The runner blocks of package.json (the rest of it names the package itself: its main module, its scripts). */
const PACKAGE_RUNNER_KEYS = ['jest', 'mocha', 'ava', 'vitest'];

/** A string literal of JS text with the property keys it sits under, outermost first (its own key last). */
interface KeyedLiteral {
  value: string;
  index: number;
  keys: string[];
}

/**
 * The string literals of JS or JSON text, each with the keys of the objects it is nested in, in
 * one pass: `{ setupFiles: [path.join(__dirname, 'a.js')], moduleNameMapper: { '^c$': './c.js' } }`
 * gives 'a.js' under setupFiles and './c.js' under moduleNameMapper, '^c$'. Comments are
 * skipped; a string followed by `:` is a key, not a literal. Regular-expression literals are not
 * told apart from division (a quote inside one can shift what follows; the runner configs read
 * here hold their patterns as strings).
 */
function keyedLiterals(text: string): KeyedLiteral[] {
  const out: KeyedLiteral[] = [];
  // Per open bracket, the key its value belongs to; `pending` is the key of the current level.
  const stack: (string | undefined)[] = [];
  let pending: string | undefined;
  const keys = () => [...stack, pending].filter((k): k is string => k !== undefined);
  /** Index of the first non-space character at or after i. */
  const skipSpace = (i: number) => {
    while (i < text.length && /\s/.test(text[i])) i++;
    return i;
  };
  const isKey = (end: number) => {
    const j = skipSpace(end);
    return text[j] === ':' && text[j + 1] !== ':';
  };
  let i = 0;
  while (i < text.length) {
    const ch = text[i];
    if (ch === '/' && text[i + 1] === '/') {
      const nl = text.indexOf('\n', i);
      i = nl < 0 ? text.length : nl + 1;
    } else if (ch === '/' && text[i + 1] === '*') {
      const close = text.indexOf('*/', i + 2);
      i = close < 0 ? text.length : close + 2;
    } else if (ch === "'" || ch === '"' || ch === '`') {
      let j = i + 1;
      let value = '';
      while (j < text.length && text[j] !== ch) {
        if (text[j] === '\\' && j + 1 < text.length) {
          value += text[j + 1];
          j += 2;
        } else if (text[j] === '\n' && ch !== '`') break;
        else value += text[j++];
      }
      if (isKey(j + 1)) pending = value;
      else out.push({ value, index: i, keys: keys() });
      i = j + 1;
    } else if (/[A-Za-z_$]/.test(ch)) {
      let j = i + 1;
      while (j < text.length && /[\w$]/.test(text[j])) j++;
      if (isKey(j)) pending = text.slice(i, j);
      i = j;
    } else {
      if (ch === '{' || ch === '[' || ch === '(') {
        stack.push(pending);
        pending = undefined;
      } else if (ch === '}' || ch === ']' || ch === ')') {
        pending = stack.pop();
      } else if (ch === ',' || ch === ';') {
        pending = undefined;
      }
      i++;
    }
  }
  return out;
}

/**
 * Workspace files that the runner configuration among `configs` names: the strings of a JS or
 * JSON runner config (jest.config.*, .mocharc.*, vitest.config.*, package.json's jest, mocha,
 * ava and vitest blocks) that are paths of the workspace (`./`, `<rootDir>/`, `path.join(__dirname,
 * ...)` or plain with a folder, with or without an extension), except under keys that name the
 * code under test or the tests (NOT_RUNNER_FILE_KEYS); and every module of a pytest config's
 * `-p NAME` or a conftest's `pytest_plugins`. Reads the snapshot's own files (data): a name that
 * is not a file of the workspace is ignored.
 */
export function runnerLoadedFiles(configs: ReadonlyMap<string, Buffer>, workspaceFiles: ReadonlySet<string>): string[] {
  const found = new Set<string>();
  const add = (base: string, ref: string) => {
    const rel = path.posix.normalize(path.posix.join(base, ref.replace(/^<rootDir>\//, '')));
    if (rel.startsWith('..') || path.posix.isAbsolute(rel)) return;
    for (const cand of [rel, ...['.js', '.cjs', '.mjs', '.ts', '.cts', '.mts', '.json'].map((e) => `${rel}${e}`), `${rel}/index.js`]) {
      if (workspaceFiles.has(cand)) return void found.add(cand);
    }
  };
  // A string that reads as a path: `./x`, `<rootDir>/x`, or plain with a folder (`src/setup.js`).
  const addPath = (base: string, ref: string) => {
    if (/^(\.{1,2}\/|<rootDir>\/|[\w@-][\w./@-]*\/[\w.-]+$)/.test(ref)) add(base, ref);
  };
  /** Every string in a runner block of package.json, but those under NOT_RUNNER_FILE_KEYS. */
  const runnerStrings = (v: unknown): string[] => {
    if (typeof v === 'string') return [v];
    if (Array.isArray(v)) return v.flatMap(runnerStrings);
    if (v && typeof v === 'object')
      return Object.entries(v as Record<string, unknown>).flatMap(([k, x]) => (NOT_RUNNER_FILE_KEYS.has(k) ? [] : runnerStrings(x)));
    return [];
  };
  const addModule = (base: string, mod: string) => {
    const p = mod.replace(/\./g, '/');
    for (const cand of [`${p}.py`, `${p}/__init__.py`])
      if (workspaceFiles.has(path.posix.join(base, cand))) found.add(path.posix.join(base, cand));
    for (const cand of [`${p}.py`, `${p}/__init__.py`]) if (workspaceFiles.has(cand)) found.add(cand);
  };
  for (const [rel, buf] of configs) {
    const base = path.posix.dirname(rel);
    const name = rel.split('/').pop() ?? rel;
    const text = buf.toString('utf8');
    if (name === 'package.json') {
      let pkg: unknown;
      try {
        pkg = JSON.parse(text);
      } catch {
        continue; // npm cannot read it either: the test command fails, whatever is put back
      }
      if (pkg && typeof pkg === 'object')
        for (const k of PACKAGE_RUNNER_KEYS) for (const ref of runnerStrings((pkg as Record<string, unknown>)[k])) addPath(base, ref);
    } else if (/\.ya?ml$/.test(name) && name.startsWith('.mocharc.')) {
      // YAML: `require: ./setup.js`, and lists under a key (`- ./setup.js`).
      let key: string | undefined;
      for (const line of text.split('\n')) {
        const top = line.match(/^([\w-]+)\s*:\s*(.*)$/);
        if (top) key = top[1];
        const value = top ? top[2] : (line.match(/^\s*-\s*(.*)$/)?.[1] ?? '');
        const ref = value
          .replace(/\s+#.*$/, '')
          .trim()
          .replace(/^(['"])(.*)\1$/, '$2');
        if (key && !NOT_RUNNER_FILE_KEYS.has(key) && /^\.{1,2}\//.test(ref)) add(base, ref);
      }
    } else if (/^(jest\.config\.|jest\.setup\.|\.mocharc\.|vitest\.config\.)/.test(name)) {
      // Skipped under a key that names the code under test or the tests, at any depth.
      const literals = keyedLiterals(text).filter((l) => !l.keys.some((k) => NOT_RUNNER_FILE_KEYS.has(k)));
      const at = new Map(literals.map((l) => [l.index, l]));
      // path.join(__dirname, 'setup.js') / path.resolve(__dirname, 'test', 'setup.js').
      const joined = new Set<number>();
      for (const m of text.matchAll(/\bpath\.(?:join|resolve)\(\s*__dirname\s*((?:,\s*(['"`])[^'"`\n]{1,200}\2\s*){1,8})\)/g)) {
        const starts = [...m[1].matchAll(/(['"`])([^'"`\n]{1,200})\1/g)].map((q) => m.index + m[0].indexOf(m[1]) + q.index);
        if (!starts.every((s) => at.has(s))) continue;
        for (const s of starts) joined.add(s);
        add(base, path.posix.join(...starts.map((s) => at.get(s)!.value)));
      }
      for (const l of literals) if (!joined.has(l.index) && l.value.length <= 300) addPath(base, l.value);
    } else if (/^(\.?pytest\.ini|tox\.ini|setup\.cfg|pyproject\.toml)$/.test(name)) {
      // Only what pytest reads: the addopts of its own section. A `-p` elsewhere is another tool's
      // (tox.ini's `[testenv] commands = mypy -p pkg` names the package under test, not a plugin).
      for (const mod of pytestPluginsOf(rel, text)) addModule(base, mod);
    } else if (name === 'conftest.py') {
      for (const m of text.matchAll(/pytest_plugins\s*=\s*([[(][^\])]*[\])]|['"][^'"]+['"])/g))
        for (const q of m[1].matchAll(/['"]([A-Za-z_][\w.]*)['"]/g)) addModule(base, q[1]);
    }
  }
  return [...found].sort();
}

/**
 * The snapshot's text of a source file, read again from the host workspace; undefined when the
 * file has changed there since (its hash differs) or cannot be read.
 */
export function originalSource(o: ScoringOriginals, rel: string): string | undefined {
  const want = o.sources.get(rel);
  if (want === undefined) return undefined;
  try {
    const buf = fs.readFileSync(path.join(o.root, rel));
    return createHash('sha256').update(buf).digest('hex') === want ? buf.toString('utf8') : undefined;
  } catch {
    return undefined;
  }
}

/** Whether the test scan (restore and originals) covers a workspace path: no pruned folder on it. */
export function inTestScan(rel: string): boolean {
  return !underPrunedFolder(rel);
}

/** `find` over the workspace with the test scan's pruning (see TEST_SCAN_PRUNE): dot folders only. */
export function findCommand(action: string, type: 'f' | 'l' = 'f'): string {
  const prune = ["-type d -name '.*'", "-name '*.egg'", ...TEST_SCAN_PRUNE.map((d) => `-name '${d}'`)].join(' -o ');
  return `find . -mindepth 1 \\( ${prune} \\) -prune -o -type ${type} ${action}`;
}

/**
 * A bash command that prints `<sha256>  ./<path>` NUL-terminated for every regular file under the
 * workspace except inside `node_modules` (restored as a whole) and `.git` (no file names on a
 * command line). NUL, not newline: sha256sum escapes a name with a newline in its line format, so
 * a folder named `x<newline>y` holding a conftest.py was invisible to a line-based reader (while
 * pytest loads it). The tamper scan reads all of it; the restore takes what the test scan covers.
 */
export function hashFilesCommand(): string {
  return `find . -mindepth 1 \\( -name node_modules -o -name .git \\) -prune -o -type f -print0 | xargs -0 -r sha256sum -z --`;
}
