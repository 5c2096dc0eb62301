// Fixture run directories in the real on-disk format (core/run.ts, core/schema.ts): a small
// Python workspace's bug-fix tasks, groups of episodes whose turns carry `edits` and per-turn
// advantages, metrics per iteration, held-out evaluations. Used by the extension's unit tests
// and the VS Code tier.
//   node -r tsx/cjs test/support/runFixture.ts --workspace DIR [--iterations N] [--trajectories N] [--estimator E] [--seed S] [--state finished|running|stopped] [--model DIR] [--lora-r R] [--chat]
import * as fs from 'node:fs';
import * as path from 'node:path';
import { SCHEMA, type Task, type Trajectory, type Turn } from '../../src/core/schema';
import type { MetricsRow } from '../../src/core/events';

/** The file the fixture's agent fixes; line 12 (1-based) holds the bug. */
export const FIXTURE_FILE = 'calc/ops.py';
export const ORIGINAL = [
  '"""Small arithmetic helpers (the fixture workspace)."""',
  '',
  '',
  'def add(a, b):',
  '    return a + b',
  '',
  '',
  'def clamp(x, lo, hi):',
  '    """Clamp x into [lo, hi]."""',
  '    if x < lo:',
  '        return lo',
  '    if x >= hi:  # BUG: should be >',
  '        return hi',
  '    return x',
  '',
  '',
  'def mean(xs):',
  '    return sum(xs) / len(xs)',
  '',
].join('\n');
/** 0-based line of the bug in ORIGINAL. */
export const BUG_LINE = 11;
export const FIXED = ORIGINAL.replace('    if x >= hi:  # BUG: should be >', '    if x > hi:');
/** Turn 4 puts two comment lines at the top (a useless edit the estimator blames). */
export const HEADER = '# edited by the agent\n# (no functional change)\n';
export const TESTS_FILE = 'tests/test_ops.py';

export interface FixtureOptions {
  runId?: string;
  estimator?: string;
  iterations?: number;
  /** Trajectories per iteration (train), spread over the tasks in groups. */
  trajectories?: number;
  groupSize?: number;
  seed?: number;
  state?: 'finished' | 'running' | 'stopped' | 'failed';
  /** pid written to status.json when state is running (default: this process). */
  pid?: number;
  /** Only config, status and metrics (a long run for chart timings): no episodes on disk. */
  metricsOnly?: boolean;
  /** The run's model in config.json ('' = the embedded one); absent unless given. */
  model?: string;
  /** A LoRA run of this rank: config.json's lora block, and checkpoints/N as adapter folders (adapter_config.json). */
  loraR?: number;
  /**
   * The model writes in its chat format: config.json's actionFormat and each checkpoint's
   * action_format.json say so, every turn keeps its whole reply, and the bad episodes' turn 2 is a
   * reply with two bash blocks (a format error, not run).
   */
  chat?: boolean;
}

/** Turn 1's reply in a chat fixture: markup in the text, which the viewer must show as text. */
export const CHAT_REPLY_1 = 'Let me read the module first (it holds <b>clamp</b> & add).\n\n```bash\ncat calc/ops.py\n```';
/** The format error of a bad chat episode's turn 2 (agent/chat-format.ts's wording). */
export const CHAT_FORMAT_ERROR = 'the reply has 2 ```bash blocks; a turn runs exactly one';

/** A chat model's reply around a command: a sentence, then the one bash block. */
function chatReply(t: Turn): string {
  if (t.index === 1) return CHAT_REPLY_1;
  if (t.action === 'submit') return 'submit';
  return `Next step (turn ${t.index}).\n\n\`\`\`bash\n${t.action}\n\`\`\``;
}

function rng(seed: number) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 4294967296;
  };
}

const TASK_IDS = ['mut-clamp-compare', 'mut-add-sign', 'mut-mean-len', 'mut-clamp-lo'];
const HELDOUT_IDS = ['mut-heldout-mean'];

