// The policy's architecture: a Hugging Face `config.json` of a supported family (same field
// names), validated with errors that name the field, plus the embedded default model
// "turnwise-tiny". This is the one description of a model that the inference graphs, the
// training graphs and the reference forward all read: tensor names and shapes (paramSpecs), head
// size, which projections carry biases, and the rotary frequencies (ropeInvFreq).
import { TurnwiseError } from '../../core/errors';

/** The model families Turnwise runs, by `model_type`, with the checkpoints they cover. */
export const MODEL_FAMILIES = {
  qwen2: { architecture: 'Qwen2ForCausalLM', covers: 'Qwen2, Qwen2.5, Qwen2.5-Coder' },
  llama: { architecture: 'LlamaForCausalLM', covers: 'Llama 3, 3.1, 3.2; SmolLM2' },
} as const;
export type ModelFamily = keyof typeof MODEL_FAMILIES;

/** Llama 3's rotary scaling (`"rope_type": "llama3"`). */
export interface Llama3RopeScaling {
  rope_type: 'llama3';
  factor: number;
  low_freq_factor: number;
  high_freq_factor: number;
  original_max_position_embeddings: number;
}

/** The dtypes a checkpoint's config may name (`torch_dtype`, or `dtype` in newer transformers). */
export type ConfigDType = 'float32' | 'float16' | 'bfloat16';

/** The config fields Turnwise reads; other fields of a real config.json are kept but ignored. */
export interface ModelConfig {
  /** The family (default qwen2: Turnwise's own checkpoints before families existed). */
  model_type?: ModelFamily;
  hidden_size: number;
  intermediate_size: number;
  num_hidden_layers: number;
  num_attention_heads: number;
  num_key_value_heads: number;
  /** Size of one attention head; default hidden_size / num_attention_heads. */
  head_dim?: number;
  rms_norm_eps: number;
  rope_theta: number;
  /** Rotary scaling; absent for plain RoPE. */
  rope_scaling?: Llama3RopeScaling;
  /** llama: biases on q, k, v and o (Qwen2 always has q, k, v biases and none on o). */
  attention_bias?: boolean;
  /** llama: biases on gate, up and down. */
  mlp_bias?: boolean;
  vocab_size: number;
  max_position_embeddings: number;
  tie_word_embeddings: boolean;
  /** The dtype the weights were saved in. */
  torch_dtype?: ConfigDType;
  /** Token ids from the tokenizer; optional in HF configs. */
  bos_token_id?: number;
  eos_token_id?: number;
  /** Every end-of-sequence id when the config lists several (eos_token_id is the first). */
  eos_token_ids?: number[];
  pad_token_id?: number;
}

export const POLICY_SIZES = ['tiny'] as const;
export type PolicySize = (typeof POLICY_SIZES)[number];

/** Special tokens of the byte-level vocabulary: ids 256.. after the 256 bytes. */
export const BYTE_SPECIAL_TOKENS = ['<|endoftext|>', '<|im_start|>', '<|im_end|>', '<|pad|>'] as const;
export const BYTE_VOCAB_SIZE = 256 + BYTE_SPECIAL_TOKENS.length;

/**
 * turnwise-tiny: byte-level vocabulary, ~3.2M parameters, 1024 tokens of context. Small enough
 * to train on a laptop CPU, big enough to learn command syntax.
 */
export const TURNWISE_TINY: ModelConfig = {
  model_type: 'qwen2',
  hidden_size: 256,
  intermediate_size: 768,
  num_hidden_layers: 4,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
  vocab_size: BYTE_VOCAB_SIZE,
  max_position_embeddings: 1024,
  tie_word_embeddings: true,
  torch_dtype: 'float32',
  bos_token_id: 256,
  eos_token_id: 256,
  pad_token_id: 259,
};

export function presetConfig(size: string): ModelConfig {
  if (size === 'tiny') return { ...TURNWISE_TINY };
  throw new TurnwiseError('invalid-input', `unknown policy size "${size}"`, { hint: `use one of: ${POLICY_SIZES.join(', ')}` });
}

export function headDim(c: ModelConfig): number {
  return c.head_dim ?? c.hidden_size / c.num_attention_heads;
}

export function familyOf(c: ModelConfig): ModelFamily {
  return c.model_type ?? 'qwen2';
}

/** Which projections carry a bias: Qwen2's q, k, v; Llama's per attention_bias and mlp_bias. */
export function biasesOf(c: ModelConfig): { qkv: boolean; o: boolean; mlp: boolean } {
  if (familyOf(c) === 'qwen2') return { qkv: true, o: false, mlp: false };
  return { qkv: !!c.attention_bias, o: !!c.attention_bias, mlp: !!c.mlp_bias };
}

