// Block quantization of weight matrices for ONNX Runtime's MatMulNBits (com.microsoft): the form
// the sampling sessions read when rollouts run at `int8` or `int4` (docs/models.md, "Quantized rollouts").
// A matrix W [N, K] (out, in: the graphs' layout) becomes, per row and per block of `blockSize`
// columns, one float scale and `blockSize` unsigned codes of `bits` bits; the value is
// (code − 2^(bits−1)) · scale, symmetric around 0: MatMulNBits' zero point when none is given.
import { TurnwiseError } from '../../core/errors';
import { paramSpecs, type ModelConfig } from './config';

/**
 * What the sampling sessions read the base weights as: float32; int8 or int4 blocks (the CPU's);
 * float16 products (GPU providers'). `auto` resolves by rolloutPrecisionFor.
 */
export type RolloutPrecision = 'float32' | 'float16' | 'int8' | 'int4';
export const ROLLOUT_PRECISIONS: readonly (RolloutPrecision | 'auto')[] = ['auto', 'float32', 'float16', 'int8', 'int4'];

/** Bits per code of a quantized precision. */
export const PRECISION_BITS: Record<'int8' | 'int4', 4 | 8> = { int8: 8, int4: 4 };

/**
 * Columns per block (one scale each): 128 for both precisions. At the 0.5B shape on a 2-core AMD EPYC,
 * int4 decodes at 25 / 24 / 34 tokens/s at batch 1 and 97 / 97 / 107 at batch 8 with blocks of
 * 32 / 64 / 128, int8 at 24 / 25 and 71 / 98 with 32 / 128; the KL from the sampler to the float
 * policy on turnwise-tiny's own draws does not grow with the block measurably (int8 4e-5 / 9e-5 at
 * 32 / 128; int4 0.012 / 0.005 / 0.007 at 32 / 64 / 128, noise between draws of 1,024 tokens):
 * docs/experiments/2026-12-06-quantized-rollouts.md.
 */
export const QUANT_BLOCK_SIZE = 128;

/** A block-quantized matrix in MatMulNBits' layout. */
export interface BlockQuantized {
  bits: 4 | 8;
  blockSize: number;
  /** Rows (MatMulNBits' N: the product's output width). */
  rows: number;
  /** Columns (MatMulNBits' K: the product's input width). */
  cols: number;
  /** Codes [rows, blocks, blockSize · bits / 8]; with 4 bits, column 2j in the low nibble, 2j + 1 in the high one. */
  codes: Uint8Array;
  /** One scale per row and block, [rows · blocks]. */
  scales: Float32Array;
}

/**
 * Weights quantizeBlocks turns into codes per second, on one core of a 2-core AMD EPYC (all 494M
 * of the 0.5B shape in 11 s, at 8 bits as at 4): the memory plan's estimate of the time it takes.
 */
export const QUANTIZE_VALUES_PER_S = 45e6;

/** Blocks per row: the last one padded with zeros when blockSize does not divide cols. */
export function blocksPerRow(cols: number, blockSize: number): number {
  return Math.ceil(cols / blockSize);
}

/**
 * Quantizes W [rows, cols] (row-major float32): per block, scale = max |w| / (2^(bits−1) − 1), so
 * the largest weight is exact and codes stay within ±(2^(bits−1) − 1) of the zero point.
 */
export function quantizeBlocks(w: Float32Array, rows: number, cols: number, bits: 4 | 8, blockSize = QUANT_BLOCK_SIZE): BlockQuantized {
  if (w.length !== rows * cols) throw new TurnwiseError('internal', `quantizeBlocks: ${w.length} values for [${rows}, ${cols}]`);
  if (!(blockSize >= 16 && (blockSize & (blockSize - 1)) === 0))
    throw new TurnwiseError('internal', `quantizeBlocks: block size ${blockSize} is not a power of two ≥ 16`);
  const nb = blocksPerRow(cols, blockSize);
  const blob = (blockSize * bits) / 8;
  const codes = new Uint8Array(rows * nb * blob);
  const scales = new Float32Array(rows * nb);
  const zero = 1 << (bits - 1);
  const top = zero - 1;
  for (let r = 0; r < rows; r++) {
    const row = r * cols;
    for (let b = 0; b < nb; b++) {
      const from = b * blockSize;
      const to = Math.min(cols, from + blockSize);
      // max |w| over the block; a NaN makes it NaN for good (no comparison with NaN is true).
      let max = 0;
      for (let k = from; k < to; k++) {
        const a = Math.abs(w[row + k]);
        if (a > max) max = a;
        else if (!(a <= max)) max = NaN;
      }
      if (!Number.isFinite(max))
        throw new TurnwiseError('invalid-input', `a weight to quantize is not finite (row ${r}, columns ${from}–${to - 1})`, {
          hint: 'the model holds NaN or infinite weights: sample in float32 to see them, or load an earlier checkpoint',
        });
      const scale = max / top;
      scales[r * nb + b] = scale;
      const inv = scale > 0 ? 1 / scale : 0;
      const base = (r * nb + b) * blob;
      for (let k = 0; k < blockSize; k++) {
        const v = from + k < to ? w[row + from + k] : 0;
        const q = Math.max(-top, Math.min(top, Math.round(v * inv))) + zero;
        if (bits === 8) codes[base + k] = q;
        else codes[base + (k >> 1)] |= k & 1 ? q << 4 : q;
      }
    }
  }
  return { bits, blockSize, rows, cols, codes, scales };
}

