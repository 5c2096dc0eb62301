// Reward after an episode: put every test file back as it was in the snapshot, run the task's
// tests, and score R = test_score − λ_eff·turns/max_turns·[resolved] − λ_fmt·[any format error]
// − λ_rep·repeats, where test_score is the mean of the fail-to-pass and the pass-to-pass pass
// rates and repeats counts the turns that ran a command again for the output it already gave.
// An unreadable report gives NaN (left out of baselines), never a silent 0.
//
// The two kinds weigh half each so that fixing one test among dozens of passing ones outweighs
// the efficiency penalty; only a fix pays for its length, so ending early never beats trying.
// A repeated command costs λ_rep, resolved or not (never more than a fix is worth): its second
// run tells nothing, and without a cost RL spends a failed episode's turns on such repeats.
import { createHash } from 'node:crypto';
import { formatError, TurnwiseError } from '../core/errors';
import type { RewardComponents, Task } from '../core/schema';
import type { Sandbox } from '../sandbox/types';
import { DEPENDENCIES_DIR, WORKSPACE_DIR } from '../sandbox/types';
import { parseReport, type JunitFlavor, type TestOutcome, type TestReport } from './report';
import { shellQuote as shq } from '../sandbox/shell';
import { DEFAULT_REPORT_PATH } from './runners';
import { isPytestDoctestId, parsePytestNodeId, pytestNodeFile } from './nodeid';
import { addedModuleNames, tamperReasons, type ScannedFile } from './tamper';
import {
  findCommand,
  hashFilesCommand,
  inTestScan,
  isTestInfraFile,
  languageOfFile,
  originalData,
  originalSource,
  type ScoringOriginals,
} from './testfiles';

export interface RewardWeights {
  /** λ_eff: weight of turns/max_turns in a resolved episode's reward. Default 0.1. */
  efficiency: number;
  /** λ_fmt: penalty when any turn had a format error. Default 0.5. */
  format: number;
  /** λ_rep: penalty per repeated turn (core/repeats.ts). Default 0.05. */
  repeat: number;
}

export const DEFAULT_REWARD_WEIGHTS: RewardWeights = { efficiency: 0.1, format: 0.5, repeat: 0.05 };

export interface RewardInput {
  /** Outcome per test id from the report; tests absent from it count as not passing. */
  outcomes: ReadonlyMap<string, TestOutcome> | undefined;
  failToPass: readonly string[];
  passToPass: readonly string[];
  turns: number;
  maxTurns: number;
  formatError: boolean;
  /** Turns that repeated an earlier one (core/repeats.ts). */
  repeats?: number;
  weights?: Partial<RewardWeights>;
  /** Why the report could not be used; makes pass rate and reward NaN. */
  error?: string;
  testsEdited?: boolean;
  /** Why the episode is tampered with (tasks/tamper.ts); makes pass rate and reward 0, not resolved. */
  tampered?: string;
}

/**
 * The pure reward formula. NaN pass rate (unusable report) gives NaN reward. A tampered episode
 * scores 0 whatever its report says: below any honest attempt that keeps the tests running.
 * The test score weighs the fail-to-pass and the pass-to-pass tests half each (the one kind
 * alone when the task has no test of the other); the efficiency penalty applies to resolved
 * episodes only.
 */
export function computeReward(input: RewardInput): RewardComponents {
  const w = { ...DEFAULT_REWARD_WEIGHTS, ...(input.weights ?? {}) };
  const ids = [...new Set([...input.failToPass, ...input.passToPass])];
  let passRate = NaN;
  let testScore = NaN;
  let resolved = false;
  if (input.error === undefined && input.outcomes) {
    const passing = (list: readonly string[]) => list.filter((id) => input.outcomes!.get(id) === 'passed').length;
    const passed = passing(ids);
    passRate = ids.length ? passed / ids.length : NaN;
    resolved = ids.length > 0 && passed === ids.length;
    // Each kind's own rate, over its distinct ids (a test listed in both counts as fail-to-pass).
    const f2p = [...new Set(input.failToPass)];
    const p2p = [...new Set(input.passToPass)].filter((id) => !f2p.includes(id));
    const rates = [f2p, p2p].filter((l) => l.length > 0).map((l) => passing(l) / l.length);
    testScore = rates.length ? rates.reduce((a, b) => a + b, 0) / rates.length : NaN;
  }
  const maxTurns = Math.max(1, input.maxTurns);
  const efficiencyPenalty = resolved ? (w.efficiency * Math.min(input.turns, maxTurns)) / maxTurns : 0;
  const formatPenalty = input.formatError ? w.format : 0;
  const repeats = input.repeats ?? 0;
  const repeatPenalty = w.repeat * repeats;
  if (input.tampered !== undefined) {
    return {
      passRate: 0,
      testScore: 0,
      resolved: false,
      turns: input.turns,
      maxTurns: input.maxTurns,
      formatError: input.formatError,
      efficiencyPenalty: 0,
      formatPenalty: 0,
      repeats,
      repeatPenalty: 0,
      reward: 0,
      tampered: input.tampered,
      ...(input.testsEdited !== undefined ? { testsEdited: input.testsEdited } : {}),
    };
  }
  return {
    passRate,
    testScore,
    resolved,
    turns: input.turns,
    maxTurns: input.maxTurns,
    formatError: input.formatError,
    efficiencyPenalty,
    formatPenalty,
    repeats,
    repeatPenalty,
    reward: testScore - efficiencyPenalty - formatPenalty - repeatPenalty,
    ...(input.testsEdited !== undefined ? { testsEdited: input.testsEdited } : {}),
    ...(input.error !== undefined
      ? { error: input.error }
      : input.outcomes && ids.length === 0
        ? { error: 'the task names no tests' }
        : {}),
  };
}

