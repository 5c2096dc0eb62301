// A training run. Prepare: the config checked, the run directory made (or opened to resume) and
// locked, the tasks made and split, the policy opened in the run's sandboxes; iteration 0
// evaluates the starting checkpoint on the held-out tasks. Then each iteration: pick tasks →
// rollouts (the reward canary beside them) → advantages → update → checkpoint → held-out
// evaluation → commit (its episodes and its marker with the metrics row). An iteration counts once
// its marker is written, so a resume redoes at most the one an interruption cut, and one process at
// a time works in a run (its lock). Not here: a value model, a reward model; the KL reference is
// the starting checkpoint; one policy on one device.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError, errorToJson } from '../core/errors';
import { makeEvent, type MetricsRow, type RunEvent, type RunEventBody } from '../core/events';
import { RunDir, newRunId } from '../core/run';
import { writeFileAtomic, writeJsonAtomic } from '../core/fs';
import { seedOf } from '../core/random';
import { SCHEMA, type Trajectory } from '../core/schema';
import { isScored } from '../core/trajectory';
import { mean, std } from '../core/stats';
import { cachedTurnFraction } from '../agent/cache';
import { concatRollouts, runRollouts, type EpisodeJob, type RolloutResult } from '../agent/scheduler';
import { trajectoryAdvantages, writeTurnAdvantages, type AdvantageReport } from '../credit/advantages';
import { getEstimator } from '../credit/registry';
import { loadCheckpoint } from '../policy/files/checkpoint';
import type { SandboxPool } from '../sandbox';
import { readTaskFile } from '../tasks/taskfile';
import { assertWorkspaceHoldsTasks } from '../tasks/origin';
import { detectRunner, type TestRunner } from '../tasks/runners';
import { sampledPassAtKT, type PassAtKT } from '../eval/pass-at-k';
import { connectRunPool, readRunConfig, runConfigRecord, type TrainConfig } from './config';
import { embeddedModelDir } from './embedded';
import { assertWorkspaceNames, planResume, type ResumePlan } from './resume';
import { alikeStreaks, groupOutcomes, pastTrainEpisodes, pickTasks, type GroupOutcome } from './task-picking';
import { modelActionFormat, recordActionFormat } from './action-format';
import { ReplaySource } from './replay';
import { assertRunFits, folderModel, runMemoryPlan } from './memory-plan';
import { sameOutcomeAdvantageShare } from './rows';
import { episodeMetrics, jsonSafe } from './metrics';
import { checkActionRoom, openHarness, rolloutOptions, type Harness } from './harness';
import { evaluateGreedyThenSampled, evaluationSeed } from './evaluate';
import { canaryTask, runCanary } from './canary';
import { runTasks, type RunTasks } from './run-tasks';
import { updateMetrics, updatePolicy, type PolicyUpdate } from './update';
import { branchNewActions, branchStats, gradientMass, mixedGroups, planBranches, shareTreeCredit, type BranchStats } from './branching';
import { chargeByDiagnosis, reweightByDiagnosis } from './diagnosis-weights';
import { addBatchBaseline } from './batch-baseline';
import { teacherPass, type TeacherPassResult } from './teacher';

