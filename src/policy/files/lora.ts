// LoRA adapters in the PEFT layout: beside a frozen base, each targeted linear layer W gets
// A [r, in] and B [out, r], and computes x·Wᵀ + s·(x·Aᵀ)·Bᵀ with s = lora_alpha / r (rsLoRA:
// lora_alpha / √r). Saved as PEFT saves them (adapter_config.json, adapter_model.safetensors with
// keys base_model.model.model.layers.{i}.self_attn.q_proj.lora_A.weight ...), so PEFT, vLLM and
// llama.cpp's converter load them, and adapters written by PEFT load here. Merging folds s·B·A
// into W (policy merge).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError } from '../../core/errors';
import { readJsonFile, replaceDirAtomic, writeFileAtomic } from '../../core/fs';
import { paramSpecs, type ModelConfig } from '../model/config';
import { readSafetensorsFile, safetensorsParts, type TensorMap } from './safetensors';
import { stateFromTensors, stateToTensors, zeroState, type OptimizerState, type StateTensor } from './optimizer-state';
import { SeededRandom, type PolicyWeights } from '../model/weights';

/** The linear layers a LoRA adapter may target (PEFT's names for Qwen2 and Llama). */
export const LORA_MODULES = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] as const;
export type LoraModule = (typeof LORA_MODULES)[number];

export interface LoraConfig {
  r: number;
  lora_alpha: number;
  lora_dropout: number;
  target_modules: LoraModule[];
  use_rslora: boolean;
  /** What the adapter was trained on: the base folder's name, as PEFT records it. */
  base_model_name_or_path: string;
}

export const LORA_DEFAULTS = { r: 16, lora_alpha: 32, lora_dropout: 0, use_rslora: false } as const;

/** The scale of B·A in the forward pass. */
export function loraScale(c: Pick<LoraConfig, 'r' | 'lora_alpha' | 'use_rslora'>): number {
  return c.use_rslora ? c.lora_alpha / Math.sqrt(c.r) : c.lora_alpha / c.r;
}

/** Reads a LoRA block (a run config's `lora`, or adapter_config.json); every problem is listed. */
export function parseLoraConfig(raw: unknown, source: string, base = ''): LoraConfig {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw))
    throw new TurnwiseError('invalid-file', `${source} is not a JSON object`, {
      hint: 'write a LoRA block such as {"r": 16, "lora_alpha": 32, "target_modules": "all-linear"}',
    });
  const r = raw as Record<string, unknown>;
  const problems: string[] = [];
  if (r.peft_type !== undefined && r.peft_type !== 'LORA')
    problems.push(`peft_type is ${JSON.stringify(r.peft_type)}, only "LORA" is supported`);
  if (r.task_type !== undefined && r.task_type !== null && r.task_type !== 'CAUSAL_LM')
    problems.push(`task_type is ${JSON.stringify(r.task_type)}, only "CAUSAL_LM" is supported`);
  if (r.bias !== undefined && r.bias !== 'none') problems.push(`bias is ${JSON.stringify(r.bias)}, only "none" is supported`);
  if (r.fan_in_fan_out === true) problems.push('fan_in_fan_out is true: only the Linear layout (false) is supported');
  for (const f of ['modules_to_save', 'layers_to_transform', 'rank_pattern', 'alpha_pattern'] as const) {
    const v = r[f];
    if (
      v !== undefined &&
      v !== null &&
      !(Array.isArray(v) && v.length === 0) &&
      !(typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length === 0)
    )
      problems.push(`${f} is set (${JSON.stringify(v).slice(0, 60)}): not supported`);
  }
  if (r.use_dora === true) problems.push('use_dora is true: DoRA is not supported');
  const int = (f: string, d: number) => {
    const v = r[f] ?? d;
    if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0) problems.push(`${f} must be a positive integer, got ${JSON.stringify(v)}`);
    return v as number;
  };
  const rank = int('r', LORA_DEFAULTS.r);
  const alpha = r.lora_alpha ?? LORA_DEFAULTS.lora_alpha;
  if (typeof alpha !== 'number' || !(alpha > 0)) problems.push(`lora_alpha must be a positive number, got ${JSON.stringify(alpha)}`);
  const dropout = r.lora_dropout ?? LORA_DEFAULTS.lora_dropout;
  if (typeof dropout !== 'number' || !(dropout >= 0 && dropout < 1))
    problems.push(`lora_dropout must be in [0, 1), got ${JSON.stringify(dropout)}`);
  const rs = r.use_rslora ?? LORA_DEFAULTS.use_rslora;
  if (typeof rs !== 'boolean') problems.push(`use_rslora must be true or false, got ${JSON.stringify(rs)}`);
  let targets: LoraModule[] = [];
  const t = r.target_modules ?? 'all-linear';
  if (t === 'all-linear') targets = [...LORA_MODULES];
  else if (typeof t === 'string') {
    const chosen = regexTargets(t);
    if (typeof chosen === 'string') problems.push(chosen);
    else targets = chosen;
  } else if (Array.isArray(t) && t.length > 0 && t.every((x) => typeof x === 'string')) {
    const bad = t.filter((x) => !(LORA_MODULES as readonly string[]).includes(x));
    if (bad.length)
      problems.push(
        `target_modules names ${bad.map((x) => JSON.stringify(x)).join(', ')}; the modules are ${LORA_MODULES.join(', ')} (or "all-linear")`,
      );
    targets = LORA_MODULES.filter((m) => t.includes(m));
  } else
    problems.push(
      `target_modules must be "all-linear", a regular expression or a list of ${LORA_MODULES.join(', ')}, got ${JSON.stringify(t)}`,
    );
  if (problems.length)
    throw new TurnwiseError('invalid-file', `${source} is not a usable LoRA configuration:\n  ${problems.join('\n  ')}`, {
      hint: 'fix the fields listed above (PEFT field names)',
    });
  const baseName = typeof r.base_model_name_or_path === 'string' ? r.base_model_name_or_path : base;
  return {
    r: rank,
    lora_alpha: alpha as number,
    lora_dropout: dropout as number,
    target_modules: targets,
    use_rslora: rs as boolean,
    base_model_name_or_path: baseName,
  };
}

