// `turnwise train` input that used to be ignored or answered with a raw error: flags a resume
// cannot honour, --iterations on a resume, the workspace's turnwise.json under --workspace, a
// byte-order mark, a bad value in a run's own config.json, a folder that is not a model, a model
// whose context cannot hold an action, a model that writes in neither action format (or a chat
// model with replayCoef), a run whose workspace moved. The CLI runs in-process; every
// case is refused before any sandbox starts. Where a case would pass every check, its config
// names a Docker socket that does not exist, so it fails there (a real connection failure, no
// mock) instead of training.
import * as assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from '../../../src/cli/main';
import { runsRootFor } from '../../../src/cli/training-run';
import { RunDir } from '../../../src/core/run';
import { SCHEMA } from '../../../src/core/schema';
import { resolveTrainConfig, runConfigRecord } from '../../../src/train/config';
import { chatTokenizerFiles, tokenizerJsonSize } from '../../../src/policy/files/bpe';
import { writeModelFolder } from '../../../src/policy/files/hf';
import { initWeights } from '../../../src/policy/model/weights';

const ROOT = path.join(__dirname, '..', '..', '..');
const MODEL = path.join(ROOT, 'models', 'turnwise-tiny');
const WORKSPACE = path.join(ROOT, 'test', 'fixtures', 'py-shop');
const NO_ENGINE = 'unix:///nonexistent/turnwise-test/docker.sock';

async function cli(args: string[], cwd?: string): Promise<{ code: number; out: string }> {
  let out = '';
  const was = process.cwd();
  if (cwd) process.chdir(cwd);
  try {
    const code = await main(args, { out: (t) => void (out += t + '\n'), err: (t) => void (out += t + '\n') });
    return { code, out };
  } finally {
    process.chdir(was);
  }
}

/** A finished 2-iteration run (iterations 0..2 complete) as RunDir writes it. */
function finishedRun(runsRoot: string, overrides: Record<string, unknown> = {}): RunDir {
  const c = resolveTrainConfig({ workspace: WORKSPACE, iterations: 2, dockerHost: NO_ENGINE, executionProvider: 'cpu', ...overrides });
  const run = RunDir.create(runsRoot, 'r1', runConfigRecord(c, { runId: 'r1', startModel: MODEL, createdAt: 'now' }));
  run.writeTasks([{ id: 'a' }, { id: 'b' }] as never, { train: ['a'], heldout: ['b'] });
  for (const n of [0, 1, 2]) {
    fs.mkdirSync(run.checkpointDir(n), { recursive: true });
    for (const f of fs.readdirSync(MODEL))
      if (!f.startsWith('warmstart')) fs.linkSync(path.join(MODEL, f), path.join(run.checkpointDir(n), f));
    run.writeTrajectories(n, 'train', []);
    run.commitIteration({ schema: SCHEMA.metrics, iteration: n } as never);
  }
  run.writeStatus({ state: 'finished', iterations: 2, lastCompleteIteration: 2 });
  return run;
}

