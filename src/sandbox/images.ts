// Names of the sandbox images. The base image is bootstrapped from Debian packages when no
// registry is reachable (scripts/bootstrap-base-image.sh); its tag hashes the package list.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

/** sandbox-images/ in a source checkout or next to dist/ in the packaged extension. */
export function sandboxImagesDir(): string {
  const candidates = [path.join(__dirname, '..', 'sandbox-images'), path.join(__dirname, '..', '..', 'sandbox-images')];
  return candidates.find((c) => fs.existsSync(path.join(c, 'base', 'packages.txt'))) ?? candidates[candidates.length - 1];
}

export function basePackages(dir = sandboxImagesDir()): string[] {
  return fs
    .readFileSync(path.join(dir, 'base', 'packages.txt'), 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'));
}

/** Same tag as `scripts/bootstrap-base-image.sh --print-tag`. */
export function baseImageTag(dir = sandboxImagesDir()): string {
  const hash = createHash('sha256').update(basePackages(dir).join(',')).digest('hex').slice(0, 12);
  return `turnwise/base:bookworm-${hash}`;
}
