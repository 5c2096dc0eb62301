// Clean shutdown: every live sandbox of this process is removed on SIGINT/SIGTERM, and on a
// normal exit the closed attach stream ends each container's shell (StdinOnce + AutoRemove),
// so the engine removes it even though no async work can run in an 'exit' handler.

export interface Disposer {
  dispose(): Promise<void>;
}

const live = new Set<Disposer>();
let hooked = false;

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
  const all = [...live].map((d) => d.dispose().catch(() => undefined));
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([Promise.all(all), new Promise((r) => (timer = setTimeout(r, capMs)))]);
  clearTimeout(timer);
}

function onSignal(signal: NodeJS.Signals): void {
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