describe('cli: train input that is refused or applied, never ignored', function () {
  this.timeout(60_000);
  let tmp: string;
  const saved = process.env.TURNWISE_DOCKER_ENGINES;
  beforeEach(() => {
    delete process.env.TURNWISE_DOCKER_ENGINES;
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-train-input-'));
  });
  afterEach(() => {
    if (saved !== undefined) process.env.TURNWISE_DOCKER_ENGINES = saved;
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('--resume with a flag it cannot honour is refused naming each flag, before the run is touched', async () => {
    const run = finishedRun(tmp);
    const status = fs.readFileSync(run.file('status.json'), 'utf8');
    const r = await cli(['train', '--resume', run.dir, '--estimator', 'rloo', '--seed', '4', '--model', 'not-a-model']);
    assert.equal(r.code, 2, r.out);
    assert.match(r.out, /cannot honour --model, --estimator, --seed/);
    assert.match(r.out, /--iterations N/);
    assert.equal(fs.readFileSync(run.file('status.json'), 'utf8'), status);
  });

  it('--resume of a finished run says there is nothing to do and leaves it as it was; --iterations N goes on to N', async () => {
    const run = finishedRun(tmp);
    const files = () => ['status.json', 'config.json', 'metrics.jsonl'].map((f) => fs.readFileSync(run.file(f), 'utf8'));
    const before = files();
    let r = await cli(['train', '--resume', run.dir]);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /r1 is finished: iterations 0–2 are complete.*nothing to do/);
    assert.doesNotMatch(r.out, /run finished/);
    assert.deepEqual(files(), before);
    r = await cli(['train', '--resume', run.dir, '--iterations', '1']);
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, /--iterations 1 is fewer than the 2 iteration\(s\) r1 has already completed/);
    // More iterations are applied: the run goes on (and stops at the engine this test gives it),
    // then, having completed nothing, puts its status and config back.
    r = await cli(['train', '--resume', run.dir, '--iterations', '4']);
    assert.match(r.out, /the run now goes to iteration 4 \(its config\.json said 2\)/);
    assert.doesNotMatch(r.out, /nothing to do/);
    assert.equal(r.code, 1, r.out);
    assert.deepEqual(files(), before);
  });

  it("--resume --provider continues on another device (the CPU after a GPU failed); config.json keeps the run's own", async () => {
    const run = finishedRun(tmp, { executionProvider: 'webgpu' });
    const config = fs.readFileSync(run.file('config.json'), 'utf8');
    const r = await cli(['train', '--resume', run.dir, '--iterations', '3', '--provider', 'cpu']);
    assert.doesNotMatch(r.out, /cannot honour/);
    assert.match(r.out, /the run continues on the cpu provider \(its config\.json says webgpu, which it keeps\)/);
    // It goes on (and stops at the engine this test gives it); config.json is the run's own.
    assert.equal(r.code, 1, r.out);
    assert.equal(JSON.parse(fs.readFileSync(run.file('config.json'), 'utf8')).executionProvider, 'webgpu');
    assert.equal(fs.readFileSync(run.file('config.json'), 'utf8'), config);
  });

  it('--resume of a run whose workspace moved names the config field to change (not --workspace, which a resume refuses)', async () => {
    const run = finishedRun(tmp, { workspace: path.join(tmp, 'moved-away') });
    const r = await cli(['train', '--resume', run.dir, '--iterations', '3']);
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, /trains on the workspace .*moved-away, which no longer exists/);
    assert.match(r.out, /set "workspace" in .*r1\/config\.json/);
    assert.doesNotMatch(r.out, /pass --workspace/);
  });

  it("a bad value in a run's own config.json names that file", async () => {
    const run = finishedRun(tmp);
    const cfg = JSON.parse(fs.readFileSync(run.file('config.json'), 'utf8'));
    fs.writeFileSync(run.file('config.json'), JSON.stringify({ ...cfg, groupSize: 0 }));
    const r = await cli(['train', '--resume', run.dir]);
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, new RegExp(`${run.file('config.json').replace(/[.]/g, '\\.')}: config field "groupSize" must be`));
  });

  it("--workspace DIR reads DIR's turnwise.json, as running in DIR does", async () => {
    const ws = path.join(tmp, 'ws');
    fs.cpSync(WORKSPACE, ws, { recursive: true });
    fs.writeFileSync(path.join(ws, 'turnwise.json'), JSON.stringify({ estimator: 'no-such-estimator', dockerHost: NO_ENGINE }));
    for (const r of [
      await cli(['train', '--workspace', ws, '--runs', path.join(tmp, 'runs')]),
      await cli(['train', '--runs', path.join(tmp, 'runs')], ws),
    ]) {
      assert.equal(r.code, 1, r.out);
      assert.match(r.out, /turnwise\.json: unknown estimator "no-such-estimator"/);
    }
    assert.ok(!fs.existsSync(path.join(tmp, 'runs')) || fs.readdirSync(path.join(tmp, 'runs')).length === 0, 'no run directory');
  });

  it("--max-minutes: a negative or non-numeric budget is a usage error; on a resume it is refused like the run's other settings", async () => {
    for (const bad of ['-5', 'half']) {
      const r = await cli(['train', '--workspace', WORKSPACE, `--max-minutes=${bad}`, '--runs', path.join(tmp, 'runs')]);
      assert.equal(r.code, 2, r.out);
      assert.match(r.out, /--max-minutes must be a number( at least 0)?, got "(-5|half)"/);
    }
    const run = finishedRun(tmp);
    const r = await cli(['train', '--resume', run.dir, '--max-minutes', '30']);
    assert.equal(r.code, 2, r.out);
    assert.match(r.out, /cannot honour --max-minutes/);
  });

  it('a turnwise.json that starts with a byte-order mark is read (its bad value is named, not an invisible character)', async () => {
    const ws = path.join(tmp, 'ws');
    fs.cpSync(WORKSPACE, ws, { recursive: true });
    fs.writeFileSync(path.join(ws, 'turnwise.json'), '\uFEFF' + JSON.stringify({ groupSize: 0, dockerHost: NO_ENGINE }));
    const r = await cli(['train', '--config', path.join(ws, 'turnwise.json'), '--runs', path.join(tmp, 'runs')]);
    assert.equal(r.code, 1, r.out);
    assert.doesNotMatch(r.out, /Unexpected token/);
    assert.match(r.out, /turnwise\.json: config field "groupSize" must be an integer in \[1, 256\], got 0/);
  });

  it('--model on a folder that holds no model says so (not a raw ENOENT on config.json)', async () => {
    const empty = path.join(tmp, 'empty');
    fs.mkdirSync(empty);
    const r = await cli(['train', '--workspace', WORKSPACE, '--model', empty, '--runs', path.join(tmp, 'runs')]);
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, /empty is not a model folder: it holds neither config\.json nor model\.safetensors/);
    assert.match(r.out, /a run's checkpoints\/N/);
    assert.doesNotMatch(r.out, /ENOENT/);
  });

  it('a model whose context cannot hold a prompt beside maxActionTokens is refused before any work, naming the field', async () => {
    const short = path.join(tmp, 'short');
    fs.mkdirSync(short);
    for (const f of fs.readdirSync(MODEL)) if (!f.startsWith('warmstart')) fs.linkSync(path.join(MODEL, f), path.join(short, f));
    const cfg = JSON.parse(fs.readFileSync(path.join(MODEL, 'config.json'), 'utf8'));
    fs.rmSync(path.join(short, 'config.json'));
    fs.writeFileSync(path.join(short, 'config.json'), JSON.stringify({ ...cfg, max_position_embeddings: 64 }));
    const r = await cli(['train', '--workspace', WORKSPACE, '--model', short, '--runs', path.join(tmp, 'runs')]);
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, /maxActionTokens 128 leaves no room for the prompt: .*short has a context of 64 tokens/);
    assert.match(r.out, /set "maxActionTokens" to at most 32/);
    assert.doesNotMatch(r.out, /empty sequence|check Docker/);
    assert.ok(!fs.existsSync(path.join(tmp, 'runs')) || fs.readdirSync(path.join(tmp, 'runs')).length === 0, 'no run directory');
  });

  it('a model that can write actions in neither format is refused before any work; a chat model with replayCoef too', async () => {
    // Generated Hugging Face folders (random weights): a Llama 3 tokenizer without its template
    // has neither a chat template nor the compact format's tokens.
    const folder = (name: string, kind: 'llama3' | 'chatml', template: boolean) => {
      const f = chatTokenizerFiles(kind);
      const { chat_template: _t, ...bare } = f.tokenizerConfig;
      const dir = path.join(tmp, name);
      writeModelFolder(
        dir,
        initWeights(
          {
            model_type: kind === 'llama3' ? 'llama' : 'qwen2',
            hidden_size: 16,
            intermediate_size: 24,
            num_hidden_layers: 1,
            num_attention_heads: 2,
            num_key_value_heads: 1,
            rms_norm_eps: 1e-5,
            rope_theta: 10_000,
            vocab_size: Math.ceil(tokenizerJsonSize(f.tokenizerJson) / 64) * 64,
            max_position_embeddings: 1024,
            tie_word_embeddings: true,
          },
          1,
          0.2,
        ),
        { dtype: 'float32', tokenizerJson: f.tokenizerJson, tokenizerConfig: template ? f.tokenizerConfig : bare },
      );
      return dir;
    };
    const none = folder('llama-no-template', 'llama3', false);
    const r = await cli(['train', '--workspace', WORKSPACE, '--model', none, '--runs', path.join(tmp, 'runs')]);
    assert.equal(r.code, 1, r.out);
    assert.match(
      r.out,
      /llama-no-template cannot write the agent's actions: its tokenizer has neither a chat template .* nor the <\|im_start\|> \/ <\|im_end\|> tokens/,
    );
    assert.match(r.out, /chat_template\.jinja beside tokenizer_config\.json/);
    assert.doesNotMatch(r.out, /check Docker/);
    const cfg = path.join(tmp, 'replay.json');
    fs.writeFileSync(cfg, JSON.stringify({ model: folder('qwen-chat', 'chatml', true), replayCoef: 0.1, dockerHost: NO_ENGINE }));
    const rr = await cli(['train', '--workspace', WORKSPACE, '--config', cfg, '--runs', path.join(tmp, 'runs')]);
    assert.equal(rr.code, 1, rr.out);
    assert.match(rr.out, /replayCoef 0\.1 replays turnwise-tiny's warm-start demonstrations/);
    assert.match(rr.out, /set "replayCoef" to 0/);
    assert.ok(!fs.existsSync(path.join(tmp, 'runs')) || fs.readdirSync(path.join(tmp, 'runs')).length === 0, 'no run directory');
  });

  it('a run another process works in is refused with its pid; after that process is killed (-9) its lock is taken over', async () => {
    const run = finishedRun(tmp);
    // A real second process takes the run's lock with RunDir.lock() and keeps it.
    const holder = spawn(
      process.execPath,
      [
        '--require',
        'tsx/cjs',
        '-e',
        `require(${JSON.stringify(path.join(ROOT, 'src', 'core', 'run'))}).RunDir.open(process.argv[1]).lock(); console.log('locked'); setInterval(() => {}, 1000);`,
        run.dir,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    try {
      await new Promise<void>((resolve, reject) => {
        holder.stdout!.on('data', (d) => String(d).includes('locked') && resolve());
        holder.once('exit', (c) => reject(new Error(`the lock holder exited (${c})`)));
      });
      const lock = JSON.parse(fs.readFileSync(run.file('lock.json'), 'utf8'));
      assert.equal(lock.pid, holder.pid);
      const status = fs.readFileSync(run.file('status.json'), 'utf8');
      let r = await cli(['train', '--resume', run.dir, '--iterations', '3']);
      assert.equal(r.code, 1, r.out);
      assert.match(r.out, new RegExp(`r1 is in use by process ${holder.pid} .*two processes must not write one run`));
      assert.match(r.out, new RegExp(`kill ${holder.pid}`));
      assert.equal(fs.readFileSync(run.file('status.json'), 'utf8'), status, 'the refused process wrote nothing');
      const gone = new Promise((resolve) => holder.once('exit', resolve));
      holder.kill('SIGKILL');
      await gone;
      r = await cli(['train', '--resume', run.dir]);
      assert.equal(r.code, 0, r.out);
      assert.match(r.out, new RegExp(`took over the lock of process ${holder.pid}, which is gone`));
      assert.ok(!fs.existsSync(run.file('lock.json')), 'released on the way out');
    } finally {
      holder.kill('SIGKILL');
    }
  });

  it('warmstart --out over an existing model is refused without --force, and the model is left as it was', async () => {
    const out = path.join(tmp, 'model');
    fs.cpSync(MODEL, out, { recursive: true });
    const before = fs.readdirSync(out).map((f) => [f, fs.readFileSync(path.join(out, f)).toString('base64')]);
    const r = await cli(['warmstart', '--out', out, '--minutes', '0.01']);
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, /already holds a model; a warm start would replace it/);
    assert.match(r.out, /--from .*model --out NEW_DIR.*--force/);
    assert.deepEqual(
      fs.readdirSync(out).map((f) => [f, fs.readFileSync(path.join(out, f)).toString('base64')]),
      before,
    );
  });

  it('a workspace holding a folder whose name is not UTF-8 is refused naming it (not ENOENT with code internal)', async () => {
    const ws = path.join(tmp, 'ws');
    fs.cpSync(WORKSPACE, ws, { recursive: true });
    const odd = Buffer.concat([Buffer.from(path.join(ws, 'dir_')), Buffer.from([0xff])]);
    fs.mkdirSync(odd);
    fs.writeFileSync(Buffer.concat([odd, Buffer.from('/x.py')]), 'x = 1\n');
    fs.writeFileSync(path.join(ws, 'turnwise.json'), JSON.stringify({ dockerHost: NO_ENGINE }));
    const r = await cli(['train', '--workspace', ws, '--runs', path.join(tmp, 'runs'), '--json']);
    assert.equal(r.code, 1, r.out);
    const start = r.out.indexOf('{');
    const e = JSON.parse(r.out.slice(start, r.out.indexOf('\n}', start) + 2)).error;
    assert.equal(e.code, 'invalid-input');
    assert.match(e.message, /holds a name that is not UTF-8: dir_\\xff/);
    assert.match(e.hint, /rename it/);
  });
});

