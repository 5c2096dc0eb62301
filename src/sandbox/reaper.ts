// The reaper: removes Turnwise containers whose owning process is gone, and the step images of
// snapshot builds that were interrupted. Runs at every start of the CLI and the extension (best
// effort, a few seconds at most) and as `turnwise sandbox prune`.
import type Docker from 'dockerode';
import { connectEngine, type EngineTarget } from './engine';
import { isGoneOrGoing, sandboxError } from './errors';
import { LABEL, ownerState } from './owner';
import { isUntagged, removeChildrenFirst } from './snapshot';

export interface ReapOptions {
  /** Remove every Turnwise container, even those of running owners. */
  all?: boolean;
  /** Only containers of this run. */
  run?: string;
  /** Also remove containers owned by processes on other hosts (whose state cannot be checked). */
  includeOtherHosts?: boolean;
}

export interface ReapResult {
  engine: string;
  removed: string[];
  /** Containers of live owners (or owners elsewhere) left alone. */
  kept: number;
}

export async function reapOrphans(docker: Docker, target: EngineTarget, opts: ReapOptions = {}): Promise<ReapResult> {
  let list: Docker.ContainerInfo[];
  try {
    list = await docker.listContainers({ all: true, filters: { label: [opts.run ? `${LABEL.run}=${opts.run}` : LABEL.run] } });
  } catch (e) {
    throw sandboxError(e, target, 'listing Turnwise containers');
  }
  const removed: string[] = [];
  let kept = 0;
  await Promise.all(
    list.map(async (c) => {
      const state = ownerState(c.Labels?.[LABEL.owner], c.Labels?.[LABEL.host]);
      const reap = opts.all || state === 'gone' || (state === 'unknown' && opts.includeOtherHosts);
      if (!reap) {
        kept++;
        return;
      }
      try {
        await docker.getContainer(c.Id).remove({ force: true });
      } catch (e) {
        if (!isGoneOrGoing(e)) throw sandboxError(e, target, `removing container ${c.Id.slice(0, 12)}`);
      }
      removed.push(c.Id);
    }),
  );
  return { engine: target.label, removed, kept };
}

/** Removes snapshot images no container uses (they are rebuilt on demand by content hash). */
export async function pruneSnapshotImages(docker: Docker, target: EngineTarget): Promise<string[]> {
  try {
    const images = await docker.listImages({ filters: { label: [LABEL.snapshot] } });
    const removed: string[] = [];
    for (const img of images) {
      try {
        await docker.getImage(img.Id).remove({ force: false });
        removed.push(...(img.RepoTags ?? [img.Id]));
      } catch (e) {
        if ((e as { statusCode?: number }).statusCode !== 409) throw e; // 409: in use by a container
      }
    }
    return removed;
  } catch (e) {
    throw sandboxError(e, target, 'removing snapshot images');
  }
}

/** How old a dangling snapshot build image must be before the startup reaper takes it: older than any build still running. */
export const STALE_BUILD_MS = 10 * 60_000;

/**
 * Removes what interrupted snapshot builds left: untagged images carrying the snapshot label
 * (each step of a build commits one, and each holds a copy of the workspace) older than
 * `olderThanMs`. A killed process cannot clean up after its own build (SIGKILL, a crash, or an
 * engine that commits a step after the process's shutdown cap), so every start does it for it.
 * Safe against builds that finished: their step images are parents of the tagged snapshot,
 * which the engine refuses to remove (409) without `force`, and force is never used here.
 */
export async function reapInterruptedBuilds(
  docker: Docker,
  target: EngineTarget,
  opts: { olderThanMs?: number; now?: number } = {},
): Promise<string[]> {
  const cutoff = (opts.now ?? Date.now()) - (opts.olderThanMs ?? STALE_BUILD_MS);
  let images: Docker.ImageInfo[];
  try {
    images = await docker.listImages({ all: true, filters: { label: [LABEL.snapshot] } });
  } catch (e) {
    throw sandboxError(e, target, 'listing snapshot build images');
  }
  const stale = images.filter((i) => isUntagged(i) && i.Created * 1000 <= cutoff);
  return removeChildrenFirst(docker, stale, { force: false }, (e, img) => {
    const code = (e as { statusCode?: number }).statusCode;
    if (code === 404) return true;
    if (code === 409) return false; // in use, or the parent of a finished snapshot
    throw sandboxError(e, target, `removing snapshot build image ${img.Id.slice(7, 19)}`);
  });
}

/**
 * Best-effort reap at program start: never throws, never waits more than `capMs`, quiet when
 * Docker is not there (the command that needs Docker will say so itself).
 */
export async function reapAtStartup(host?: string, capMs = 3000): Promise<ReapResult | undefined> {
  let timer: NodeJS.Timeout | undefined;
  try {
    // Bounded at the socket too: the cap alone stops waiting but leaves the request open,
    // which kept every CLI command alive forever against a silent DOCKER_HOST.
    const { docker, target } = connectEngine(host, { requestTimeoutMs: capMs });
    const cap = new Promise<undefined>((r) => {
      timer = setTimeout(() => r(undefined), capMs);
      timer.unref();
    });
    const reap = async (): Promise<ReapResult> => {
      const r = await reapOrphans(docker, target);
      await reapInterruptedBuilds(docker, target);
      return r;
    };
    return await Promise.race([reap(), cap]);
  } catch {
    return undefined;
  } finally {
    clearTimeout(timer);
  }
}
