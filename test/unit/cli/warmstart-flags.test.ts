// `turnwise warmstart`'s flags for a chat model and for episodes: the combinations that cannot
// mean anything are refused before any work, naming what goes with what; --lora reads PEFT fields
// written as key=value pairs (or JSON); and one warm start through the command line, a LoRA
// adapter on a generated Qwen2 chat folder trained on the resolved episodes of a results file
// given after --episodes, with the held-out episodes counted as left out.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { main } from '../../../src/cli/main';
import { loraOption, WARMSTART_FLAGS, warmstartCommand, warmstartSettingsFromFlags } from '../../../src/cli/commands/warmstart';
import { resolveWarmstartConfig, WARMSTART_RANGES } from '../../../src/warmstart/config';
import { SCHEMA, type Task, type Trajectory } from '../../../src/core/schema';
import { chatTokenizerFiles, tokenizerJsonSize } from '../../../src/policy/files/bpe';
import { writeModelFolder } from '../../../src/policy/files/hf';
import { initWeights } from '../../../src/policy/model/weights';
import { writeTaskFile } from '../../../src/tasks/taskfile';
import { splitTasks } from '../../../src/train/split';

async function cli(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(argv, { out: (x) => (out += x + '\n'), err: (x) => (err += x + '\n') });
  return { code, out, err };
}

