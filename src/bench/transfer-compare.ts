// `turnwise bench transfer --compare A.json B.json`: two transfer benches (their --json results)
// compared repository by repository, on the episodes themselves. Both benches draw the same tasks
// and held-out split from the same seed and evaluate with the same episode seeds, so the last
// held-out evaluation of A's run and of B's run on a repository pair up by task and seed as
// `eval --compare` pairs two evaluations: what differs is what the two benches trained (another
// estimator, another setting) or started from (another model, a fix in the tools). The sign test
// on the changed pairs says whether B's policy resolves more than A's there; pooled over the
// repositories as well. No sandbox runs: the run folders the results name are read.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError } from '../core/errors';
import { RunDir } from '../core/run';
import { compareEvaluations, formatPaired, sumPaired, type PairedChange } from '../eval/compare';
import type { TransferResult } from './transfer';

/**
 * Below this, in both the sign test over episodes and the sign-flip test by task, a repository's
 * sampled split counts as a win for one side: one task that flipped all of its samples is not one.
 */
export const TRANSFER_COMPARE_ALPHA = 0.05;

/** One side of the comparison, as its results file says. */
export interface TransferSide {
  file: string;
  model: string;
  estimator: string;
  rl: boolean;
  /** The tasks' and held-out episodes' seed, and the RL runs' own (results written before --rl-seed: the same). */
  seed: number;
  rl_seed: number;
}

/** One side's evaluation of a repository in a comparison. */
export interface ComparedEvaluation {
  iteration: number;
  greedy: number;
  sampled: number;
}

/** One repository of both benches. */
export interface TransferRepoComparison {
  name: string;
  /** Each side's compared held-out evaluation (`iteration` 0: the starting policy's, as with --no-rl) and its resolved episodes among the pairs. */
  a: ComparedEvaluation;
  b: ComparedEvaluation;
  /** A's episode against B's with the same task and seed: `gained` resolved by B only, `lost` by A only. */
  greedy: PairedChange;
  sampled: PairedChange;
  /** Which side's sampled episodes resolved more at p < TRANSFER_COMPARE_ALPHA by episode and by task, else 'neither'. */
  better: 'a' | 'b' | 'neither';
  /** Observations where tw-suspects was cut short by the clock, per side: pairs differing by them are the machine's doing. */
  cut_short: { a: number; b: number };
}

export interface TransferComparison {
  schema: 'turnwise/bench-transfer-compare@1';
  /** The held-out evaluation of each run compared: the last, or the first (`--start`: the starting policies). */
  at: CompareAt;
  a: TransferSide;
  b: TransferSide;
  /**
   * The settings the compared runs resolved that differ, `field: [A's, B's]` (from their run
   * folders, so a default that changed between two builds shows too; paths and ids left out).
   */
  differences: Record<string, [unknown, unknown]>;
  /** Whether both benches started from the same weights (their start-model snapshots' safetensors), null where unknown. */
  same_start_weights: boolean | null;
  repos: TransferRepoComparison[];
  /** Repositories of either bench that could not be compared, and why. */
  skipped: { name: string; reason: string }[];
  /** The pairs of every compared repository summed, and tested together. */
  pooled: { greedy: PairedChange; sampled: PairedChange };
  /** Repositories where each side's sampled episodes resolved more at p < alpha. */
  a_better: string[];
  b_better: string[];
  alpha: number;
}

/** A `bench transfer --json` results file, read and checked. */
export function readTransferResult(file: string): TransferResult {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new TurnwiseError('not-found', `cannot read ${file}: ${(e as Error).message}`, {
      hint: 'give the files `turnwise bench transfer --json > FILE` wrote',
    });
  }
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new TurnwiseError('invalid-file', `${file} is not JSON: ${(e as Error).message}`, {
      hint: 'give the files `turnwise bench transfer --json > FILE` wrote (stdout only; the progress lines go to stderr)',
    });
  }
  const r = v as Partial<TransferResult> | null;
  if (!r || typeof r !== 'object' || r.schema !== 'turnwise/bench-transfer@1' || !Array.isArray(r.repos)) {
    throw new TurnwiseError('invalid-file', `${file} is not a transfer bench result (schema "turnwise/bench-transfer@1" with its repos)`, {
      hint: 'give the files `turnwise bench transfer --json > FILE` wrote',
    });
  }
  return r as TransferResult;
}

interface RunSide {
  iteration: number;
  heldout: string[];
  episodes: ReturnType<RunDir['readTrajectories']>;
  config: Record<string, unknown>;
}

/** Which held-out evaluation of each run is compared: the last (after RL), or the first (the starting policy, before any update). */
export type CompareAt = 'last' | 'start';

