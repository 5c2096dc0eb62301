// What pytest reads of a workspace's configuration files: the section it owns in each, the
// `addopts` there split as pytest splits them, and which file names it collects as tests. Other
// tools share these files (tox's `[testenv]`, flake8's `[flake8]`, setuptools' `[metadata]`);
// their options never reach pytest, so reading a
// `-p pkg` out of tox.ini's `commands = mypy -p pkg` as a pytest plugin made the package under
// test look like test machinery, and scoring put the mutated file back before running the tests.
import * as fs from 'node:fs';
import * as path from 'node:path';

/**
 * The section pytest reads in a configuration file: `[pytest]` in pytest.ini, .pytest.ini and
 * tox.ini, `[tool:pytest]` in setup.cfg, `[tool.pytest.ini_options]` in pyproject.toml.
 * Undefined for any other file.
 */
export function pytestSectionName(file: string): string | undefined {
  const base = file.split('/').pop() ?? file;
  if (/^\.?pytest\.ini$/.test(base) || base === 'tox.ini') return 'pytest';
  if (base === 'setup.cfg') return 'tool:pytest';
  if (base === 'pyproject.toml') return 'tool.pytest.ini_options';
  return undefined;
}

/**
 * The `addopts` of a file's pytest section, as arguments: an INI value split into shell words
 * (pytest's shlex.split), a TOML string split the same way, a TOML array of strings as it is.
 * Empty when the file sets none.
 */
export function pytestAddopts(file: string, text: string): string[] {
  return pytestListOption(file, text, 'addopts') ?? [];
}

/**
 * A list-valued option of a file's pytest section (`addopts`, `python_files`, `testpaths`), read
 * as pytest reads an "args" option; undefined when the file does not set it.
 */
export function pytestListOption(file: string, text: string, key: string): string[] | undefined {
  const section = pytestSectionName(file);
  if (section === undefined) return undefined;
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  return section === 'tool.pytest.ini_options' ? tomlOption(lines, section, key) : iniOption(lines, section, key);
}

/** Whether the file has pytest's section at all (an empty `[pytest]` still makes it pytest's configuration). */
export function hasPytestSection(file: string, text: string): boolean {
  const section = pytestSectionName(file);
  if (section === undefined) return false;
  // pytest.ini is pytest's configuration even when empty.
  if (/^\.?pytest\.ini$/.test(file.split('/').pop() ?? file)) return true;
  const want = section.replace(/\./g, '\\.');
  return new RegExp(`^\\s*\\[\\s*${want}\\s*\\]`, 'm').test(text);
}

/** iniconfig's reading: `[section]`, `name = value` or `name: value`, indented continuation lines, `#`/`;` comment lines. */
function iniOption(lines: string[], section: string, key: string): string[] | undefined {
  let current: string | undefined;
  let value: string[] | undefined;
  let found: string[] | undefined;
  for (const raw of lines) {
    const trimmed = raw.trimStart();
    if (trimmed === '' || trimmed.startsWith('#') || trimmed.startsWith(';')) continue;
    const line = raw.trimEnd();
    if (line.startsWith('[')) {
      const head = line.split('#')[0].split(';')[0].trimEnd();
      if (head.endsWith(']')) current = head.slice(1, -1);
      continue;
    }
    if (/^\s/.test(line)) {
      if (current === section && value) value.push(line.trim());
      continue;
    }
    if (current !== section) continue;
    const eq = line.indexOf('=');
    const colon = line.indexOf(': ');
    const cut = eq >= 0 && !line.slice(0, eq).includes(':') ? [eq, 1] : colon >= 0 ? [colon, 2] : undefined;
    if (!cut) continue;
    const name = line.slice(0, cut[0]).trim();
    value = name === key ? [line.slice(cut[0] + cut[1]).trim()] : undefined;
    if (value) found = value;
  }
  return found ? shellWords(found.join('\n')) : undefined;
}

