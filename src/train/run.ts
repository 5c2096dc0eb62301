// A training run: tasks from the workspace (split into train and held-out), the held-out tasks
// evaluated at the start, then per iteration: sample tasks → G rollouts each (batched
// generation in the policy worker, sandboxes in parallel) → rewards → per-turn advantages →
// policy update → checkpoint → the iteration's marker (its metrics row). Everything goes to the
// run directory (core/run.ts); an iteration counts once its marker is written, so `resume` redoes
// at most the one an interruption cut, and one process at a time works in a run (its lock). What it leaves out (said plainly): no value model, no reward model; the
// reference policy for KL is the starting checkpoint; one policy on one device.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError, errorToJson } from '../core/errors';
import { makeEvent, type MetricsRow, type RunEvent, type RunEventBody } from '../core/events';
import { RunDir, newRunId } from '../core/run';
import { writeFileAtomic, writeJsonAtomic } from '../core/fs';
import { seedOf } from '../core/random';
import { SCHEMA, type Task, type Trajectory } from '../core/schema';
import { mean, std } from '../core/stats';
import { cachedTurnFraction } from '../agent/cache';
import { taskText as taskTextOf } from '../agent/prompt';
import { runRollouts, type EpisodeJob } from '../agent/scheduler';
import { trajectoryAdvantages } from '../credit/advantages';
import { loadCheckpoint } from '../policy/files/checkpoint';
import type { StepMetrics } from '../policy/training/trainer';
import { SandboxPool } from '../sandbox';
import { DEFAULT_BASELINE_TIMEOUT_MS, failingTestTasks, synthesizeMutationTasks } from '../tasks/synth';
import { readTaskFile } from '../tasks/taskfile';
import { assertWorkspaceHoldsTasks } from '../tasks/origin';
import { detectRunner, type TestRunner } from '../tasks/runners';
import { connectRunPool, readRunConfig, runConfigRecord, type TrainConfig } from './config';
import { embeddedModelDir } from './embedded';
import { splitTasks } from './split';
import { assertWorkspaceNames, planResume, type ResumePlan } from './resume';
import { alikeStreaks, groupOutcomes, pastGroupOutcomes, pickTasks, type GroupOutcome } from './task-picking';
import { demonstrationTaskIds } from '../demonstrations/record';
import { chatSystemMessage, chatTaskMessage } from '../agent/chat-format';
import { chatTurnTokenRows } from './chat-model';
import { modelActionFormat, recordActionFormat } from './action-format';
import { ReplaySource } from './replay';
import { assertRunFits, folderModel, runMemoryPlan } from './memory-plan';
import { sampledPassAtKT, type PassAtKT } from '../eval/pass-at-k';
import { actionLogpShift, packMinibatches, sameOutcomeAdvantageShare, turnTokenRows, updateRows, weightNegativeAdvantages, type ReplayRows } from './rows';
import { episodeMetrics, jsonSafe } from './metrics';
import { checkActionRoom, openRig, rolloutOptions, type Rig } from './rig';
import { evaluateGreedyThenSampled } from './evaluate';
import { canaryTask, runCanary } from './canary';

export interface TrainRunOptions {
  config: TrainConfig;
  /** Folder holding run directories. */
  runsRoot: string;
  /** Run id or directory to resume. */
  resume?: string;
  /** With `resume`: train to this many iterations instead of the run's own count (more, never fewer than done). */
  resumeIterations?: number;
  /** Name part of a new run id (default: the workspace folder's name). */
  name?: string;
  signal?: AbortSignal;
  onEvent?: (e: RunEvent) => void;
}

export interface TrainRunResult {
  runDir: string;
  runId: string;
  metrics: MetricsRow[];
  /** stopped: by the signal; out-of-time: the config's maxMinutes ended it after an evaluated iteration (resumable). */
  state: 'finished' | 'stopped' | 'out-of-time';
  /** Iterations this call completed (0 for a resume that found nothing to do). */
  newIterations: number;
}

/**
 * Writes the rig's policy as a checkpoint with the action format it writes in (action_format.json),
 * so a resume and `eval --run` prompt it the same way; a chat model's full checkpoint also carries
 * its template as chat_template.jinja (an adapter's is its base's).
 */
