// A model folder (with a LoRA adapter folded in when given) as one GGUF file that llama.cpp,
// Ollama and LM Studio load: the architecture's key-values, the byte-level BPE tokenizer (tokens,
// their types, merges, special ids, the pre-tokenizer llama.cpp names), the chat template, and the
// tensors under llama.cpp's names at f32, f16 or q8_0. An Ollama Modelfile may go beside it.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError } from '../../core/errors';
import { outputPathProblem, writeFileAtomic } from '../../core/fs';
import { familyOf, headDim, MODEL_FAMILIES, paramSpecs, ropeInvFreq, type ModelConfig, type ModelFamily } from '../model/config';
import type { PolicyWeights } from '../model/weights';
import { SPLIT_PATTERN_LLAMA3, SPLIT_PATTERN_QWEN2 } from './bpe';
import { loadCheckpoint } from './checkpoint';
import { encodeTensor, gguf, writeGgufFile, type GgmlType, type GgufTensor, type GgufValue } from './gguf';
import { chatTemplateOf } from './hf';
import { loadAdapter, loraScale, loraTargets, mergeAdapter } from './lora';

/** The weight types an export may hold: norms, biases and rope factors stay f32 whatever is chosen. */
export const GGUF_WEIGHT_TYPES = ['f32', 'f16', 'q8_0'] as const;
export type GgufWeightType = (typeof GGUF_WEIGHT_TYPES)[number];

/** general.file_type of each (llama.cpp's LLAMA_FTYPE: ALL_F32, MOSTLY_F16, MOSTLY_Q8_0). */
const FILE_TYPE: Record<GgufWeightType, number> = { f32: 0, f16: 1, q8_0: 7 };

/**
 * llama.cpp's architecture for each family Turnwise runs, and whether its rotary embedding pairs
 * adjacent values (llama: Q and K rows are permuted from Hugging Face's rotate-half order) or the
 * two halves of a head (qwen2, NEOX style: rows kept as they are), whether it reads Llama 3's
 * rope scaling as per-frequency factors (rope_freqs.weight), and whether a head may be of another
 * size than hidden_size / num_attention_heads (qwen2's loader sizes Q by hidden_size).
 */
const GGUF_ARCHITECTURES: Record<ModelFamily, { arch: string; permuteQK: boolean; ropeFactors: boolean; freeHeadDim: boolean }> = {
  qwen2: { arch: 'qwen2', permuteQK: false, ropeFactors: false, freeHeadDim: false },
  llama: { arch: 'llama', permuteQK: true, ropeFactors: true, freeHeadDim: true },
};

/** The pre-tokenizer splits llama.cpp implements, by the name tokenizer.ggml.pre gives them. */
const PRE_TOKENIZERS: readonly { pre: string; pattern: string; of: string }[] = [
  { pre: 'qwen2', pattern: SPLIT_PATTERN_QWEN2, of: "Qwen2's" },
  { pre: 'llama-bpe', pattern: SPLIT_PATTERN_LLAMA3, of: "Llama 3's" },
];

/** llama.cpp's token types. */
const TOKEN_TYPE = { normal: 1, unused: 5, control: 3, userDefined: 4 } as const;

export interface GgufExportOptions {
  /** A LoRA adapter folder folded into the weights first (s·B·A, s = alpha / r, or alpha / √r with rsLoRA). */
  adapter?: string;
  type?: GgufWeightType;
  /** Replace an existing file (and Modelfile). */
  force?: boolean;
  /** general.name; default: the model folder's name. */
  name?: string;
  /** Also write an Ollama Modelfile beside the file. */
  ollama?: boolean;
  /** The model's chat template as Ollama's (agent/ollama-template.ts ollamaChat), for the Modelfile. */
  ollamaChat?: (
    found: { template: string; source: string } | undefined,
    tokenizerConfig: Record<string, unknown> | undefined,
    bos: string | undefined,
  ) => OllamaChat | { why: string };
}

/** A Modelfile's chat: Ollama's Go TEMPLATE (with the model's default system message in it). */
export interface OllamaChat {
  template: string;
}