/**
 * A scoring step's command failed in a sandbox that still answers: something the agent left (an
 * unreadable folder, a file too large to hash in time, every process slot taken) stopped it. The
 * episode then counts as failing every test; only a sandbox that no longer answers leaves it unscored.
 */
export class PreparationFailed extends TurnwiseError {
  constructor(message: string) {
    super('sandbox-failed', message);
  }
}

const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

export interface RestoreResult {
  /** Test files whose content differed from the snapshot (now restored). */
  modified: string[];
  /** Test files the agent deleted (now restored). */
  deleted: string[];
  /** Test-like files the agent added (now removed). */
  added: string[];
  /** `node_modules` paths the agent replaced, removed or added (the snapshot's links put back). */
  dependencies?: string[];
}

/** sha256 of every regular file of the sandbox's workspace outside node_modules and .git (hashFilesCommand). */
export async function hashWorkspace(sandbox: Sandbox, workspace = WORKSPACE_DIR): Promise<Map<string, string>> {
  // One pass, no file names on a command line, so a workspace with thousands of files cannot
  // overflow bash's argument limits.
  const list = await sandbox.exec(hashFilesCommand(), { cwd: workspace, timeoutMs: 120_000, maxOutputBytes: 64 * 1024 * 1024 });
  // A file the agent made unreadable is missing from the output and so gets rewritten; only
  // no output at all (or a cut one) means the list cannot be trusted.
  if (list.truncated || list.timedOut || (list.exitCode !== 0 && list.stdout.trim() === '')) {
    throw new PreparationFailed(
      `cannot hash the workspace files to restore the tests (exit ${list.exitCode}${list.truncated ? ', output truncated' : ''}): ${list.stderr.slice(-300)}`,
    );
  }
  const hashes = new Map<string, string>();
  for (const entry of list.stdout.split('\0')) {
    const m = /^\n?([0-9a-f]{64}) [ *]\.\/(.+)$/s.exec(entry);
    if (m) hashes.set(m[2], m[1]);
  }
  return hashes;
}

/** What a restore puts back: the files it covers, with the snapshot's hashes and bytes. */
export interface RestoreSet {
  /** Whether a workspace path is one of the kinds this restore owns (present ones not in `wanted` are removed). */
  covers(rel: string): boolean;
  /** The snapshot's files of those kinds: path → sha256. */
  wanted: ReadonlyMap<string, string>;
  /** The snapshot's bytes of a wanted file. */
  read(rel: string): Buffer;
}

/**
 * Makes every test-infrastructure file in the sandbox identical to `originals` (path → bytes,
 * read from the snapshot's source): differing files are rewritten, missing ones recreated,
 * new ones removed. Returns what was changed, so the episode can be flagged. `hashes` is the
 * workspace's listing (hashWorkspace), taken now when not given.
 */
export async function restoreTestFiles(
  sandbox: Sandbox,
  originals: ReadonlyMap<string, Buffer>,
  workspace = WORKSPACE_DIR,
  hashes?: ReadonlyMap<string, string>,
): Promise<RestoreResult> {
  return restoreFiles(sandbox, testRestoreSet(originals), workspace, hashes);
}

/**
 * Test infrastructure by name, and the snapshot's files that its runner configuration names
 * (collectOriginals): what the runners read.
 */
function testRestoreSet(originals: ReadonlyMap<string, Buffer>): RestoreSet {
  return {
    covers: (f) => isTestInfraFile(f) || originals.has(f),
    wanted: new Map([...originals].map(([f, b]) => [f, sha(b)])),
    read: (f) => originals.get(f)!,
  };
}

/**
 * What scoring a task puts back: its test infrastructure; for a mutation task (whose fix is in a
 * source file) every other file that is not source code too, so data the tests compare against
 * is the snapshot's.
 */
export function scoringRestoreSet(originals: ScoringOriginals, task: Pick<Task, 'source'>): RestoreSet {
  const tests = testRestoreSet(originals.tests);
  if (task.source !== 'mutation') return tests;
  const isData = (f: string) => !tests.covers(f) && languageOfFile(f) === undefined;
  return {
    covers: (f) => tests.covers(f) || isData(f),
    wanted: new Map([...tests.wanted, ...originals.data]),
    read: (f) => (originals.tests.has(f) ? originals.tests.get(f)! : originalData(originals, f)),
  };
}