async function saveRunCheckpoint(rig: Rig, dir: string): Promise<void> {
  await rig.policy.saveCheckpoint(dir);
  const f = rig.actionFormat;
  if (f.kind === 'chat' && !fs.existsSync(path.join(dir, 'adapter_config.json')) && path.resolve(f.source) !== path.resolve(dir, 'chat_template.jinja')) {
    writeFileAtomic(path.join(dir, 'chat_template.jinja'), f.template);
  }
  recordActionFormat(dir, f.kind);
}

class Stopped extends Error {}

/** Resolves the tasks of a new run from its config (synthesis runs in sandboxes of `pool`). */
async function resolveTasks(c: TrainConfig, pool: SandboxPool, emit: (b: RunEventBody) => void): Promise<Task[]> {
  const override = c.testCommand ? { command: c.testCommand } : undefined;
  if (c.taskSource === 'file') return readTaskFile(c.tasksFile!);
  if (c.taskSource === 'failing-tests') {
    const r = await failingTestTasks({ workspace: c.workspace, pool, seed: c.taskSeed, override });
    return r.tasks;
  }
  const r = await synthesizeMutationTasks({
    workspace: c.workspace,
    pool,
    seed: c.taskSeed,
    max: c.maxTasks,
    override,
    onProgress: (p) =>
      emit({
        type: 'phase',
        iteration: 0,
        phase: 'tasks',
        done: p.kept,
        total: p.total,
        // The baseline can take long (a whole suite, at most DEFAULT_BASELINE_TIMEOUT_MS): say what it waits for.
        detail: p.phase === 'baseline' ? `baseline: running the workspace's test suite once (at most ${DEFAULT_BASELINE_TIMEOUT_MS / 1000} s)` : `${p.phase ?? 'validate'}: ${p.tried} tried, ${p.kept} kept`,
      }),
  });
  return r.tasks;
}