export interface GgufExportResult {
  file: string;
  bytes: number;
  architecture: string;
  type: GgufWeightType;
  tensors: number;
  /** The adapter folded in, its scale and how many layers it changed. */
  adapter?: { dir: string; scale: number; useRslora: boolean; adapted: number };
  tokenizer: { pre: string; tokens: number; merges: number; bos?: number; eos?: number; addBos: boolean };
  chatTemplate: boolean;
  /** Tensors written at f16 instead of q8_0 because their rows are not a multiple of 32 values. */
  f16Fallback: string[];
  modelfile?: string;
  /** Whether the Modelfile carries the chat template as Ollama's TEMPLATE, and if not why. */
  ollamaTemplate?: { written: boolean; why?: string };
}

/** A tokenizer_config.json special token: a string, or an object with its content. */
function specialTokenText(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (v && typeof v === 'object' && typeof (v as { content?: unknown }).content === 'string') return (v as { content: string }).content;
  return undefined;
}

export interface GgufTokenizer {
  pre: string;
  tokens: string[];
  types: number[];
  merges: string[];
  bos?: number;
  eos?: number;
  pad?: number;
  addBos: boolean;
  addEos: boolean;
}

/**
 * The tokenizer as llama.cpp's "gpt2" (byte-level BPE) vocabulary: one token per id up to the
 * model's vocab_size (ids the tokenizer leaves empty become unused "[PADn]" tokens), special added
 * tokens as control tokens, other added tokens as user-defined ones. A tokenizer llama.cpp has no
 * pre-tokenizer for is refused.
 */
export function ggufTokenizer(
  tokenizerJson: Record<string, unknown>,
  tokenizerConfig: Record<string, unknown> | undefined,
  config: ModelConfig,
  source: string,
): GgufTokenizer {
  const model = tokenizerJson.model as { type?: unknown; vocab?: unknown; merges?: unknown } | undefined;
  const refuse = (why: string): never => {
    throw new TurnwiseError('invalid-input', `${source}: ${why}, which a GGUF file cannot hold`, {
      hint: `GGUF export writes byte-level BPE tokenizers with ${PRE_TOKENIZERS.map((p) => `${p.of} pre-tokenizer split`).join(' or ')} (the Qwen2 and Llama 3 families' own)`,
    });
  };
  if (model?.type !== 'BPE' || !model.vocab || typeof model.vocab !== 'object')
    refuse(`the tokenizer's model is ${JSON.stringify(model?.type)}, not BPE`);
  const decoder = tokenizerJson.decoder as { type?: unknown } | undefined;
  if (decoder?.type !== 'ByteLevel') refuse(`the decoder is ${JSON.stringify(decoder?.type)}, not ByteLevel`);
  const normalizer = tokenizerJson.normalizer as { type?: unknown } | null | undefined;
  // llama.cpp applies no normalizer; NFC (Qwen2's) changes only text that is not already NFC.
  if (normalizer && normalizer.type !== 'NFC') refuse(`the normalizer is ${JSON.stringify(normalizer.type)}`);
  const pt = tokenizerJson.pre_tokenizer as { type?: string; pretokenizers?: unknown[] } | undefined;
  const steps = (pt?.type === 'Sequence' ? (pt.pretokenizers ?? []) : [pt]) as { type?: string; pattern?: { Regex?: string } }[];
  const split = steps.find((s) => s?.type === 'Split')?.pattern?.Regex;
  const known = PRE_TOKENIZERS.find((p) => p.pattern === split);
  if (!known || !steps.some((s) => s?.type === 'ByteLevel'))
    refuse(
      split === undefined ? 'the pre-tokenizer has no Split step llama.cpp knows' : `the pre-tokenizer splits by ${JSON.stringify(split)}`,
    );
  const vocab = model!.vocab as Record<string, number>;
  const byId = new Map<number, string>();
  for (const [t, id] of Object.entries(vocab)) byId.set(id, t);
  const added = new Map<number, { content: string; special: boolean }>();
  for (const a of (tokenizerJson.added_tokens as { id: number; content: string; special?: boolean }[] | undefined) ?? []) {
    added.set(a.id, { content: a.content, special: a.special === true });
    byId.set(a.id, a.content);
  }
  const tokens: string[] = [];
  const types: number[] = [];
  for (let i = 0; i < config.vocab_size; i++) {
    const t = byId.get(i);
    const a = added.get(i);
    tokens.push(t ?? `[PAD${i}]`);
    types.push(t === undefined ? TOKEN_TYPE.unused : a ? (a.special ? TOKEN_TYPE.control : TOKEN_TYPE.userDefined) : TOKEN_TYPE.normal);
  }
  const rawMerges = Array.isArray(model!.merges) ? (model!.merges as unknown[]) : [];
  const merges = rawMerges.map((m) => (Array.isArray(m) ? m.join(' ') : String(m)));
  const idOf = (text: string | undefined) =>
    text === undefined ? undefined : (vocab[text] ?? [...added].find(([, a]) => a.content === text)?.[0]);
  const tc = tokenizerConfig ?? {};
  const bos = idOf(specialTokenText(tc.bos_token)) ?? config.bos_token_id;
  const eos = idOf(specialTokenText(tc.eos_token)) ?? config.eos_token_id;
  const pad = idOf(specialTokenText(tc.pad_token)) ?? config.pad_token_id;
  // Whether encoding starts with the begin token: tokenizer_config.json says so, or tokenizer.json's
  // post-processor puts it first (Llama 3's TemplateProcessing).
  const addBos =
    typeof tc.add_bos_token === 'boolean'
      ? tc.add_bos_token
      : bos !== undefined && templateStartsWith(tokenizerJson.post_processor, tokens[bos] ?? '');
  const addEos = tc.add_eos_token === true;
  return { pre: known!.pre, tokens, types, merges, bos, eos, pad, addBos, addEos };
}

