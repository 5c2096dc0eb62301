// `turnwise train | eval | warmstart | demo`: the training run and its companions. Flags are
// parsed here; the work is in src/train. With --json, train and demo print one RunEvent per line
// (what the editor reads); otherwise a progress line and a table row per iteration.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError } from '../../core/errors';
import { ESTIMATOR_NAMES } from '../../credit/names';
import { assertWritableOutput } from '../../core/fs';
import type { RunEvent } from '../../core/events';
import { RUNS_DIR } from '../../core/run';
import { allEpisodesFailed, readTrajectories } from '../../core/trajectory';
import type { Task, Trajectory } from '../../core/schema';
import { readTaskFile } from '../../tasks/taskfile';
import { assertWorkspaceHoldsTasks } from '../../tasks/origin';
import { detectRunner } from '../../tasks/runners';
import { passAtKT, passAtKTCorners, type PassAtKT } from '../../eval/pass-at-k';
import { DEMO_SETTINGS, readConfigFile, resolveTrainConfig, TRAIN_DEFAULTS, type TrainConfig } from '../../train/config';
import { embeddedModelDir } from '../../train/embedded';
import { evaluateGreedyThenSampled, runEvalTarget, summarizeEval } from '../../train/evaluate';
import { openEndpointRig, openRig } from '../../train/rig';
import { trainRun } from '../../train/run';
import { compareEvaluations, episodeKind, type EvalComparison, type PairedChange } from '../../eval/compare';
import { checkpointModel, endpointModel, evalResultsHeader, readEvalResults, writeEvalResults, type EvalModel } from '../../eval/results';
import { runEvalReport } from './eval-report';
import { warmstart } from '../../warmstart/run';
import { resolveWarmstartConfig, WARMSTART_RANGES, type NumberSetting, type WarmstartConfig, type WarmstartLogRow, type WarmstartSettings } from '../../warmstart/config';
import { startDir } from '../../warmstart/record';
import { workspaceCasesFor } from '../../warmstart/workspace-demonstrations';
import type { FixCase } from '../../demonstrations/generated';
import { warmstartEpisodes } from '../../warmstart/episodes';
import { parseLoraConfig, type LoraConfig } from '../../policy/files/lora';
import { SandboxPool, disposeAllSandboxes } from '../../sandbox';
import { disposeAllPolicyWorkers } from '../../policy/worker';
import { flagOptions, numberInRange, requireString, seedOption, UsageError, valueOptions, type CliCommand, type CliIO, type OptionSpec, type ParsedArgs } from '../command';
import { demoWorkspace, PROVIDER_USAGE } from './options';

/**
 * SIGINT/SIGTERM abort the run (cleanly: containers removed, partial iteration discarded). A
 * second signal does not wait for that: it removes this process's sandboxes (a few seconds at
 * most) and exits; the run directory is marked stopped on exit (trainRun). A closed stdout (the
 * editor that started us went away) must not crash the cleanup either.
 */
function stopOnSignals(io: CliIO): { signal: AbortSignal; dispose: () => void } {
  const ac = new AbortController();
  let count = 0;
  const ignore = () => undefined;
  process.stdout.on('error', ignore);
  process.stderr.on('error', ignore);
  const onSig = (sig: NodeJS.Signals) => {
    count++;
    if (count === 1) {
      io.err(`\nturnwise: ${sig}: stopping after cleanup (containers removed, the unfinished iteration discarded); press Ctrl-C again to force`);
      ac.abort();
    } else if (count === 2) {
      // Policy workers too: process.exit() mid-run would end their threads inside an ONNX
      // Runtime call and abort the process instead of exiting 130.
      void Promise.all([disposeAllSandboxes(3000), disposeAllPolicyWorkers(3000)]).finally(() => process.exit(130));
    } else {
      process.exit(130);
    }
  };
  process.on('SIGINT', onSig);
  process.on('SIGTERM', onSig);
  return {
    signal: ac.signal,
    dispose: () => {
      process.off('SIGINT', onSig);
      process.off('SIGTERM', onSig);
    },
  };
}

const fmt = (v: unknown, digits = 3) => (typeof v === 'number' && Number.isFinite(v) ? v.toFixed(digits) : '—');

/** PASS@(k,T) at k = 1 and the largest k, at the turn limit: `k=1 T=6 0.250  k=4 T=6 0.500`. */
const passCorners = (p: PassAtKT) => passAtKTCorners(p).map((c) => `k=${c.k} T=${c.T} ${fmt(c.value)}`).join('  ');

