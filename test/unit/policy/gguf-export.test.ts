// What the GGUF export writes beside what llama.cpp checks (gguf-llama-cpp.test.ts): tensor names,
// layouts and types, an rsLoRA adapter folded in at alpha/√r, the Ollama Modelfile, and the input
// it refuses: a family or tokenizer GGUF cannot hold, an adapter of another base, an output that
// exists.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from '../../../src/cli/main';
import { TurnwiseError } from '../../../src/core/errors';
import { ollamaChat } from '../../../src/agent/ollama-template';
import { chatTokenizerFiles, tokenizerJsonSize } from '../../../src/policy/files/bpe';
import { readGgufFile } from '../../../src/policy/files/gguf';
import { exportGguf, ggufTokenizer, llama3RopeFactors, permuteRotaryRows } from '../../../src/policy/files/gguf-export';
import { writeModelFolder } from '../../../src/policy/files/hf';
import { initAdapter, parseLoraConfig, saveAdapter } from '../../../src/policy/files/lora';
import { byteLevelTokenizerConfig, byteLevelTokenizerJson } from '../../../src/policy/files/tokenizer';
import { parameterCount as parameterCountOf, ropeInvFreq, type ModelConfig } from '../../../src/policy/model/config';
import { initWeights, SeededRandom } from '../../../src/policy/model/weights';

const QWEN2_FILES = chatTokenizerFiles('chatml');
const addedId = (t: string) =>
  (QWEN2_FILES.tokenizerJson.added_tokens as { id: number; content: string }[]).find((a) => a.content === t)!.id;
const LLAMA_FILES = chatTokenizerFiles('llama3');

const qwen2 = (vocab: number): ModelConfig => ({
  model_type: 'qwen2',
  hidden_size: 64,
  intermediate_size: 80, // ffn_down's rows: not whole q8_0 blocks
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  rms_norm_eps: 1e-6,
  rope_theta: 1_000_000,
  vocab_size: vocab,
  max_position_embeddings: 512,
  tie_word_embeddings: true,
});

const llama = (vocab: number): ModelConfig => ({
  model_type: 'llama',
  hidden_size: 64,
  intermediate_size: 128,
  num_hidden_layers: 1,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 32,
  rms_norm_eps: 1e-5,
  rope_theta: 500_000,
  rope_scaling: { rope_type: 'llama3', factor: 32, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 },
  vocab_size: vocab,
  max_position_embeddings: 1024,
  tie_word_embeddings: false,
});

