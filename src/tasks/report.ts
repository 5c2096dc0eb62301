// Test report parsers: JUnit XML (pytest, node:test, mocha xunit), jest --json and
// `go test -json` → per-test results with stable ids. Pure functions: text in, TestReport out;
// an unreadable report throws a TurnwiseError('test-report'), never returns an empty pass.
import { TurnwiseError } from '../core/errors';
import type { ReportFormat } from '../core/schema';
import { parseXml, XmlError, type XmlElement } from './xml';
import { pytestNodeFile } from './nodeid';

export type TestOutcome = 'passed' | 'failed' | 'error' | 'skipped';

export interface TestResult {
  /** Stable id: `<file>::<suite path joined by " > ">::<name>` (pytest: its node id). */
  id: string;
  outcome: TestOutcome;
  durationMs: number;
  /** Failure or error text (message plus details), capped. */
  message?: string;
  /** Test file relative to the workspace, when the report says. */
  file?: string;
}

/** A file or package that could not be loaded at all (import error, syntax error, build failure). */
export interface CollectionError {
  file?: string;
  message: string;
}

export interface TestReport {
  format: ReportFormat;
  tests: TestResult[];
  collectionErrors: CollectionError[];
}

/** Which tool wrote a JUnit XML report; it decides how ids are built. */
export type JunitFlavor = 'pytest' | 'node' | 'mocha' | 'generic';

export interface ParseOptions {
  flavor?: JunitFlavor;
  /** Workspace root inside the container; absolute paths under it are made relative. */
  root?: string;
  /** Test file the report belongs to (node:test writes one report per file). */
  file?: string;
}

export const MESSAGE_CAP = 4000;

/** The line that starts each part of a multi-part report (one part per test file). */
export const REPORT_PART_MARKER = '#turnwise-report file=';

/** First line of a report part whose test file died before writing a report; its stderr follows. */
export const LOAD_ERROR_MARKER = '#turnwise-load-error';

export function reportError(message: string, hint?: string, cause?: unknown): TurnwiseError {
  return new TurnwiseError('test-report', message, {
    hint: hint ?? 'the episode is scored NaN and left out of baselines; check the test command and report format (runner override)',
    cause,
  });
}

function cap(s: string, n = MESSAGE_CAP): string {
  if (s.length <= n) return s;
  const half = Math.floor((n - 40) / 2);
  return `${s.slice(0, half)}\n… [${s.length - 2 * half} characters elided] …\n${s.slice(-half)}`;
}

