// The policy layer: decoder transformers (Qwen2, Llama) held as ONNX graphs (inference and
// training), Hugging Face model folders, LoRA adapters in the PEFT layout, and the byte-level
// default model turnwise-tiny. Imports core, onnx.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError } from '../core/errors';
import { outputPathProblem } from '../core/fs';
import type { SessionSettings } from '../onnx';
import { CHECKPOINT_FILES, loadCheckpoint, saveCheckpoint, zeroOptimizerState } from './files/checkpoint';
import { parameterCount, presetConfig, type ConfigDType, type ModelConfig } from './model/config';
import { writeModelFolder } from './files/hf';
import { loadAdapter, loraTargets, mergeAdapter } from './files/lora';
import { Policy } from './inference/policy';
import { byteLevelTokenizerConfig, byteLevelTokenizerJson } from './files/tokenizer';
import { initWeights } from './model/weights';

export * from './files/checkpoint';
export * from './model/config';
export * from './inference/policy';
export * from './inference/sampling';
export { Sequence } from './inference/sequences';
export { packsDecodeWeights } from './model/memory';
export * from './files/safetensors';
export * from './files/tokenizer';
export * from './trainable';
export * from './worker';
export * from './model/weights';
export * from './files/lora';
export { buildStepGraph, graphParamSpecs, toGraphLayout, fromGraphLayout } from './model/graphs';

export interface InitResult {
  dir: string;
  size: string;
  seed: number;
  parameters: number;
  config: ModelConfig;
}

/** Writes a freshly initialized model (weights, zero optimizer state, config, tokenizer) to `dir`. */
export function initPolicyDir(dir: string, options: { size?: string; seed?: number; force?: boolean } = {}): InitResult {
  const size = options.size ?? 'tiny';
  const seed = options.seed ?? 0;
  const config = presetConfig(size);
  const target = path.resolve(dir);
  if (fs.existsSync(target) && !fs.statSync(target).isDirectory()) {
    throw new TurnwiseError('invalid-input', `${target} exists and is a file, not a directory`, { hint: 'choose another --out directory' });
  }
  const unwritable = outputPathProblem(path.join(target, 'config.json'));
  if (unwritable)
    throw new TurnwiseError('invalid-input', `cannot write a model to ${target}: ${unwritable}`, {
      hint: 'choose an --out directory in a folder you can write to',
    });
  const present = fs.existsSync(target) ? fs.readdirSync(target) : [];
  // --force replaces a checkpoint's own files, never anything else: `--out .` in a project
  // must not delete its sources.
  const foreign = present.filter((f) => !CHECKPOINT_FILES.includes(f)).sort();
  if (foreign.length > 0) {
    const shown = foreign.slice(0, 10).join(', ') + (foreign.length > 10 ? `, … (${foreign.length} in all)` : '');
    throw new TurnwiseError('invalid-input', `${target} holds files that are not part of a checkpoint: ${shown}`, {
      hint: 'choose an empty or new --out directory; --force only replaces an existing checkpoint, never other files',
    });
  }
  if (present.length > 0 && !options.force) {
    throw new TurnwiseError('invalid-input', `${target} already holds a checkpoint`, {
      hint: 'choose another --out directory, or pass --force to replace it',
    });
  }
  const weights = initWeights(config, seed);
  saveCheckpoint(target, {
    weights,
    optimizer: zeroOptimizerState(config),
    tokenizerJson: byteLevelTokenizerJson(),
    tokenizerConfig: byteLevelTokenizerConfig(),
  });
  return { dir: target, size, seed, parameters: parameterCount(config), config };
}

/** Loads a checkpoint directory as a ready-to-run policy, with a LoRA adapter folder on top when given. */
export function loadPolicy(dir: string, settings: SessionSettings = {}, options: { adapter?: string } = {}): Policy {
  const ck = loadCheckpoint(dir, { optimizer: false });
  // An adapter folder given as the model loads as its base with the adapter on top.
  const adapter = options.adapter ? loadAdapter(options.adapter, ck.weights.config) : ck.adapter;
  return new Policy(ck.weights, ck.tokenizer, settings, adapter);
}

export interface MergeResult {
  dir: string;
  dtype: ConfigDType;
  adapted: number;
}

/** Weight files of a model folder (safetensors and their index, PyTorch and GGUF files, Turnwise's optimizer state): not copied by a merge. */
function isWeightsFile(name: string): boolean {
  return /\.(safetensors|bin|pt|pth|gguf)$/.test(name) || /\.safetensors\.index\.json$/.test(name) || /\.bin\.index\.json$/.test(name);
}

/**
 * Writes `base` with `adapter` folded in as a Hugging Face folder at `out`: the base's config and
 * dtype (as its config.json names it), its weights with s·B·A added to every adapted layer, and its
 * tokenizer, generation and chat-template files copied. A folder that holds a model is replaced
 * only with `force`.
 */
export function mergeAdapterFolder(base: string, adapterDir: string, out: string, options: { force?: boolean } = {}): MergeResult {
  const ck = loadCheckpoint(base, { optimizer: false });
  const adapter = loadAdapter(adapterDir, ck.weights.config);
  const target = path.resolve(out);
  if (path.resolve(base) === target)
    throw new TurnwiseError('invalid-input', `--out ${target} is the base model folder`, {
      hint: 'write the merged model to a folder of its own',
    });
  if (fs.existsSync(target) && !fs.statSync(target).isDirectory())
    throw new TurnwiseError('invalid-input', `${target} exists and is a file, not a folder`, { hint: 'choose another --out folder' });
  const present = fs.existsSync(target) ? fs.readdirSync(target) : [];
  if (present.length > 0 && !options.force)
    throw new TurnwiseError('invalid-input', `${target} already holds files (${present.slice(0, 5).join(', ')})`, {
      hint: 'choose another --out folder, or pass --force to replace the model there',
    });
  const dtype = ck.weights.config.torch_dtype ?? 'float32';
  // Merging changes the weights and nothing else: every other file of the base (config.json with
  // the keys Turnwise does not read, generation_config.json, vocab.json, merges.txt,
  // added_tokens.json, the chat template, …) is copied byte for byte over what writeModelFolder
  // wrote. The weights are written in the base's dtype, so config.json's torch_dtype stays true.
  const sideFiles = fs
    .readdirSync(ck.dir, { withFileTypes: true })
    .filter((e) => e.isFile() && !isWeightsFile(e.name))
    .map((e) => e.name);
  writeModelFolder(target, mergeAdapter(ck.weights, adapter), {
    dtype,
    tokenizerJson: ck.tokenizerJson,
    tokenizerConfig: ck.tokenizerConfig,
  });
  for (const f of sideFiles) fs.copyFileSync(path.join(ck.dir, f), path.join(target, f));
  return { dir: target, dtype, adapted: loraTargets(ck.weights.config, adapter.config).length };
}
