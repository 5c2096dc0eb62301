// SandboxPool: the entry point rollouts use. Keeps N containers per snapshot started ahead
// of need (refilled in the background), spreads containers over one or more engines by free
// capacity, and hands out each container once: a used sandbox is removed, never reused.
import { randomBytes } from 'node:crypto';
import type Docker from 'dockerode';
import { TurnwiseError } from '../core/errors';
import { DockerSandbox, type StartOptions } from './container';
import { connectEngine, engineInfo, type EngineTarget } from './engine';
import { isGoneOrGoing } from './errors';
import { LABEL, ownerId } from './owner';
import { ensureLanguageImage, sandboxLanguageFor, type BuildProgress } from './images';
import { buildSnapshot, type Snapshot, type SnapshotOptions } from './snapshot';
import type { SandboxLimits } from './types';

export interface EngineSpec {
  /** unix://, tcp://, https:// or ssh:// address; empty for DOCKER_HOST or the local socket. */
  host?: string;
  /** Most sandboxes (running + warm) this engine holds at once. Default 16. */
  capacity?: number;
}

/**
 * Reads the multi-engine setting: an array of `{ host, capacity }` objects or strings, or a
 * string `HOST[*CAPACITY], HOST[*CAPACITY]` (the `TURNWISE_DOCKER_ENGINES` variable), e.g.
 * `unix:///var/run/docker.sock*8, ssh://ci@build-1*32`. Empty: undefined (one default engine).
 */
export function parseEngineSpecs(value: unknown): EngineSpec[] | undefined {
  const bad = (why: string) =>
    new TurnwiseError('invalid-input', `cannot read the Docker engines setting: ${why}`, {
      hint: 'write engines as "HOST*CAPACITY, HOST*CAPACITY", e.g. "unix:///var/run/docker.sock*8, ssh://me@box*16"',
    });
  if (value === undefined || value === null || value === '') return undefined;
  const items: unknown[] =
    typeof value === 'string' ? value.split(/[,\s]+/).filter((x) => x !== '') : Array.isArray(value) ? value : [value];
  const specs = items.map((item): EngineSpec => {
    if (typeof item === 'string') {
      const m = /^(.*?)(?:\*(\d+))?$/.exec(item.trim())!;
      return { host: m[1], capacity: m[2] !== undefined ? Number(m[2]) : undefined };
    }
    if (item && typeof item === 'object') {
      const o = item as { host?: unknown; capacity?: unknown };
      if (o.host !== undefined && typeof o.host !== 'string') throw bad('host must be a string');
      if (o.capacity !== undefined && (typeof o.capacity !== 'number' || !(o.capacity >= 1))) throw bad('capacity must be a number ≥ 1');
      return { host: o.host as string | undefined, capacity: o.capacity as number | undefined };
    }
    throw bad(`unexpected entry ${JSON.stringify(item)}`);
  });
  for (const s of specs) if (s.capacity !== undefined && !(s.capacity >= 1)) throw bad(`capacity of ${s.host} must be ≥ 1`);
  return specs.length ? specs : undefined;
}

export interface PoolOptions {
  /** Run id, the `turnwise.run` label of every container. */
  run: string;
  /** Engines used as one pool. Default: TURNWISE_DOCKER_ENGINES, else one from DOCKER_HOST or the local socket. */
  engines?: EngineSpec[];
  /** Containers kept started ahead of need, per snapshot. Default 0 (set per snapshot with `warm`). */
  warm?: number;
  limits?: SandboxLimits;
  tmpfsBytes?: number;
  /** Skip the engine ping at connect (tests of error paths). */
  skipPing?: boolean;
}

interface PoolEngine {
  docker: Docker;
  target: EngineTarget;
  capacity: number;
  /** Leased + warm + starting. */
  used: number;
}

/** A snapshot present on every engine of the pool (tags differ when base images differ). */
export interface PoolSnapshot {
  /** The tag on the first engine; what to show users. */
  image: string;
  hash: string;
  files: number;
  bytes: number;
  built: boolean;
  /** Image tag per engine index. */
  images: string[];
}

interface WarmSet {
  ready: DockerSandbox[];
  starting: number;
  target: number;
  failures: number;
  lastError?: unknown;
}

