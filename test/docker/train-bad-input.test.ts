// Bad input for `turnwise train`, table-driven like test/unit/cli/bad-input.test.ts: each row
// asserts the exit code, that the message names the problem and the fix, that the workspace is
// byte for byte as it was, and that a mistake found before any work leaves no run directory
// behind. Docker tier: some rows get as far as the sandboxes (no task survives validation).
import * as assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from '../../src/cli/main';
import { runnerCommand } from '../../src/tasks/runners';

const root = path.join(__dirname, '..', '..');

async function cli(argv: string[]) {
  let out = '';
  let err = '';
  const code = await main(argv, { out: (t) => (out += t + '\n'), err: (t) => (err += t + '\n') });
  return { code, out, err };
}

function treeHash(dir: string): string {
  const h = createHash('sha256');
  const walk = (rel: string) => {
    for (const e of fs.readdirSync(path.join(dir, rel), { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const r = path.join(rel, e.name);
      h.update(`${r}\0${fs.lstatSync(path.join(dir, r)).mode}\0`);
      if (e.isDirectory()) walk(r);
      else h.update(fs.readFileSync(path.join(dir, r)));
    }
  };
  walk('');
  return h.digest('hex');
}

interface Row {
  name: string;
  /** Makes the workspace `ws` (and anything else) under `dir`. */
  setup: (dir: string) => void;
  argv: (dir: string) => string[];
  env?: Record<string, string>;
  code: number;
  problem: RegExp;
  fix: RegExp;
}

const shop = path.join(root, 'test', 'fixtures', 'py-shop');
const withShop = (d: string) => fs.cpSync(shop, path.join(d, 'ws'), { recursive: true });
const model = (d: string) => path.join(d, 'model');
const copyModel = (d: string) => fs.cpSync(path.join(root, 'models', 'turnwise-tiny'), model(d), { recursive: true });
const base = (d: string, ...more: string[]) => ['train', '--workspace', path.join(d, 'ws'), '--runs', path.join(d, 'runs'), ...more];
const config = (d: string, c: Record<string, unknown>) => {
  fs.writeFileSync(path.join(d, 'turnwise.json'), JSON.stringify({ workspace: 'ws', ...c }));
  return ['train', '--config', path.join(d, 'turnwise.json'), '--runs', path.join(d, 'runs')];
};

const ROWS: Row[] = [
  {
    name: 'a workspace without detectable tests',
    setup: (d) => {
      fs.mkdirSync(path.join(d, 'ws'));
      fs.writeFileSync(path.join(d, 'ws', 'app.py'), 'def add(a, b):\n    return a + b\n');
      copyModel(d);
    },
    argv: (d) => base(d, '--model', model(d)),
    code: 1,
    problem: /no test suite found in .*ws/,
    fix: /add tests/,
  },
  {
    name: 'no task survives validation (the tests do not exercise the code)',
    setup: (d) => {
      fs.mkdirSync(path.join(d, 'ws', 'tests'), { recursive: true });
      fs.writeFileSync(path.join(d, 'ws', 'calc.py'), 'def add(a, b):\n    return a + b\n');
      fs.writeFileSync(path.join(d, 'ws', 'tests', 'test_calc.py'), 'def test_truth():\n    assert 1 + 1 == 2\n');
      copyModel(d);
    },
    argv: (d) => [...config(d, { maxTasks: 2, model: model(d) }), '--json'],
    code: 1,
    problem: /no task survived validation/,
    fix: /tests exercise the code/,
  },
  {
    // The tasks pass `tasks check` as a file but score wrong: their fail-to-pass test passes
    // with the code unchanged. The reward canary of the starting evaluation stops the run.
    name: 'a task file whose tasks cannot tell a fix from no fix (the reward canary)',
    setup: (d) => {
      withShop(d);
      copyModel(d);
      const task = (id: string, test: string) => ({
        schema: 'turnwise/task@1',
        id,
        source: 'file',
        instruction: `Make ${test} pass.`,
        language: 'python',
        testCommand: runnerCommand('pytest', []),
        reportFormat: 'junit-xml',
        runner: 'pytest',
        fail_to_pass: [test],
        pass_to_pass: [],
      });
      fs.writeFileSync(
        path.join(d, 'tasks.jsonl'),
        [
          task('passes-already-1', 'tests/test_pricing.py::test_clamp_inside_range'),
          task('passes-already-2', 'tests/test_inventory.py::test_add_accumulates'),
        ]
          .map((t) => JSON.stringify(t))
          .join('\n') + '\n',
      );
    },
    argv: (d) =>
      config(d, { taskSource: 'file', tasksFile: path.join(d, 'tasks.jsonl'), heldoutFraction: 0.5, iterations: 1, model: model(d) }),
    code: 1,
    problem:
      /reward canary failed in the evaluation of iteration 0: task passes-already-\d: noop-resolved: the no-op episode \(the task posed, nothing done\) scored resolved/,
    fix: /turnwise tasks check/,
  },
  {
    // The scoring test run has its own time limit (testTimeoutMs): a suite slower than it cannot
    // be scored, and the canary of the starting evaluation says which setting to raise.
    name: 'a scoring time limit below the time the suite takes (testTimeoutMs)',
    setup: (d) => {
      withShop(d);
      copyModel(d);
      fs.writeFileSync(path.join(d, 'ws', 'tests', 'conftest.py'), 'import time\n\ntime.sleep(4)\n');
      fs.writeFileSync(path.join(d, 'ws', 'tests', 'test_todo.py'), 'def test_todo():\n    assert False\n');
      const task = {
        schema: 'turnwise/task@1',
        id: 'slow-suite',
        source: 'file',
        instruction: 'Make tests/test_todo.py::test_todo pass.',
        language: 'python',
        testCommand: runnerCommand('pytest', []),
        reportFormat: 'junit-xml',
        runner: 'pytest',
        fail_to_pass: ['tests/test_todo.py::test_todo'],
        pass_to_pass: [],
      };
      fs.writeFileSync(
        path.join(d, 'tasks.jsonl'),
        [task, { ...task, id: 'slow-suite-2' }].map((t) => JSON.stringify(t)).join('\n') + '\n',
      );
    },
    argv: (d) =>
      config(d, {
        taskSource: 'file',
        tasksFile: path.join(d, 'tasks.jsonl'),
        heldoutFraction: 0.5,
        iterations: 1,
        model: model(d),
        testTimeoutMs: 1500,
      }),
    code: 1,
    problem: /reward canary failed in the evaluation of iteration 0: task slow-suite(-2)?: unscorable: .*timed out after/,
    fix: /raise testTimeoutMs .*turnwise\.sandbox\.testTimeoutMs/,
  },
  {
    name: 'Docker down',
    setup: (d) => {
      withShop(d);
      copyModel(d);
    },
    argv: (d) => base(d, '--model', model(d)),
    env: { DOCKER_HOST: 'unix:///nonexistent.sock' },
    code: 1,
    problem: /Docker/,
    fix: /start Docker|DOCKER_HOST|turnwise\.docker\.host|doctor/,
  },
  {
    name: '--model names a folder that does not exist',
    setup: withShop,
    argv: (d) => base(d, '--model', path.join(d, 'no-such-model')),
    code: 1,
    problem: /model directory .*no-such-model does not exist/,
    fix: /policy init|--model/,
  },
  {
    name: '--model holds a corrupt model.safetensors',
    setup: (d) => {
      withShop(d);
      copyModel(d);
      fs.writeFileSync(path.join(model(d), 'model.safetensors'), Buffer.from('this is not a safetensors file at all'));
    },
    argv: (d) => base(d, '--model', model(d)),
    code: 1,
    problem: /model\.safetensors/,
    fix: /→ /,
  },
  {
    name: 'a config with an unknown estimator',
    setup: withShop,
    argv: (d) => config(d, { estimator: 'ppo' }),
    code: 1,
    problem: /unknown estimator "ppo"/,
    fix: /use one of: .*grpo/,
  },
  {
    name: 'a config with an unknown field',
    setup: withShop,
    argv: (d) => config(d, { itertions: 2 }),
    code: 1,
    problem: /unknown field "itertions"/,
    fix: /valid fields: .*iterations/,
  },
  {
    name: '--resume of a run that does not exist',
    setup: withShop,
    argv: (d) => ['train', '--resume', 'no-such-run', '--runs', path.join(d, 'runs')],
    code: 1,
    problem: /no run "no-such-run"/,
    fix: /give a run id/,
  },
];

describe('docker: turnwise train refuses bad input with the problem and the fix, and changes nothing', function () {
  this.timeout(600_000);
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-train-bad-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  for (const row of ROWS) {
    it(row.name, async () => {
      row.setup(dir);
      const ws = path.join(dir, 'ws');
      const before = treeHash(ws);
      const saved = Object.fromEntries(Object.keys(row.env ?? {}).map((k) => [k, process.env[k]]));
      Object.assign(process.env, row.env ?? {});
      let r: Awaited<ReturnType<typeof cli>>;
      try {
        r = await cli(row.argv(dir));
      } finally {
        for (const [k, v] of Object.entries(saved))
          if (v === undefined) delete process.env[k];
          else process.env[k] = v;
      }
      const text = r.err + r.out;
      assert.equal(r.code, row.code, `exit code; output:\n${text.slice(-3000)}`);
      assert.match(text, row.problem);
      assert.match(text, row.fix);
      assert.ok(!/\n\s+at .*\(.*:\d+:\d+\)/.test(text), 'no stack trace');
      assert.equal(treeHash(ws), before, 'the workspace changed');
      // A run that fails before its first iteration (here even one that got as far as making its
      // tasks) holds nothing complete, and leaves no run directory.
      const runs = fs.existsSync(path.join(dir, 'runs')) ? fs.readdirSync(path.join(dir, 'runs')) : [];
      assert.deepEqual(runs, [], 'a run that failed before its first iteration leaves no run directory');
    });
  }
});