export function relativize(p: string, root = '/workspace'): string {
  const r = root.endsWith('/') ? root : root + '/';
  if (p.startsWith(r)) return p.slice(r.length);
  return p.replace(/^\.\//, '');
}

/**
 * How the node:test runner writes a part's content (runners.ts): each line behind one space, so
 * that no line a test prints into its report, and no line of a crashed file's stderr, can start a
 * part or mark a load error. Only the runner's own lines start with `#`.
 */
export const PART_LINE_PREFIX = ' ';

/** A part of a multi-part report as the runner writes it (the parser's inverse, for tests and tools). */
export function encodeReportPart(file: string, content: string, loadError = false): string {
  const body =
    content === ''
      ? ''
      : content
          .split('\n')
          .map((l) => PART_LINE_PREFIX + l)
          .join('\n') + '\n';
  return `${REPORT_PART_MARKER}${file}\n${loadError ? LOAD_ERROR_MARKER + '\n' : ''}${body}\n`;
}

/**
 * Splits a node:test runner's report into its parts: each starts with a `#turnwise-report
 * file=<path>` line, may go on with the `#turnwise-load-error` line (the file died before writing
 * its report; its stderr follows), and holds its content behind PART_LINE_PREFIX, which comes off.
 * A line that is neither a marker, a prefixed line nor blank was not written by the runner: the
 * report is refused rather than read.
 */
export function splitReportParts(text: string): Array<{ file?: string; text: string; loadError?: boolean }> {
  const parts: Array<{ file?: string; text: string; loadError?: boolean }> = [];
  let cur: { file: string; lines: string[]; loadError: boolean } | undefined;
  const close = () => cur && parts.push({ file: cur.file, text: cur.lines.join('\n'), ...(cur.loadError ? { loadError: true } : {}) });
  for (const line of text.split('\n')) {
    if (line.startsWith(REPORT_PART_MARKER)) {
      close();
      cur = { file: line.slice(REPORT_PART_MARKER.length).trim(), lines: [], loadError: false };
    } else if (cur && !cur.lines.length && !cur.loadError && line === LOAD_ERROR_MARKER) cur.loadError = true;
    else if (cur && line.startsWith(PART_LINE_PREFIX)) cur.lines.push(line.slice(PART_LINE_PREFIX.length));
    else if (line.trim() !== '')
      throw reportError(
        `the multi-part test report holds a line its runner did not write (${JSON.stringify(line.slice(0, 80))})`,
        "each part of a node:test report is written by Turnwise's runner command; a custom test command should use another report format",
      );
  }
  close();
  return parts;
}

/** Parses a report of any supported format; multi-part reports are parsed part by part. */
export function parseReport(format: ReportFormat, text: string, opts: ParseOptions = {}): TestReport {
  if (text.trim() === '') throw reportError(`the ${format} test report is empty`);
  // Only the node:test runner writes parts (one per test file). Any other report is one part,
  // whatever its text holds: a failure message that prints a marker line splits nothing.
  const parts: Array<{ file?: string; text: string; loadError?: boolean }> = opts.flavor === 'node' ? splitReportParts(text) : [{ text }];
  const report: TestReport = { format, tests: [], collectionErrors: [] };
  for (const part of parts) {
    const o = { ...opts, file: part.file ?? opts.file };
    let r: TestReport;
    if (part.loadError) {
      const stderr = part.text.trim();
      report.collectionErrors.push({ file: o.file, message: cap(stderr || 'the test file exited before writing a report') });
      continue;
    }
    if (part.text.trim() === '') {
      // A part with no report at all: the runner crashed before writing it for this file.
      report.collectionErrors.push({ file: o.file, message: 'the test runner wrote no report for this file' });
      continue;
    }
    if (format === 'junit-xml') r = parseJunit(part.text, o);
    else if (format === 'jest-json') r = parseJestJson(part.text, o);
    else if (format === 'go-test-json') r = parseGoTestJson(part.text);
    else throw reportError(`unknown report format ${JSON.stringify(format)}`, 'use junit-xml, jest-json or go-test-json');
    report.tests.push(...r.tests);
    report.collectionErrors.push(...r.collectionErrors);
  }
  return report;
}

// ---------------------------------------------------------------- JUnit XML

function junitFlavorOf(root: XmlElement): JunitFlavor {
  const suites = root.name === 'testsuite' ? [root] : root.children.filter((c) => c.name === 'testsuite');
  if (suites.some((s) => s.attrs.name === 'pytest')) return 'pytest';
  if (root.name === 'testsuite' && root.attrs.name === 'Mocha Tests') return 'mocha';
  return 'generic';
}

/** The name of the testcase property that holds pytest's own node id (runners.ts, PYTEST_MAIN). */
export const PYTEST_NODEID_PROPERTY = 'turnwise.nodeid';

function pytestId(tc: XmlElement, root: string): { id: string; file?: string } {
  // The node id as pytest wrote it, when the runner's plugin recorded it: exact whatever the
  // classes, the parameters or where an inherited test method was defined.
  const own = tc.children
    .find((c) => c.name === 'properties')
    ?.children.find((p) => p.name === 'property' && p.attrs.name === PYTEST_NODEID_PROPERTY)?.attrs.value;
  if (own) return { id: own, file: pytestNodeFile(own) };
  const name = tc.attrs.name ?? '';
  const classname = tc.attrs.classname ?? '';
  const file = tc.attrs.file ? relativize(tc.attrs.file, root) : undefined;
  if (!file) return { id: classname ? `${classname}::${name}` : name };
  const modPath = file.replace(/\.py$/, '').split('/').join('.');
  const modName = modPath.split('.').pop() ?? modPath;
  let rest: string;
  if (classname === modPath) rest = '';
  else if (classname.startsWith(modPath + '.')) rest = classname.slice(modPath.length + 1);
  else {
    // rootdir/package layouts can shorten the dotted module path: cut after the module name.
    const segs = classname.split('.');
    const k = segs.lastIndexOf(modName);
    rest = k >= 0 ? segs.slice(k + 1).join('.') : '';
  }
  const inner = rest ? rest.split('.').join('::') + '::' : '';
  return { id: `${file}::${inner}${name}`, file };
}

/** The failure body when there is one (it holds the message and more), else the message. */
function failureText(el: XmlElement): string {
  const body = el.text.trim();
  return body || (el.attrs.message ?? '');
}

export function parseJunit(text: string, opts: ParseOptions = {}): TestReport {
  let doc: XmlElement;
  try {
    doc = parseXml(text);
  } catch (e) {
    if (e instanceof XmlError) throw reportError(`the JUnit XML test report cannot be read: ${e.message}`, undefined, e);
    throw e;
  }
  if (doc.name !== 'testsuites' && doc.name !== 'testsuite') {
    throw reportError(`the JUnit XML test report has root <${doc.name}>, expected <testsuites> or <testsuite>`);
  }
  const root = opts.root ?? '/workspace';
  const flavor = opts.flavor ?? junitFlavorOf(doc);
  const report: TestReport = { format: 'junit-xml', tests: [], collectionErrors: [] };
  const partFile = opts.file ? relativize(opts.file, root) : undefined;
  let internalError = false;

  const visit = (el: XmlElement, suitePath: string[], depth: number) => {
    for (const c of el.children) {
      if (c.name === 'testsuite') {
        // The outer suite of pytest/mocha/generic reports is the whole run, not a describe block.
        const isRunSuite = depth === 0 && flavor !== 'node';
        visit(c, isRunSuite || !c.attrs.name ? suitePath : [...suitePath, c.attrs.name], depth + 1);
      } else if (c.name === 'testcase') {
        addCase(c, suitePath);
      }
    }
  };

  const addCase = (tc: XmlElement, suitePath: string[]) => {
    const name = tc.attrs.name ?? '';
    const failure = tc.children.find((c) => c.name === 'failure');
    const error = tc.children.find((c) => c.name === 'error');
    const skipped = tc.children.find((c) => c.name === 'skipped');
    const durationMs = Number(tc.attrs.time ?? 0) * 1000 || 0;
    let outcome: TestOutcome = 'passed';
    let message: string | undefined;
    if (failure) {
      outcome = 'failed';
      message = failureText(failure);
    } else if (error) {
      outcome = 'error';
      message = failureText(error);
    } else if (tc.attrs.failure !== undefined) {
      outcome = 'failed';
      message = tc.attrs.failure;
    } else if (skipped) outcome = 'skipped';

    let id: string;
    let file: string | undefined;
    if (flavor === 'pytest') {
      // A module that failed to import: a testcase with empty classname and "collection failure".
      if ((tc.attrs.classname ?? '') === '' && error && /collection failure/.test(error.attrs.message ?? '')) {
        report.collectionErrors.push({ file: tc.attrs.file ? relativize(tc.attrs.file, root) : name, message: cap(message ?? '') });
        return;
      }
      // pytest's own crash (INTERNALERROR: a plugin, or code under test that broke the runner):
      // one testcase `pytest::internal` that no file defines. Not a test; the run is broken.
      if (
        tc.attrs.classname === 'pytest' &&
        name === 'internal' &&
        tc.attrs.file === undefined &&
        error &&
        /internal error/.test(error.attrs.message ?? '')
      ) {
        report.collectionErrors.push({ message: cap(`pytest stopped with an internal error:\n${message ?? ''}`) });
        internalError = true;
        return;
      }
      ({ id, file } = pytestId(tc, root));
    } else if (flavor === 'node') {
      file = partFile;
      // node:test reports a file that crashed before defining tests as one case named by its path.
      if (suitePath.length === 0 && name.startsWith('/') && (partFile === undefined || relativize(name, root) === partFile)) {
        report.collectionErrors.push({ file: relativize(name, root), message: cap(message ?? 'test file failed to load') });
        return;
      }
      id = `${file ?? ''}::${[...suitePath, name].join(' > ')}`;
    } else if (flavor === 'mocha') {
      file = tc.attrs.file ? relativize(tc.attrs.file, root) : partFile;
      const cls = tc.attrs.classname ?? '';
      id = `${file ?? ''}::${cls ? `${cls} > ` : ''}${name}`;
    } else {
      file = tc.attrs.file ? relativize(tc.attrs.file, root) : partFile;
      const cls = tc.attrs.classname ?? '';
      id = [file, ...suitePath, cls, name].filter((s) => s !== undefined && s !== '').join('::');
    }
    report.tests.push({ id, outcome, durationMs, ...(message !== undefined ? { message: cap(message) } : {}), ...(file ? { file } : {}) });
  };

  if (doc.name === 'testsuite') visit({ name: '#doc', attrs: {}, children: [doc], text: '' }, [], 0);
  else visit(doc, [], flavor === 'node' ? 1 : 0);
  if (internalError) {
    // After an internal error the JUnit plugin may not have recorded the outcome of the test it
    // was reporting (a failed test then reads as passed): no pass of this run is trusted.
    for (const t of report.tests) {
      if (t.outcome !== 'passed') continue;
      t.outcome = 'error';
      t.message = 'pytest stopped with an internal error during this run, so its result is not trusted';
    }
  }
  return report;
}

// ---------------------------------------------------------------- jest --json

interface JestAssertion {
  ancestorTitles?: unknown;
  title?: unknown;
  status?: unknown;
  duration?: unknown;
  failureMessages?: unknown;
}

export function parseJestJson(text: string, opts: ParseOptions = {}): TestReport {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw reportError(`the jest JSON test report is not valid JSON: ${(e as Error).message}`, undefined, e);
  }
  const results = (doc as { testResults?: unknown })?.testResults;
  if (!Array.isArray(results)) throw reportError('the jest JSON test report has no testResults array (was it written by `jest --json`?)');
  const root = opts.root ?? '/workspace';
  const report: TestReport = { format: 'jest-json', tests: [], collectionErrors: [] };
  for (const suite of results as Array<Record<string, unknown>>) {
    const file = typeof suite.name === 'string' ? relativize(suite.name, root) : undefined;
    const assertions = Array.isArray(suite.assertionResults) ? (suite.assertionResults as JestAssertion[]) : [];
    if (assertions.length === 0 && suite.status === 'failed') {
      report.collectionErrors.push({ file, message: cap(String(suite.message ?? suite.failureMessage ?? 'test suite failed to run')) });
      continue;
    }
    for (const a of assertions) {
      const titles = Array.isArray(a.ancestorTitles) ? a.ancestorTitles.map(String) : [];
      const status = String(a.status ?? '');
      const outcome: TestOutcome = status === 'passed' ? 'passed' : status === 'failed' ? 'failed' : 'skipped';
      const msgs = Array.isArray(a.failureMessages) ? a.failureMessages.map(String) : [];
      report.tests.push({
        id: `${file ?? ''}::${[...titles, String(a.title ?? '')].join(' > ')}`,
        outcome,
        durationMs: typeof a.duration === 'number' ? a.duration : 0,
        ...(msgs.length ? { message: cap(msgs.join('\n')) } : {}),
        ...(file ? { file } : {}),
      });
    }
  }
  return report;
}