function task(id: string): Task {
  return {
    schema: SCHEMA.task,
    id,
    source: 'mutation',
    instruction: `A test of calc/ops.py fails (${id}). Find the bug and fix it; do not edit the tests.`,
    language: 'python',
    testCommand: 'python -m pytest -q {tests}',
    runner: 'pytest',
    reportFormat: 'junit-xml',
    fail_to_pass: [`tests/test_ops.py::test_${id.split('-')[1]}`],
    pass_to_pass: ['tests/test_ops.py::test_add'],
  };
}

/**
 * One episode. `good` episodes fix the bug at turn 2 and pass; others make the useless header
 * edit and stop. Every episode has 5 turns: cat, fix-or-not, pytest (replayed from the cache in
 * good episodes), header edit, submit.
 */
export function fixtureTrajectory(o: {
  taskId: string;
  groupId: string;
  trajId: string;
  iteration: number;
  split: 'train' | 'heldout';
  good: boolean;
  r: () => number;
  scoreBase: number;
  tampered?: string;
  chat?: boolean;
}): Trajectory {
  const { good, r } = o;
  const afterFix = good ? FIXED : ORIGINAL;
  const withHeader = HEADER + afterFix;
  const passRate = good ? 1 : 0.5;
  const reward = passRate - 0.1 * (5 / 8);
  const adv = (x: number) => (o.split === 'train' ? x : undefined);
  const comps = (b: number, res: number, t: number) => (o.split === 'train' ? { backbone: b, residual: res, tree: t } : undefined);
  const base = good ? 0.6 : -0.6;
  const turns: Turn[] = [
    {
      index: 1,
      action: `cat ${FIXTURE_FILE}`,
      observation: ORIGINAL,
      exitCode: 0,
      durationMs: 40 + Math.floor(r() * 20),
      intentSignature: ['read', 'cat', FIXTURE_FILE],
    },
    good
      ? {
          index: 2,
          action: `sed -i 's/if x >= hi:  # BUG: should be >/if x > hi:/' ${FIXTURE_FILE}`,
          observation: '',
          exitCode: 0,
          durationMs: 30,
          intentSignature: ['edit', 'sed', FIXTURE_FILE],
          editSignature: [`E:${FIXTURE_FILE}::clamp`, 'N:comparison_operator:>=→>'],
          edits: [{ path: FIXTURE_FILE, before: ORIGINAL, after: FIXED }],
        }
      : {
          index: 2,
          action: 'ls tests',
          observation: 'test_ops.py\n',
          exitCode: 0,
          durationMs: 25,
          intentSignature: ['list', 'ls', 'tests'],
        },
    {
      index: 3,
      action: 'python -m pytest -q tests/test_ops.py',
      observation: good
        ? '....                                                   [100%]\n4 passed in 0.02s\n'
        : 'F...\nFAILED tests/test_ops.py::test_clamp - assert 10 == 9\n1 failed, 3 passed in 0.03s\n',
      exitCode: good ? 0 : 1,
      durationMs: 900 + Math.floor(r() * 300),
      intentSignature: ['test', 'python', 'pytest'],
      // A good episode's test run after the same fix is what the observation cache replays.
      ...(good ? { cached: true } : {}),
    },
    {
      index: 4,
      action: `sed -i '1i # edited by the agent\\n# (no functional change)' ${FIXTURE_FILE}`,
      observation: '',
      exitCode: 0,
      durationMs: 28,
      intentSignature: ['edit', 'sed', FIXTURE_FILE],
      editSignature: [`E:${FIXTURE_FILE}::<module>`],
      edits: [{ path: FIXTURE_FILE, before: afterFix, after: withHeader }],
    },
    { index: 5, action: 'submit', observation: '', exitCode: 0, durationMs: 1 },
  ];
  if (o.chat) {
    for (const t of turns) t.reply = chatReply(t);
    if (!good) {
      const reply = 'I will list the tests, then run them.\n\n```bash\nls tests\n```\n\n```bash\npython -m pytest -q\n```';
      turns[1] = {
        index: 2,
        action: reply,
        reply,
        observation: `not run: ${CHAT_FORMAT_ERROR}. Reply with exactly one \`\`\`bash block holding one command, or the word submit.`,
        exitCode: null,
        durationMs: 0,
        formatError: CHAT_FORMAT_ERROR,
      };
    }
  }
  const a = [0.05, good ? 0.9 : -0.2, 0.1, -0.45, 0].map((x) => x + base * 0.1 + (r() - 0.5) * 0.02);
  turns.forEach((t, i) => {
    t.advantage = adv(Number(a[i].toFixed(4)));
    const b = Number((base * 0.5).toFixed(4));
    t.advantageComponents = comps(b, Number((a[i] - b - 0.01).toFixed(4)), 0.01);
    if (o.split !== 'train') {
      delete t.advantage;
      delete t.advantageComponents;
    }
    t.tokenIds = Array.from({ length: 8 }, () => Math.floor(r() * 30000));
    t.logprobs = t.tokenIds.map(() => Number((-r() * 3).toFixed(3)));
  });
  return {
    schema: SCHEMA.trajectory,
    taskId: o.taskId,
    groupId: o.groupId,
    trajId: o.trajId,
    checkpoint: `checkpoints/${Math.max(0, o.iteration - 1)}`,
    iteration: o.iteration,
    split: o.split,
    seed: Math.floor(r() * 1e6),
    turns,
    testReport: good
      ? { passed: ['tests/test_ops.py::test_add', 'tests/test_ops.py::test_clamp'], failed: [] }
      : { passed: ['tests/test_ops.py::test_add'], failed: ['tests/test_ops.py::test_clamp'] },
    reward: o.tampered
      ? {
          passRate: 0,
          resolved: false,
          turns: 5,
          maxTurns: 8,
          formatError: false,
          efficiencyPenalty: 0,
          formatPenalty: 0,
          reward: 0,
          tampered: o.tampered,
        }
      : {
          passRate,
          resolved: good,
          turns: 5,
          maxTurns: 8,
          formatError: !!o.chat && !good,
          efficiencyPenalty: 0.0625,
          formatPenalty: 0,
          reward,
        },
  };
}

