// The GGUF export checked by llama.cpp itself (node-llama-cpp 3.22.1 and its prebuilt CPU binary,
// test/tools/llama-cpp, installed by scripts/setup-test-tools.sh): small generated Qwen2 and
// Llama 3 folders in the Hugging Face layout, with generated BPE tokenizers and chat templates,
// exported at f32, f16 and q8_0. llama.cpp reads the metadata back, tokenizes as Turnwise does,
// and its logits and greedy tokens over 32 steps are compared with Turnwise's on the same weights
// (Turnwise runs the values the file holds: f16-rounded, or q8_0's dequantized ones).
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { chatTokenizerFiles, tokenizerJsonSize, type ChatKind } from '../../../src/policy/files/bpe';
import { loadCheckpoint, type LoadedCheckpoint } from '../../../src/policy/files/checkpoint';
import { decodeTensor, encodeTensor } from '../../../src/policy/files/gguf';
import { exportGguf, type GgufWeightType } from '../../../src/policy/files/gguf-export';
import { writeModelFolder } from '../../../src/policy/files/hf';
import { Policy } from '../../../src/policy/inference/policy';
import type { ModelConfig } from '../../../src/policy/model/config';
import { initWeights, SeededRandom, type PolicyWeights } from '../../../src/policy/model/weights';
import { initAdapter, parseLoraConfig, saveAdapter } from '../../../src/policy/files/lora';

const TOOL = path.resolve(__dirname, '../../tools/llama-cpp/node_modules/node-llama-cpp/dist/index.js');

/** The part of node-llama-cpp's API these tests use (its types live in the tool's own folder). */
interface LlamaCpp {
  getLlama(o: Record<string, unknown>): Promise<Llama>;
}
interface Llama {
  loadModel(o: { modelPath: string; gpuLayers: number }): Promise<LlamaModel>;
  dispose(): Promise<void>;
}
interface LlamaModel {
  typeDescription: string;
  trainContextSize: number;
  embeddingVectorSize: number;
  vocabularyType: string;
  tokens: { bos: number | null; eos: number | null; eot: number | null; shouldPrependBosToken: boolean };
  fileInfo: { metadata: Record<string, Record<string, unknown>> };
  tokenize(text: string, specialTokens?: boolean): number[];
  detokenize(tokens: readonly number[], specialTokens?: boolean): string;
  getTokenAttributes(token: number): { control: boolean; normal: boolean; unused: boolean };
  isEogToken(token: number): boolean;
  createContext(o: Record<string, unknown>): Promise<LlamaContext>;
  dispose(): Promise<void>;
}
interface LlamaContext {
  getSequence(): {
    controlledEvaluate(
      input: (number | [number, Record<string, unknown>])[],
    ): Promise<({ next?: { token?: number; logits?: Map<number, number> } } | undefined)[]>;
  };
  dispose(): Promise<void>;
}

async function loadLlamaCpp(): Promise<Llama> {
  if (!fs.existsSync(TOOL))
    throw new Error(
      `llama.cpp's test tool is not installed (${TOOL} is missing): run \`bash scripts/setup-test-tools.sh unit\` (it installs test/tools/llama-cpp from the npm registry)`,
    );
  const { getLlama } = (await import(TOOL)) as LlamaCpp;
  // The prebuilt CPU binary of the package, never a download or a build.
  return getLlama({
    gpu: false,
    build: 'never',
    skipDownload: true,
    usePrebuiltBinaries: true,
    progressLogs: false,
    logLevel: 'error',
    maxThreads: 2,
  });
}

/** The two families' shapes: q8_0 rows (hidden 64, heads·head_dim 128, intermediate 128) are whole blocks of 32. */
interface Family {
  kind: ChatKind;
  config: (vocab: number) => ModelConfig;
  /** Weight scale and seed: picked so that greedy decoding's top two logits stay well apart over 32 steps (asserted). */
  std: number;
  seed: number;
  prompt: string;
  arch: string;
}

