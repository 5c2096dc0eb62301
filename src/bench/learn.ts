// `turnwise bench learn`: held-out resolved rate after the warm start and after N RL iterations
// with each estimator compared (grpo and turnwise unless named), identical seeds, tasks and budget. The summary is a pure
// function over what the runs return (unit-tested); the rest drives real sandboxes and training runs.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { TurnwiseError } from '../core/errors';
import type { MetricsRow, RunEvent } from '../core/events';
import { mean } from '../core/stats';
import { snapshotCheckpoint } from '../policy/files/checkpoint';
import { synthesizeMutationTasks } from '../tasks/synth';
import { writeTaskFile } from '../tasks/taskfile';
import { connectRunPool, resolveTrainConfig, TRAIN_DEFAULTS, type TrainConfig, DEMO_SETTINGS } from '../train/config';
import { trainRun } from '../train/run';
import { pairedChange, runPairedChange, sumPaired, type PairedChange } from '../eval/compare';
import { RunDir } from '../core/run';
import type { Trajectory } from '../core/schema';
import { meanPassAtKT, runPassAtKT, type PassAtKT } from '../eval/pass-at-k';

const round = (x: number, digits = 3) => (Number.isFinite(x) ? Math.round(x * 10 ** digits) / 10 ** digits : null);

/** The learn benchmark's training settings (the demo's, with evaluation every iteration). */
export const LEARN_DEFAULTS: Partial<TrainConfig> = { ...DEMO_SETTINGS, iterations: 4, evalEvery: 1 };

/** The estimators compared when none are named: the plain group baseline and the default. */
export const LEARN_ESTIMATORS = ['grpo', 'turnwise'] as const;

const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);

/** Per-iteration values of one metric, indexed by iteration (null where the row lacks it). */
export function metricCurve(metrics: readonly MetricsRow[], key: string, iterations: number): (number | null)[] {
  const byIt = new Map(metrics.map((m) => [m.iteration, m]));
  return Array.from({ length: iterations + 1 }, (_, i) => num(byIt.get(i)?.[key]));
}

/** Mean of several curves point by point (nulls left out; null where all are null). */
export function meanCurve(curves: readonly (number | null)[][]): (number | null)[] {
  const n = Math.max(0, ...curves.map((c) => c.length));
  return Array.from({ length: n }, (_, i) => {
    const xs = curves.map((c) => c[i]).filter((x): x is number => x !== null && x !== undefined);
    return xs.length ? round(mean(xs), 4) : null;
  });
}

/** First iteration ≥ 1 whose value is above the iteration-0 value (null: never). */
export function firstImprovement(curve: readonly (number | null)[]): number | null {
  const base = curve[0];
  if (base === null || base === undefined) return null;
  for (let i = 1; i < curve.length; i++) if (curve[i] !== null && curve[i]! > base + 1e-9) return i;
  return null;
}

export interface LearnRun {
  seed: number;
  estimator: string;
  runDir: string;
  metrics: MetricsRow[];
  wallS: number;
  /** First vs last held-out evaluation, paired (absent when the run evaluated fewer than twice). */
  paired?: { greedy: PairedChange; sampled: PairedChange };
  /** PASS@(k,T) of the sampled held-out episodes at the first and the last evaluation (absent without samples). */
  passAtKT?: { first: PassAtKT | null; last: PassAtKT | null };
  /** The held-out episodes of its last evaluation: what estimators are compared on, head to head. */
  lastEval?: Trajectory[];
}