describe('policy/files/gguf-export: a model folder as a GGUF file', function () {
  this.timeout(60_000);
  let tmp: string;
  let qwenDir: string;
  let llamaDir: string;
  before(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-gguf-export-'));
    qwenDir = path.join(tmp, 'qwen2');
    writeModelFolder(qwenDir, initWeights(qwen2(tokenizerJsonSize(QWEN2_FILES.tokenizerJson)), 1, 0.1), {
      dtype: 'float32',
      ...QWEN2_FILES,
      generationConfig: { eos_token_id: ['<|im_end|>', '<|endoftext|>'].map(addedId) },
    });
    llamaDir = path.join(tmp, 'llama');
    writeModelFolder(llamaDir, initWeights(llama(tokenizerJsonSize(LLAMA_FILES.tokenizerJson)), 2, 0.1), {
      dtype: 'bfloat16',
      ...LLAMA_FILES,
    });
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('names and lays out the tensors as llama.cpp does: dims fastest first, norms f32, rows that are not whole q8_0 blocks at f16', () => {
    const file = path.join(tmp, 'qwen2-q8.gguf');
    const r = exportGguf(qwenDir, file, { type: 'q8_0' });
    const g = readGgufFile(file);
    const info = new Map(g.tensors.map((t) => [t.name, t]));
    assert.deepEqual(info.get('token_embd.weight')!.dims, [64, tokenizerJsonSize(QWEN2_FILES.tokenizerJson)]);
    assert.equal(info.get('token_embd.weight')!.type, 'q8_0');
    assert.ok(!info.has('output.weight'), 'a tied head is token_embd');
    assert.deepEqual(info.get('blk.1.attn_q.bias')!, { ...info.get('blk.1.attn_q.bias')!, dims: [64], type: 'f32' });
    assert.deepEqual(info.get('blk.0.attn_k.weight')!.dims, [64, 32]);
    assert.equal(info.get('blk.0.ffn_norm.weight')!.type, 'f32');
    assert.equal(info.get('output_norm.weight')!.type, 'f32');
    assert.equal(info.get('blk.0.ffn_up.weight')!.type, 'q8_0');
    assert.deepEqual(info.get('blk.0.ffn_down.weight')!.dims, [80, 64]);
    assert.equal(info.get('blk.0.ffn_down.weight')!.type, 'f16', '80 values a row: not whole blocks of 32');
    assert.deepEqual(r.f16Fallback, ['blk.0.ffn_down.weight', 'blk.1.ffn_down.weight']);
    assert.equal(g.tensors.length, 1 + 2 * 12 + 1);
    assert.equal(g.metadata.get('general.file_type')!.value, 7);
    assert.equal(g.metadata.get('qwen2.rope.freq_base')!.value, 1_000_000);
    assert.equal(g.metadata.get('qwen2.context_length')!.value, 512);
    assert.equal(g.metadata.get('tokenizer.ggml.pre')!.value, 'qwen2');
    assert.equal(g.metadata.get('tokenizer.ggml.add_bos_token')!.value, false);
    const merges = g.metadata.get('tokenizer.ggml.merges')!.value as string[];
    assert.deepEqual(merges, (QWEN2_FILES.tokenizerJson.model as { merges: string[] }).merges);
    assert.ok(merges.every((m) => m.split(' ').length === 2));
  });

  it('llama: Q and K rows permuted per head to the adjacent-pair rope order, Llama 3 scaling as rope_freqs, the head untied', () => {
    const file = path.join(tmp, 'llama-f32.gguf');
    exportGguf(llamaDir, file, { type: 'f32' });
    const g = readGgufFile(file);
    const w = initWeights(llama(tokenizerJsonSize(LLAMA_FILES.tokenizerJson)), 2, 0.1);
    // The folder holds bfloat16: compare with what it holds.
    const bf16 = (v: Float32Array) => {
      const u = new Uint32Array(Float32Array.from(v).buffer);
      for (let i = 0; i < u.length; i++) u[i] = ((u[i] + 0x7fff + ((u[i] >>> 16) & 1)) >>> 16) << 16;
      return new Float32Array(u.buffer);
    };
    const q = bf16(w.tensors.get('model.layers.0.self_attn.q_proj.weight')!);
    const ggq = g.values('blk.0.attn_q.weight');
    // Head 1, pair index 3 of d/2 = 16: rows 32+3 (first half) and 32+16+3 (second half) become rows 32+6 and 32+7.
    const row = (a: Float32Array, r: number) => Array.from(a.subarray(r * 64, (r + 1) * 64));
    assert.deepEqual(row(ggq, 38), row(q, 35));
    assert.deepEqual(row(ggq, 39), row(q, 51));
    assert.deepEqual(
      g.values('blk.0.attn_k.weight'),
      permuteRotaryRows(bf16(w.tensors.get('model.layers.0.self_attn.k_proj.weight')!), 2, 64),
    );
    assert.deepEqual(g.values('blk.0.attn_v.weight'), bf16(w.tensors.get('model.layers.0.self_attn.v_proj.weight')!), 'v is not permuted');
    assert.deepEqual(g.values('output.weight'), bf16(w.tensors.get('lm_head.weight')!));
    assert.equal(g.metadata.get('llama.rope.dimension_count')!.value, 32);
    assert.equal(g.metadata.get('llama.attention.key_length')!.value, 32);
    assert.equal(g.metadata.get('tokenizer.ggml.pre')!.value, 'llama-bpe');
    // The factors divide the unscaled frequencies into Turnwise's scaled ones: 1 for short
    // wavelengths, `factor` for long ones, blended between (Llama 3.1's own constants here).
    const factors = g.values('rope_freqs.weight');
    assert.equal(factors.length, 16);
    const c = w.config;
    const base = ropeInvFreq({ ...c, rope_scaling: undefined });
    const scaled = ropeInvFreq(c);
    factors.forEach((f, i) => assert.ok(Math.abs(base[i] / f - scaled[i]) <= 1e-6 * scaled[i], `frequency ${i}`));
    assert.equal(factors[0], 1);
    assert.equal(factors[15], 32);
    assert.ok(
      factors.some((f) => f > 1 && f < 32),
      'a blended frequency',
    );
    assert.deepEqual(factors, llama3RopeFactors(c));
  });

  it('folds an rsLoRA adapter in at alpha/√r (what converters that ignore use_rslora get wrong)', () => {
    const config = qwen2(tokenizerJsonSize(QWEN2_FILES.tokenizerJson));
    const lora = parseLoraConfig({ r: 4, lora_alpha: 8, target_modules: ['q_proj', 'down_proj'], use_rslora: true }, 'test', qwenDir);
    const a = initAdapter(config, lora, 3);
    const rng = new SeededRandom(4);
    for (const [k, t] of a.tensors) if (k.includes('lora_B')) for (let i = 0; i < t.length; i++) t[i] = rng.normal() * 0.05;
    const adapterDir = path.join(tmp, 'adapter');
    saveAdapter(adapterDir, a, config);
    const file = path.join(tmp, 'merged.gguf');
    const r = exportGguf(qwenDir, file, { adapter: adapterDir, type: 'f32' });
    assert.deepEqual(r.adapter, { dir: adapterDir, scale: 4, useRslora: true, adapted: 4 });
    const g = readGgufFile(file);
    const w = initWeights(config, 1, 0.1).tensors.get('model.layers.1.self_attn.q_proj.weight')!;
    const A = a.tensors.get('base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight')!;
    const B = a.tensors.get('base_model.model.model.layers.1.self_attn.q_proj.lora_B.weight')!;
    const merged = g.values('blk.1.attn_q.weight');
    const delta = (o: number, i: number) => [0, 1, 2, 3].reduce((s, k) => s + B[o * 4 + k] * A[k * 64 + i], 0);
    let atRs = 0;
    let atR = 0;
    for (let o = 0; o < 64; o++)
      for (let i = 0; i < 64; i++) {
        atRs = Math.max(atRs, Math.abs(merged[o * 64 + i] - (w[o * 64 + i] + (8 / 2) * delta(o, i))));
        atR = Math.max(atR, Math.abs(merged[o * 64 + i] - (w[o * 64 + i] + (8 / 4) * delta(o, i))));
      }
    assert.ok(atRs < 1e-6, `merged at alpha/√r (off by ${atRs})`);
    assert.ok(atR > 1e-3, 'not at alpha/r');
    assert.deepEqual(g.values('blk.1.attn_k.weight'), initWeights(config, 1, 0.1).tensors.get('model.layers.1.self_attn.k_proj.weight'));
    // The adapter folder given as the model exports the same merge over the base it names.
    const viaFolder = exportGguf(adapterDir, path.join(tmp, 'merged-2.gguf'), { type: 'f32' });
    assert.equal(viaFolder.adapter?.scale, 4);
    assert.deepEqual(readGgufFile(viaFolder.file).values('blk.1.attn_q.weight'), merged);
  });

  it("reads the tokenizer variants real checkpoints carry: merges as pairs, Llama 3's begin token from its post-processor, NFC, non-special added tokens", () => {
    const config = llama(tokenizerJsonSize(LLAMA_FILES.tokenizerJson) + 64);
    const json = LLAMA_FILES.tokenizerJson as Record<string, unknown> & {
      model: { merges: string[] };
      added_tokens: { id: number; content: string; special: boolean }[];
    };
    const plain = ggufTokenizer(json, LLAMA_FILES.tokenizerConfig, config, 'tokenizer.json');
    assert.equal(plain.addBos, false);
    const added = json.added_tokens.length;
    const variant = {
      ...json,
      normalizer: { type: 'NFC' },
      model: { ...json.model, merges: json.model.merges.map((m) => m.split(' ')) },
      added_tokens: [...json.added_tokens, { id: json.added_tokens[added - 1].id + 1, content: '<tool>', special: false }],
      post_processor: {
        type: 'Sequence',
        processors: [
          { type: 'ByteLevel' },
          {
            type: 'TemplateProcessing',
            single: [{ SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
          },
        ],
      },
    };
    const t = ggufTokenizer(variant, LLAMA_FILES.tokenizerConfig, config, 'tokenizer.json');
    assert.deepEqual(t.merges, plain.merges, 'merges given as pairs are written "a b"');
    assert.equal(t.addBos, true, 'the post-processor puts <|begin_of_text|> first');
    assert.equal(
      ggufTokenizer(variant, { ...LLAMA_FILES.tokenizerConfig, add_bos_token: false }, config, 'x').addBos,
      false,
      'tokenizer_config.json decides',
    );
    const toolId = json.added_tokens[added - 1].id + 1;
    assert.deepEqual([t.tokens[toolId], t.types[toolId]], ['<tool>', 4], 'a non-special added token is user-defined');
    assert.deepEqual([t.tokens[toolId + 1], t.types[toolId + 1]], [`[PAD${toolId + 1}]`, 5]);
    assert.equal(t.types[json.added_tokens[0].id], 3);
    assert.equal(t.bos, json.added_tokens.find((a) => a.content === '<|begin_of_text|>')!.id);
    assert.throws(
      () => ggufTokenizer({ ...json, normalizer: { type: 'Lowercase' } }, undefined, config, 'tokenizer.json'),
      /the normalizer is "Lowercase"/,
    );
  });

  it("the export's key-values, with their value types, as @huggingface/gguf (a maintained reader) reads them", async () => {
    const reader = path.resolve(__dirname, '../../tools/llama-cpp/node_modules/@huggingface/gguf/dist/index.js');
    if (!fs.existsSync(reader))
      throw new Error(`@huggingface/gguf is not installed (${reader} is missing): run \`bash scripts/setup-test-tools.sh unit\``);
    const { gguf } = (await import(reader)) as {
      gguf(
        file: string,
        o: { allowLocalFile: boolean; typedMetadata: true; computeParametersCount: true },
      ): Promise<{ typedMetadata: Record<string, { value: unknown; type: number; subType?: number }>; parameterCount: number }>;
    };
    const file = path.join(tmp, 'llama-typed.gguf');
    exportGguf(llamaDir, file, { type: 'q8_0' });
    const { typedMetadata: m, parameterCount } = await gguf(file, {
      allowLocalFile: true,
      typedMetadata: true,
      computeParametersCount: true,
    });
    const [U32, I32, F32, BOOL, STRING, ARRAY] = [4, 5, 6, 7, 8, 9];
    const config = llama(tokenizerJsonSize(LLAMA_FILES.tokenizerJson));
    const want: [string, number, unknown][] = [
      ['general.architecture', STRING, 'llama'],
      ['general.file_type', U32, 7],
      ['general.alignment', U32, 32],
      ['llama.context_length', U32, 1024],
      ['llama.embedding_length', U32, 64],
      ['llama.block_count', U32, 1],
      ['llama.feed_forward_length', U32, 128],
      ['llama.attention.head_count', U32, 4],
      ['llama.attention.head_count_kv', U32, 2],
      ['llama.attention.key_length', U32, 32],
      ['llama.rope.dimension_count', U32, 32],
      ['llama.rope.freq_base', F32, 500_000],
      ['llama.attention.layer_norm_rms_epsilon', F32, Math.fround(1e-5)],
      ['llama.vocab_size', U32, config.vocab_size],
      ['tokenizer.ggml.model', STRING, 'gpt2'],
      ['tokenizer.ggml.pre', STRING, 'llama-bpe'],
      ['tokenizer.ggml.add_bos_token', BOOL, false],
      ['tokenizer.chat_template', STRING, LLAMA_FILES.tokenizerConfig.chat_template],
    ];
    for (const [k, type, value] of want) assert.deepEqual([m[k]?.type, m[k]?.value], [type, value], k);
    assert.deepEqual([m['tokenizer.ggml.tokens'].type, m['tokenizer.ggml.tokens'].subType], [ARRAY, STRING]);
    assert.deepEqual([m['tokenizer.ggml.token_type'].type, m['tokenizer.ggml.token_type'].subType], [ARRAY, I32]);
    assert.equal((m['tokenizer.ggml.tokens'].value as string[]).length, config.vocab_size);
    assert.deepEqual([m['tokenizer.ggml.merges'].type, m['tokenizer.ggml.merges'].subType], [ARRAY, STRING]);
    // Every weight once, and the rope factors (16 of them).
    assert.equal(parameterCount, parameterCountOf(config) + 16);
  });

  it('--ollama writes a Modelfile beside the file: FROM it, the chat template as TEMPLATE, the end-of-sequence tokens as stops', () => {
    const dir = path.join(tmp, 'ollama');
    const r = exportGguf(qwenDir, path.join(dir, 'tw.gguf'), { ollama: true, ollamaChat, name: 'my-agent' });
    assert.equal(r.modelfile, path.join(dir, 'Modelfile'));
    const chat = ollamaChat({ template: QWEN2_FILES.tokenizerConfig.chat_template as string, source: 't' }, undefined, undefined);
    assert.ok(!('why' in chat));
    assert.deepEqual(r.ollamaTemplate, { written: true });
    assert.equal(
      fs.readFileSync(r.modelfile!, 'utf8'),
      `FROM ./tw.gguf\nTEMPLATE """${chat.template}"""\nPARAMETER stop "<|im_end|>"\nPARAMETER stop "<|endoftext|>"\n`,
    );
    assert.match(chat.template, /^\{\{ \$system := false \}\}/);
    // Without a translation: no TEMPLATE, and the result says why.
    const plain = exportGguf(qwenDir, path.join(tmp, 'ollama-plain', 'tw.gguf'), { ollama: true });
    assert.equal(
      fs.readFileSync(plain.modelfile!, 'utf8'),
      'FROM ./tw.gguf\nPARAMETER stop "<|im_end|>"\nPARAMETER stop "<|endoftext|>"\n',
    );
    assert.equal(plain.ollamaTemplate?.written, false);
    const g = readGgufFile(r.file);
    assert.equal(g.metadata.get('general.name')!.value, 'my-agent');
    assert.equal(g.metadata.get('tokenizer.chat_template')!.value, QWEN2_FILES.tokenizerConfig.chat_template);
    assert.throws(
      () => exportGguf(qwenDir, path.join(dir, 'other.gguf'), { ollama: true }),
      (e: unknown) => e instanceof TurnwiseError && /Modelfile/.test(e.message) && /--force/.test(e.hint ?? ''),
    );
  });

  it('refuses an output that exists without --force, a folder as the output, and replaces a file with --force', () => {
    const file = path.join(tmp, 'exists.gguf');
    fs.writeFileSync(file, 'mine');
    assert.throws(
      () => exportGguf(qwenDir, file),
      (e: unknown) => e instanceof TurnwiseError && /already exists/.test(e.message) && /--force/.test(e.hint ?? ''),
    );
    assert.equal(fs.readFileSync(file, 'utf8'), 'mine');
    assert.throws(() => exportGguf(qwenDir, tmp), /is a folder, not a file/);
    exportGguf(qwenDir, file, { force: true });
    assert.equal(readGgufFile(file).metadata.get('general.architecture')!.value, 'qwen2');
  });

  it('refuses a family, a tokenizer or a rope scaling GGUF cannot hold, and an adapter of another base, naming what is supported', () => {
    const mistral = path.join(tmp, 'mistral');
    fs.cpSync(qwenDir, mistral, { recursive: true });
    const cfg = JSON.parse(fs.readFileSync(path.join(mistral, 'config.json'), 'utf8'));
    fs.writeFileSync(
      path.join(mistral, 'config.json'),
      JSON.stringify({ ...cfg, model_type: 'mistral', architectures: ['MistralForCausalLM'] }),
    );
    assert.throws(
      () => exportGguf(mistral, path.join(tmp, 'm.gguf')),
      (e: unknown) =>
        e instanceof TurnwiseError &&
        /"mistral" is not supported/.test(e.message) &&
        /qwen2/.test(e.hint ?? '') &&
        /llama/.test(e.hint ?? ''),
    );
    // turnwise-tiny's byte tokenizer has no pre-tokenizer split llama.cpp names.
    const tiny = path.join(tmp, 'tiny');
    writeModelFolder(tiny, initWeights({ ...qwen2(260), intermediate_size: 64 }, 1), {
      dtype: 'float32',
      tokenizerJson: byteLevelTokenizerJson(),
      tokenizerConfig: byteLevelTokenizerConfig(),
    });
    assert.throws(
      () => exportGguf(tiny, path.join(tmp, 't.gguf')),
      (e: unknown) =>
        e instanceof TurnwiseError && /no Split step/.test(e.message) && /cannot hold/.test(e.message) && /Qwen2's/.test(e.hint ?? ''),
    );
    const scaledQwen = path.join(tmp, 'qwen-scaled');
    writeModelFolder(
      scaledQwen,
      initWeights({ ...qwen2(tokenizerJsonSize(QWEN2_FILES.tokenizerJson)), rope_scaling: llama(1).rope_scaling }, 1),
      {
        dtype: 'float32',
        ...QWEN2_FILES,
      },
    );
    assert.throws(() => exportGguf(scaledQwen, path.join(tmp, 's.gguf')), /qwen2 model with rope_scaling/);
    // llama.cpp's qwen2 sizes Q by hidden_size: a head_dim of its own is refused (llama takes one: the llama.cpp test).
    const wideQwen = path.join(tmp, 'qwen-wide');
    writeModelFolder(wideQwen, initWeights({ ...qwen2(tokenizerJsonSize(QWEN2_FILES.tokenizerJson)), head_dim: 32 }, 1), {
      dtype: 'float32',
      ...QWEN2_FILES,
    });
    assert.throws(() => exportGguf(wideQwen, path.join(tmp, 'w.gguf')), /qwen2 model with head_dim 32 \(not hidden_size 64 \/ 4 heads\)/);
    // An adapter trained on the llama folder does not fit the qwen2 one.
    const llamaConfig = llama(tokenizerJsonSize(LLAMA_FILES.tokenizerJson));
    const other = path.join(tmp, 'llama-adapter');
    saveAdapter(other, initAdapter(llamaConfig, parseLoraConfig({ r: 2, target_modules: ['o_proj'] }, 'test', llamaDir), 1), llamaConfig);
    assert.throws(
      () => exportGguf(qwenDir, path.join(tmp, 'a.gguf'), { adapter: other }),
      (e: unknown) =>
        e instanceof TurnwiseError && /does not fit the base model/.test(e.message) && /another base model/.test(e.hint ?? ''),
    );
    for (const f of ['m.gguf', 't.gguf', 's.gguf', 'w.gguf', 'a.gguf']) assert.ok(!fs.existsSync(path.join(tmp, f)), `no ${f} written`);
  });
});

describe('cli: turnwise policy export --format gguf', function () {
  this.timeout(60_000);
  let tmp: string;
  let dir: string;
  before(() => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-gguf-cli-'));
    dir = path.join(tmp, 'model');
    writeModelFolder(dir, initWeights(qwen2(tokenizerJsonSize(QWEN2_FILES.tokenizerJson)), 1, 0.1), { dtype: 'float32', ...QWEN2_FILES });
  });
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  async function run(argv: string[]) {
    const out: string[] = [];
    const err: string[] = [];
    const code = await main(argv, { out: (t) => out.push(t), err: (t) => err.push(t) });
    return { code, out: out.join('\n'), err: err.join('\n') };
  }

  it('writes the file and the Modelfile, reports them, and refuses bad flags and an existing file', async () => {
    const file = path.join(tmp, 'out', 'agent.gguf');
    const r = await run(['policy', 'export', '--model', dir, '--format', 'gguf', '--type', 'q8_0', '--out', file, '--ollama', '--json']);
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out);
    assert.equal(j.ok, true);
    assert.equal(j.file, file);
    assert.equal(j.type, 'q8_0');
    assert.equal(j.architecture, 'qwen2');
    assert.equal(j.modelfile, path.join(tmp, 'out', 'Modelfile'));
    assert.deepEqual(j.ollamaTemplate, { written: true });
    assert.match(fs.readFileSync(j.modelfile, 'utf8'), /^FROM \.\/agent\.gguf\nTEMPLATE """\{\{ \$system := false \}\}/);
    assert.equal(readGgufFile(file).metadata.get('general.file_type')!.value, 7);
    const again = await run(['policy', 'export', '--model', dir, '--format', 'gguf', '--out', file]);
    assert.equal(again.code, 1);
    assert.match(again.err, /already exists/);
    const forced = await run(['policy', 'export', '--model', dir, '--format', 'gguf', '--out', file, '--force']);
    assert.equal(forced.code, 0, forced.err);
    assert.match(forced.out, /wrote .*agent\.gguf: qwen2, 26 tensors at f16/);
    const text = await run(['policy', 'export', '--model', dir, '--format', 'gguf', '--out', path.join(tmp, 'text', 'a.gguf'), '--ollama']);
    assert.equal(text.code, 0, text.err);
    assert.match(
      text.out,
      /wrote .*Modelfile: `ollama create NAME -f .*Modelfile` imports it\n {2}its TEMPLATE is the chat template written as Ollama's/,
    );
    const noFormat = await run(['policy', 'export', '--model', dir, '--out', path.join(tmp, 'x.gguf')]);
    assert.notEqual(noFormat.code, 0);
    assert.match(noFormat.err, /--format is required \(gguf\)/);
    const badType = await run([
      'policy',
      'export',
      '--model',
      dir,
      '--format',
      'gguf',
      '--type',
      'q4_0',
      '--out',
      path.join(tmp, 'x.gguf'),
    ]);
    assert.notEqual(badType.code, 0);
    assert.match(badType.err, /--type must be one of f32, f16, q8_0/);
    const badFormat = await run(['policy', 'export', '--model', dir, '--format', 'onnx', '--out', path.join(tmp, 'x.gguf')]);
    assert.match(badFormat.err, /--format must be one of gguf/);
    assert.ok(!fs.existsSync(path.join(tmp, 'x.gguf')));
  });
});