export interface AcquireOptions {
  rollout?: string;
}

export class SandboxPool implements AsyncDisposable {
  private readonly engines: PoolEngine[];
  private readonly warmSets = new Map<string, WarmSet>();
  private readonly leased = new Set<DockerSandbox>();
  private readonly waiters: (() => void)[] = [];
  private rr = 0;
  private closed = false;
  /** Starts and removals under way; close() waits for them, so nothing of the pool outlives it. */
  private readonly inflight = new Set<Promise<unknown>>();
  /** The `turnwise.pool` label of this pool's containers: close() sweeps by it (and by owner). */
  readonly poolId = randomBytes(6).toString('hex');

  private constructor(
    private readonly opts: PoolOptions,
    engines: PoolEngine[],
  ) {
    this.engines = engines;
  }

  /** Connects to every engine (pinging each, so a dead one fails here with its fix). */
  static async connect(opts: PoolOptions): Promise<SandboxPool> {
    if (!opts.run) throw new TurnwiseError('invalid-input', 'a sandbox pool needs a run id', { hint: 'pass { run: "<run-id>" }' });
    const specs = opts.engines?.length ? opts.engines : (parseEngineSpecs(process.env.TURNWISE_DOCKER_ENGINES) ?? [{}]);
    const engines: PoolEngine[] = [];
    for (const s of specs) {
      const { docker, target } = connectEngine(s.host);
      if (!opts.skipPing) await engineInfo(docker, target);
      engines.push({ docker, target, capacity: s.capacity ?? 16, used: 0 });
    }
    return new SandboxPool(opts, engines);
  }

  /** The dockerode client and target of engine `i`, for tools that need the raw engine. */
  engineAt(i = 0): { docker: Docker; target: EngineTarget } {
    const e = this.engines[i];
    return { docker: e.docker, target: e.target };
  }

  get engineLabels(): string[] {
    return this.engines.map((e) => e.target.label);
  }

  /**
   * Builds (or reuses, by content hash) the snapshot of a workspace on every engine. Give the
   * task language (python, javascript, typescript, node) or an explicit `baseImage`.
   */
  async snapshot(
    dir: string,
    opts: Partial<SnapshotOptions> & { language?: string; onProgress?: BuildProgress } = {},
  ): Promise<PoolSnapshot> {
    const images: string[] = [];
    let first: Snapshot | undefined;
    let built = false;
    for (const [i, e] of this.engines.entries()) {
      let base = opts.baseImage;
      if (!base) {
        const lang = sandboxLanguageFor(opts.language ?? 'python');
        // Bootstrapping uses the local engine only; a remote engine must have its images built.
        base = (
          await ensureLanguageImage(e.docker, e.target, lang, opts.onProgress, {
            bootstrap: i === 0 && !/^(tcp|ssh|https?):/.test(e.target.label),
          })
        ).tag;
      }
      const snap = await buildSnapshot(e.docker, e.target, dir, {
        ...opts,
        baseImage: base,
        includeNodeModules: opts.includeNodeModules ?? (opts.language !== undefined && sandboxLanguageFor(opts.language) === 'node'),
      });
      images.push(snap.image);
      built ||= snap.built;
      first ??= snap;
    }
    return { image: first!.image, hash: first!.hash, files: first!.files, bytes: first!.bytes, built, images };
  }

  /** Keeps `n` containers of this snapshot started ahead of need. */
  warm(snapshot: PoolSnapshot | string, n: number): void {
    const key = this.key(snapshot);
    const set = this.warmSet(key);
    set.target = Math.max(0, n);
    set.failures = 0;
    this.refill(snapshot);
  }