// ---------------------------------------------------------------- go test -json

interface GoEvent {
  Action?: string;
  Package?: string;
  Test?: string;
  Elapsed?: number;
  Output?: string;
}

export function parseGoTestJson(text: string): TestReport {
  const report: TestReport = { format: 'go-test-json', tests: [], collectionErrors: [] };
  const tests = new Map<string, { pkg: string; name: string; outcome?: TestOutcome; elapsed: number; output: string[] }>();
  const pkgs = new Map<string, { outcome?: string; output: string[] }>();
  const lines = text.split('\n');
  let events = 0;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim();
    if (line === '') continue;
    let ev: GoEvent;
    try {
      ev = JSON.parse(line) as GoEvent;
    } catch {
      // `go test -json` passes build errors through as plain text lines before the events.
      if (events === 0 && !line.startsWith('{')) continue;
      throw reportError(`the go test -json report has a line that is not JSON (line ${i + 1}): ${line.slice(0, 80)}`);
    }
    if (ev === null || typeof ev !== 'object' || typeof ev.Action !== 'string') {
      throw reportError(`the go test -json report has a line without an Action (line ${i + 1})`);
    }
    events++;
    const pkg = ev.Package ?? '';
    if (!ev.Test) {
      const p = pkgs.get(pkg) ?? { output: [] };
      if (ev.Action === 'output' || ev.Action === 'build-output') p.output.push(ev.Output ?? '');
      if (ev.Action === 'pass' || ev.Action === 'fail' || ev.Action === 'skip') p.outcome = ev.Action;
      pkgs.set(pkg, p);
      continue;
    }
    const key = `${pkg}::${ev.Test}`;
    const t = tests.get(key) ?? { pkg, name: ev.Test, elapsed: 0, output: [] };
    if (ev.Action === 'output') t.output.push(ev.Output ?? '');
    else if (ev.Action === 'pass') t.outcome = 'passed';
    else if (ev.Action === 'fail') t.outcome = 'failed';
    else if (ev.Action === 'skip') t.outcome = 'skipped';
    if (typeof ev.Elapsed === 'number') t.elapsed = ev.Elapsed;
    tests.set(key, t);
  }
  if (events === 0) throw reportError('the go test -json report has no events');
  for (const [key, t] of tests) {
    const outcome = t.outcome ?? 'error';
    const message =
      outcome === 'passed' || outcome === 'skipped'
        ? undefined
        : t.outcome
          ? t.output.join('')
          : `no result (run interrupted?)\n${t.output.join('')}`;
    report.tests.push({ id: key, outcome, durationMs: t.elapsed * 1000, ...(message ? { message: cap(message) } : {}) });
  }
  for (const [pkg, p] of pkgs) {
    const hasTests = [...tests.values()].some((t) => t.pkg === pkg);
    if (p.outcome === 'fail' && !hasTests)
      report.collectionErrors.push({ file: pkg, message: cap(p.output.join('') || 'package failed to build') });
  }
  return report;
}