/** Human output of run events: a progress line on a terminal, a table row per iteration. */
export function humanEventPrinter(io: CliIO): (e: RunEvent) => void {
  const tty = !!process.stderr.isTTY;
  let headerDone = false;
  let lastPhase = '';
  // PASS@(k,T) of the first and the latest held-out evaluation with samples, for the closing summary.
  let firstPass: { iteration: number; p: PassAtKT } | undefined;
  let lastPass: { iteration: number; p: PassAtKT } | undefined;
  const header = () => {
    if (headerDone) return;
    headerDone = true;
    io.out(`${'iter'.padStart(4)}  ${'reward'.padStart(7)}  ${'pass'.padStart(6)}  ${'resolved'.padStart(8)}  ${'held-out'.padStart(8)}  ${'sampled'.padStart(7)}  ${'turns'.padStart(5)}  ${'time'.padStart(6)}`);
  };
  return (e) => {
    switch (e.type) {
      case 'run-started':
        io.err(`run ${e.runId}${e.resumedFrom !== undefined ? ` (resumed after iteration ${e.resumedFrom})` : ''}: ${e.trainTasks} train task(s), ${e.heldoutTasks} held out, ${e.iterations} iteration(s)\n  ${e.runDir}`);
        break;
      case 'phase':
        if (tty) process.stderr.write(`\r\x1b[2Kiteration ${e.iteration} ${e.phase}${e.total ? ` ${e.done ?? 0}/${e.total}` : ''}${e.detail ? ` ${e.detail}` : ''}`.slice(0, 110));
        else if (`${e.iteration}:${e.phase}` !== lastPhase || (e.total !== undefined && e.done === e.total)) {
          // Without a terminal: one line when a phase starts and one when it completes.
          lastPhase = `${e.iteration}:${e.phase}`;
          io.err(`iteration ${e.iteration}: ${e.phase}${e.total ? ` ${e.done ?? 0}/${e.total}` : ''}${e.detail ? ` (${e.detail})` : ''}`);
        }
        break;
      case 'iteration-finished': {
        if (tty) process.stderr.write('\r\x1b[2K');
        header();
        const m = e.metrics;
        io.out(`${String(e.iteration).padStart(4)}  ${fmt(m['reward/mean']).padStart(7)}  ${fmt(m['tests/pass_rate']).padStart(6)}  ${fmt(m.resolved).padStart(8)}  ${fmt(m['heldout/resolved']).padStart(8)}  ${fmt(m['heldout/sampled/resolved']).padStart(7)}  ${fmt(m['turns/mean'], 1).padStart(5)}  ${fmt(m['time/iteration_s'] ?? m['time/eval_s'], 0).padStart(5)}s`);
        if (e.pass_at_k_t && Object.keys(e.pass_at_k_t).length) {
          io.out(`      held-out PASS@(k,T): ${passCorners(e.pass_at_k_t)}`);
          firstPass ??= { iteration: e.iteration, p: e.pass_at_k_t };
          lastPass = { iteration: e.iteration, p: e.pass_at_k_t };
        }
        break;
      }
      case 'log':
        if (tty) process.stderr.write('\r\x1b[2K');
        io.err(`${e.level === 'warn' ? 'warning: ' : ''}${e.message}`);
        break;
      case 'run-finished':
        if (firstPass && lastPass && lastPass.iteration !== firstPass.iteration) {
          io.out(`held-out PASS@(k,T), iteration ${firstPass.iteration} → ${lastPass.iteration}: ${passCorners(firstPass.p)} → ${passCorners(lastPass.p)} (every k and T in --json: the iteration-finished events' pass_at_k_t)`);
        }
        io.err(`run finished: ${e.runDir}`);
        break;
      case 'run-stopped':
        io.err(`run stopped (${e.reason}); iterations up to ${e.lastCompleteIteration} are kept (resume with --resume)`);
        break;
      default:
        break;
    }
  };
}

/**
 * The config file a run reads: --config FILE, else the turnwise.json of the workspace folder
 * (--workspace DIR, else the current folder) when there is one. The editor reads the same file:
 * the workspace's turnwise.json. Flags override its fields.
 */
export function configFileFor(values: ParsedArgs['values']): string | undefined {
  if (typeof values.config === 'string') return values.config;
  const inWorkspace = path.join(typeof values.workspace === 'string' ? path.resolve(values.workspace) : process.cwd(), 'turnwise.json');
  return fs.existsSync(inWorkspace) ? inWorkspace : undefined;
}

function configFromArgs(args: ParsedArgs): TrainConfig {
  const file = configFileFor(args.values);
  const given: Record<string, unknown> = file ? readConfigFile(file) : {};
  const v = args.values;
  if (typeof v.workspace === 'string') given.workspace = path.resolve(v.workspace);
  if (typeof v.tasks === 'string') {
    given.taskSource = 'file';
    given.tasksFile = path.resolve(v.tasks);
  }
  if (typeof v['task-source'] === 'string') given.taskSource = v['task-source'];
  if (typeof v.model === 'string') given.model = path.resolve(v.model);
  if (typeof v.estimator === 'string') given.estimator = v.estimator;
  if (v.iterations !== undefined) given.iterations = numberInRange(args, 'iterations', 1, { min: 0, integer: true });
  if (v['group-size'] !== undefined) given.groupSize = numberInRange(args, 'group-size', 4, { min: 1, integer: true });
  if (v['max-minutes'] !== undefined) given.maxMinutes = numberInRange(args, 'max-minutes', 0, { min: 0 });
  if (v.seed !== undefined) given.seed = seedOption(args);
  if (typeof v.provider === 'string') given.executionProvider = v.provider;
  const c = resolveTrainConfig(given, file ?? 'the flags');
  c.workspace = path.resolve(c.workspace);
  return c;
}

const TRAIN_OPTIONS = valueOptions('config', 'workspace', 'resume', 'runs', 'tasks', 'task-source', 'model', 'estimator', 'iterations', 'group-size', 'max-minutes', 'seed', 'provider');

/** The train flags a resume takes: the run, where runs are, and how many iterations to go to. */
const RESUME_OPTIONS = new Set(['resume', 'runs', 'iterations']);

/** `--max-action-tokens N`: the reply limit of every episode of an evaluation, local model or endpoint (the config's range). */
function maxActionTokensFlag(args: ParsedArgs): { maxActionTokens?: number } {
  return args.values['max-action-tokens'] !== undefined ? { maxActionTokens: numberInRange(args, 'max-action-tokens', TRAIN_DEFAULTS.maxActionTokens, { min: 8, max: 512, integer: true }) } : {};
}

/**
 * Where a command's runs are: `--runs DIR` when given; a new run of `train` in its workspace's
 * `.turnwise/runs`, whatever the current folder; the demo's (whose workspace is part of the
 * installed package) and a resume's in the current folder's.
 */
