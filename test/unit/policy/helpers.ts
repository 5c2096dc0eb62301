// Shared fixtures for the policy tests: small configs and deterministic weights.
import { paramSpecs, type ModelConfig } from '../../../src/policy/model/config';
import { numel } from '../../../src/policy/files/safetensors';
import type { PolicyWeights } from '../../../src/policy/model/weights';

/** hidden 8, 2 layers, 4 query heads over 2 KV heads, vocab 11: the config of golden/qwen2_np.py. */
export const GOLDEN_CONFIG: ModelConfig = {
  hidden_size: 8,
  intermediate_size: 12,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
  vocab_size: 11,
  max_position_embeddings: 64,
  tie_word_embeddings: false,
};

/**
 * The config of golden/llama_np.py: Llama with head_dim 8 (not hidden/heads), GQA 2 → 1, untied,
 * Llama 3 rope scaling whose four frequencies fall in all three bands.
 */
export const GOLDEN_LLAMA: ModelConfig = {
  model_type: 'llama',
  hidden_size: 8,
  intermediate_size: 12,
  num_hidden_layers: 2,
  num_attention_heads: 2,
  num_key_value_heads: 1,
  head_dim: 8,
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
  rope_scaling: { rope_type: 'llama3', factor: 4, low_freq_factor: 1, high_freq_factor: 8, original_max_position_embeddings: 256 },
  vocab_size: 11,
  max_position_embeddings: 512,
  tie_word_embeddings: false,
};

/** A small model for ONNX tests: hidden 32, 2 layers, GQA 4/2, vocab 40. */
export const SMALL_CONFIG: ModelConfig = {
  hidden_size: 32,
  intermediate_size: 48,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  rms_norm_eps: 1e-6,
  rope_theta: 10000,
  vocab_size: 40,
  max_position_embeddings: 128,
  tie_word_embeddings: true,
};

/** Weights from a closed formula (sin/cos), identical to golden/qwen2_np.py, so no RNG is shared. */
export function formulaWeights(config: ModelConfig, scale = 0.5): PolicyWeights {
  const tensors = new Map<string, Float32Array>();
  paramSpecs(config).forEach((p, k) => {
    const a = new Float32Array(numel(p.shape));
    for (let i = 0; i < a.length; i++)
      a[i] = p.name.endsWith('norm.weight') ? 1 + 0.1 * Math.cos(i + k) : Math.sin(i * 0.37 + k * 1.3) * scale;
    tensors.set(p.name, a);
  });
  return { config, tensors };
}

export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`length ${a.length} vs ${b.length}`);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}