/** Makes the files a RestoreSet covers identical to the snapshot's, outside the folders the test scan prunes. */
export async function restoreFiles(
  sandbox: Sandbox,
  set: RestoreSet,
  workspace = WORKSPACE_DIR,
  hashes?: ReadonlyMap<string, string>,
): Promise<RestoreResult> {
  const present = new Map<string, string>();
  for (const [f, h] of hashes ?? (await hashWorkspace(sandbox, workspace))) if (inTestScan(f) && set.covers(f)) present.set(f, h);
  const originals = set.wanted;
  // Symlinks: find -type f skips them, so a test folder swapped for a link to the agent's own
  // folder (with a conftest.py in it) made every test look deleted and the restore wrote the
  // originals THROUGH the link, next to the agent's hooks; a symlinked conftest.py was never seen.
  // Every link that is test infrastructure or stands on the path of an original test file goes.
  const links = await sandbox.exec(`${findCommand('-print0', 'l')}`, {
    cwd: workspace,
    timeoutMs: 60_000,
    maxOutputBytes: 8 * 1024 * 1024,
  });
  if (links.truncated || links.timedOut || links.exitCode !== 0) {
    throw new PreparationFailed(
      `cannot list the workspace's symlinks to restore the tests (exit ${links.exitCode}): ${links.stderr.slice(-300)}`,
    );
  }
  const wantedDirs = new Set<string>();
  for (const f of originals.keys()) for (let i = f.indexOf('/'); i >= 0; i = f.indexOf('/', i + 1)) wantedDirs.add(f.slice(0, i));
  const badLinks = links.stdout
    .split('\0')
    .filter((l) => l.startsWith('./'))
    .map((l) => l.slice(2))
    .filter((l) => isTestInfraFile(l) || originals.has(l) || wantedDirs.has(l));
  await removeFiles(sandbox, workspace, badLinks);
  // Files found under a removed folder link were the agent's, not the workspace's.
  for (const f of [...present.keys()]) if (badLinks.some((l) => f.startsWith(`${l}/`))) present.delete(f);
  const added = [
    ...new Set([...[...present.keys()].filter((f) => !originals.has(f)), ...badLinks.filter((l) => !originals.has(l))]),
  ].sort();
  const deleted = [...originals.keys()].filter((f) => !present.has(f)).sort();
  const modified = [...originals.keys()].filter((f) => present.has(f) && present.get(f) !== originals.get(f)).sort();
  const rewrite = [...modified, ...deleted];
  // Read every original first: a file the host no longer holds as the snapshot did stops the
  // restore before anything in the sandbox changed.
  const bytes = new Map(rewrite.map((f) => [f, set.read(f)]));
  // Clear the way in batches: a parent replaced by a file, the old file (maybe a dir or read-only).
  for (let i = 0; i < rewrite.length; i += 200) {
    const batch = rewrite.slice(i, i + 200);
    const cmds = batch.map((f) => {
      const dir = f.includes('/') ? f.slice(0, f.lastIndexOf('/')) : '.';
      return `{ [ -d ${shq(dir)} ] || { rm -f ${shq(dir)}; mkdir -p ${shq(dir)}; }; rm -rf ${shq(f)}; }`;
    });
    await sandbox.exec(cmds.join('; '), { cwd: workspace, timeoutMs: 60_000 });
  }
  for (const f of rewrite) await sandbox.writeFile(`${workspace}/${f}`, bytes.get(f)!);
  const addedFiles = added.filter((f) => !badLinks.includes(f));
  await removeFiles(sandbox, workspace, addedFiles);
  return { modified, deleted, added };
}

/** `rm -f` of workspace paths in the sandbox, 200 a command (each path quoted). */
async function removeFiles(sandbox: Sandbox, workspace: string, files: readonly string[]): Promise<void> {
  for (let i = 0; i < files.length; i += 200) {
    await sandbox.exec(
      `rm -f -- ${files
        .slice(i, i + 200)
        .map(shq)
        .join(' ')}`,
      { cwd: workspace, timeoutMs: 60_000 },
    );
  }
}

/**
 * Symbolic links in the workspace that the snapshot did not have (outside node_modules, which
 * restoreDependencies owns): a source file or folder swapped for a link puts the code under test
 * where the tamper scan does not read it, and no fix needs one. One reason per link.
 */
export async function newLinks(sandbox: Sandbox, originals: ScoringOriginals, workspace = WORKSPACE_DIR): Promise<string[]> {
  const r = await sandbox.exec(`find . \\( -name node_modules -o -name .git \\) -prune -o -type l -printf '%P\\0%l\\0'`, {
    cwd: workspace,
    timeoutMs: 60_000,
    maxOutputBytes: 8 * 1024 * 1024,
  });
  if (r.exitCode !== 0 || r.truncated || r.timedOut)
    throw new PreparationFailed(`cannot list the workspace's symlinks (exit ${r.exitCode}): ${r.stderr.slice(-300)}`);
  const parts = r.stdout.split('\0');
  const reasons: string[] = [];
  for (let i = 0; i + 1 < parts.length; i += 2) {
    const [p, target] = [parts[i], parts[i + 1]];
    if (p && originals.links.get(p) !== target)
      reasons.push(`${p}: a symbolic link the snapshot did not have (to ${JSON.stringify(target)})`);
  }
  return reasons;
}

