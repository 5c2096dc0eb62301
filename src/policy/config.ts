// The policy's architecture: a Hugging Face Qwen2 `config.json` (same field names), validated
// with errors that name the field, plus the embedded default model "turnwise-tiny".
import { TurnwiseError } from '../core/errors';

/** The Qwen2 fields Turnwise reads; other fields of a real config.json are kept but ignored. */
export interface Qwen2Config {
  hidden_size: number;
  intermediate_size: number;
  num_hidden_layers: number;
  num_attention_heads: number;
  num_key_value_heads: number;
  rms_norm_eps: number;
  rope_theta: number;
  vocab_size: number;
  max_position_embeddings: number;
  tie_word_embeddings: boolean;
  /** Token ids from the tokenizer; optional in HF configs. */
  bos_token_id?: number;
  eos_token_id?: number;
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
export const TURNWISE_TINY: Qwen2Config = {
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
  bos_token_id: 256,
  eos_token_id: 256,
  pad_token_id: 259,
};

export function presetConfig(size: string): Qwen2Config {
  if (size === 'tiny') return { ...TURNWISE_TINY };
  throw new TurnwiseError('invalid-input', `unknown policy size "${size}"`, { hint: `use one of: ${POLICY_SIZES.join(', ')}` });
}

export function headDim(c: Qwen2Config): number {
  return c.hidden_size / c.num_attention_heads;
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

/**
 * Validates a parsed config.json and returns the Qwen2 fields. `source` names the file in errors.
 * Every problem is listed at once.
 */
export function parseQwen2Config(raw: unknown, source = 'config.json'): Qwen2Config {
  const problems: string[] = [];
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    throw new TurnwiseError('invalid-file', `${source} is not a JSON object`, { hint: 'write a Hugging Face Qwen2 config.json' });
  }
  const r = raw as Record<string, unknown>;
  if (r.model_type !== undefined && r.model_type !== 'qwen2') problems.push(`model_type is ${JSON.stringify(r.model_type)}, only "qwen2" is supported`);
  if (r.hidden_act !== undefined && r.hidden_act !== 'silu') problems.push(`hidden_act is ${JSON.stringify(r.hidden_act)}, only "silu" is supported`);
  for (const f of INT_FIELDS) {
    const v = r[f];
    if (v === undefined) problems.push(`${f} is missing`);
    else if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0) problems.push(`${f} must be a positive integer, got ${JSON.stringify(v)}`);
  }
  for (const f of ['rms_norm_eps', 'rope_theta'] as const) {
    const v = r[f];
    if (v === undefined) problems.push(`${f} is missing`);
    else if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0) problems.push(`${f} must be a positive number, got ${JSON.stringify(v)}`);
  }
  const tie = r.tie_word_embeddings ?? false;
  if (typeof tie !== 'boolean') problems.push(`tie_word_embeddings must be true or false, got ${JSON.stringify(tie)}`);
  for (const f of ['bos_token_id', 'eos_token_id', 'pad_token_id'] as const) {
    const v = r[f];
    if (v !== undefined && v !== null && (typeof v !== 'number' || !Number.isInteger(v) || v < 0)) {
      problems.push(`${f} must be a token id, got ${JSON.stringify(v)}`);
    }
  }
  if (problems.length === 0) {
    const h = r.hidden_size as number;
    const nh = r.num_attention_heads as number;
    const nkv = r.num_key_value_heads as number;
    if (h % nh !== 0) problems.push(`hidden_size ${h} is not divisible by num_attention_heads ${nh}`);
    else if ((h / nh) % 2 !== 0) problems.push(`head dimension ${h / nh} must be even for rotary embeddings`);
    if (nh % nkv !== 0) problems.push(`num_attention_heads ${nh} is not a multiple of num_key_value_heads ${nkv}`);
    for (const f of ['bos_token_id', 'eos_token_id', 'pad_token_id'] as const) {
      const v = r[f];
      if (typeof v === 'number' && v >= (r.vocab_size as number)) problems.push(`${f} ${v} is outside the vocabulary (vocab_size ${r.vocab_size})`);
    }
  }
  if (problems.length > 0) {
    throw new TurnwiseError('invalid-file', `${source} is not a usable Qwen2 config:\n  ${problems.join('\n  ')}`, {
      hint: 'fix the fields listed above (Hugging Face Qwen2 field names)',
    });
  }
  const out: Qwen2Config = {
    hidden_size: r.hidden_size as number,
    intermediate_size: r.intermediate_size as number,
    num_hidden_layers: r.num_hidden_layers as number,
    num_attention_heads: r.num_attention_heads as number,
    num_key_value_heads: r.num_key_value_heads as number,
    rms_norm_eps: r.rms_norm_eps as number,
    rope_theta: r.rope_theta as number,
    vocab_size: r.vocab_size as number,
    max_position_embeddings: r.max_position_embeddings as number,
    tie_word_embeddings: tie as boolean,
  };
  for (const f of ['bos_token_id', 'eos_token_id', 'pad_token_id'] as const) if (typeof r[f] === 'number') out[f] = r[f] as number;
  return out;
}

/** The config.json Turnwise writes: the Qwen2 fields plus what transformers needs to load it. */
export function configToJson(c: Qwen2Config): Record<string, unknown> {
  return {
    architectures: ['Qwen2ForCausalLM'],
    model_type: 'qwen2',
    hidden_act: 'silu',
    torch_dtype: 'float32',
    attention_dropout: 0,
    use_sliding_window: false,
    initializer_range: 0.02,
    ...c,
  };
}

export interface ParamSpec {
  /** Hugging Face tensor name. */
  name: string;
  /** Shape as stored in model.safetensors (Linear weights are [out, in]). */
  shape: number[];
}

/** Every tensor of the model, in a fixed order, with Hugging Face names and shapes. */
export function paramSpecs(c: Qwen2Config): ParamSpec[] {
  const h = c.hidden_size;
  const d = headDim(c);
  const kv = c.num_key_value_heads * d;
  const out: ParamSpec[] = [{ name: 'model.embed_tokens.weight', shape: [c.vocab_size, h] }];
  for (let i = 0; i < c.num_hidden_layers; i++) {
    const p = `model.layers.${i}.`;
    out.push(
      { name: `${p}input_layernorm.weight`, shape: [h] },
      { name: `${p}self_attn.q_proj.weight`, shape: [h, h] },
      { name: `${p}self_attn.q_proj.bias`, shape: [h] },
      { name: `${p}self_attn.k_proj.weight`, shape: [kv, h] },
      { name: `${p}self_attn.k_proj.bias`, shape: [kv] },
      { name: `${p}self_attn.v_proj.weight`, shape: [kv, h] },
      { name: `${p}self_attn.v_proj.bias`, shape: [kv] },
      { name: `${p}self_attn.o_proj.weight`, shape: [h, h] },
      { name: `${p}post_attention_layernorm.weight`, shape: [h] },
      { name: `${p}mlp.gate_proj.weight`, shape: [c.intermediate_size, h] },
      { name: `${p}mlp.up_proj.weight`, shape: [c.intermediate_size, h] },
      { name: `${p}mlp.down_proj.weight`, shape: [h, c.intermediate_size] },
    );
  }
  out.push({ name: 'model.norm.weight', shape: [h] });
  if (!c.tie_word_embeddings) out.push({ name: 'lm_head.weight', shape: [c.vocab_size, h] });
  return out;
}

export function parameterCount(c: Qwen2Config): number {
  return paramSpecs(c).reduce((s, p) => s + p.shape.reduce((a, b) => a * b, 1), 0);
}