/**
 * Rotary inverse frequencies, one per pair of a head (d/2 of them): θ^(−2i/d), then Llama 3's
 * scaling when the config has it: wavelengths longer than original_max / low_freq_factor are
 * divided by `factor`, shorter than original_max / high_freq_factor kept, and those between
 * blended smoothly (transformers' _compute_llama3_parameters).
 */
export function ropeInvFreq(c: ModelConfig): number[] {
  const d = headDim(c);
  const base = Array.from({ length: d / 2 }, (_, i) => 1 / c.rope_theta ** ((2 * i) / d));
  const s = c.rope_scaling;
  if (!s) return base;
  const lowWavelen = s.original_max_position_embeddings / s.low_freq_factor;
  const highWavelen = s.original_max_position_embeddings / s.high_freq_factor;
  return base.map((f) => {
    const wavelen = (2 * Math.PI) / f;
    if (wavelen < highWavelen) return f;
    if (wavelen > lowWavelen) return f / s.factor;
    const smooth = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
    return (1 - smooth) * (f / s.factor) + smooth * f;
  });
}

const INT_FIELDS = [
  'hidden_size',
  'intermediate_size',
  'num_hidden_layers',
  'num_attention_heads',
  'num_key_value_heads',
  'vocab_size',
  'max_position_embeddings',
] as const;

const SUPPORTED = Object.entries(MODEL_FAMILIES)
  .map(([k, v]) => `${k} (${v.architecture}: ${v.covers})`)
  .join(', ');

/** Reads `rope_scaling` (or newer transformers' `rope_parameters`); pushes a problem for what is unsupported. */
function parseRope(r: Record<string, unknown>, problems: string[]): { theta: unknown; scaling?: Llama3RopeScaling } {
  const params = r.rope_parameters ?? r.rope_scaling;
  const field = r.rope_parameters !== undefined ? 'rope_parameters' : 'rope_scaling';
  const theta = r.rope_theta ?? (params && typeof params === 'object' ? (params as Record<string, unknown>).rope_theta : undefined);
  if (params === undefined || params === null) return { theta };
  if (typeof params !== 'object' || Array.isArray(params)) {
    problems.push(`${field} must be an object or null, got ${JSON.stringify(params)}`);
    return { theta };
  }
  const p = params as Record<string, unknown>;
  const type = p.rope_type ?? p.type ?? 'default';
  if (type === 'default') return { theta };
  if (type !== 'llama3') {
    problems.push(`${field}.rope_type is ${JSON.stringify(type)}; supported: "default" and "llama3"`);
    return { theta };
  }
  const num = (k: string) => {
    const v = p[k];
    if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0)
      problems.push(`${field}.${k} must be a positive number, got ${JSON.stringify(v)}`);
    return v as number;
  };
  const scaling: Llama3RopeScaling = {
    rope_type: 'llama3',
    factor: num('factor'),
    low_freq_factor: num('low_freq_factor'),
    high_freq_factor: num('high_freq_factor'),
    original_max_position_embeddings: num('original_max_position_embeddings'),
  };
  if (scaling.high_freq_factor <= scaling.low_freq_factor) problems.push(`${field}.high_freq_factor must be larger than low_freq_factor`);
  return { theta, scaling };
}

/**
 * Validates a parsed config.json of a supported family and returns its fields. `source` names the
 * file in errors. Every problem is listed at once.
 */