/**
 * Puts the snapshot's dependencies back before scoring: every `node_modules` in the workspace that
 * is not the snapshot's link into DEPENDENCIES_DIR (an agent's own folder or file, a link that
 * points elsewhere, one in a folder the snapshot had none) is removed, and every folder of
 * DEPENDENCIES_DIR gets its link back. The list comes from DEPENDENCIES_DIR itself, which the
 * sandbox user cannot write, so nothing the agent did decides what is restored. Prints what it
 * replaced, one path a line.
 */
export const RESTORE_DEPENDENCIES_COMMAND = String.raw`D=${DEPENDENCIES_DIR}
{ find . -name node_modules -prune -print0 | while IFS= read -r -d '' p; do
  t=$D/${'$'}{p#./}
  if [ -L "$p" ] && [ "$(readlink -- "$p")" = "$t" ] && [ -d "$t" ] && [ ! -L "$(dirname -- "$p")" ]; then continue; fi
  rm -rf -- "$p" && echo "${'$'}{p#./}"
done
if [ -d "$D" ]; then
  cd "$D" && find . -name node_modules -prune -print0 | while IFS= read -r -d '' p; do
    w=${WORKSPACE_DIR}/${'$'}{p#./}; dir=$(dirname -- "$w")
    if [ -L "$dir" ] || { [ -e "$dir" ] && [ ! -d "$dir" ]; }; then rm -f -- "$dir"; fi
    mkdir -p -- "$dir" && { [ -L "$w" ] || { ln -s -- "$D/${'$'}{p#./}" "$w" && echo "${'$'}{p#./}"; }; }
  done
fi; } | sort -u`;

/** Runs RESTORE_DEPENDENCIES_COMMAND; returns the workspace paths it replaced. */
export async function restoreDependencies(sandbox: Sandbox, workspace = WORKSPACE_DIR): Promise<string[]> {
  const r = await sandbox.exec(RESTORE_DEPENDENCIES_COMMAND, { cwd: workspace, timeoutMs: 120_000, maxOutputBytes: 1024 * 1024 });
  if (r.exitCode !== 0 || r.timedOut) {
    throw new PreparationFailed(
      `cannot put the workspace's dependencies (node_modules) back before scoring (exit ${r.exitCode}): ${r.stderr.slice(-300)}`,
    );
  }
  return r.stdout.split('\n').filter((l) => l !== '');
}

/**
 * The environment of a scoring run, whatever the agent left behind: a PATH of root-owned folders
 * (and the restored dependencies' `.bin`), an empty HOME of its own (no ~/.npmrc, ~/.babel.json,
 * ~/.node_modules or user site-packages the agent wrote), no Python user site, no bytecode caches,
 * no Babel cache.
 */
export function scoringEnv(reportPath: string, workspace = WORKSPACE_DIR): Record<string, string> {
  return {
    TURNWISE_REPORT: reportPath,
    PATH: `${workspace}/node_modules/.bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`,
    HOME: scoringHome(reportPath),
    PYTHONDONTWRITEBYTECODE: '1',
    PYTHONNOUSERSITE: '1',
    BABEL_DISABLE_CACHE: '1',
    NODE_OPTIONS: '',
    CI: '1',
  };
}

/** The scoring run's HOME: beside the report, emptied before every run. */
function scoringHome(reportPath: string): string {
  return `${reportPath.replace(/\/[^/]*$/, '') || '/tmp'}/home`;
}

/** Reports larger than this are refused (a runaway report is a broken run). */
export const REPORT_MAX_BYTES = 32 * 1024 * 1024;

export interface RunTestsResult {
  report?: TestReport;
  /** Set when there is no usable report (missing, unreadable). */
  error?: string;
  /**
   * Whose doing the missing report is: `sandbox` when the sandbox could not prepare or clean up
   * the run (nothing says how the tests would have gone), `tests` when the test command ran and
   * left no report Turnwise can read (timed out, crashed, printed into it): as far as anyone can
   * tell, the tests did not pass.
   */
  errorBy?: 'sandbox' | 'tests';
  timedOut: boolean;
  exitCode: number | null;
  durationMs: number;
}

function flavorOf(task: Pick<Task, 'runner'>): JunitFlavor | undefined {
  return task.runner === 'pytest' ? 'pytest' : task.runner === 'node-test' ? 'node' : task.runner === 'mocha' ? 'mocha' : undefined;
}

/**
 * Runs a test command in the sandbox and parses its report. Never throws for a bad report:
 * the error is returned with whose doing it is (errorBy), so callers can score the run or leave
 * it unscored. `$TURNWISE_REPORT` names the report path.
 */