/** One estimator's runs, summed or averaged over the seeds. */
export interface LearnEstimatorSummary {
  /** Held-out resolved rate (greedy) after the last iteration, mean over seeds. */
  resolved: number | null;
  /** Held-out resolved rate per iteration (index 0 = the warm start), mean over seeds. */
  curve: (number | null)[];
  /** Mean train-episode reward per iteration (index 0: no training, null). */
  reward_curve: (number | null)[];
  /**
   * Held-out resolved rate of sampled episodes (config evalSamples per task, the same seeds at
   * every iteration), mean over seeds; all null when evalSamples is 0.
   */
  sampled_curve: (number | null)[];
  /** Mean held-out episode reward per iteration. */
  heldout_reward_curve: (number | null)[];
  /** First iteration whose held-out resolved rate beats the warm start (null: none did). */
  first_improvement: number | null;
  /**
   * Held-out episodes resolved at the last evaluation but not the first (gained) and the reverse
   * (lost), paired by task and seed, summed over seeds, with the sign test's p-value: the direct
   * answer to "did RL improve on the warm start", far less noisy than a difference of two rates.
   */
  paired: { greedy: PairedChange; sampled: PairedChange } | null;
  /** PASS@(k,T) of the sampled held-out episodes after the last iteration, mean over seeds (null without samples). */
  pass_at_k_t: PassAtKT | null;
}

export interface LearnBenchResult {
  resolved_warmstart: number | null;
  heldout_tasks: number | null;
  iterations: number;
  seeds: number[];
  /** The estimators compared, in the order they ran on each seed. */
  estimators: string[];
  by_estimator: Record<string, LearnEstimatorSummary>;
  /**
   * Each estimator against each other one on the same held-out episodes (task, seed, greedy or
   * sampled) of their last evaluations, summed over seeds: `gained` the episodes the first
   * resolved and the second did not, with the sign test's p-value. Keyed `"<a> vs <b>"`.
   */
  head_to_head: Record<string, { greedy: PairedChange; sampled: PairedChange }>;
  /**
   * PASS@(k,T) of the sampled held-out episodes (config evalSamples per task): the probability
   * that one of k episodes resolves a task within T actions, keyed by k then T, mean over seeds,
   * at the warm start (every run's first evaluation); null when evalSamples is 0.
   */
  pass_at_k_t_warmstart: PassAtKT | null;
  /** Every estimator's runs saw the same warm-start evaluation (same tasks, seeds and policy). */
  warmstart_agrees: boolean;
  runs: {
    seed: number;
    estimator: string;
    run_dir: string;
    wall_s: number | null;
    curve: (number | null)[];
    pass_at_k_t?: { first: PassAtKT | null; last: PassAtKT | null };
  }[];
  runs_root: string;
  config: Record<string, unknown>;
}

/** A finished run as the summary reads it: its paired change, PASS@(k,T) and last held-out episodes, from its folder. */
export function learnRunOf(runDir: string, metrics: MetricsRow[], o: { seed: number; estimator: string; wallS: number }): LearnRun {
  const change = runPairedChange(runDir, metrics);
  const passKT = runPassAtKT(runDir, metrics);
  return {
    ...o,
    runDir,
    metrics,
    ...(change ? { paired: { greedy: change.greedy, sampled: change.sampled } } : {}),
    ...(passKT ? { passAtKT: passKT } : {}),
    ...(change ? { lastEval: RunDir.open(runDir).readTrajectories(change.last_eval, 'heldout') } : {}),
  };
}

