// A plain float64 forward pass of the decoder families (Qwen2, Llama), written to mirror
// transformers' modeling_qwen2.py and modeling_llama.py line by line, reading the architecture
// from config.ts like the graph builders. Slow on purpose: tests check the ONNX graphs against it.
import { biasesOf, headDim, ropeInvFreq } from '../../src/policy/model/config';
import { loraScale, peftKey, type LoraAdapter } from '../../src/policy/files/lora';
import type { PolicyWeights } from '../../src/policy/model/weights';

/** y[T, out] = x[T, in] · Wᵀ (+ b), W stored [out, in] as in Hugging Face. */
function linear(x: Float64Array, t: number, inDim: number, w: Float32Array, outDim: number, b?: Float32Array): Float64Array {
  const y = new Float64Array(t * outDim);
  for (let r = 0; r < t; r++) {
    for (let o = 0; o < outDim; o++) {
      let s = b ? b[o] : 0;
      const wo = o * inDim;
      const xr = r * inDim;
      for (let i = 0; i < inDim; i++) s += x[xr + i] * w[wo + i];
      y[r * outDim + o] = s;
    }
  }
  return y;
}

function rmsNorm(x: Float64Array, t: number, h: number, w: Float32Array, eps: number): Float64Array {
  const y = new Float64Array(t * h);
  for (let r = 0; r < t; r++) {
    let ss = 0;
    for (let i = 0; i < h; i++) ss += x[r * h + i] ** 2;
    const inv = 1 / Math.sqrt(ss / h + eps);
    for (let i = 0; i < h; i++) y[r * h + i] = x[r * h + i] * inv * w[i];
  }
  return y;
}

/**
 * Rotary embedding in place on x[T, heads·d] (HF "rotate_half" convention: the first and second
 * halves of each head are the pair, cos/sin repeated over both halves).
 */
function rope(x: Float64Array, positions: readonly number[], heads: number, d: number, invFreq: readonly number[]): void {
  const half = d / 2;
  for (let r = 0; r < positions.length; r++) {
    for (let i = 0; i < half; i++) {
      const ang = positions[r] * invFreq[i];
      const c = Math.cos(ang);
      const s = Math.sin(ang);
      for (let hh = 0; hh < heads; hh++) {
        const base = r * heads * d + hh * d;
        const a = x[base + i];
        const b = x[base + i + half];
        x[base + i] = a * c - b * s;
        x[base + i + half] = b * c + a * s;
      }
    }
  }
}

export interface ReferenceOptions {
  /** A LoRA adapter on top of the weights: y += scale·(x·Aᵀ)·Bᵀ on every layer it targets. */
  adapter?: LoraAdapter;
  /**
   * A multiplier on each element of an adapter's input (LoRA dropout in training: 0 or 1/(1 − p)):
   * the adapter of `module` reads x[token, feature] · adapterInput(module, token, feature).
   */
  adapterInput?: (module: string, token: number, feature: number) => number;
  /** Position id of each token (default 0..T−1). */
  positions?: readonly number[];
  /** Final hidden state instead of logits (for debugging). */
  hiddenOnly?: boolean;
}