export async function runTests(
  sandbox: Sandbox,
  spec: Pick<Task, 'testCommand' | 'reportFormat' | 'runner'>,
  opts: { timeoutMs?: number; reportPath?: string; workspace?: string; killStrays?: boolean } = {},
): Promise<RunTestsResult> {
  const reportPath = opts.reportPath ?? DEFAULT_REPORT_PATH;
  const workspace = opts.workspace ?? WORKSPACE_DIR;
  // The report must be this run's: an agent could leave a fake one behind, read-only in a
  // read-only folder, that the runner's own `rm -rf` cannot remove and the runner cannot overwrite.
  const R = shq(reportPath);
  const H = shq(scoringHome(reportPath));
  const clear = await sandbox.exec(
    `d=$(dirname -- ${R}); if [ -L "$d" ]; then rm -f -- "$d"; elif [ -d "$d" ]; then chmod u+rwx -- "$d"; chmod -R u+rwX -- ${R} ${R}.d ${H}; fi 2>/dev/null; rm -rf -- ${R} ${R}.d ${H}; [ ! -e ${R} ] && [ ! -L ${R} ] && mkdir -p -- ${H}`,
    { timeoutMs: 30_000 },
  );
  if (clear.exitCode !== 0) {
    return {
      timedOut: false,
      exitCode: null,
      durationMs: 0,
      error: `cannot remove an old report at ${reportPath} before the test run (exit ${clear.exitCode}): ${clear.stderr.slice(-300)}`,
      errorBy: 'sandbox',
    };
  }
  const res = await sandbox.exec(spec.testCommand, {
    cwd: workspace,
    timeoutMs: opts.timeoutMs ?? 120_000,
    env: scoringEnv(reportPath, workspace),
  });
  const base = { timedOut: res.timedOut, exitCode: res.exitCode, durationMs: res.durationMs };
  if (opts.killStrays) {
    // What the test run left in a session of its own (the code under test can start one) is
    // stopped before the report is read, so it cannot keep rewriting it.
    const k = await sandbox.exec(KILL_STRAYS_COMMAND, { timeoutMs: 30_000 });
    if (k.exitCode !== 0)
      return {
        ...base,
        error: `cannot stop what the test run left running (exit ${k.exitCode}): ${k.stderr.slice(-300)}`,
        errorBy: 'sandbox',
      };
  }
  // Read with cat, not the archive API: /tmp is a tmpfs, which `docker cp` cannot see.
  const cat = await sandbox.exec(`cat -- ${shq(reportPath)}`, { timeoutMs: 30_000, maxOutputBytes: REPORT_MAX_BYTES });
  if (cat.exitCode !== 0) {
    const tail = (res.stderr || res.stdout).trim().split('\n').slice(-6).join('\n');
    const why = res.timedOut
      ? `the test command timed out after ${Math.round(res.durationMs / 1000)} s`
      : `the test command exited with ${res.exitCode}`;
    return { ...base, error: `no test report at ${reportPath}: ${why}${tail ? `; its last output:\n${tail}` : ''}`, errorBy: 'tests' };
  }
  if (cat.truncated)
    return { ...base, error: `the test report at ${reportPath} is larger than ${REPORT_MAX_BYTES} bytes`, errorBy: 'tests' };
  const text = cat.stdout;
  try {
    return { ...base, report: parseReport(spec.reportFormat ?? 'junit-xml', text, { flavor: flavorOf(spec), root: workspace }) };
  } catch (e) {
    return { ...base, error: formatError(e), errorBy: 'tests' };
  }
}

/**
 * Each test id's outcome. An id reported more than once (a test that failed and then errored at
 * teardown; two tests of one title) is passed only when every entry passed, else its first other
 * outcome: a copy that still fails is not hidden by one that passes.
 */
export function outcomesOf(report: TestReport): Map<string, TestOutcome> {
  const m = new Map<string, TestOutcome>();
  for (const t of report.tests) {
    const was = m.get(t.id);
    if (was === undefined || was === 'passed') m.set(t.id, t.outcome);
  }
  return m;
}

export interface EpisodeScore {
  reward: RewardComponents;
  /** Per-test summary stored with the trajectory (only the task's tests). */
  testReport?: { passed: string[]; failed: string[]; errors?: string[] };
  restored: RestoreResult;
  /** The test command ran past its time limit (ScoreOptions.timeoutMs), report or not. */
  testTimedOut?: true;
}

export interface ScoreOptions {
  /** The snapshot's test infrastructure and sources (collectOriginals on the workspace the snapshot was built from). */
  originals: ScoringOriginals;
  turns: number;
  maxTurns: number;
  formatError: boolean;
  /** Turns that repeated an earlier one (core/repeats.ts). */
  repeats?: number;
  weights?: Partial<RewardWeights>;
  timeoutMs?: number;
}

/** Bytes of one changed source file the tamper scan reads; a larger file is a finding by itself. */
export const TAMPER_SCAN_FILE_BYTES = 1024 * 1024;

/**
 * The tamper scan over the sandbox's workspace (tasks/tamper.ts): every source file whose hash
 * differs from the snapshot's, or that the snapshot did not have, is read back and compared with
 * the snapshot's text. Test infrastructure is left out (it was restored).
 */
