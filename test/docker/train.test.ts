// Docker tier: real training runs on the demo workspace with the embedded policy (real sandboxes,
// real ONNX Runtime in the policy worker), at tiny settings. Checks the run directory a run
// leaves (metrics rows, loadable checkpoints, trajectories with tokens, log-probs and
// advantages), the event stream, and the three ways a run ends early: SIGKILL then --resume,
// SIGINT (exit 130, state stopped), both without a container left.
import * as assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseEventLine, type RunEvent } from '../../src/core/events';
import { seedOf } from '../../src/core/random';
import { RunDir } from '../../src/core/run';
import { loadCheckpoint } from '../../src/policy/files/checkpoint';
import { connectEngine } from '../../src/sandbox/engine';
import { LABEL } from '../../src/sandbox';
import { resolveTrainConfig } from '../../src/train/config';
import { trainRun } from '../../src/train/run';
import { main } from '../../src/cli/main';
import type { Trajectory } from '../../src/core/schema';
import { readTrajectories } from '../../src/core/trajectory';
import { sampledPassAtKT } from '../../src/eval/pass-at-k';
import { alikeStreaks, pastGroupOutcomes, pickTasks } from '../../src/train/task-picking';
import { episodeKind } from '../../src/eval/compare';
import { readEvalResults } from '../../src/eval/results';

const root = path.join(__dirname, '..', '..');
const demo = path.join(root, 'examples', 'demo-python');

/**
 * The smallest run that still does everything: 4 episodes per iteration of at most 2 turns. A
 * group of 4 (not 2) so that its episodes differ often enough for an update: a warm-started
 * policy acts alike in two samples, a tie leaves every advantage 0, and no update runs.
 */
const TINY = {
  workspace: demo,
  maxTasks: 6,
  heldoutFraction: 0.2,
  iterations: 2,
  tasksPerIteration: 1,
  groupSize: 4,
  // Two more episodes where the group ended alike, from its episodes' first turn (train/branching.ts).
  branchEpisodes: 2,
  maxTurns: 2,
  concurrency: 2,
  maxActionTokens: 32,
  minibatches: 1,
  evalEvery: 0,
  executionProvider: 'cpu',
  seed: 3,
};

async function containersOf(runId: string): Promise<string[]> {
  const { docker } = connectEngine();
  const list = await docker.listContainers({ all: true, filters: { label: [`${LABEL.run}=${runId}`] } });
  return list.map((c) => c.Names.join(','));
}

async function noContainersEventually(runId: string, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  let left = await containersOf(runId);
  while (left.length && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 1000));
    left = await containersOf(runId);
  }
  assert.deepEqual(left, [], `containers of run ${runId} left behind`);
}

/** The CLI as a child process (`node -r tsx/cjs src/cli/main.ts …`: the node process itself, so a signal reaches it). */
class CliChild {
  readonly proc: ChildProcess;
  readonly events: RunEvent[] = [];
  stderr = '';
  private waiters: { pred: (e: RunEvent) => boolean; resolve: (e: RunEvent) => void }[] = [];
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(args: string[]) {
    this.proc = spawn(process.execPath, ['-r', 'tsx/cjs', path.join(root, 'src', 'cli', 'main.ts'), ...args], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let buf = '';
    this.proc.stdout!.on('data', (d: Buffer) => {
      buf += d.toString('utf8');
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const e = parseEventLine(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
        if (!e) continue;
        this.events.push(e);
        this.waiters = this.waiters.filter((w) => (w.pred(e) ? (w.resolve(e), false) : true));
      }
    });
    this.proc.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString('utf8')));
    this.exited = new Promise((resolve) => this.proc.on('exit', (code, signal) => resolve({ code, signal })));
  }

  /** The first event (already seen or coming) that matches; rejects if the process exits first. */
  waitFor(pred: (e: RunEvent) => boolean, what: string): Promise<RunEvent> {
    const seen = this.events.find(pred);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve, reject) => {
      this.waiters.push({ pred, resolve });
      void this.exited.then((x) =>
        reject(new Error(`the CLI exited (${x.code ?? x.signal}) before ${what}:\n${this.stderr.slice(-3000)}`)),
      );
    });
  }
}