export function parseModelConfig(raw: unknown, source = 'config.json'): ModelConfig {
  const problems: string[] = [];
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new TurnwiseError('invalid-file', `${source} is not a JSON object`, {
      hint: `write a Hugging Face config.json of a supported family: ${SUPPORTED}`,
    });
  }
  const r = raw as Record<string, unknown>;
  const type = r.model_type ?? 'qwen2';
  if (typeof type !== 'string' || !(type in MODEL_FAMILIES)) {
    throw new TurnwiseError('invalid-file', `${source}: model_type ${JSON.stringify(r.model_type)} is not supported`, {
      hint: `supported: ${SUPPORTED}`,
    });
  }
  const family = type as ModelFamily;
  // A quantized checkpoint (GPTQ, AWQ, bitsandbytes, …) stores packed integers under other tensor
  // names; read as float weights it would not load, or worse, load wrong.
  const q = r.quantization_config;
  if (q !== undefined && q !== null) {
    const method =
      typeof q === 'object' && typeof (q as { quant_method?: unknown }).quant_method === 'string'
        ? (q as { quant_method: string }).quant_method
        : 'unknown';
    throw new TurnwiseError(
      'invalid-file',
      `${source} has a quantization_config (quant_method ${JSON.stringify(method)}): this is a ${method.toUpperCase()}-quantized checkpoint, and Turnwise loads float weights (F32, F16, BF16) only`,
      {
        hint: 'use the unquantized model the quantized one was made from (the same name without the -GPTQ / -AWQ / -Int4 suffix)',
      },
    );
  }
  const archs = r.architectures;
  if (archs !== undefined && !(Array.isArray(archs) && archs.length === 1 && archs[0] === MODEL_FAMILIES[family].architecture)) {
    problems.push(`architectures is ${JSON.stringify(archs)}; a ${family} checkpoint is ["${MODEL_FAMILIES[family].architecture}"]`);
  }
  if (r.hidden_act !== undefined && r.hidden_act !== 'silu')
    problems.push(`hidden_act is ${JSON.stringify(r.hidden_act)}, only "silu" is supported`);
  if (family === 'qwen2' && r.use_sliding_window === true)
    problems.push('use_sliding_window is true: sliding-window attention is not supported');
  for (const f of INT_FIELDS) {
    const v = r[f];
    if (v === undefined) problems.push(`${f} is missing`);
    else if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0)
      problems.push(`${f} must be a positive integer, got ${JSON.stringify(v)}`);
  }
  const rope = parseRope(r, problems);
  for (const [f, v] of [
    ['rms_norm_eps', r.rms_norm_eps],
    ['rope_theta', rope.theta],
  ] as const) {
    if (v === undefined) problems.push(`${f} is missing`);
    else if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0)
      problems.push(`${f} must be a positive number, got ${JSON.stringify(v)}`);
  }
  const tie = r.tie_word_embeddings ?? false;
  if (typeof tie !== 'boolean') problems.push(`tie_word_embeddings must be true or false, got ${JSON.stringify(tie)}`);
  for (const f of ['attention_bias', 'mlp_bias'] as const) {
    const v = r[f];
    if (v !== undefined && typeof v !== 'boolean') problems.push(`${f} must be true or false, got ${JSON.stringify(v)}`);
  }
  if (family === 'qwen2' && r.mlp_bias === true) problems.push('mlp_bias is true: Qwen2 has no MLP biases');
  const headDimRaw = r.head_dim;
  if (
    headDimRaw !== undefined &&
    headDimRaw !== null &&
    (typeof headDimRaw !== 'number' || !Number.isInteger(headDimRaw) || headDimRaw <= 0)
  )
    problems.push(`head_dim must be a positive integer, got ${JSON.stringify(headDimRaw)}`);
  const dtypeRaw = r.torch_dtype ?? r.dtype;
  if (dtypeRaw !== undefined && dtypeRaw !== null && !['float32', 'float16', 'bfloat16'].includes(dtypeRaw as string))
    problems.push(`torch_dtype is ${JSON.stringify(dtypeRaw)}; supported: float32, float16, bfloat16`);
  const eosList = Array.isArray(r.eos_token_id)
    ? (r.eos_token_id as unknown[])
    : r.eos_token_id === undefined || r.eos_token_id === null
      ? []
      : [r.eos_token_id];
  for (const [f, vs] of [
    ['bos_token_id', [r.bos_token_id]],
    ['eos_token_id', eosList],
    ['pad_token_id', [r.pad_token_id]],
  ] as const) {
    for (const v of vs)
      if (v !== undefined && v !== null && (typeof v !== 'number' || !Number.isInteger(v) || v < 0))
        problems.push(`${f} must be a token id${f === 'eos_token_id' ? ' or a list of them' : ''}, got ${JSON.stringify(v)}`);
  }
  if (problems.length === 0) {
    const h = r.hidden_size as number;
    const nh = r.num_attention_heads as number;
    const nkv = r.num_key_value_heads as number;
    const d = typeof headDimRaw === 'number' ? headDimRaw : h / nh;
    if (typeof headDimRaw !== 'number' && h % nh !== 0)
      problems.push(`hidden_size ${h} is not divisible by num_attention_heads ${nh} (and head_dim is not given)`);
    else if (d % 2 !== 0) problems.push(`head dimension ${d} must be even for rotary embeddings`);
    if (nh % nkv !== 0) problems.push(`num_attention_heads ${nh} is not a multiple of num_key_value_heads ${nkv}`);
    for (const [f, v] of [
      ['bos_token_id', r.bos_token_id],
      ['pad_token_id', r.pad_token_id],
      ...eosList.map((e) => ['eos_token_id', e] as const),
    ] as const) {
      if (typeof v === 'number' && v >= (r.vocab_size as number))
        problems.push(`${f} ${v} is outside the vocabulary (vocab_size ${r.vocab_size})`);
    }
  }
  if (problems.length > 0) {
    throw new TurnwiseError('invalid-file', `${source} is not a usable ${family} config:\n  ${problems.join('\n  ')}`, {
      hint: `fix the fields listed above (Hugging Face field names); supported families: ${SUPPORTED}`,
    });
  }
  const out: ModelConfig = {
    model_type: family,
    hidden_size: r.hidden_size as number,
    intermediate_size: r.intermediate_size as number,
    num_hidden_layers: r.num_hidden_layers as number,
    num_attention_heads: r.num_attention_heads as number,
    num_key_value_heads: r.num_key_value_heads as number,
    ...(typeof headDimRaw === 'number' && headDimRaw !== (r.hidden_size as number) / (r.num_attention_heads as number)
      ? { head_dim: headDimRaw }
      : {}),
    rms_norm_eps: r.rms_norm_eps as number,
    rope_theta: rope.theta as number,
    ...(rope.scaling ? { rope_scaling: rope.scaling } : {}),
    ...(family === 'llama' && r.attention_bias === true ? { attention_bias: true } : {}),
    ...(family === 'llama' && r.mlp_bias === true ? { mlp_bias: true } : {}),
    vocab_size: r.vocab_size as number,
    max_position_embeddings: r.max_position_embeddings as number,
    tie_word_embeddings: tie as boolean,
    ...(typeof dtypeRaw === 'string' ? { torch_dtype: dtypeRaw as ConfigDType } : {}),
  };
  for (const f of ['bos_token_id', 'pad_token_id'] as const) if (typeof r[f] === 'number') out[f] = r[f] as number;
  if (eosList.length) {
    out.eos_token_id = eosList[0] as number;
    if (eosList.length > 1 || Array.isArray(r.eos_token_id)) out.eos_token_ids = eosList as number[];
  }
  return out;
}

