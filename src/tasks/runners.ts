// Test runners: detected from the workspace on the host (or chosen by an override), each turned
// into one bash command that runs in a sandbox and writes a report to a known path.
// Checked in the sandbox image (Node 18.20.4, pytest 7.2.1): Node 18 does have
// `--test-reporter=junit` and `--test-reporter-destination`, but its JUnit names no test file
// (classname is always "test"), hence the one-report-per-file scheme below.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError } from '../core/errors';
import type { Language, ReportFormat, RunnerKind } from '../core/schema';
import type { JunitFlavor } from './report';
import { LOAD_ERROR_MARKER, PART_LINE_PREFIX, PYTEST_NODEID_PROPERTY, REPORT_PART_MARKER } from './report';
import { pytestNodeFile } from './nodeid';
import { matchesPythonFiles, pytestCollection } from './pytest-config';
import { listWorkspaceFiles } from './testfiles';
import { shellQuote as shq } from '../sandbox/shell';

export const RUNNER_KINDS: readonly RunnerKind[] = ['pytest', 'node-test', 'mocha', 'jest', 'go-test'];

/** Where every runner writes its report inside the sandbox. */
export const DEFAULT_REPORT_PATH = '/tmp/turnwise/report';

export interface TestRunner {
  kind: RunnerKind;
  language: Language;
  reportFormat: ReportFormat;
  /** How ids are built from a JUnit report. */
  flavor?: JunitFlavor;
  /** Test files the runner runs (workspace-relative); empty when the runner discovers them itself. */
  testFiles: string[];
  /** Bash command (run in the workspace) that runs all tests and writes the report; exit code ignored. */
  command: string;
  reportPath: string;
}

/** The user's override (setting `turnwise.tasks.testCommand` / CLI flags). */
export interface RunnerOverride {
  kind?: RunnerKind;
  /** Full command; it must write the report to `reportPath` (or `$TURNWISE_REPORT`). */
  command?: string;
  reportFormat?: ReportFormat;
  reportPath?: string;
}

const REPORT_FORMATS: readonly ReportFormat[] = ['junit-xml', 'jest-json', 'go-test-json'];

/** node:test's default discovery patterns (Node 18–20), applied to workspace-relative paths. */
export function isNodeTestFile(rel: string): boolean {
  const base = rel.split('/').pop() ?? rel;
  if (!/\.[cm]?js$/.test(base)) return false;
  if (/^(.*[.\-_])?test\.[cm]?js$/.test(base) || /^test-.*\.[cm]?js$/.test(base)) return true;
  return rel.split('/').slice(0, -1).includes('test');
}

function readPackageJson(dir: string): { deps: Set<string>; testScript: string } | undefined {
  try {
    const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as Record<string, unknown>;
    const deps = new Set<string>();
    for (const k of ['dependencies', 'devDependencies']) {
      const d = pkg[k];
      if (d && typeof d === 'object') for (const name of Object.keys(d)) deps.add(name);
    }
    const scripts = (pkg.scripts ?? {}) as Record<string, unknown>;
    return { deps, testScript: typeof scripts.test === 'string' ? scripts.test : '' };
  } catch {
    return undefined;
  }
}

function junitFlavor(kind: RunnerKind): JunitFlavor | undefined {
  return kind === 'pytest' ? 'pytest' : kind === 'node-test' ? 'node' : kind === 'mocha' ? 'mocha' : undefined;
}

export function defaultReportFormat(kind: RunnerKind): ReportFormat {
  return kind === 'jest' ? 'jest-json' : kind === 'go-test' ? 'go-test-json' : 'junit-xml';
}

function languageOf(kind: RunnerKind, files: string[]): Language {
  if (kind === 'pytest') return 'python';
  if (kind === 'go-test') return 'go';
  return files.some((f) => /\.tsx?$/.test(f)) ? 'typescript' : 'javascript';
}

/**
 * The command for a runner, optionally limited to some test files. It always starts by
 * removing an old report, so a stale report can never be read as this run's.
 */