  /** Resolves when the warm set of this snapshot is full (for benchmarks and tests). */
  async whenWarm(snapshot: PoolSnapshot | string, timeoutMs = 60_000): Promise<void> {
    const set = this.warmSet(this.key(snapshot));
    const t0 = Date.now();
    while (set.ready.length < set.target) {
      if (set.failures >= 3)
        throw set.lastError instanceof Error ? set.lastError : new TurnwiseError('sandbox-failed', 'warm pool cannot start containers');
      if (Date.now() - t0 > timeoutMs) throw new TurnwiseError('sandbox-failed', `warm pool did not fill within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /** Numbers for progress displays and tests. */
  stats(): { leased: number; warm: number; starting: number; engines: { label: string; used: number; capacity: number }[] } {
    let warm = 0;
    let starting = 0;
    for (const s of this.warmSets.values()) {
      warm += s.ready.length;
      starting += s.starting;
    }
    return {
      leased: this.leased.size,
      warm,
      starting,
      engines: this.engines.map((e) => ({ label: e.target.label, used: e.used, capacity: e.capacity })),
    };
  }

  /**
   * A started sandbox of this snapshot for one episode: a warm one if ready, else started now.
   * Dispose it when the episode ends (or `await using`); it is removed, never reused.
   */
  async acquire(snapshot: PoolSnapshot | string, opts: AcquireOptions = {}): Promise<DockerSandbox> {
    if (this.closed) throw new TurnwiseError('sandbox-failed', 'the sandbox pool is closed');
    const set = this.warmSets.get(this.key(snapshot));
    while (set && set.ready.length) {
      const sb = set.ready.shift()!;
      if (!sb.alive) {
        void sb.dispose().catch(() => undefined);
        continue;
      }
      this.lease(sb, opts.rollout);
      this.refill(snapshot);
      return sb;
    }
    const sb = await this.startOn(snapshot, opts.rollout);
    if (this.closed) {
      // close() ran while this start returned: it no longer sees this sandbox.
      await this.track(sb.dispose().catch(() => undefined));
      throw new TurnwiseError('sandbox-failed', 'the sandbox pool is closed', { hint: 'acquire sandboxes before closing the pool' });
    }
    this.lease(sb, opts.rollout);
    if (set) this.refill(snapshot);
    return sb;
  }

  /**
   * Removes every container of this pool (warm, leased and still starting) and resolves once
   * the engines hold none: the known sandboxes are disposed, then every container carrying
   * this pool's label and this process's owner label is removed (one that is still booting, or
   * whose removal failed under load), starts under way are awaited, and the sweep runs again
   * for a creation that landed meanwhile. A process that exits right after close() leaves
   * nothing for the reaper.
   */
  async close(): Promise<void> {
    this.closed = true;
    // Acquires waiting for a slot wake up, see the pool closed and reject (they hung forever).
    for (const w of this.waiters.splice(0)) w();
    const all: DockerSandbox[] = [...this.leased];
    for (const s of this.warmSets.values()) {
      all.push(...s.ready.splice(0));
      s.target = 0;
    }
    await Promise.all(all.map((sb) => sb.dispose().catch(() => undefined)));
    await this.sweep();
    // A start under way either fails (its container was just removed) or sees the pool closed
    // and disposes what it made; a create the engine answers late lands here too.
    const deadline = Date.now() + 60_000;
    while (this.inflight.size && Date.now() < deadline) {
      await Promise.race([Promise.allSettled([...this.inflight]), new Promise((r) => setTimeout(r, 1000))]);
    }
    await this.sweep();
  }

  /** Force-removes this pool's containers on every engine (by label), until none is listed or 15 s pass. */
  private async sweep(): Promise<void> {
    const filters = { label: [`${LABEL.pool}=${this.poolId}`, `${LABEL.owner}=${ownerId()}`] };
    await Promise.all(
      this.engines.map(async (e) => {
        const deadline = Date.now() + 15_000;
        for (let attempt = 0; ; attempt++) {
          let left: Docker.ContainerInfo[];
          try {
            left = await e.docker.listContainers({ all: true, filters });
          } catch {
            return; // the engine went away: the reaper removes what it held at the next start
          }
          if (!left.length || Date.now() > deadline) return;
          await Promise.all(
            left.map((c) =>
              e.docker
                .getContainer(c.Id)
                .remove({ force: true })
                .catch((err: unknown) => (isGoneOrGoing(err) ? undefined : err)),
            ),
          );
          // Removal under way (the engine's own auto-remove, 409) or refused under load: look again.
          await new Promise((r) => setTimeout(r, Math.min(50 * 2 ** attempt, 1000)));
        }
      }),
    );
  }

  private track<T>(p: Promise<T>): Promise<T> {
    this.inflight.add(p);
    const done = () => this.inflight.delete(p);
    p.then(done, done);
    return p;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  private key(snapshot: PoolSnapshot | string): string {
    return typeof snapshot === 'string' ? snapshot : snapshot.images.join(',');
  }

  private warmSet(key: string): WarmSet {
    let s = this.warmSets.get(key);
    if (!s) {
      s = { ready: [], starting: 0, target: this.opts.warm ?? 0, failures: 0 };
      this.warmSets.set(key, s);
    }
    return s;
  }

  private lease(sb: DockerSandbox, rollout?: string): void {
    void rollout; // the label was set at creation for warm containers; the run label is what the reaper needs
    this.leased.add(sb);
    const previous = sb.onDisposed;
    sb.onDisposed = () => {
      previous?.();
      this.leased.delete(sb);
    };
  }

  /** Reserves a slot on the engine with the most free capacity (ties round robin); undefined when all are full. */
  private pickEngine(): number | undefined {
    let best: number | undefined;
    let bestFree = 0;
    for (let k = 0; k < this.engines.length; k++) {
      const i = (this.rr + k) % this.engines.length;
      const e = this.engines[i];
      const free = e.capacity - e.used;
      if (free > bestFree) {
        best = i;
        bestFree = free;
      }
    }
    if (best !== undefined) {
      this.rr = (best + 1) % this.engines.length;
      this.engines[best].used++; // reserved now, so concurrent starts see it
    }
    return best;
  }

  private async waitForSlot(): Promise<number> {
    for (;;) {
      if (this.closed)
        throw new TurnwiseError('sandbox-failed', 'the sandbox pool is closed', { hint: 'acquire sandboxes before closing the pool' });
      const i = this.pickEngine();
      if (i !== undefined) return i;
      await new Promise<void>((r) => this.waiters.push(r));
    }
  }

  private startOn(snapshot: PoolSnapshot | string, rollout?: string): Promise<DockerSandbox> {
    return this.track(this.startOnEngine(snapshot, rollout));
  }

  private async startOnEngine(snapshot: PoolSnapshot | string, rollout?: string): Promise<DockerSandbox> {
    const i = await this.waitForSlot();
    const e = this.engines[i];
    const image = typeof snapshot === 'string' ? snapshot : snapshot.images[i];
    const start: StartOptions = {
      image,
      run: this.opts.run,
      rollout,
      limits: this.opts.limits,
      tmpfsBytes: this.opts.tmpfsBytes,
      labels: { [LABEL.pool]: this.poolId },
    };
    let sb: DockerSandbox;
    try {
      sb = await DockerSandbox.start(e.docker, e.target, start);
    } catch (err) {
      this.release(i);
      throw err;
    }
    sb.onDisposed = () => this.release(i);
    // The pool closed while this one started: close() no longer knows about it, so nobody
    // else would ever remove it.
    if (this.closed) {
      await sb.dispose().catch(() => undefined);
      throw new TurnwiseError('sandbox-failed', 'the sandbox pool is closed', { hint: 'acquire sandboxes before closing the pool' });
    }
    return sb;
  }

  private release(i: number): void {
    this.engines[i].used--;
    const w = this.waiters.shift();
    w?.();
  }

  private refill(snapshot: PoolSnapshot | string): void {
    const set = this.warmSet(this.key(snapshot));
    while (!this.closed && set.failures < 3 && set.ready.length + set.starting < set.target && this.pickEngineFree()) {
      set.starting++;
      void this.startOn(snapshot).then(
        (sb) => {
          set.starting--;
          set.failures = 0;
          if (this.closed || set.ready.length >= set.target) void this.track(sb.dispose().catch(() => undefined));
          else set.ready.push(sb);
        },
        (err) => {
          set.starting--;
          set.failures++;
          set.lastError = err;
          if (set.failures < 3) setTimeout(() => this.refill(snapshot), 200 * set.failures);
        },
      );
    }
  }

  private pickEngineFree(): boolean {
    return this.engines.some((e) => e.capacity - e.used > 0);
  }
}