const FAMILIES: Record<'qwen2' | 'llama', Family> = {
  qwen2: {
    kind: 'chatml',
    arch: 'qwen2',
    std: 0.18,
    seed: 12,
    config: (vocab) => ({
      model_type: 'qwen2',
      hidden_size: 64,
      intermediate_size: 128,
      num_hidden_layers: 2,
      num_attention_heads: 4,
      num_key_value_heads: 2,
      rms_norm_eps: 1e-6,
      rope_theta: 10000,
      vocab_size: vocab,
      max_position_embeddings: 256,
      tie_word_embeddings: true,
    }),
    prompt: '<|im_start|>user\nFix the failing test in src/app/utils.py<|im_end|>\n<|im_start|>assistant\n',
  },
  llama: {
    kind: 'llama3',
    arch: 'llama',
    std: 0.18,
    seed: 9,
    // head_dim 32 beside hidden/heads 16, q/k/v/o biases, an untied head, and Llama 3 rope scaling
    // whose original context (16) puts the frequencies of the positions used in all three bands.
    config: (vocab) => ({
      model_type: 'llama',
      hidden_size: 64,
      intermediate_size: 128,
      num_hidden_layers: 2,
      num_attention_heads: 4,
      num_key_value_heads: 2,
      head_dim: 32,
      rms_norm_eps: 1e-5,
      rope_theta: 10000,
      rope_scaling: { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 16 },
      attention_bias: true,
      vocab_size: vocab,
      max_position_embeddings: 256,
      tie_word_embeddings: false,
    }),
    prompt:
      '<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nFix the failing test<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n',
  },
};

/**
 * Largest |llama.cpp − Turnwise| logit over the 32 steps, measured on these models: f32 3e-5,
 * f16 0.005 (Llama) and 0.009 (Qwen2), q8_0 0.13 and 0.14, logits spanning about ±5. What is left
 * beside the weights' rounding is llama.cpp's own: at f16 it rounds a matmul's inputs to f16, at
 * q8_0 it quantizes them to 8 bits per block of 32.
 */
const TOLERANCE: Record<GgufWeightType, number> = { f32: 1e-3, f16: 0.02, q8_0: 0.3 };
const STEPS = 32;

/** Strings whose tokens llama.cpp and Turnwise must agree on: code, runs of spaces, digits, unicode, special tokens. */
const TEXTS = [
  'def parse(text):\n    if not text:\n        return None\n    return text.strip().split(",")\n',
  '  two  spaces,\ttabs\t\tand trailing   ',
  'digits 7 42 1234567 3.14159 2026-12-06',
  'unicode: héllo wörld — naïve café, 日本語のテキスト, emoji 🙂👍🏽',
  "it's we'll THEY'RE don't",
  '\n\n\nexit 1\r\n2 failed, 14 passed',
];

/** The weights as a GGUF file of `type` holds them: 2-D tensors rounded through the type (rows not of whole blocks fall back to f16, as the export does). */
function asStored(w: PolicyWeights, type: GgufWeightType): PolicyWeights {
  const tensors = new Map<string, Float32Array>();
  for (const [name, v] of w.tensors) {
    const is2d = !name.endsWith('.bias') && !name.endsWith('norm.weight');
    tensors.set(name, is2d && type !== 'f32' ? decodeTensor(encodeTensor(v, type), v.length, type) : v);
  }
  return { config: w.config, tensors };
}