/** The last (or, `at` 'start', the first) held-out evaluation of a run folder (its iteration and episodes), its split and its resolved config. */
function heldoutEvaluation(runDir: string, at: CompareAt): RunSide {
  const run = RunDir.open(runDir);
  const evals = run
    .readMetrics()
    .filter((m) => typeof m['heldout/resolved'] === 'number')
    .map((m) => m.iteration);
  if (!evals.length) throw new Error(`${runDir} holds no held-out evaluation`);
  const iteration = at === 'start' ? evals[0] : evals[evals.length - 1];
  return {
    iteration,
    heldout: run.readSplits().heldout,
    episodes: run.readTrajectories(iteration, 'heldout'),
    config: run.readConfig<Record<string, unknown>>(),
  };
}

/** Fields of a run's config that name this run or this machine's paths, not a setting. */
const NOT_SETTINGS = new Set(['schema', 'runId', 'createdAt', 'startModel', 'model', 'workspace', 'tasksFile']);

/** The digest of a model folder's weights (its safetensors files), or undefined when it has none. */
function weightsDigest(dir: unknown): string | undefined {
  if (typeof dir !== 'string' || !fs.existsSync(dir)) return undefined;
  const files = fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.safetensors'))
    .sort();
  if (!files.length) return undefined;
  const h = createHash('sha256');
  for (const f of files) h.update(f).update(fs.readFileSync(path.join(dir, f)));
  return h.digest('hex');
}

const side = (file: string, r: TransferResult): TransferSide => ({
  file,
  model: r.model,
  estimator: r.estimator ?? String(r.config?.estimator ?? 'turnwise'),
  rl: r.rl,
  seed: r.seed,
  rl_seed: r.rl_seed ?? r.seed,
});

/** The fields of two resolved run configs that differ, added to `out` (a field already there is kept). */
export function settingDifferences(
  ca: Record<string, unknown>,
  cb: Record<string, unknown>,
  out: Record<string, [unknown, unknown]> = {},
): Record<string, [unknown, unknown]> {
  for (const k of [...new Set([...Object.keys(ca), ...Object.keys(cb)])].sort()) {
    if (NOT_SETTINGS.has(k) || k in out) continue;
    if (JSON.stringify(ca[k]) !== JSON.stringify(cb[k])) out[k] = [ca[k] ?? null, cb[k] ?? null];
  }
  return out;
}

/**
 * Compares two transfer benches: per repository both ran (in A's order), B's last held-out
 * episodes against A's with the same task and seed; with `at` 'start', each run's first held-out
 * evaluation (the policy it started from: another model, or the same with other tools), so a
 * bench with RL pairs up with one run with --no-rl. A repository is skipped, with the reason, when
 * either side has no run folder (it failed), the folder is gone, or the held-out tasks differ.
 */
