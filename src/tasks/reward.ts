// Reward after an episode: put every test file back as it was in the snapshot, run the task's
// tests, and score R = pass_rate − λ_eff·turns/max_turns − λ_fmt·[any format error].
// An unreadable report gives NaN (left out of baselines), never a silent 0.
import { createHash } from 'node:crypto';
import { formatError, TurnwiseError } from '../core/errors';
import type { RewardComponents, Task } from '../core/schema';
import type { Sandbox } from '../sandbox/types';
import { WORKSPACE_DIR } from '../sandbox/types';
import { parseReport, type JunitFlavor, type TestOutcome, type TestReport } from './report';
import { shellQuote as shq } from '../sandbox/shell';
import { DEFAULT_REPORT_PATH } from './runners';
import { findCommand, hashFilesCommand, isTestInfraFile } from './testfiles';

export interface RewardWeights {
  /** λ_eff: weight of turns/max_turns. Default 0.1. */
  efficiency: number;
  /** λ_fmt: penalty when any turn had a format error. Default 0.5. */
  format: number;
}

export const DEFAULT_REWARD_WEIGHTS: RewardWeights = { efficiency: 0.1, format: 0.5 };

export interface RewardInput {
  /** Outcome per test id from the report; tests absent from it count as not passing. */
  outcomes: ReadonlyMap<string, TestOutcome> | undefined;
  failToPass: readonly string[];
  passToPass: readonly string[];
  turns: number;
  maxTurns: number;
  formatError: boolean;
  weights?: Partial<RewardWeights>;
  /** Why the report could not be used; makes pass rate and reward NaN. */
  error?: string;
  testsEdited?: boolean;
}

/** The pure reward formula. NaN pass rate (unusable report) gives NaN reward. */
export function computeReward(input: RewardInput): RewardComponents {
  const w = { ...DEFAULT_REWARD_WEIGHTS, ...(input.weights ?? {}) };
  const ids = [...new Set([...input.failToPass, ...input.passToPass])];
  let passRate = NaN;
  let resolved = false;
  if (input.error === undefined && input.outcomes) {
    const passed = ids.filter((id) => input.outcomes!.get(id) === 'passed').length;
    passRate = ids.length ? passed / ids.length : NaN;
    resolved = ids.length > 0 && passed === ids.length;
  }
  const maxTurns = Math.max(1, input.maxTurns);
  const efficiencyPenalty = w.efficiency * Math.min(input.turns, maxTurns) / maxTurns;
  const formatPenalty = input.formatError ? w.format : 0;
  return {
    passRate,
    resolved,
    turns: input.turns,
    maxTurns: input.maxTurns,
    formatError: input.formatError,
    efficiencyPenalty,
    formatPenalty,
    reward: passRate - efficiencyPenalty - formatPenalty,
    ...(input.testsEdited !== undefined ? { testsEdited: input.testsEdited } : {}),
    ...(input.error !== undefined ? { error: input.error } : input.outcomes && ids.length === 0 ? { error: 'the task names no tests' } : {}),
  };
}

const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

export interface RestoreResult {
  /** Test files whose content differed from the snapshot (now restored). */
  modified: string[];
  /** Test files the agent deleted (now restored). */
  deleted: string[];
  /** Test-like files the agent added (now removed). */
  added: string[];
}

/**
 * Makes every test-infrastructure file in the sandbox identical to `originals` (path → bytes,
 * read from the snapshot's source): differing files are rewritten, missing ones recreated,
 * new ones removed. Returns what was changed, so the episode can be flagged.
 */