export function runsRootFor(o: { runs?: unknown; workspace?: string; resume?: unknown; demo?: boolean }, cwd = process.cwd()): string {
  if (typeof o.runs === 'string') return path.resolve(cwd, o.runs);
  if (o.workspace && !o.demo && o.resume === undefined) return path.resolve(cwd, o.workspace, RUNS_DIR);
  return path.resolve(cwd, RUNS_DIR);
}

async function runTraining(c: TrainConfig, args: ParsedArgs, io: CliIO, name?: string): Promise<number> {
  const runsRoot = runsRootFor({ runs: args.values.runs, workspace: c.workspace, resume: args.values.resume, demo: name === 'demo' });
  const { signal, dispose } = stopOnSignals(io);
  const print = io.json ? (e: RunEvent) => io.out(JSON.stringify(e)) : humanEventPrinter(io);
  try {
    const resume = typeof args.values.resume === 'string' ? args.values.resume : undefined;
    const resumeIterations = resume && args.values.iterations !== undefined ? numberInRange(args, 'iterations', 1, { min: 0, integer: true }) : undefined;
    const r = await trainRun({ config: c, runsRoot, resume, resumeIterations, signal, onEvent: print, name });
    return r.state === 'stopped' ? 130 : 0;
  } finally {
    dispose();
  }
}

export const trainCommand: CliCommand = {
  name: 'train',
  summary: 'a training run: tasks from the workspace, rollouts in sandboxes, advantages, policy updates, held-out evaluation',
  usage: `[--config turnwise.json] [--workspace DIR] [--resume RUN] [--runs DIR] [--tasks FILE | --task-source mutation|failing-tests] [--model DIR] [--estimator ${ESTIMATOR_NAMES.join('|')}] [--iterations N] [--group-size G] [--max-minutes M] [--seed S] ${PROVIDER_USAGE}`,
  options: TRAIN_OPTIONS,
  async run(args, io) {
    if (args.values.resume !== undefined) {
      // A resume continues the run as it was started; only its length can change (--iterations).
      const fixed = Object.keys(TRAIN_OPTIONS).filter((k) => !RESUME_OPTIONS.has(k) && args.values[k] !== undefined);
      if (fixed.length) {
        throw new UsageError(
          `--resume continues a run with its own settings, so it cannot honour ${fixed.map((k) => `--${k}`).join(', ')} (fixed when the run started); only --iterations N (train it further) and --runs go with it. For other settings start a new run, e.g. from one of its checkpoints: --model RUN/checkpoints/N`,
        );
      }
    }
    const c = args.values.resume !== undefined ? resolveTrainConfig({}) : configFromArgs(args);
    return runTraining(c, args, io);
  },
};

/** The demo's settings (src/train/config.ts, shared with `bench learn`). */
export const DEMO_CONFIG = DEMO_SETTINGS;

export const demoCommand: CliCommand = {
  name: 'demo',
  summary: 'a training run on the bundled demo workspace from the embedded warm-started policy, with held-out evaluation',
  usage: '[--iterations N] [--quick] [--estimator NAME] [--runs DIR] [--seed S]',
  options: { ...valueOptions('iterations', 'estimator', 'runs', 'seed'), ...flagOptions('quick') },
  async run(args, io) {
    const quick = args.values.quick === true;
    const given: Record<string, unknown> = {
      ...DEMO_CONFIG,
      workspace: demoWorkspace(),
      ...(quick ? { iterations: 1, maxTasks: 8, tasksPerIteration: 2, groupSize: 2, maxTurns: 4, concurrency: 4, evalSamples: 0 } : {}),
    };
    if (args.values.iterations !== undefined) given.iterations = numberInRange(args, 'iterations', 3, { min: 0, integer: true });
    if (typeof args.values.estimator === 'string') given.estimator = args.values.estimator;
    if (args.values.seed !== undefined) given.seed = seedOption(args);
    const c = resolveTrainConfig(given, 'the demo settings');
    if (!io.json) io.err(`demo: workspace ${c.workspace}, policy ${embeddedModelDir()}, estimator ${c.estimator}, ${c.iterations} iteration(s) of ${c.tasksPerIteration} task(s) × ${c.groupSize} rollouts`);
    return runTraining(c, args, io, 'demo');
  },
};

const EVAL_OPTIONS = {
  ...valueOptions('tasks', 'model', 'workspace', 'max-turns', 'concurrency', 'samples', 'seed', 'provider', 'out', 'from', 'compare', 'run', 'split', 'iteration', 'runs', 'endpoint', 'endpoint-model', 'endpoint-key-env', 'max-action-tokens'),
  ...flagOptions('report', 'intersect'),
};