/** Starts or resumes a run and drives it to the end (or until `signal` aborts it). */
export async function trainRun(o: TrainRunOptions): Promise<TrainRunResult> {
  let run: RunDir;
  let c: TrainConfig;
  let runner: TestRunner | undefined;
  let pool: SandboxPool | undefined;
  let lock: ReturnType<RunDir['lock']>;
  let plan: ResumePlan | undefined;
  if (o.resume) {
    run = RunDir.open(o.resume, o.runsRoot);
    // Nothing is read for work or written before the lock: a second trainer is refused here.
    lock = run.lock();
    try {
      c = readRunConfig(run);
      plan = planResume(run, c, { iterations: o.resumeIterations });
      // A resume is planned as a new run is: one that will not fit is refused before any sandbox.
      if (!plan.nothingToDo) assertRunFits(c, folderModel(c.model || embeddedModelDir()).config);
    } catch (e) {
      lock.release();
      throw e;
    }
  } else {
    c = o.config;
    const runId = newRunId({ name: o.name ?? path.basename(path.resolve(c.workspace)), estimator: c.estimator, seed: c.seed });
    // Mistakes found before any work (no test suite, an unreadable starting model, a context too
    // short for an action, Docker down) are refused here, so they leave no run directory behind.
    // The pool stays for the run.
    runner = detectRunner(c.workspace, c.testCommand ? { command: c.testCommand } : undefined);
    assertWorkspaceNames(c.workspace);
    if (c.taskSource === 'file') assertWorkspaceHoldsTasks(readTaskFile(c.tasksFile!), c.workspace, c.tasksFile!);
    const start = loadCheckpoint(c.model || embeddedModelDir(), { optimizer: false });
    checkActionRoom(start.weights.config.max_position_embeddings, c.maxActionTokens, start.dir);
    // A run whose memory plan exceeds the machine's memory is refused before any sandbox starts.
    assertRunFits(c, start.weights.config);
    const format = modelActionFormat(c.model || embeddedModelDir());
    if (format.kind === 'chat' && c.replayCoef > 0) {
      throw new TurnwiseError('invalid-input', `replayCoef ${c.replayCoef} replays turnwise-tiny's warm-start demonstrations, which are in the compact format; ${start.dir} writes in its chat format`, { hint: 'set "replayCoef" to 0 in turnwise.json for a chat model' });
    }
    pool = await connectRunPool(runId, c);
    try {
      fs.mkdirSync(o.runsRoot, { recursive: true });
      run = RunDir.createUnique(o.runsRoot, runId, (id) => runConfigRecord(c, { runId: id, startModel: c.model || embeddedModelDir(), actionFormat: format.kind, createdAt: new Date().toISOString() }));
      lock = run.lock();
    } catch (e) {
      await pool.close();
      throw e;
    }
  }
  const runId = run.runId;
  const emit = (b: RunEventBody) => o.onEvent?.(makeEvent(runId, b));
  const log = (message: string, level: 'info' | 'warn' = 'info') => emit({ type: 'log', level, message });
  if (lock.tookOverFrom) log(`took over the lock of process ${lock.tookOverFrom.pid}, which is gone (it was killed or crashed)`);
  if (plan) {
    for (const w of plan.inventory.warnings) log(`${w.file}: ${w.problem}; ${w.fix}`, 'warn');
    // The log of a finished run is repaired too: it is rebuilt from the iterations' own markers.
    run.repairLog(plan.inventory);
    if (plan.nothingToDo) {
      lock.release();
      log(plan.nothingToDo);
      return { runDir: run.dir, runId, metrics: run.readMetrics(), state: 'finished', newIterations: 0 };
    }
  }
  const check = () => {
    if (o.signal?.aborted) throw new Stopped('stopped');
  };
  let last = run.lastCompleteIteration();
  const startedAt = last;
  // What a resume that fails before it completes an iteration puts back: it did no work, so the
  // run's status (and its iteration count) stay as they were.
  const before = o.resume ? { status: readIfFile(run.file('status.json')), config: readIfFile(run.file('config.json')) } : undefined;
  if (plan && plan.iterations !== c.iterations) {
    log(`the run now goes to iteration ${plan.iterations} (its config.json said ${c.iterations})`);
    c = { ...c, iterations: plan.iterations };
    writeJsonAtomic(run.file('config.json'), { ...run.readConfig<Record<string, unknown>>(), iterations: plan.iterations });
  }
  const removed = run.discardAfter(last);
  if (removed.length) log(`discarded the incomplete iteration${removed.length > 1 ? 's' : ''} ${removed.join(', ')} left by an interrupted run`);
  run.writeStatus({ state: 'running', pid: process.pid, iterations: c.iterations, lastCompleteIteration: last });
  // However the process ends while the run is going (a second Ctrl-C, an uncaught error, the
  // editor closing), the run directory says stopped and holds no half iteration: synchronous,
  // so it happens even on process.exit().
  let settled = false;
  const onExit = () => {
    if (settled) return;
    try {
      run.discardAfter(last);
      run.writeStatus({ state: 'stopped', iterations: c.iterations, lastCompleteIteration: last });
    } catch {
      // nothing more can be done while exiting
    }
  };
  process.on('exit', onExit);

  let rig: Rig | undefined;
  try {
    runner ??= detectRunner(c.workspace, c.testCommand ? { command: c.testCommand } : undefined);
    pool ??= await connectRunPool(runId, c);
    let tasks: Task[];
    let splits: { train: string[]; heldout: string[] };
    if (fs.existsSync(run.file('splits.json'))) {
      // A resume poses the run's tasks again: refused if the workspace no longer holds their files.
      tasks = readTaskFile(run.file('tasks.jsonl'));
      assertWorkspaceHoldsTasks(tasks, c.workspace, run.file('tasks.jsonl'));
      splits = run.readSplits(tasks);
    } else {
      emit({ type: 'phase', iteration: 0, phase: 'tasks', detail: `${c.taskSource} tasks from ${c.workspace}` });
      tasks = await resolveTasks(c, pool, emit);
      check();
      if (tasks.length === 0) {
        throw c.taskSource === 'failing-tests'
          ? new TurnwiseError('invalid-input', `no test of ${c.workspace} fails, so taskSource "failing-tests" finds no task`, {
              hint: 'use taskSource "mutation" (the default: bugs made from the workspace\'s own code) or "file" with a task file (`turnwise tasks synth --out`)',
            })
          : new TurnwiseError('invalid-input', `no task survived validation in ${c.workspace}: no mutation of its source made one of its passing tests fail`, {
              hint: 'check that the tests exercise the code (`turnwise tasks synth --workspace … --json` shows why candidates were dropped), or use taskSource "failing-tests" / "file"',
            });
      }
      const seen = new Set(demonstrationTaskIds(c.model || embeddedModelDir()));
      splits = splitTasks(tasks, c.heldoutFraction, c.taskSeed, seen);
      const kept = tasks.filter((t) => seen.has(t.id)).length;
      if (kept) log(`${kept} task(s) were demonstrations of the starting model's warm start: they stay in the train split`);
      run.writeTasks(tasks, splits);
    }
    const byId = new Map(tasks.map((t) => [t.id, t]));
    const train = splits.train.map((id) => byId.get(id)!).filter(Boolean);
    const heldout = splits.heldout.map((id) => byId.get(id)!).filter(Boolean);
    if (train.length === 0) {
      throw plan
        ? new TurnwiseError('invalid-file', `${run.file('splits.json')} holds no train task`, { hint: 'restore it from a backup of the run directory; nothing was changed' })
        : new TurnwiseError('invalid-input', `all ${tasks.length} task(s) are held out; none is left to train on`, { hint: 'lower heldoutFraction or add tasks' });
    }
    emit({ type: 'run-started', runDir: run.dir, iterations: c.iterations, trainTasks: train.length, heldoutTasks: heldout.length, ...(last >= 0 ? { resumedFrom: last } : {}) });

    const startModel = (run.readConfig<{ startModel?: string }>().startModel as string) || c.model || embeddedModelDir();
    const from = last >= 0 ? run.checkpointDir(last) : startModel;
    emit({ type: 'phase', iteration: Math.max(0, last), phase: 'snapshot', detail: 'workspace snapshot and policy' });
    // A LoRA run starts a fresh adapter on its model; once checkpoint 0 exists, every checkpoint
    // is an adapter that names its base.
    const lora = last < 0 && c.lora ? { config: c.lora, seed: seedOf(c.seed, 'lora-init') } : undefined;
    // The update's token cap (the config's, or the largest the memory plan fits: 0), and whether
    // decode steps pack the weights (where the plan with their copy fits).
    const memory = runMemoryPlan(c, folderModel(startModel).config);
    rig = await openRig({ runId, workspace: c.workspace, language: runner.language, checkpoint: from, referenceDir: last >= 0 ? run.checkpointDir(0) : undefined, ...(lora ? { lora } : {}), ...(c.lora ? { loraDropoutSeed: seedOf(c.seed, 'lora-dropout') } : {}), config: c, pool, packDecodeWeights: memory.packDecodeWeights, onLog: (m) => log(m, 'warn') });
    if (last < 0 && rig.actionFormat.kind === 'chat') log(`the model writes its actions in its own chat format (template: ${rig.actionFormat.source})`);
    for (const line of memory.lines) log(line);
    check();
    // Generated demonstrations for the replay term (the same pool on a resume: seeded by the run).
    const replaySource = c.replayCoef > 0 && rig.codec ? await ReplaySource.create(rig.codec, seedOf(c.seed, 'replay-pool')) : undefined;

    // The train groups of the iterations done so far, oldest first: what `informative` task
    // sampling weighs by (read back from their trajectories on a resume, so it picks as the
    // uninterrupted run would have).
    const pastGroups: GroupOutcome[] = c.taskSampling === 'informative' ? pastGroupOutcomes(run, last) : [];
    const evalDue = (n: number) => n === 0 || n === c.iterations || (c.evalEvery > 0 && n % c.evalEvery === 0);
    const runEval = async (n: number, due = evalDue(n)): Promise<{ m: Record<string, number>; trajs: Trajectory[]; passAtKT?: PassAtKT }> => {
      if (!heldout.length || !due) return { m: {}, trajs: [] };
      const total = heldout.length * (1 + c.evalSamples);
      emit({ type: 'phase', iteration: n, phase: 'eval', done: 0, total });
      const t0 = Date.now();
      let done = 0;
      const base = {
        iteration: n,
        seed: c.seed,
        config: c,
        checkpoint: run.checkpointDir(n),
        signal: o.signal,
        onEpisode: (t: Trajectory) => {
          done++;
          emit({ type: 'phase', iteration: n, phase: 'eval', done, total });
          emitEpisode(emit, n, t);
        },
      };
      // Greedy episodes give pass@1 of the policy's best guess; sampled ones estimate the success
      // rate of the policy RL actually changes.
      const res = await evaluateGreedyThenSampled(rig!, heldout, { ...base, samples: c.evalSamples });
      check();
      if (!res) throw new Stopped();
      const m = { ...episodeMetrics('heldout/', res.greedy), ...(c.evalSamples > 0 ? episodeMetrics('heldout/sampled/', res.sampled) : {}) };
      const trajs = [...res.greedy, ...res.sampled];
      const failedEval = trajs.filter(unscored);
      if (failedEval.length && n > 0) log(`${failedEval.length} of ${trajs.length} held-out episodes of iteration ${n} failed or could not be scored and are left out of its held-out metrics (first: ${whyUnscored(failedEval[0])})`, 'warn');
      // PASS@(k,T) of the sampled episodes: in the iteration's event (metrics rows stay flat numbers).
      const passKT = sampledPassAtKT(trajs);
      return { m: { ...m, 'time/eval_s': (Date.now() - t0) / 1000, ...(res.canary ? { 'time/eval_canary_s': res.canary.durationMs / 1000 } : {}) }, trajs, ...(passKT ? { passAtKT: passKT } : {}) };
    };

    // The longest held-out evaluation so far: part of what the time budget expects of an iteration.
    let evalMs = 0;
    if (last < 0) {
      // Iteration 0: the starting checkpoint, evaluated on the held-out tasks.
      const ev = await runEval(0);
      evalMs = (ev.m['time/eval_s'] ?? 0) * 1000;
      const failedEval = ev.trajs.filter(unscored);
      if (ev.trajs.length && failedEval.length === ev.trajs.length) {
        // An evaluation that cannot run would make every later one a row of "—": stop with its reason.
        throw new TurnwiseError('sandbox-failed', `every one of the ${ev.trajs.length} held-out episodes of the starting evaluation failed; the first: ${whyUnscored(failedEval[0])}`, {
          hint: 'run one of the held-out tasks with `turnwise episode` or check the workspace and Docker with `turnwise doctor`; nothing of the run was kept',
        });
      }
      run.writeTrajectories(0, 'heldout', ev.trajs);
      await saveRunCheckpoint(rig, run.checkpointDir(0));
      const row: MetricsRow = { schema: SCHEMA.metrics, iteration: 0, ...jsonSafe(ev.m) } as MetricsRow;
      run.commitIteration(row);
      emit({ type: 'checkpoint-written', iteration: 0, path: run.checkpointDir(0) });
      emit({ type: 'iteration-finished', iteration: 0, metrics: row, ...(ev.passAtKT ? { pass_at_k_t: ev.passAtKT } : {}) });
      last = 0;
      run.writeStatus({ state: 'running', pid: process.pid, iterations: c.iterations, lastCompleteIteration: last });
    }

    // The time budget (maxMinutes): counted from here, at each start of the run.
    const budgetEnd = c.maxMinutes > 0 ? Date.now() + c.maxMinutes * 60_000 : Infinity;
    let slowestMs = 0;
    let outOfTime = false;
    for (let n = last + 1; n <= c.iterations; n++) {
      check();
      const it0 = Date.now();
      // Tasks of this iteration: a seeded draw from the train split (taskSampling).
      const picked = pickTasks(train, c.tasksPerIteration, c.seed, n, c.taskSampling, alikeStreaks(pastGroups));
      const jobs: EpisodeJob[] = [];
      picked.forEach((task, ti) => {
        for (let g = 0; g < c.groupSize; g++) jobs.push({ task, episodeId: `it${n}-t${ti}-g${g}`, groupId: `it${n}-t${ti}`, seed: seedOf(c.seed, n, ti, g), split: 'train' });
      });
      let done = 0;
      emit({ type: 'phase', iteration: n, phase: 'rollout', done: 0, total: jobs.length });
      // The reward canary (canary.ts) beside the rollouts: a train task in turn; its failure stops
      // the run before the advantages and the update use this iteration's rewards.
      const ct = canaryTask(train, n);
      const canary = ct ? runCanary(rig, ct, c, `in iteration ${n}`).then((r) => ({ r }), (e: unknown) => ({ e })) : undefined;
      const ro = await runRollouts(jobs, {
        ...rolloutOptions(rig, c, run.checkpointDir(n - 1), n, o.signal, (t) => {
          done++;
          emit({ type: 'phase', iteration: n, phase: 'rollout', done, total: jobs.length });
          emitEpisode(emit, n, t);
        }),
      });
      const checked = await canary;
      check();
      if (checked && 'e' in checked) throw checked.e;
      const canaryS = checked ? checked.r.durationMs / 1000 : NaN;
      const trajs = ro.trajectories;
      const failed = trajs.filter((t) => t.failure);
      if (failed.length === trajs.length) {
        throw new TurnwiseError('sandbox-failed', `every episode of iteration ${n} failed; the first: ${failed[0]?.failure}`, { hint: 'check Docker (`turnwise doctor`) and the workspace\'s tests' });
      }
      if (failed.length) log(`${failed.length} of ${trajs.length} episodes failed and are left out of the update (first: ${failed[0].failure})`, 'warn');

      // Advantages: the run's estimator over the scored episodes; failed ones get 0.
      emit({ type: 'phase', iteration: n, phase: 'advantages' });
      const tA = Date.now();
      const scored = trajs.filter((t) => !t.failure);
      // A group is one picked task slot (the same task may be picked twice in one iteration).
      const report = await trajectoryAdvantages(
        scored.map((t) => ({ ...t, taskId: t.groupId })),
        c.estimator,
        c.estimatorParams,
      );
      const byTraj = new Map(scored.map((t) => [t.trajId, t]));
      for (const r of report.rows) {
        const turn = byTraj.get(r.trajId)?.turns.find((x) => x.index === r.turn);
        if (turn) {
          turn.advantage = r.advantage;
          turn.advantageComponents = r.components;
        }
      }
      const advS = (Date.now() - tA) / 1000;

      // Update.
      emit({ type: 'phase', iteration: n, phase: 'update' });
      const tU = Date.now();
      const budget = rig.contextTokens - c.maxActionTokens;
      const taskText = (t: Trajectory) => taskTextOf(byId.get(t.taskId)!);
      const turnRows = scored.map((t) => {
        const task = byId.get(t.taskId)!;
        // A chat episode's rows are its conversation built again from the trajectory's ids.
        return rig!.chat ? chatTurnTokenRows(rig!.chat.format, chatSystemMessage(task), chatTaskMessage(task), t, rig!.chat.stopIds) : turnTokenRows(rig!.codec!, taskText(t), t, budget);
      });
      const rows = updateRows(
        turnRows.map((r) => weightNegativeAdvantages(r, c.negativeAdvantageWeight)),
        c.klCoef > 0 || c.entCoef > 0,
        c.lossAggregation,
      );
      const stepMetrics: StepMetrics[] = [];
      if (rows.length) {
        for (let epoch = 0; epoch < c.epochs; epoch++) {
          // A seeded order: one hash per row, not two per comparison.
          const shuffled = rows
            .map((r) => ({ r, key: seedOf(c.seed, n, epoch, r.ids.length, r.actions[0].advantage, r.actions.length) }))
            .sort((a, b) => a.key - b.key)
            .map((x) => x.r);
          const ref = c.klCoef > 0 ? await rig.policy.logprobs(shuffled.map((r) => r.ids), { temperature: c.temperature, model: 'reference' }) : undefined;
          const replay: ReplayRows | undefined = replaySource && { rows: c.replayRows, draw: (T, k) => replaySource!.draw(c.replayRows, T, seedOf(c.seed, 'replay', n, epoch, k)) };
          for (const mb of packMinibatches(shuffled, c.minibatches, ref, replay)) {
            check();
            const ms = await rig.policy.train({ loss: c.loss, batch: mb.B, seq: mb.T, microBatchTokens: memory.updateTokens }, [mb.batch], {
              lr: c.lr,
              klCoef: c.klCoef,
              entCoef: c.entCoef,
              replayCoef: c.replayCoef,
              clipLow: c.clipLow,
              clipHigh: c.clipHigh,
              temperature: c.temperature,
            });
            stepMetrics.push(...ms);
          }
        }
      }
      // Where the update moved the log-probability of the actions it learned from, by the sign of
      // their advantage (one forward pass, counted in the update's time; the rollout log-probs are
      // the "before"). A drop of the positive ones as well means the negative ones dominate and
      // push probability elsewhere.
      const learned = updateRows(turnRows, false);
      const moved = stepMetrics.length && learned.length ? actionLogpShift(learned, await rig.policy.logprobs(learned.map((r) => r.ids), { temperature: c.temperature })) : undefined;
      const updS = (Date.now() - tU) / 1000;
      check();

      // Checkpoint, evaluation, then the marker that commits the iteration.
      await saveRunCheckpoint(rig, run.checkpointDir(n));
      emit({ type: 'checkpoint-written', iteration: n, path: run.checkpointDir(n) });
      // The budget's last iteration: another as long as the slowest so far (an evaluation
      // included) would pass it. It is evaluated whatever evalEvery says, so the run ends on a
      // held-out measurement.
      const workMs = Date.now() - it0;
      outOfTime = n < c.iterations && Date.now() + evalMs + Math.max(slowestMs, workMs + evalMs) > budgetEnd;
      const ev = await runEval(n, evalDue(n) || outOfTime);
      if (ev.trajs.length) evalMs = Math.max(evalMs, ev.m['time/eval_s'] * 1000);
      slowestMs = Math.max(slowestMs, Date.now() - it0);
      run.writeTrajectories(n, 'train', trajs);
      if (c.taskSampling === 'informative') pastGroups.push(...groupOutcomes(trajs));
      if (ev.trajs.length) run.writeTrajectories(n, 'heldout', ev.trajs);
      const advs = scored.flatMap((t) => t.turns.map((x) => x.advantage ?? 0));
      // The train pass rate's key is tests/pass_rate (docs/run-directory.md) (held-out ones keep their prefix).
      const { pass_rate: trainPassRate, ...trainEpisodes } = episodeMetrics('', trajs);
      const sm = (k: keyof StepMetrics) => (stepMetrics.length ? mean(stepMetrics.map((s) => s[k])) : NaN);
      const row: MetricsRow = {
        schema: SCHEMA.metrics,
        iteration: n,
        ...jsonSafe({
          ...trainEpisodes,
          'tests/pass_rate': trainPassRate,
          frac_reward_zero_std: report.diagnostics.frac_reward_zero_std,
          'adv/mean': mean(advs),
          'adv/std': advs.length > 1 ? std(advs) : 0,
          'adv/abs_mean': mean(advs.map(Math.abs)),
          'adv/same_outcome_share': sameOutcomeAdvantageShare(scored),
          'loss/policy': sm('pg_loss'),
          'loss/total': sm('loss'),
          kl: sm('kl'),
          approx_kl: sm('approx_kl'),
          clip_frac: sm('clip_frac'),
          entropy: sm('entropy'),
          grad_norm: sm('grad_norm'),
          'update/steps': stepMetrics.length,
          'update/rows': rows.length,
          'update/actions': rows.reduce((a, r) => a + r.actions.length, 0),
          'update/dlogp_pos': moved?.positive ?? NaN,
          'update/dlogp_neg': moved?.negative ?? NaN,
          'update/replay_loss': c.replayCoef > 0 ? sm('replay_loss') : NaN,
          'time/rollout_s': ro.wallMs / 1000,
          'time/generation_s': ro.generateMs / 1000,
          'time/sandbox_s': ro.sandboxMs / 1000,
          'time/reward_s': ro.rewardMs / 1000,
          'time/canary_s': canaryS,
          'time/advantages_s': advS,
          'time/update_s': updS,
          'time/iteration_s': (Date.now() - it0) / 1000,
          'rollout/mean_batch': ro.meanBatch,
          'rollout/cached_turns': cachedTurnFraction(trajs),
          ...ev.m,
        }),
      } as MetricsRow;
      run.commitIteration(row);
      last = n;
      run.writeStatus({ state: 'running', pid: process.pid, iterations: c.iterations, lastCompleteIteration: last });
      emit({ type: 'iteration-finished', iteration: n, metrics: row, ...(ev.passAtKT ? { pass_at_k_t: ev.passAtKT } : {}) });
      if (outOfTime) {
        run.writeStatus({ state: 'stopped', iterations: c.iterations, lastCompleteIteration: last });
        const reason = `its time budget of ${c.maxMinutes} min would pass during another iteration (maxMinutes); resume it to go on`;
        log(`stopping after iteration ${n}: ${reason}`);
        emit({ type: 'run-stopped', lastCompleteIteration: last, reason, outOfTime: true });
        return { runDir: run.dir, runId, metrics: run.readMetrics(), state: 'out-of-time', newIterations: last - startedAt };
      }
    }
    run.writeStatus({ state: 'finished', iterations: c.iterations, lastCompleteIteration: last });
    emit({ type: 'run-finished', iterations: c.iterations, runDir: run.dir });
    return { runDir: run.dir, runId, metrics: run.readMetrics(), state: 'finished', newIterations: last - startedAt };
  } catch (e) {
    if (e instanceof Stopped || o.signal?.aborted) {
      run.discardAfter(last);
      run.writeStatus({ state: 'stopped', iterations: c.iterations, lastCompleteIteration: last });
      emit({ type: 'run-stopped', lastCompleteIteration: last, reason: 'stopped by the user' });
      return { runDir: run.dir, runId, metrics: run.readMetrics(), state: 'stopped', newIterations: last - startedAt };
    }
    settled = true;
    await rig?.close().catch(() => undefined);
    rig = undefined;
    if (!o.resume && last < 0) {
      // A new run that failed before its first iteration holds nothing complete: it leaves nothing.
      lock.release();
      fs.rmSync(run.dir, { recursive: true, force: true });
    } else if (before && last === startedAt) {
      // A resume that completed nothing leaves the run's files as they were.
      run.discardAfter(last);
      restoreFile(run.file('status.json'), before.status);
      restoreFile(run.file('config.json'), before.config);
    } else {
      run.writeStatus({ state: 'failed', iterations: c.iterations, lastCompleteIteration: last, error: errorToJson(e) });
    }
    emit({ type: 'run-failed', error: errorToJson(e) });
    throw e;
  } finally {
    settled = true;
    process.off('exit', onExit);
    await rig?.close().catch(() => undefined);
    await pool?.close().catch(() => undefined);
    lock.release();
  }
}

/** An episode that gives no score: it failed, or its tests gave no usable report (reward NaN). */
const unscored = (t: Trajectory) => !!t.failure || !Number.isFinite(t.reward.reward);
const whyUnscored = (t: Trajectory) => t.failure ?? t.reward.error ?? 'its tests gave no usable report';

function readIfFile(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

/** Puts a file's earlier content back (atomically), or removes it when there was none. */
function restoreFile(file: string, text: string | undefined): void {
  if (text === undefined) fs.rmSync(file, { force: true });
  else if (readIfFile(file) !== text) writeFileAtomic(file, text);
}

function emitEpisode(emit: (b: RunEventBody) => void, iteration: number, t: Trajectory): void {
  emit({
    type: 'episode-finished',
    iteration,
    split: t.split ?? 'train',
    taskId: t.taskId,
    trajId: t.trajId,
    reward: Number.isFinite(t.reward.reward) ? t.reward.reward : null,
    passRate: Number.isFinite(t.reward.passRate) ? t.reward.passRate : null,
    resolved: t.reward.resolved,
    turns: t.turns.length,
    formatErrors: t.turns.filter((x) => x.formatError).length,
    ...(t.failure ? { failure: t.failure } : {}),
  });
}