export async function restoreTestFiles(sandbox: Sandbox, originals: ReadonlyMap<string, Buffer>, workspace = WORKSPACE_DIR): Promise<RestoreResult> {
  // One pass hashes every workspace file (pruned like the host scan); no file names on a command
  // line, so a workspace with thousands of tests cannot overflow bash's argument limits.
  const list = await sandbox.exec(hashFilesCommand(), {
    cwd: workspace,
    timeoutMs: 120_000,
    maxOutputBytes: 32 * 1024 * 1024,
  });
  // A file the agent made unreadable is missing from the output and so gets rewritten; only
  // no output at all (or a cut one) means the list cannot be trusted.
  if (list.truncated || list.timedOut || (list.exitCode !== 0 && list.stdout.trim() === '')) {
    throw new TurnwiseError('sandbox-failed', `cannot hash the workspace files to restore the tests (exit ${list.exitCode}${list.truncated ? ', output truncated' : ''}): ${list.stderr.slice(-300)}`);
  }
  const present = new Map<string, string>();
  for (const line of list.stdout.split('\n')) {
    const m = /^([0-9a-f]{64}) [ *]\.\/(.+)$/.exec(line);
    if (m && isTestInfraFile(m[2])) present.set(m[2], m[1]);
  }
  // Symlinks: find -type f skips them, so a test folder swapped for a link to the agent's own
  // folder (with a conftest.py in it) made every test look deleted and the restore wrote the
  // originals THROUGH the link, next to the agent's hooks; a symlinked conftest.py was never seen.
  // Every link that is test infrastructure or stands on the path of an original test file goes.
  const links = await sandbox.exec(`${findCommand('-print', 'l')}`, { cwd: workspace, timeoutMs: 60_000, maxOutputBytes: 8 * 1024 * 1024 });
  if (links.truncated || links.timedOut || links.exitCode !== 0) {
    throw new TurnwiseError('sandbox-failed', `cannot list the workspace's symlinks to restore the tests (exit ${links.exitCode}): ${links.stderr.slice(-300)}`);
  }
  const badLinks = links.stdout
    .split('\n')
    .filter((l) => l.startsWith('./'))
    .map((l) => l.slice(2))
    .filter((l) => isTestInfraFile(l) || [...originals.keys()].some((f) => f.startsWith(`${l}/`)));
  for (let i = 0; i < badLinks.length; i += 200) await sandbox.exec(`rm -f -- ${badLinks.slice(i, i + 200).map(shq).join(' ')}`, { cwd: workspace, timeoutMs: 60_000 });
  // Files found under a removed folder link were the agent's, not the workspace's.
  for (const f of [...present.keys()]) if (badLinks.some((l) => f.startsWith(`${l}/`))) present.delete(f);
  const added = [...new Set([...[...present.keys()].filter((f) => !originals.has(f)), ...badLinks.filter((l) => !originals.has(l))])].sort();
  const deleted = [...originals.keys()].filter((f) => !present.has(f)).sort();
  const modified = [...originals.keys()].filter((f) => present.has(f) && present.get(f) !== sha(originals.get(f)!)).sort();
  const rewrite = [...modified, ...deleted];
  // Clear the way in batches: a parent replaced by a file, the old file (maybe a dir or read-only).
  for (let i = 0; i < rewrite.length; i += 200) {
    const batch = rewrite.slice(i, i + 200);
    const cmds = batch.map((f) => {
      const dir = f.includes('/') ? f.slice(0, f.lastIndexOf('/')) : '.';
      return `{ [ -d ${shq(dir)} ] || { rm -f ${shq(dir)}; mkdir -p ${shq(dir)}; }; rm -rf ${shq(f)}; }`;
    });
    await sandbox.exec(cmds.join('; '), { cwd: workspace, timeoutMs: 60_000 });
  }
  for (const f of rewrite) await sandbox.writeFile(`${workspace}/${f}`, originals.get(f)!);
  const addedFiles = added.filter((f) => !badLinks.includes(f));
  for (let i = 0; i < addedFiles.length; i += 200) await sandbox.exec(`rm -f -- ${addedFiles.slice(i, i + 200).map(shq).join(' ')}`, { cwd: workspace, timeoutMs: 60_000 });
  return { modified, deleted, added };
}