export const evalCommand: CliCommand = {
  name: 'eval',
  summary: 'evaluate a policy on a task file: resolved rate (pass@1 of the greedy episode), mean turns, format-error rate, PASS@(k,T), per task; --out writes a results file; --report compares results files of several models',
  usage: '--tasks FILE [--model DIR | --endpoint URL [--endpoint-model NAME] [--endpoint-key-env VAR]] [--workspace DIR] [--max-turns N] | --run RUN [--split heldout|train] [--iteration N | --model DIR | --endpoint URL …] [--workspace DIR | --runs DIR]; then [--max-action-tokens N] [--concurrency N] [--samples K] [--seed S] [--out FILE] [--compare EARLIER.jsonl]; or --from FILE --compare EARLIER.jsonl; or --report A.jsonl B.jsonl … [--intersect]',
  options: EVAL_OPTIONS,
  allowPositionals: true,
  async run(args, io) {
    // --report A B …: results files of several models compared (no sandbox).
    if (args.values.report === true) return runEvalReport(args, io, Object.keys(EVAL_OPTIONS));
    if (args.positionals.length) throw new UsageError(`unexpected argument ${JSON.stringify(args.positionals[0])}; results files to compare go after --report`);
    if (args.values.intersect !== undefined) throw new UsageError('--intersect goes with --report');
    // --compare: an earlier evaluation's --out file, read (and checked) before any sandbox starts.
    const earlier = typeof args.values.compare === 'string' ? readTrajectories(args.values.compare) : undefined;
    if (earlier && typeof args.values.out === 'string' && path.resolve(args.values.out) === path.resolve(String(args.values.compare))) {
      throw new UsageError('--out would overwrite the --compare file: the evaluation compared against would be lost; write the new episodes to another file');
    }
    let episodes: EvalEpisodes;
    if (typeof args.values.from === 'string') {
      // --from: the episodes of an evaluation already run (its --out file), summarized again.
      const runFlags = Object.keys(EVAL_OPTIONS).filter((k) => k !== 'from' && k !== 'compare' && args.values[k] !== undefined);
      if (runFlags.length > 0) throw new UsageError(`--from reads an evaluation already run; it takes no ${runFlags.map((k) => `--${k}`).join(', ')}`);
      const read = readEvalResults(args.values.from);
      const all = read.trajectories;
      const greedy = all.filter((t) => episodeKind(t) === 'greedy');
      const sampled = all.filter((t) => episodeKind(t) === 'sampled');
      const perTask = new Map<string, number>();
      for (const t of sampled) perTask.set(t.taskId, (perTask.get(t.taskId) ?? 0) + 1);
      episodes = { greedy, sampled, model: read.header ? read.model.label : [...new Set(all.map((t) => t.checkpoint))].join(', '), taskCount: new Set(all.map((t) => t.taskId)).size, samples: Math.max(0, ...perTask.values()) };
    } else {
      const ran = await runEvaluation(args, io);
      if (ran === 130) return 130;
      episodes = ran;
    }
    const { greedy, sampled: sampledEpisodes, model, taskCount, samples, out } = episodes;
    const failedAll = allEpisodesFailed([...greedy, ...sampledEpisodes], out ? `the episodes are in ${out}; the reasons above say what to fix (\`turnwise doctor\` checks Docker and the images)` : 'the reasons above say what to fix (`turnwise doctor` checks Docker and the images; --out FILE keeps the episodes)');
    if (failedAll) throw failedAll;
    const s = summarizeEval(greedy);
    // PASS@(k,T) over the sampled episodes, T up to the turn limit they ran under.
    const passKT = sampledEpisodes.length > 0 ? passAtKT(sampledEpisodes, Math.max(...sampledEpisodes.map((t) => t.reward.maxTurns))) : undefined;
    const sampled = sampledEpisodes.length > 0 ? { ...summarizeEval(sampledEpisodes), pass_at_k_t: passKT } : undefined;
    const compare = earlier ? compareEvaluations(earlier, [...greedy, ...sampledEpisodes]) : undefined;
    if (io.json) {
      io.out(JSON.stringify({ ok: true, model, taskCount, ...(out ? { out } : {}), ...s, ...(sampled ? { sampled } : {}), ...(compare ? { compare: { with: path.resolve(String(args.values.compare)), ...compare } } : {}) }, null, 2));
      return 0;
    }
    io.out(`resolved ${fmt(s.resolved)}  pass rate ${fmt(s.pass_rate)}  turns ${fmt(s['turns/mean'], 1)}  format errors ${fmt(s.format_error_rate)}${s.failed ? `  (${s.failed} episode(s) failed)` : ''}${s.tampered ? `  (${s.tampered} episode(s) tampered with the tests: reward 0)` : ''}`);
    if (sampled) io.out(`sampled (${samples} per task): resolved ${fmt(sampled.resolved)}  pass rate ${fmt(sampled.pass_rate)}  turns ${fmt(sampled['turns/mean'], 1)}  format errors ${fmt(sampled.format_error_rate)}  distinct paths ${fmt(sampled.distinct)}`);
    if (passKT && Object.keys(passKT).length) {
      // PASS@(k,T) for k = 1, the largest k and the largest T: the rows a reader compares first.
      const ks = Object.keys(passKT);
      const Ts = Object.keys(passKT[ks[0]]);
      const last = Ts[Ts.length - 1];
      io.out(`PASS@(k,T): k=1 T=${last} ${fmt(passKT['1'][last])}  k=${ks[ks.length - 1]} T=${last} ${fmt(passKT[ks[ks.length - 1]][last])}  k=${ks[ks.length - 1]} T=1 ${fmt(passKT[ks[ks.length - 1]]['1'])} (all of them in --json: sampled.pass_at_k_t)`);
    }
    if (out) io.out(`episodes written to ${out}`);
    for (const t of s.tasks) io.out(`  ${t.resolved ? '✓' : '✗'} ${t.taskId}  pass ${fmt(t.passRate, 2)}  turns ${t.turns}${t.formatErrors ? `  format errors ${t.formatErrors}` : ''}${t.failure ? `  failed: ${t.failure}` : ''}`);
    if (compare) printComparison(io, String(args.values.compare), compare);
    return 0;
  },
};

/** An evaluation's episodes, run now or read back (`--from`), and what they were run with. */
interface EvalEpisodes {
  greedy: Trajectory[];
  sampled: Trajectory[];
  model: string;
  taskCount: number;
  /** Sampled episodes per task. */
  samples: number;
  out?: string;
}