/** Assembles the learn benchmark's result from its finished runs (pure). */
export function learnSummary(
  runs: readonly LearnRun[],
  ctx: { iterations: number; runsRoot: string; config: Record<string, unknown> },
): LearnBenchResult {
  const seeds = [...new Set(runs.map((r) => r.seed))];
  const estimators = [...new Set(runs.map((r) => r.estimator))];
  const of = (e: string) => runs.filter((r) => r.estimator === e);
  const curves = (e: string, key: string) => meanCurve(of(e).map((r) => metricCurve(r.metrics, key, ctx.iterations)));
  const warm = seeds.map((s) => runs.filter((r) => r.seed === s).map((r) => metricCurve(r.metrics, 'heldout/resolved', 0)[0]));
  const heldout = runs.map((r) => num(r.metrics.find((m) => m.iteration === 0)?.['heldout/episodes']));
  const summed = (ps: { greedy: PairedChange; sampled: PairedChange }[]) =>
    ps.length ? { greedy: sumPaired(ps.map((p) => p.greedy)), sampled: sumPaired(ps.map((p) => p.sampled)) } : null;
  const by_estimator: Record<string, LearnEstimatorSummary> = {};
  for (const e of estimators) {
    const curve = curves(e, 'heldout/resolved');
    by_estimator[e] = {
      resolved: curve[ctx.iterations] ?? null,
      curve,
      reward_curve: curves(e, 'reward/mean'),
      sampled_curve: curves(e, 'heldout/sampled/resolved'),
      heldout_reward_curve: curves(e, 'heldout/reward/mean'),
      first_improvement: firstImprovement(curve),
      paired: summed(of(e).flatMap((r) => (r.paired ? [r.paired] : []))),
      pass_at_k_t: meanPassAtKT(of(e).map((r) => r.passAtKT?.last)),
    };
  }
  const head_to_head: LearnBenchResult['head_to_head'] = {};
  for (const a of estimators)
    for (const b of estimators) {
      if (a === b) continue;
      const parts = seeds.flatMap((seed) => {
        const ra = of(a).find((r) => r.seed === seed)?.lastEval;
        const rb = of(b).find((r) => r.seed === seed)?.lastEval;
        return ra && rb ? [{ greedy: pairedChange(rb, ra, 'greedy'), sampled: pairedChange(rb, ra, 'sampled') }] : [];
      });
      const s = summed(parts);
      if (s) head_to_head[`${a} vs ${b}`] = s;
    }
  const first = estimators.length ? by_estimator[estimators[0]].curve[0] : null;
  return {
    resolved_warmstart: first ?? null,
    heldout_tasks: heldout.find((h) => h !== null) ?? null,
    iterations: ctx.iterations,
    seeds,
    estimators,
    by_estimator,
    head_to_head,
    pass_at_k_t_warmstart: meanPassAtKT(runs.map((r) => r.passAtKT?.first)),
    warmstart_agrees: warm.every((w) => w.every((x) => x === w[0])),
    runs: runs.map((r) => ({
      seed: r.seed,
      estimator: r.estimator,
      run_dir: r.runDir,
      wall_s: round(r.wallS, 1),
      curve: metricCurve(r.metrics, 'heldout/resolved', ctx.iterations),
      ...(r.passAtKT ? { pass_at_k_t: r.passAtKT } : {}),
    })),
    runs_root: ctx.runsRoot,
    config: ctx.config,
  };
}

export interface LearnBenchOptions {
  workspace: string;
  /** Starting checkpoint (copied, optimizer state included, to the runs folder first). */
  model: string;
  iterations: number;
  /** Seeds firstSeed … firstSeed + seeds − 1; each seed gets its own tasks and every estimator. */
  seeds?: number;
  /** The first seed (default 0): a later session can add seeds to a comparison already run. */
  firstSeed?: number;
  /** Where the runs go (default: a new temp folder, kept). */
  runsRoot?: string;
  /** Training settings over LEARN_DEFAULTS (identical for every estimator). */
  config?: Partial<TrainConfig>;
  /** The estimators to compare (default LEARN_ESTIMATORS), each run on every seed's tasks. */
  estimators?: readonly string[];
  onEvent?: (e: RunEvent, run: { seed: number; estimator: string }) => void;
  onProgress?: (message: string) => void;
  signal?: AbortSignal;
}

/**
 * Config fields the benchmark sets itself (each estimator, seed, task file and starting model in
 * turn); given in its settings they would be overwritten, so they are refused instead.
 */
export const LEARN_CONTROLLED_FIELDS = [
  'workspace',
  'model',
  'iterations',
  'estimator',
  'seed',
  'taskSeed',
  'taskSource',
  'tasksFile',
] as const;

