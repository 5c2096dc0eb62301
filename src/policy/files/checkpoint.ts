// Checkpoint directories in Hugging Face layout: model.safetensors, optimizer.safetensors,
// config.json, tokenizer.json (+ tokenizer_config.json). A directory is written complete
// under a temporary name and renamed into place, so a crash never leaves a half checkpoint
// under the real name, and loading validates every file before anything is used.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError } from '../../core/errors';
import { interruptedSwapOf, readJsonFile, replaceDirAtomic, SWAP_MARKER, writeFileAtomic } from '../../core/fs';
import { configToJson, paramSpecs, parseModelConfig, type ModelConfig } from '../model/config';
import { readSafetensorsFile, safetensorsParts, type TensorMap } from './safetensors';
import { stateFromTensors, stateToTensors, zeroState, type OptimizerState } from './optimizer-state';
import { assertTokenizerFits, generationEosIds, readModelTensors } from './hf';
import { loadAdapter, loadAdapterOptimizer, type LoraAdapter } from './lora';
import { loadTokenizer, type PolicyTokenizer } from './tokenizer';
import { weightsFromTensors, weightsToTensors, type PolicyWeights } from '../model/weights';

export interface Checkpoint {
  weights: PolicyWeights;
  optimizer?: OptimizerState;
  tokenizerJson: Record<string, unknown>;
  tokenizerConfig?: Record<string, unknown>;
}

export interface LoadedCheckpoint extends Checkpoint {
  tokenizer: PolicyTokenizer;
  dir: string;
  /**
   * When the folder is a LoRA adapter (a LoRA run's checkpoint, or PEFT's output): the adapter,
   * its AdamW state if saved, and where it is; `dir` and the weights are then its base's.
   */
  adapter?: LoraAdapter;
  adapterOptimizer?: OptimizerState;
  adapterDir?: string;
}

/**
 * The base model folder an adapter folder names (adapter_config.json's base_model_name_or_path,
 * relative to the adapter folder when not absolute); undefined for a folder that is not an adapter.
 */
export function adapterBaseDir(dir: string): string | undefined {
  const cfg = path.join(dir, 'adapter_config.json');
  if (!fs.existsSync(cfg) || fs.existsSync(path.join(dir, 'config.json'))) return undefined;
  const raw = readJsonFile(cfg, CHECKPOINT_JSON) as { base_model_name_or_path?: unknown };
  const base = raw && typeof raw === 'object' ? raw.base_model_name_or_path : undefined;
  if (typeof base !== 'string' || base === '') {
    throw new TurnwiseError('invalid-file', `${cfg} names no base model (base_model_name_or_path)`, {
      hint: 'give the base with --model BASE and the adapter with --adapter DIR',
    });
  }
  const resolved = path.resolve(dir, base);
  if (!fs.existsSync(path.join(resolved, 'config.json'))) {
    throw new TurnwiseError('not-found', `the adapter in ${dir} was trained on ${JSON.stringify(base)}, which is not a model folder here`, {
      hint: 'give the base with --model BASE and the adapter with --adapter DIR',
    });
  }
  return resolved;
}

export function zeroOptimizerState(config: ModelConfig): OptimizerState {
  return zeroState(paramSpecs(config));
}

export function optimizerToTensors(config: ModelConfig, s: OptimizerState): TensorMap {
  return stateToTensors(paramSpecs(config), s);
}

export function optimizerFromTensors(config: ModelConfig, t: TensorMap, source = 'optimizer.safetensors'): OptimizerState {
  return stateFromTensors(paramSpecs(config), t, {
    source,
    matches: 'the model',
    hint: 'delete optimizer.safetensors to restart the optimizer from zero, or use the matching checkpoint',
  });
}

/** Files a checkpoint directory may hold; anything else in one is the user's. */
export const CHECKPOINT_FILES: readonly string[] = [
  'model.safetensors',
  'optimizer.safetensors',
  'config.json',
  'tokenizer.json',
  'tokenizer_config.json',
  SWAP_MARKER,
];

/**
 * Writes a complete checkpoint to `dir`, replacing any checkpoint there only once the new one
 * is complete (replaceDirAtomic: a crash mid-swap leaves the previous one, recognisably).
 */
export function saveCheckpoint(dir: string, ck: Checkpoint): void {
  const target = path.resolve(dir);
  try {
    replaceDirAtomic(target, (tmp) => {
      const c = ck.weights.config;
      writeFileAtomic(path.join(tmp, 'model.safetensors'), safetensorsParts(weightsToTensors(ck.weights), { format: 'pt' }));
      if (ck.optimizer) {
        writeFileAtomic(
          path.join(tmp, 'optimizer.safetensors'),
          safetensorsParts(optimizerToTensors(c, ck.optimizer), { format: 'turnwise-adamw' }),
        );
      }
      writeFileAtomic(path.join(tmp, 'config.json'), JSON.stringify(configToJson(c), null, 2) + '\n');
      writeFileAtomic(path.join(tmp, 'tokenizer.json'), JSON.stringify(ck.tokenizerJson) + '\n');
      if (ck.tokenizerConfig) writeFileAtomic(path.join(tmp, 'tokenizer_config.json'), JSON.stringify(ck.tokenizerConfig, null, 2) + '\n');
    });
  } catch (e) {
    throw new TurnwiseError(
      e instanceof TurnwiseError && e.code === 'invalid-input' ? 'invalid-input' : 'internal',
      `could not write checkpoint ${target}: ${(e as Error).message}`,
      {
        hint: 'check free disk space and permissions; any previous checkpoint there is unchanged',
        cause: e,
      },
    );
  }
}