/** Runs the evaluation `turnwise eval --tasks` (or `--run`) asks for; 130 when stopped by a signal. */
async function runEvaluation(args: ParsedArgs, io: CliIO): Promise<EvalEpisodes | 130> {
  // --out: the results file: a header line (the model, tasks, seeds, each episode's numbers,
  // PASS@(k,T)), then the episodes themselves (trajectory lines, docs/design.md "On-disk formats").
  const out = typeof args.values.out === 'string' ? path.resolve(args.values.out) : undefined;
  if (out) assertWritableOutput(out);
  // --samples K: K episodes per task sampled at temperature 1 besides the greedy one, seeded by
  // (seed, task, k) only, so two checkpoints evaluated with the same seed draw the same numbers.
  const samples = numberInRange(args, 'samples', 0, { min: 0, max: 64, integer: true });
  const provider = typeof args.values.provider === 'string' ? { executionProvider: args.values.provider } : {};
  let tasks: Task[];
  let tasksSource: string;
  let model: string;
  let c: TrainConfig;
  if (typeof args.values.run === 'string') {
    // --run: a run's own tasks (one split), checkpoint and settings.
    const clash = ['tasks', 'max-turns'].filter((k) => args.values[k] !== undefined);
    if (clash.length > 0) throw new UsageError(`--run evaluates with the run's own tasks, workspace and settings; it takes no ${clash.map((k) => `--${k}`).join(', ')}`);
    if (args.values.model !== undefined && args.values.iteration !== undefined) throw new UsageError('give --iteration N (one of the run\'s checkpoints) or --model DIR, not both');
    const split = args.values.split ?? 'heldout';
    if (split !== 'heldout' && split !== 'train') throw new UsageError(`--split must be heldout or train, got ${JSON.stringify(split)}`);
    const iteration = args.values.iteration !== undefined ? numberInRange(args, 'iteration', 0, { min: 0, integer: true }) : undefined;
    // A run named by its id is looked for in --runs, else in --workspace DIR's runs, else in the current folder's.
    const runsRoot = runsRootFor({ runs: args.values.runs, workspace: typeof args.values.workspace === 'string' ? args.values.workspace : undefined });
    const target = runEvalTarget(args.values.run, { runsRoot, split, iteration });
    tasks = target.tasks;
    tasksSource = target.run.file('tasks.jsonl');
    model = typeof args.values.model === 'string' ? path.resolve(args.values.model) : target.checkpoint;
    c = resolveTrainConfig({
      ...target.config,
      ...maxActionTokensFlag(args),
      concurrency: numberInRange(args, 'concurrency', target.config.concurrency, { min: 1, max: 64, integer: true }),
      seed: args.values.seed !== undefined ? seedOption(args) : target.config.seed,
      ...provider,
    });
    if (!io.json) io.err(`eval: ${tasks.length} ${split} task(s) of ${target.run.runId}, ${typeof args.values.model === 'string' ? model : `checkpoint ${target.iteration}`}, seed ${c.seed}`);
    // A run whose status says running while its process is gone was killed: say so, it is not running.
    if (!io.json && target.state === 'interrupted') io.err(`  (${target.run.runId} was interrupted: its status says running, but its process is gone; \`turnwise train --resume ${target.run.runId}\` continues it)`);
  } else {
    for (const k of ['split', 'iteration', 'runs']) if (args.values[k] !== undefined) throw new UsageError(`--${k} goes with --run RUN`);
    const tasksFile = requireString(args, 'tasks');
    tasks = readTaskFile(tasksFile);
    tasksSource = path.resolve(tasksFile);
    if (tasks.length === 0) throw new TurnwiseError('invalid-input', `${tasksFile} holds no task`, { hint: 'make tasks with `turnwise tasks synth`' });
    const workspace = path.resolve(typeof args.values.workspace === 'string' ? args.values.workspace : '.');
    model = typeof args.values.model === 'string' ? path.resolve(args.values.model) : embeddedModelDir();
    c = resolveTrainConfig({
      workspace,
      maxTurns: numberInRange(args, 'max-turns', TRAIN_DEFAULTS.maxTurns, { min: 1, max: 100, integer: true }),
      ...maxActionTokensFlag(args),
      concurrency: numberInRange(args, 'concurrency', 4, { min: 1, max: 64, integer: true }),
      seed: seedOption(args),
      ...provider,
    });
  }
  const workspace = c.workspace;
  assertWorkspaceHoldsTasks(tasks, workspace, tasksSource);
  const runner = detectRunner(workspace, c.testCommand ? { command: c.testCommand } : undefined);
  // --endpoint: an OpenAI-compatible server is the agent (its key read from the variable named).
  const endpoint = typeof args.values.endpoint === 'string' ? args.values.endpoint : undefined;
  for (const k of ['endpoint-model', 'endpoint-key-env']) if (args.values[k] !== undefined && !endpoint) throw new UsageError(`--${k} goes with --endpoint URL`);
  if (endpoint && args.values.model !== undefined) throw new UsageError('give --model DIR (a local model) or --endpoint URL (a server), not both');
  if (endpoint && args.values.provider !== undefined) throw new UsageError('--provider is for a local model; the server decides where its model runs');
  const { signal, dispose } = stopOnSignals(io);
  const rig = endpoint
    ? await openEndpointRig({
        runId: `eval-${process.pid}`,
        workspace,
        language: runner.language,
        endpoint: {
          url: endpoint,
          ...(typeof args.values['endpoint-model'] === 'string' ? { model: args.values['endpoint-model'] } : {}),
          ...(typeof args.values['endpoint-key-env'] === 'string' ? { keyEnv: args.values['endpoint-key-env'] } : {}),
          // The same reply limit as a local model's (maxActionTokens), so a model served and run locally plays the same episodes.
          maxTokens: c.maxActionTokens,
          maxInFlight: c.concurrency,
        },
        config: c,
      })
    : await openRig({ runId: `eval-${process.pid}`, workspace, language: runner.language, checkpoint: model, config: c, onLog: (m) => io.err(`warning: ${m}`) });
  // Who is evaluated, for the results file: an endpoint by its base URL (no credentials) and model.
  const identity: EvalModel = endpoint
    ? endpointModel(endpoint, (rig as Awaited<ReturnType<typeof openEndpointRig>>).modelName, typeof args.values['endpoint-key-env'] === 'string' ? args.values['endpoint-key-env'] : undefined)
    : checkpointModel(model);
  if (identity.kind === 'endpoint') model = `${identity.url} (${identity.model})`;
  const results = (trajectories: Trajectory[], complete: boolean) =>
    writeEvalResults(out!, evalResultsHeader({ model: identity, tasks, tasksSource, seed: c.seed, samples, maxTurns: c.maxTurns, maxActionTokens: c.maxActionTokens, sampling: { temperature: c.temperature, topP: c.topP }, trajectories, complete }), trajectories);
  try {
    let done = 0;
    const total = tasks.length * (1 + samples);
    // Episodes that finished before a stop signal: what a stopped evaluation keeps in --out.
    const finished: Trajectory[] = [];
    const onEpisode = (t: Trajectory) => {
      if (!signal.aborted) finished.push(t);
      if (!io.json) io.err(`  ${++done}/${total} episodes`);
    };
    const stopped = (): 130 => {
      if (out && finished.length) results(finished, false);
      io.err(`eval stopped: ${finished.length} of ${total} episodes had finished${out && finished.length ? `; they are in ${out}` : ''}`);
      return 130;
    };
    const res = await evaluateGreedyThenSampled(rig, tasks, { iteration: 0, seed: c.seed, config: c, checkpoint: model, signal, onEpisode, samples });
    if (!res) return stopped();
    if (out) results([...res.greedy, ...res.sampled], true);
    return { greedy: res.greedy, sampled: res.sampled, model, taskCount: tasks.length, samples, ...(out ? { out } : {}) };
  } finally {
    dispose();
    await rig.close();
  }
}

