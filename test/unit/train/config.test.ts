// The run's config is validated by name: an unknown field, estimator or loss, or a number out
// of range is an error that names the field and what is valid.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { TurnwiseError } from '../../../src/core/errors';
import { RL_LOSS_NAMES } from '../../../src/core/losses';
import { estimatorNames } from '../../../src/credit/registry';
import { commandSlotCount, poolSettings, readConfigFile, resolveTrainConfig, TRAIN_DEFAULTS } from '../../../src/train/config';
import { readTaskFile } from '../../../src/tasks/taskfile';

function refused(given: Record<string, unknown>, problem: RegExp, fix: RegExp): void {
  assert.throws(
    () => resolveTrainConfig(given),
    (e: unknown) => {
      assert.ok(e instanceof TurnwiseError, String(e));
      assert.equal(e.code, 'invalid-input');
      assert.match(e.message, problem);
      assert.match(`${e.message}\n${e.hint ?? ''}`, fix);
      return true;
    },
  );
}

describe('train/config: resolveTrainConfig', () => {
  it('empty config: the defaults', () => {
    assert.deepEqual(resolveTrainConfig({}), TRAIN_DEFAULTS);
  });

  it('given values override, schema is allowed, undefined is ignored', () => {
    const c = resolveTrainConfig({ schema: 'x', iterations: 2, groupSize: undefined, estimator: 'grpo', reward: { format: 0.5 } });
    assert.equal(c.iterations, 2);
    assert.equal(c.groupSize, TRAIN_DEFAULTS.groupSize);
    assert.equal(c.estimator, 'grpo');
    assert.equal(c.reward.format, 0.5);
    assert.equal(c.reward.efficiency, TRAIN_DEFAULTS.reward.efficiency);
  });

  it('every estimator and RL loss is selectable', () => {
    for (const estimator of estimatorNames()) assert.equal(resolveTrainConfig({ estimator }).estimator, estimator);
    for (const loss of RL_LOSS_NAMES) assert.equal(resolveTrainConfig({ loss }).loss, loss);
    assert.ok(estimatorNames().length >= 5);
  });

  it('unknown field: named, with the valid fields', () => {
    refused({ itertions: 3 }, /unknown field "itertions"/, /valid fields: .*iterations/);
    refused({ a: 1, b: 2 }, /unknown fields "a", "b"/, /valid fields/);
  });
  it('tasksFile (the one optional field) is accepted, and taskSource "file" needs it', () => {
    const c = resolveTrainConfig({ taskSource: 'file', tasksFile: '/x/tasks.jsonl' });
    assert.equal(c.tasksFile, '/x/tasks.jsonl');
    refused({ taskSource: 'file', tasksFile: 3 }, /"tasksFile" must be a string/, /fix "tasksFile"/);
  });
  it('cacheObservations: on by default, a boolean only (not "false", which would read as true)', () => {
    assert.equal(resolveTrainConfig({}).cacheObservations, true);
    assert.equal(resolveTrainConfig({ cacheObservations: false }).cacheObservations, false);
    refused({ cacheObservations: 'false' }, /"cacheObservations" must be true or false, got "false"/, /fix "cacheObservations"/);
  });
  it('lossAggregation: token by default, token or episode', () => {
    assert.equal(resolveTrainConfig({}).lossAggregation, 'token');
    assert.equal(resolveTrainConfig({ lossAggregation: 'episode' }).lossAggregation, 'episode');
    refused({ lossAggregation: 'sequence' }, /"lossAggregation" must be token or episode, got "sequence"/, /fix "lossAggregation"/);
  });

  it('replayCoef / replayRows: off and 4 by default; a non-negative weight and a whole number of rows', () => {
    const d = resolveTrainConfig({});
    assert.equal(d.replayCoef, 0);
    assert.equal(d.replayRows, 4);
    assert.equal(resolveTrainConfig({ replayCoef: 0.5, replayRows: 2 }).replayCoef, 0.5);
    refused({ replayCoef: -0.1 }, /"replayCoef" must be a number in \[0, 100\], got -0\.1/, /fix "replayCoef"/);
    refused({ replayRows: 1.5 }, /"replayRows" must be an integer in \[1, 256\], got 1\.5/, /fix "replayRows"/);
    refused({ replayRows: 0 }, /"replayRows" must be an integer/, /fix "replayRows"/);
  });

  it('commandConcurrency: a number given wins; 0 means cores / sandboxCpus locally, no limit on a remote engine', () => {
    const saved = process.env.DOCKER_HOST;
    const savedEngines = process.env.TURNWISE_DOCKER_ENGINES;
    delete process.env.TURNWISE_DOCKER_ENGINES;
    try {
      delete process.env.DOCKER_HOST;
      const d = resolveTrainConfig({});
      assert.equal(d.commandConcurrency, 0);
      assert.equal(commandSlotCount(d, 2), 2, 'local engine, 2 cores, 1 CPU per sandbox');
      assert.equal(commandSlotCount(resolveTrainConfig({ sandboxCpus: 0.5 }), 2), 4);
      assert.equal(commandSlotCount(resolveTrainConfig({ sandboxCpus: 4 }), 2), 1, 'never below one');
      assert.equal(commandSlotCount(resolveTrainConfig({ commandConcurrency: 3 }), 2), 3);
      assert.equal(commandSlotCount(resolveTrainConfig({ dockerHost: 'unix:///var/run/docker.sock' }), 2), 2, 'a socket is local');
      assert.equal(
        commandSlotCount(resolveTrainConfig({ dockerHost: 'ssh://me@box' }), 2),
        undefined,
        "this machine cannot see a remote engine's cores",
      );
      assert.equal(commandSlotCount(resolveTrainConfig({ dockerHosts: ['tcp://10.0.0.2:2375*16'] }), 2), undefined);
      assert.equal(commandSlotCount(resolveTrainConfig({ dockerHost: 'ssh://me@box', commandConcurrency: 12 }), 2), 12);
      process.env.DOCKER_HOST = 'tcp://10.0.0.3:2375';
      assert.equal(commandSlotCount(resolveTrainConfig({}), 2), undefined, 'DOCKER_HOST names a remote engine');
      refused({ commandConcurrency: -1 }, /"commandConcurrency" must be an integer in \[0, 4096\], got -1/, /fix "commandConcurrency"/);
    } finally {
      if (saved === undefined) delete process.env.DOCKER_HOST;
      else process.env.DOCKER_HOST = saved;
      if (savedEngines !== undefined) process.env.TURNWISE_DOCKER_ENGINES = savedEngines;
    }
  });

  it('negativeAdvantageWeight: 1 by default, within [0, 1]', () => {
    assert.equal(resolveTrainConfig({}).negativeAdvantageWeight, 1);
    assert.equal(resolveTrainConfig({ negativeAdvantageWeight: 0 }).negativeAdvantageWeight, 0);
    refused(
      { negativeAdvantageWeight: 1.5 },
      /"negativeAdvantageWeight" must be a number in \[0, 1\], got 1\.5/,
      /fix "negativeAdvantageWeight"/,
    );
  });
  it('unknown reward field', () =>
    refused({ reward: { speed: 1 } }, /unknown reward field "speed"/, /valid: .*efficiency.*format|valid: .*format/));
  it('unknown estimator: named, with the valid ones', () =>
    refused({ estimator: 'ppo' }, /unknown estimator "ppo"/, new RegExp(`use one of: ${estimatorNames().join(', ')}`)));
  it('unknown estimator parameter', () =>
    refused({ estimator: 'grpo', estimatorParams: { nope: 1 } }, /no parameter "nope"/, /its parameters/));
  it('unknown loss: named, with the valid ones', () =>
    refused({ loss: 'dpo' }, /unknown RL loss "dpo"/, new RegExp(`use one of: ${RL_LOSS_NAMES.join(', ')}`)));
  it('a warm-start-only loss is refused for RL and says why', () =>
    refused({ loss: 'sft' }, /unknown RL loss "sft" \(that loss is for the warm start only\)/, /use one of/));
  it('a2tgpo with a loss of one ratio per turn is refused before any work', () =>
    refused(
      { estimator: 'a2tgpo', loss: 'gspo-seq' },
      /a2tgpo scales the clip range per turn, which the loss gspo-seq/,
      /use loss ppo-token/,
    ));
  it('not an object', () => {
    for (const v of [null, [], 'x']) refused(v as never, /must be a JSON object/, /turnwise\.json/);
  });

  const ranges: [string, unknown, RegExp][] = [
    ['groupSize', 0, /"groupSize" must be an integer in \[1, 256\], got 0/],
    ['groupSize', 2.5, /"groupSize" must be an integer/],
    ['iterations', -1, /"iterations" must be an integer in \[0, /],
    ['lr', 2, /"lr" must be a number in \[0, 1\], got 2/],
    ['lr', '1e-5', /"lr" must be a number .*got "1e-5"/],
    ['heldoutFraction', 1, /"heldoutFraction" must be a number in \[0, 0\.9\]/],
    ['maxActionTokens', 4, /"maxActionTokens" must be an integer in \[8, 512\]/],
    ['topP', 0, /"topP" must be a number in \[0\.01, 1\]/],
    ['seed', 2 ** 32, /"seed" must be an integer/],
    ['concurrency', Number.NaN, /"concurrency" must be an integer/],
    ['evalSamples', 65, /"evalSamples" must be an integer in \[0, 64\]/],
    ['maxMinutes', -1, /"maxMinutes" must be a number in \[0, 1000000\], got -1/],
    ['maxMinutes', '30', /"maxMinutes" must be a number .*got "30"/],
  ];
  for (const [field, value, problem] of ranges) {
    it(`${field} = ${JSON.stringify(value) ?? String(value)}: out of range, named`, () =>
      refused({ [field]: value }, problem, new RegExp(`fix "${field}"`)));
  }
  it('reward.format out of range', () =>
    refused({ reward: { format: -1 } }, /"reward\.format" must be a number in \[0, 10\]/, /fix "reward\.format"/));
  it('taskSource and executionProvider list their values', () => {
    refused({ taskSource: 'git' }, /"taskSource" must be mutation, failing-tests or file, got "git"/, /fix "taskSource"/);
    refused({ executionProvider: 'tpu' }, /"executionProvider" must be auto, cpu, cuda or webgpu/, /fix/);
    refused({ taskSource: 'file' }, /needs "tasksFile"/, /tasks synth/);
  });
  it('a string field given a number', () => refused({ model: 3 }, /"model" must be a string/, /fix "model"/));
});

describe('train/config: readConfigFile', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-config-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('a relative workspace or tasksFile is resolved against the config file, not the cwd', () => {
    fs.writeFileSync(path.join(dir, 'turnwise.json'), JSON.stringify({ workspace: 'ws', tasksFile: 't/tasks.jsonl', iterations: 1 }));
    const v = readConfigFile(path.join(dir, 'turnwise.json'));
    assert.equal(v.workspace, path.join(dir, 'ws'));
    assert.equal(v.tasksFile, path.join(dir, 't', 'tasks.jsonl'));
  });
  it('missing, a folder, bad JSON: each says so', () => {
    assert.throws(() => readConfigFile(path.join(dir, 'nope.json')), /cannot read the config .*ENOENT/);
    assert.throws(() => readConfigFile(dir), /is a folder, not a config file/);
    fs.writeFileSync(path.join(dir, 'bad.json'), '{ "iterations": ');
    assert.throws(() => readConfigFile(path.join(dir, 'bad.json')), /is not valid JSON/);
  });
});

