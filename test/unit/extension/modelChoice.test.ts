// The model a run starts from, as the editor checks it (a generated Hugging Face folder, the
// shipped turnwise-tiny, a LoRA adapter folder, folders that are not models), Check
// Environment's model and lora lines, and what the Runs view and the reward panel say about the
// model and adapter a run trained (run directories in the on-disk format). Real files, no mocks.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  AdapterNeedsBase,
  adapterLoraBlock,
  adapterOnBase,
  checkLoraSetting,
  checkModelFolder,
  describeLora,
  ModelRefused,
  modelChecks,
  resolveModelSetting,
} from '../../../src/extension/model/modelChoice';
import { loadCheckpoint } from '../../../src/policy/files/checkpoint';
import { listRuns, runsRoot } from '../../../src/extension/model/runIndex';
import { runModelOf } from '../../../src/extension/model/runModel';
import { type ModelConfig } from '../../../src/policy/model/config';
import { writeModelFolder } from '../../../src/policy/files/hf';
import { initAdapter, parseLoraConfig, saveAdapter } from '../../../src/policy/files/lora';
import { byteLevelTokenizerConfig, byteLevelTokenizerJson } from '../../../src/policy/files/tokenizer';
import { initWeights } from '../../../src/policy/model/weights';
import { writeFixtureRun } from '../../support/runFixture';

const QWEN2: ModelConfig = {
  model_type: 'qwen2',
  hidden_size: 32,
  intermediate_size: 48,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  rms_norm_eps: 1e-6,
  rope_theta: 1_000_000,
  vocab_size: 300,
  max_position_embeddings: 256,
  tie_word_embeddings: true,
  eos_token_id: 256,
};
const TINY = path.join(__dirname, '..', '..', '..', 'models', 'turnwise-tiny');

function refusal(fn: () => unknown): ModelRefused {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof ModelRefused, `not a ModelRefused: ${(e as Error).message}`);
    return e;
  }
  assert.fail('the folder was accepted');
}