export function runnerCommand(kind: RunnerKind, files: string[], reportPath = DEFAULT_REPORT_PATH): string {
  const R = shq(reportPath);
  const prep = `rm -rf ${R} ${R}.d && mkdir -p "$(dirname ${R})"`;
  const args = files.map(shq).join(' ');
  switch (kind) {
    case 'pytest':
      // xunit1 carries file= so ids can be pytest node ids; no bytecode or cache files, so a
      // container reused for several mutants never runs a stale .pyc.
      // -P and `import pytest` before the workspace joins sys.path: with `python3 -m pytest` the
      // workspace came first, so an agent's pytest.py (or _pytest/) stood in for the runner and
      // wrote whatever report it liked. The workspace then goes in front of site-packages only
      // (stdlib stays unshadowable), which is what the tests need to import the project.
      return `${prep}; PYTHONDONTWRITEBYTECODE=1 python3 -P -c ${shq(PYTEST_MAIN)} -q -p no:cacheprovider -o junit_family=xunit1 --continue-on-collection-errors --tb=short --junitxml=${R} ${args}`.trimEnd();
    case 'node-test': {
      // Node 18's junit reporter does not name the test file, so each file gets its own run and
      // report part (all in parallel), concatenated behind `#turnwise-report file=` markers.
      // Files run directly (`node --test-reporter=junit f`, one process) rather than under
      // `node --test` (two processes): half the start-up cost, same results per file. A file
      // that dies before writing its report gets its stderr tail as a load-error part. Every line
      // of a part's content goes behind PART_LINE_PREFIX, so nothing a test or the code under
      // test prints can start a part of its own (report.ts splitReportParts).
      const PREFIX = shq(`s/^/${PART_LINE_PREFIX}/`);
      if (files.length === 0) throw new TurnwiseError('invalid-input', 'node:test runner needs the list of test files');
      const runs = files
        .map((f, i) => `(node --test-reporter=junit --test-reporter-destination=${R}.d/${i}.xml ${shq(f)} >/dev/null 2>${R}.d/${i}.err) &`)
        .join(' ');
      const cat = files
        .map(
          (f, i) =>
            `echo ${shq(REPORT_PART_MARKER + f)}; if [ -s ${R}.d/${i}.xml ]; then sed ${PREFIX} ${R}.d/${i}.xml; else echo ${shq(LOAD_ERROR_MARKER)}; tail -c 3000 ${R}.d/${i}.err | sed ${PREFIX}; fi; echo`,
        )
        .join('; ');
      return `${prep} && mkdir -p ${R}.d; ${runs} wait; { ${cat}; } > ${R}`;
    }
    case 'mocha':
      // --exit: the run ends when the tests do, so no timer the code under test left behind can
      // rewrite the report after the reporter closed it.
      return `${prep}; node_modules/.bin/mocha --exit --reporter xunit --reporter-option output=${R} ${args}`.trimEnd();
    case 'jest':
      // A cache of its own, emptied with the report: jest's default cache in /tmp holds transformed
      // test files, which an agent could plant there.
      return `${prep}; node_modules/.bin/jest --ci --json --outputFile=${R} --cacheDirectory=${R}.d/jest-cache ${args}`.trimEnd();
    case 'go-test':
      return `${prep}; go test -json ${files.length ? args : './...'} > ${R}`;
  }
}

/**
 * `python3 -P -c` program: pytest imported from the system, then the workspace on sys.path; a
 * plugin records each test's node id in the JUnit report (report.ts, PYTEST_NODEID_PROPERTY), so
 * ids are pytest's own rather than rebuilt from the report's dotted class names and the file that
 * defines the function (which for an inherited test method is the base class's file).
 */
export const PYTEST_MAIN = [
  'import sys, pytest',
  'class TurnwiseNodeIds:',
  '    def pytest_collection_modifyitems(self, items):',
  `        for item in items: item.user_properties.append((${JSON.stringify(PYTEST_NODEID_PROPERTY)}, item.nodeid))`,
  'i = next((k for k, p in enumerate(sys.path) if p.endswith(("site-packages", "dist-packages"))), len(sys.path)); sys.path.insert(i, "")',
  'sys.exit(pytest.main(plugins=[TurnwiseNodeIds()]))',
].join('\n');