const signed = (p: PairedChange) => `+${p.gained} −${p.lost}${p.p_value === null ? '' : ` (p ${p.p_value < 0.001 ? p.p_value.toExponential(1) : fmt(p.p_value, 3)})`}`;

function printComparison(io: CliIO, earlierFile: string, c: EvalComparison): void {
  io.out(`compared with ${earlierFile}, episode by episode (same task and seed):`);
  for (const kind of ['greedy', 'sampled'] as const) {
    const p = c[kind];
    if (p.pairs > 0) io.out(`  ${kind.padEnd(7)} ${String(p.pairs).padStart(4)} pairs  ${signed(p)}`);
  }
  if (c.greedy.pairs + c.sampled.pairs === 0) io.out('  no episode has a twin: evaluate the same tasks with the same --seed (and --samples) to compare');
  for (const t of c.tasks) if (t.gained + t.lost > 0) io.out(`    ${t.taskId} ${t.kind.padEnd(7)} ${t.before}/${t.pairs} → ${t.after}/${t.pairs}  +${t.gained} −${t.lost}`);
  if (c.unpaired.before + c.unpaired.after > 0) io.out(`  unpaired (no twin, or failed): ${c.unpaired.before} earlier, ${c.unpaired.after} now`);
  if (c.cut_short.before + c.cut_short.after > 0) {
    io.out(`  warning: tw-suspects was cut short by its time guard ${c.cut_short.before} time(s) earlier and ${c.cut_short.after} now: those answers depend on the machine's load; compare evaluations run on an idle machine`);
  }
}

/**
 * --lora SPEC: a LoRA block as the run config's `lora` takes it: a JSON object, a file holding
 * one, or PEFT fields as `r=16,lora_alpha=32,target_modules=q_proj+v_proj`.
 */