/** The reason iteration 1's second episode carries: a tampered episode for the views to show. */
export const FIXTURE_TAMPERED = "calc/ops.py: imports pytest's internals (_pytest) (new in the agent's edit)";

function metricsOnlyRow(it: number, r: () => number): MetricsRow {
  const p = 1 - 0.8 * Math.exp(-it / 300) - 0.05 * r();
  const row: MetricsRow = { schema: SCHEMA.metrics, iteration: it, 'heldout/pass_rate': p * 0.9, 'heldout/resolved': p * 0.6 };
  if (it === 0) return row;
  return Object.assign(row, {
    'reward/mean': p - 0.1,
    'reward/std': 0.2 + 0.05 * r(),
    'tests/pass_rate': p,
    resolved: p * 0.7,
    'turns/mean': 6 - 2 * p,
    format_errors: Math.round(3 * (1 - p) * r()),
    'loss/policy': 0.3 * (1 - p) + 0.02 * r(),
    kl: 0.01 * r(),
    grad_norm: 1 + r(),
  });
}

/** Writes a run directory under `<workspace>/.turnwise/runs/`; returns its path. */
export function writeFixtureRun(workspace: string, opts: FixtureOptions = {}): string {
  const estimator = opts.estimator ?? 'turnwise';
  const iterations = opts.iterations ?? 3;
  const perIter = opts.trajectories ?? 16;
  const G = opts.groupSize ?? 4;
  const seed = opts.seed ?? 1;
  const runId = opts.runId ?? `fixture__${estimator}__${seed}__20250101-120000`;
  const dir = path.join(workspace, '.turnwise', 'runs', runId);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir, { recursive: true });
  const r = rng(seed);
  const w = (f: string, text: string) => {
    fs.mkdirSync(path.dirname(path.join(dir, f)), { recursive: true });
    fs.writeFileSync(path.join(dir, f), text);
  };
  const jsonl = (rows: unknown[]) => rows.map((x) => JSON.stringify(x)).join('\n') + (rows.length ? '\n' : '');
  const chat = !!opts.chat;
  const lora = opts.loraR
    ? {
        r: opts.loraR,
        lora_alpha: 2 * opts.loraR,
        lora_dropout: 0,
        target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'],
        use_rslora: false,
        base_model_name_or_path: '',
      }
    : undefined;
  w(
    'config.json',
    JSON.stringify(
      {
        schema: SCHEMA.runConfig,
        estimator,
        iterations,
        groupSize: G,
        maxTurns: 8,
        seed,
        ...(opts.model !== undefined ? { model: opts.model } : {}),
        ...(lora ? { lora } : {}),
        ...(chat ? { actionFormat: 'chat' } : {}),
      },
      null,
      2,
    ),
  );
  const tasks = [...TASK_IDS, ...HELDOUT_IDS].map(task);
  w('tasks.jsonl', jsonl(tasks));
  w('splits.json', JSON.stringify({ schema: SCHEMA.runSplits, train: TASK_IDS, heldout: HELDOUT_IDS }));
  const metrics: MetricsRow[] = [];
  // Skill grows with the iteration (faster for 'turnwise', to make an overlay worth looking at).
  const rate = estimator === 'turnwise' ? 0.18 : 0.1;
  for (let it = 0; it <= iterations; it++) {
    const skill = Math.min(0.95, 0.2 + rate * it);
    if (opts.metricsOnly) {
      metrics.push(metricsOnlyRow(it, r));
      continue;
    }
    const heldout: Trajectory[] = HELDOUT_IDS.flatMap((taskId) =>
      Array.from({ length: G }, (_, g) =>
        fixtureTrajectory({
          taskId,
          groupId: `${taskId}@${it}`,
          trajId: `h${it}-${taskId}-${g}`,
          iteration: it,
          split: 'heldout',
          good: r() < skill,
          r,
          scoreBase: 0,
          chat,
        }),
      ),
    );
    w(`iterations/${it}/heldout.jsonl`, jsonl(heldout));
    const hPass = heldout.reduce((s, t) => s + t.reward.passRate, 0) / heldout.length;
    const hRes = heldout.filter((t) => t.reward.resolved).length / heldout.length;
    const row: MetricsRow = { schema: SCHEMA.metrics, iteration: it, 'heldout/pass_rate': hPass, 'heldout/resolved': hRes };
    if (it > 0) {
      const train: Trajectory[] = [];
      for (let i = 0; i < perIter; i++) {
        const taskId = TASK_IDS[Math.floor(i / G) % TASK_IDS.length];
        const group = Math.floor(i / G);
        train.push(
          fixtureTrajectory({
            taskId: perIter > 64 ? `${taskId}-${Math.floor(group / TASK_IDS.length)}` : taskId,
            groupId: `${taskId}@${it}#${group}`,
            trajId: `t${it}-${i}`,
            iteration: it,
            split: 'train',
            good: i === 0 ? true : i === 1 ? false : r() < skill,
            r,
            scoreBase: 0,
            ...(it === 1 && i === 1 ? { tampered: FIXTURE_TAMPERED } : {}),
            chat,
          }),
        );
      }
      w(`iterations/${it}/trajectories.jsonl`, jsonl(train));
      const rewards = train.map((t) => t.reward.reward);
      const mean = rewards.reduce((s, x) => s + x, 0) / rewards.length;
      const std = Math.sqrt(rewards.reduce((s, x) => s + (x - mean) ** 2, 0) / rewards.length);
      Object.assign(row, {
        'reward/mean': mean,
        'reward/std': std,
        'tests/pass_rate': train.reduce((s, t) => s + t.reward.passRate, 0) / train.length,
        resolved: train.filter((t) => t.reward.resolved).length / train.length,
        frac_reward_zero_std: 0.25,
        'turns/mean': 5,
        format_errors: Math.max(0, Math.round(3 - it * 0.5 + r())),
        'loss/policy': 0.5 / it + r() * 0.05,
        kl: 0.002 * it + r() * 0.001,
        grad_norm: 1.5 / Math.sqrt(it) + r() * 0.1,
        'time/rollout_s': 30 + r() * 5,
        episodes: train.length + heldout.length,
        'episodes/failed': 0,
        'episodes/tampered': train.filter((t) => t.reward.tampered !== undefined).length,
      });
    }
    if (lora) {
      w(
        `checkpoints/${it}/adapter_config.json`,
        JSON.stringify({ peft_type: 'LORA', task_type: 'CAUSAL_LM', ...lora, base_model_name_or_path: opts.model ?? '' }, null, 2),
      );
      w(`checkpoints/${it}/adapter_model.safetensors`, '');
    } else w(`checkpoints/${it}/model.safetensors`, '');
    if (chat)
      w(`checkpoints/${it}/action_format.json`, JSON.stringify({ schema: 'turnwise/action-format@1', format: 'chat' }, null, 2) + '\n');
    metrics.push(row);
  }
  w('metrics.jsonl', jsonl(metrics));
  const state = opts.state ?? 'finished';
  w(
    'status.json',
    JSON.stringify({
      schema: SCHEMA.runStatus,
      runId,
      state,
      pid: state === 'running' ? (opts.pid ?? process.pid) : undefined,
      iterations,
      lastCompleteIteration: iterations,
      updatedAt: '2025-01-01T12:00:00.000Z',
    }),
  );
  return dir;
}

