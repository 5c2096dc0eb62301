// The embedded default policy: a warm-started turnwise-tiny shipped with Turnwise (models/ in the
// repository, dist/models/ in the bundle and the .vsix). `turnwise warmstart` reproduces it.
import * as path from 'node:path';
import { failedCheck, type Check } from '../core/doctor';
import { TurnwiseError } from '../core/errors';
import { findResource, resourceCandidates } from '../core/resources';
import { loadCheckpoint } from '../policy/files/checkpoint';

export const EMBEDDED_MODEL = 'turnwise-tiny';

/** Folder of the embedded checkpoint: next to the bundle (dist/models/…) or in the source tree (core/resources.ts). */
export function embeddedModelDir(): string {
  const rel = path.join('models', EMBEDDED_MODEL);
  const found = findResource(rel, 'model.safetensors');
  if (!found) {
    throw new TurnwiseError(
      'not-found',
      `the embedded policy ${EMBEDDED_MODEL} is missing (looked in ${resourceCandidates(rel).join(', ')})`,
      {
        hint: 'reinstall Turnwise, rebuild with `npm run build`, or pass a checkpoint with --model',
      },
    );
  }
  return found;
}

/**
 * The train layer's part of `turnwise doctor`: the embedded policy is there and loads as a run
 * would load it (config, weights, tokenizer; not the optimizer state). `dir` is for tests.
 */
export function embeddedPolicyCheck(dir?: string): Check {
  try {
    const d = dir ?? embeddedModelDir();
    const { weights, tokenizer } = loadCheckpoint(d, { optimizer: false });
    let params = 0;
    for (const t of weights.tensors.values()) params += t.length;
    const c = weights.config;
    return {
      name: 'embedded policy',
      status: 'ok',
      detail: `${path.basename(d)}: ${(params / 1e6).toFixed(1)}M parameters, ${c.num_hidden_layers} layers, ${tokenizer.size} tokens, at ${d}`,
    };
  } catch (e) {
    return failedCheck(
      'embedded policy',
      e,
      'reinstall Turnwise, or rebuild the embedded policy with `turnwise warmstart` (see docs/model-card-turnwise-tiny.md)',
    );
  }
}
