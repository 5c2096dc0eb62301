// Which action format a model folder is prompted in, decided from its files before any sandbox
// starts: the embedded turnwise-tiny and Hugging Face folders generated in the exact layout (a
// byte-level BPE tokenizer, Turnwise's ChatML and Llama 3 templates); no weights are read.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { TurnwiseError } from '../../../src/core/errors';
import { chatTokenizerFiles } from '../../../src/policy/files/bpe';
import { ACTION_FORMAT_FILE, modelActionFormat, recordActionFormat } from '../../../src/train/action-format';
import { embeddedModelDir } from '../../../src/train/embedded';

describe("train/action-format: compact or the model's chat template, from the folder", () => {
  let tmp: string;
  before(() => (tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-format-'))));
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  /** The tokenizer files of a model folder (config.json so an adapter can name it). */
  function folder(name: string, kind: 'chatml' | 'llama3', o: { template?: 'config' | 'jinja' | 'none' } = {}): string {
    const dir = path.join(tmp, name);
    fs.mkdirSync(dir, { recursive: true });
    const f = chatTokenizerFiles(kind);
    const { chat_template, ...rest } = f.tokenizerConfig as { chat_template: string };
    fs.writeFileSync(path.join(dir, 'config.json'), '{"model_type": "qwen2"}\n');
    fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(f.tokenizerJson));
    fs.writeFileSync(
      path.join(dir, 'tokenizer_config.json'),
      JSON.stringify((o.template ?? 'config') === 'config' ? f.tokenizerConfig : rest),
    );
    if (o.template === 'jinja') fs.writeFileSync(path.join(dir, 'chat_template.jinja'), chat_template);
    return dir;
  }

  it('turnwise-tiny is compact', () => {
    assert.deepEqual(modelActionFormat(embeddedModelDir()), { kind: 'compact' });
  });

  it("a folder with a chat template is a chat model: tokenizer_config.json's, or chat_template.jinja first", () => {
    const a = modelActionFormat(folder('qwen-config', 'chatml'));
    assert.equal(a.kind, 'chat');
    assert.equal((a as { source: string }).source, path.join(tmp, 'qwen-config', 'tokenizer_config.json'));
    const b = modelActionFormat(folder('llama-jinja', 'llama3', { template: 'jinja' }));
    assert.equal((b as { source: string }).source, path.join(tmp, 'llama-jinja', 'chat_template.jinja'));
    assert.match((b as { template: string }).template, /start_header_id/);
  });

  it('the recorded format wins; an adapter folder reads its base', () => {
    const dir = folder('qwen-recorded', 'chatml');
    recordActionFormat(dir, 'compact');
    assert.deepEqual(modelActionFormat(dir), { kind: 'compact' }, 'a ChatML tokenizer can carry the compact format');
    const base = folder('llama-base', 'llama3');
    const adapter = path.join(tmp, 'adapter');
    fs.mkdirSync(adapter);
    fs.writeFileSync(path.join(adapter, 'adapter_config.json'), JSON.stringify({ base_model_name_or_path: base }));
    recordActionFormat(adapter, 'chat');
    const f = modelActionFormat(adapter);
    assert.equal(f.kind, 'chat');
    assert.equal((f as { source: string }).source, path.join(base, 'tokenizer_config.json'));
    fs.writeFileSync(path.join(adapter, ACTION_FORMAT_FILE), '{"format": "chatml"}');
    assert.throws(
      () => modelActionFormat(adapter),
      (e: unknown) =>
        e instanceof TurnwiseError &&
        e.message.includes(path.join(adapter, ACTION_FORMAT_FILE)) &&
        e.message.includes('"compact" or "chat"'),
    );
  });

  it('a ChatML tokenizer without a template is compact; one with neither is refused naming what to do', () => {
    assert.deepEqual(modelActionFormat(folder('qwen-base', 'chatml', { template: 'none' })), { kind: 'compact' });
    const dir = folder('llama-base-none', 'llama3', { template: 'none' });
    assert.throws(
      () => modelActionFormat(dir),
      (e: unknown) =>
        e instanceof TurnwiseError &&
        e.message.includes(dir) &&
        e.message.includes('neither a chat template') &&
        /chat_template\.jinja/.test(e.hint ?? ''),
    );
    // Said to be a chat model, with no template to prompt it through.
    recordActionFormat(dir, 'chat');
    assert.throws(() => modelActionFormat(dir), /says the model writes in its chat format, but .* has no chat template/);
  });
});
