// Clean shutdown: every live sandbox of this process is removed on SIGINT/SIGTERM, and on a
// normal exit the closed attach stream ends each container's shell (StdinOnce + AutoRemove),
// so the engine removes it even though no async work can run in an 'exit' handler.

export interface Disposer {
  dispose(): Promise<void>;
}

const live = new Set<Disposer>();
/** Engine calls under way that will leave something to remove (a container being created, an image being built). */
const pending = new Set<Promise<unknown>>();
let hooked = false;
let shuttingDown = false;

/**
 * Tracks an engine call whose result must be cleaned up: on a signal, shutdown waits for it
 * (bounded) before disposing, so a container created while Ctrl-C arrives is removed too
 * instead of being left created-but-never-started.
 */
export function trackPending<T>(p: Promise<T>): Promise<T> {
  pending.add(p);
  installShutdownHooks();
  const done = () => pending.delete(p);
  p.then(done, done);
  return p;
}

/** True once SIGINT/SIGTERM cleanup has begun: nothing new should be started. */
export function isShuttingDown(): boolean {
  return shuttingDown;
}

export function trackLive(d: Disposer): void {
  live.add(d);
  installShutdownHooks();
}

export function untrackLive(d: Disposer): void {
  live.delete(d);
}

export function liveCount(): number {
  return live.size;
}

/** Removes every live sandbox of this process; resolves when all are gone or after `capMs`. */
export async function disposeAllSandboxes(capMs = 10_000): Promise<void> {
  const within = async (p: Promise<unknown>, ms: number) => {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([p, new Promise((r) => (timer = setTimeout(r, ms)))]);
    clearTimeout(timer);
  };
  // Creations in flight first (a short wait): their results register themselves as live when they land.
  await within(Promise.allSettled([...pending]), Math.min(2000, capMs / 3));
  await within(Promise.all([...live].map((d) => d.dispose().catch(() => undefined))), capMs);
}

function onSignal(signal: NodeJS.Signals): void {
  shuttingDown = true;
  process.removeListener(signal, onSignal);
  const others = process.listenerCount(signal);
  void disposeAllSandboxes(5000).finally(() => {
    // Re-raise so the default action (or the app's own handler) still happens.
    if (others === 0) process.kill(process.pid, signal);
  });
}

/** Installs SIGINT/SIGTERM cleanup once. Not done inside the VS Code extension host. */
export function installShutdownHooks(): void {
  if (hooked || process.versions.electron || process.env.VSCODE_PID || process.env.TURNWISE_NO_SIGNAL_HOOKS) return;
  hooked = true;
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
}