describe('cli: where runs are', () => {
  it("a new train run goes to its workspace's .turnwise/runs whatever the current folder; the demo's and a resume's to the current folder's; --runs wins", () => {
    const cwd = '/home/u/elsewhere';
    assert.equal(runsRootFor({ workspace: '/repos/app' }, cwd), '/repos/app/.turnwise/runs');
    assert.equal(runsRootFor({ workspace: 'app' }, cwd), '/home/u/elsewhere/app/.turnwise/runs');
    assert.equal(runsRootFor({ workspace: '/repos/app', demo: true }, cwd), '/home/u/elsewhere/.turnwise/runs');
    assert.equal(runsRootFor({ workspace: '/repos/app', resume: 'r1' }, cwd), '/home/u/elsewhere/.turnwise/runs');
    assert.equal(runsRootFor({ workspace: '/repos/app', runs: 'out' }, cwd), '/home/u/elsewhere/out');
    assert.equal(runsRootFor({}, cwd), '/home/u/elsewhere/.turnwise/runs');
  });

  it('eval --run <id> --workspace DIR finds the run in that workspace from another folder', async () => {
    const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-runs-ws-'));
    const elsewhere = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-runs-cwd-'));
    try {
      finishedRun(path.join(ws, '.turnwise', 'runs'));
      const lost = await cli(['eval', '--run', 'r1'], elsewhere);
      assert.equal(lost.code, 1);
      assert.match(lost.out, /no run "r1"/);
      // Found: it reads that run's own files (this fixture's tasks are stubs, refused as such).
      const found = await cli(['eval', '--run', 'r1', '--workspace', ws], elsewhere);
      assert.doesNotMatch(found.out, /no run "r1"/);
      assert.ok(found.out.includes(path.join(ws, '.turnwise', 'runs', 'r1', 'tasks.jsonl')), found.out);
    } finally {
      fs.rmSync(ws, { recursive: true, force: true });
      fs.rmSync(elsewhere, { recursive: true, force: true });
    }
  });
});