/** Logits [T, vocab] for one sequence of token ids, every position attending causally to itself and before. */
export function referenceLogits(w: PolicyWeights, ids: readonly number[], options: ReferenceOptions = {}): Float64Array {
  const c = w.config;
  const t = ids.length;
  const h = c.hidden_size;
  const d = headDim(c);
  const nh = c.num_attention_heads;
  const nkv = c.num_key_value_heads;
  const group = nh / nkv;
  const positions = options.positions ?? ids.map((_, i) => i);
  const W = (name: string) => {
    const a = w.tensors.get(name);
    if (!a) throw new Error(`reference forward: missing ${name}`);
    return a;
  };
  const bias = biasesOf(c);
  const B = (name: string, has: boolean) => (has ? W(name) : undefined);
  const ad = options.adapter;
  // A projection of `module` (its weight and bias), with the adapter's low-rank update if it has one.
  const project = (x: Float64Array, module: string, inDim: number, outDim: number, withBias: boolean) => {
    const y = linear(x, t, inDim, W(`${module}.weight`), outDim, B(`${module}.bias`, withBias));
    const A = ad?.tensors.get(peftKey(module, 'A'));
    const Bm = ad?.tensors.get(peftKey(module, 'B'));
    if (!ad || !A || !Bm) return y;
    const r = ad.config.r;
    const s = loraScale(ad.config);
    const drop = options.adapterInput;
    const xd = drop ? x.map((v, i) => v * drop(module, Math.floor(i / inDim), i % inDim)) : x;
    const xa = linear(xd, t, inDim, A, r);
    const d = linear(xa, t, r, Bm, outDim);
    for (let i = 0; i < y.length; i++) y[i] += s * d[i];
    return y;
  };
  const invFreq = ropeInvFreq(c);
  const m = c.intermediate_size;
  const emb = W('model.embed_tokens.weight');
  let x: Float64Array = new Float64Array(t * h);
  for (let r = 0; r < t; r++) for (let i = 0; i < h; i++) x[r * h + i] = emb[ids[r] * h + i];

  for (let l = 0; l < c.num_hidden_layers; l++) {
    const p = `model.layers.${l}.`;
    const xn = rmsNorm(x, t, h, W(`${p}input_layernorm.weight`), c.rms_norm_eps);
    const q = project(xn, `${p}self_attn.q_proj`, h, nh * d, bias.qkv);
    const k = project(xn, `${p}self_attn.k_proj`, h, nkv * d, bias.qkv);
    const v = project(xn, `${p}self_attn.v_proj`, h, nkv * d, bias.qkv);
    rope(q, positions, nh, d, invFreq);
    rope(k, positions, nkv, d, invFreq);
    const attn = new Float64Array(t * nh * d);
    const scale = 1 / Math.sqrt(d);
    const scores = new Float64Array(t);
    for (let hh = 0; hh < nh; hh++) {
      const kvh = Math.floor(hh / group);
      for (let i = 0; i < t; i++) {
        let max = -Infinity;
        for (let j = 0; j <= i; j++) {
          let s = 0;
          for (let e = 0; e < d; e++) s += q[i * nh * d + hh * d + e] * k[j * nkv * d + kvh * d + e];
          scores[j] = s * scale;
          if (scores[j] > max) max = scores[j];
        }
        let z = 0;
        for (let j = 0; j <= i; j++) {
          scores[j] = Math.exp(scores[j] - max);
          z += scores[j];
        }
        for (let e = 0; e < d; e++) {
          let s = 0;
          for (let j = 0; j <= i; j++) s += scores[j] * v[j * nkv * d + kvh * d + e];
          attn[i * nh * d + hh * d + e] = s / z;
        }
      }
    }
    const o = project(attn, `${p}self_attn.o_proj`, nh * d, h, bias.o);
    for (let i = 0; i < x.length; i++) x[i] += o[i];
    const xn2 = rmsNorm(x, t, h, W(`${p}post_attention_layernorm.weight`), c.rms_norm_eps);
    const gate = project(xn2, `${p}mlp.gate_proj`, h, m, bias.mlp);
    const up = project(xn2, `${p}mlp.up_proj`, h, m, bias.mlp);
    for (let i = 0; i < gate.length; i++) gate[i] = (gate[i] / (1 + Math.exp(-gate[i]))) * up[i];
    const down = project(gate, `${p}mlp.down_proj`, m, h, bias.mlp);
    for (let i = 0; i < x.length; i++) x[i] += down[i];
  }
  x = rmsNorm(x, t, h, W('model.norm.weight'), c.rms_norm_eps);
  if (options.hiddenOnly) return x;
  const head = c.tie_word_embeddings ? emb : W('lm_head.weight');
  return linear(x, t, h, head, c.vocab_size);
}

/** log-softmax of each row of logits [rows, vocab], in float64. */
export function logSoftmaxRows(logits: ArrayLike<number>, rows: number, vocab: number): Float64Array {
  const out = new Float64Array(rows * vocab);
  for (let r = 0; r < rows; r++) {
    let max = -Infinity;
    for (let v = 0; v < vocab; v++) max = Math.max(max, logits[r * vocab + v]);
    let z = 0;
    for (let v = 0; v < vocab; v++) z += Math.exp(logits[r * vocab + v] - max);
    const lz = max + Math.log(z);
    for (let v = 0; v < vocab; v++) out[r * vocab + v] = logits[r * vocab + v] - lz;
  }
  return out;
}
