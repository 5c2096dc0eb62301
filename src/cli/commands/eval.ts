// `turnwise eval`: a policy (a local model or an endpoint) evaluated on a task file or a run's
// split, its episodes written with --out and compared with --compare; --report in eval-report.ts.
import * as path from 'node:path';
import { TurnwiseError } from '../../core/errors';
import { assertWritableOutput } from '../../core/fs';
import { allEpisodesFailed, readTrajectories } from '../../core/trajectory';
import type { Task, Trajectory } from '../../core/schema';
import { compareEvaluations, episodeKind, formatPaired, type EvalComparison } from '../../eval/compare';
import { passAtKT } from '../../eval/pass-at-k';
import { checkpointModel, endpointModel, evalResultsHeader, readEvalResults, writeEvalResults, type EvalModel } from '../../eval/results';
import { assertWorkspaceHoldsTasks } from '../../tasks/origin';
import { detectRunner } from '../../tasks/runners';
import { readTaskFile } from '../../tasks/taskfile';
import { resolveTrainConfig, TRAIN_DEFAULTS, type TrainConfig } from '../../train/config';
import { embeddedModelDir } from '../../train/embedded';
import { evaluateGreedyThenSampled, evaluationSeed, runEvalTarget, summarizeEval } from '../../train/evaluate';
import { openEndpointHarness, openHarness } from '../../train/harness';
import {
  flagOptions,
  numberInRange,
  requireString,
  refuseStrayFiles,
  seedOption,
  UsageError,
  valueOptions,
  type CliCommand,
  type CliIO,
  type ParsedArgs,
} from '../command';
import { fmt } from '../format';
import { stopOnSignals } from '../signals';
import { runsRootFor } from '../training-run';
import { runEvalReport } from './eval-report';
import { precisionOption } from './options';

/** `--max-action-tokens N`: the reply limit of every episode of an evaluation, local model or endpoint (the config's range). */
function maxActionTokensFlag(args: ParsedArgs): { maxActionTokens?: number } {
  return args.values['max-action-tokens'] !== undefined
    ? { maxActionTokens: numberInRange(args, 'max-action-tokens', TRAIN_DEFAULTS.maxActionTokens, { min: 8, max: 512, integer: true }) }
    : {};
}

const EVAL_OPTIONS = {
  ...valueOptions(
    'tasks',
    'model',
    'workspace',
    'max-turns',
    'concurrency',
    'samples',
    'seed',
    'provider',
    'out',
    'from',
    'compare',
    'run',
    'split',
    'iteration',
    'runs',
    'endpoint',
    'endpoint-model',
    'endpoint-key-env',
    'max-action-tokens',
    'plot',
    'precision',
  ),
  ...flagOptions('report', 'intersect'),
};

