import * as assert from 'node:assert/strict';
import { referenceLogits } from '../../support/reference-forward';
import { initWeights } from '../../../src/policy/model/weights';
import { ropeInvFreq } from '../../../src/policy/model/config';
import { formulaWeights, GOLDEN_CONFIG, GOLDEN_LLAMA, maxAbsDiff, SMALL_CONFIG } from './helpers';

describe('policy/reference-forward: float64 Qwen2 forward', () => {
  it('matches an independent numpy implementation of HF Qwen2 (golden/qwen2_np.py)', () => {
    const w = formulaWeights(GOLDEN_CONFIG);
    const ids = [3, 7, 1, 10, 0, 5];
    const logits = referenceLogits(w, ids);
    const V = GOLDEN_CONFIG.vocab_size;
    // Printed by `python3 test/unit/policy/golden/qwen2_np.py`.
    const first = [
      -0.0046275536, 0.0698405884, -0.1327568762, 0.1913074325, -0.2435667513, 0.2878162916, -0.3226008891, 0.3467766427, -0.3595484765,
      0.3604964817, -0.3495894188,
    ];
    const last = [
      0.4306508241, -0.3942926817, 0.3449681286, -0.2842990898, 0.2142808248, -0.1372158605, 0.0556384721, 0.0277685789, -0.1102624531,
      0.1891303119, -0.2617785922,
    ];
    assert.ok(maxAbsDiff(logits.subarray(0, V), first) < 1e-9);
    assert.ok(maxAbsDiff(logits.subarray(5 * V, 6 * V), last) < 1e-9);
    assert.ok(Math.abs(logits.reduce((a, b) => a + b, 0) - -0.006601892963832734) < 1e-9);
  });

  it('matches the numpy HF Qwen2 at head dim 8 (rotate_half layout, inv_freq = θ^(−2i/d), GQA 2 → 1)', () => {
    // Head dim 2 (the config above) cannot tell rotate_half from interleaved RoPE, nor check the
    // inv_freq exponent: there is one frequency and one pair. Head dim 8 can.
    const c = { ...GOLDEN_CONFIG, hidden_size: 16, num_attention_heads: 2, num_key_value_heads: 1 };
    const w = formulaWeights(c);
    const logits = referenceLogits(w, [3, 7, 1, 10, 0, 5]);
    const V = c.vocab_size;
    // Printed by `python3 test/unit/policy/golden/qwen2_np.py 16 2 1`.
    const first = [
      0.5092497761, 0.6747216566, 0.7521692533, 0.7314888236, 0.6153782705, 0.4189856075, 0.1679318786, -0.1050300763, -0.3642899337,
      -0.5760244548, -0.7126108474,
    ];
    const last = [
      -2.0269791644, -3.163308677, -3.8869527981, -4.1035048386, -3.7847133909, -2.972168202, -1.7718736453, -0.3404205221, 1.1354439805,
      2.4631783519, 3.4695664499,
    ];
    assert.ok(maxAbsDiff(logits.subarray(0, V), first) < 1e-9);
    assert.ok(maxAbsDiff(logits.subarray(5 * V, 6 * V), last) < 1e-9);
    assert.ok(Math.abs(logits.reduce((a, b) => a + b, 0) - -14.15320259930974) < 1e-8);
  });

  it('matches an independent numpy Llama (golden/llama_np.py): head_dim apart from hidden/heads, Llama 3 rope scaling, untied', () => {
    // Printed by `python3 test/unit/policy/golden/llama_np.py`.
    assert.ok(
      maxAbsDiff(ropeInvFreq(GOLDEN_LLAMA), [1.0, 0.05793964153377701, 0.0025, 0.00025]) < 1e-15,
      'kept, blended, divided, divided',
    );
    const ids = [
      3, 7, 1, 10, 0, 5, 2, 9, 4, 8, 3, 7, 1, 10, 0, 5, 2, 9, 4, 8, 3, 7, 1, 10, 0, 5, 2, 9, 4, 8, 3, 7, 1, 10, 0, 5, 2, 9, 4, 8,
    ];
    const V = GOLDEN_LLAMA.vocab_size;
    const check = (bias: boolean, first: number[], last: number[], sum: number) => {
      const c = { ...GOLDEN_LLAMA, ...(bias ? { attention_bias: true, mlp_bias: true } : {}) };
      const logits = referenceLogits(formulaWeights(c), ids);
      assert.ok(maxAbsDiff(logits.subarray(0, V), first) < 1e-9, `${bias ? 'with' : 'without'} biases, first row`);
      assert.ok(maxAbsDiff(logits.subarray((ids.length - 1) * V), last) < 1e-9, `${bias ? 'with' : 'without'} biases, last row`);
      assert.ok(Math.abs(logits.reduce((a, b) => a + b, 0) - sum) < 1e-8);
    };
    check(
      false,
      [
        -0.3501676284, 0.3147652889, -0.2690117962, 0.2144116371, -0.1527605991, 0.0860858864, -0.0165802432, -0.0534706592, 0.1217631053,
        -0.1860514202, 0.2442212972,
      ],
      [
        0.1305631, -0.0837176082, 0.0341190673, 0.0166015821, -0.066776167, 0.1147548706, -0.1589597698, 0.1979372197, -0.2304054766,
        0.2552967316, -0.2717924833,
      ],
      -0.05771488080870801,
    );
    // `python3 test/unit/policy/golden/llama_np.py bias`: attention_bias (q, k, v and o) and mlp_bias.
    check(
      true,
      [
        -0.1467309261, 0.171369224, -0.1903719507, 0.203114239, -0.2091770789, 0.2083609785, -0.200692899, 0.1864249235, -0.1660263484,
        0.1401679039, -0.1096999527,
      ],
      [
        0.1816900874, -0.2444608795, 0.2991924818, -0.3440850268, 0.3776622448, -0.3988198274, 0.4068621231, -0.4015245593, 0.3829827708,
        -0.351846426, 0.3091394361,
      ],
      3.3410572726971433,
    );
  });

  it('is causal: a later token never changes earlier logits', () => {
    const w = initWeights(SMALL_CONFIG, 3, 0.2);
    const a = referenceLogits(w, [1, 2, 3, 4]);
    const b = referenceLogits(w, [1, 2, 3, 9]);
    const V = SMALL_CONFIG.vocab_size;
    assert.equal(maxAbsDiff(a.subarray(0, 3 * V), b.subarray(0, 3 * V)), 0);
    assert.ok(maxAbsDiff(a.subarray(3 * V), b.subarray(3 * V)) > 1e-3);
  });

  it('depends on relative positions only (RoPE): shifting every position id leaves logits unchanged', () => {
    const w = initWeights(SMALL_CONFIG, 4, 0.2);
    const a = referenceLogits(w, [5, 6, 7], { positions: [0, 1, 2] });
    const b = referenceLogits(w, [5, 6, 7], { positions: [10, 11, 12] });
    const c = referenceLogits(w, [5, 6, 7], { positions: [0, 2, 4] });
    assert.ok(maxAbsDiff(a, b) < 1e-9);
    assert.ok(maxAbsDiff(a, c) > 1e-4, 'positions must matter');
  });
});
