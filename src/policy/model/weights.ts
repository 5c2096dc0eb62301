// Model weights in memory: Hugging Face names and layouts (Linear weights [out, in]), float32.
// Seeded initialization and validation against a config.
import { TurnwiseError } from '../../core/errors';
import { paramSpecs, type ModelConfig } from './config';
import { numel, type TensorMap } from '../files/safetensors';

export interface PolicyWeights {
  config: ModelConfig;
  /** name → values, row-major in the shape of paramSpecs(config). */
  tensors: Map<string, Float32Array>;
}

/** A small seeded generator (splitmix32-style) so `--seed S` gives the same model everywhere. */
export class SeededRandom {
  private s: number;
  private spare: number | undefined;
  constructor(seed: number) {
    // splitmix adds the increment before mixing, so every 32-bit seed (0 included) has its own stream.
    this.s = seed >>> 0;
  }
  /** Uniform in [0, 1). */
  next(): number {
    this.s = (this.s + 0x9e3779b9) >>> 0;
    let z = this.s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    z = (z ^ (z >>> 16)) >>> 0;
    return z / 4294967296;
  }
  normal(): number {
    if (this.spare !== undefined) {
      const v = this.spare;
      this.spare = undefined;
      return v;
    }
    let u = 0;
    while (u === 0) u = this.next();
    const v = this.next();
    const r = Math.sqrt(-2 * Math.log(u));
    this.spare = r * Math.sin(2 * Math.PI * v);
    return r * Math.cos(2 * Math.PI * v);
  }
}

/**
 * Initializes like transformers' Qwen2PreTrainedModel: weights N(0, std), biases 0, norm
 * weights 1. `std` defaults to initializer_range 0.02.
 */
export function initWeights(config: ModelConfig, seed: number, std = 0.02): PolicyWeights {
  const rng = new SeededRandom(seed);
  const tensors = new Map<string, Float32Array>();
  for (const p of paramSpecs(config)) {
    const a = new Float32Array(numel(p.shape));
    if (p.name.endsWith('norm.weight')) a.fill(1);
    else if (!p.name.endsWith('.bias')) for (let i = 0; i < a.length; i++) a[i] = std * rng.normal();
    tensors.set(p.name, a);
  }
  return { config, tensors };
}

/** Checks that `tensors` holds exactly the model's tensors with the right shapes; lists every problem. */
export function weightsFromTensors(config: ModelConfig, tensors: TensorMap, source = 'model.safetensors'): PolicyWeights {
  const problems: string[] = [];
  const out = new Map<string, Float32Array>();
  const specs = paramSpecs(config);
  const expected = new Set(specs.map((s) => s.name));
  for (const s of specs) {
    const t = tensors.get(s.name);
    if (!t) {
      problems.push(`missing tensor ${s.name} [${s.shape}]`);
      continue;
    }
    if (t.dtype === 'I64') problems.push(`${s.name} has dtype I64, expected a float type (F32, F16 or BF16)`);
    else if (t.shape.length !== s.shape.length || t.shape.some((d, i) => d !== s.shape[i]))
      problems.push(`${s.name} has shape [${t.shape}], the config needs [${s.shape}]`);
    else out.set(s.name, t.data as Float32Array);
  }
  for (const name of tensors.keys()) {
    // transformers omits lm_head when tied, but some exporters write it anyway; a tied copy is harmless.
    if (!expected.has(name) && !(name === 'lm_head.weight' && config.tie_word_embeddings)) problems.push(`unexpected tensor ${name}`);
  }
  if (problems.length > 0) {
    const shown = problems.slice(0, 20);
    if (problems.length > 20) shown.push(`… and ${problems.length - 20} more`);
    throw new TurnwiseError('invalid-file', `${source} does not match config.json:\n  ${shown.join('\n  ')}`, {
      hint: 'the weights and config.json come from different models; use the config.json saved with these weights',
    });
  }
  return { config, tensors: out };
}

export function weightsToTensors(w: PolicyWeights): TensorMap {
  const m: TensorMap = new Map();
  for (const p of paramSpecs(w.config)) m.set(p.name, { dtype: 'F32', shape: p.shape, data: w.tensors.get(p.name)! });
  return m;
}
