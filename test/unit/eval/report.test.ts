// Evaluation results files and `turnwise eval --report`: hand-made files with known numbers, the
// report's rates, means, per-task cells and PASS@(k,T); files of other tasks or seeds refused,
// or compared on their shared episodes with --intersect; the header skipped by episode readers.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from '../../../src/cli/main';
import { SCHEMA, type Task, type Trajectory } from '../../../src/core/schema';
import { readTrajectories } from '../../../src/core/trajectory';
import {
  checkpointModel,
  endpointModel,
  evalResultsHeader,
  readEvalResults,
  writeEvalResults,
  type EvalModel,
} from '../../../src/eval/results';
import { compareResults, evalReport } from '../../../src/eval/report';

async function cli(argv: string[]) {
  let out = '';
  let err = '';
  const code = await main(argv, { out: (t) => (out += t + '\n'), err: (t) => (err += t + '\n') });
  return { code, out, err };
}

const task = (id: string, instruction = `fix ${id}`): Task =>
  ({
    schema: SCHEMA.task,
    id,
    source: 'file',
    instruction,
    language: 'python',
    testCommand: 'pytest',
    fail_to_pass: ['t::a'],
    pass_to_pass: [],
  }) as unknown as Task;

interface Ep {
  resolved: boolean;
  passRate: number;
  /** Commands run before a final submit. */
  actions: number;
  formatErrors?: number;
  /** Tokens of each turn's reply (every turn the same); null: not recorded. */
  tokens?: number | null;
  /** The server's count of each turn's reply tokens (its `usage`), beside tokens: null. */
  usage?: number;
  ms?: number;
  failure?: string;
}

/** An episode as `turnwise eval` records it: greedy `eval-0-i`, sampled `evals-0-i-k`, seeded like the evaluation. */
function episode(checkpoint: string, taskId: string, k: number | null, e: Ep, seed = 0): Trajectory {
  const n = e.actions + 1;
  const turns = Array.from({ length: n }, (_, i) => ({
    index: i,
    action: i === n - 1 ? 'submit' : `cmd ${i}`,
    observation: 'ok',
    exitCode: 0,
    durationMs: 1,
    ...(i < (e.formatErrors ?? 0) ? { formatError: 'no bash block' } : {}),
    ...(e.tokens === null ? { tokenIds: [], logprobs: [] } : { tokenIds: Array.from({ length: e.tokens ?? 5 }, () => 1) }),
    ...(e.usage !== undefined ? { usage: { promptTokens: 100, completionTokens: e.usage } } : {}),
  }));
  return {
    schema: SCHEMA.trajectory,
    taskId,
    groupId: `eval-0-${taskId}`,
    trajId: k === null ? `eval-0-${taskId}` : `evals-0-${taskId}-${k}`,
    checkpoint,
    seed: seed * 1000 + (k === null ? 0 : 100 + k) + taskId.charCodeAt(0),
    split: 'heldout',
    turns,
    reward: {
      passRate: e.passRate,
      resolved: e.resolved,
      turns: n,
      maxTurns: 4,
      formatError: false,
      efficiencyPenalty: 0,
      formatPenalty: 0,
      reward: e.passRate,
    },
    durationMs: e.ms ?? 1000,
    ...(e.failure ? { failure: e.failure } : {}),
  } as Trajectory;
}

function write(
  dir: string,
  name: string,
  model: EvalModel,
  tasks: Task[],
  trajs: Trajectory[],
  o: { seed?: number; samples?: number; complete?: boolean } = {},
): string {
  const file = path.join(dir, name);
  writeEvalResults(
    file,
    evalResultsHeader({
      model,
      tasks,
      tasksSource: '/w/tasks.jsonl',
      seed: o.seed ?? 0,
      samples: o.samples ?? 2,
      maxTurns: 4,
      maxActionTokens: 128,
      sampling: { temperature: 1, topP: 1 },
      trajectories: trajs,
      complete: o.complete ?? true,
    }),
    trajs,
  );
  return file;
}

const R = (actions: number, extra: Partial<Ep> = {}): Ep => ({ resolved: true, passRate: 1, actions, ...extra });
const U = (passRate: number, actions: number, extra: Partial<Ep> = {}): Ep => ({ resolved: false, passRate, actions, ...extra });

