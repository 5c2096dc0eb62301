// One sandbox container: created with every isolation setting, attached once, its shell
// server (shell.ts) running each command. Also the archive-API file helpers.
//
// What this does NOT isolate: the kernel is shared with the host (a kernel exploit escapes);
// CPU time is limited by quota, not disk I/O; processes a command moves to a new session
// (setsid) survive the command's end until the container is removed.
import { randomBytes } from 'node:crypto';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Duplex } from 'node:stream';
import type Docker from 'dockerode';
import * as tar from 'tar-stream';
import { TurnwiseError } from '../core/errors';
import type { EngineTarget } from './engine';
import { isGoneOrGoing, sandboxError } from './errors';
import { isShuttingDown, trackLive, trackPending, untrackLive } from './lifecycle';
import { CappedOutput, DemuxParser, SentinelScanner } from './output';
import { LABEL, ownerId } from './owner';
import { SHELL_SERVER, encodeRequest, parseSentinelFields, sentinelMarker, shellQuote } from './shell';
import { WORKSPACE_DIR, type ExecOptions, type ExecResult, type Sandbox, type SandboxLimits } from './types';

export const DEFAULT_LIMITS: Required<SandboxLimits> = {
  memoryBytes: 2 * 1024 ** 3,
  nanoCpus: 1e9,
  pidsLimit: 256,
};
export const DEFAULT_TIMEOUT_MS = 30_000;
export const DEFAULT_MAX_OUTPUT = 16 * 1024;
/** uid:gid of the `agent` user the language images create. */
export const SANDBOX_USER = '1000:1000';

export interface StartOptions {
  image: string;
  /** Run id: the `turnwise.run` label. Required so every container can be found again. */
  run: string;
  rollout?: string;
  limits?: SandboxLimits;
  /** Size of the tmpfs at /tmp (counts against the memory limit). Default 512 MiB. */
  tmpfsBytes?: number;
  /** How long the shell may take to come up. Default 60 s. */
  readyTimeoutMs?: number;
  /** Extra labels (e.g. for tests). */
  labels?: Record<string, string>;
}

/** The container spec: pure, so the isolation settings are unit-tested. */
export function containerSpec(opts: StartOptions, owner = ownerId(), host = os.hostname()): Docker.ContainerCreateOptions {
  const limits = { ...DEFAULT_LIMITS, ...(opts.limits ?? {}) };
  const tmpfs = opts.tmpfsBytes ?? 512 * 1024 ** 2;
  return {
    name: `tw-${opts.run.replace(/[^a-zA-Z0-9_.-]/g, '-').slice(0, 40)}-${randomBytes(4).toString('hex')}`,
    Image: opts.image,
    // A login shell once, so each command inherits the login environment without paying for it.
    Cmd: ['bash', '-l', '-c', SHELL_SERVER],
    Entrypoint: [],
    // The shell server is root, with no capability but switching user and signalling; each
    // command runs as the sandbox user (shell.ts SHELL_SERVER says why).
    User: '0:0',
    WorkingDir: WORKSPACE_DIR,
    Env: [
      'HOME=/home/agent',
      'USER=agent',
      'LOGNAME=agent',
      'LANG=C.UTF-8',
      'PYTHONDONTWRITEBYTECODE=1',
      'TERM=dumb',
      `TW_UID=${SANDBOX_USER.split(':')[0]}`,
      `TW_GID=${SANDBOX_USER.split(':')[1]}`,
    ],
    AttachStdin: true,
    AttachStdout: true,
    AttachStderr: true,
    OpenStdin: true,
    // When the owner's attach connection drops (exit, crash, SIGKILL), stdin closes, the shell
    // ends and AutoRemove deletes the container: a second line of defence behind the reaper.
    StdinOnce: true,
    Tty: false,
    NetworkDisabled: true,
    Labels: {
      ...(opts.labels ?? {}),
      [LABEL.run]: opts.run,
      [LABEL.rollout]: opts.rollout ?? '',
      [LABEL.owner]: owner,
      [LABEL.host]: host,
    },
    HostConfig: {
      NetworkMode: 'none',
      CapDrop: ['ALL'],
      CapAdd: ['SETUID', 'SETGID', 'KILL', 'SETPCAP'],
      SecurityOpt: ['no-new-privileges'],
      Memory: limits.memoryBytes,
      MemorySwap: limits.memoryBytes, // equal to Memory: no swap
      NanoCpus: limits.nanoCpus,
      PidsLimit: limits.pidsLimit,
      Tmpfs: { '/tmp': `rw,nosuid,nodev,size=${tmpfs},mode=1777` },
      Init: true,
      AutoRemove: true,
      ReadonlyRootfs: false,
      LogConfig: { Type: 'none', Config: {} }, // output goes to the attach stream only, never to disk
    },
  };
}