export interface TrainRunOptions {
  config: TrainConfig;
  /** Folder holding run directories. */
  runsRoot: string;
  /** Run id or directory to resume. */
  resume?: string;
  /** With `resume`: train to this many iterations instead of the run's own count (more, never fewer than done). */
  resumeIterations?: number;
  /** With resume: the execution provider to continue on instead of the run's (e.g. `cpu` after a GPU failed). */
  resumeProvider?: TrainConfig['executionProvider'];
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

/** The run as its steps share it, from the moment its directory is locked. */
interface RunState {
  readonly run: RunDir;
  /** The run's configuration; a resume may raise its iterations. */
  c: TrainConfig;
  readonly signal?: AbortSignal;
  /** Set when resuming: what the run directory held and what the resume is to do. */
  readonly plan?: ResumePlan;
  readonly lock: ReturnType<RunDir['lock']>;
  readonly emit: (b: RunEventBody) => void;
  readonly log: (message: string, level?: 'info' | 'warn') => void;
  /** The last complete iteration (-1: none yet). */
  last: number;
  /** `last` when this call began. */
  readonly startedAt: number;
  /** A resume's status.json and config.json as found: put back when it completes nothing. */
  before?: { status?: string; config?: string };
  runner?: TestRunner;
  pool?: SandboxPool;
  harness?: Harness;
}

/** A run ready to train: what the iterations add to its state. */
type Training = RunState & {
  harness: Harness;
  tasks: RunTasks;
  /** The update's token cap (the config's, or the largest the memory plan fits). */
  updateTokens: number;
  /** Demonstrations for the replay term (replayCoef > 0, compact models). */
  replay?: ReplaySource;
  /** The train groups of the iterations done so far, oldest first: what `informative` task picking weighs by. */
  pastGroups: GroupOutcome[];
  /** Per task, what its branches did in the iterations done so far: how branchEpisodes is split. */
  branches: Map<string, BranchStats>;
  budget: Budget;
};

/**
 * The time budget (maxMinutes): its end, and the longest evaluation and the longest iteration so
 * far (rollouts to checkpoint, its evaluation left out), which it expects of the next.
 */
export interface Budget {
  end: number;
  evalMs: number;
  slowestMs: number;
}

/** A held-out evaluation: its metrics (`heldout/…`, times), its episodes, PASS@(k,T) of the sampled ones. */
interface Evaluation {
  m: Record<string, number>;
  trajs: Trajectory[];
  passAtKT?: PassAtKT;
}

/** What an iteration's train steps leave for its metrics row. */
interface TrainSteps {
  startedMs: number;
  rollouts: RolloutResult & { canaryS: number; branchEpisodes: number };
  advantages: { scored: Trajectory[]; report: AdvantageReport; seconds: number; teacher?: TeacherPassResult };
  update: PolicyUpdate;
}

class Stopped extends Error {}

/** Starts or resumes a run and drives it to the end (or until `signal` aborts it). */
export async function trainRun(o: TrainRunOptions): Promise<TrainRunResult> {
  const s = await openRun(o);
  if (s.plan?.nothingToDo) return nothingToDo(s);
  markRunning(s);
  const unguard = guardExit(s);
  try {
    await connectSandboxes(s);
    const tasks = await runTasks(s.run, s.c, { pool: s.pool!, emit: s.emit, log: s.log, check: () => check(s), signal: s.signal });
    announce(s, tasks);
    const t = trainingState(s, tasks, await openPolicy(s));
    if (t.last < 0) {
      // Iteration 0: the starting checkpoint, evaluated on the held-out tasks.
      const ev = await evaluation(t, 0, true);
      await checkpoint(t, 0);
      commit(t, 0, ev);
    }
    startBudget(t);
    for (let n = t.last + 1; n <= t.c.iterations; n++) {
      check(t);
      const startedMs = Date.now();
      const jobs = iterationJobs(t, n);
      const played = await rollouts(t, n, jobs);
      const adv = await advantages(t, n, played.trajectories);
      const upd = await update(t, n, adv.scored);
      await checkpoint(t, n);
      const workMs = Date.now() - startedMs;
      const outOfTime =
        n < t.c.iterations && !fitsAnotherIteration({ ...t.budget, now: Date.now(), workMs, evaluatedNow: evalDue(t.c, n) });
      const ev = await evaluation(t, n, evalDue(t.c, n) || outOfTime);
      t.budget.slowestMs = Math.max(t.budget.slowestMs, workMs);
      commit(t, n, ev, { startedMs, rollouts: played, advantages: adv, update: upd });
      if (outOfTime) return stopOutOfTime(t, n);
    }
    return finish(t);
  } catch (e) {
    if (e instanceof Stopped || o.signal?.aborted) return stop(s);
    unguard();
    await fail(s, e);
    throw e;
  } finally {
    unguard();
    await s.harness?.close().catch(() => undefined);
    await s.pool?.close().catch(() => undefined);
    s.lock.release();
  }
}

// ── prepare ─────────────────────────────────────────────────────────────────────────────────────

/**
 * Opens the run and locks it: a resume reads its config and plans from its files; a new run has
 * its config checked, its sandboxes connected and its directory made. Reports what it found.
 */
async function openRun(o: TrainRunOptions): Promise<RunState> {
  let run: RunDir;
  let c: TrainConfig;
  let runner: TestRunner | undefined;
  let pool: SandboxPool | undefined;
  let lock: ReturnType<RunDir['lock']>;
  let plan: ResumePlan | undefined;
  let providerNote: string | undefined;
  if (o.resume) {
    run = RunDir.open(o.resume, o.runsRoot);
    // Nothing is read for work or written before the lock: a second trainer is refused here.
    lock = run.lock();
    try {
      c = readRunConfig(run);
      // A resume may continue on another device (the CPU after a GPU failed); config.json keeps the run's own.
      if (o.resumeProvider && o.resumeProvider !== c.executionProvider) {
        providerNote = `the run continues on the ${o.resumeProvider} provider (its config.json says ${c.executionProvider}, which it keeps)`;
        c = { ...c, executionProvider: o.resumeProvider };
      }
      plan = planResume(run, c, { iterations: o.resumeIterations });
      // A resume that will not fit is refused before any sandbox, as a new run is.
      if (!plan.nothingToDo) assertRunFits(c, folderModel(c.model || embeddedModelDir()).config);
    } catch (e) {
      lock.release();
      throw e;
    }
  } else {
    c = o.config;
    const checked = checkNewRun(c, o.name);
    runner = checked.runner;
    // The pool stays for the run.
    pool = await connectRunPool(checked.runId, c);
    try {
      fs.mkdirSync(o.runsRoot, { recursive: true });
      run = RunDir.createUnique(o.runsRoot, checked.runId, (id) =>
        runConfigRecord(c, {
          runId: id,
          startModel: c.model || embeddedModelDir(),
          actionFormat: checked.format,
          createdAt: new Date().toISOString(),
        }),
      );
      lock = run.lock();
    } catch (e) {
      await pool.close();
      throw e;
    }
  }
  const emit = (b: RunEventBody) => o.onEvent?.(makeEvent(run.runId, b));
  const log = (message: string, level: 'info' | 'warn' = 'info') => emit({ type: 'log', level, message });
  if (lock.tookOverFrom) log(`took over the lock of process ${lock.tookOverFrom.pid}, which is gone (it was killed or crashed)`);
  if (providerNote) log(providerNote);
  if (plan) {
    for (const w of plan.inventory.warnings) log(`${w.file}: ${w.problem}; ${w.fix}`, 'warn');
    // Even a finished run's log is repaired: it is rebuilt from the iterations' markers.
    run.repairLog(plan.inventory);
  }
  const last = run.lastCompleteIteration();
  return { run, c, signal: o.signal, ...(plan ? { plan } : {}), lock, emit, log, last, startedAt: last, runner, pool };
}

/**
 * Refuses a new run's mistakes before any work, so they leave no run directory: no test suite, a
 * workspace name that is not UTF-8, a task file whose files the workspace lacks, an unreadable
 * starting model, a context too short for an action, a run larger than the machine's memory,
 * replay with a chat model. Returns the run id, the test runner and the model's action format.
 */
function checkNewRun(c: TrainConfig, name: string | undefined): { runId: string; runner: TestRunner; format: 'compact' | 'chat' } {
  const runId = newRunId({ name: name ?? path.basename(path.resolve(c.workspace)), estimator: c.estimator, seed: c.seed });
  const runner = detectRunner(c.workspace, c.testCommand ? { command: c.testCommand } : undefined);
  assertWorkspaceNames(c.workspace);
  if (c.taskSource === 'file') assertWorkspaceHoldsTasks(readTaskFile(c.tasksFile!), c.workspace, c.tasksFile!);
  const start = loadCheckpoint(c.model || embeddedModelDir(), { optimizer: false });
  checkActionRoom(start.weights.config.max_position_embeddings, c.maxActionTokens, start.dir);
  assertRunFits(c, start.weights.config);
  const format = modelActionFormat(c.model || embeddedModelDir());
  if (format.kind === 'chat' && c.replayCoef > 0) {
    throw new TurnwiseError(
      'invalid-input',
      `replayCoef ${c.replayCoef} replays turnwise-tiny's warm-start demonstrations, which are in the compact format; ${start.dir} writes in its chat format`,
      { hint: 'set "replayCoef" to 0 in turnwise.json for a chat model' },
    );
  }
  return { runId, runner, format: format.kind };
}

/** Ends a resume whose iterations are all complete: it says so and changes nothing. */
function nothingToDo(s: RunState): TrainRunResult {
  s.lock.release();
  s.log(s.plan!.nothingToDo!);
  return result(s, 'finished');
}

/**
 * Marks the run running: keeps what a resume puts back if it completes nothing, raises the
 * iteration count a resume asked for, discards what an interrupted iteration left.
 */
function markRunning(s: RunState): void {
  const { run, plan } = s;
  if (plan) s.before = { status: readIfFile(run.file('status.json')), config: readIfFile(run.file('config.json')) };
  if (plan && plan.iterations !== s.c.iterations) {
    s.log(`the run now goes to iteration ${plan.iterations} (its config.json said ${s.c.iterations})`);
    s.c = { ...s.c, iterations: plan.iterations };
    writeJsonAtomic(run.file('config.json'), { ...run.readConfig<Record<string, unknown>>(), iterations: plan.iterations });
  }
  const removed = run.discardAfter(s.last);
  if (removed.length)
    s.log(`discarded the incomplete iteration${removed.length > 1 ? 's' : ''} ${removed.join(', ')} left by an interrupted run`);
  run.writeStatus({ state: 'running', pid: process.pid, iterations: s.c.iterations, lastCompleteIteration: s.last });
}

/**
 * However the process ends while the run is going (a second Ctrl-C, an uncaught error, the
 * editor closing), the run directory says stopped and holds no half iteration. Synchronous, so it
 * holds even on process.exit(). Returns the function that removes the guard.
 */
function guardExit(s: RunState): () => void {
  const onExit = () => {
    try {
      s.run.discardAfter(s.last);
      s.run.writeStatus({ state: 'stopped', iterations: s.c.iterations, lastCompleteIteration: s.last });
    } catch {
      // nothing more can be done while exiting
    }
  };
  process.on('exit', onExit);
  return () => process.off('exit', onExit);
}

/** Connects a resume's sandboxes (a new run has them already); inside the failure handling, so a resume that cannot reach its engine leaves the run as it was. */
async function connectSandboxes(s: RunState): Promise<void> {
  s.runner ??= detectRunner(s.c.workspace, s.c.testCommand ? { command: s.c.testCommand } : undefined);
  s.pool ??= await connectRunPool(s.run.runId, s.c);
}

/** Says the run has started: its directory, iterations and tasks, and the iteration a resume continues from. */
function announce(s: RunState, tasks: RunTasks): void {
  s.emit({
    type: 'run-started',
    runDir: s.run.dir,
    iterations: s.c.iterations,
    trainTasks: tasks.train.length,
    heldoutTasks: tasks.heldout.length,
    ...(s.last >= 0 ? { resumedFrom: s.last } : {}),
  });
}

/**
 * Opens the policy the run continues from (its starting model, or its last checkpoint on a
 * resume) with the workspace's snapshot, and the replayed demonstrations beside it.
 */
async function openPolicy(s: RunState): Promise<{ harness: Harness; updateTokens: number; replay?: ReplaySource }> {
  const { run, c, last } = s;
  const startModel = (run.readConfig<{ startModel?: string }>().startModel as string) || c.model || embeddedModelDir();
  const from = last >= 0 ? run.checkpointDir(last) : startModel;
  s.emit({ type: 'phase', iteration: Math.max(0, last), phase: 'snapshot', detail: 'workspace snapshot and policy' });
  // A LoRA run starts a fresh adapter on its model; once checkpoint 0 exists, every checkpoint
  // is an adapter that names its base.
  const lora = last < 0 && c.lora ? { config: c.lora, seed: seedOf(c.seed, 'lora-init') } : undefined;
  // The update's token cap, and whether decode steps pack the weights (where the plan with their copy fits).
  const memory = runMemoryPlan(c, folderModel(startModel).config);
  const harness = await openHarness({
    runId: run.runId,
    workspace: c.workspace,
    language: s.runner!.language,
    checkpoint: from,
    referenceDir: last >= 0 ? run.checkpointDir(0) : undefined,
    ...(lora ? { lora } : {}),
    ...(c.lora ? { loraDropoutSeed: seedOf(c.seed, 'lora-dropout') } : {}),
    config: c,
    pool: s.pool,
    packDecodeWeights: memory.packDecodeWeights,
    onLog: (m) => s.log(m, 'warn'),
  });
  s.harness = harness;
  if (last < 0 && harness.actionFormat.kind === 'chat')
    s.log(`the model writes its actions in its own chat format (template: ${harness.actionFormat.source})`);
  for (const line of memory.lines) s.log(line);
  check(s);
  // Seeded by the run, so a resume replays from the same pool.
  const replay = c.replayCoef > 0 && harness.codec ? await ReplaySource.create(harness.codec, seedOf(c.seed, 'replay-pool')) : undefined;
  return { harness, updateTokens: memory.updateTokens, ...(replay ? { replay } : {}) };
}

/**
 * The run's state ready to train; a resume reads its past train episodes back, so `informative`
 * picks and the branch budget is split as the uninterrupted run would have.
 */
function trainingState(s: RunState, tasks: RunTasks, policy: { harness: Harness; updateTokens: number; replay?: ReplaySource }): Training {
  const informative = s.c.taskSampling === 'informative';
  const branching = s.c.branchEpisodes > 0;
  // Each past iteration's episodes read once, for whichever of the two needs them.
  const past = informative || branching ? pastTrainEpisodes(s.run, s.last) : [];
  const pastGroups = informative ? past.flatMap((t) => groupOutcomes(t)) : [];
  const branches = new Map<string, BranchStats>();
  if (branching) for (const trajs of past) branchStats(trajs, branches);
  return Object.assign(s, policy, { tasks, pastGroups, branches, budget: { end: Infinity, evalMs: 0, slowestMs: 0 } });
}

/** Starts the time budget's clock: at each start of the run, after its iteration 0. */
function startBudget(t: Training): void {
  if (t.c.maxMinutes > 0) t.budget.end = Date.now() + t.c.maxMinutes * 60_000;
}

// ── an iteration ───────────────────────────────────────────────────────────────────────────────

/** Tasks of iteration n: a seeded draw from the train split (taskSampling), groupSize episodes each. */
function iterationJobs(t: Training, n: number): EpisodeJob[] {
  const { c } = t;
  const picked = pickTasks(t.tasks.train, c.tasksPerIteration, c.seed, n, c.taskSampling, alikeStreaks(t.pastGroups));
  return picked.flatMap((task, ti) =>
    Array.from({ length: c.groupSize }, (_, g) => ({
      task,
      episodeId: `it${n}-t${ti}-g${g}`,
      groupId: `it${n}-t${ti}`,
      seed: seedOf(c.seed, n, ti, g),
      split: 'train' as const,
    })),
  );
}

/**
 * Rollouts of iteration n with the policy of checkpoint n−1, and the reward canary (canary.ts)
 * beside them on a train task in turn: its failure stops the run before the advantages and the
 * update use this iteration's rewards, as does the failure of every episode. Then the branch
 * budget (branchEpisodes) on the groups that ended alike (branching.ts).
 */
async function rollouts(t: Training, n: number, jobs: EpisodeJob[]): Promise<TrainSteps['rollouts']> {
  let done = 0;
  let total = jobs.length;
  const onEpisode = (x: Trajectory) => {
    done++;
    t.emit({ type: 'phase', iteration: n, phase: 'rollout', done, total });
    emitEpisode(t.emit, n, x);
  };
  t.emit({ type: 'phase', iteration: n, phase: 'rollout', done: 0, total });
  const ct = canaryTask(t.tasks.train, n);
  const canary = ct
    ? runCanary(t.harness, ct, t.c, `in iteration ${n}`).then(
        (r) => ({ r }),
        (e: unknown) => ({ e }),
      )
    : undefined;
  const options = {
    ...rolloutOptions(t.harness, t.c, t.run.checkpointDir(n - 1), n, t.signal, onEpisode),
    recoveryFeedback: t.c.recoveryFeedback,
  };
  const first = await runRollouts(jobs, options);
  const checked = await canary;
  check(t);
  if (checked && 'e' in checked) throw checked.e;
  const branchJobs =
    t.c.branchEpisodes > 0
      ? planBranches(first.trajectories, {
          budget: t.c.branchEpisodes,
          exploration: t.c.branchExploration,
          redraws: t.c.branchRedraws,
          seed: t.c.seed,
          iteration: n,
          stats: t.branches,
          tasks: t.tasks.byId,
        })
      : [];
  let ro = first;
  if (branchJobs.length) {
    total += branchJobs.length;
    const more = await runRollouts(branchJobs, options);
    check(t);
    ro = concatRollouts(first, more);
  }
  const trajs = ro.trajectories;
  const failed = trajs.filter((x) => x.failure);
  if (failed.length === trajs.length) {
    throw new TurnwiseError('sandbox-failed', `every episode of iteration ${n} failed; the first: ${failed[0]?.failure}`, {
      hint: "check Docker (`turnwise doctor`) and the workspace's tests",
    });
  }
  if (failed.length)
    t.log(`${failed.length} of ${trajs.length} episodes failed and are left out of the update (first: ${failed[0].failure})`, 'warn');
  return { ...ro, canaryS: checked ? checked.r.durationMs / 1000 : NaN, branchEpisodes: branchJobs.length };
}

/**
 * Advantages: the run's estimator over the scored episodes, written onto their turns; failed
 * episodes get none. An estimator that reads turns against the reference fix gets the teacher
 * pass first (teacher.ts), on the policy that sampled them.
 */
async function advantages(t: Training, n: number, trajs: Trajectory[]): Promise<TrainSteps['advantages']> {
  t.emit({ type: 'phase', iteration: n, phase: 'advantages' });
  const t0 = Date.now();
  const scored = trajs.filter((x) => !x.failure);
  const spec = getEstimator(t.c.estimator);
  const teacher = spec.needs
    ? await teacherPass(t.harness, scored, t.tasks.byId, {
        workspace: t.c.workspace,
        temperature: t.c.temperature,
        maxActionTokens: t.c.maxActionTokens,
        ...spec.needs,
      })
    : undefined;
  check(t);
  // A group is one picked task slot (the same task may be picked twice in one iteration).
  const report = await trajectoryAdvantages(
    scored.map((x) => ({ ...x, taskId: x.groupId })),
    t.c.estimator,
    t.c.estimatorParams,
  );
  writeTurnAdvantages(scored, report.rows);
  addBatchBaseline(scored, t.c.batchBaseline);
  // Branches and their parents: the turns they share are trained once, with the subtree's credit.
  shareTreeCredit(scored);
  reweightByDiagnosis(scored, t.c.diagnosisWeights);
  chargeByDiagnosis(scored, t.c.diagnosisCharges);
  return { scored, report, seconds: (Date.now() - t0) / 1000, ...(teacher ? { teacher } : {}) };
}

/** The policy update on the scored episodes (update.ts). */
async function update(t: Training, n: number, scored: Trajectory[]): Promise<PolicyUpdate> {
  t.emit({ type: 'phase', iteration: n, phase: 'update' });
  const u = await updatePolicy(t.harness, scored, {
    config: t.c,
    iteration: n,
    tasks: t.tasks.byId,
    updateTokens: t.updateTokens,
    ...(t.replay ? { replay: t.replay } : {}),
    check: () => check(t),
  });
  check(t);
  return u;
}

/**
 * Writes the policy as checkpoint n with the action format it writes in (action_format.json), so
 * a resume and `eval --run` prompt it the same way; a chat model's full checkpoint also carries its
 * template as chat_template.jinja (an adapter's is its base's).
 */
async function checkpoint(t: Training, n: number): Promise<void> {
  const dir = t.run.checkpointDir(n);
  await t.harness.policy.saveCheckpoint(dir);
  const f = t.harness.actionFormat;
  if (
    f.kind === 'chat' &&
    !fs.existsSync(path.join(dir, 'adapter_config.json')) &&
    path.resolve(f.source) !== path.resolve(dir, 'chat_template.jinja')
  ) {
    writeFileAtomic(path.join(dir, 'chat_template.jinja'), f.template);
  }
  recordActionFormat(dir, f.kind);
  t.emit({ type: 'checkpoint-written', iteration: n, path: dir });
}

/**
 * Whether the time budget fits another iteration after the one that just did `workMs` of work:
 * going on costs that one's evaluation where evalEvery makes one due anyway, then an iteration as
 * long as the longest so far and the evaluation that ends the run (the last iteration is always
 * evaluated), each as long as the longest so far. When it does not fit, the iteration just done
 * is the last and is evaluated whatever evalEvery says, so the run ends on a held-out measurement.
 */
export function fitsAnotherIteration(b: Budget & { now: number; workMs: number; evaluatedNow: boolean }): boolean {
  return b.now + (b.evaluatedNow ? b.evalMs : 0) + Math.max(b.slowestMs, b.workMs) + b.evalMs <= b.end;
}

/** Whether iteration n is evaluated by evalEvery (the first and the last always are). */
function evalDue(c: TrainConfig, n: number): boolean {
  return n === 0 || n === c.iterations || (c.evalEvery > 0 && n % c.evalEvery === 0);
}

/**
 * The held-out evaluation of checkpoint n when `due`: greedy episodes give pass@1 of the policy's
 * best guess; evalSamples sampled ones per task the success rate of the policy RL changes.
 * The starting evaluation stops the run when none of its episodes could be scored: every later
 * one would be a row of nulls.
 */
async function evaluation(t: Training, n: number, due: boolean): Promise<Evaluation> {
  const { c, tasks } = t;
  if (!tasks.heldout.length || !due) return { m: {}, trajs: [] };
  const total = tasks.heldout.length * (1 + c.evalSamples);
  t.emit({ type: 'phase', iteration: n, phase: 'eval', done: 0, total });
  const t0 = Date.now();
  let done = 0;
  // The held-out episodes measure the policy being trained: float32, whatever the rollouts sample at.
  const quantized = (await t.harness.policy.info()).rolloutPrecision !== 'float32';
  if (quantized) await t.harness.policy.setRolloutPrecision('float32');
  let res: Awaited<ReturnType<typeof evaluateGreedyThenSampled>>;
  try {
    res = await evaluateGreedyThenSampled(t.harness, tasks.heldout, {
      iteration: n,
      seed: evaluationSeed(c),
      config: c,
      checkpoint: t.run.checkpointDir(n),
      signal: t.signal,
      onEpisode: (x: Trajectory) => {
        done++;
        t.emit({ type: 'phase', iteration: n, phase: 'eval', done, total });
        emitEpisode(t.emit, n, x);
      },
      samples: c.evalSamples,
    });
  } finally {
    if (quantized) await t.harness.policy.setRolloutPrecision(c.rolloutPrecision);
  }
  check(t);
  if (!res) throw new Stopped();
  const m = { ...episodeMetrics('heldout/', res.greedy), ...(c.evalSamples > 0 ? episodeMetrics('heldout/sampled/', res.sampled) : {}) };
  const trajs = [...res.greedy, ...res.sampled];
  const failed = trajs.filter(unscored);
  if (n === 0 && trajs.length && failed.length === trajs.length) {
    throw new TurnwiseError(
      'sandbox-failed',
      `every one of the ${trajs.length} held-out episodes of the starting evaluation failed; the first: ${whyUnscored(failed[0])}`,
      {
        hint: 'run one of the held-out tasks with `turnwise episode` or check the workspace and Docker with `turnwise doctor`; nothing of the run was kept',
      },
    );
  }
  if (failed.length && n > 0)
    t.log(
      `${failed.length} of ${trajs.length} held-out episodes of iteration ${n} failed or could not be scored and are left out of its held-out metrics (first: ${whyUnscored(failed[0])})`,
      'warn',
    );
  const evalS = (Date.now() - t0) / 1000;
  t.budget.evalMs = Math.max(t.budget.evalMs, evalS * 1000);
  // PASS@(k,T) goes in the iteration's event: metrics rows stay flat numbers.
  const passKT = sampledPassAtKT(trajs);
  return {
    m: { ...m, 'time/eval_s': evalS, ...(res.canary ? { 'time/eval_canary_s': res.canary.durationMs / 1000 } : {}) },
    trajs,
    ...(passKT ? { passAtKT: passKT } : {}),
  };
}

/**
 * Commits iteration n: its episodes, then its marker holding the metrics row (an iteration counts
 * once that is written), the status and the event. `train` is absent for iteration 0.
 */
function commit(t: Training, n: number, ev: Evaluation, train?: TrainSteps): void {
  if (train) {
    t.run.writeTrajectories(n, 'train', train.rollouts.trajectories);
    if (t.c.taskSampling === 'informative') t.pastGroups.push(...groupOutcomes(train.rollouts.trajectories));
    if (t.c.branchEpisodes > 0) branchStats(train.rollouts.trajectories, t.branches);
  }
  // Iteration 0 is its evaluation: its heldout.jsonl is written even when there is no held-out task.
  if (ev.trajs.length || n === 0) t.run.writeTrajectories(n, 'heldout', ev.trajs);
  const row: MetricsRow = {
    schema: SCHEMA.metrics,
    iteration: n,
    ...jsonSafe({ ...(train ? trainMetrics(t.c, train) : {}), ...ev.m }),
  } as MetricsRow;
  t.run.commitIteration(row);
  t.last = n;
  t.run.writeStatus({ state: 'running', pid: process.pid, iterations: t.c.iterations, lastCompleteIteration: n });
  t.emit({ type: 'iteration-finished', iteration: n, metrics: row, ...(ev.passAtKT ? { pass_at_k_t: ev.passAtKT } : {}) });
}

/** The train keys of a metrics row (docs/run-directory.md#metrics), in the row's order. */
function trainMetrics(c: TrainConfig, s: TrainSteps): Record<string, number> {
  const trajs = s.rollouts.trajectories;
  const { scored, report } = s.advantages;
  const advs = scored.flatMap((x) => x.turns.map((turn) => turn.advantage ?? 0));
  // The train pass rate's key is tests/pass_rate (held-out ones keep their prefix).
  const { pass_rate: trainPassRate, ...trainEpisodes } = episodeMetrics('', trajs);
  const groups = mixedGroups(trajs);
  return {
    ...trainEpisodes,
    'tests/pass_rate': trainPassRate,
    frac_reward_zero_std: report.diagnostics.frac_reward_zero_std,
    'groups/mixed': groups.mixed,
    'groups/mixed_first': groups.mixedFirst,
    'rollout/branch_episodes': s.rollouts.branchEpisodes,
    'rollout/branch_new_action': branchNewActions(trajs),
    'adv/grad_mass': gradientMass(scored),
    'adv/mean': mean(advs),
    'adv/std': advs.length > 1 ? std(advs) : 0,
    'adv/abs_mean': mean(advs.map(Math.abs)),
    'adv/same_outcome_share': sameOutcomeAdvantageShare(scored),
    // Estimators that read the reference fix: the share of episodes that took the group baseline alone, and the teacher pass.
    'adv/reference_fallback': report.diagnostics.frac_reference_fallback ?? NaN,
    'teacher/rows': s.advantages.teacher?.rows ?? NaN,
    'time/teacher_s': s.advantages.teacher?.seconds ?? NaN,
    ...updateMetrics(s.update, c),
    'time/rollout_s': s.rollouts.wallMs / 1000,
    'time/generation_s': s.rollouts.generateMs / 1000,
    'time/sandbox_s': s.rollouts.sandboxMs / 1000,
    'time/reward_s': s.rollouts.rewardMs / 1000,
    'time/canary_s': s.rollouts.canaryS,
    'time/advantages_s': s.advantages.seconds,
    'time/update_s': s.update.seconds,
    'time/iteration_s': (Date.now() - s.startedMs) / 1000,
    'rollout/mean_batch': s.rollouts.meanBatch,
    'rollout/cached_turns': cachedTurnFraction(trajs),
  };
}

// ── finish ─────────────────────────────────────────────────────────────────────────────────────

/** Ends a run whose iterations are all done. */
function finish(t: Training): TrainRunResult {
  t.run.writeStatus({ state: 'finished', iterations: t.c.iterations, lastCompleteIteration: t.last });
  t.emit({ type: 'run-finished', iterations: t.c.iterations, runDir: t.run.dir });
  return result(t, 'finished');
}

/** Ends a run after iteration n, the last its time budget fits; a resume goes on with a new budget. */
function stopOutOfTime(t: Training, n: number): TrainRunResult {
  t.run.writeStatus({ state: 'stopped', iterations: t.c.iterations, lastCompleteIteration: t.last });
  const reason = `its time budget of ${t.c.maxMinutes} min would pass during another iteration (maxMinutes); resume it to go on`;
  t.log(`stopping after iteration ${n}: ${reason}`);
  t.emit({ type: 'run-stopped', lastCompleteIteration: t.last, reason, outOfTime: true });
  return result(t, 'out-of-time');
}

/** Ends a run the signal stopped: the unfinished iteration discarded, the run resumable. */
function stop(s: RunState): TrainRunResult {
  s.run.discardAfter(s.last);
  s.run.writeStatus({ state: 'stopped', iterations: s.c.iterations, lastCompleteIteration: s.last });
  s.emit({ type: 'run-stopped', lastCompleteIteration: s.last, reason: 'stopped by the user' });
  return result(s, 'stopped');
}

/**
 * Ends a run that failed with `e`: a new run with no complete iteration leaves nothing, a resume
 * that completed none leaves the run's files as they were, any other run says failed.
 */
async function fail(s: RunState, e: unknown): Promise<void> {
  await s.harness?.close().catch(() => undefined);
  s.harness = undefined;
  if (!s.plan && s.last < 0) {
    s.lock.release();
    fs.rmSync(s.run.dir, { recursive: true, force: true });
  } else if (s.before && s.last === s.startedAt) {
    s.run.discardAfter(s.last);
    restoreFile(s.run.file('status.json'), s.before.status);
    restoreFile(s.run.file('config.json'), s.before.config);
  } else {
    s.run.writeStatus({ state: 'failed', iterations: s.c.iterations, lastCompleteIteration: s.last, error: errorToJson(e) });
  }
  s.emit({ type: 'run-failed', error: errorToJson(e) });
}

function result(s: RunState, state: TrainRunResult['state']): TrainRunResult {
  return { runDir: s.run.dir, runId: s.run.runId, metrics: s.run.readMetrics(), state, newIterations: s.last - s.startedAt };
}

/** Throws Stopped once the run's signal has aborted. */
function check(s: RunState): void {
  if (s.signal?.aborted) throw new Stopped('stopped');
}

/** An episode that gives no score: it failed, or its tests gave no usable report (reward NaN). */
const unscored = (t: Trajectory) => !isScored(t);
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