export const evalCommand: CliCommand = {
  name: 'eval',
  summary:
    'evaluate a policy on a task file: resolved rate (pass@1 of the greedy episode), mean turns, format-error rate, PASS@(k,T), per task; --out writes a results file; --report compares results files of several models',
  usage:
    '--tasks FILE [--model DIR | --endpoint URL [--endpoint-model NAME] [--endpoint-key-env VAR]] [--workspace DIR] [--max-turns N] | --run RUN [--split heldout|train] [--iteration N | --model DIR | --endpoint URL …] [--workspace DIR | --runs DIR]; then [--max-action-tokens N] [--precision auto|float32|int8|int4] [--concurrency N] [--samples K] [--seed S] [--out FILE] [--compare EARLIER.jsonl]; or --from FILE --compare EARLIER.jsonl; or --report A.jsonl B.jsonl … [--intersect] [--plot CURVES.svg]',
  options: EVAL_OPTIONS,
  allowPositionals: true,
  async run(args, io) {
    // --report A B …: results files of several models compared (no sandbox).
    if (args.values.report === true) return runEvalReport(args, io, Object.keys(EVAL_OPTIONS));
    refuseStrayFiles(args, 'report');
    if (args.values.intersect !== undefined) throw new UsageError('--intersect goes with --report');
    if (args.values.plot !== undefined) throw new UsageError('--plot goes with --report');
    // --compare: an earlier evaluation's --out file, read (and checked) before any sandbox starts.
    const earlier = typeof args.values.compare === 'string' ? readTrajectories(args.values.compare) : undefined;
    if (earlier && typeof args.values.out === 'string' && path.resolve(args.values.out) === path.resolve(String(args.values.compare))) {
      throw new UsageError(
        '--out would overwrite the --compare file: the evaluation compared against would be lost; write the new episodes to another file',
      );
    }
    let episodes: EvalEpisodes;
    if (typeof args.values.from === 'string') {
      // --from: the episodes of an evaluation already run (its --out file), summarized again.
      const runFlags = Object.keys(EVAL_OPTIONS).filter((k) => k !== 'from' && k !== 'compare' && args.values[k] !== undefined);
      if (runFlags.length > 0)
        throw new UsageError(`--from reads an evaluation already run; it takes no ${runFlags.map((k) => `--${k}`).join(', ')}`);
      const read = readEvalResults(args.values.from);
      const all = read.trajectories;
      const greedy = all.filter((t) => episodeKind(t) === 'greedy');
      const sampled = all.filter((t) => episodeKind(t) === 'sampled');
      const perTask = new Map<string, number>();
      for (const t of sampled) perTask.set(t.taskId, (perTask.get(t.taskId) ?? 0) + 1);
      episodes = {
        greedy,
        sampled,
        model: read.header ? read.model.label : [...new Set(all.map((t) => t.checkpoint))].join(', '),
        taskCount: new Set(all.map((t) => t.taskId)).size,
        samples: Math.max(0, ...perTask.values()),
      };
    } else {
      const ran = await runEvaluation(args, io);
      if (ran === 130) return 130;
      episodes = ran;
    }
    const { greedy, sampled: sampledEpisodes, model, taskCount, samples, out } = episodes;
    const failedAll = allEpisodesFailed(
      [...greedy, ...sampledEpisodes],
      out
        ? `the episodes are in ${out}; the reasons above say what to fix (\`turnwise doctor\` checks Docker and the images)`
        : 'the reasons above say what to fix (`turnwise doctor` checks Docker and the images; --out FILE keeps the episodes)',
    );
    if (failedAll) throw failedAll;
    const s = summarizeEval(greedy);
    // PASS@(k,T) over the sampled episodes, T up to the turn limit they ran under.
    const passKT =
      sampledEpisodes.length > 0 ? passAtKT(sampledEpisodes, Math.max(...sampledEpisodes.map((t) => t.reward.maxTurns))) : undefined;
    const sampled = sampledEpisodes.length > 0 ? { ...summarizeEval(sampledEpisodes), pass_at_k_t: passKT } : undefined;
    const compare = earlier ? compareEvaluations(earlier, [...greedy, ...sampledEpisodes]) : undefined;
    if (io.json) {
      io.out(
        JSON.stringify(
          {
            ok: true,
            model,
            taskCount,
            ...(out ? { out } : {}),
            ...s,
            ...(sampled ? { sampled } : {}),
            ...(compare ? { compare: { with: path.resolve(String(args.values.compare)), ...compare } } : {}),
          },
          null,
          2,
        ),
      );
      return 0;
    }
    io.out(
      `resolved ${fmt(s.resolved)}  pass rate ${fmt(s.pass_rate)}  turns ${fmt(s['turns/mean'], 1)}  format errors ${fmt(s.format_error_rate)}${s.failed ? `  (${s.failed} episode(s) failed)` : ''}${s.tampered ? `  (${s.tampered} episode(s) tampered with the tests: reward 0)` : ''}`,
    );
    if (sampled)
      io.out(
        `sampled (${samples} per task): resolved ${fmt(sampled.resolved)}  pass rate ${fmt(sampled.pass_rate)}  turns ${fmt(sampled['turns/mean'], 1)}  format errors ${fmt(sampled.format_error_rate)}  distinct paths ${fmt(sampled.distinct)}`,
      );
    if (passKT && Object.keys(passKT).length) {
      // PASS@(k,T) for k = 1, the largest k and the largest T: the rows a reader compares first.
      const ks = Object.keys(passKT);
      const Ts = Object.keys(passKT[ks[0]]);
      const last = Ts[Ts.length - 1];
      io.out(
        `PASS@(k,T): k=1 T=${last} ${fmt(passKT['1'][last])}  k=${ks[ks.length - 1]} T=${last} ${fmt(passKT[ks[ks.length - 1]][last])}  k=${ks[ks.length - 1]} T=1 ${fmt(passKT[ks[ks.length - 1]]['1'])} (all of them in --json: sampled.pass_at_k_t)`,
      );
    }
    if (out) io.out(`episodes written to ${out}`);
    for (const t of s.tasks)
      io.out(
        `  ${t.resolved ? '✓' : '✗'} ${t.taskId}  pass ${fmt(t.passRate, 2)}  turns ${t.turns}${t.formatErrors ? `  format errors ${t.formatErrors}` : ''}${t.failure ? `  failed: ${t.failure}` : ''}`,
      );
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
  // An evaluation measures the float policy unless --precision says otherwise (a run's rollouts may be quantized).
  Object.assign(provider, { rolloutPrecision: precisionOption(args) ?? 'float32' });
  let tasks: Task[];
  let tasksSource: string;
  let model: string;
  let c: TrainConfig;
  if (typeof args.values.run === 'string') {
    // --run: a run's own tasks (one split), checkpoint and settings.
    const clash = ['tasks', 'max-turns'].filter((k) => args.values[k] !== undefined);
    if (clash.length > 0)
      throw new UsageError(
        `--run evaluates with the run's own tasks, workspace and settings; it takes no ${clash.map((k) => `--${k}`).join(', ')}`,
      );
    if (args.values.model !== undefined && args.values.iteration !== undefined)
      throw new UsageError("give --iteration N (one of the run's checkpoints) or --model DIR, not both");
    const split = args.values.split ?? 'heldout';
    if (split !== 'heldout' && split !== 'train') throw new UsageError(`--split must be heldout or train, got ${JSON.stringify(split)}`);
    const iteration = args.values.iteration !== undefined ? numberInRange(args, 'iteration', 0, { min: 0, integer: true }) : undefined;
    // A run named by its id is looked for in --runs, else in --workspace DIR's runs, else in the current folder's.
    const runsRoot = runsRootFor({
      runs: args.values.runs,
      workspace: typeof args.values.workspace === 'string' ? args.values.workspace : undefined,
    });
    const target = runEvalTarget(args.values.run, { runsRoot, split, iteration });
    tasks = target.tasks;
    tasksSource = target.run.file('tasks.jsonl');
    model = typeof args.values.model === 'string' ? path.resolve(args.values.model) : target.checkpoint;
    c = resolveTrainConfig({
      ...target.config,
      ...maxActionTokensFlag(args),
      concurrency: numberInRange(args, 'concurrency', target.config.concurrency, { min: 1, max: 64, integer: true }),
      // The run's evaluations draw from its taskSeed (evaluationSeed): these episodes pair with theirs.
      seed: args.values.seed !== undefined ? seedOption(args) : evaluationSeed(target.config),
      ...provider,
    });
    if (!io.json)
      io.err(
        `eval: ${tasks.length} ${split} task(s) of ${target.run.runId}, ${typeof args.values.model === 'string' ? model : `checkpoint ${target.iteration}`}, seed ${c.seed}`,
      );
    // A run whose status says running while its process is gone was killed: say so, it is not running.
    if (!io.json && target.state === 'interrupted')
      io.err(
        `  (${target.run.runId} was interrupted: its status says running, but its process is gone; \`turnwise train --resume ${target.run.runId}\` continues it)`,
      );
  } else {
    for (const k of ['split', 'iteration', 'runs']) if (args.values[k] !== undefined) throw new UsageError(`--${k} goes with --run RUN`);
    const tasksFile = requireString(args, 'tasks');
    tasks = readTaskFile(tasksFile);
    tasksSource = path.resolve(tasksFile);
    if (tasks.length === 0)
      throw new TurnwiseError('invalid-input', `${tasksFile} holds no task`, { hint: 'make tasks with `turnwise tasks synth`' });
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
  for (const k of ['endpoint-model', 'endpoint-key-env'])
    if (args.values[k] !== undefined && !endpoint) throw new UsageError(`--${k} goes with --endpoint URL`);
  if (endpoint && args.values.model !== undefined)
    throw new UsageError('give --model DIR (a local model) or --endpoint URL (a server), not both');
  for (const k of ['provider', 'precision'])
    if (endpoint && args.values[k] !== undefined)
      throw new UsageError(`--${k} is for a local model; the server decides where and how its model runs`);
  const { signal, dispose } = stopOnSignals(io);
  const harness = endpoint
    ? await openEndpointHarness({
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
    : await openHarness({
        runId: `eval-${process.pid}`,
        workspace,
        language: runner.language,
        checkpoint: model,
        config: c,
        onLog: (m) => io.err(`warning: ${m}`),
      });
  // Who is evaluated, for the results file: an endpoint by its base URL (no credentials) and model.
  const identity: EvalModel = endpoint
    ? endpointModel(
        endpoint,
        (harness as Awaited<ReturnType<typeof openEndpointHarness>>).modelName,
        typeof args.values['endpoint-key-env'] === 'string' ? args.values['endpoint-key-env'] : undefined,
      )
    : checkpointModel(model);
  if (identity.kind === 'endpoint') model = `${identity.url} (${identity.model})`;
  const results = (trajectories: Trajectory[], complete: boolean) =>
    writeEvalResults(
      out!,
      evalResultsHeader({
        model: identity,
        tasks,
        tasksSource,
        seed: c.seed,
        samples,
        maxTurns: c.maxTurns,
        maxActionTokens: c.maxActionTokens,
        sampling: { temperature: c.temperature, topP: c.topP },
        trajectories,
        complete,
      }),
      trajectories,
    );
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
    const res = await evaluateGreedyThenSampled(harness, tasks, {
      iteration: 0,
      seed: c.seed,
      config: c,
      checkpoint: model,
      signal,
      onEpisode,
      samples,
    });
    if (!res) return stopped();
    if (out) results([...res.greedy, ...res.sampled], true);
    return { greedy: res.greedy, sampled: res.sampled, model, taskCount: tasks.length, samples, ...(out ? { out } : {}) };
  } finally {
    dispose();
    await harness.close();
  }
}

function printComparison(io: CliIO, earlierFile: string, c: EvalComparison): void {
  io.out(`compared with ${earlierFile}, episode by episode (same task and seed):`);
  for (const kind of ['greedy', 'sampled'] as const) {
    const p = c[kind];
    if (p.pairs > 0) io.out(`  ${kind.padEnd(7)} ${formatPaired(p, { byTask: kind === 'sampled' })}`);
  }
  if (c.greedy.pairs + c.sampled.pairs === 0)
    io.out('  no episode has a twin: evaluate the same tasks with the same --seed (and --samples) to compare');
  for (const t of c.tasks)
    if (t.gained + t.lost > 0)
      io.out(`    ${t.taskId} ${t.kind.padEnd(7)} ${t.before}/${t.pairs} → ${t.after}/${t.pairs}  +${t.gained} −${t.lost}`);
  if (c.unpaired.before + c.unpaired.after > 0)
    io.out(`  unpaired (no twin, or failed): ${c.unpaired.before} earlier, ${c.unpaired.after} now`);
  if (c.cut_short.before + c.cut_short.after > 0) {
    io.out(
      `  warning: tw-suspects was cut short by its time guard ${c.cut_short.before} time(s) earlier and ${c.cut_short.after} now: those answers depend on the machine's load; compare evaluations run on an idle machine`,
    );
  }
}
