// The sandbox contract the rest of Turnwise codes against. dockerode stays behind it
// (docker.ts); tasks/ and agent/ see only these types.

/** Result of one command in a sandbox. Output is capped: head and tail kept, middle elided. */
export interface ExecResult {
  exitCode: number | null;
  stdout: string;
  stderr: string;
  durationMs: number;
  timedOut: boolean;
  oomKilled: boolean;
  /** True when stdout or stderr was cut to the cap. */
  truncated: boolean;
}

export interface ExecOptions {
  /** Per-command timeout, enforced inside the container and by the caller. Default 30 s. */
  timeoutMs?: number;
  /** Bytes kept per stream (head + tail). Default 16 KiB. */
  maxOutputBytes?: number;
  /** Working directory inside the container. Default the workspace (/workspace). */
  cwd?: string;
  env?: Record<string, string>;
}

/** One running container, used by one episode and then removed. */
export interface Sandbox extends AsyncDisposable {
  readonly id: string;
  /** Runs `bash -lc <command>` in the container. */
  exec(command: string, options?: ExecOptions): Promise<ExecResult>;
  readFile(pathInContainer: string): Promise<Buffer>;
  writeFile(pathInContainer: string, data: Buffer | string, mode?: number): Promise<void>;
  /** Removes the container. Idempotent. */
  dispose(): Promise<void>;
}

export interface SandboxLimits {
  memoryBytes?: number; // default 2 GiB, no swap
  nanoCpus?: number; // default 1 CPU
  pidsLimit?: number; // default 256
}

/** Where the workspace lives in every sandbox. */
export const WORKSPACE_DIR = '/workspace';

/**
 * Where a snapshot keeps the workspace's `node_modules` folders: owned by root and read-only for
 * the sandbox user, each linked from its place in the workspace. The test runners and every
 * package the tests load come from here, so an agent cannot rewrite them; scoring puts the links
 * back (tasks/reward.ts restoreDependencies) whatever the agent did to them.
 */
export const DEPENDENCIES_DIR = '/opt/turnwise/deps';