describe('cli: the reply limit of an evaluation', () => {
  it('--max-action-tokens is one flag for a local model and an endpoint (it was refused without --endpoint)', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-mat-'));
    const was = process.env.DOCKER_HOST;
    process.env.DOCKER_HOST = NO_ENGINE;
    try {
      const tasks = path.join(dir, 'tasks.jsonl');
      fs.writeFileSync(
        tasks,
        JSON.stringify({
          schema: SCHEMA.task,
          id: 't',
          source: 'file',
          instruction: 'fix it',
          language: 'python',
          testCommand: 'pytest',
          fail_to_pass: ['tests/test_pricing.py::test_clamp_inside_range'],
          pass_to_pass: [],
        }) + '\n',
      );
      const r = await cli(['eval', '--tasks', tasks, '--workspace', WORKSPACE, '--max-action-tokens', '64']);
      assert.doesNotMatch(r.out, /goes with --endpoint/);
      assert.match(r.out, /Docker|nonexistent/, 'it got as far as the sandboxes');
      const bad = await cli(['eval', '--tasks', tasks, '--workspace', WORKSPACE, '--max-action-tokens', '4096']);
      assert.equal(bad.code, 2);
      assert.match(bad.out, /--max-action-tokens/);
    } finally {
      if (was === undefined) delete process.env.DOCKER_HOST;
      else process.env.DOCKER_HOST = was;
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