export async function scanForTampering(
  sandbox: Sandbox,
  originals: ScoringOriginals,
  hashes: ReadonlyMap<string, string>,
  workspace = WORKSPACE_DIR,
  taskLanguage?: Task['language'],
): Promise<string[]> {
  const files: ScannedFile[] = [];
  const reasons: string[] = [];
  const js = taskLanguage === 'javascript' || taskLanguage === 'typescript';
  for (const [f, h] of hashes) {
    // Node's require loads a file of any other extension (or none) as JavaScript: in a JavaScript
    // task an added file that is not source by its name is read as source too.
    const added = !originals.sources.has(f) && !originals.data.has(f) && !originals.tests.has(f);
    const language = languageOfFile(f) ?? (js && added ? 'javascript' : undefined);
    if (!language || isTestInfraFile(f) || originals.tests.has(f) || originals.sources.get(f) === h) continue;
    const r = await sandbox.exec(`head -c ${TAMPER_SCAN_FILE_BYTES + 1} -- ${shq(f)}`, {
      cwd: workspace,
      timeoutMs: 30_000,
      maxOutputBytes: TAMPER_SCAN_FILE_BYTES + 1024,
    });
    if (r.exitCode !== 0)
      throw new PreparationFailed(`cannot read ${f} back for the tamper scan (exit ${r.exitCode}): ${r.stderr.slice(-300)}`);
    if (r.truncated || Buffer.byteLength(r.stdout) > TAMPER_SCAN_FILE_BYTES) {
      reasons.push(`${f}: over ${TAMPER_SCAN_FILE_BYTES} bytes after the agent's edit, too large to check`);
      continue;
    }
    // The snapshot's text (null: the agent added the file). A file changed on the host since the
    // snapshot has no baseline: all of it is checked, as for an added file that is loaded.
    const known = originals.sources.has(f);
    const before = known ? (originalSource(originals, f) ?? '') : null;
    files.push({ path: f, language, before, after: r.stdout });
  }
  return [...reasons, ...tamperReasons(files)];
}

/**
 * Top-level module names of the packages installed in the sandbox's Python (site-packages and
 * dist-packages), one a line: read with the workspace off the path and the environment ignored.
 */
export const INSTALLED_MODULES_COMMAND = `python3 -E -P -s -c ${shq(
  "import pkgutil\nfor m in sorted({m.name for m in pkgutil.iter_modules() if str(getattr(m.module_finder, 'path', '')).endswith(('site-packages', 'dist-packages'))}): print(m)",
)}`;

/**
 * Added Python modules named like a package installed in the sandbox (tamper.ts addedModuleNames):
 * on the test run's path, where the workspace comes before site-packages, each stands in for that
 * package wherever the runner, a plugin or the tests import it. No fix needs one; one reason each.
 */
export async function shadowingModules(
  sandbox: Sandbox,
  originals: ScoringOriginals,
  hashes: ReadonlyMap<string, string>,
  language: Task['language'],
): Promise<string[]> {
  if (language !== 'python') return [];
  const known = new Set([...originals.sources.keys(), ...originals.tests.keys(), ...originals.data.keys(), ...originals.links.keys()]);
  const added = [...hashes.keys()].filter((f) => f.endsWith('.py') && !known.has(f) && !isTestInfraFile(f));
  if (!added.length) return [];
  const dirs = new Set<string>();
  for (const f of known) for (let i = f.indexOf('/'); i >= 0; i = f.indexOf('/', i + 1)) dirs.add(f.slice(0, i));
  const names = addedModuleNames(added, dirs);
  if (!names.size) return [];
  const r = await sandbox.exec(INSTALLED_MODULES_COMMAND, { cwd: '/', timeoutMs: 30_000 });
  if (r.exitCode !== 0)
    throw new TurnwiseError(
      'sandbox-failed',
      `cannot list the sandbox's installed Python packages (exit ${r.exitCode}): ${r.stderr.slice(-300)}`,
    );
  const installed = new Set(r.stdout.split('\n').map((l) => l.trim()));
  return [...names]
    .filter(([n]) => installed.has(n))
    .map(
      ([n, f]) =>
        `${f}: adds a module named ${n}, like a package installed in the sandbox; on the test run's path it stands in for that package`,
    );
}

/**
 * The tests a task may score: for pytest, those defined in test files (restored before scoring).
 * A doctest collected from the code under test (`pkg/mod.py::pkg.mod.func`, --doctest-modules)
 * or from a document (`README.md::README.md`, --doctest-glob) lives in a file the agent may edit,
 * so its expected output could be changed instead of the code: it is left out of every task.
 */
export function scorableTestIds(ids: readonly string[], runner: Task['runner']): string[] {
  if (runner !== 'pytest') return [...ids];
  return ids.filter((id) => !id.includes('::') || isTestInfraFile(pytestNodeFile(id)));
}

/**
 * Passing report ids the restored test files cannot have produced: a pytest id whose file is not one of
 * the snapshot's test files, or whose names do not occur in the snapshot's text. The test files
 * are the snapshot's (restored before the run), so the agent's code cannot change this
 * collection; a report naming other tests was written by something else than the runner.
 *
 * Ids are read as pytest writes them (tasks/nodeid.ts): the parameter part is one piece whatever
 * it holds, so `test_f[sum(a)::integer, b]` names `test_f`. The test's first name (a function or
 * class of the module, or one it imports) must occur in its file, or in another test file of the
 * snapshot (a `from .test_trees import *` brings lark's classes in unnamed); the names inside a class (a
 * method, a nested class) need only be identifiers: a class inherits them from bases in other
 * files, or makes them at import time (zope.interface's `test_auto_*` methods), so no file need
 * spell them; a doctest's dotted name ends in a name its file holds. A test whose file and names
 * (its parameters aside) are those of one of `known` (the task's own tests, which the suite
 * reported on the unchanged code) is no forgery either, however its names were made: lark's
 * test classes are built in a loop under names no file spells.
 */