interface PendingExec {
  out: SentinelScanner;
  err: SentinelScanner;
  finish: () => void;
}

function engineTargetLabel(t: EngineTarget): string {
  return t.label;
}

/** A running sandbox. Create with `DockerSandbox.start`; one episode, then `dispose()`. */
export class DockerSandbox implements Sandbox {
  readonly id: string;
  readonly name: string;
  readonly image: string;
  readonly engine: string;
  private readonly container: Docker.Container;
  private socket: Duplex | undefined;
  private demux: DemuxParser;
  private pending: PendingExec | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private deadReason: string | undefined;
  private disposing: Promise<void> | undefined;
  private onReady: (() => void) | undefined;
  private readyOut: SentinelScanner | undefined;
  private readyErr: SentinelScanner | undefined;

  private constructor(
    private readonly docker: Docker,
    private readonly target: EngineTarget,
    container: Docker.Container,
    name: string,
    image: string,
  ) {
    this.container = container;
    this.id = container.id;
    this.name = name;
    this.image = image;
    this.engine = engineTargetLabel(target);
    this.demux = new DemuxParser((stream, data) => this.onFrame(stream, data));
  }

  /** Creates, attaches and starts a container, and waits until its shell answers. */
  static async start(docker: Docker, target: EngineTarget, opts: StartOptions): Promise<DockerSandbox> {
    const spec = containerSpec(opts);
    if (isShuttingDown())
      throw new TurnwiseError('sandbox-failed', 'not starting a sandbox: Turnwise is shutting down', { hint: 'run the command again' });
    let sb: DockerSandbox | undefined;
    // Tracked while in flight: a signal that arrives now waits for the container to exist and
    // removes it (trackLive runs in the same continuation that the shutdown awaits).
    const created = trackPending(
      docker.createContainer(spec).then((c) => {
        sb = new DockerSandbox(docker, target, c, spec.name!, opts.image);
        trackLive(sb);
        return c;
      }),
    );
    try {
      await created;
    } catch (e) {
      throw sandboxError(e, target, `creating a sandbox from ${opts.image}`, opts.image);
    }
    if (!sb) throw new TurnwiseError('internal', 'sandbox was created but not tracked');
    if (isShuttingDown()) {
      await sb.dispose();
      throw new TurnwiseError('sandbox-failed', 'not starting a sandbox: Turnwise is shutting down', { hint: 'run the command again' });
    }
    try {
      await sb.boot(opts.readyTimeoutMs ?? 60_000);
      return sb;
    } catch (e) {
      await sb.dispose();
      throw e instanceof TurnwiseError ? e : sandboxError(e, target, `starting sandbox ${sb.name}`, opts.image);
    }
  }

