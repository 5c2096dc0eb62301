// `turnwise bench transfer`: how the policy does on repositories it never saw. A fixed panel of
// small real Python projects, each fetched when the bench runs as the upstream source tarball
// Debian ships (its `.orig.tar.*`, which carries the project's own tests), pinned by file name and
// SHA-256 and cached under ~/.cache/turnwise/transfer; nothing of them is in this repository or
// in any demonstration. Per repository: one-token mutation tasks that break its own tests
// (`turnwise tasks synth`), the held-out split resolved greedy and in 4 samples by the starting
// policy, then (unless --no-rl) a short RL run on its train split and the same held-out episodes
// again, paired by task and seed as `eval --compare` pairs them.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as https from 'node:https';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { TurnwiseError } from '../core/errors';
import { turnwiseCacheDir } from '../core/fs';
import type { RunEvent } from '../core/events';
import { RunDir } from '../core/run';
import type { Trajectory } from '../core/schema';
import { synthesizeMutationTasks } from '../tasks/synth';
import { readTaskFile, writeTaskFile } from '../tasks/taskfile';
import type { MutationOperator } from '../tasks/mutate';
import { snapshotCheckpoint } from '../policy/files/checkpoint';
import { compareEvaluations, type PairedChange } from '../eval/compare';
import { TRANSFER_PANEL, type TransferRepo } from '../tasks/panel';
import { connectRunPool, DEMO_SETTINGS, resolveTrainConfig, TRAIN_DEFAULTS, type TrainConfig } from '../train/config';
import { FIXABLE_OPERATORS } from '../demonstrations/fix-cases';
import { actionDiversity } from '../train/metrics';
import { trainRun } from '../train/run';
import { SYNTHESIS_VERSION } from '../tasks/cache';

const execFileP = promisify(execFile);

/** The bench's settings for one repository: its own command limit unless --config gives one. */
export function repoSettings(
  repo: Pick<TransferRepo, 'commandTimeoutMs'>,
  base: Partial<TrainConfig>,
  user?: Partial<TrainConfig>,
): Partial<TrainConfig> {
  return repo.commandTimeoutMs !== undefined && user?.commandTimeoutMs === undefined
    ? { ...base, commandTimeoutMs: repo.commandTimeoutMs }
    : base;
}

/** Debian's archive (its CDN redirector); --mirror for another. */
export const DEBIAN_ARCHIVE = 'https://deb.debian.org/debian';

/** ~/.cache/turnwise/transfer (XDG_CACHE_HOME respected). */
export function transferCacheDir(): string {
  return turnwiseCacheDir('transfer');
}

/** The panel's repositories named by `names` (all when empty), in the panel's order; unknown names refused. */
export function pickRepos(names: readonly string[] = []): TransferRepo[] {
  const unknown = names.filter((n) => !TRANSFER_PANEL.some((r) => r.name === n));
  if (unknown.length) {
    throw new TurnwiseError('invalid-input', `no repository ${unknown.map((n) => JSON.stringify(n)).join(', ')} on the transfer panel`, {
      hint: `--repos takes names from: ${TRANSFER_PANEL.map((r) => r.name).join(', ')}`,
    });
  }
  return names.length ? TRANSFER_PANEL.filter((r) => names.includes(r.name)) : [...TRANSFER_PANEL];
}