/** Reports larger than this are refused (a runaway report is a broken run). */
export const REPORT_MAX_BYTES = 32 * 1024 * 1024;

export interface RunTestsResult {
  report?: TestReport;
  /** Set when there is no usable report (missing, unreadable). */
  error?: string;
  timedOut: boolean;
  exitCode: number | null;
  durationMs: number;
}

function flavorOf(task: Pick<Task, 'runner'>): JunitFlavor | undefined {
  return task.runner === 'pytest' ? 'pytest' : task.runner === 'node-test' ? 'node' : task.runner === 'mocha' ? 'mocha' : undefined;
}

/**
 * Runs a test command in the sandbox and parses its report. Never throws for a bad report:
 * the error is returned, so callers can score NaN. `$TURNWISE_REPORT` names the report path.
 */
export async function runTests(
  sandbox: Sandbox,
  spec: Pick<Task, 'testCommand' | 'reportFormat' | 'runner'>,
  opts: { timeoutMs?: number; reportPath?: string; workspace?: string } = {},
): Promise<RunTestsResult> {
  const reportPath = opts.reportPath ?? DEFAULT_REPORT_PATH;
  const workspace = opts.workspace ?? WORKSPACE_DIR;
  // The report must be this run's: an agent could leave a fake one behind, read-only in a
  // read-only folder, that the runner's own `rm -rf` cannot remove and the runner cannot overwrite.
  const R = shq(reportPath);
  const clear = await sandbox.exec(`d=$(dirname -- ${R}); if [ -L "$d" ]; then rm -f -- "$d"; elif [ -d "$d" ]; then chmod u+rwx -- "$d"; chmod -R u+rwX -- ${R} ${R}.d; fi 2>/dev/null; rm -rf -- ${R} ${R}.d; [ ! -e ${R} ] && [ ! -L ${R} ]`, { timeoutMs: 30_000 });
  if (clear.exitCode !== 0) {
    return { timedOut: false, exitCode: null, durationMs: 0, error: `cannot remove an old report at ${reportPath} before the test run (exit ${clear.exitCode}): ${clear.stderr.slice(-300)}` };
  }
  const res = await sandbox.exec(spec.testCommand, {
    cwd: workspace,
    timeoutMs: opts.timeoutMs ?? 120_000,
    // No user site-packages: an agent could drop a .pth or usercustomize there to hook the runner.
    env: { TURNWISE_REPORT: reportPath, PYTHONDONTWRITEBYTECODE: '1', PYTHONNOUSERSITE: '1', CI: '1' },
  });
  const base = { timedOut: res.timedOut, exitCode: res.exitCode, durationMs: res.durationMs };
  // Read with cat, not the archive API: /tmp is a tmpfs, which `docker cp` cannot see.
  const cat = await sandbox.exec(`cat -- ${shq(reportPath)}`, { timeoutMs: 30_000, maxOutputBytes: REPORT_MAX_BYTES });
  if (cat.exitCode !== 0) {
    const tail = (res.stderr || res.stdout).trim().split('\n').slice(-6).join('\n');
    const why = res.timedOut ? `the test command timed out after ${Math.round(res.durationMs / 1000)} s` : `the test command exited with ${res.exitCode}`;
    return { ...base, error: `no test report at ${reportPath}: ${why}${tail ? `; its last output:\n${tail}` : ''}` };
  }
  if (cat.truncated) return { ...base, error: `the test report at ${reportPath} is larger than ${REPORT_MAX_BYTES} bytes` };
  const text = cat.stdout;
  try {
    return { ...base, report: parseReport(spec.reportFormat ?? 'junit-xml', text, { flavor: flavorOf(spec), root: workspace }) };
  } catch (e) {
    return { ...base, error: formatError(e) };
  }
}

export function outcomesOf(report: TestReport): Map<string, TestOutcome> {
  const m = new Map<string, TestOutcome>();
  for (const t of report.tests) m.set(t.id, t.outcome);
  return m;
}