  private async boot(readyTimeoutMs: number): Promise<void> {
    const socket = (await this.container.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true })) as Duplex;
    this.socket = socket;
    socket.on('data', (chunk: Buffer) => {
      // What the shell sends is the container's: a frame the parser refuses ends this sandbox, never the process.
      try {
        this.demux.push(chunk);
      } catch (e) {
        this.die(`the sandbox shell sent what it cannot have sent: ${(e as Error).message}`);
        void this.dispose().catch(() => undefined);
      }
    });
    socket.on('error', (e) => this.die(`the attach stream failed: ${e.message}`));
    socket.on('close', () => this.die('the sandbox shell ended (the container stopped or was removed)'));
    const ready = new Promise<void>((resolve, reject) => {
      let outDone = false;
      let errDone = false;
      const check = () => {
        if (outDone && errDone) resolve();
      };
      const marker = Buffer.from('\0TWREADY', 'latin1');
      this.readyOut = new SentinelScanner(marker, () => undefined);
      this.readyErr = new SentinelScanner(marker, () => undefined);
      this.onReady = () => {
        outDone = this.readyOut!.done;
        errDone = this.readyErr!.done;
        check();
      };
      const timer = setTimeout(
        () =>
          reject(
            new TurnwiseError('sandbox-failed', `sandbox ${this.name} did not come up within ${readyTimeoutMs} ms`, {
              hint: 'the engine may be overloaded; check `docker ps` and lower the parallel rollouts',
            }),
          ),
        readyTimeoutMs,
      );
      this.onDead = (why) =>
        reject(
          new TurnwiseError('sandbox-failed', `sandbox ${this.name} ended while starting: ${why}`, {
            hint: 'check that the image has bash and setpriv (util-linux: the shell runs every command as the sandbox user through it), and that the engine has free memory',
          }),
        );
      this.readyCleanup = () => clearTimeout(timer);
    });
    // Disposal during start rejects `ready` before it is awaited: mark it handled so that the
    // rejection is not an unhandledRejection that kills the process mid-cleanup (Ctrl-C).
    ready.catch(() => undefined);
    await this.container.start();
    try {
      await ready;
    } finally {
      this.readyCleanup?.();
      this.onReady = undefined;
      this.onDead = undefined;
      this.readyOut = this.readyErr = undefined;
    }
  }

  private onDead: ((why: string) => void) | undefined;
  /** Called once when the sandbox is removed (the pool frees its slot). */
  onDisposed: (() => void) | undefined;
  private readyCleanup: (() => void) | undefined;

  private onFrame(stream: 1 | 2, data: Buffer): void {
    if (this.onReady) {
      const sc = stream === 1 ? this.readyOut! : this.readyErr!;
      sc.push(data);
      this.onReady();
      return;
    }
    const p = this.pending;
    if (!p) return; // output of nothing we asked for (a leftover process): dropped
    const sc = stream === 1 ? p.out : p.err;
    sc.push(data);
    if (p.out.done && p.err.done) p.finish();
  }

  private die(why: string): void {
    if (this.deadReason) return;
    this.deadReason = why;
    this.onDead?.(why);
    this.pending?.finish();
  }

  /** True while the shell answers. */
  get alive(): boolean {
    return this.deadReason === undefined && !this.disposing;
  }

  exec(command: string, options: ExecOptions = {}): Promise<ExecResult> {
    const run = this.queue.then(() => this.execNow(command, options));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async execNow(command: string, options: ExecOptions): Promise<ExecResult> {
    if (this.disposing)
      throw new TurnwiseError('sandbox-failed', `sandbox ${this.name} was disposed`, { hint: 'acquire a new sandbox for each episode' });
    if (this.deadReason)
      throw new TurnwiseError('sandbox-failed', `sandbox ${this.name} no longer answers: ${this.deadReason}`, {
        hint: 'acquire a new sandbox; this one is being removed',
      });
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const cap = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT;
    const id = randomBytes(8).toString('hex');
    let request: Buffer;
    try {
      request = encodeRequest(id, command, timeoutMs, options.cwd ?? WORKSPACE_DIR, options.env);
    } catch (e) {
      throw new TurnwiseError('invalid-input', (e as Error).message, { hint: 'environment variable names are letters, digits and _' });
    }
    const stdout = new CappedOutput(cap);
    const stderr = new CappedOutput(cap);
    const marker = sentinelMarker(id);
    const started = performance.now();
    let callerTimedOut = false;
    const outScan = new SentinelScanner(marker, (d) => stdout.write(d));
    const errScan = new SentinelScanner(marker, (d) => stderr.write(d));
    await new Promise<void>((resolve) => {
      const finish = () => {
        clearTimeout(timer);
        this.pending = undefined;
        resolve();
      };
      this.pending = { out: outScan, err: errScan, finish };
      // The caller's own deadline: the in-container timeout kills at T (TERM) and T+2 s (KILL);
      // if no sentinel came 5 s after that, the shell is wedged and the sandbox is given up.
      const timer = setTimeout(() => {
        callerTimedOut = true;
        this.die(`a command did not return within its timeout (${timeoutMs} ms) plus grace`);
        void this.dispose().catch(() => undefined);
      }, timeoutMs + 7000);
      this.socket!.write(request);
    });
    const durationMs = performance.now() - started;
    const out = outScan.fields;
    if (out === undefined) {
      // The shell ended (or was given up) before the command returned.
      const oom = callerTimedOut ? false : await this.diedOfOom();
      return {
        exitCode: null,
        stdout: stdout.text(),
        stderr: stderr.text() + (callerTimedOut ? '' : `\n[sandbox ended: ${this.deadReason}]`),
        durationMs,
        timedOut: callerTimedOut,
        oomKilled: oom,
        truncated: stdout.truncated || stderr.truncated,
      };
    }
    const f = parseSentinelFields(out);
    return {
      exitCode: f.exitCode,
      stdout: stdout.text(),
      stderr: stderr.text(),
      durationMs,
      timedOut: f.timedOut,
      oomKilled: f.oomKills > 0 && !f.timedOut,
      truncated: stdout.truncated || stderr.truncated,
    };
  }

  private async diedOfOom(): Promise<boolean> {
    try {
      return !!(await this.container.inspect()).State?.OOMKilled;
    } catch {
      return false;
    }
  }

  /**
   * Reads a file through the archive API (no process in the container). The archive API sees
   * the container's filesystem, not its tmpfs mounts: files under /tmp are read with exec (cat).
   */
  async readFile(pathInContainer: string, maxBytes = 64 * 1024 ** 2): Promise<Buffer> {
    const abs = path.posix.resolve(WORKSPACE_DIR, pathInContainer);
    let stream: NodeJS.ReadableStream;
    try {
      stream = await this.container.getArchive({ path: abs });
    } catch (e) {
      if ((e as { statusCode?: number }).statusCode === 404) {
        throw new TurnwiseError('not-found', `${abs} does not exist in sandbox ${this.name}`, {
          hint: 'check the path (relative paths are under /workspace)',
        });
      }
      throw sandboxError(e, this.target, `reading ${abs}`);
    }
    return new Promise<Buffer>((resolve, reject) => {
      const extract = tar.extract();
      let settled = false;
      // Settles once; on failure the archive stream is destroyed at once, so a refused
      // (oversized, non-file) entry is not downloaded to the end and no connection lingers.
      const settle = (err: Error | undefined, value?: Buffer) => {
        if (settled) return;
        settled = true;
        if (err) {
          (stream as NodeJS.ReadableStream & { destroy?: () => void }).destroy?.();
          extract.destroy();
          reject(err);
        } else resolve(value!);
      };
      let result: Buffer | undefined;
      extract.on('entry', (header, entry, next) => {
        if (result !== undefined) {
          entry.resume();
          entry.on('end', next);
          return;
        }
        if (header.type !== 'file') {
          return settle(new TurnwiseError('invalid-input', `${abs} in sandbox ${this.name} is a ${header.type}, not a file`));
        }
        if ((header.size ?? 0) > maxBytes) {
          return settle(
            new TurnwiseError('invalid-input', `${abs} is ${header.size} bytes, over the ${maxBytes}-byte read limit`, {
              hint: 'read a part of it with exec (head/tail) instead',
            }),
          );
        }
        const chunks: Buffer[] = [];
        entry.on('data', (c) => {
          chunks.push(c as Buffer);
        });
        entry.on('end', () => {
          result = Buffer.concat(chunks);
          next();
        });
      });
      extract.on('finish', () =>
        settle(result ? undefined : new TurnwiseError('not-found', `${abs} not found in sandbox ${this.name}`), result),
      );
      extract.on('error', (e) => settle(e));
      (stream as NodeJS.ReadableStream).on('error', (e: Error) => settle(e));
      (stream as NodeJS.ReadableStream).pipe(extract);
    });
  }

  /** Writes a file through the archive API, owned by the sandbox user; creates parent dirs. */
  async writeFile(pathInContainer: string, data: Buffer | string, mode = 0o644): Promise<void> {
    const abs = path.posix.resolve(WORKSPACE_DIR, pathInContainer);
    const body = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    const dir = path.posix.dirname(abs);
    const pack = tar.pack();
    const [uid, gid] = SANDBOX_USER.split(':').map(Number);
    pack.entry({ name: path.posix.basename(abs), size: body.length, mode, uid, gid, mtime: new Date() }, body);
    pack.finalize();
    const chunks: Buffer[] = [];
    for await (const c of pack as unknown as AsyncIterable<Buffer>) chunks.push(c);
    const archive = Buffer.concat(chunks);
    const put = () => this.container.putArchive(archive, { path: dir });
    try {
      await put();
    } catch (e) {
      if ((e as { statusCode?: number }).statusCode !== 404) throw sandboxError(e, this.target, `writing ${abs}`);
      const mk = await this.exec(`mkdir -p -- ${shellQuote(dir)}`, { timeoutMs: 10_000 });
      if (mk.exitCode !== 0) throw new TurnwiseError('sandbox-failed', `cannot create ${dir} in sandbox ${this.name}: ${mk.stderr.trim()}`);
      try {
        await put();
      } catch (e2) {
        throw sandboxError(e2, this.target, `writing ${abs}`);
      }
    }
  }

  /** Kills and removes the container. Idempotent; never throws for an already-gone container. */
  dispose(): Promise<void> {
    if (!this.disposing) {
      this.disposing = (async () => {
        this.die('disposed');
        try {
          this.socket?.destroy();
        } catch {
          /* already closed */
        }
        try {
          await this.container.remove({ force: true });
        } catch (e) {
          if (!isGoneOrGoing(e)) {
            untrackLive(this);
            throw sandboxError(e, this.target, `removing sandbox ${this.name}`);
          }
          // 409: the engine's own auto-remove (the attach socket just closed) is under way.
          // Disposed means gone, so wait for it rather than return while it still exists.
          await this.waitUntilGone(10_000);
        }
        untrackLive(this);
      })().finally(() => this.onDisposed?.());
    }
    return this.disposing;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.dispose();
  }

  private async waitUntilGone(capMs: number): Promise<void> {
    const deadline = Date.now() + capMs;
    while (Date.now() < deadline) {
      try {
        await this.container.inspect();
      } catch (e) {
        if ((e as { statusCode?: number }).statusCode === 404) return;
      }
      await new Promise((r) => setTimeout(r, 25));
    }
  }
}