/** Layer indices a target_modules pattern is tried on: enough for every model Turnwise loads. */
const PATTERN_LAYERS = 256;

/**
 * The modules a target_modules regex selects, by PEFT's rule for a string: the pattern must match
 * a module's whole name (`re.fullmatch`, e.g. `model.layers.3.self_attn.q_proj`). A pattern that
 * picks some layers of a module and not others is refused (an adapter here covers every layer of
 * the modules it targets); so is one that picks no module. A string of problems when refused.
 */
export function regexTargets(pattern: string): LoraModule[] | string {
  let re: RegExp;
  try {
    re = new RegExp(`^(?:${pattern})$`, 'u');
  } catch (e) {
    return `target_modules ${JSON.stringify(pattern)} is not a regular expression Turnwise can read: ${(e as Error).message}`;
  }
  const chosen: LoraModule[] = [];
  for (const m of LORA_MODULES) {
    const parent = ['q_proj', 'k_proj', 'v_proj', 'o_proj'].includes(m) ? 'self_attn' : 'mlp';
    const hits = Array.from({ length: PATTERN_LAYERS }, (_, i) => re.test(`model.layers.${i}.${parent}.${m}`));
    if (hits.every(Boolean)) chosen.push(m);
    else if (hits.some(Boolean))
      return `target_modules ${JSON.stringify(pattern)} selects ${m} in some layers only (layer ${hits.indexOf(true)} but not ${hits.indexOf(false)}): an adapter here covers every layer of the modules it targets`;
  }
  if (chosen.length === 0)
    return `target_modules ${JSON.stringify(pattern)} matches none of the modules (model.layers.N.self_attn.{q,k,v,o}_proj, model.layers.N.mlp.{gate,up,down}_proj)`;
  return chosen;
}

/**
 * LoRA dropout, as PEFT applies it: in training each adapted layer computes s·B·A·dropout(x), the
 * base path x·Wᵀ untouched, and inference has no dropout. The mask is not fed: the training graph
 * hashes each element's index with a per-step seed (int64 Add/Mul/Mod, so every execution
 * provider computes the same bits), and this file computes the same hash for tests. Element
 * `index` = (row·T + token)·in + feature of target `target` (its place in loraTargets) is kept,
 * scaled by 1/(1 − p), when its hash is at least round(p·P): hashes are a permutation of 0..P−1
 * (x ↦ x³ + c permutes the integers mod a prime P with 3 ∤ P − 1), so the kept fraction is 1 − p.
 */