/** A workspace with the files the fixture's trajectories touch (so the repository looks real). */
export function writeFixtureWorkspace(workspace: string): void {
  fs.mkdirSync(path.join(workspace, 'calc'), { recursive: true });
  fs.mkdirSync(path.join(workspace, 'tests'), { recursive: true });
  fs.writeFileSync(path.join(workspace, FIXTURE_FILE), FIXED);
  fs.writeFileSync(path.join(workspace, 'calc', '__init__.py'), '');
  fs.writeFileSync(
    path.join(workspace, TESTS_FILE),
    'from calc.ops import add, clamp\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_clamp():\n    assert clamp(10, 0, 9) == 9\n',
  );
}

if (require.main === module) {
  const arg = (name: string) => {
    const i = process.argv.indexOf(`--${name}`);
    return i > 0 ? process.argv[i + 1] : undefined;
  };
  const ws = arg('workspace');
  if (!ws) {
    console.error(
      'usage: runFixture.ts --workspace DIR [--iterations N] [--trajectories N] [--estimator E] [--seed S] [--run-id ID] [--state S] [--files]',
    );
    process.exit(2);
  }
  if (process.argv.includes('--files')) writeFixtureWorkspace(ws);
  const dir = writeFixtureRun(ws, {
    runId: arg('run-id'),
    estimator: arg('estimator'),
    iterations: arg('iterations') ? Number(arg('iterations')) : undefined,
    trajectories: arg('trajectories') ? Number(arg('trajectories')) : undefined,
    seed: arg('seed') ? Number(arg('seed')) : undefined,
    state: arg('state') as FixtureOptions['state'],
    metricsOnly: process.argv.includes('--metrics-only'),
    model: arg('model'),
    loraR: arg('lora-r') ? Number(arg('lora-r')) : undefined,
    chat: process.argv.includes('--chat'),
  });
  console.log(dir);
}