export function unknownReportIds(
  report: TestReport,
  originals: Pick<ScoringOriginals, 'tests' | 'sources' | 'data'>,
  runner: Task['runner'],
  known: readonly string[] = [],
): string[] {
  if (runner !== 'pytest') return [];
  const pathOf = (id: string) => {
    const p = parsePytestNodeId(id);
    return `${p.file}::${p.names.join('::')}`;
  };
  const knownPaths = new Set(known.map(pathOf));
  const tests = originals.tests;
  const texts = new Map<string, string>();
  const textOf = (file: string) => {
    let text = texts.get(file);
    if (text === undefined) {
      text = tests.get(file)?.toString('utf8') ?? '';
      texts.set(file, text);
    }
    return text;
  };
  const seen = new Map<string, boolean>();
  const inSomeTestFile = (word: string) => {
    if (!seen.has(word))
      seen.set(
        word,
        [...tests.keys()].some((f) => f.endsWith('.py') && occursAsName(word, textOf(f))),
      );
    return seen.get(word)!;
  };
  const bad: string[] = [];
  for (const t of report.tests) {
    const { file, names } = parsePytestNodeId(t.id);
    if (!file || names.length === 0) continue; // a collection error or a report without ids: scored as it is
    // A doctest of the code under test or of a document (--doctest-modules, --doctest-glob): a
    // test the agent can edit, which no task scores (scorableTestIds); not a forgery.
    if (!tests.has(file) && (originals.sources.has(file) || originals.data.has(file))) continue;
    // Only a pass can raise a reward: a test reported failed or skipped is no forgery whatever its
    // name (lark skips 150 tests built under names no file spells when optional packages are missing).
    if (t.outcome !== 'passed' || knownPaths.has(pathOf(t.id))) continue;
    const text = textOf(file);
    const ok =
      text !== '' &&
      (isPytestDoctestId(t.id)
        ? doctestInFile(names[0], file, text)
        : names.every((w) => isIdentifier(w)) && (occursAsName(names[0], text) || inSomeTestFile(names[0])));
    if (!ok) bad.push(t.id);
  }
  return bad;
}

/** A doctest's dotted name ends in an object of its file, or is the module itself (its docstring). */
function doctestInFile(dotted: string, file: string, text: string): boolean {
  const last = dotted.split('.').pop() ?? '';
  if (last === (file.split('/').pop() ?? '').replace(/\.py$/, '')) return true;
  return isIdentifier(last) && occursAsName(last, text);
}

/** Whether an identifier occurs in a text as a whole name (no letter, digit or `_` either side). */
function occursAsName(word: string, text: string): boolean {
  return new RegExp(`(?<![\\p{L}\\p{N}_])${word}(?![\\p{L}\\p{N}_])`, 'u').test(text);
}

/** A Python identifier as pytest names a test function or class (unicode letters allowed). */
function isIdentifier(w: string): boolean {
  return /^[\p{L}_][\p{L}\p{N}_]*$/u.test(w);
}

/**
 * Kills every process in the sandbox except the shell running this command and its ancestors
 * (the shell server, init). Processes an agent moved to their own session (setsid) outlive its
 * commands; left alone they could rewrite test files after the restore or the report after the run.
 * Repeated so a forking process cannot slip through between listing and killing.
 */
export const KILL_STRAYS_COMMAND = String.raw`declare -A keep; p=$BASHPID; while (( p > 1 )); do keep[$p]=1; read -r st < /proc/$p/stat || break; st=${'$'}{st##*) }; set -- $st; p=$2; done; for r in 1 2 3 4 5; do n=0; for d in /proc/[0-9]*; do q=${'$'}{d#/proc/}; [[ -n ${'$'}{keep[$q]} || $q == 1 ]] && continue; kill -KILL "$q" 2>/dev/null && n=$((n+1)); done; (( n == 0 )) && break; sleep 0.05; done; true`;

/**
 * Deletes every `__pycache__` folder of the workspace before scoring: Python (and pytest's
 * assertion rewriter) load a cached module instead of its source when the cache's recorded size
 * and time match, so an agent's crafted cache could stand in for a restored test file.
 */
const CLEAR_BYTECODE_COMMAND = `find . \\( -name node_modules -o -name .git \\) -prune -o -type d -name __pycache__ -prune -exec rm -rf -- {} +`;

/** Whether the sandbox still runs a command. */
async function answers(sandbox: Sandbox): Promise<boolean> {
  try {
    return (await sandbox.exec('true', { timeoutMs: 10_000 })).exitCode === 0;
  } catch {
    return false;
  }
}

/**
 * Scores a finished episode in its own sandbox: stop the agent's processes, put back the
 * dependencies and test files, scan the agent's edits for tampering, run the tests, compute R.
 */