/** The config.json Turnwise writes: the model's fields plus what transformers needs to load it. */
export function configToJson(c: ModelConfig): Record<string, unknown> {
  const family = familyOf(c);
  const { eos_token_ids, torch_dtype, ...rest } = c;
  return {
    architectures: [MODEL_FAMILIES[family].architecture],
    model_type: family,
    hidden_act: 'silu',
    torch_dtype: torch_dtype ?? 'float32',
    attention_dropout: 0,
    ...(family === 'qwen2' ? { use_sliding_window: false } : { attention_bias: !!c.attention_bias, mlp_bias: !!c.mlp_bias }),
    initializer_range: 0.02,
    ...rest,
    ...(eos_token_ids ? { eos_token_id: eos_token_ids } : {}),
    rope_scaling: c.rope_scaling ?? null,
  };
}

export interface ParamSpec {
  /** Hugging Face tensor name. */
  name: string;
  /** Shape as stored in model.safetensors (Linear weights are [out, in]). */
  shape: number[];
}

/** Every tensor of the model, in a fixed order, with Hugging Face names and shapes. */
export function paramSpecs(c: ModelConfig): ParamSpec[] {
  const h = c.hidden_size;
  const d = headDim(c);
  const q = c.num_attention_heads * d;
  const kv = c.num_key_value_heads * d;
  const m = c.intermediate_size;
  const bias = biasesOf(c);
  const out: ParamSpec[] = [{ name: 'model.embed_tokens.weight', shape: [c.vocab_size, h] }];
  for (let i = 0; i < c.num_hidden_layers; i++) {
    const p = `model.layers.${i}.`;
    const linear = (name: string, outDim: number, inDim: number, withBias: boolean) => {
      out.push({ name: `${p}${name}.weight`, shape: [outDim, inDim] });
      if (withBias) out.push({ name: `${p}${name}.bias`, shape: [outDim] });
    };
    out.push({ name: `${p}input_layernorm.weight`, shape: [h] });
    linear('self_attn.q_proj', q, h, bias.qkv);
    linear('self_attn.k_proj', kv, h, bias.qkv);
    linear('self_attn.v_proj', kv, h, bias.qkv);
    linear('self_attn.o_proj', h, q, bias.o);
    out.push({ name: `${p}post_attention_layernorm.weight`, shape: [h] });
    linear('mlp.gate_proj', m, h, bias.mlp);
    linear('mlp.up_proj', m, h, bias.mlp);
    linear('mlp.down_proj', h, m, bias.mlp);
  }
  out.push({ name: 'model.norm.weight', shape: [h] });
  if (!c.tie_word_embeddings) out.push({ name: 'lm_head.weight', shape: [c.vocab_size, h] });
  return out;
}

export function parameterCount(c: ModelConfig): number {
  return paramSpecs(c).reduce((s, p) => s + p.shape.reduce((a, b) => a * b, 1), 0);
}

/** Bytes one token of a sequence takes in the KV cache: a float32 key and value per layer, key-value head and head dimension. */
export function kvBytesPerToken(c: ModelConfig): number {
  return c.num_hidden_layers * 2 * c.num_key_value_heads * headDim(c) * 4;
}