describe('policy/gguf-export: the GGUF file read and run by llama.cpp (node-llama-cpp, CPU)', function () {
  this.timeout(300_000);
  let tmp: string;
  let llama: Llama;
  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-gguf-llama-'));
    llama = await loadLlamaCpp();
  });
  /** llama.cpp's logits after every position of `ids` (float32 KV cache), [positions × V] as Turnwise's Policy.logits lays them out. */
  async function promptLogits(file: string, ids: readonly number[], V: number): Promise<Float32Array> {
    const model = await llama.loadModel({ modelPath: file, gpuLayers: 0 });
    try {
      const ctx = await model.createContext({
        contextSize: 64,
        flashAttention: false,
        experimentalKvCacheKeyType: 'F32',
        experimentalKvCacheValueType: 'F32',
      });
      try {
        const out = await ctx.getSequence().controlledEvaluate(ids.map((t) => [t, { generateNext: { logits: true } }]));
        const logits = new Float32Array(out.length * V);
        out.forEach((r, p) => {
          for (let v = 0; v < V; v++) logits[p * V + v] = r!.next!.logits!.get(v)!;
        });
        return logits;
      } finally {
        await ctx.dispose();
      }
    } finally {
      await model.dispose();
    }
  }
  after(async () => {
    await llama?.dispose();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  /** A generated model folder of the family, written as transformers writes one. */
  function folder(family: Family, name: string): LoadedCheckpoint {
    const files = chatTokenizerFiles(family.kind);
    // Padded past the tokenizer, as real checkpoints are: the export fills the gap with unused tokens.
    const vocab = Math.ceil((tokenizerJsonSize(files.tokenizerJson) + 1) / 64) * 64;
    const w = initWeights(family.config(vocab), family.seed, family.std);
    for (const [n, t] of w.tensors) if (n.endsWith('.bias')) for (let i = 0; i < t.length; i++) t[i] = 0.5 * Math.sin(i * 1.7 + n.length);
    const dir = path.join(tmp, name);
    writeModelFolder(dir, w, { dtype: 'float32', tokenizerJson: files.tokenizerJson, tokenizerConfig: files.tokenizerConfig });
    return loadCheckpoint(dir);
  }

  it('llama with MLP biases, a tied head and no rope scaling: logits at every prompt position within 1e-3 at f32', async () => {
    const family: Family = {
      ...FAMILIES.llama,
      seed: 3,
      config: (vocab) => {
        const { rope_scaling: _, ...c } = FAMILIES.llama.config(vocab);
        return { ...c, head_dim: undefined, attention_bias: false, mlp_bias: true, tie_word_embeddings: true };
      },
    };
    const ck = folder(family, 'llama-variant');
    assert.ok(ck.weights.tensors.has('model.layers.0.mlp.down_proj.bias') && !ck.weights.tensors.has('lm_head.weight'));
    const file = path.join(tmp, 'llama-variant.gguf');
    exportGguf(ck.dir, file, { type: 'f32' });
    const ids = ck.tokenizer.encode(TEXTS[0]);
    const V = ck.weights.config.vocab_size;
    const policy = new Policy(ck.weights, ck.tokenizer);
    const [ours] = await policy.logits([ids]).finally(() => policy.dispose());
    let maxDiff = 0;
    (await promptLogits(file, ids, V)).forEach((x, i) => (maxDiff = Math.max(maxDiff, Math.abs(x - ours[i]))));
    assert.ok(maxDiff <= TOLERANCE.f32, `largest logit difference ${maxDiff}`);
  });

  it("an rsLoRA adapter folded in: llama.cpp's logits are Turnwise's with the adapter on (within 1e-3 at f32)", async () => {
    const ck = folder(FAMILIES.qwen2, 'qwen2-base');
    const config = ck.weights.config;
    const lora = parseLoraConfig({ r: 4, lora_alpha: 16, target_modules: 'all-linear', use_rslora: true }, 'test', ck.dir);
    const adapter = initAdapter(config, lora, 5);
    const rng = new SeededRandom(6);
    for (const [k, t] of adapter.tensors) if (k.includes('lora_B')) for (let i = 0; i < t.length; i++) t[i] = 0.1 * rng.normal();
    const adapterDir = path.join(tmp, 'qwen2-adapter');
    saveAdapter(adapterDir, adapter, config);
    const file = path.join(tmp, 'qwen2-adapted.gguf');
    exportGguf(ck.dir, file, { adapter: adapterDir, type: 'f32' });
    const ids = ck.tokenizer.encode(FAMILIES.qwen2.prompt);
    const V = config.vocab_size;
    const logitsOf = async (a?: typeof adapter) => {
      const policy = new Policy(ck.weights, ck.tokenizer, {}, a);
      const [l] = await policy.logits([ids]).finally(() => policy.dispose());
      return l;
    };
    const ours = await logitsOf(adapter);
    const base = await logitsOf();
    let maxDiff = 0;
    let fromBase = 0;
    (await promptLogits(file, ids, V)).forEach((x, i) => {
      maxDiff = Math.max(maxDiff, Math.abs(x - ours[i]));
      fromBase = Math.max(fromBase, Math.abs(x - base[i]));
    });
    assert.ok(fromBase > 100 * TOLERANCE.f32, `the adapter changes the logits (by up to ${fromBase})`);
    assert.ok(maxDiff <= TOLERANCE.f32, `largest logit difference ${maxDiff}`);
  });

  for (const [familyName, family] of Object.entries(FAMILIES)) {
    describe(familyName, () => {
      let ck: LoadedCheckpoint;
      before(() => (ck = folder(family, familyName)));

      it('llama.cpp reads the architecture, the vocabulary, the special tokens and the chat template, and tokenizes as Turnwise does', async () => {
        const file = path.join(tmp, `${familyName}-f16.gguf`);
        const r = exportGguf(ck.dir, file, { type: 'f16' });
        const model = await llama.loadModel({ modelPath: file, gpuLayers: 0 });
        try {
          const c = ck.weights.config;
          assert.match(model.typeDescription, new RegExp(`^${family.arch} .* F16$`), 'architecture and file type as llama.cpp names them');
          assert.equal(model.trainContextSize, c.max_position_embeddings);
          assert.equal(model.embeddingVectorSize, c.hidden_size);
          assert.equal(model.vocabularyType, 'bpe');
          const id = (t: string) => ck.tokenizer.tokenId(t)!;
          const tc = ck.tokenizerConfig!;
          assert.equal(model.tokens.eos, id(tc.eos_token as string));
          assert.equal(model.tokens.bos, typeof tc.bos_token === 'string' ? id(tc.bos_token) : null);
          assert.equal(model.tokens.shouldPrependBosToken, false, 'the tokenizer adds no begin token');
          assert.equal(r.tokenizer.tokens, c.vocab_size);
          assert.ok(model.isEogToken(model.tokens.eos!));
          // Special tokens are control tokens; the ids past the tokenizer are unused.
          for (const t of family.kind === 'chatml' ? ['<|im_start|>', '<|im_end|>', '<|endoftext|>'] : ['<|begin_of_text|>', '<|eot_id|>'])
            assert.ok(model.getTokenAttributes(id(t)).control, `${t} is a control token`);
          assert.ok(model.getTokenAttributes(id('a')).normal);
          assert.ok(model.getTokenAttributes(c.vocab_size - 1).unused);
          // What llama.cpp's loader read (node-llama-cpp's own GGUF reader): the chat template and the pre-tokenizer.
          const meta = model.fileInfo.metadata;
          assert.equal((meta.tokenizer as { chat_template?: string }).chat_template, tc.chat_template);
          assert.equal((meta.tokenizer as { ggml: { pre: string } }).ggml.pre, family.kind === 'chatml' ? 'qwen2' : 'llama-bpe');
          const texts = [...TEXTS, family.prompt];
          for (const text of texts) {
            const ours = ck.tokenizer.encode(text);
            assert.deepEqual(Array.from(model.tokenize(text, true)), ours, `tokens of ${JSON.stringify(text)}`);
            assert.equal(model.detokenize(ours, true), text, `text of the tokens of ${JSON.stringify(text)}`);
          }
          // Merges matter: the code string is far fewer tokens than bytes.
          assert.ok(ck.tokenizer.encode(TEXTS[0]).length < Buffer.byteLength(TEXTS[0]) / 2);
        } finally {
          await model.dispose();
        }
      });

      for (const type of ['f32', 'f16', 'q8_0'] as const) {
        it(`${type}: llama.cpp's logits within ${TOLERANCE[type]} of Turnwise's for 32 steps${type === 'q8_0' ? '' : ', and the same greedy tokens'}`, async () => {
          const file = path.join(tmp, `${familyName}-${type}.gguf`);
          exportGguf(ck.dir, file, { type, force: true });
          const stored = asStored(ck.weights, type);
          const policy = new Policy(stored, ck.tokenizer);
          const prompt = ck.tokenizer.encode(family.prompt);
          const V = ck.weights.config.vocab_size;
          let ours: number[];
          let rows: Float32Array[];
          try {
            const [g] = await policy.generateIds([prompt], { temperature: 0, maxNewTokens: STEPS, stopIds: [] });
            ours = g.tokenIds;
            const [all] = await policy.logits([[...prompt, ...ours]]);
            rows = ours.map((_, k) => all.subarray((prompt.length - 1 + k) * V, (prompt.length + k) * V));
          } finally {
            await policy.dispose();
          }
          assert.equal(ours.length, STEPS);
          assert.ok(new Set(ours).size >= 12, `a varied continuation (${new Set(ours).size} distinct tokens), not one token repeated`);
          const margins = rows.map((r) => {
            const s = Array.from(r).sort((a, b) => b - a);
            return s[0] - s[1];
          });

          const model = await llama.loadModel({ modelPath: file, gpuLayers: 0 });
          // A float32 KV cache: llama.cpp's default f16 cache would add a rounding Turnwise does not make.
          const ctx = await model.createContext({
            contextSize: 128,
            sequences: 1,
            flashAttention: false,
            experimentalKvCacheKeyType: 'F32',
            experimentalKvCacheValueType: 'F32',
          });
          const theirs: number[] = [];
          let maxDiff = 0;
          try {
            const seq = ctx.getSequence();
            const next = { generateNext: { token: true, logits: true, options: { temperature: 0 } } };
            // Each step is fed Turnwise's token and llama.cpp's greedy pick is recorded: where all
            // picks agree this is llama.cpp's own greedy decode; where they do not, the logits
            // still compare like with like.
            let out = await seq.controlledEvaluate(prompt.map((t, i) => (i === prompt.length - 1 ? [t, next] : t)));
            for (let k = 0; k < STEPS; k++) {
              const step = out[out.length - 1]?.next;
              assert.ok(step?.logits && step.token !== undefined, 'llama.cpp returned the step');
              theirs.push(step.token);
              assert.equal(step.logits.size, V, 'a logit for every token');
              for (let v = 0; v < V; v++) maxDiff = Math.max(maxDiff, Math.abs(step.logits.get(v)! - rows[k][v]));
              out = await seq.controlledEvaluate([[ours[k], next]]);
            }
          } finally {
            await ctx.dispose();
            await model.dispose();
          }
          assert.ok(maxDiff <= TOLERANCE[type], `largest logit difference ${maxDiff.toFixed(6)} is within ${TOLERANCE[type]}`);
          // Where the top two are further apart than both sides' error, the greedy picks must agree.
          const clear = margins.map((m) => m > 2 * TOLERANCE[type]);
          if (type === 'q8_0') {
            ours.forEach((t, k) => clear[k] && assert.equal(theirs[k], t, `step ${k}: a clear greedy pick`));
          } else {
            assert.ok(
              Math.min(...margins) > 2 * TOLERANCE[type],
              `every step's top two logits apart by more than twice the tolerance (least ${Math.min(...margins).toFixed(4)})`,
            );
            assert.deepEqual(theirs, ours, "llama.cpp's greedy tokens are Turnwise's");
          }
        });
      }
    });
  }
});
