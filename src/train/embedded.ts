// The embedded default policy: a warm-started turnwise-tiny shipped with Turnwise (models/ in the
// repository, dist/models/ in the bundle and the .vsix). `turnwise warmstart` reproduces it.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError } from '../core/errors';

export const EMBEDDED_MODEL = 'turnwise-tiny';

/** Folder of the embedded checkpoint: next to the bundle (dist/models/…) or in the source tree. */
export function embeddedModelDir(): string {
  const candidates = [
    path.join(__dirname, 'models', EMBEDDED_MODEL),
    path.join(__dirname, '..', 'models', EMBEDDED_MODEL),
    path.join(__dirname, '..', '..', 'models', EMBEDDED_MODEL),
  ];
  const found = candidates.find((d) => fs.existsSync(path.join(d, 'model.safetensors')));
  if (!found) {
    throw new TurnwiseError('not-found', `the embedded policy ${EMBEDDED_MODEL} is missing (looked in ${candidates.join(', ')})`, {
      hint: 'reinstall Turnwise, rebuild with `npm run build`, or pass a checkpoint with --model',
    });
  }
  return found;
}