describe('evaluation results files and eval --report', () => {
  let dir: string;
  const tasks = [task('a'), task('b')];
  const local = checkpointModel('/work/.turnwise/runs/r1/checkpoints/3');
  const remote = endpointModel('http://user:sk-secret-123@gpu.example:8000/v1?api_key=sk-secret-456', 'qwen-coder', 'MY_KEY');
  // Model A (local): greedy a resolved in 1 action, b not (pass 0.5, 3 actions, 1 format error);
  // sampled a: resolved after 1 and after 3 actions; b: 1 of 2 resolved, after 2 actions.
  const aEps = () => [
    episode(local.label, 'a', null, R(1, { tokens: 10, ms: 2000 })),
    episode(local.label, 'b', null, U(0.5, 3, { formatErrors: 1, tokens: 10, ms: 4000 })),
    episode(local.label, 'a', 0, R(1)),
    episode(local.label, 'a', 1, R(3)),
    episode(local.label, 'b', 0, R(2)),
    episode(local.label, 'b', 1, U(0, 3)),
  ];
  // Model B (endpoint, no token counts): greedy both resolved; sampled a 0 of 2, b 2 of 2 (1 action each).
  const bEps = () => [
    episode(remote.label, 'a', null, R(2, { tokens: null, ms: 6000 })),
    episode(remote.label, 'b', null, R(1, { tokens: null, ms: 2000 })),
    episode(remote.label, 'a', 0, U(0, 3, { tokens: null })),
    episode(remote.label, 'a', 1, U(0.5, 3, { tokens: null })),
    episode(remote.label, 'b', 0, R(1, { tokens: null })),
    episode(remote.label, 'b', 1, R(1, { tokens: null })),
  ];
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-report-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('the header names the model (an endpoint without user, password, query or key), the tasks, seeds and each episode; episode readers skip it', () => {
    assert.deepEqual(remote, {
      kind: 'endpoint',
      url: 'http://gpu.example:8000/v1',
      model: 'qwen-coder',
      keyEnv: 'MY_KEY',
      label: 'qwen-coder @ gpu.example:8000',
    });
    assert.equal(local.label, 'r1 · checkpoint 3');
    const file = write(dir, 'b.jsonl', remote, tasks, bEps());
    const text = fs.readFileSync(file, 'utf8');
    assert.doesNotMatch(text, /sk-secret/);
    const header = JSON.parse(text.split('\n')[0]);
    assert.equal(header.schema, 'turnwise/eval-results@1');
    assert.deepEqual(header.tasks.ids, ['a', 'b']);
    assert.equal(Object.keys(header.tasks.digests).length, 2);
    assert.equal(header.seed, 0);
    assert.equal(header.samples, 2);
    assert.equal(header.maxActionTokens, 128, 'the reply limit the episodes ran under');
    assert.equal(header.episodes.length, 6);
    assert.deepEqual(header.episodes[0], {
      trajId: 'eval-0-a',
      taskId: 'a',
      kind: 'greedy',
      seed: 97,
      resolved: true,
      passRate: 1,
      turns: 3,
      actions: 2,
      formatErrors: 0,
      tokens: null,
      wallS: 6,
    });
    assert.equal(header.summary.greedy.resolved, 1);
    assert.deepEqual(header.summary.sampled.pass_at_k_t['2'], { '1': 0.5, '2': 0.5, '3': 0.5, '4': 0.5 });
    // The same file read as episodes (eval --from, --compare, warm starts): the header is no episode.
    assert.equal(readTrajectories(file).length, 6);
    assert.equal(readEvalResults(file).model.label, remote.label);
  });

  it('an endpoint episode without token ids or log-probs counts the tokens its server reported', () => {
    const eps = [
      episode(remote.label, 'a', null, R(2, { tokens: null, usage: 7 })),
      episode(remote.label, 'b', null, R(1, { tokens: null })),
    ];
    const header = JSON.parse(fs.readFileSync(write(dir, 'u.jsonl', remote, tasks, eps, { samples: 0 }), 'utf8').split('\n')[0]);
    assert.deepEqual(
      header.episodes.map((e: { tokens: number | null }) => e.tokens),
      [21, null],
      '3 turns of 7 reported tokens; nothing reported is unknown, not 0',
    );
  });

  it('compares two models: rates, per-episode means, tokens and wall time, per task, PASS@(k,T)', () => {
    const r = evalReport([write(dir, 'a.jsonl', local, tasks, aEps()), write(dir, 'b.jsonl', remote, tasks, bEps())]);
    assert.equal(r.intersection, false);
    assert.deepEqual(r.tasks, ['a', 'b']);
    assert.deepEqual(r.episodes, { greedy: 2, sampled: 4 });
    const [a, b] = r.models;
    assert.equal(a.label, 'r1 · checkpoint 3');
    assert.deepEqual(a.greedy, {
      episodes: 2,
      failed: 0,
      resolved: 0.5,
      pass_rate: 0.75,
      'turns/mean': 3, // 2 and 4 turns (actions + submit)
      format_error_rate: 1 / 6,
      'format_errors/mean': 0.5,
      'tokens/mean': 30, // 2 turns × 10 and 4 turns × 10
      'wall_s/mean': 3,
    });
    assert.equal(a.sampled!.resolved, 0.75);
    assert.equal(b.greedy!.resolved, 1);
    assert.equal(b.greedy!['tokens/mean'], null, 'an endpoint that gave no token counts');
    assert.equal(b.greedy!['wall_s/mean'], 4);
    // PASS@(k,T) by hand. A: task a resolved at 1 and 3 actions (n 2), task b at 2 (n 2).
    //   k=1: T=1 (1/2 + 0)/2 = 0.25; T=2 (1/2 + 1/2)/2 = 0.5; T=3 (1 + 1/2)/2 = 0.75; T=4 the same.
    //   k=2: T=1 (1 + 0)/2 = 0.5; T=2 and on (1 + 1)/2 = 1.
    assert.deepEqual(a.pass_at_k_t, { '1': { '1': 0.25, '2': 0.5, '3': 0.75, '4': 0.75 }, '2': { '1': 0.5, '2': 1, '3': 1, '4': 1 } });
    // B: task a never, task b both at 1 action: 0.5 everywhere.
    assert.deepEqual(b.pass_at_k_t, { '1': { '1': 0.5, '2': 0.5, '3': 0.5, '4': 0.5 }, '2': { '1': 0.5, '2': 0.5, '3': 0.5, '4': 0.5 } });
    // Failure labels, computed from the episodes (these carry none): A's format errors show.
    assert.ok(a.failures['format-error'] > 0, JSON.stringify(a.failures));
    assert.equal(b.failures['format-error'], 0);
    // B against A at k=2, T=4: pass@1 0.75 → 0.5 and pass@2 1 → 0.5, each at least half a task (0.25) down.
    assert.equal(r.boundary.length, 1);
    assert.equal(r.boundary[0].verdict.kind, 'narrowed');
    assert.deepEqual([r.boundary[0].verdict.k, r.boundary[0].verdict.T], [2, 4]);
    const taskB = r.per_task.find((t) => t.taskId === 'b')!;
    assert.equal(taskB.models[0].greedy!.resolved, 0);
    assert.equal(taskB.models[0].greedy!.pass_rate, 0.5);
    assert.equal(taskB.models[0].sampledResolved, 1);
    assert.equal(taskB.models[1].sampledResolved, 2);
    assert.equal(r.per_episode.length, 6);
    assert.deepEqual(
      r.per_episode[1].models.map((m) => [m.resolved, m.formatErrors]),
      [
        [false, 1],
        [true, 0],
      ],
    );
  });

  it('refuses files evaluated on other tasks or seeds, naming what each covers; --intersect compares the shared episodes and says so', async () => {
    const a = write(dir, 'a.jsonl', local, tasks, aEps());
    // Seed 1: the same tasks, other episodes' seeds.
    const other = write(
      dir,
      'seed1.jsonl',
      remote,
      tasks,
      bEps().map((t) => ({ ...t, seed: (t.seed ?? 0) + 1000 })),
      { seed: 1 },
    );
    assert.throws(
      () => evalReport([a, other]),
      /not evaluated on the same tasks and seeds \(0 episode\(s\) in common\)[\s\S]*seed1\.jsonl: qwen-coder @ gpu\.example:8000, 2 task\(s\), seed 1, 2 sample\(s\) per task/,
    );
    // Only task a: refused; with intersect, compared on task a's episodes.
    const onlyA = write(
      dir,
      'only-a.jsonl',
      remote,
      [tasks[0]],
      bEps().filter((t) => t.taskId === 'a'),
    );
    const r = await cli(['eval', '--report', a, onlyA, '--json']);
    assert.equal(r.code, 1);
    assert.match(r.err, /not evaluated on the same tasks and seeds \(3 episode\(s\) in common\)/);
    assert.match(r.err, /--intersect/);
    const i = await cli(['eval', '--report', a, onlyA, '--intersect', '--json']);
    assert.equal(i.code, 0, i.err);
    const j = JSON.parse(i.out);
    assert.equal(j.intersection, true);
    assert.deepEqual(j.tasks, ['a']);
    assert.deepEqual(
      j.left_out.map((x: { episodes: number }) => x.episodes),
      [3, 0],
    );
    assert.match(j.notes.join('\n'), /compared on the 3 episode\(s\) every file has/);
    // The same task id with other content is not the same task.
    const changed = write(dir, 'changed.jsonl', remote, [task('a', 'another bug'), tasks[1]], bEps());
    assert.throws(() => evalReport([a, changed]), /task\(s\) a differ in content under the same id/);
    const ic = compareResults([readEvalResults(a), readEvalResults(changed)], { intersect: true });
    assert.deepEqual(ic.tasks, ['b']);
    assert.deepEqual(ic.tasks_differ, ['a']);
  });

  it('eval --report prints a table per model, PASS@(k,T) corners and the per-task cells; usage errors for stray flags', async () => {
    const a = write(dir, 'a.jsonl', local, tasks, aEps());
    const b = write(dir, 'b.jsonl', remote, tasks, bEps());
    const r = await cli(['eval', '--report', a, b]);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /2 model\(s\) on 2 task\(s\): 2 greedy and 4 sampled episode\(s\) each/);
    assert.match(r.out, /r1 · checkpoint 3\s+greedy\s+0\.500\s+0\.75\s+3\.0\s+0\.50\s+30\s+3\.0\s+0/);
    assert.match(r.out, /qwen-coder @ gpu\.example:8000\s+greedy\s+1\.000\s+1\.00\s+2\.5\s+0\.00\s+—\s+4\.0/);
    assert.match(r.out, /r1 · checkpoint 3\s+k=1: T=2 0\.500 T=4 0\.750 {3}k=2: T=2 1\.000 T=4 1\.000/);
    assert.match(r.out, /\n {2}b\s+✗ 0\.50 1\/2\s+✓ 1\.00 2\/2/);
    assert.match(
      r.out,
      /qwen-coder @ gpu\.example:8000 vs r1 · checkpoint 3: T=4: pass@1 75\.0% → 50\.0%, pass@2 100\.0% → 50\.0%: narrowed/,
    );
    assert.match(
      r.out,
      /what went wrong \(share of episodes with each failure label, greedy and sampled\):\n.*\n {2}format-error\s+0\.\d\d\s+0\.00/,
    );
    // --plot: the curves as an SVG, one per model and T (2 × 4), the verdict under them.
    const svgFile = path.join(dir, 'curves.svg');
    const plotted = await cli(['eval', '--report', a, b, '--plot', svgFile]);
    assert.equal(plotted.code, 0, plotted.err);
    const svg = fs.readFileSync(svgFile, 'utf8');
    assert.match(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    assert.equal((svg.match(/<path /g) ?? []).length, 8);
    assert.match(svg, /narrowed: pass@2 went down/);
    assert.equal((await cli(['eval', '--report', a, b, '--plot', path.join(dir, 'curves.png')])).code, 2, 'an SVG file only');
    assert.equal((await cli(['eval', '--run', 'x', '--plot', svgFile])).code, 2, '--plot goes with --report');
    assert.equal((await cli(['eval', '--report'])).code, 2);
    const stray = await cli(['eval', '--report', a, '--samples', '2']);
    assert.equal(stray.code, 2);
    assert.match(stray.err, /--report reads evaluations already run; it takes no --samples/);
    assert.equal((await cli(['eval', a])).code, 2, 'a file without --report');
    // --from reads a results file too, naming its model from the header.
    const from = await cli(['eval', '--from', b, '--json']);
    assert.equal(from.code, 0, from.err);
    assert.equal(JSON.parse(from.out).model, 'qwen-coder @ gpu.example:8000');
  });

  it('a file with an unusable header or that is no results file is refused by name', () => {
    const bad = path.join(dir, 'bad.jsonl');
    fs.writeFileSync(bad, JSON.stringify({ schema: SCHEMA.evalResults, model: {} }) + '\n' + JSON.stringify(aEps()[0]) + '\n');
    assert.throws(() => readEvalResults(bad), /bad\.jsonl: its header line is not a usable evaluation header/);
    const tasksFile = path.join(dir, 'tasks.jsonl');
    fs.writeFileSync(tasksFile, JSON.stringify(tasks[0]) + '\n');
    assert.throws(() => readEvalResults(tasksFile), /is a "turnwise\/task@1" file, not evaluation results/);
  });
});