/** Whether a post-processor (TemplateProcessing, alone or in a Sequence) puts `token` before a single text. */
function templateStartsWith(pp: unknown, token: string): boolean {
  const p = pp as { type?: string; processors?: unknown[]; single?: { SpecialToken?: { id?: string } }[] } | null | undefined;
  if (!p) return false;
  if (p.type === 'Sequence') return (p.processors ?? []).some((q) => templateStartsWith(q, token));
  return p.type === 'TemplateProcessing' && p.single?.[0]?.SpecialToken?.id === token;
}

/**
 * Rows of a Q or K projection (weight [heads·d, in] or bias [heads·d]) from Hugging Face's
 * rotate-half order (a head's first half rotates with its second) to the order of rotary
 * embeddings that pair adjacent values: within each head, row s·d/2 + j moves to 2j + s.
 */
export function permuteRotaryRows(values: Float32Array, heads: number, rowLength: number): Float32Array {
  const rows = values.length / rowLength;
  const d = rows / heads;
  const out = new Float32Array(values.length);
  for (let h = 0; h < heads; h++)
    for (let s = 0; s < 2; s++)
      for (let j = 0; j < d / 2; j++) {
        const from = (h * d + s * (d / 2) + j) * rowLength;
        const to = (h * d + 2 * j + s) * rowLength;
        out.set(values.subarray(from, from + rowLength), to);
      }
  return out;
}

/**
 * Llama 3 rope scaling as llama.cpp applies it: one factor per frequency that the unscaled
 * frequency is divided by (rope_freqs.weight), taken from the frequencies Turnwise's forward uses.
 */
export function llama3RopeFactors(config: ModelConfig): Float32Array {
  const scaled = ropeInvFreq(config);
  const base = ropeInvFreq({ ...config, rope_scaling: undefined });
  return Float32Array.from(base, (f, i) => f / scaled[i]);
}

