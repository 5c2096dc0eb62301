// Options several commands share, each declared, shown and parsed in one place: the execution
// provider, the workspace and model a benchmark runs on (the demo's by default), and the run
// settings a benchmark takes from --config FILE and its flags.
import * as path from 'node:path';
import { TurnwiseError } from '../../core/errors';
import { findResource, resourceCandidates } from '../../core/resources';
import { PROVIDER_SETTINGS, type ProviderSetting } from '../../onnx';
import { ROLLOUT_PRECISIONS, type RolloutPrecision } from '../../policy/model/quantize';
import { readConfigFile, type TrainConfig } from '../../train/config';
import { embeddedModelDir } from '../../train/embedded';
import { numberInRange, oneOf, type ParsedArgs } from '../command';

/** `--provider`, as the usage lines show it. */
export const PROVIDER_USAGE = `[--provider ${PROVIDER_SETTINGS.join('|')}]`;

/** --provider: where the ONNX policy runs (`auto` when not given). */
export function providerOption(args: ParsedArgs): ProviderSetting {
  return oneOf(args, 'provider', PROVIDER_SETTINGS, 'auto');
}

/** `--precision`, as the usage lines show it: what a local model's sampling sessions read its weights as. */
export const PRECISION_USAGE = `[--precision ${ROLLOUT_PRECISIONS.join('|')}]`;

/** --precision: the rollout precision of a local model's sampling (rolloutPrecision); undefined when not given. */
export function precisionOption(args: ParsedArgs): RolloutPrecision | 'auto' | undefined {
  return args.values.precision === undefined ? undefined : oneOf(args, 'precision', ROLLOUT_PRECISIONS, 'auto');
}

/** The bundled demo workspace (examples/demo-python of the package, core/resources.ts). */
export function demoWorkspace(): string {
  const rel = path.join('examples', 'demo-python');
  const found = findResource(rel, 'inventory');
  if (!found)
    throw new TurnwiseError('not-found', `the demo workspace is missing (looked in ${resourceCandidates(rel).join(', ')})`, {
      hint: 'reinstall Turnwise, or run from a checkout of it',
    });
  return found;
}

/** --workspace DIR, else the bundled demo workspace. */
export function workspaceOrDemo(args: ParsedArgs): string {
  return typeof args.values.workspace === 'string' ? path.resolve(args.values.workspace) : demoWorkspace();
}

/** --model DIR, else the embedded policy. */
export function modelOrEmbedded(args: ParsedArgs): string {
  return typeof args.values.model === 'string' ? path.resolve(args.values.model) : embeddedModelDir();
}

/** A flag that sets a run-config field: the flag, the field, and the integers it takes (inclusive). */
export type ConfigFlag = readonly [flag: string, field: keyof TrainConfig, min: number, max: number];

/**
 * The run settings a benchmark takes over its own: --config FILE's fields (any turnwise.json
 * field, its schema tag left out), then each of `flags` that is given.
 */
export function benchConfig(args: ParsedArgs, flags: readonly ConfigFlag[]): Partial<TrainConfig> {
  const config: Partial<TrainConfig> =
    typeof args.values.config === 'string' ? (readConfigFile(args.values.config) as Partial<TrainConfig>) : {};
  delete (config as Record<string, unknown>).schema;
  for (const [flag, field, min, max] of flags) {
    if (args.values[flag] !== undefined)
      (config as Record<string, unknown>)[field] = numberInRange(args, flag, 0, { min, max, integer: true });
  }
  return config;
}
