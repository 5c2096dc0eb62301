// Engine errors as users should read them: unreachable, image missing, out of disk.
import { TurnwiseError } from '../core/errors';
import { engineError, type EngineTarget } from './engine';

const CONNECTION_CODES = new Set(['ENOENT', 'ECONNREFUSED', 'EACCES', 'ETIMEDOUT', 'ECONNRESET', 'EHOSTUNREACH', 'ENOTFOUND', 'EPIPE']);

function messageOf(e: unknown): string {
  const err = e as { message?: string; json?: { message?: string } };
  return String(err?.json?.message ?? err?.message ?? e);
}

export function isOutOfDisk(e: unknown): boolean {
  return /no space left on device|disk quota exceeded/i.test(messageOf(e));
}

/** True for "no such container" (already gone) and "removal already in progress". */
export function isGoneOrGoing(e: unknown): boolean {
  const code = (e as { statusCode?: number })?.statusCode;
  return code === 404 || code === 409;
}

/** Maps a dockerode failure while doing `what` to a TurnwiseError saying what to do. */
export function sandboxError(e: unknown, target: EngineTarget, what: string, image?: string): TurnwiseError {
  if (e instanceof TurnwiseError) return e;
  const err = e as NodeJS.ErrnoException & { statusCode?: number };
  if (err?.code && CONNECTION_CODES.has(err.code)) return engineError(e, target);
  const msg = messageOf(e)
    .replace(/^\(HTTP code \d+\) [a-z ]+ - /i, '')
    .trim();
  if (isOutOfDisk(e)) {
    return new TurnwiseError('docker-out-of-disk', `the Docker engine at ${target.label} is out of disk space while ${what}`, {
      hint: 'free space: `turnwise sandbox prune --images` removes old Turnwise snapshots; `docker system prune` removes other unused data',
      cause: e,
    });
  }
  if (err?.statusCode === 404 && image && /no such image|not found|pull access/i.test(msg)) {
    return new TurnwiseError('docker-image-missing', `the sandbox image ${image} is not present on ${target.label}`, {
      hint: 'build it: `turnwise images build` (FROM debian:bookworm-slim when a registry is reachable, else from a base bootstrapped from Debian packages)',
      cause: e,
    });
  }
  return new TurnwiseError('sandbox-failed', `Docker failed while ${what}: ${msg}`, {
    hint: 'see `turnwise doctor`; if the engine is overloaded, lower the number of parallel rollouts',
    cause: e,
  });
}
