// `turnwise train` checks its memory plan before any sandbox starts: a plan over the memory the
// run may use (TURNWISE_MEMORY_LIMIT_MB here) is refused with the plan's numbers and the settings
// that fit, leaving no run directory; under the limit the run goes on (to a Docker socket that
// does not exist, where it fails: a real connection failure, no mock).
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from '../../../src/cli/main';
import { resolveTrainConfig, runConfigRecord, TRAIN_DEFAULTS } from '../../../src/train/config';
import { RunDir } from '../../../src/core/run';
import { SCHEMA, type Task } from '../../../src/core/schema';
import { memoryPlanCheck } from '../../../src/train/memory-plan';

const ROOT = path.join(__dirname, '..', '..', '..');
const WORKSPACE = path.join(ROOT, 'test', 'fixtures', 'py-shop');
const NO_ENGINE = 'unix:///nonexistent/turnwise-test/docker.sock';
const MODEL = path.join(ROOT, 'models', 'turnwise-tiny');

async function cli(args: string[]): Promise<{ code: number; out: string }> {
  let out = '';
  const code = await main(args, { out: (t) => void (out += t + '\n'), err: (t) => void (out += t + '\n') });
  return { code, out };
}

describe('cli: train refuses a run that its memory plan says will not fit', function () {
  this.timeout(60_000);
  let tmp: string;
  const saved = { limit: process.env.TURNWISE_MEMORY_LIMIT_MB, engines: process.env.TURNWISE_DOCKER_ENGINES };
  beforeEach(() => {
    delete process.env.TURNWISE_DOCKER_ENGINES;
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-train-memory-'));
  });
  afterEach(() => {
    fs.rmSync(tmp, { recursive: true, force: true });
    for (const [k, v] of [
      ['TURNWISE_MEMORY_LIMIT_MB', saved.limit],
      ['TURNWISE_DOCKER_ENGINES', saved.engines],
    ] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });

  it('over the limit: refused before any sandbox, naming the plan and the settings that fit; no run directory', async () => {
    process.env.TURNWISE_MEMORY_LIMIT_MB = '1200';
    const runs = path.join(tmp, 'runs');
    fs.writeFileSync(
      path.join(tmp, 'turnwise.json'),
      JSON.stringify({ dockerHost: NO_ENGINE, executionProvider: 'cpu', concurrency: 8, updateTokensPerStep: 8192 }),
    );
    const r = await cli(['train', '--workspace', WORKSPACE, '--config', path.join(tmp, 'turnwise.json'), '--runs', runs]);
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, /would not fit in memory: its plan needs [\d,.]+ MiB over the 1,200 MiB of TURNWISE_MEMORY_LIMIT_MB/);
    assert.match(r.out, /update activations [\d,.]+ MiB/);
    assert.match(r.out, /"updateTokensPerStep": \d+/);
    assert.doesNotMatch(r.out, /check Docker|docker\.sock/);
    assert.ok(!fs.existsSync(runs) || fs.readdirSync(runs).length === 0, 'no run directory');
  });

  it('a resume is planned too: over the limit it is refused before any sandbox, and the run is left as it was', async () => {
    process.env.TURNWISE_MEMORY_LIMIT_MB = '1200';
    const runs = path.join(tmp, 'runs');
    const c = resolveTrainConfig({
      workspace: WORKSPACE,
      iterations: 3,
      dockerHost: NO_ENGINE,
      executionProvider: 'cpu',
      concurrency: 8,
      updateTokensPerStep: 8192,
    });
    const run = RunDir.create(
      runs,
      'run-big',
      runConfigRecord(c, { runId: 'run-big', startModel: MODEL, createdAt: '2026-01-01T00:00:00Z' }),
    );
    const task = {
      schema: SCHEMA.task,
      id: 't1',
      source: 'mutation',
      instruction: 'fix',
      language: 'python',
      testCommand: 'pytest',
      fail_to_pass: ['a'],
      pass_to_pass: [],
    } as unknown as Task;
    run.writeTasks([task, { ...task, id: 't2' }], { train: ['t1'], heldout: ['t2'] });
    run.writeStatus({ state: 'stopped', iterations: 3, lastCompleteIteration: -1 });
    const before = fs.readFileSync(path.join(run.dir, 'status.json'), 'utf8');
    const r = await cli(['train', '--resume', 'run-big', '--runs', runs]);
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, /would not fit in memory: its plan needs [\d,.]+ MiB over the 1,200 MiB of TURNWISE_MEMORY_LIMIT_MB/);
    assert.doesNotMatch(r.out, /check Docker|docker\.sock|nonexistent/);
    assert.equal(fs.readFileSync(path.join(run.dir, 'status.json'), 'utf8'), before, 'status unchanged');
    assert.ok(!fs.existsSync(path.join(run.dir, 'lock.json')), 'the lock is released');
  });

  it('under the limit the run goes on past the plan (here to the missing Docker engine)', async () => {
    process.env.TURNWISE_MEMORY_LIMIT_MB = '65536';
    fs.writeFileSync(path.join(tmp, 'turnwise.json'), JSON.stringify({ dockerHost: NO_ENGINE, executionProvider: 'cpu' }));
    const r = await cli(['train', '--workspace', WORKSPACE, '--config', path.join(tmp, 'turnwise.json'), '--runs', path.join(tmp, 'runs')]);
    assert.equal(r.code, 1, r.out);
    assert.doesNotMatch(r.out, /would not fit in memory/);
    assert.match(r.out, /nonexistent|Docker|docker/);
  });

  it("policy inspect shows the plan of a run at the default settings, full and LoRA; --provider a GPU's, with its device memory", async () => {
    process.env.TURNWISE_MEMORY_LIMIT_MB = '8192';
    const text = await cli(['policy', 'inspect', MODEL]);
    assert.equal(text.code, 0, text.out);
    assert.match(
      text.out,
      /memory plan \(cpu, full training, 8 episodes in flight × 1024 tokens, update micro-batches of 4 rows = 4096 tokens\)/,
    );
    assert.match(text.out, /memory plan \(cpu, LoRA r 16/);
    assert.match(text.out, /host total +[\d,.]+ MiB of 8,192 MiB/);
    const json = await cli(['policy', 'inspect', MODEL, '--json']);
    const r = JSON.parse(json.out);
    assert.equal(r.memoryPlan.limitBytes, 8192 * 1024 ** 2);
    assert.equal(r.memoryPlan.full.updateTokensPerStep, 4096);
    assert.ok(r.memoryPlan.full.hostBytes > r.memoryPlan.lora.hostBytes - 64 * 1024 ** 2);
    assert.ok(r.memoryPlan.full.parts.some((p: { name: string }) => p.name === 'update activations'));
    assert.equal(r.memoryPlan.provider, 'cpu');
    assert.equal(r.memoryPlan.full.deviceBytes, 0);
    // --provider webgpu: the plan on the device, against the memory TURNWISE_DEVICE_MEMORY_LIMIT_MB gives it.
    process.env.TURNWISE_DEVICE_MEMORY_LIMIT_MB = '4096';
    try {
      const gpu = await cli(['policy', 'inspect', MODEL, '--provider', 'webgpu']);
      assert.equal(gpu.code, 0, gpu.out);
      assert.match(gpu.out, /a run at the default settings on this machine \(webgpu\)/);
      assert.match(gpu.out, /memory plan \(webgpu, full training/);
      assert.match(gpu.out, /device weights .*uploaded once per weights version and shared by every session/);
      assert.match(gpu.out, /device total +[\d,.]+ MiB/);
      assert.match(gpu.out, /device memory: 4,096 MiB \(TURNWISE_DEVICE_MEMORY_LIMIT_MB\)/);
      assert.match(gpu.out, /at float16 \(a [\d.]+ MiB copy; GPU\)/);
      const gj = JSON.parse((await cli(['policy', 'inspect', MODEL, '--provider', 'webgpu', '--json'])).out);
      assert.equal(gj.memoryPlan.provider, 'webgpu');
      assert.equal(gj.memoryPlan.deviceLimitBytes, 4096 * 1024 ** 2);
      assert.ok(gj.memoryPlan.full.deviceBytes > gj.memoryPlan.lora.deviceBytes);
    } finally {
      delete process.env.TURNWISE_DEVICE_MEMORY_LIMIT_MB;
    }
  });

  it("Check Environment's memory plan line: ok under the limit, a warning with the fixes over it", () => {
    const given = { ...TRAIN_DEFAULTS, workspace: WORKSPACE };
    const ok = memoryPlanCheck(given, { TURNWISE_MEMORY_LIMIT_MB: '65536' });
    assert.equal(ok.status, 'ok', ok.detail);
    assert.match(
      ok.detail,
      /MiB of 65,536 MiB \(TURNWISE_MEMORY_LIMIT_MB\) at updateTokensPerStep 4096, 8 episodes in flight × 1024 tokens, full training; largest: update activations/,
    );
    const over = memoryPlanCheck({ ...given, updateTokensPerStep: 8192 }, { TURNWISE_MEMORY_LIMIT_MB: '1200' });
    assert.equal(over.status, 'warn');
    assert.match(over.detail, /a run would be refused/);
    assert.match(over.fix!, /"updateTokensPerStep": \d+/);
    const bad = memoryPlanCheck({ ...given, model: path.join(ROOT, 'no-such-model') }, {});
    assert.equal(bad.status, 'warn');
    assert.match(bad.detail, /no plan: .*no-such-model/);
  });
});