/** Iteration 1's metrics row, from its iteration-finished event. */
function m1Row(events: RunEvent[]): Record<string, unknown> {
  const e = events.find((x) => x.type === 'iteration-finished' && x.iteration === 1);
  assert.ok(e && e.type === 'iteration-finished');
  return e.metrics as Record<string, unknown>;
}

function assertRunDir(run: RunDir, iterations: number): void {
  const metrics = run.readMetrics();
  assert.deepEqual(
    metrics.map((m) => m.iteration),
    Array.from({ length: iterations + 1 }, (_, i) => i),
    'one metrics row per iteration, in order, none twice',
  );
  const lines = fs.readFileSync(run.file('metrics.jsonl'), 'utf8').split('\n').filter(Boolean);
  assert.equal(lines.length, iterations + 1, 'no partial or extra line');
  for (const l of lines) JSON.parse(l);
  for (let n = 0; n <= iterations; n++) {
    const ck = loadCheckpoint(run.checkpointDir(n));
    assert.ok(ck.weights.config.num_hidden_layers > 0 && ck.weights.tensors.size > 0, `checkpoint ${n} loads`);
  }
  for (let n = 1; n <= iterations; n++) {
    const m = metrics[n];
    for (const k of [
      'reward/mean',
      'tests/pass_rate',
      'resolved',
      'turns/mean',
      'format_errors',
      'time/rollout_s',
      'time/generation_s',
      'time/sandbox_s',
      'time/reward_s',
      'time/advantages_s',
      'time/update_s',
      'rollout/cached_turns',
      'update/dlogp_pos',
      'update/dlogp_neg',
      'update/kl_moved',
      'update/max_token_fall',
      'groups/mixed',
      'groups/mixed_first',
      'rollout/branch_episodes',
      'rollout/branch_new_action',
      'adv/grad_mass',
    ])
      assert.ok(k in m, `metrics row ${n} has ${k}`);
    const shift = [m['update/dlogp_pos'], m['update/dlogp_neg']];
    assert.ok(
      shift.every((x) => x === null || (typeof x === 'number' && Number.isFinite(x))),
      `log-prob shifts ${shift}`,
    );
    // A step moved something: the KL from the rollout policy and the largest fall are ≥ 0 (null without a step).
    const moved = [m['update/kl_moved'], m['update/max_token_fall']];
    assert.ok(
      m['update/steps'] === 0 ? moved.every((x) => x === null) : moved.every((x) => typeof x === 'number' && x >= 0),
      `update moved ${moved} after ${m['update/steps']} step(s)`,
    );
    const trajs = run.readTrajectories(n, 'train');
    const branches = m['rollout/branch_episodes'] as number;
    assert.equal(
      trajs.length,
      TINY.tasksPerIteration * TINY.groupSize + branches,
      `iteration ${n}: tasksPerIteration × groupSize trajectories, and the branches`,
    );
    // Branches go to a group whose first episodes all ended alike, all of the budget.
    assert.equal(branches, m['groups/mixed_first'] === 0 ? TINY.branchEpisodes : 0, `iteration ${n}: branches ${branches}`);
    const fresh = m['rollout/branch_new_action'];
    if (trajs.some((t) => t.branch && !t.failure))
      assert.ok(typeof fresh === 'number' && fresh >= 0 && fresh <= 1, `iteration ${n}: branches with a new first action ${fresh}`);
    for (const b of trajs.filter((t) => t.branch)) {
      // No redraws by default: a branch's first own turn is drawn once.
      assert.equal(b.branch!.redrawn, undefined, `branch ${b.trajId} redrawn ${b.branch!.redrawn}`);
      const parent = trajs.find((t) => t.trajId === b.branch!.parent && !t.branch);
      assert.ok(parent, `branch ${b.trajId} has its parent in the iteration`);
      assert.equal(b.groupId, parent!.groupId);
      assert.equal(b.branch!.at, 1, 'with two turns, a branch replays the first');
      assert.equal(b.turns[0].action, parent!.turns[0].action);
      assert.equal(b.turns[0].inherited, true);
      if (!b.failure) assert.equal(b.turns[0].advantage, 0, 'a replayed turn is trained in its parent');
    }
    for (const t of trajs) {
      assert.equal(t.iteration, n);
      assert.ok(t.turns.length >= 1 && t.turns.length <= 2, `turns ${t.turns.length}`);
      for (const turn of t.turns) {
        assert.ok(turn.tokenIds && turn.tokenIds.length > 0 && turn.tokenIds.length <= 32, 'token ids of the action');
        assert.equal(turn.logprobs?.length, turn.tokenIds!.length, 'one log-prob per token');
        assert.ok(
          turn.logprobs!.every((x) => Number.isFinite(x) && x <= 0),
          'log-probs are ≤ 0',
        );
        if (!t.failure) assert.equal(typeof turn.advantage, 'number', 'train turns carry an advantage');
      }
    }
  }
  const status = run.readStatus()!;
  assert.equal(status.state, 'finished');
  assert.equal(status.lastCompleteIteration, iterations);
}