export function compareTransferResults(
  a: TransferResult,
  b: TransferResult,
  files: { a: string; b: string },
  at: CompareAt = 'last',
): TransferComparison {
  const repos: TransferRepoComparison[] = [];
  const skipped: { name: string; reason: string }[] = [];
  const differences: Record<string, [unknown, unknown]> = {};
  const digests: { a?: string; b?: string } = {};
  const inB = new Map(b.repos.map((r) => [r.name, r]));
  for (const ra of a.repos) {
    const rb = inB.get(ra.name);
    if (!rb) {
      skipped.push({ name: ra.name, reason: 'only in A' });
      continue;
    }
    const missing = [ra.run_dir ? '' : 'A', rb.run_dir ? '' : 'B'].filter(Boolean);
    if (missing.length) {
      skipped.push({
        name: ra.name,
        reason: `no run folder in ${missing.join(' and ')} (${ra.error ?? rb.error ?? 'the repository failed'})`,
      });
      continue;
    }
    let ea: RunSide;
    let eb: RunSide;
    try {
      ea = heldoutEvaluation(ra.run_dir!, at);
      eb = heldoutEvaluation(rb.run_dir!, at);
    } catch (e) {
      skipped.push({ name: ra.name, reason: (e as Error).message });
      continue;
    }
    const same = ea.heldout.length === eb.heldout.length && ea.heldout.every((id) => eb.heldout.includes(id));
    if (!same) {
      skipped.push({ name: ra.name, reason: 'the held-out tasks differ (another seed, task count or task file): no episode pairs up' });
      continue;
    }
    settingDifferences(ea.config, eb.config, differences);
    digests.a ??= weightsDigest(ea.config.startModel);
    digests.b ??= weightsDigest(eb.config.startModel);
    const c = compareEvaluations(ea.episodes, eb.episodes);
    const resolvedOf = (kind: 'greedy' | 'sampled', which: 'before' | 'after') =>
      c.tasks.filter((t) => t.kind === kind).reduce((s, t) => s + t[which], 0);
    const significant = [c.sampled.p_value, c.sampled.p_value_tasks].every((p) => p !== null && p < TRANSFER_COMPARE_ALPHA);
    repos.push({
      name: ra.name,
      a: { iteration: ea.iteration, greedy: resolvedOf('greedy', 'before'), sampled: resolvedOf('sampled', 'before') },
      b: { iteration: eb.iteration, greedy: resolvedOf('greedy', 'after'), sampled: resolvedOf('sampled', 'after') },
      greedy: c.greedy,
      sampled: c.sampled,
      better: significant ? (c.sampled.gained > c.sampled.lost ? 'b' : 'a') : 'neither',
      cut_short: { a: c.cut_short.before, b: c.cut_short.after },
    });
  }
  for (const rb of b.repos) if (!a.repos.some((r) => r.name === rb.name)) skipped.push({ name: rb.name, reason: 'only in B' });
  return {
    schema: 'turnwise/bench-transfer-compare@1',
    at,
    a: side(files.a, a),
    b: side(files.b, b),
    differences,
    same_start_weights: digests.a && digests.b ? digests.a === digests.b : null,
    repos,
    skipped,
    pooled: { greedy: sumPaired(repos.map((r) => r.greedy)), sampled: sumPaired(repos.map((r) => r.sampled)) },
    a_better: repos.filter((r) => r.better === 'a').map((r) => r.name),
    b_better: repos.filter((r) => r.better === 'b').map((r) => r.name),
    alpha: TRANSFER_COMPARE_ALPHA,
  };
}

const fmtP = (c: PairedChange, byTask = false) => formatPaired(c, { byTask, prefix: 'B ' });
const fmtValue = (v: unknown) => (v === null ? 'unset' : typeof v === 'string' ? v || '""' : JSON.stringify(v));

/** The comparison as lines for a terminal. */
export function formatTransferComparison(c: TransferComparison): string[] {
  const who = (s: TransferSide) => `${s.file} (${s.rl ? `RL with ${s.estimator}, RL seed ${s.rl_seed}` : 'no RL'}, tasks seed ${s.seed})`;
  const lines = [`A: ${who(c.a)}`, `B: ${who(c.b)}`];
  if (c.at === 'start') lines.push("compared: each run's first held-out evaluation, the policy it started from (before any update)");
  const diffs = Object.entries(c.differences);
  lines.push(
    diffs.length
      ? `settings that differ: ${diffs.map(([k, [x, y]]) => `${k} ${fmtValue(x)} → ${fmtValue(y)}`).join('; ')}`
      : 'settings that differ: none',
  );
  if (c.same_start_weights !== null) lines.push(`starting weights: ${c.same_start_weights ? 'the same' : 'differ'}`);
  if (!diffs.length && c.same_start_weights && c.at === 'last')
    lines.push(
      '(the same bench twice: its evaluations draw the same episodes, so pairs that differ come from the RL runs: their iteration counts, or the machine)',
    );
  const width = Math.max(8, ...c.repos.map((r) => r.name.length));
  for (const r of c.repos) {
    lines.push(
      `${r.name.padEnd(width)}  it. ${r.a.iteration} vs ${r.b.iteration}; sampled ${r.a.sampled} vs ${r.b.sampled}: ${fmtP(r.sampled, true)}; greedy ${r.a.greedy} vs ${r.b.greedy}: ${fmtP(r.greedy)}`,
    );
    if (r.cut_short.a || r.cut_short.b)
      lines.push(
        `${''.padEnd(width)}  tw-suspects cut short by the clock in ${r.cut_short.a} (A) and ${r.cut_short.b} (B) observations: pairs may differ by the machine's load`,
      );
  }
  for (const s of c.skipped) lines.push(`${s.name.padEnd(width)}  not compared: ${s.reason}`);
  if (c.repos.length > 1) lines.push(`${'pooled'.padEnd(width)}  sampled ${fmtP(c.pooled.sampled, true)}; greedy ${fmtP(c.pooled.greedy)}`);
  const named = (xs: string[]) => (xs.length ? ` (${xs.join(', ')})` : '');
  lines.push(
    `sampled, p < ${c.alpha} by episode and by task: B better on ${c.b_better.length} of ${c.repos.length} repositories${named(c.b_better)}, A better on ${c.a_better.length}${named(c.a_better)}`,
  );
  return lines;
}