export interface EpisodeScore {
  reward: RewardComponents;
  /** Per-test summary stored with the trajectory (only the task's tests). */
  testReport?: { passed: string[]; failed: string[]; errors?: string[] };
  restored: RestoreResult;
}

export interface ScoreOptions {
  /** Test files from the snapshot (collectTestFiles on the workspace the snapshot was built from). */
  originalTestFiles: ReadonlyMap<string, Buffer>;
  turns: number;
  maxTurns: number;
  formatError: boolean;
  weights?: Partial<RewardWeights>;
  timeoutMs?: number;
}

/**
 * Kills every process in the sandbox except the shell running this command and its ancestors
 * (the shell server, init). Processes an agent moved to their own session (setsid) outlive its
 * commands; left alone they could rewrite test files after the restore or the report after the run.
 * Repeated so a forking process cannot slip through between listing and killing.
 */
export const KILL_STRAYS_COMMAND = String.raw`declare -A keep; p=$BASHPID; while (( p > 1 )); do keep[$p]=1; read -r st < /proc/$p/stat || break; st=${"$"}{st##*) }; set -- $st; p=$2; done; for r in 1 2 3 4 5; do n=0; for d in /proc/[0-9]*; do q=${"$"}{d#/proc/}; [[ -n ${"$"}{keep[$q]} || $q == 1 ]] && continue; kill -KILL "$q" 2>/dev/null && n=$((n+1)); done; (( n == 0 )) && break; sleep 0.05; done; true`;

/** Scores a finished episode in its own sandbox: restore tests, run them, compute R. */
export async function scoreEpisode(sandbox: Sandbox, task: Task, opts: ScoreOptions): Promise<EpisodeScore> {
  let restored: RestoreResult;
  try {
    const k = await sandbox.exec(KILL_STRAYS_COMMAND, { timeoutMs: 30_000 });
    if (k.exitCode !== 0) throw new TurnwiseError('sandbox-failed', `cannot stop the agent's leftover processes (exit ${k.exitCode}): ${k.stderr.slice(-300)}`);
    restored = await restoreTestFiles(sandbox, opts.originalTestFiles);
  } catch (e) {
    const reward = computeReward({ outcomes: undefined, failToPass: task.fail_to_pass, passToPass: task.pass_to_pass, turns: opts.turns, maxTurns: opts.maxTurns, formatError: opts.formatError, weights: opts.weights, error: `the test files could not be restored, so the tests cannot be trusted: ${formatError(e)}` });
    return { reward, restored: { modified: [], deleted: [], added: [] } };
  }
  const testsEdited = restored.modified.length + restored.deleted.length + restored.added.length > 0;
  const run = await runTests(sandbox, task, { timeoutMs: opts.timeoutMs });
  const ids = [...new Set([...task.fail_to_pass, ...task.pass_to_pass])];
  const common = { failToPass: task.fail_to_pass, passToPass: task.pass_to_pass, turns: opts.turns, maxTurns: opts.maxTurns, formatError: opts.formatError, weights: opts.weights, testsEdited };
  if (!run.report) {
    return { reward: computeReward({ ...common, outcomes: undefined, error: run.error ?? 'no test report' }), restored };
  }
  const outcomes = outcomesOf(run.report);
  const passed = ids.filter((id) => outcomes.get(id) === 'passed');
  const failed = ids.filter((id) => outcomes.has(id) && outcomes.get(id) !== 'passed');
  const missing = ids.filter((id) => !outcomes.has(id));
  // A run that timed out but left a report still scores what it reported; the rest count as not passing.
  const reward = computeReward({ ...common, outcomes });
  if (run.timedOut) reward.error = `the test run timed out; ${missing.length} of the task's tests have no result and count as failing`;
  return { reward, testReport: { passed, failed, ...(missing.length ? { errors: missing } : {}) }, restored };
}