export async function scoreEpisode(sandbox: Sandbox, task: Task, opts: ScoreOptions): Promise<EpisodeScore> {
  let restored: RestoreResult;
  let tampered: string[];
  try {
    const k = await sandbox.exec(KILL_STRAYS_COMMAND, { timeoutMs: 30_000 });
    if (k.exitCode !== 0)
      throw new PreparationFailed(`cannot stop the agent's leftover processes (exit ${k.exitCode}): ${k.stderr.slice(-300)}`);
    const dependencies = await restoreDependencies(sandbox);
    const clear = await sandbox.exec(CLEAR_BYTECODE_COMMAND, { timeoutMs: 60_000 });
    if (clear.exitCode !== 0)
      throw new PreparationFailed(`cannot delete the workspace's bytecode caches (exit ${clear.exitCode}): ${clear.stderr.slice(-300)}`);
    const hashes = await hashWorkspace(sandbox);
    restored = {
      ...(await restoreFiles(sandbox, scoringRestoreSet(opts.originals, task), WORKSPACE_DIR, hashes)),
      ...(dependencies.length ? { dependencies } : {}),
    };
    tampered = [
      ...(await newLinks(sandbox, opts.originals)),
      ...(await scanForTampering(sandbox, opts.originals, hashes, WORKSPACE_DIR, task.language)),
      ...(await shadowingModules(sandbox, opts.originals, hashes, task.language)),
    ];
  } catch (e) {
    const base = {
      failToPass: task.fail_to_pass,
      passToPass: task.pass_to_pass,
      turns: opts.turns,
      maxTurns: opts.maxTurns,
      formatError: opts.formatError,
      weights: opts.weights,
    };
    const none = { modified: [], deleted: [], added: [] };
    if (e instanceof PreparationFailed && (await answers(sandbox))) {
      // What the agent left stopped scoring before any test ran: as a test run it broke, every
      // test counts as failing. Unscored, the episode would leave the averages and baselines.
      const reward = computeReward({ ...base, outcomes: new Map() });
      reward.error = `scoring could not prepare the workspace the agent left, so no test ran: ${formatError(e)}; every test of the task counts as failing`;
      return {
        reward,
        testReport: { passed: [], failed: [], errors: [...new Set([...task.fail_to_pass, ...task.pass_to_pass])] },
        restored: none,
      };
    }
    const reward = computeReward({
      ...base,
      outcomes: undefined,
      error: `the test files could not be restored, so the tests cannot be trusted: ${formatError(e)}`,
    });
    return { reward, restored: none };
  }
  // Test infrastructure and dependencies the agent changed; the other files a mutation task puts
  // back (data, the agent's notes) are not tests.
  const isTest = (f: string) => isTestInfraFile(f) || opts.originals.tests.has(f);
  const testsEdited =
    [...restored.modified, ...restored.deleted, ...restored.added].some(isTest) || (restored.dependencies?.length ?? 0) > 0;
  const run = await runTests(sandbox, task, { timeoutMs: opts.timeoutMs, killStrays: true });
  const timedOut = run.timedOut ? { testTimedOut: true as const } : {};
  const ids = [...new Set([...task.fail_to_pass, ...task.pass_to_pass])];
  const common = {
    failToPass: task.fail_to_pass,
    passToPass: task.pass_to_pass,
    turns: opts.turns,
    maxTurns: opts.maxTurns,
    formatError: opts.formatError,
    repeats: opts.repeats,
    weights: opts.weights,
    testsEdited,
  };
  if (run.report) {
    const unknown = unknownReportIds(run.report, opts.originals, task.runner, ids);
    if (unknown.length)
      tampered.push(
        `the test report names ${unknown.length} test(s) the restored test files do not define (${unknown.slice(0, 3).join(', ')}${unknown.length > 3 ? ', …' : ''}): it was not written by the test run alone`,
      );
  }
  const tamper = tampered.length ? { tampered: tampered.join('\n') } : {};
  if (!run.report && run.errorBy === 'tests') {
    // The test command ran and left nothing readable: code under test that hangs, kills the
    // runner or prints into its report. Unscored, such an episode would leave the averages and
    // the baselines instead of counting as a failure, and a policy could learn to make every
    // failed attempt do that; so every test of the task counts as not passing, as a developer
    // whose test run crashed would count them.
    const reward = computeReward({ ...common, ...tamper, outcomes: new Map() });
    if (!reward.tampered) reward.error = `${run.error ?? 'no test report'}; every test of the task counts as failing`;
    return { reward, testReport: { passed: [], failed: [], errors: ids }, restored, ...timedOut };
  }
  if (!run.report) {
    return {
      reward: computeReward({ ...common, ...tamper, outcomes: undefined, error: run.error ?? 'no test report' }),
      restored,
      ...timedOut,
    };
  }
  const outcomes = outcomesOf(run.report);
  const passed = ids.filter((id) => outcomes.get(id) === 'passed');
  const failed = ids.filter((id) => outcomes.has(id) && outcomes.get(id) !== 'passed');
  const missing = ids.filter((id) => !outcomes.has(id));
  // A run that timed out but left a report still scores what it reported; the rest count as not passing.
  const reward = computeReward({ ...common, ...tamper, outcomes });
  if (run.timedOut) reward.error = `the test run timed out; ${missing.length} of the task's tests have no result and count as failing`;
  return { reward, testReport: { passed, failed, ...(missing.length ? { errors: missing } : {}) }, restored, ...timedOut };
}