describe('extension: the model a run trains (editor checks, Check Environment, Runs view)', function () {
  this.timeout(30_000);
  let tmp: string;
  let qwen: string;
  before(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-model-'));
    qwen = path.join(tmp, 'Qwen2-test');
    writeModelFolder(qwen, initWeights(QWEN2, 1), {
      dtype: 'bfloat16',
      tokenizerJson: byteLevelTokenizerJson(),
      tokenizerConfig: byteLevelTokenizerConfig(),
    });
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('a generated Hugging Face folder and the shipped turnwise-tiny are accepted, with what they hold', () => {
    const q = checkModelFolder(qwen);
    assert.equal(q.inspection.architecture, 'Qwen2ForCausalLM');
    assert.match(q.summary, /^Qwen2ForCausalLM, [\d,]+ parameters, BF16, context 256 tokens, /);
    const t = checkModelFolder(TINY);
    assert.match(t.summary, /^Qwen2ForCausalLM, 3\.2M parameters, F32, context 1024 tokens/);
  });

  it('a folder that is not a model is refused before a run, saying what is wrong and what to pick instead', () => {
    const empty = path.join(tmp, 'empty');
    fs.mkdirSync(empty);
    const r1 = refusal(() => checkModelFolder(empty));
    assert.match(r1.message, /has no config\.json, so it is not a model folder/);
    assert.match(r1.fix, /config\.json, model\.safetensors .* tokenizer\.json, or the embedded turnwise-tiny/);
    assert.match(refusal(() => checkModelFolder(path.join(tmp, 'nowhere'))).message, /nowhere does not exist/);
    const file = path.join(tmp, 'a-file');
    fs.writeFileSync(file, 'x');
    assert.match(refusal(() => checkModelFolder(file)).message, /is a file, not a model folder/);
    // config.json without weights; then weights that do not match the config.
    const noWeights = path.join(tmp, 'no-weights');
    fs.mkdirSync(noWeights);
    fs.copyFileSync(path.join(qwen, 'config.json'), path.join(noWeights, 'config.json'));
    assert.match(
      refusal(() => checkModelFolder(noWeights)).message,
      /holds neither model\.safetensors nor model\.safetensors\.index\.json/,
    );
    const mismatch = path.join(tmp, 'mismatch');
    fs.cpSync(qwen, mismatch, { recursive: true });
    const cfg = JSON.parse(fs.readFileSync(path.join(mismatch, 'config.json'), 'utf8'));
    fs.writeFileSync(path.join(mismatch, 'config.json'), JSON.stringify({ ...cfg, hidden_size: 64 }));
    const r2 = refusal(() => checkModelFolder(mismatch));
    assert.match(r2.message, /do not match config\.json/);
    assert.match(r2.fix, /come from different models; or pick a folder/);
    // An architecture Turnwise does not train.
    const gpt2 = path.join(tmp, 'gpt2');
    fs.cpSync(qwen, gpt2, { recursive: true });
    fs.writeFileSync(path.join(gpt2, 'config.json'), JSON.stringify({ ...cfg, model_type: 'gpt2', architectures: ['GPT2LMHeadModel'] }));
    assert.match(refusal(() => checkModelFolder(gpt2)).message, /gpt2/);
  });

  it('a LoRA adapter folder starts a run over the base it names, with its own settings; a base that is not here is asked for and a copy names it', () => {
    const lora = parseLoraConfig({ r: 4, lora_alpha: 8, lora_dropout: 0.05, target_modules: ['q_proj', 'v_proj'] }, 'test', qwen);
    const adapter = path.join(tmp, 'adapter');
    saveAdapter(adapter, initAdapter(QWEN2, lora, 1), QWEN2);
    const a = checkModelFolder(adapter);
    assert.equal(a.dir, adapter);
    assert.deepEqual(a.adapter && { base: a.adapter.base, r: a.adapter.lora.r }, { base: qwen, r: 4 });
    assert.match(
      a.summary,
      new RegExp(
        `^LoRA adapter, r 4, lora_alpha 8 on q_proj, v_proj, over ${qwen.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: Qwen2ForCausalLM, `,
      ),
    );
    // The run trains it with its own settings (PEFT's field names).
    assert.deepEqual(adapterLoraBlock(a.adapter!), {
      r: 4,
      lora_alpha: 8,
      lora_dropout: 0.05,
      target_modules: ['q_proj', 'v_proj'],
      use_rslora: false,
    });
    // A relative base, as written beside the adapter, resolves from the adapter's folder.
    const cfgFile = path.join(adapter, 'adapter_config.json');
    const cfg = JSON.parse(fs.readFileSync(cfgFile, 'utf8'));
    fs.writeFileSync(cfgFile, JSON.stringify({ ...cfg, base_model_name_or_path: '../Qwen2-test' }));
    assert.equal(checkModelFolder(adapter).adapter!.base, qwen);
    // PEFT records a hub id: not a folder here, so the editor asks for the base.
    fs.writeFileSync(cfgFile, JSON.stringify({ ...cfg, base_model_name_or_path: 'Qwen/Qwen2.5-Coder-0.5B-Instruct' }));
    const need = refusal(() => checkModelFolder(adapter));
    assert.ok(need instanceof AdapterNeedsBase);
    assert.equal(need.named, 'Qwen/Qwen2.5-Coder-0.5B-Instruct');
    assert.equal(
      need.message,
      `${adapter} is a LoRA adapter trained on "Qwen/Qwen2.5-Coder-0.5B-Instruct", which is not a model folder here`,
    );
    assert.match(need.fix, /pick the folder of the model it was trained on/);
    const ws = path.join(tmp, 'adapter-ws');
    const before = fs.readFileSync(cfgFile);
    const copy = adapterOnBase(adapter, qwen, ws);
    assert.ok(copy.dir.startsWith(path.join(ws, '.turnwise', 'adapters', 'adapter-')), copy.dir);
    assert.equal(copy.adapter!.base, qwen);
    assert.ok(fs.readFileSync(cfgFile).equals(before), 'the picked adapter folder is left as it was');
    assert.ok(
      fs
        .readFileSync(path.join(copy.dir, 'adapter_model.safetensors'))
        .equals(fs.readFileSync(path.join(adapter, 'adapter_model.safetensors'))),
    );
    // The copy loads as a run (and the CLI) loads a model given as an adapter folder: its base with it on top.
    const ck = loadCheckpoint(copy.dir);
    assert.equal(ck.dir, qwen);
    assert.equal(ck.adapter?.config.r, 4);
    // A base the adapter does not fit is refused, naming the tensor and the shapes.
    const other = path.join(tmp, 'Qwen2-wide');
    writeModelFolder(other, initWeights({ ...QWEN2, hidden_size: 48, num_attention_heads: 4, num_key_value_heads: 2 }, 2), {
      dtype: 'float32',
      tokenizerJson: byteLevelTokenizerJson(),
      tokenizerConfig: byteLevelTokenizerConfig(),
    });
    const misfit = refusal(() => adapterOnBase(adapter, other, ws));
    assert.match(misfit.message, /has shape \[4,32\], the base model needs \[4,48\]/);
    assert.match(misfit.fix, /pick the model the adapter was trained on/);
    // An adapter as the base of an adapter is refused.
    assert.match(refusal(() => adapterOnBase(adapter, copy.dir, ws)).message, /is itself a LoRA adapter/);
    // Check Environment: the adapter as turnwise.train.model, its own settings as the lora line.
    const checks = modelChecks(tmp, copy.dir, { r: 16 });
    assert.deepEqual(
      checks.map((c) => [c.name, c.status]),
      [
        ['model', 'ok'],
        ['lora', 'ok'],
      ],
    );
    assert.match(
      checks[1].detail,
      /^LoRA r 4, lora_alpha 8 on q_proj, v_proj; 896 trained parameters .*: the adapter of turnwise\.train\.model, trained further with its own settings \(turnwise\.train\.lora is not used\)$/,
    );
    const missing = modelChecks(tmp, adapter, null);
    assert.equal(missing[0].status, 'fail');
    assert.match(missing[0].fix!, /pick the folder of the model it was trained on/);
  });

  it('the LoRA setting is checked with PEFT field names; a bad one says what to fix or how to train the whole model', () => {
    assert.equal(checkLoraSetting(null), undefined);
    const l = checkLoraSetting({ r: 8, lora_alpha: 16, target_modules: ['q_proj', 'v_proj'] })!;
    assert.deepEqual(l.target_modules, ['q_proj', 'v_proj']);
    // Qwen2-test: 2 layers × (q: 8·(32+32), v: 8·(32+16)) = 2 × (512 + 384) = 1,792 parameters.
    assert.match(
      describeLora(l, checkModelFolder(qwen)),
      /^LoRA r 8, lora_alpha 16 on q_proj, v_proj; 1,792 trained parameters \(\d\.\d\d% of the model\)$/,
    );
    const bad = refusal(() => checkLoraSetting({ r: 0, target_modules: ['qkv'] }));
    assert.match(bad.message, /r must be a positive integer/);
    assert.match(bad.message, /target_modules names "qkv"/);
    assert.match(bad.fix, /set turnwise\.train\.lora to null to train the whole model/);
  });

  it('Check Environment: the model setting resolved against the workspace, its folder checked, the lora line', () => {
    assert.equal(resolveModelSetting(tmp, ''), '');
    assert.equal(resolveModelSetting(tmp, 'Qwen2-test'), qwen);
    const embedded = modelChecks(tmp, '', null);
    assert.deepEqual(
      embedded.map((c) => [c.name, c.status]),
      [['model', 'ok']],
    );
    assert.match(embedded[0].detail, /embedded turnwise-tiny/);
    const ok = modelChecks(tmp, 'Qwen2-test', { r: 16 });
    assert.deepEqual(
      ok.map((c) => [c.name, c.status]),
      [
        ['model', 'ok'],
        ['lora', 'ok'],
      ],
    );
    assert.match(ok[0].detail, new RegExp(`^${qwen.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: Qwen2ForCausalLM`));
    assert.match(ok[1].detail, /^LoRA r 16, lora_alpha 32 on all linear projections; /);
    const bad = modelChecks(tmp, 'empty-or-missing', { r: -1 });
    assert.deepEqual(
      bad.map((c) => [c.name, c.status]),
      [
        ['model', 'fail'],
        ['lora', 'fail'],
      ],
    );
    assert.match(bad[0].detail, /^turnwise\.train\.model: .*empty-or-missing does not exist/);
    assert.match(bad[0].fix!, /or clear turnwise\.train\.model to train the embedded turnwise-tiny$/);
    const noWs = modelChecks(undefined, 'relative/dir', null);
    assert.equal(noWs[0].status, 'fail');
    assert.match(noWs[0].detail, /no folder is open/);
  });

  it('a run says which model it trained and, for a LoRA run, its adapter and newest adapter checkpoint', () => {
    const ws = path.join(tmp, 'ws');
    const whole = writeFixtureRun(ws, { runId: 'whole__grpo__1__20250101-100000', iterations: 1 });
    const lora = writeFixtureRun(ws, { runId: 'lora__grpo__2__20250101-110000', iterations: 2 });
    writeFixtureRun(ws, { runId: 'legacy__grpo__3__20250101-090000', iterations: 1 }); // a run whose config names no model
    const setConfig = (dir: string, extra: Record<string, unknown>) => {
      const file = path.join(dir, 'config.json');
      fs.writeFileSync(file, JSON.stringify({ ...JSON.parse(fs.readFileSync(file, 'utf8')), ...extra }));
    };
    setConfig(whole, { model: '' });
    setConfig(lora, {
      model: qwen,
      lora: { r: 8, lora_alpha: 16, lora_dropout: 0, target_modules: ['q_proj', 'v_proj'], use_rslora: false, base_model_name_or_path: '' },
    });
    // A LoRA run's checkpoints are adapter folders; 2 is the newest (the last one not yet written).
    for (const n of [0, 1])
      saveAdapter(path.join(lora, 'checkpoints', String(n)), initAdapter(QWEN2, parseLoraConfig({ r: 8 }, 't', qwen), n), QWEN2);
    fs.rmSync(path.join(lora, 'checkpoints', '2'), { recursive: true, force: true });
    const byId = new Map(listRuns(runsRoot(ws)).map((r) => [r.runId, r]));
    const w = byId.get('whole__grpo__1__20250101-100000')!.model!;
    assert.equal(w.label, 'turnwise-tiny');
    assert.deepEqual(w.details, ['model: turnwise-tiny (embedded)', 'adapter: none (the whole model was trained)']);
    const l = byId.get('lora__grpo__2__20250101-110000')!.model!;
    assert.equal(l.label, 'Qwen2-test + LoRA r 8');
    assert.deepEqual(l.details, [
      `model: Qwen2-test (${qwen})`,
      'adapter: LoRA r 8, lora_alpha 16 on q_proj, v_proj; latest checkpoints/1 (PEFT adapter over the model)',
    ]);
    assert.equal(l.adapter?.latest, 'checkpoints/1');
    // A config that records no model says nothing rather than guess.
    assert.equal(byId.get('legacy__grpo__3__20250101-090000')!.model, undefined);
    // All seven projections read as all linear; no adapter checkpoint yet.
    const seven = runModelOf(path.join(tmp, 'no-such-run'), {
      model: '/m/SmolLM2-135M/',
      lora: { r: 16, lora_alpha: 32, target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] },
    })!;
    assert.equal(seven.label, 'SmolLM2-135M + LoRA r 16');
    assert.equal(seven.details[1], 'adapter: LoRA r 16, lora_alpha 32 on all linear projections; no adapter checkpoint yet');
  });
});