export function loraOption(spec: string): LoraConfig {
  let raw: unknown;
  const text = fs.existsSync(spec) && fs.statSync(spec).isFile() ? fs.readFileSync(spec, 'utf8') : spec;
  if (/^\s*\{/.test(text)) {
    try {
      raw = JSON.parse(text);
    } catch (e) {
      throw new UsageError(`--lora: ${JSON.stringify(spec.slice(0, 80))} is not valid JSON (${(e as Error).message})`);
    }
  } else {
    const o: Record<string, unknown> = {};
    for (const part of text.split(',').map((x) => x.trim()).filter(Boolean)) {
      const m = /^([a-z_]+)=(.+)$/.exec(part);
      if (!m) throw new UsageError(`--lora takes a JSON object, a file holding one, or fields like r=16,lora_alpha=32,target_modules=all-linear; got ${JSON.stringify(part)}`);
      const [, k, v] = m;
      o[k] = k === 'target_modules' ? (v === 'all-linear' ? v : v.split('+')) : v === 'true' || v === 'false' ? v === 'true' : Number.isFinite(Number(v)) ? Number(v) : v;
    }
    raw = o;
  }
  return parseLoraConfig(raw, '--lora');
}

/** --curriculum START,END: the copy curriculum's share at the start and at the end of the schedule. */
function curriculumOption(text: string): Partial<WarmstartConfig> {
  const parts = text.split(',').map(Number);
  if (parts.length !== 2 || parts.some((x) => !(x >= 0 && x <= 1))) throw new UsageError(`--curriculum takes START,END shares in [0, 1], got ${JSON.stringify(text)}`);
  return { curriculumStart: parts[0], curriculumEnd: parts[1] };
}

/**
 * How a warm-start flag's text becomes its setting: `number`, a number in the setting's range
 * (WARMSTART_RANGES); `path`, resolved from the current folder; `paths`, a flag given once or more,
 * each value a path; `text` as it is; `switch`, a flag without a value (true when given); or a
 * function of the text that returns the settings it makes.
 */
type FlagRead = 'number' | 'path' | 'paths' | 'text' | 'switch' | ((text: string) => Partial<WarmstartConfig>);

/** A `turnwise warmstart` flag: the WarmstartConfig setting (or settings) it sets and how its text is read. */
export interface WarmstartFlag {
  flag: string;
  field: keyof WarmstartConfig | readonly (keyof WarmstartConfig)[];
  read: FlagRead;
}

/**
 * Every flag of `turnwise warmstart` but --force (whether --out may be replaced), a row each,
 * read in this order. The meaning and default of each setting are in src/warmstart/config.ts
 * (and docs/configuration.md, "Warm start").
 */
export const WARMSTART_FLAGS: readonly WarmstartFlag[] = [
  { flag: 'out', field: 'out', read: 'path' },
  { flag: 'steps', field: 'steps', read: 'number' },
  { flag: 'minutes', field: 'minutes', read: 'number' },
  { flag: 'seed', field: 'seed', read: 'number' },
  { flag: 'from', field: 'from', read: 'path' },
  { flag: 'model', field: 'model', read: 'path' },
  { flag: 'adapter', field: 'adapter', read: 'path' },
  { flag: 'lora', field: 'lora', read: (spec) => ({ lora: loraOption(spec) }) },
  { flag: 'rows', field: 'rows', read: 'number' },
  { flag: 'row-tokens', field: 'rowTokens', read: 'number' },
  { flag: 'peak-lr', field: 'peakLr', read: 'number' },
  { flag: 'curriculum', field: ['curriculumStart', 'curriculumEnd'], read: curriculumOption },
  { flag: 'episode-share', field: 'episodeShare', read: 'number' },
  { flag: 'workspace-share', field: 'workspaceShare', read: 'number' },
  { flag: 'loop-share', field: 'loopShare', read: 'number' },
  { flag: 'numbered-share', field: 'numberedShare', read: 'number' },
  { flag: 'cands-share', field: 'candsShare', read: 'number' },
  { flag: 'no-sed', field: 'noSed', read: 'switch' },
  { flag: 'real-share', field: 'realShare', read: 'number' },
  { flag: 'source-root', field: 'sourceRoots', read: 'paths' },
  { flag: 'max-action-tokens', field: 'maxActionTokens', read: 'number' },
  { flag: 'workspace', field: 'workspace', read: 'path' },
  { flag: 'max-tasks', field: 'maxTasks', read: 'number' },
  // The results files after --episodes: `--episodes A.jsonl B.jsonl` (the rest are positionals).
  { flag: 'episodes', field: 'episodeFiles', read: 'paths' },
  { flag: 'tasks', field: 'tasksFile', read: 'path' },
  { flag: 'run', field: 'run', read: 'text' },
  { flag: 'runs', field: 'runsRoot', read: 'path' },
  { flag: 'task-seed', field: 'taskSeed', read: 'number' },
  { flag: 'heldout-fraction', field: 'heldoutFraction', read: 'number' },
];

const WARMSTART_OPTIONS: OptionSpec = {
  ...Object.fromEntries(WARMSTART_FLAGS.map(({ flag, read }) => [flag, read === 'switch' ? { type: 'boolean' as const } : read === 'paths' ? { type: 'string' as const, multiple: true } : { type: 'string' as const }])),
  ...flagOptions('force'),
};

/** The settings the flags given set, each read and checked as its row says (the others are left to their defaults). */
export function warmstartSettingsFromFlags(args: ParsedArgs): WarmstartSettings {
  requireString(args, 'out');
  const given: Partial<WarmstartConfig> = {};
  const set = given as Record<string, unknown>;
  for (const { flag, field, read } of WARMSTART_FLAGS) {
    const v = args.values[flag];
    if (v === undefined) continue;
    if (typeof read === 'function') Object.assign(given, read(String(v)));
    // (No fallback is needed: the flag is given.)
    else if (read === 'number') set[field as string] = numberInRange(args, flag, NaN, WARMSTART_RANGES[field as NumberSetting]);
    else if (read === 'path') set[field as string] = path.resolve(String(v));
    else if (read === 'paths') set[field as string] = (v as string[]).map((p) => path.resolve(p));
    else if (read === 'switch') set[field as string] = true;
    else set[field as string] = String(v);
  }
  return given as WarmstartSettings;
}

export const warmstartCommand: CliCommand = {
  name: 'warmstart',
  summary: 'supervised warm start: generated fix episodes (+ a copy curriculum for turnwise-tiny), a workspace\'s recorded ones, or the resolved episodes of eval results; a chat model in its own chat format, LoRA when asked',
  usage:
    '--out DIR [--force] [--from DIR | --model DIR [--adapter DIR | --lora SPEC]] [--episodes FILE… (--tasks FILE [--task-seed S] [--heldout-fraction F] | --run RUN [--runs DIR]) [--episode-share F]] [--steps N] [--minutes M] [--seed S] [--workspace DIR [--task-seed S] [--max-tasks N] [--heldout-fraction F] [--workspace-share F]] [--real-share F [--source-root DIR…]] [--numbered-share F [--cands-share F] | --no-sed [--cands-share F]] [--peak-lr X] [--curriculum A,B] [--rows N] [--row-tokens T] [--loop-share F] [--max-action-tokens N]',
  options: WARMSTART_OPTIONS,
  // The results files after --episodes: `--episodes A.jsonl B.jsonl`.
  allowPositionals: true,
  async run(args, io) {
    // What the flags say; the warm start fills the rest with the defaults of its kind (a chat
    // model's differ from turnwise-tiny's), the sources below with theirs.
    const given = warmstartSettingsFromFlags(args);
    const out = given.out;
    const v = args.values;
    if (v['source-root'] !== undefined && v['real-share'] === undefined) throw new UsageError('--source-root goes with --real-share F');
    if (args.positionals.length && v.episodes === undefined) throw new UsageError(`unexpected argument ${JSON.stringify(args.positionals[0])}; results files go after --episodes`);
    if (args.positionals.length) given.episodeFiles = [...(given.episodeFiles ?? []), ...args.positionals.map((f) => path.resolve(f))];
    if (v.from !== undefined && (v.model !== undefined || v.adapter !== undefined || v.lora !== undefined)) {
      throw new UsageError('--from continues a warm-started checkpoint (an adapter folder included) as it is; --model DIR [--adapter DIR | --lora SPEC] starts from a model');
    }
    if (v.adapter !== undefined && v.model === undefined) throw new UsageError('--adapter DIR goes with --model BASE (or give the adapter folder alone as --from DIR)');
    if (v.adapter !== undefined && v.lora !== undefined) throw new UsageError('--adapter continues an adapter with its own settings; --lora starts a new one: give one of them');
    for (const k of ['tasks', 'run', 'runs', 'episode-share'] as const) if (v[k] !== undefined && !given.episodeFiles?.length) throw new UsageError(`--${k} goes with --episodes FILE…`);
    const adapterOut = v.lora !== undefined || v.adapter !== undefined || (given.from !== undefined && fs.existsSync(path.join(given.from, 'adapter_config.json')));
    const held = ['model.safetensors', 'adapter_model.safetensors'].find((f) => fs.existsSync(path.join(out, f)));
    if (fs.existsSync(out) && !held && fs.readdirSync(out).length > 0) {
      throw new TurnwiseError('invalid-input', `${out} exists and is not a checkpoint folder`, { hint: 'choose an empty or new --out folder' });
    }
    // A model there (its weights, warmstart.json's phase history, the log) is replaced only on request.
    if (held && v.force !== true) {
      throw new TurnwiseError('invalid-input', `${out} already holds a ${held.startsWith('adapter') ? 'LoRA adapter' : 'model'}; a warm start would replace it (${adapterOut ? 'adapter' : 'weights'}, warmstart.json, warmstart-log.jsonl)`, {
        hint: `to continue training it give --from ${out} --out NEW_DIR; to replace it give --force`,
      });
    }
    for (const k of ['from', 'model', 'adapter'] as const) {
      if (given[k] === out) throw new UsageError(`--out is the --${k} folder: the warm start would replace what it reads; give another --out`);
    }
    const c = resolveWarmstartConfig(given);
    // Resolved episodes of evaluation results, read and checked before any work.
    let episodes: { trajectory: Trajectory; task: Task }[] | undefined;
    if (c.episodeFiles.length) {
      const start = startDir(c);
      const sel = warmstartEpisodes({
        files: c.episodeFiles,
        ...(c.tasksFile !== undefined ? { tasksFile: c.tasksFile } : {}),
        ...(c.run !== undefined ? { run: c.run, runsRoot: path.resolve(c.runsRoot) } : {}),
        taskSeed: c.taskSeed,
        heldoutFraction: c.heldoutFraction,
        ...(start ? { startModel: start } : {}),
      });
      episodes = sel.kept;
      const tasks = new Set(sel.kept.map((k) => k.task.id)).size;
      io.err(`${sel.read} episode(s) read, ${sel.resolved} resolved: ${sel.kept.length} of ${tasks} task(s) are demonstrations${sel.heldOut ? `; ${sel.heldOut} of ${sel.heldOutTasks.length} held-out task(s) left out (held out for evaluation)` : ''}`);
    }
    const { signal, dispose } = stopOnSignals(io);
    let workspaceCases: FixCase[] | undefined;
    try {
      if (c.workspace !== undefined) {
        // Demonstrations from the workspace's own train split, recorded in sandboxes.
        const pool = await SandboxPool.connect({ run: `warmstart-${process.pid}` });
        try {
          // The workspace's tasks are synthesized and split as the training run will do it (its
          // --seed, 0 by default), not with this warm start's seed: with another split the
          // demonstrations would take tasks the run meant to hold out (the run then keeps them in
          // train, and its held-out set shrinks to what was never demonstrated).
          const r = await workspaceCasesFor({ workspace: c.workspace, seed: c.taskSeed, maxTasks: c.maxTasks, heldoutFraction: c.heldoutFraction, pool, onLog: (m) => io.err(m) });
          workspaceCases = r.cases;
        } finally {
          await pool.close();
        }
      }
      const r = await warmstart({
        ...given,
        ...(episodes ? { episodes } : {}),
        workspaceCases,
        signal,
        onLog: (row: WarmstartLogRow) =>
          io.json
            ? io.out(JSON.stringify(row))
            : io.err(`step ${row.step}  ${row.minutes.toFixed(1)} min  loss ${fmt(row.loss)}  action loss ${fmt(row.action_loss)}  ${Math.round(row.tokens_per_s)} tok/s${row.exact_fix !== undefined ? `  exact fix ${fmt(row.exact_fix, 2)}` : ''}${row.restores_line !== undefined ? `  restores ${fmt(row.restores_line, 2)}  right line ${fmt(row.right_line, 2)}` : ''}${row.episode_fix !== undefined ? `  episode fix ${fmt(row.episode_fix, 2)}` : ''}${row.numbered_episode_fix !== undefined ? `  numbered ${fmt(row.numbered_episode_fix, 2)}` : ''}${row.real_episode_fix !== undefined ? `  real source ${fmt(row.real_episode_fix, 2)}` : ''}`),
      });
      if (!io.json) io.out(`warm start: ${r.steps} steps, ${r.tokens} tokens in ${r.minutes.toFixed(1)} min → ${r.out}`);
      return signal.aborted ? 130 : 0;
    } finally {
      dispose();
    }
  },
};

export const trainCommands: CliCommand[] = [demoCommand, evalCommand, trainCommand, warmstartCommand];