export const DROPOUT_PRIME = 67108859; // 2^26 − 5: products of two values below it stay exact in a double
/** Per-round constants of the dropout hash (each below DROPOUT_PRIME). */
export const DROPOUT_ROUNDS = [40503021, 9176501, 61233787] as const;
/** The offset that tells one target's mask from another's. */
export const dropoutTargetOffset = (target: number): number => (target * 1000003) % DROPOUT_PRIME;

/** The dropout hash of one element (see DROPOUT_PRIME), in 0..P−1. */
export function loraDropoutHash(stepSeed: number, target: number, index: number): number {
  const P = DROPOUT_PRIME;
  let x = (index + stepSeed + dropoutTargetOffset(target)) % P;
  for (const c of DROPOUT_ROUNDS) x = (((x * x) % P) * x + c) % P;
  return x;
}

/** Hashes at or above this are kept at dropout `p`. */
export const dropoutThreshold = (p: number): number => Math.round(p * DROPOUT_PRIME);

/** The multiplier of one element of an adapter's input at dropout p: 0, or 1/(1 − p) when kept. */
export function loraDropoutMultiplier(p: number, stepSeed: number, target: number, index: number): number {
  if (p === 0) return 1;
  return loraDropoutHash(stepSeed, target, index) >= dropoutThreshold(p) ? 1 / (1 - p) : 0;
}

/**
 * The hash seed of optimizer step `step` (updates done before it) of a run seeded `seed`: a step's
 * masks depend on nothing else, so a resumed run drops what the uninterrupted one would have.
 */
export function loraDropoutStepSeed(seed: number, step: number): number {
  const r = new SeededRandom((seed ^ Math.imul(step + 1, 0x9e3779b1)) >>> 0);
  r.next();
  return Math.floor(r.next() * DROPOUT_PRIME);
}

/** One adapted linear layer: its base weight name and the PEFT names and shapes of A and B. */
export interface LoraTarget {
  /** The base layer, e.g. `model.layers.0.self_attn.q_proj` (its weight is `<module>.weight`). */
  module: string;
  inDim: number;
  outDim: number;
  a: string;
  b: string;
}

/** PEFT's key of an adapter tensor of a base module. */
export function peftKey(module: string, which: 'A' | 'B'): string {
  return `base_model.model.${module}.lora_${which}.weight`;
}

/** Every adapted layer of `config` under `lora`, in paramSpecs order. */
export function loraTargets(config: ModelConfig, lora: Pick<LoraConfig, 'target_modules'>): LoraTarget[] {
  const wanted = new Set(lora.target_modules);
  const out: LoraTarget[] = [];
  for (const p of paramSpecs(config)) {
    const m = /^(model\.layers\.\d+\.(?:self_attn|mlp)\.([a-z_]+))\.weight$/.exec(p.name);
    if (!m || !wanted.has(m[2] as LoraModule)) continue;
    out.push({ module: m[1], outDim: p.shape[0], inDim: p.shape[1], a: peftKey(m[1], 'A'), b: peftKey(m[1], 'B') });
  }
  return out;
}

/** An adapter in memory: its configuration and A [r, in] / B [out, r] by PEFT key (PEFT's layout). */
export interface LoraAdapter {
  config: LoraConfig;
  tensors: Map<string, Float32Array>;
}

/** A fresh adapter as PEFT initializes one: A ~ U(−1/√in, 1/√in) (kaiming-uniform, a = √5), B = 0, so it starts as the base. */
export function initAdapter(model: ModelConfig, lora: LoraConfig, seed: number): LoraAdapter {
  const rng = new SeededRandom(seed);
  const tensors = new Map<string, Float32Array>();
  for (const t of loraTargets(model, lora)) {
    const bound = 1 / Math.sqrt(t.inDim);
    const a = new Float32Array(lora.r * t.inDim);
    for (let i = 0; i < a.length; i++) a[i] = (2 * rng.next() - 1) * bound;
    tensors.set(t.a, a);
    tensors.set(t.b, new Float32Array(t.outDim * lora.r));
  }
  return { config: lora, tensors };
}

