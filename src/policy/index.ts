// The policy layer: a Qwen2 transformer held as ONNX graphs (inference and training), its
// Hugging Face checkpoint format, and the byte-level default model turnwise-tiny. Imports core, onnx.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError } from '../core/errors';
import { outputPathProblem } from '../core/fs';
import type { SessionSettings } from '../onnx';
import { CHECKPOINT_FILES, loadCheckpoint, saveCheckpoint, zeroOptimizerState } from './checkpoint';
import { parameterCount, presetConfig, type ModelConfig } from './config';
import { Policy } from './policy';
import { byteLevelTokenizerConfig, byteLevelTokenizerJson } from './tokenizer';
import { initWeights } from './weights';

export * from './checkpoint';
export * from './config';
export * from './policy';
export * from './safetensors';
export * from './tokenizer';
export * from './trainable';
export * from './worker';
export * from './weights';
export { buildStepGraph, graphParamSpecs, toGraphLayout, fromGraphLayout } from './graphs';

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
  if (unwritable) throw new TurnwiseError('invalid-input', `cannot write a model to ${target}: ${unwritable}`, { hint: 'choose an --out directory in a folder you can write to' });
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
    throw new TurnwiseError('invalid-input', `${target} already holds a checkpoint`, { hint: 'choose another --out directory, or pass --force to replace it' });
  }
  const weights = initWeights(config, seed);
  saveCheckpoint(target, { weights, optimizer: zeroOptimizerState(config), tokenizerJson: byteLevelTokenizerJson(), tokenizerConfig: byteLevelTokenizerConfig() });
  return { dir: target, size, seed, parameters: parameterCount(config), config };
}

/** Loads a checkpoint directory as a ready-to-run policy. */
export function loadPolicy(dir: string, settings: SessionSettings = {}): Policy {
  const ck = loadCheckpoint(dir, { optimizer: false });
  return new Policy(ck.weights, ck.tokenizer, settings);
}
