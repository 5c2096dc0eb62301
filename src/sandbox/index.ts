/**
 * The sandbox layer: Docker containers for rollouts and test runs, behind a small API.
 *
 * ```ts
 * import { SandboxPool } from './';
 *
 * await using pool = await SandboxPool.connect({ run: 'run-2024-01' });   // pings Docker; clear error if down
 * const snap = await pool.snapshot('/path/to/workspace', { language: 'python' }); // image per content hash
 * pool.warm(snap, 4);                                  // optional: keep 4 started ahead of need
 * {
 *   await using sb = await pool.acquire(snap, { rollout: 'task7/g0' }); // removed at block end
 *   const r = await sb.exec('python3 -m pytest -q', { timeoutMs: 60_000 });
 *   // r: { exitCode, stdout, stderr, durationMs, timedOut, oomKilled, truncated }
 *   const src = (await sb.readFile('pkg/mod.py')).toString();      // relative paths: under /workspace
 *   await sb.writeFile('tests/test_x.py', original);                // restore a test file
 * }
 * ```
 *
 * Each `exec` runs in a fresh `bash` in /workspace (see SHELL_STATE_NOTE): files persist between
 * commands; cd, exports and background processes do not. The workspace on the host is never
 * written: containers start from an image snapshot of it.
 *
 * Lifecycle: call `reapAtStartup()` at program start (the CLI does; the extension should at
 * activation) and `disposeAllSandboxes()` at deactivation. SIGINT/SIGTERM remove live sandboxes
 * (outside VS Code). If the owner dies anyway, its attach stream closes, the container's shell
 * ends and Docker auto-removes it; the reaper catches anything left. `turnwise sandbox prune`
 * does it by hand. Every container carries `turnwise.run`, `turnwise.rollout` (empty for
 * containers started ahead by the warm pool) and `turnwise.owner` = `pid:starttime` labels.
 *
 * Remote engines: `DOCKER_HOST` (or `engines: [{ host }]`) accepts `unix://`, `tcp://` (plain,
 * or TLS with DOCKER_TLS_VERIFY=1 + DOCKER_CERT_PATH holding ca.pem/cert.pem/key.pem, or
 * `https://`) and `ssh://user@host` (dockerode over ssh2, using the ssh agent). Several engines
 * form one pool: `engines: [{ host, capacity }]` or `TURNWISE_DOCKER_ENGINES="HOST*CAP, ..."`;
 * each new container goes to the engine with the most free capacity (ties round robin), and
 * `acquire` waits when all are full. Snapshots are built on every engine; language images
 * must already exist on remote engines (`turnwise images build --docker-host URL`), since the
 * Debian bootstrap runs on the local machine. Tested here: unix socket and tcp on loopback
 * (through a proxy to the socket); TLS and ssh are not tested (no such engine on CI).
 */
export * from './types';
export { SandboxPool, parseEngineSpecs, type PoolOptions, type PoolSnapshot, type EngineSpec, type AcquireOptions } from './pool';
export { DockerSandbox, containerSpec, DEFAULT_LIMITS, DEFAULT_TIMEOUT_MS, DEFAULT_MAX_OUTPUT, type StartOptions } from './container';
export { SHELL_STATE_NOTE } from './shell';
export { buildSnapshot, listWorkspaceFiles, type Snapshot, type SnapshotOptions } from './snapshot';
export { SANDBOX_LANGUAGES, baseImageTag, ensureLanguageImage, languageImageTag, sandboxLanguageFor, type SandboxLanguage } from './images';
export { connectEngine, engineInfo, resolveEngineTarget, type EngineTarget } from './engine';
export { disposeAllSandboxes, installShutdownHooks } from './lifecycle';
export { LABEL, ownerId } from './owner';
export {
  reapOrphans,
  reapAtStartup,
  reapInterruptedBuilds,
  STALE_BUILD_MS,
  pruneSnapshotImages,
  type ReapResult,
  type ReapOptions,
} from './reaper';