describe('train/config: poolSettings', () => {
  it('engines from dockerHost + dockerHosts with capacities, limits in engine units, the image only when set', () => {
    const prev = process.env.TURNWISE_DOCKER_ENGINES;
    delete process.env.TURNWISE_DOCKER_ENGINES;
    try {
      const s = poolSettings({
        ...TRAIN_DEFAULTS,
        dockerHost: 'unix:///var/run/docker.sock',
        dockerHosts: ['ssh://me@box*4'],
        sandboxMemoryMb: 512,
        sandboxCpus: 0.5,
        sandboxPids: 64,
        sandboxImage: 'x/y:1',
      });
      assert.deepEqual(
        s.engines?.map((e) => [e.host, e.capacity]),
        [
          ['unix:///var/run/docker.sock', undefined],
          ['ssh://me@box', 4],
        ],
      );
      assert.deepEqual(s.limits, { memoryBytes: 512 * 1024 ** 2, nanoCpus: 5e8, pidsLimit: 64 });
      assert.equal(s.baseImage, 'x/y:1');
      const d = poolSettings(TRAIN_DEFAULTS);
      assert.equal(d.engines, undefined, 'no host set: the default engine');
      assert.equal(d.baseImage, undefined);
    } finally {
      if (prev !== undefined) process.env.TURNWISE_DOCKER_ENGINES = prev;
    }
  });
});