/** An option of the table `[tool.pytest.ini_options]`: a basic or literal string (one line or triple-quoted), or an array of them. */
function tomlOption(lines: string[], section: string, key: string): string[] | undefined {
  let inSection = false;
  const body: string[] = [];
  for (const line of lines) {
    const header = /^\s*\[\s*([A-Za-z0-9_.\-"' ]+?)\s*\]\s*(#.*)?$/.exec(line);
    if (header && !line.trimStart().startsWith('[[')) {
      inSection = header[1].replace(/["'\s]/g, '') === section;
      continue;
    }
    if (inSection) body.push(line);
  }
  const text = body.join('\n');
  const m = new RegExp(`^\\s*${key}\\s*=\\s*`, 'm').exec(text);
  if (!m) return undefined;
  const rest = text.slice(m.index + m[0].length);
  if (rest.startsWith('[')) {
    const strings: string[] = [];
    let i = 1;
    while (i < rest.length) {
      const s = tomlString(rest, i);
      if (s) {
        strings.push(s.value);
        i = s.end;
      } else if (rest[i] === ']') break;
      else if (rest[i] === '#') i = rest.indexOf('\n', i) < 0 ? rest.length : rest.indexOf('\n', i);
      else i++;
    }
    return strings;
  }
  const s = tomlString(rest, 0);
  return s ? shellWords(s.value) : undefined;
}

/** A TOML string starting at `at` (basic, literal, or their multi-line forms) and where it ends. */
function tomlString(text: string, at: number): { value: string; end: number } | undefined {
  for (const q of ['"""', "'''", '"', "'"]) {
    if (!text.startsWith(q, at)) continue;
    const literal = q.startsWith("'");
    let i = at + q.length;
    let value = '';
    while (i < text.length && !text.startsWith(q, i)) {
      if (!literal && text[i] === '\\' && i + 1 < text.length) {
        const e = text[i + 1];
        value += e === 'n' ? '\n' : e === 't' ? '\t' : e === '\n' ? '' : e;
        i += 2;
      } else value += text[i++];
    }
    return { value: q.length === 3 ? value.replace(/^\n/, '') : value, end: i + q.length };
  }
  return undefined;
}

/** Splits a string into words as Python's shlex.split does (POSIX mode: quotes, backslashes, `#` starts no comment). */
export function shellWords(s: string): string[] {
  const words: string[] = [];
  let cur = '';
  let started = false;
  for (let i = 0; i < s.length; i++) {
    const ch = s[i];
    if (/\s/.test(ch)) {
      if (started) words.push(cur);
      cur = '';
      started = false;
    } else if (ch === "'") {
      const end = s.indexOf("'", i + 1);
      cur += s.slice(i + 1, end < 0 ? s.length : end);
      i = end < 0 ? s.length : end;
      started = true;
    } else if (ch === '"') {
      let j = i + 1;
      for (; j < s.length && s[j] !== '"'; j++) cur += s[j] === '\\' && j + 1 < s.length && '"\\$`'.includes(s[j + 1]) ? s[++j] : s[j];
      i = j;
      started = true;
    } else if (ch === '\\' && i + 1 < s.length) {
      cur += s[++i];
      started = true;
    } else {
      cur += ch;
      started = true;
    }
  }
  if (started) words.push(cur);
  return words;
}

/** The modules a configuration file makes pytest load as plugins: each `-p NAME` or `-pNAME` of its addopts (not `-p no:NAME`). */
export function pytestPluginsOf(file: string, text: string): string[] {
  const args = pytestAddopts(file, text);
  const mods: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    const name = a === '-p' ? args[++i] : a.startsWith('-p') && a.length > 2 ? a.slice(2) : undefined;
    if (name !== undefined && !name.startsWith('no:') && /^[A-Za-z_][\w.]*$/.test(name)) mods.push(name);
  }
  return mods;
}

/** The files pytest looks for its configuration in at the rootdir, in the order it takes the first. */
const CONFIG_ORDER = ['pytest.ini', '.pytest.ini', 'pyproject.toml', 'tox.ini', 'setup.cfg'];

/**
 * The workspace's pytest configuration as pytest picks it at the workspace root: the first of
 * pytest.ini, .pytest.ini, and pyproject.toml, tox.ini or setup.cfg holding pytest's section.
 */
export function pytestRootConfig(dir: string): { file: string; text: string } | undefined {
  for (const file of CONFIG_ORDER) {
    let text: string;
    try {
      text = fs.readFileSync(path.join(dir, file), 'utf8');
    } catch {
      continue;
    }
    if (hasPytestSection(file, text)) return { file, text };
  }
  return undefined;
}

/** pytest's default `python_files`. */
export const DEFAULT_PYTHON_FILES: readonly string[] = ['test_*.py', '*_test.py'];

/** What pytest collects in a workspace, read from its root configuration once. */
export interface PytestCollection {
  /** The configuration file pytest picks (pytestRootConfig), if any. */
  config?: { file: string; text: string };
  /** Its `python_files` patterns (pytest's default without them). */
  pythonFiles: readonly string[];
  /** Its `testpaths` ('/'-separated, no './'); undefined when it sets none. */
  testPaths?: string[];
}

export function pytestCollection(dir: string): PytestCollection {
  const config = pytestRootConfig(dir);
  if (!config) return { pythonFiles: DEFAULT_PYTHON_FILES };
  const paths = pytestListOption(config.file, config.text, 'testpaths');
  return {
    config,
    pythonFiles: pytestListOption(config.file, config.text, 'python_files') || DEFAULT_PYTHON_FILES,
    ...(paths && paths.length ? { testPaths: paths.map((p) => p.replace(/^\.\//, '').replace(/\/+$/, '')) } : {}),
  };
}

/** Whether a workspace path is a test module by `python_files` patterns (fnmatch on the file name, or on the path for a pattern with a '/'). */
export function matchesPythonFiles(rel: string, patterns: readonly string[]): boolean {
  const base = rel.split('/').pop() ?? rel;
  return patterns.some((p) => fnmatch(p.includes('/') ? rel : base, p));
}

/** Python's fnmatch (`*`, `?`, `[...]`, `[!...]`), case-sensitive as on POSIX. */
export function fnmatch(name: string, pattern: string): boolean {
  let re = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '*') re += '.*';
    else if (c === '?') re += '.';
    else if (c === '[') {
      const end = pattern.indexOf(']', i + 2);
      if (end < 0) re += '\\[';
      else {
        let body = pattern.slice(i + 1, end);
        if (body.startsWith('!')) body = `^${body.slice(1)}`;
        re += `[${body.replace(/\\/g, '\\\\')}]`;
        i = end;
      }
    } else re += c.replace(/[.+^${}()|\\/]/g, '\\$&');
  }
  return new RegExp(`^${re}$`, 's').test(name);
}
