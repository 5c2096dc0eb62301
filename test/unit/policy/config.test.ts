import * as assert from 'node:assert/strict';
import { TurnwiseError } from '../../../src/core/errors';
import { configToJson, parameterCount, paramSpecs, parseModelConfig, presetConfig, TURNWISE_TINY } from '../../../src/policy/model/config';
import { GOLDEN_CONFIG } from './helpers';
import { SeededRandom } from '../../../src/policy/model/weights';

describe('policy/config: Qwen2 config.json', () => {
  it('reads a Hugging Face Qwen2 config and ignores fields it does not use', () => {
    const hf = {
      architectures: ['Qwen2ForCausalLM'],
      model_type: 'qwen2',
      hidden_act: 'silu',
      hidden_size: 896,
      intermediate_size: 4864,
      num_hidden_layers: 24,
      num_attention_heads: 14,
      num_key_value_heads: 2,
      rms_norm_eps: 1e-6,
      rope_theta: 1000000,
      vocab_size: 151936,
      max_position_embeddings: 32768,
      tie_word_embeddings: true,
      sliding_window: 32768,
      torch_dtype: 'bfloat16',
      eos_token_id: 151643,
    };
    const c = parseModelConfig(hf);
    assert.equal(c.hidden_size, 896);
    assert.equal(c.num_key_value_heads, 2);
    assert.equal(c.eos_token_id, 151643);
    // Qwen2.5-0.5B has 494M parameters (tied embeddings); the spec list must reproduce that count.
    assert.equal(parameterCount(c), 494032768);
  });

  it('lists every problem with the field name', () => {
    try {
      parseModelConfig(
        {
          hidden_size: 30,
          intermediate_size: -1,
          num_hidden_layers: 2,
          num_attention_heads: 4,
          num_key_value_heads: 3,
          rms_norm_eps: 1e-6,
          vocab_size: 10,
          max_position_embeddings: 8,
          model_type: 'llama',
          hidden_act: 'gelu',
        },
        'x/config.json',
      );
      assert.fail('should throw');
    } catch (e) {
      assert.ok(e instanceof TurnwiseError);
      assert.equal(e.code, 'invalid-file');
      for (const s of ['x/config.json', 'intermediate_size must be a positive integer', 'rope_theta is missing', 'hidden_act is "gelu"'])
        assert.ok(e.message.includes(s), `${s} in ${e.message}`);
    }
    // An unknown family is refused first, with the list of those that are supported.
    assert.throws(
      () => parseModelConfig({ ...GOLDEN_CONFIG, model_type: 'gpt2' }),
      (e: unknown) =>
        e instanceof TurnwiseError &&
        /model_type "gpt2" is not supported/.test(e.message) &&
        /qwen2 \(Qwen2ForCausalLM.*llama \(LlamaForCausalLM/.test(e.hint ?? ''),
    );
    assert.throws(() => parseModelConfig({ ...GOLDEN_CONFIG, num_key_value_heads: 3 }), /not a multiple of num_key_value_heads 3/);
    assert.throws(() => parseModelConfig({ ...GOLDEN_CONFIG, hidden_size: 12, num_attention_heads: 4 }), /head dimension 3 must be even/);
    assert.throws(() => parseModelConfig({ ...GOLDEN_CONFIG, eos_token_id: 11 }), /outside the vocabulary/);
    assert.throws(() => parseModelConfig([1]), /not a JSON object/);
  });

  it('round-trips through the config.json it writes', () => {
    assert.deepEqual(parseModelConfig(JSON.parse(JSON.stringify(configToJson(TURNWISE_TINY)))), TURNWISE_TINY);
  });

  it('turnwise-tiny: byte vocabulary with specials, a few million parameters, 1024+ context', () => {
    const n = parameterCount(TURNWISE_TINY);
    assert.ok(n > 2e6 && n < 8e6, `${n} parameters`);
    assert.equal(TURNWISE_TINY.vocab_size, 260);
    assert.ok(TURNWISE_TINY.max_position_embeddings >= 1024);
    assert.throws(() => presetConfig('huge'), /unknown policy size "huge"/);
  });

  it('names tensors like transformers (o_proj without bias, lm_head only when untied)', () => {
    const names = paramSpecs(GOLDEN_CONFIG).map((p) => p.name);
    assert.ok(names.includes('model.layers.1.self_attn.k_proj.bias'));
    assert.ok(!names.includes('model.layers.0.self_attn.o_proj.bias'));
    assert.ok(names.includes('lm_head.weight'));
    assert.ok(!paramSpecs({ ...GOLDEN_CONFIG, tie_word_embeddings: true }).some((p) => p.name === 'lm_head.weight'));
    const k = paramSpecs(GOLDEN_CONFIG).find((p) => p.name === 'model.layers.0.self_attn.k_proj.weight')!;
    assert.deepEqual(k.shape, [4, 8]); // [num_key_value_heads * head_dim, hidden]
  });
});

describe('policy/weights: seeds', () => {
  it('seed 0 and seed 0x9e3779b9 give different streams (0 used to be remapped onto it)', () => {
    const a = new SeededRandom(0);
    const b = new SeededRandom(0x9e3779b9);
    const xs = [a.next(), a.next(), a.next()];
    assert.notDeepEqual(xs, [b.next(), b.next(), b.next()]);
    const again = new SeededRandom(0);
    assert.deepEqual([again.next(), again.next(), again.next()], xs);
  });
});
