// The reaper: removes Turnwise containers whose owning process is gone. Runs at every start of
// the CLI and the extension (best effort, a few seconds at most) and as `turnwise sandbox prune`.
import type Docker from 'dockerode';
import { connectEngine, type EngineTarget } from './engine';
import { isGoneOrGoing, sandboxError } from './errors';
import { LABEL, ownerState } from './owner';

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
    return await Promise.race([reapOrphans(docker, target), cap]);
  } catch {
    return undefined;
  } finally {
    clearTimeout(timer);
  }
}