describe('train/config: the experiment probe configs', () => {
  it("docs/experiments/probes/repeat-6 resolves: its workspace and 6-task file found from the config's folder, nothing held out", () => {
    const file = path.join(__dirname, '..', '..', '..', 'docs', 'experiments', 'probes', 'repeat-6', 'turnwise.json');
    const c = resolveTrainConfig(readConfigFile(file), file);
    assert.equal(c.workspace, path.resolve(path.dirname(file), '..', '..', '..', '..', 'examples', 'demo-python'));
    assert.ok(fs.existsSync(path.join(c.workspace, 'inventory', 'stock.py')));
    const tasks = readTaskFile(c.tasksFile!);
    assert.equal(tasks.length, 6);
    assert.equal(c.tasksPerIteration, tasks.length, 'every task every iteration');
    assert.equal(c.heldoutFraction, 0);
    assert.equal(c.lossAggregation, 'episode');
  });

  it('docs/experiments/probes/replay resolves: the demo workspace, 48 tasks with 12 held out, grpo without scaling, the replay term on', () => {
    const file = path.join(__dirname, '..', '..', '..', 'docs', 'experiments', 'probes', 'replay', 'turnwise.json');
    const c = resolveTrainConfig(readConfigFile(file), file);
    assert.equal(c.workspace, path.resolve(path.dirname(file), '..', '..', '..', '..', 'examples', 'demo-python'));
    assert.equal(c.taskSource, 'mutation');
    assert.equal(c.maxTasks, 48);
    assert.equal(c.heldoutFraction, 0.25);
    assert.equal(c.estimator, 'grpo');
    assert.deepEqual(c.estimatorParams, { scale: 'none' });
    assert.equal(c.replayCoef, 1);
    assert.equal(c.evalSamples, 4);
  });
});