/** llama.cpp's name of a Hugging Face tensor. */
function ggufTensorName(hf: string): string {
  const m = /^model\.layers\.(\d+)\.(.+)\.(weight|bias)$/.exec(hf);
  if (m) {
    const inLayer: Record<string, string> = {
      input_layernorm: 'attn_norm',
      'self_attn.q_proj': 'attn_q',
      'self_attn.k_proj': 'attn_k',
      'self_attn.v_proj': 'attn_v',
      'self_attn.o_proj': 'attn_output',
      post_attention_layernorm: 'ffn_norm',
      'mlp.gate_proj': 'ffn_gate',
      'mlp.up_proj': 'ffn_up',
      'mlp.down_proj': 'ffn_down',
    };
    const n = inLayer[m[2]];
    if (n) return `blk.${m[1]}.${n}.${m[3]}`;
  }
  const top: Record<string, string> = {
    'model.embed_tokens.weight': 'token_embd.weight',
    'model.norm.weight': 'output_norm.weight',
    'lm_head.weight': 'output.weight',
  };
  const t = top[hf];
  if (!t) throw new TurnwiseError('internal', `no GGUF name for tensor ${hf}`);
  return t;
}

/** The tensors of `w` under llama.cpp's names and layouts, 2-D weights at `type`. */
export function ggufTensors(w: PolicyWeights, type: GgufWeightType): { tensors: GgufTensor[]; f16Fallback: string[] } {
  const c = w.config;
  const { permuteQK } = GGUF_ARCHITECTURES[familyOf(c)];
  const tensors: GgufTensor[] = [];
  const f16Fallback: string[] = [];
  if (c.rope_scaling) {
    const factors = llama3RopeFactors(c);
    tensors.push({ name: 'rope_freqs.weight', dims: [factors.length], type: 'f32', data: () => encodeTensor(factors, 'f32') });
  }
  for (const s of paramSpecs(c)) {
    const name = ggufTensorName(s.name);
    // Dims fastest first: a Linear weight [out, in] is [in, out]; the bytes are the same row-major values.
    const dims = [...s.shape].reverse();
    let t: GgmlType = s.shape.length === 1 ? 'f32' : type;
    if (t === 'q8_0' && dims[0] % 32 !== 0) {
      t = 'f16';
      f16Fallback.push(name);
    }
    const heads = /\.self_attn\.q_proj\./.test(s.name)
      ? c.num_attention_heads
      : /\.self_attn\.k_proj\./.test(s.name)
        ? c.num_key_value_heads
        : 0;
    const rowLength = s.shape.length === 2 ? s.shape[1] : 1;
    const values = () => {
      const v = w.tensors.get(s.name)!;
      return permuteQK && heads ? permuteRotaryRows(v, heads, rowLength) : v;
    };
    const encoded = t;
    tensors.push({ name, dims, type: encoded, data: () => encodeTensor(values(), encoded) });
  }
  return { tensors, f16Fallback };
}