/** What to do about a checkpoint's JSON file that cannot be read or parsed. */
const CHECKPOINT_JSON = {
  unreadable:
    'a checkpoint directory holds config.json, model.safetensors and tokenizer.json; create one with `turnwise policy init --out DIR`',
  invalid: 'the file is damaged; use an earlier checkpoint',
};

const CHECKPOINT_INCOMPLETE = 'the checkpoint is incomplete; use an earlier one or create one with `turnwise policy init --out DIR`';

/** Loads and validates a checkpoint directory; throws a TurnwiseError naming the bad file otherwise. */
export function loadCheckpoint(dir: string, options: { optimizer?: boolean } = {}): LoadedCheckpoint {
  // Reading never renames: after a save interrupted mid-swap, the previous checkpoint is read
  // where the swap left it, and the next save puts it back.
  const d = interruptedSwapOf(dir) ?? path.resolve(dir);
  const base = fs.existsSync(d) && fs.statSync(d).isDirectory() ? adapterBaseDir(d) : undefined;
  if (base) {
    const ck = loadCheckpoint(base, { optimizer: false });
    const adapter = loadAdapter(d, ck.weights.config);
    const adapterOptimizer = options.optimizer !== false ? loadAdapterOptimizer(d, adapter, ck.weights.config) : undefined;
    return { ...ck, adapter, ...(adapterOptimizer ? { adapterOptimizer } : {}), adapterDir: path.resolve(dir) };
  }
  if (!fs.existsSync(d)) {
    throw new TurnwiseError('not-found', `model directory ${d} does not exist`, {
      hint: 'create one with `turnwise policy init --out DIR`',
    });
  }
  if (!fs.statSync(d).isDirectory()) {
    throw new TurnwiseError('invalid-input', `${d} is a file, not a model directory`, {
      hint: 'give the directory that holds config.json, model.safetensors and tokenizer.json',
    });
  }
  const configFile = path.join(d, 'config.json');
  if (!fs.existsSync(configFile) && !fs.existsSync(path.join(d, 'model.safetensors'))) {
    throw new TurnwiseError('invalid-input', `${d} is not a model folder: it holds neither config.json nor model.safetensors`, {
      hint: "give a folder that holds config.json, model.safetensors and tokenizer.json: a Turnwise checkpoint (a run's checkpoints/N, `turnwise warmstart --out`) or a Hugging Face model folder",
    });
  }
  const config = parseModelConfig(readJsonFile(configFile, CHECKPOINT_JSON), configFile);
  const { tensors, files } = readModelTensors(d);
  const weights = weightsFromTensors(config, tensors, files.length === 1 ? files[0] : `the ${files.length} shards of ${d}`);
  // generation_config.json's end-of-sequence ids (Llama 3 Instruct lists several) stop generation too.
  const genEos = generationEosIds(d);
  if (genEos?.length) {
    const outside = genEos.filter((t) => t >= config.vocab_size);
    if (outside.length)
      throw new TurnwiseError(
        'invalid-file',
        `${path.join(d, 'generation_config.json')}: eos_token_id ${outside.join(', ')} is outside the vocabulary (vocab_size ${config.vocab_size})`,
        { hint: 'the file belongs to another model; remove it or copy the matching one' },
      );
    const all = [...new Set([...(config.eos_token_ids ?? (config.eos_token_id !== undefined ? [config.eos_token_id] : [])), ...genEos])];
    weights.config.eos_token_id ??= all[0];
    if (all.length > 1) weights.config.eos_token_ids = all;
  }
  const tokFile = path.join(d, 'tokenizer.json');
  const tokenizerJson = readJsonFile(tokFile, CHECKPOINT_JSON) as Record<string, unknown>;
  const tcFile = path.join(d, 'tokenizer_config.json');
  const tokenizerConfig = fs.existsSync(tcFile) ? (readJsonFile(tcFile, CHECKPOINT_JSON) as Record<string, unknown>) : undefined;
  const tokenizer = loadTokenizer(tokenizerJson, tokenizerConfig, tokFile);
  assertTokenizerFits(tokFile, tokenizer.size, config.vocab_size);
  let optimizer: OptimizerState | undefined;
  const optFile = path.join(d, 'optimizer.safetensors');
  if (options.optimizer !== false && fs.existsSync(optFile)) {
    optimizer = optimizerFromTensors(config, readSafetensorsFile(optFile, CHECKPOINT_INCOMPLETE).tensors, optFile);
  }
  return { dir: path.resolve(dir), weights, optimizer, tokenizerJson, tokenizerConfig, tokenizer };
}

/**
 * Copies a checkpoint to `dest` through load + save, so a checkpoint that another process
 * rewrites meanwhile (the embedded one is, by the warm start) is read whole or not at all.
 */
export async function snapshotCheckpoint(src: string, dest: string, o: { optimizer?: boolean } = {}): Promise<string> {
  let last: unknown;
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      const ck = loadCheckpoint(src, { optimizer: o.optimizer ?? false });
      saveCheckpoint(dest, o.optimizer ? ck : { ...ck, optimizer: undefined });
      // Files beside the weights travel too (warmstart.json names the tasks the warm start was
      // shown, which a run must never hold out).
      for (const f of fs.readdirSync(src)) {
        const file = path.join(src, f);
        if (!CHECKPOINT_FILES.includes(f) && fs.statSync(file).isFile()) fs.copyFileSync(file, path.join(dest, f));
      }
      return dest;
    } catch (e) {
      last = e;
      await new Promise((r) => setTimeout(r, 1000 * (attempt + 1)));
    }
  }
  throw last instanceof Error ? last : new TurnwiseError('invalid-file', `cannot copy the checkpoint ${src}`);
}
