import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  FROM_COMMAND,
  launchConfig,
  readBaseConfig,
  SETTING_FOR_FIELD,
  settingFields,
  writeLaunchConfig,
  type SettingValue,
} from '../../../src/extension/model/launchConfig';
import { LOSS_AGGREGATIONS, readConfigFile, resolveTrainConfig, TRAIN_DEFAULTS } from '../../../src/train/config';
import { RL_LOSS_NAMES } from '../../../src/core/losses';
import { estimatorNames } from '../../../src/credit';

const manifest = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', '..', 'package.json'), 'utf8'));
const props: Record<string, { default: unknown; description?: string; markdownDescription?: string; enum?: unknown[] }> =
  manifest.contributes.configuration.properties;

/** Settings as VS Code would give them: package.json's defaults, and `user` as the values set. */
function settings(user: Record<string, unknown> = {}): (key: string) => SettingValue {
  return (key) => {
    const p = props[`turnwise.${key}`];
    assert.ok(p, `turnwise.${key} is not in package.json`);
    return { defaultValue: p.default, userValue: user[key] };
  };
}

const getPath = (c: Record<string, unknown>, field: string): unknown =>
  field.startsWith('reward.') ? (c.reward as Record<string, unknown>)[field.slice(7)] : c[field];

describe('extension: settings → launch config', () => {
  let tmp: string;
  beforeEach(() => (tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-launch-'))));
  afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('package.json has exactly one setting per config field, each described, defaults equal to the CLI defaults', () => {
    const fromTable = settingFields()
      .map(([s]) => `turnwise.${s}`)
      .sort();
    const inManifest = Object.keys(props).sort();
    assert.deepEqual(inManifest, fromTable);
    assert.equal(new Set(fromTable).size, fromTable.length, 'two fields share a setting');
    // Every TrainConfig field is in the table (the type forces it; this guards the runtime copy).
    const fields = [
      ...Object.keys(TRAIN_DEFAULTS).filter((k) => k !== 'reward'),
      ...Object.keys(TRAIN_DEFAULTS.reward).map((k) => `reward.${k}`),
      'tasksFile',
      'lora',
    ].sort();
    assert.deepEqual(Object.keys(SETTING_FOR_FIELD).sort(), fields);
    for (const [setting, field] of settingFields()) {
      const p = props[`turnwise.${setting}`];
      assert.ok((p.description ?? p.markdownDescription ?? '').length > 20, `turnwise.${setting} has no description`);
      // lora has no default in the CLI (absent: train the whole model); its setting says so with null.
      const want = field === 'lora' ? null : getPath(TRAIN_DEFAULTS as unknown as Record<string, unknown>, field);
      assert.deepEqual(p.default, want, `turnwise.${setting}'s default differs from TRAIN_DEFAULTS.${field}`);
    }
    assert.deepEqual(props['turnwise.train.estimator'].enum, estimatorNames());
    assert.deepEqual(props['turnwise.train.loss'].enum, [...RL_LOSS_NAMES]);
    assert.deepEqual(props['turnwise.train.lossAggregation'].enum, [...LOSS_AGGREGATIONS]);
  });

  it('every setting value ends up in the launch file, and the CLI reads the file back to the same config', () => {
    // A distinct non-default value per setting.
    const user: Record<string, unknown> = {
      'tasks.maxTasks': 4,
      'tasks.heldoutFraction': 0.5,
      'tasks.reuseTasks': false,
      'tasks.taskSeed': 3,
      'tasks.testCommand': 'python -m pytest -q',
      'train.model': 'models/start',
      'train.iterations': 1,
      'train.tasksPerIteration': 1,
      'train.groupSize': 2,
      'train.branchEpisodes': 3,
      'train.branchExploration': 0.5,
      'train.branchRedraws': 2,
      'train.recoveryFeedback': true,
      'train.diagnosisWeights': { 'wrong-file': 2 },
      'train.diagnosisCharges': { 'submit-without-pass': 0.5 },
      'train.batchBaseline': 0.5,
      'train.maxTurns': 2,
      'train.estimator': 'grpo',
      'train.estimatorParams': { scale: 'none' },
      'train.loss': 'gspo-seq',
      'train.lossAggregation': 'episode',
      'train.learningRate': 3e-4,
      'train.epochs': 2,
      'train.minibatches': 3,
      'train.updateTokensPerStep': 2048,
      'train.clipLow': 0.1,
      'train.clipHigh': 0.3,
      'train.klCoef': 0.01,
      'train.negativeAdvantageWeight': 0.5,
      'train.taskSampling': 'informative',
      'train.entCoef': 0.02,
      'train.replayCoef': 0.5,
      'train.replayRows': 2,
      'train.evalEvery': 0,
      'train.evalSamples': 3,
      'train.maxMinutes': 45,
      'train.seed': 7,
      'policy.temperature': 0.7,
      'policy.topP': 0.9,
      'policy.maxActionTokens': 32,
      'policy.batchWaitMs': 250,
      executionProvider: 'cpu',
      packDecodeWeights: 'off',
      rolloutPrecision: 'int8',
      samplerRatioCap: 3,
      'reward.efficiencyPenalty': 0.2,
      'reward.formatPenalty': 0.3,
      'reward.repeatPenalty': 0.07,
      'sandbox.commandTimeoutMs': 5000,
      'sandbox.testTimeoutMs': 300000,
      'sandbox.concurrency': 2,
      'sandbox.commandConcurrency': 3,
      'sandbox.cacheObservations': false,
      'docker.host': 'tcp://10.0.0.2:2376',
      'docker.hosts': ['ssh://ci@build-1*32'],
      'sandbox.image': 'example/python-sandbox:3',
      'sandbox.memoryMb': 1024,
      'sandbox.cpus': 0.5,
      'sandbox.pids': 128,
      'train.lora': { r: 8, lora_alpha: 16, target_modules: ['q_proj', 'v_proj'] },
    };
    assert.deepEqual(
      Object.keys(user).sort(),
      settingFields()
        .map(([s]) => s)
        .sort(),
      'the test sets every setting',
    );
    const ws = path.join(tmp, 'ws');
    const cfg = launchConfig({
      workspace: ws,
      setting: settings(user),
      choices: { taskSource: 'file', tasksFile: '.turnwise/tasks/synth.jsonl' },
    });
    const file = writeLaunchConfig(ws, cfg, new Date('2026-01-02T03:04:05Z'));
    assert.equal(file, path.join(ws, '.turnwise', 'launch-20260102-030405.json'));
    const written = JSON.parse(fs.readFileSync(file, 'utf8'));
    for (const [setting, field] of settingFields()) {
      const want = setting === 'train.model' ? path.join(ws, 'models/start') : user[setting];
      assert.deepEqual(getPath(written, field), want, `turnwise.${setting} → ${field}`);
    }
    assert.equal(written.workspace, ws);
    assert.equal(written.taskSource, 'file');
    assert.equal(written.tasksFile, path.join(ws, '.turnwise/tasks/synth.jsonl'));
    // What `turnwise train --config FILE` makes of it (resolveTrainConfig refuses unknown fields).
    const resolved = resolveTrainConfig(readConfigFile(file), file);
    assert.equal(resolved.groupSize, 2);
    assert.equal(resolved.branchEpisodes, 3);
    assert.equal(resolved.branchExploration, 0.5);
    assert.equal(resolved.branchRedraws, 2);
    assert.equal(resolved.recoveryFeedback, true);
    assert.deepEqual(resolved.diagnosisWeights, { 'wrong-file': 2 });
    assert.deepEqual(resolved.diagnosisCharges, { 'submit-without-pass': 0.5 });
    assert.equal(resolved.batchBaseline, 0.5);
    assert.equal(resolved.lr, 3e-4);
    assert.deepEqual([resolved.lora?.r, resolved.lora?.lora_alpha, resolved.lora?.target_modules], [8, 16, ['q_proj', 'v_proj']]);
    assert.deepEqual(resolved.reward, { efficiency: 0.2, format: 0.3, repeat: 0.07 });
    assert.equal(resolved.dockerHost, 'tcp://10.0.0.2:2376');
    assert.equal(resolved.concurrency, 2);
    assert.equal(resolved.batchWaitMs, 250);
    assert.equal(resolved.cacheObservations, false, 'a boolean setting turned off reaches the config as false');
    // A second launch in the same second does not overwrite the first.
    assert.notEqual(writeLaunchConfig(ws, cfg, new Date('2026-01-02T03:04:05Z')), file);
  });

  it('only the newest launch files are kept, same-second suffixes in launch order; other files untouched', () => {
    const ws = path.join(tmp, 'ws-prune');
    const at = (sec: number) => new Date(Date.UTC(2026, 0, 2, 3, 4, sec));
    const written = [0, 1, 1, 1, 2, 3].map((sec) => writeLaunchConfig(ws, { n: sec }, at(sec), 3));
    fs.writeFileSync(path.join(ws, '.turnwise', 'notes.json'), '{}');
    writeLaunchConfig(ws, { n: 4 }, at(4), 3);
    const left = fs.readdirSync(path.join(ws, '.turnwise')).sort();
    assert.deepEqual(left, ['launch-20260102-030402.json', 'launch-20260102-030403.json', 'launch-20260102-030404.json', 'notes.json']);
    // Within one second: base, -2, -3 in launch order; the oldest two go first.
    const ws2 = path.join(tmp, 'ws-prune-2');
    for (let i = 0; i < 4; i++) writeLaunchConfig(ws2, { i }, at(9), 2);
    assert.deepEqual(fs.readdirSync(path.join(ws2, '.turnwise')).sort(), [
      'launch-20260102-030409-3.json',
      'launch-20260102-030409-4.json',
    ]);
    assert.ok(!fs.existsSync(written[0]));
  });

  it('untouched settings give the CLI defaults; the whole config is written', () => {
    const ws = path.join(tmp, 'ws');
    const cfg = launchConfig({ workspace: ws, setting: settings(), choices: {} });
    const resolved = resolveTrainConfig(readConfigFile(writeLaunchConfig(ws, cfg)));
    assert.deepEqual({ ...resolved, workspace: '.' }, { ...TRAIN_DEFAULTS });
    for (const k of Object.keys(TRAIN_DEFAULTS)) assert.ok(k in cfg, `${k} missing from the launch file`);
  });

  it('turnwise.json is the base: settings the user set go over it, defaults do not, quick picks over both', () => {
    const ws = path.join(tmp, 'ws');
    fs.mkdirSync(ws, { recursive: true });
    const json = path.join(ws, 'turnwise.json');
    fs.writeFileSync(
      json,
      JSON.stringify({
        workspace: '.',
        taskSource: 'file',
        tasksFile: 'tasks.jsonl',
        groupSize: 6,
        maxTurns: 3,
        estimator: 'rloo',
        reward: { format: 0.9 },
      }),
    );
    const cfg = launchConfig({
      workspace: ws,
      setting: settings({ 'train.maxTurns': 5, 'reward.efficiencyPenalty': 0.05 }),
      base: readBaseConfig(json),
    });
    assert.equal(cfg.groupSize, 6, 'a default setting does not override turnwise.json');
    assert.equal(cfg.maxTurns, 5, 'a setting the user set does');
    assert.equal(cfg.estimator, 'rloo');
    assert.deepEqual(cfg.reward, { format: 0.9, efficiency: 0.05, repeat: 0.05 }, 'a weight neither sets is the default');
    assert.equal(cfg.workspace, ws);
    assert.equal(cfg.tasksFile, path.join(ws, 'tasks.jsonl'));
    assert.equal(cfg.concurrency, TRAIN_DEFAULTS.concurrency, 'fields turnwise.json leaves out come from the defaults');
    // Picked estimator other than the configured one: that estimator's own parameter defaults.
    const picked = launchConfig({
      workspace: ws,
      setting: settings({ 'train.estimatorParams': { scale: 'none' } }),
      base: readBaseConfig(json),
      choices: { estimator: 'a3', iterations: 9 },
    });
    assert.equal(picked.estimator, 'a3');
    assert.deepEqual(picked.estimatorParams, {});
    assert.equal(picked.iterations, 9);
  });

  it('the model and LoRA picks go over the settings and turnwise.json, and the CLI reads them back', () => {
    const ws = path.join(tmp, 'ws');
    fs.mkdirSync(ws, { recursive: true });
    const json = path.join(ws, 'turnwise.json');
    fs.writeFileSync(json, JSON.stringify({ model: 'models/from-json', lora: { r: 4 } }));
    const user = { 'train.model': '/elsewhere/set', 'train.lora': { r: 8, lora_alpha: 16 } };
    // Nothing picked: the settings the user set win over turnwise.json.
    const set = launchConfig({ workspace: ws, setting: settings(user), base: readBaseConfig(json) });
    assert.equal(set.model, '/elsewhere/set');
    assert.deepEqual(set.lora, { r: 8, lora_alpha: 16 });
    // The embedded model and the whole model picked: '' and null, whatever the settings hold.
    const whole = launchConfig({ workspace: ws, setting: settings(user), base: readBaseConfig(json), choices: { model: '', lora: null } });
    assert.equal(whole.model, '');
    assert.equal(whole.lora, null);
    const back = resolveTrainConfig(readConfigFile(writeLaunchConfig(ws, whole)));
    assert.equal(back.model, '');
    assert.equal(back.lora, undefined, 'null trains the whole model');
    // A folder (relative to the workspace) and an adapter picked.
    const lora = launchConfig({
      workspace: ws,
      setting: settings(user),
      choices: { model: 'models/qwen', lora: { r: 16, lora_alpha: 32, target_modules: 'all-linear' } },
    });
    assert.equal(lora.model, path.join(ws, 'models', 'qwen'));
    const read = resolveTrainConfig(readConfigFile(writeLaunchConfig(ws, lora)));
    assert.equal(read.model, path.join(ws, 'models', 'qwen'));
    assert.equal(read.lora?.r, 16);
    assert.equal(read.lora?.target_modules.length, 7);
  });

  it('a task source other than a file drops tasksFile; a broken turnwise.json names the file', () => {
    const ws = path.join(tmp, 'ws');
    const cfg = launchConfig({ workspace: ws, setting: settings(), choices: { taskSource: 'mutation', tasksFile: 'x.jsonl' } });
    assert.equal(cfg.taskSource, 'mutation');
    assert.ok(!('tasksFile' in cfg));
    fs.mkdirSync(ws, { recursive: true });
    fs.writeFileSync(path.join(ws, 'turnwise.json'), '{ "groupSize": ');
    assert.throws(() => readBaseConfig(path.join(ws, 'turnwise.json')), /turnwise\.json is not valid JSON/);
    assert.equal(SETTING_FOR_FIELD.workspace, FROM_COMMAND);
  });
});