function download(url: string, dest: string, redirects = 5): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = https.get(url, { timeout: 60_000 }, (res) => {
      const code = res.statusCode ?? 0;
      if (code >= 300 && code < 400 && res.headers.location && redirects > 0) {
        res.resume();
        download(new URL(res.headers.location, url).toString(), dest, redirects - 1).then(resolve, reject);
        return;
      }
      if (code !== 200) {
        res.resume();
        reject(
          new TurnwiseError('not-found', `${url} answered HTTP ${code}`, {
            hint: "check the archive is reachable (or give --mirror URL of a Debian mirror that keeps bookworm's pool)",
          }),
        );
        return;
      }
      const out = fs.createWriteStream(dest);
      res.pipe(out);
      out.on('finish', () => out.close(() => resolve()));
      out.on('error', reject);
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url} in 60 s`)));
    req.on('error', (e) =>
      reject(
        e instanceof TurnwiseError
          ? e
          : new TurnwiseError('runtime-unavailable', `cannot fetch ${url}: ${e.message}`, {
              hint: "the transfer bench fetches its repositories from Debian's archive: check the network, or give --mirror URL",
            }),
      ),
    );
  });
}

const sha256Of = (file: string) => createHash('sha256').update(fs.readFileSync(file)).digest('hex');

/**
 * The repository's source tree, fetched, checked and unpacked into the cache on first use:
 * `<cache>/src/<dir>`. The tarball must have the pinned SHA-256; it is unpacked by tar without
 * a shell, as the invoking user, with no owners or modes from the archive.
 */
export async function fetchRepo(repo: TransferRepo, o: { cacheDir: string; mirror?: string; log?: (m: string) => void }): Promise<string> {
  const srcRoot = path.join(o.cacheDir, 'src');
  const tree = path.join(srcRoot, repo.dir);
  const stamp = path.join(srcRoot, `.${repo.dir}.sha256`);
  if (fs.existsSync(tree) && fs.existsSync(stamp) && fs.readFileSync(stamp, 'utf8').trim() === repo.sha256) return tree;
  fs.mkdirSync(path.join(o.cacheDir, 'downloads'), { recursive: true });
  const tarball = path.join(o.cacheDir, 'downloads', path.basename(repo.file));
  if (!fs.existsSync(tarball) || sha256Of(tarball) !== repo.sha256) {
    const url = `${(o.mirror ?? DEBIAN_ARCHIVE).replace(/\/+$/, '')}/${repo.file}`;
    o.log?.(`${repo.name}: fetching ${url}`);
    const part = `${tarball}.part-${process.pid}`;
    try {
      await download(url, part);
      const got = sha256Of(part);
      if (got !== repo.sha256)
        throw new TurnwiseError('invalid-input', `${url} has SHA-256 ${got}, not the pinned ${repo.sha256}`, {
          hint: 'the mirror serves another file under that name; use the Debian archive itself (--mirror https://deb.debian.org/debian)',
        });
      fs.renameSync(part, tarball);
    } finally {
      fs.rmSync(part, { force: true });
    }
  }
  fs.mkdirSync(srcRoot, { recursive: true });
  const tmp = fs.mkdtempSync(path.join(srcRoot, `.unpack-${repo.name}-`));
  try {
    await execFileP('tar', ['-x', '-f', tarball, '-C', tmp, '--no-same-owner', '--no-same-permissions'], { maxBuffer: 1 << 20 });
    const top = path.join(tmp, repo.dir);
    if (!fs.statSync(top, { throwIfNoEntry: false })?.isDirectory())
      throw new TurnwiseError('invalid-input', `${path.basename(repo.file)} does not unpack to ${repo.dir}/`, {
        hint: 'the panel entry names the wrong folder',
      });
    fs.rmSync(tree, { recursive: true, force: true });
    fs.renameSync(top, tree);
    fs.writeFileSync(stamp, `${repo.sha256}\n`);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return tree;
}

/** Resolved counts of one evaluation of the held-out tasks. */
export interface HeldoutScore {
  /** Greedy: one episode per task. */
  greedy: { resolved: number; episodes: number; rate: number | null };
  /**
   * Sampled: `samples` episodes per task; `tasks_resolved`: tasks at least one of them resolved;
   * `distinct`: how far a task's samples differ (0: all one action sequence, 1: each its own;
   * train/metrics actionDiversity), null without two samples per task.
   */
  sampled: { resolved: number; episodes: number; rate: number | null; tasks_resolved: number; distinct: number | null };
  /** Tasks resolved greedy or by one of the samples, of all held-out tasks. */
  tasks_resolved: number;
  tasks: number;
}

const roundOrNull = (x: number) => (Number.isFinite(x) ? Math.round(x * 10_000) / 10_000 : null);
const rate = (k: number, n: number) => (n ? roundOrNull(k / n) : null);
const scored = (t: Trajectory) => !t.failure && Number.isFinite(t.reward.passRate);

/** Scores of one held-out evaluation's trajectories (greedy `eval-…`, sampled `evals-…`). */
export function heldoutScore(trajs: readonly Trajectory[], tasks: number): HeldoutScore {
  const greedy = trajs.filter((t) => t.trajId.startsWith('eval-') && scored(t));
  const sampled = trajs.filter((t) => t.trajId.startsWith('evals-') && scored(t));
  const solvedBy = (ts: readonly Trajectory[]) => new Set(ts.filter((t) => t.reward.resolved).map((t) => t.taskId));
  const g = solvedBy(greedy);
  const s = solvedBy(sampled);
  return {
    greedy: {
      resolved: greedy.filter((t) => t.reward.resolved).length,
      episodes: greedy.length,
      rate: rate(greedy.filter((t) => t.reward.resolved).length, greedy.length),
    },
    sampled: {
      resolved: sampled.filter((t) => t.reward.resolved).length,
      episodes: sampled.length,
      rate: rate(sampled.filter((t) => t.reward.resolved).length, sampled.length),
      tasks_resolved: s.size,
      distinct: roundOrNull(actionDiversity(sampled)),
    },
    tasks_resolved: new Set([...g, ...s]).size,
    tasks,
  };
}

export interface TransferRepoResult {
  name: string;
  source: string;
  shape: string;
  /** Tasks kept by synthesis, and the split. */
  tasks: number;
  train_tasks: number;
  heldout_tasks: number;
  before: HeldoutScore | null;
  /** After RL (null with --no-rl or when no iteration finished). */
  after: HeldoutScore | null;
  /** Before vs after, paired by task and seed (eval --compare's counts). */
  paired: { greedy: PairedChange; sampled: PairedChange } | null;
  rl_iterations: number;
  run_dir: string | null;
  /** The command time limit its episodes ran with (the panel's, --config's or the default). */
  command_timeout_ms: number;
  wall_s: number;
  /** Why this repository has no figures (the others still run). */
  error?: string;
}

export interface TransferResult {
  schema: 'turnwise/bench-transfer@1';
  model: string;
  rl: boolean;
  /** The RL runs' advantage estimator. */
  estimator: string;
  /** RL budget per repository. */
  minutes: number;
  iterations: number;
  samples: number;
  /** The tasks' and held-out episodes' seed, and the RL runs' own. */
  seed: number;
  rl_seed: number;
  cache_dir: string;
  repos: TransferRepoResult[];
  /** Panel sums. */
  totals: { tasks: number; heldout_tasks: number; before_tasks_resolved: number; after_tasks_resolved: number | null };
  config: Record<string, unknown>;
}

/**
 * The bench's training settings: the demo's (the run defaults: KL to the start, the branch
 * budget), 64 tasks per repository (48 to train on, 16 held out), 8 samples per held-out task
 * (128 pairs for the sign test), iterations until the time budget (--minutes, 30) ends the run,
 * which evaluates its last iteration.
 */
export const TRANSFER_DEFAULTS: Partial<TrainConfig> = { ...DEMO_SETTINGS, maxTasks: 64, evalSamples: 8, evalEvery: 0, iterations: 1000 };

export interface TransferOptions {
  model: string;
  repos?: readonly string[];
  /** Skip the RL run: the starting policy's held-out figures only. */
  noRl?: boolean;
  /** RL wall-clock budget per repository, minutes: no iteration starts after it (default 30). */
  minutes?: number;
  /** Training settings over TRANSFER_DEFAULTS. */
  config?: Partial<TrainConfig>;
  /** The RL runs' advantage estimator (default `turnwise`, the run default). */
  estimator?: string;
  /** Seed of the tasks, their split and the held-out episodes (the runs' taskSeed); default 0. */
  seed?: number;
  /**
   * Seed of the RL runs alone (their `seed`: rollout draws, task order, minibatches); default
   * `seed`. Benches that differ only in it train on the same tasks and evaluate the same episodes.
   */
  rlSeed?: number;
  cacheDir?: string;
  mirror?: string;
  onProgress?: (m: string) => void;
  onEvent?: (e: RunEvent, repo: string) => void;
  signal?: AbortSignal;
}

/** Config fields the bench sets itself per repository (the seeds from --seed and --rl-seed). */
export const TRANSFER_CONTROLLED_FIELDS = [
  'workspace',
  'model',
  'taskSource',
  'tasksFile',
  'estimator',
  'maxMinutes',
  'seed',
  'taskSeed',
] as const;

/** The runs' settings before each repository's own: TRANSFER_DEFAULTS, --config, the seeds and the estimator. */
export function transferBaseConfig(o: Pick<TransferOptions, 'config' | 'seed' | 'rlSeed' | 'estimator'>): Partial<TrainConfig> {
  const seed = o.seed ?? 0;
  return { ...TRANSFER_DEFAULTS, ...o.config, seed: o.rlSeed ?? seed, taskSeed: seed, estimator: o.estimator ?? 'turnwise' };
}

export async function benchTransfer(o: TransferOptions): Promise<TransferResult> {
  const controlled = TRANSFER_CONTROLLED_FIELDS.filter((k) => o.config?.[k] !== undefined);
  if (controlled.length)
    throw new TurnwiseError(
      'invalid-input',
      `the transfer bench sets ${controlled.map((k) => JSON.stringify(k)).join(', ')} itself; its settings may not`,
      {
        hint: `remove those fields from --config${controlled.some((k) => k === 'seed' || k === 'taskSeed') ? ' (the seeds are --seed, of the tasks and held-out episodes, and --rl-seed, of the RL runs)' : ''}`,
      },
    );
  const repos = pickRepos(o.repos);
  const cacheDir = path.resolve(o.cacheDir ?? transferCacheDir());
  const seed = o.seed ?? 0;
  const minutes = o.minutes ?? 30;
  const base = transferBaseConfig(o);
  const iterations = o.noRl ? 0 : base.iterations!;
  // Checked before any download.
  resolveTrainConfig(
    { ...base, iterations, workspace: cacheDir, model: o.model, taskSource: 'file', tasksFile: 'tasks.jsonl' },
    'the transfer bench settings',
  );
  const log = o.onProgress ?? (() => undefined);
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const runsRoot = path.join(cacheDir, 'runs', stamp);
  fs.mkdirSync(runsRoot, { recursive: true });
  const model = await snapshotCheckpoint(o.model, path.join(runsRoot, 'start-model'), { optimizer: true });
  const out: TransferRepoResult[] = [];
  for (const repo of repos) {
    if (o.signal?.aborted) break;
    const t0 = Date.now();
    const res: TransferRepoResult = {
      name: repo.name,
      source: `Debian ${repo.debianSource} ${repo.version} (${repo.file})`,
      shape: repo.shape,
      tasks: 0,
      train_tasks: 0,
      heldout_tasks: 0,
      before: null,
      after: null,
      paired: null,
      rl_iterations: 0,
      run_dir: null,
      command_timeout_ms: 0,
      wall_s: 0,
    };
    out.push(res);
    try {
      const workspace = await fetchRepo(repo, { cacheDir, mirror: o.mirror, log });
      // Tasks per repository, seed and size, kept between benches: synthesis runs the suite per
      // mutant. The file name carries SYNTHESIS_VERSION, so tasks made by an older synthesis are made again.
      const tasksFile = path.join(
        cacheDir,
        'tasks',
        `${repo.name}-${repo.version}-seed${seed}-max${base.maxTasks}-v${SYNTHESIS_VERSION}.jsonl`,
      );
      if (!fs.existsSync(tasksFile)) {
        log(`${repo.name}: synthesizing up to ${base.maxTasks} one-token mutation tasks`);
        const pool = await connectRunPool(`bench-transfer-${process.pid}`, { ...TRAIN_DEFAULTS, ...base });
        try {
          const r = await synthesizeMutationTasks({
            workspace,
            pool,
            seed,
            max: base.maxTasks,
            operators: [...FIXABLE_OPERATORS] as MutationOperator[],
          });
          if (r.tasks.length < 2)
            throw new TurnwiseError('invalid-input', `only ${r.tasks.length} task(s) survived validation in ${repo.name}`, {
              hint: 'its tests may not run in the sandbox (see `turnwise tasks synth --workspace ' + workspace + '`)',
            });
          fs.mkdirSync(path.dirname(tasksFile), { recursive: true });
          writeTaskFile(tasksFile, r.tasks);
        } finally {
          await pool.close();
        }
      }
      res.tasks = readTaskFile(tasksFile).length;
      // The RL budget is the run's own (maxMinutes): no iteration starts that would pass it, and
      // the last one is evaluated, so "after" is the end of RL.
      const config = resolveTrainConfig(
        { ...repoSettings(repo, base, o.config), iterations, maxMinutes: minutes, workspace, model, taskSource: 'file', tasksFile },
        'the transfer bench settings',
      );
      res.command_timeout_ms = config.commandTimeoutMs;
      log(
        `${repo.name}: ${res.tasks} tasks; ${iterations ? `evaluating, then RL for up to ${iterations} iterations or ${minutes} min` : 'evaluating the starting policy (no RL)'}`,
      );
      const r = await trainRun({
        config,
        runsRoot,
        name: `transfer-${repo.name}`,
        signal: o.signal,
        onEvent: (e) => {
          o.onEvent?.(e, repo.name);
          if (e.type === 'run-started') {
            res.train_tasks = e.trainTasks;
            res.heldout_tasks = e.heldoutTasks;
          }
        },
      });
      res.run_dir = r.runDir;
      const run = RunDir.open(r.runDir);
      if (r.state === 'out-of-time')
        log(`${repo.name}: RL budget of ${minutes} min reached after iteration ${run.lastCompleteIteration()}`);
      const evals = r.metrics.filter((m) => typeof m['heldout/resolved'] === 'number').map((m) => m.iteration);
      if (evals.length) {
        const first = run.readTrajectories(evals[0], 'heldout');
        res.before = heldoutScore(first, res.heldout_tasks);
        const lastIt = evals[evals.length - 1];
        if (lastIt > 0) {
          const last = run.readTrajectories(lastIt, 'heldout');
          res.after = heldoutScore(last, res.heldout_tasks);
          const c = compareEvaluations(first, last);
          res.paired = { greedy: c.greedy, sampled: c.sampled };
          res.rl_iterations = lastIt;
        }
      }
    } catch (e) {
      if (o.signal?.aborted) throw e;
      res.error = e instanceof Error ? e.message : String(e);
      log(`${repo.name}: ${res.error}`);
    } finally {
      res.wall_s = Math.round((Date.now() - t0) / 100) / 10;
    }
  }
  const withAfter = out.filter((r) => r.after);
  return {
    schema: 'turnwise/bench-transfer@1',
    model: o.model,
    rl: !o.noRl,
    estimator: base.estimator!,
    minutes,
    iterations,
    samples: base.evalSamples!,
    seed,
    rl_seed: base.seed!,
    cache_dir: cacheDir,
    repos: out,
    totals: {
      tasks: out.reduce((s, r) => s + r.tasks, 0),
      heldout_tasks: out.reduce((s, r) => s + r.heldout_tasks, 0),
      before_tasks_resolved: out.reduce((s, r) => s + (r.before?.tasks_resolved ?? 0), 0),
      after_tasks_resolved: withAfter.length ? withAfter.reduce((s, r) => s + r.after!.tasks_resolved, 0) : null,
    },
    config: { ...base, iterations },
  };
}