describe('cli: warmstart --model / --lora / --episodes', function () {
  this.timeout(300_000);
  let tmp: string;
  before(() => (tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-ws-flags-'))));
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  // The flags are a table over the config's fields (WARMSTART_FLAGS): each sets a field the config
  // has, a number flag takes its field's range, and the usage line shows exactly the table's flags.
  it('every flag sets a WarmstartConfig field, and the usage line names every flag and no other', () => {
    const fields = new Set([
      ...Object.keys(resolveWarmstartConfig({ out: '/m' })),
      'from',
      'model',
      'adapter',
      'lora',
      'steps',
      'workspace',
      'tasksFile',
      'run',
    ]);
    for (const f of WARMSTART_FLAGS) {
      for (const field of ([] as string[]).concat(f.field)) assert.ok(fields.has(field), `--${f.flag} sets ${field}`);
      if (f.read === 'number') assert.ok((f.field as string) in WARMSTART_RANGES, `--${f.flag}: ${String(f.field)} has a range`);
    }
    const inUsage = new Set([...warmstartCommand.usage!.matchAll(/--([a-z-]+)/g)].map((m) => m[1]));
    assert.deepEqual([...inUsage].sort(), [...WARMSTART_FLAGS.map((f) => f.flag), 'force'].sort());
    assert.deepEqual(Object.keys(warmstartCommand.options!).sort(), [...inUsage].sort());
  });

  it('the flags given become the settings, read as their rows say; the others are left to the defaults', () => {
    const argv = [
      '--out',
      'w',
      '--curriculum',
      '0.5,0.1',
      '--rows',
      '3',
      '--no-sed',
      '--source-root',
      'a',
      '--source-root',
      '/b',
      '--episodes',
      'e.jsonl',
      '--run',
      'r1',
      '--runs',
      'runs',
      '--seed',
      '7',
      '--lora',
      'r=4',
    ];
    const { values, positionals } = parseArgs({ args: argv, options: warmstartCommand.options, allowPositionals: true, strict: true });
    const given = warmstartSettingsFromFlags({ values, positionals });
    assert.deepEqual(
      { ...given, lora: given.lora?.r },
      {
        out: path.resolve('w'),
        curriculumStart: 0.5,
        curriculumEnd: 0.1,
        rows: 3,
        noSed: true,
        sourceRoots: [path.resolve('a'), '/b'],
        episodeFiles: [path.resolve('e.jsonl')],
        run: 'r1',
        runsRoot: path.resolve('runs'),
        seed: 7,
        lora: 4,
      },
    );
  });

  it('refuses flags that do not go together, before any work', async () => {
    const out = path.join(tmp, 'never');
    const cases: [string[], RegExp][] = [
      [['--from', 'a', '--lora', 'r=4'], /--from continues a warm-started checkpoint/],
      [['--adapter', 'a'], /--adapter DIR goes with --model BASE/],
      [['--model', 'm', '--adapter', 'a', '--lora', 'r=4'], /give one of them/],
      [['--tasks', 't.jsonl'], /--tasks goes with --episodes/],
      [['--model', 'm', 'stray.jsonl'], /results files go after --episodes/],
      [['--model', out], /--out is the --model folder/],
    ];
    for (const [flags, message] of cases) {
      const r = await cli(['warmstart', '--out', out, ...flags]);
      assert.equal(r.code, 2, `${flags.join(' ')}: ${r.err}`);
      assert.match(r.err, message);
    }
    assert.ok(!fs.existsSync(out), 'nothing written');
  });

  it('--lora reads key=value PEFT fields, JSON, or a file; a bad one names what is wrong', () => {
    assert.deepEqual(loraOption('r=8,lora_alpha=16,target_modules=q_proj+v_proj'), {
      r: 8,
      lora_alpha: 16,
      lora_dropout: 0,
      target_modules: ['q_proj', 'v_proj'],
      use_rslora: false,
      base_model_name_or_path: '',
    });
    assert.equal(loraOption('{"r": 4, "target_modules": "all-linear"}').target_modules.length, 7);
    const f = path.join(tmp, 'lora.json');
    fs.writeFileSync(f, '{"r": 2}');
    assert.equal(loraOption(f).r, 2);
    assert.throws(() => loraOption('r=8,target_modules=qq_proj'), /target_modules names "qq_proj"/);
    assert.throws(() => loraOption('rank 8'), /--lora takes a JSON object/);
  });

  it('a LoRA warm start on the resolved episodes of a results file, given after --episodes', async () => {
    const files = chatTokenizerFiles('chatml');
    const model = path.join(tmp, 'qwen2-chat');
    writeModelFolder(
      model,
      initWeights(
        {
          model_type: 'qwen2',
          hidden_size: 32,
          intermediate_size: 48,
          num_hidden_layers: 2,
          num_attention_heads: 4,
          num_key_value_heads: 2,
          rms_norm_eps: 1e-6,
          rope_theta: 1_000_000,
          vocab_size: Math.ceil(tokenizerJsonSize(files.tokenizerJson) / 64) * 64,
          max_position_embeddings: 2048,
          tie_word_embeddings: true,
        },
        5,
        0.2,
      ),
      { dtype: 'float32', tokenizerJson: files.tokenizerJson, tokenizerConfig: files.tokenizerConfig },
    );
    const tasks: Task[] = ['a', 'b', 'c', 'd'].map((id) => ({
      schema: SCHEMA.task,
      id,
      source: 'file',
      instruction: 'fix',
      language: 'python',
      testCommand: 'pytest {tests}',
      fail_to_pass: [`tests/test_${id}.py::t`],
      pass_to_pass: [],
    }));
    const tasksFile = path.join(tmp, 'tasks.jsonl');
    writeTaskFile(tasksFile, tasks);
    const ep = (taskId: string, trajId: string): Trajectory => ({
      schema: SCHEMA.trajectory,
      taskId,
      groupId: 'g',
      trajId,
      checkpoint: 'strong',
      turns: [
        {
          index: 0,
          action: 'tw-test',
          reply: '```bash\ntw-test\n```',
          observation: 'exit 0\n0 failed, 3 passed',
          exitCode: 0,
          durationMs: 1,
        },
        { index: 1, action: 'submit', reply: 'submit', observation: '', exitCode: null, durationMs: 0 },
      ],
      reward: { passRate: 1, resolved: true, turns: 1, maxTurns: 4, formatError: false, efficiencyPenalty: 0, formatPenalty: 0, reward: 1 },
    });
    const a = path.join(tmp, 'a.jsonl');
    const b = path.join(tmp, 'b.jsonl');
    fs.writeFileSync(
      a,
      tasks
        .slice(0, 2)
        .map((t, i) => JSON.stringify(ep(t.id, `a${i}`)))
        .join('\n') + '\n',
    );
    fs.writeFileSync(
      b,
      tasks
        .slice(2)
        .map((t, i) => JSON.stringify(ep(t.id, `b${i}`)))
        .join('\n') + '\n',
    );
    const held = splitTasks(tasks, 0.25, 0).heldout;
    const out = path.join(tmp, 'warm');
    const r = await cli([
      'warmstart',
      '--model',
      model,
      '--lora',
      'r=2,lora_alpha=4,target_modules=q_proj',
      '--episodes',
      a,
      b,
      '--tasks',
      tasksFile,
      '--out',
      out,
      // A step count, not a few seconds of budget: a loaded machine must not fail it.
      '--steps',
      '1',
      '--rows',
      '2',
      '--row-tokens',
      '2048',
      '--max-action-tokens',
      '16',
    ]);
    assert.equal(r.code, 0, r.err);
    assert.match(
      r.err,
      new RegExp(`4 episode\\(s\\) read, 4 resolved: 3 of 3 task\\(s\\) are demonstrations; 1 of 1 held-out task\\(s\\) left out`),
    );
    assert.ok(fs.existsSync(path.join(out, 'adapter_model.safetensors')));
    const rec = JSON.parse(fs.readFileSync(path.join(out, 'warmstart.json'), 'utf8'));
    assert.deepEqual(
      rec.demonstrationTaskIds,
      tasks.map((t) => t.id).filter((id) => !held.includes(id)),
    );
  });
});