describe('docker: turnwise train, a real tiny run', function () {
  this.timeout(900_000);
  let dir: string;
  let model: string;
  let tasksFile: string;

  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-train-docker-'));
    // The shipped model is rewritten by a background job: train from a copy.
    model = path.join(dir, 'model');
    fs.cpSync(path.join(root, 'models', 'turnwise-tiny'), model, { recursive: true });
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('a run: metrics rows 0..N, checkpoints that load, trajectories with tokens and advantages, events in order, no container left', async () => {
    const events: RunEvent[] = [];
    const runs = path.join(dir, 'runs-a');
    // With the replay term (one generated demonstration per update minibatch).
    const r = await trainRun({
      config: resolveTrainConfig({ ...TINY, model, evalSamples: 2, replayCoef: 0.5, replayRows: 1 }),
      runsRoot: runs,
      onEvent: (e) => events.push(e),
    });
    assert.equal(r.state, 'finished');
    const run = RunDir.open(r.runDir);
    assertRunDir(run, 2);
    const splits = run.readSplits();
    assert.ok(splits.heldout.length >= 1 && splits.train.length >= 1);
    // Held-out: one greedy episode per task, then evalSamples sampled ones, at 0 and at the end.
    const h = splits.heldout.length;
    const [m0, , m2] = run.readMetrics();
    for (const [n, m] of [
      [0, m0],
      [2, m2],
    ] as const) {
      const ev = run.readTrajectories(n, 'heldout');
      assert.equal(ev.length, h * 3, `iteration ${n}: held-out greedy + 2 sampled per task`);
      assert.equal(m['heldout/episodes'], h);
      assert.equal(m['heldout/sampled/episodes'], 2 * h);
      assert.equal(typeof m['heldout/sampled/resolved'], 'number');
    }
    // Every update trained the replay rows too: the warm-started policy's NLL on demonstrations
    // like its own (small, not 0; an untrained model's is about ln 260 = 5.6).
    assert.ok(
      run.readMetrics().some((m) => (m['update/steps'] as number) > 0),
      'some iteration updated the policy (else the replay check below checks nothing)',
    );
    for (const m of run.readMetrics().slice(1)) {
      assert.equal(m['sampler/kl'], null, 'float32 rollouts: nothing to correct');
      if ((m['update/steps'] as number) > 0)
        assert.ok(
          (m['update/replay_loss'] as number) > 0.001 && (m['update/replay_loss'] as number) < 1.5,
          `replay loss ${m['update/replay_loss']}`,
        );
      else assert.equal(m['update/replay_loss'], null, 'no update, no replay');
    }
    // The sampled episodes draw the same seeds at every evaluation (only the policy differs).
    const seeds = (n: number) =>
      run
        .readTrajectories(n, 'heldout')
        .filter((t) => t.trajId.startsWith('evals-'))
        .map((t) => `${t.taskId}:${t.seed}`)
        .sort();
    assert.equal(new Set(seeds(0)).size, 2 * h, 'distinct seeds per sample');
    assert.deepEqual(seeds(0), seeds(2));
    // They draw from the run's taskSeed (0), not its seed (3): runs that differ only in seed pair.
    const heldoutIds = [...new Set(run.readTrajectories(0, 'heldout').map((t) => t.taskId))];
    assert.deepEqual(seeds(0), heldoutIds.flatMap((id) => [0, 1].map((k) => `${id}:${seedOf(0, 'eval-sample', id, k)}`)).sort());
    // The evaluations' events carry PASS@(k,T) of their sampled episodes (k up to 2, T up to the turn limit).
    for (const n of [0, 2]) {
      const fin = events.find((e) => e.type === 'iteration-finished' && e.iteration === n) as Extract<
        RunEvent,
        { type: 'iteration-finished' }
      >;
      assert.deepEqual(fin.pass_at_k_t, sampledPassAtKT(run.readTrajectories(n, 'heldout')), `iteration ${n}`);
      assert.deepEqual(Object.keys(fin.pass_at_k_t!), ['1', '2']);
      assert.equal(Object.keys(fin.pass_at_k_t!['1']).length, TINY.maxTurns);
    }
    assert.equal(
      (events.find((e) => e.type === 'iteration-finished' && e.iteration === 1) as { pass_at_k_t?: unknown }).pass_at_k_t,
      undefined,
      'no evaluation at iteration 1',
    );
    // Later runs reuse these tasks (no second synthesis).
    tasksFile = path.join(dir, 'tasks.jsonl');
    fs.copyFileSync(run.file('tasks.jsonl'), tasksFile);
    // `turnwise eval --run` evaluates the run's held-out tasks with its last checkpoint and its own
    // settings and seed: it makes the episodes the run's last evaluation made, pair for pair.
    let out = '';
    let err = '';
    const againFile = path.join(dir, 'again.jsonl');
    const code = await main(
      [
        'eval',
        '--run',
        r.runDir,
        '--samples',
        '2',
        '--out',
        againFile,
        '--compare',
        run.file('iterations', '2', 'heldout.jsonl'),
        '--json',
      ],
      { out: (x) => (out += x + '\n'), err: (x) => (err += x + '\n') },
    );
    assert.equal(code, 0, err);
    const again = JSON.parse(out);
    // The same actions turn for turn (the run's turn limit, action length and temperature), not
    // only the same outcomes.
    const actionsOf = (ts: Trajectory[]) => new Map(ts.map((t) => [`${t.taskId}:${t.seed}`, t.turns.map((u) => u.action)]));
    const redone = actionsOf(readTrajectories(againFile));
    assert.deepEqual(redone, actionsOf(run.readTrajectories(2, 'heldout')));
    assert.equal(again.model, run.checkpointDir(2));
    assert.equal(again.taskCount, h);
    assert.deepEqual(again.compare.greedy, { pairs: h, gained: 0, lost: 0, p_value: null, task_nets: {}, p_value_tasks: null });
    assert.deepEqual(again.compare.sampled, { pairs: 2 * h, gained: 0, lost: 0, p_value: null, task_nets: {}, p_value_tasks: null });
    assert.deepEqual(again.compare.unpaired, { before: 0, after: 0 });
    assert.equal(again.resolved, m2['heldout/resolved']);

    const types = events.map((e) => e.type);
    assert.equal(types.filter((t) => t === 'run-started').length, 1);
    assert.equal(types[types.length - 1], 'run-finished');
    assert.ok(events.every((e) => e.runId === r.runId));
    const idx = (p: (e: RunEvent) => boolean) => events.findIndex(p);
    const started = idx((e) => e.type === 'run-started');
    const fin = [0, 1, 2].map((n) => idx((e) => e.type === 'iteration-finished' && e.iteration === n));
    const ck = [0, 1, 2].map((n) => idx((e) => e.type === 'checkpoint-written' && e.iteration === n));
    assert.ok(
      fin.every((i) => i > started),
      'iterations finish after run-started',
    );
    assert.ok(fin[0] < fin[1] && fin[1] < fin[2], 'iterations in order');
    assert.ok(
      ck.every((c, n) => c >= 0 && c < fin[n]),
      'each checkpoint is written before its iteration is finished',
    );
    const ep1 = events.filter((e) => e.type === 'episode-finished' && e.iteration === 1 && e.split === 'train');
    assert.equal(ep1.length, TINY.tasksPerIteration * TINY.groupSize + (m1Row(events)['rollout/branch_episodes'] as number));
    assert.ok(ep1.every((e) => events.indexOf(e) < fin[1] && events.indexOf(e) > fin[0]));
    const m1 = events[fin[1]];
    assert.ok(m1.type === 'iteration-finished' && m1.metrics.iteration === 1);
    await noContainersEventually(r.runId);
  });

  it('a LoRA run with int4 rollouts: every checkpoint is an adapter over the untouched base, checkpoint 0 is the base, later ones train; the sampler corrected; eval and resume read them', async () => {
    const runs = path.join(dir, 'runs-lora');
    const baseBytes = fs.readFileSync(path.join(model, 'model.safetensors'));
    // Sampled from the base quantized to 4 bits with the float adapter on top; trained in float32.
    const c = resolveTrainConfig({
      ...TINY,
      model,
      lr: 5e-3,
      lora: { r: 4, lora_alpha: 8, target_modules: 'all-linear' },
      rolloutPrecision: 'int4',
    });
    const r = await trainRun({ config: c, runsRoot: runs });
    assert.equal(r.state, 'finished');
    const run = RunDir.open(r.runDir);
    assertRunDir(run, 2);
    for (let n = 0; n <= 2; n++) {
      const d = run.checkpointDir(n);
      assert.deepEqual(
        fs.readdirSync(d).sort(),
        ['action_format.json', 'adapter_config.json', 'adapter_model.safetensors', 'optimizer.safetensors'],
        `checkpoint ${n} is an adapter`,
      );
      assert.equal(JSON.parse(fs.readFileSync(path.join(d, 'adapter_config.json'), 'utf8')).base_model_name_or_path, model);
      assert.ok(fs.statSync(path.join(d, 'adapter_model.safetensors')).size < baseBytes.length / 4, 'megabytes, not a copy of the base');
    }
    const ck = (n: number) => loadCheckpoint(run.checkpointDir(n));
    const bOf = (n: number) => [...ck(n).adapter!.tensors].filter(([k]) => k.includes('lora_B')).flatMap(([, t]) => [...t]);
    assert.ok(
      bOf(0).every((x) => x === 0),
      'checkpoint 0 is the base: B = 0',
    );
    const updated = run.readMetrics().some((m) => (m['update/steps'] as number) > 0);
    // Every update scored its actions in float32 and weighed them by the sampler's ratio.
    for (const m of run.readMetrics().slice(1)) {
      const kl = m['sampler/kl'] as number;
      assert.ok(kl > 0 && kl < 0.5, `sampler KL ${kl}: int4 is off the float policy, not far off`);
      assert.ok((m['sampler/ratio_mean'] as number) > 0.5 && (m['sampler/ratio_mean'] as number) < 2, `ratio ${m['sampler/ratio_mean']}`);
      assert.ok((m['sampler/ratio_max'] as number) >= (m['sampler/ratio_mean'] as number));
    }
    if (updated)
      assert.ok(
        bOf(2).some((x) => x !== 0),
        'an update trained the adapter',
      );
    assert.ok(fs.readFileSync(path.join(model, 'model.safetensors')).equals(baseBytes), 'the base model is untouched');
    // eval --run evaluates the adapter checkpoint; a resume continues the adapters.
    let err = '';
    const evalOut = path.join(dir, 'lora-eval.jsonl');
    assert.equal(
      await main(['eval', '--run', r.runDir, '--out', evalOut, '--json'], { out: () => undefined, err: (x) => (err += x + '\n') }),
      0,
      err,
    );
    // The run's held-out evaluation and `eval --run` both sample the last checkpoint in float32
    // (not at the rollouts' int4): the greedy episodes' log-probs agree token for token.
    const inRun = new Map(
      run
        .readTrajectories(2, 'heldout')
        .filter((t) => episodeKind(t) === 'greedy')
        .map((t) => [t.taskId, t]),
    );
    let compared = 0;
    for (const t of readEvalResults(evalOut).trajectories.filter((x) => episodeKind(x) === 'greedy')) {
      const a = t.turns[0]?.logprobs;
      const b = inRun.get(t.taskId)?.turns[0]?.logprobs;
      if (!a?.length || !b?.length) continue;
      assert.equal(a.length, b.length);
      a.forEach((x, i) => assert.ok(Math.abs(x - b[i]) < 1e-4, `${t.taskId} token ${i}: ${x} vs ${b[i]}`));
      compared++;
    }
    assert.ok(compared > 0, 'some greedy episode to compare');
    const more = await trainRun({ config: c, runsRoot: runs, resume: r.runDir, resumeIterations: 3 });
    assert.equal(more.state, 'finished');
    assert.ok(fs.existsSync(path.join(run.checkpointDir(3), 'adapter_model.safetensors')));
    await noContainersEventually(r.runId);
  });

  it('turnwise eval --out --samples: the episodes behind the summary, greedy and sampled; a bad --out fails before any sandbox', async () => {
    assert.ok(tasksFile, "needs the first test's tasks");
    const two = path.join(dir, 'two-tasks.jsonl');
    fs.writeFileSync(two, fs.readFileSync(tasksFile, 'utf8').split('\n').filter(Boolean).slice(0, 2).join('\n') + '\n');
    const ids = fs
      .readFileSync(two, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l).id as string);
    const cli = async (argv: string[]) => {
      let out = '';
      let err = '';
      const code = await main(argv, { out: (x) => (out += x + '\n'), err: (x) => (err += x + '\n') });
      return { code, out, err };
    };
    // A folder is no file: refused before the sandboxes and the policy start, nothing written.
    const t0 = Date.now();
    const bad = await cli(['eval', '--tasks', two, '--model', model, '--workspace', demo, '--out', dir, '--json']);
    assert.equal(bad.code, 1, bad.err);
    assert.match(bad.err, /--out: .* is a folder, not a file/);
    assert.equal(JSON.parse(bad.out).ok, false);
    assert.ok(Date.now() - t0 < 5000, `refused at once, not after the episodes (${Date.now() - t0} ms)`);
    // A folder that does not exist yet is made.
    const file = path.join(dir, 'eval-out', 'episodes.jsonl');
    const r = await cli([
      'eval',
      '--tasks',
      two,
      '--model',
      model,
      '--workspace',
      demo,
      '--max-turns',
      '2',
      '--concurrency',
      '2',
      '--samples',
      '2',
      '--out',
      file,
      '--json',
    ]);
    assert.equal(r.code, 0, r.err);
    const summary = JSON.parse(r.out);
    assert.equal(summary.out, file);
    const all = readTrajectories(file);
    // One greedy episode per task (the summary's rows), then 2 sampled ones with their own seeds.
    const trajs = all.filter((t) => t.trajId.startsWith('eval-'));
    const sampled = all.filter((t) => t.trajId.startsWith('evals-'));
    assert.equal(all.length, 6);
    assert.deepEqual(trajs.map((t) => t.taskId).sort(), [...ids].sort());
    assert.deepEqual(sampled.map((t) => t.taskId).sort(), [...ids, ...ids].sort());
    assert.equal(new Set(sampled.map((t) => t.seed)).size, 4, 'a seed per task and sample');
    assert.equal(summary.episodes, 2);
    assert.equal(summary.sampled.episodes, 4);
    assert.equal(summary.sampled.resolved, sampled.filter((t) => t.reward.resolved).length / 4);
    for (const t of trajs) {
      assert.ok(t.turns.length >= 1 && t.turns.length <= 2, `${t.taskId}: ${t.turns.length} turns`);
      assert.ok(t.turns.every((u) => typeof u.action === 'string' && typeof u.observation === 'string'));
      const row = (summary.tasks as { taskId: string; resolved: boolean; turns: number }[]).find((x) => x.taskId === t.taskId);
      assert.ok(row, t.taskId);
      assert.equal(row.resolved, t.reward.resolved, `${t.taskId}: the summary is the file's outcome`);
      assert.equal(row.turns, t.turns.length);
    }
    // The same checkpoint, tasks and seed again, compared with the first file: every episode has
    // its twin (the pairing keys of two real evaluations agree) and none changed (evaluations
    // repeat exactly); the human form says so too.
    const again = await cli([
      'eval',
      '--tasks',
      two,
      '--model',
      model,
      '--workspace',
      demo,
      '--max-turns',
      '2',
      '--concurrency',
      '2',
      '--samples',
      '2',
      '--compare',
      file,
      '--json',
    ]);
    assert.equal(again.code, 0, again.err);
    const cmp = JSON.parse(again.out).compare;
    assert.deepEqual(cmp.greedy, { pairs: 2, gained: 0, lost: 0, p_value: null, task_nets: {}, p_value_tasks: null });
    assert.deepEqual(cmp.sampled, { pairs: 4, gained: 0, lost: 0, p_value: null, task_nets: {}, p_value_tasks: null });
    assert.deepEqual(cmp.unpaired, { before: 0, after: 0 });
    const resolvedBefore = all.filter((t) => t.trajId.startsWith('evals-') && t.reward.resolved).length;
    assert.equal(
      (cmp.tasks as { kind: string; after: number }[]).filter((t) => t.kind === 'sampled').reduce((n, t) => n + t.after, 0),
      resolvedBefore,
    );
  });

  it('kill -9 during an iteration, then --resume: no duplicated or partial iteration, checkpoints load, no container left', async () => {
    assert.ok(tasksFile, "needs the first test's tasks");
    const runs = path.join(dir, 'runs-kill');
    const cfg = path.join(dir, 'kill.json');
    // Informative task sampling: the resumed iterations must draw from the history the killed
    // process had (checked below).
    fs.writeFileSync(cfg, JSON.stringify({ ...TINY, taskSource: 'file', tasksFile, model, iterations: 3, taskSampling: 'informative' }));
    const child = new CliChild(['train', '--config', cfg, '--runs', runs, '--json']);
    const started = await child.waitFor((e) => e.type === 'run-started', 'run-started');
    await child.waitFor((e) => e.type === 'iteration-finished' && e.iteration === 1, 'iteration 1 finished');
    await child.waitFor((e) => e.type === 'phase' && e.iteration === 2, 'a phase of iteration 2');
    // Wait until iteration 2 holds sandboxes, so the kill leaves containers for the reaper
    // (minutes on a loaded machine: the rollout starts after the policy worker loads).
    const end = Date.now() + 240_000;
    while ((await containersOf(started.runId)).length === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 300));
    child.proc.kill('SIGKILL');
    const x = await child.exited;
    assert.equal(x.signal, 'SIGKILL');
    const left = await containersOf(started.runId);
    assert.ok(left.length > 0, 'the killed run left containers (otherwise the reaper check below proves nothing)');

    const run = RunDir.open(started.runId, runs);
    assert.equal(run.lastCompleteIteration(), 1);
    assert.deepEqual(
      run.readMetrics().map((m) => m.iteration),
      [0, 1],
    );
    assert.equal(run.readStatus()?.state, 'running', 'a killed run could not say otherwise');

    const resumed = new CliChild(['train', '--resume', started.runId, '--runs', runs, '--json']);
    const rs = await resumed.waitFor((e) => e.type === 'run-started', 'run-started of the resumed run');
    assert.ok(rs.type === 'run-started' && rs.resumedFrom === 1, JSON.stringify(rs));
    const done = await resumed.exited;
    assert.equal(done.code, 0, resumed.stderr.slice(-3000));
    assert.equal(resumed.events[resumed.events.length - 1]?.type, 'run-finished');
    assert.deepEqual(
      resumed.events.filter((e) => e.type === 'iteration-finished').map((e) => (e as { iteration: number }).iteration),
      [2, 3],
      'the resumed run redoes iteration 2 only once and goes on',
    );
    assertRunDir(run, 3);
    // Each iteration's tasks are the informative draw given the groups before it: iterations 2
    // and 3 were drawn by the resumed process, from iteration 1's episodes read back.
    const train = (JSON.parse(fs.readFileSync(run.file('splits.json'), 'utf8')).train as string[]).map((id) => ({ id }));
    for (let n = 1; n <= 3; n++) {
      const posed = [...new Map(run.readTrajectories(n, 'train').map((t) => [t.groupId, t.taskId])).values()];
      const drawn = pickTasks(train, TINY.tasksPerIteration, TINY.seed, n, 'informative', alikeStreaks(pastGroupOutcomes(run, n - 1))).map(
        (t) => t.id,
      );
      assert.deepEqual(posed, drawn, `iteration ${n}'s tasks follow the history before it`);
    }
    await noContainersEventually(started.runId);
  });

  it('SIGINT: exit 130, state stopped, the unfinished iteration discarded, no container left', async () => {
    assert.ok(tasksFile, "needs the first test's tasks");
    const runs = path.join(dir, 'runs-int');
    const cfg = path.join(dir, 'int.json');
    fs.writeFileSync(cfg, JSON.stringify({ ...TINY, taskSource: 'file', tasksFile, model }));
    const child = new CliChild(['train', '--config', cfg, '--runs', runs, '--json']);
    const started = await child.waitFor((e) => e.type === 'run-started', 'run-started');
    await child.waitFor((e) => e.type === 'iteration-finished' && e.iteration === 0, 'iteration 0 finished');
    await child.waitFor((e) => e.type === 'phase' && e.iteration === 1 && e.phase === 'rollout', 'the rollout of iteration 1');
    child.proc.kill('SIGINT');
    const x = await child.exited;
    assert.equal(x.code, 130, child.stderr.slice(-3000));
    const stopped = child.events.find((e) => e.type === 'run-stopped');
    assert.ok(stopped && stopped.type === 'run-stopped' && stopped.lastCompleteIteration === 0, JSON.stringify(child.events.slice(-3)));
    const run = RunDir.open(started.runId, runs);
    assert.equal(run.readStatus()?.state, 'stopped');
    assert.equal(run.readStatus()?.lastCompleteIteration, 0);
    assert.deepEqual(
      run.readMetrics().map((m) => m.iteration),
      [0],
    );
    assert.ok(!fs.existsSync(run.iterationDir(1)) && !fs.existsSync(run.checkpointDir(1)), 'iteration 1 discarded');
    loadCheckpoint(run.checkpointDir(0));
    await noContainersEventually(started.runId);
  });
});