/** The float matrix a quantized one stands for, [rows, cols] (what MatMulNBits multiplies by). */
export function dequantizeBlocks(q: BlockQuantized): Float32Array {
  const { bits, blockSize, rows, cols } = q;
  const nb = blocksPerRow(cols, blockSize);
  const blob = (blockSize * bits) / 8;
  const zero = 1 << (bits - 1);
  const out = new Float32Array(rows * cols);
  for (let r = 0; r < rows; r++)
    for (let k = 0; k < cols; k++) {
      const b = Math.floor(k / blockSize);
      const i = k - b * blockSize;
      const byte = q.codes[(r * nb + b) * blob + (bits === 8 ? i : i >> 1)];
      const code = bits === 8 ? byte : i & 1 ? byte >> 4 : byte & 15;
      out[r * cols + k] = (code - zero) * q.scales[r * nb + b];
    }
  return out;
}

/**
 * Weight bytes (float32) from which `auto` samples at QUANT_AUTO_PRECISION on the CPU. Below, a
 * decode step costs its runs' overhead more than reading the weights, as for packing.
 */
export const QUANT_AUTO_MIN_BYTES = 256 * 1024 * 1024;
/** What `auto` quantizes to on the CPU for a model of QUANT_AUTO_MIN_BYTES or more. */
export const QUANT_AUTO_PRECISION: RolloutPrecision = 'float32';

/**
 * The rollout precision a policy samples at. On the CPU: as set, `auto` by the measured rule
 * (QUANT_AUTO_PRECISION from QUANT_AUTO_MIN_BYTES of float32 weights), float16 refused with a
 * note (x86 CPUs multiply half precision no faster than float32). On WebGPU: as set (its
 * MatMulNBits runs the quantized sessions, which hold their codes on the device). On CUDA:
 * float16 as set, int8 and int4 refused with a note (not yet tested there). On a GPU `auto` is
 * float32: no precision is measured against it on a GPU yet.
 */
export function rolloutPrecisionFor(
  setting: RolloutPrecision | 'auto',
  provider: string,
  weightBytes: number,
): { precision: RolloutPrecision; note?: string } {
  if (provider !== 'cpu') {
    // WebGPU runs MatMulNBits (its session holds the codes on the device); CUDA's is not yet tested.
    if ((setting === 'int8' || setting === 'int4') && provider !== 'webgpu')
      return {
        precision: 'float32',
        note: `rollouts sample in float32 on ${provider}: ${setting} rollouts run on the CPU and WebGPU providers`,
      };
    return { precision: setting === 'auto' ? 'float32' : setting };
  }
  if (setting === 'float16')
    return { precision: 'float32', note: 'rollouts sample in float32 on the CPU: float16 rollouts run on GPU providers only' };
  if (setting !== 'auto') return { precision: setting };
  return { precision: weightBytes >= QUANT_AUTO_MIN_BYTES ? QUANT_AUTO_PRECISION : 'float32' };
}

/** The precisions other than float32 that `provider` samples at when asked (rolloutPrecisionFor's rule). */
export function precisionsOn(provider: string): Exclude<RolloutPrecision, 'float32'>[] {
  return ROLLOUT_PRECISIONS.filter(
    (p): p is Exclude<RolloutPrecision, 'float32'> =>
      p !== 'auto' && p !== 'float32' && rolloutPrecisionFor(p, provider, 0).precision === p,
  );
}

/**
 * One sampled token's estimate of KL(sampler ‖ trainer), from the sampler's log-prob `lq` of the
 * token it drew and the trainer's `lp` of the same token: (r − 1) − log r with r = p / q, whose
 * mean over the sampler's draws is the KL, and which is never negative (Schulman's k3).
 */
export function samplerKl(lq: number, lp: number): number {
  const d = lp - lq;
  return Math.expm1(d) - d;
}

/**
 * What a quantized decode session holds: every product's codes and scales (the head's included;
 * the embedding only where it is the head). The float tensors it reads besides (the embedding's
 * lookup, norms, biases) are fed from the policy's own arrays.
 */
export function quantizedSessionBytes(c: ModelConfig, bits: 4 | 8, blockSize = QUANT_BLOCK_SIZE): number {
  let bytes = 0;
  for (const p of paramSpecs(c)) {
    if (p.shape.length !== 2 || (p.name === 'model.embed_tokens.weight' && !c.tie_word_embeddings)) continue;
    const [rows, cols] = p.shape;
    bytes += rows * blocksPerRow(cols, blockSize) * ((blockSize * bits) / 8 + 4);
  }
  return bytes;
}

/** The float16 copies a half-precision sampling session reads: 2 bytes per value of every product's weight. */
export function halfSessionBytes(c: ModelConfig): number {
  let values = 0;
  for (const p of paramSpecs(c))
    if (p.shape.length === 2 && !(p.name === 'model.embed_tokens.weight' && !c.tie_word_embeddings)) values += p.shape[0] * p.shape[1];
  return 2 * values;
}

/**
 * The weight bytes one decode step reads at `bits`: the session's codes and scales, and the float32
 * norms and biases (the embedding's one row per token left out): what bounds a batch-1 step by the
 * memory bandwidth.
 */
export function quantizedBytesPerToken(c: ModelConfig, bits: 4 | 8, blockSize = QUANT_BLOCK_SIZE): number {
  return quantizedSessionBytes(c, bits, blockSize) + vectorBytes(c);
}

/** The same for float16 products: their half-precision copies and the float32 norms and biases. */
export function halfBytesPerToken(c: ModelConfig): number {
  return halfSessionBytes(c) + vectorBytes(c);
}

function vectorBytes(c: ModelConfig): number {
  return paramSpecs(c)
    .filter((p) => p.shape.length === 1)
    .reduce((n, p) => n + p.shape[0] * 4, 0);
}