/** The key-values of a model's GGUF file: general.*, the architecture's, the tokenizer's and the chat template. */
export function ggufMetadata(
  c: ModelConfig,
  tok: GgufTokenizer,
  o: { name: string; type: GgufWeightType; chatTemplate?: string },
): [string, GgufValue][] {
  const { arch } = GGUF_ARCHITECTURES[familyOf(c)];
  const d = headDim(c);
  const kv: [string, GgufValue][] = [
    ['general.architecture', gguf.str(arch)],
    ['general.name', gguf.str(o.name)],
    ['general.file_type', gguf.u32(FILE_TYPE[o.type])],
    ['general.quantization_version', gguf.u32(2)],
    [`${arch}.context_length`, gguf.u32(c.max_position_embeddings)],
    [`${arch}.embedding_length`, gguf.u32(c.hidden_size)],
    [`${arch}.block_count`, gguf.u32(c.num_hidden_layers)],
    [`${arch}.feed_forward_length`, gguf.u32(c.intermediate_size)],
    [`${arch}.attention.head_count`, gguf.u32(c.num_attention_heads)],
    [`${arch}.attention.head_count_kv`, gguf.u32(c.num_key_value_heads)],
    [`${arch}.attention.key_length`, gguf.u32(d)],
    [`${arch}.attention.value_length`, gguf.u32(d)],
    [`${arch}.attention.layer_norm_rms_epsilon`, gguf.f32(c.rms_norm_eps)],
    [`${arch}.rope.freq_base`, gguf.f32(c.rope_theta)],
    [`${arch}.rope.dimension_count`, gguf.u32(d)],
    [`${arch}.vocab_size`, gguf.u32(c.vocab_size)],
    ['tokenizer.ggml.model', gguf.str('gpt2')],
    ['tokenizer.ggml.pre', gguf.str(tok.pre)],
    ['tokenizer.ggml.tokens', gguf.strings(tok.tokens)],
    ['tokenizer.ggml.token_type', gguf.i32s(tok.types)],
    ['tokenizer.ggml.merges', gguf.strings(tok.merges)],
  ];
  if (tok.bos !== undefined) kv.push(['tokenizer.ggml.bos_token_id', gguf.u32(tok.bos)]);
  if (tok.eos !== undefined) kv.push(['tokenizer.ggml.eos_token_id', gguf.u32(tok.eos)]);
  if (tok.pad !== undefined) kv.push(['tokenizer.ggml.padding_token_id', gguf.u32(tok.pad)]);
  kv.push(['tokenizer.ggml.add_bos_token', gguf.bool(tok.addBos)], ['tokenizer.ggml.add_eos_token', gguf.bool(tok.addEos)]);
  if (o.chatTemplate !== undefined) kv.push(['tokenizer.chat_template', gguf.str(o.chatTemplate)]);
  return kv;
}

/**
 * An Ollama Modelfile for the file `gguf` beside it: the end-of-turn tokens as stops and, when
 * the model's chat template could be written as Ollama's (agent/ollama-template.ts), its TEMPLATE.
 */
export function ollamaModelfile(gguf: string, stops: readonly string[], chat?: OllamaChat): string {
  const lines = [`FROM ./${gguf}`];
  if (chat) lines.push(`TEMPLATE """${chat.template}"""`);
  lines.push(...stops.map((s) => `PARAMETER stop ${JSON.stringify(s)}`));
  return lines.join('\n') + '\n';
}

/** Refuses an output path that exists (without force), is a folder, or cannot be written. */
function checkOutput(file: string, force: boolean, option: string): void {
  const problem = outputPathProblem(file);
  if (problem)
    throw new TurnwiseError('invalid-input', `${option}: ${problem}`, { hint: `give ${option} a file path in a folder you can write to` });
  if (fs.existsSync(file) && !force)
    throw new TurnwiseError('invalid-input', `${file} already exists`, {
      hint: 'choose another --out file, or pass --force to replace it',
    });
}

/**
 * Writes `modelDir` (a model folder, or an adapter folder over its base) with `o.adapter` folded
 * in as a GGUF file at `out`, complete or not at all: it is written under a temporary name in the
 * same folder and renamed when whole, so a failed write (a full disk) leaves nothing under `out`.
 */