/** The adapter_config.json Turnwise writes (PEFT's fields; PEFT ignores none of them). */
export function adapterConfigJson(c: LoraConfig): Record<string, unknown> {
  return {
    peft_type: 'LORA',
    task_type: 'CAUSAL_LM',
    base_model_name_or_path: c.base_model_name_or_path,
    r: c.r,
    lora_alpha: c.lora_alpha,
    lora_dropout: c.lora_dropout,
    target_modules: [...c.target_modules],
    bias: 'none',
    fan_in_fan_out: false,
    use_rslora: c.use_rslora,
    use_dora: false,
    inference_mode: true,
    modules_to_save: null,
    init_lora_weights: true,
  };
}

export const ADAPTER_FILES = ['adapter_config.json', 'adapter_model.safetensors', 'optimizer.safetensors'] as const;

/** The adapter's tensors as the optimizer state names them (PEFT keys, their shapes). */
function adapterStateTensors(a: LoraAdapter, model?: ModelConfig): StateTensor[] {
  if (model)
    return loraTargets(model, a.config).flatMap((t) => [
      { name: t.a, shape: [a.config.r, t.inDim] },
      { name: t.b, shape: [t.outDim, a.config.r] },
    ]);
  return [...a.tensors].map(([name, t]) => ({ name, shape: [t.length] }));
}

/** Zero AdamW moments for an adapter (PEFT keys and layout). */
export function zeroAdapterOptimizer(a: LoraAdapter): OptimizerState {
  return zeroState(adapterStateTensors(a));
}

/**
 * Writes an adapter folder in the PEFT layout, complete or not at all; with `optimizer`, its AdamW
 * state goes beside it in optimizer.safetensors (step, exp_avg.<key>, exp_avg_sq.<key>), which
 * PEFT ignores and a resume reads.
 */
export function saveAdapter(dir: string, a: LoraAdapter, model: ModelConfig, optimizer?: OptimizerState): void {
  const m: TensorMap = new Map();
  for (const t of loraTargets(model, a.config)) {
    m.set(t.a, { dtype: 'F32', shape: [a.config.r, t.inDim], data: a.tensors.get(t.a)! });
    m.set(t.b, { dtype: 'F32', shape: [t.outDim, a.config.r], data: a.tensors.get(t.b)! });
  }
  replaceDirAtomic(path.resolve(dir), (tmp) => {
    writeFileAtomic(path.join(tmp, 'adapter_model.safetensors'), safetensorsParts(m, { format: 'pt' }));
    writeFileAtomic(path.join(tmp, 'adapter_config.json'), JSON.stringify(adapterConfigJson(a.config), null, 2) + '\n');
    if (optimizer)
      writeFileAtomic(
        path.join(tmp, 'optimizer.safetensors'),
        safetensorsParts(stateToTensors(adapterStateTensors(a, model), optimizer), { format: 'turnwise-adamw' }),
      );
  });
}

/** The AdamW state saved beside an adapter (saveAdapter), or undefined when there is none. */
export function loadAdapterOptimizer(dir: string, a: LoraAdapter, model: ModelConfig): OptimizerState | undefined {
  const file = path.join(path.resolve(dir), 'optimizer.safetensors');
  if (!fs.existsSync(file)) return undefined;
  return stateFromTensors(adapterStateTensors(a, model), readSafetensorsFile(file).tensors, {
    source: file,
    matches: 'the adapter',
    hint: 'delete optimizer.safetensors to restart the optimizer from zero, or use the matching adapter',
  });
}

/** The hint for an adapter_config.json that is not JSON. */
const ADAPTER_DAMAGED = 'the file is damaged; use another copy of the adapter';

/**
 * Loads an adapter folder for `model` (PEFT's or Turnwise's): every target's A and B present with
 * the shapes the base needs, nothing else; keys PEFT writes with an adapter name (`.lora_A.default.weight`) are read too.
 */
