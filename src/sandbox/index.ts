/**
 * The sandbox layer: Docker containers for rollouts and test runs, behind a small API.
 *
 * ```ts
 * import { SandboxPool } from '../sandbox';
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
 * At program start call `reapOrphans()` (the CLI does); `turnwise sandbox prune` does it by hand.
 */
export * from './types';
export { SandboxPool, type PoolOptions, type PoolSnapshot, type EngineSpec, type AcquireOptions } from './pool';
export { DockerSandbox, containerSpec, DEFAULT_LIMITS, DEFAULT_TIMEOUT_MS, DEFAULT_MAX_OUTPUT, type StartOptions } from './container';
export { SHELL_STATE_NOTE } from './shell';
export { buildSnapshot, listWorkspaceFiles, type Snapshot, type SnapshotOptions } from './snapshot';
export {
  SANDBOX_LANGUAGES,
  baseImageTag,
  ensureLanguageImage,
  languageImageTag,
  sandboxLanguageFor,
  type SandboxLanguage,
} from './images';
export { connectEngine, engineInfo, resolveEngineTarget, type EngineTarget } from './engine';
export { disposeAllSandboxes, installShutdownHooks } from './lifecycle';
export { LABEL, ownerId } from './owner';
export { reapOrphans, reapAtStartup, pruneSnapshotImages, type ReapResult, type ReapOptions } from './reaper';