export function exportGguf(modelDir: string, out: string, o: GgufExportOptions = {}): GgufExportResult {
  const type = o.type ?? 'f16';
  if (!GGUF_WEIGHT_TYPES.includes(type))
    throw new TurnwiseError('invalid-input', `GGUF weight type ${JSON.stringify(type)} is not written`, {
      hint: `use one of: ${GGUF_WEIGHT_TYPES.join(', ')}`,
    });
  const file = path.resolve(out);
  const modelfile = path.join(path.dirname(file), 'Modelfile');
  checkOutput(file, o.force === true, '--out');
  if (o.ollama) checkOutput(modelfile, o.force === true, 'the Modelfile beside --out');
  const ck = loadCheckpoint(modelDir, { optimizer: false });
  const family = familyOf(ck.weights.config);
  if (!(family in GGUF_ARCHITECTURES))
    throw new TurnwiseError('invalid-input', `GGUF export does not know the ${family} family`, {
      hint: `supported: ${Object.keys(GGUF_ARCHITECTURES)
        .map((f) => `${f} (${MODEL_FAMILIES[f as ModelFamily].covers})`)
        .join(', ')}`,
    });
  if (ck.weights.config.rope_scaling && !GGUF_ARCHITECTURES[family].ropeFactors)
    throw new TurnwiseError(
      'invalid-input',
      `${ck.dir}: a ${family} model with rope_scaling (${ck.weights.config.rope_scaling.rope_type}) cannot be written as GGUF`,
      {
        hint: `llama.cpp's ${GGUF_ARCHITECTURES[family].arch} architecture has no rope scaling factors; only the llama family's Llama 3 scaling is exported`,
      },
    );
  const bc = ck.weights.config;
  if (!GGUF_ARCHITECTURES[family].freeHeadDim && headDim(bc) * bc.num_attention_heads !== bc.hidden_size)
    throw new TurnwiseError(
      'invalid-input',
      `${ck.dir}: a ${family} model with head_dim ${headDim(bc)} (not hidden_size ${bc.hidden_size} / ${bc.num_attention_heads} heads) cannot be written as GGUF`,
      { hint: `llama.cpp's ${GGUF_ARCHITECTURES[family].arch} architecture sizes a head as hidden_size / num_attention_heads` },
    );
  const adapterDir = o.adapter ?? ck.adapterDir;
  const adapter = o.adapter ? loadAdapter(o.adapter, ck.weights.config) : ck.adapter;
  const weights = adapter ? mergeAdapter(ck.weights, adapter) : ck.weights;
  const c = weights.config;
  const tokSource = path.join(ck.dir, 'tokenizer.json');
  const tok = ggufTokenizer(ck.tokenizerJson, ck.tokenizerConfig, c, tokSource);
  const found = chatTemplateOf(ck.dir, ck.tokenizerConfig);
  const template = found?.template;
  const name = o.name ?? path.basename(path.resolve(modelDir));
  const { tensors, f16Fallback } = ggufTensors(weights, type);
  const bytes = writeGgufFile(file, ggufMetadata(c, tok, { name, type, chatTemplate: template }), tensors);
  let written: string | undefined;
  let ollamaTemplate: GgufExportResult['ollamaTemplate'];
  if (o.ollama) {
    const eosIds = [
      ...new Set([
        ...(c.eos_token_ids ?? []),
        ...(c.eos_token_id !== undefined ? [c.eos_token_id] : []),
        ...(tok.eos !== undefined ? [tok.eos] : []),
      ]),
    ];
    const stops = eosIds.map((id) => tok.tokens[id]).filter((t): t is string => t !== undefined);
    const chat = o.ollamaChat
      ? o.ollamaChat(found, ck.tokenizerConfig, tok.addBos && tok.bos !== undefined ? tok.tokens[tok.bos] : undefined)
      : { why: 'no chat template translation was given' };
    writeFileAtomic(modelfile, ollamaModelfile(path.basename(file), stops, 'why' in chat ? undefined : chat));
    written = modelfile;
    ollamaTemplate = 'why' in chat ? { written: false, why: chat.why } : { written: true };
  }
  return {
    file,
    bytes,
    architecture: GGUF_ARCHITECTURES[family].arch,
    type,
    tensors: tensors.length,
    ...(adapter && adapterDir
      ? {
          adapter: {
            dir: path.resolve(adapterDir),
            scale: loraScale(adapter.config),
            useRslora: adapter.config.use_rslora,
            adapted: loraTargets(c, adapter.config).length,
          },
        }
      : {}),
    tokenizer: {
      pre: tok.pre,
      tokens: tok.tokens.length,
      merges: tok.merges.length,
      ...(tok.bos !== undefined ? { bos: tok.bos } : {}),
      ...(tok.eos !== undefined ? { eos: tok.eos } : {}),
      addBos: tok.addBos,
    },
    chatTemplate: template !== undefined,
    f16Fallback,
    ...(written ? { modelfile: written } : {}),
    ...(ollamaTemplate ? { ollamaTemplate } : {}),
  };
}