/** Finds the test runner of a workspace. Throws a TurnwiseError naming what it looked for. */
export function detectRunner(dir: string, override: RunnerOverride = {}): TestRunner {
  if (!fs.existsSync(dir) || !fs.statSync(dir).isDirectory()) {
    throw new TurnwiseError('not-found', `workspace ${dir} is not a folder`, { hint: 'pass --workspace DIR pointing at a project folder' });
  }
  if (override.reportFormat && !REPORT_FORMATS.includes(override.reportFormat)) {
    throw new TurnwiseError('invalid-input', `unknown report format ${JSON.stringify(override.reportFormat)}`, {
      hint: `use one of ${REPORT_FORMATS.join(', ')}`,
    });
  }
  if (override.kind && !RUNNER_KINDS.includes(override.kind)) {
    throw new TurnwiseError('invalid-input', `unknown test runner ${JSON.stringify(override.kind)}`, {
      hint: `use one of ${RUNNER_KINDS.join(', ')}`,
    });
  }
  const files = listWorkspaceFiles(dir);
  const pkg = readPackageJson(dir);
  const nodeTestFiles = files.filter(isNodeTestFile).filter((f) => {
    try {
      return /['"]node:test['"]/.test(fs.readFileSync(path.join(dir, f), 'utf8'));
    } catch {
      return false;
    }
  });
  // pytest's own rule for test modules: its configuration's python_files (test_*.py and *_test.py by default).
  const pytest = pytestCollection(dir);
  const pyTests = files.filter((f) => f.endsWith('.py') && matchesPythonFiles(f, pytest.pythonFiles));

  let kind = override.kind;
  if (!kind) {
    if (pkg?.deps.has('jest') || /\bjest\b/.test(pkg?.testScript ?? '')) kind = 'jest';
    else if (pkg?.deps.has('mocha') || /\bmocha\b/.test(pkg?.testScript ?? '')) kind = 'mocha';
    else if (nodeTestFiles.length > 0 || /node\s+--test/.test(pkg?.testScript ?? '')) kind = 'node-test';
    else if (pyTests.length > 0 || pytest.config) kind = 'pytest';
    else if (files.includes('go.mod')) kind = 'go-test';
  }
  if (!kind) {
    throw new TurnwiseError(
      'not-found',
      `no test suite found in ${dir} (looked for pytest test_*.py / *_test.py, node:test, mocha, jest, go.mod)`,
      {
        hint: 'add tests, or set the runner override (kind, command and report format)',
      },
    );
  }
  const testFiles =
    kind === 'node-test' ? (nodeTestFiles.length ? nodeTestFiles : files.filter(isNodeTestFile)) : kind === 'pytest' ? pyTests : [];
  if (kind === 'node-test' && testFiles.length === 0 && !override.command) {
    throw new TurnwiseError('not-found', `node:test runner chosen but no test files found in ${dir}`, {
      hint: 'name test files *.test.js or put them under test/, or override the test command',
    });
  }
  const reportPath = override.reportPath ?? DEFAULT_REPORT_PATH;
  const reportFormat = override.reportFormat ?? defaultReportFormat(kind);
  return {
    kind,
    language: languageOf(kind, testFiles),
    reportFormat,
    ...(reportFormat === 'junit-xml' ? { flavor: junitFlavor(kind) ?? 'generic' } : {}),
    testFiles,
    // node:test gets its file list baked in; the others discover tests themselves.
    command: override.command ?? runnerCommand(kind, kind === 'node-test' ? testFiles : [], reportPath),
    reportPath,
  };
}

/** The runner restricted to the files holding `testIds` (faster scoring); the whole suite if unknown. */
export function commandForTests(runner: TestRunner, testIds: string[]): string {
  if (runner.kind !== 'pytest' && runner.kind !== 'node-test') return runner.command;
  if (runner.command !== runnerCommand(runner.kind, runner.kind === 'node-test' ? runner.testFiles : [], runner.reportPath))
    return runner.command;
  const files = [...new Set(testIds.map(pytestNodeFile).filter((f) => f !== ''))].sort();
  if (files.length === 0) return runner.command;
  if (runner.kind === 'node-test' && !files.every((f) => runner.testFiles.includes(f))) return runner.command;
  return runnerCommand(runner.kind, files, runner.reportPath);
}