/** `turnwise bench learn`: per seed, the same tasks trained once with each estimator. */
export async function benchLearn(o: LearnBenchOptions): Promise<LearnBenchResult> {
  const controlled = LEARN_CONTROLLED_FIELDS.filter((k) => o.config?.[k] !== undefined);
  if (controlled.length) {
    throw new TurnwiseError(
      'invalid-input',
      `the learn benchmark sets ${controlled.map((k) => JSON.stringify(k)).join(', ')} itself; its settings may not`,
      {
        hint: 'remove those fields from the benchmark config (use --workspace, --model, --iterations and --seeds for the ones it takes as flags)',
      },
    );
  }
  const base = { ...LEARN_DEFAULTS, ...o.config, iterations: o.iterations, workspace: path.resolve(o.workspace) };
  const estimators = [...new Set(o.estimators ?? LEARN_ESTIMATORS)];
  if (!estimators.length)
    throw new TurnwiseError('invalid-input', 'the learn benchmark needs at least one estimator', {
      hint: 'e.g. --estimators grpo,turnwise',
    });
  // Every field checked now, not after the checkpoint copy and minutes of task synthesis.
  for (const estimator of estimators)
    resolveTrainConfig(
      { ...base, model: o.model, taskSource: 'file', tasksFile: 'tasks.jsonl', estimator },
      'the learn benchmark settings',
    );
  const log = o.onProgress ?? (() => undefined);
  const runsRoot = path.resolve(o.runsRoot ?? fs.mkdtempSync(path.join(os.tmpdir(), 'turnwise-bench-learn-')));
  fs.mkdirSync(runsRoot, { recursive: true });
  log(`copying the checkpoint ${o.model}`);
  const model = await snapshotCheckpoint(o.model, path.join(runsRoot, 'start-model'), { optimizer: true });
  const runs: LearnRun[] = [];
  const first = o.firstSeed ?? 0;
  for (let seed = first; seed < first + (o.seeds ?? 1); seed++) {
    // One task file per seed, shared by every estimator: identical tasks and held-out split.
    const tasksFile = path.join(runsRoot, `tasks-seed${seed}.jsonl`);
    if (!fs.existsSync(tasksFile)) {
      log(`seed ${seed}: synthesizing up to ${base.maxTasks} tasks`);
      const pool = await connectRunPool(`bench-learn-${process.pid}`, { ...TRAIN_DEFAULTS, ...base });
      try {
        const r = await synthesizeMutationTasks({ workspace: base.workspace, pool, seed, max: base.maxTasks });
        if (r.tasks.length < 2)
          throw new TurnwiseError(
            'invalid-input',
            `only ${r.tasks.length} task(s) survived validation in ${base.workspace}; the benchmark needs train and held-out tasks`,
            { hint: 'use a workspace with more tested code' },
          );
        writeTaskFile(tasksFile, r.tasks);
      } finally {
        await pool.close();
      }
    }
    for (const estimator of estimators) {
      if (o.signal?.aborted) break;
      // Each seed its own tasks and split (taskSeed = seed); every estimator the same ones.
      const config = resolveTrainConfig(
        { ...base, model, taskSource: 'file', tasksFile, seed, taskSeed: seed, estimator },
        'the learn benchmark settings',
      );
      log(`seed ${seed}: training with ${estimator} (${config.iterations} iterations)`);
      const t0 = Date.now();
      const r = await trainRun({
        config,
        runsRoot,
        name: `bench-learn`,
        signal: o.signal,
        onEvent: (e) => o.onEvent?.(e, { seed, estimator }),
      });
      runs.push(learnRunOf(r.runDir, r.metrics, { seed, estimator, wallS: (Date.now() - t0) / 1000 }));
      if (r.state === 'stopped') break;
    }
  }
  const { workspace, ...rest } = base;
  return learnSummary(runs, { iterations: o.iterations, runsRoot, config: { workspace, model: o.model, ...rest } });
}