export function loadAdapter(dir: string, model: ModelConfig): LoraAdapter {
  const d = path.resolve(dir);
  const cfgFile = path.join(d, 'adapter_config.json');
  const wFile = path.join(d, 'adapter_model.safetensors');
  for (const f of [cfgFile, wFile]) {
    if (!fs.existsSync(f))
      throw new TurnwiseError('not-found', `${d} is not a LoRA adapter folder: ${path.basename(f)} is missing`, {
        hint: "give a folder with adapter_config.json and adapter_model.safetensors (PEFT's layout, or a LoRA run's checkpoints/N)",
      });
  }
  const config = parseLoraConfig(
    readJsonFile(cfgFile, { unreadable: "check the file's permissions, or use another copy of the adapter", invalid: ADAPTER_DAMAGED }),
    cfgFile,
  );
  const stored = readSafetensorsFile(wFile).tensors;
  // PEFT writes a named adapter's keys as `.lora_A.<name>.weight`: read them as `.lora_A.weight`.
  const byKey = new Map<string, { shape: number[]; data: Float32Array }>();
  const problems: string[] = [];
  for (const [k, t] of stored) {
    if (t.dtype === 'I64') problems.push(`${k} has dtype I64`);
    else byKey.set(k.replace(/\.lora_([AB])\.[^.]+\.weight$/, '.lora_$1.weight'), { shape: t.shape, data: t.data as Float32Array });
  }
  const wanted = new Set<string>();
  for (const t of loraTargets(model, config)) {
    for (const [key, shape] of [
      [t.a, [config.r, t.inDim]],
      [t.b, [t.outDim, config.r]],
    ] as const) {
      wanted.add(key);
      const s = byKey.get(key);
      if (!s) problems.push(`missing ${key} [${shape}]`);
      else if (s.shape.join(',') !== shape.join(',')) problems.push(`${key} has shape [${s.shape}], the base model needs [${shape}]`);
    }
  }
  for (const k of byKey.keys()) if (!wanted.has(k)) problems.push(`unexpected tensor ${k}`);
  if (problems.length) {
    throw new TurnwiseError('invalid-file', `${wFile} does not fit the base model:\n  ${problems.slice(0, 20).join('\n  ')}`, {
      hint: 'the adapter was trained on another base model (its adapter_config.json names it)',
    });
  }
  return { config, tensors: new Map([...byKey].map(([k, t]) => [k, t.data])) };
}

/** The base weights with s·B·A folded into every adapted layer (a new map; the base is not changed). */
export function mergeAdapter(base: PolicyWeights, a: LoraAdapter): PolicyWeights {
  const s = loraScale(a.config);
  const r = a.config.r;
  const tensors = new Map(base.tensors);
  for (const t of loraTargets(base.config, a.config)) {
    const w = Float32Array.from(base.tensors.get(`${t.module}.weight`)!);
    const A = a.tensors.get(t.a)!;
    const B = a.tensors.get(t.b)!;
    for (let o = 0; o < t.outDim; o++) {
      for (let k = 0; k < r; k++) {
        const bk = s * B[o * r + k];
        if (bk === 0) continue;
        const row = o * t.inDim;
        const ak = k * t.inDim;
        for (let i = 0; i < t.inDim; i++) w[row + i] += bk * A[ak + i];
      }
    }
    tensors.set(`${t.module}.weight`, w);
  }
  return { config: base.config, tensors };
}

/** Number of trainable values of an adapter. */
export function adapterParameterCount(model: ModelConfig, lora: Pick<LoraConfig, 'r' | 'target_modules'>): number {
  return loraTargets(model, lora).reduce((n, t) => n + lora.r * (t.inDim + t.outDim), 0);
}

/** What `turnwise policy inspect` reports of an adapter folder. */
export interface AdapterInspection {
  dir: string;
  kind: 'lora-adapter';
  r: number;
  loraAlpha: number;
  /** The factor B·A is scaled by: alpha / r, or alpha / sqrt(r) with rsLoRA. */
  scale: number;
  useRslora: boolean;
  loraDropout: number;
  targetModules: string[];
  /** The base as adapter_config.json names it, and the folder it resolves to here when that is a model folder. */
  base: { named: string; found?: string };
}

/** Describes an adapter folder (adapter_config.json) without loading its tensors. */
export function inspectAdapterFolder(dir: string): AdapterInspection {
  const d = path.resolve(dir);
  const file = path.join(d, 'adapter_config.json');
  const c = parseLoraConfig(
    readJsonFile(file, { unreadable: 'an adapter folder holds the adapter_config.json PEFT writes', invalid: ADAPTER_DAMAGED }),
    file,
  );
  const named = c.base_model_name_or_path;
  const resolved = named ? path.resolve(d, named) : undefined;
  const found = resolved && fs.existsSync(path.join(resolved, 'config.json')) ? resolved : undefined;
  return {
    dir: d,
    kind: 'lora-adapter',
    r: c.r,
    loraAlpha: c.lora_alpha,
    scale: loraScale(c),
    useRslora: c.use_rslora,
    loraDropout: c.lora_dropout,
    targetModules: [...c.target_modules],
    base: { named, ...(found ? { found } : {}) },
  };
}
