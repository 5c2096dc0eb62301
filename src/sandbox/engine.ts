// Connecting to a Docker engine through dockerode: an explicit host (tcp with TLS, ssh),
// DOCKER_HOST, the docker CLI's current context, or the first local socket found (the system
// engine, rootless Docker, Docker Desktop, Podman's Docker-compatible socket, Windows' named
// pipe). None of it needs root: a user in the `docker` group, or owning the socket, is enough.
// Every failure becomes a TurnwiseError with the fix and the places that were looked at.
import Docker from 'dockerode';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { TurnwiseError } from '../core/errors';

export interface EngineTarget {
  /** What a user would recognise: a socket path or a URL. */
  label: string;
  options: Docker.DockerOptions;
  /** How the engine was found ("DOCKER_HOST", "docker context rootless", "socket found", …). */
  via?: string;
  /** The places looked at when no host was given: named in the error when none answers. */
  tried?: string[];
}

/** What engine discovery reads of the machine; tests give their own. */
export interface EngineProbe {
  platform: NodeJS.Platform;
  home: string;
  exists(p: string): boolean;
  /** True when this user may read and write the socket. */
  accessible(p: string): boolean;
  readFile(p: string): string | undefined;
}

const realProbe = (): EngineProbe => ({
  platform: process.platform,
  home: os.homedir(),
  exists: (p) => {
    try {
      return fs.statSync(p).isSocket() || process.platform === 'win32';
    } catch {
      return false;
    }
  },
  accessible: (p) => {
    try {
      fs.accessSync(p, fs.constants.R_OK | fs.constants.W_OK);
      return true;
    } catch {
      return false;
    }
  },
  readFile: (p) => {
    try {
      return fs.readFileSync(p, 'utf8');
    } catch {
      return undefined;
    }
  },
});

/** Windows' Docker Desktop engine, as dockerode (docker-modem) reaches it by default. */
export const WINDOWS_PIPE = '//./pipe/docker_engine';

/**
 * The docker CLI's current context (DOCKER_CONTEXT, else `currentContext` in the CLI's
 * config.json) and its engine address, read from the context store as the CLI does:
 * DOCKER_CONFIG/contexts/meta/<sha256 of the name>/meta.json. `default` means no context.
 */
export function dockerContextHost(env: NodeJS.ProcessEnv, probe: EngineProbe): { name: string; host?: string } | undefined {
  const configDir = env.DOCKER_CONFIG || path.join(probe.home, '.docker');
  let name = env.DOCKER_CONTEXT?.trim();
  if (!name) {
    const config = probe.readFile(path.join(configDir, 'config.json'));
    try {
      name = config ? (JSON.parse(config) as { currentContext?: string }).currentContext : undefined;
    } catch {
      name = undefined;
    }
  }
  if (!name || name === 'default') return undefined;
  const meta = probe.readFile(path.join(configDir, 'contexts', 'meta', createHash('sha256').update(name).digest('hex'), 'meta.json'));
  try {
    const host = meta ? (JSON.parse(meta) as { Endpoints?: { docker?: { Host?: string } } }).Endpoints?.docker?.Host : undefined;
    return { name, host: host || undefined };
  } catch {
    return { name };
  }
}

/**
 * Local sockets in the order they are tried: the system engine, rootless Docker, Docker
 * Desktop (macOS, Linux), Podman (rootless, then rootful, then a Podman machine on macOS),
 * Colima. On Windows, Docker Desktop's named pipe.
 */
export function localSocketCandidates(env: NodeJS.ProcessEnv, probe: EngineProbe): string[] {
  if (probe.platform === 'win32') return [WINDOWS_PIPE];
  const xdg = env.XDG_RUNTIME_DIR || (typeof process.getuid === 'function' ? `/run/user/${process.getuid()}` : '');
  const h = probe.home;
  return [
    '/var/run/docker.sock',
    ...(xdg ? [`${xdg}/docker.sock`] : []),
    `${h}/.docker/run/docker.sock`,
    `${h}/.docker/desktop/docker.sock`,
    ...(xdg ? [`${xdg}/podman/podman.sock`] : []),
    '/run/podman/podman.sock',
    `${h}/.local/share/containers/podman/machine/podman.sock`,
    `${h}/.colima/default/docker.sock`,
  ];
}

/** Resolves which engine to talk to: explicit host, else DOCKER_HOST, else the CLI's context, else a local socket. */
/** The port written in a URL. `URL` drops a scheme's default port (http://h:80 → ''), which is
 * still the port the user asked for. */
function explicitPort(spec: string): number | undefined {
  const m = /^[a-z][a-z0-9+.-]*:\/\/(?:[^@/]*@)?(?:\[[^\]]*\]|[^:/]*):(\d+)(?:[/?#]|$)/i.exec(spec);
  return m ? Number(m[1]) : undefined;
}

export function resolveEngineTarget(host?: string, env: NodeJS.ProcessEnv = process.env, probe: EngineProbe = realProbe()): EngineTarget {
  if (host?.trim()) return targetOf(host.trim(), env, 'turnwise.docker.host / --docker-host');
  if (env.DOCKER_HOST?.trim()) return targetOf(env.DOCKER_HOST.trim(), env, 'DOCKER_HOST');
  const tried = ['DOCKER_HOST (not set)'];
  const ctx = dockerContextHost(env, probe);
  if (ctx?.host) return targetOf(ctx.host, env, `docker context ${ctx.name}`);
  tried.push(ctx ? `docker context ${ctx.name} (no engine address in its metadata)` : 'docker context (default)');
  const candidates = localSocketCandidates(env, probe);
  tried.push(...candidates);
  const present = candidates.filter((c) => probe.exists(c));
  // A socket this user may use wins over one it may not (the system engine's, for a user
  // outside the `docker` group who runs rootless Docker or Podman).
  const socketPath = present.find((c) => probe.accessible(c)) ?? present[0] ?? candidates[0];
  const via = present.length ? 'socket found' : 'no socket found';
  return { label: socketPath, options: { socketPath }, via, tried };
}

function targetOf(spec: string, env: NodeJS.ProcessEnv, via: string): EngineTarget {
  if (spec.startsWith('unix://') || spec.startsWith('/') || spec.startsWith('npipe://') || spec.startsWith('//./pipe/')) {
    // npipe:////./pipe/docker_engine (the docker CLI's spelling) is the pipe //./pipe/docker_engine.
    const socketPath = spec.replace(/^unix:\/\//, '').replace(/^npipe:\/\//, '');
    return { label: socketPath, options: { socketPath }, via };
  }
  let url: URL;
  try {
    url = new URL(spec);
  } catch {
    throw new TurnwiseError('invalid-input', `cannot understand Docker host ${JSON.stringify(spec)}`, {
      hint: 'use unix:///path/to/docker.sock, npipe:////./pipe/docker_engine, tcp://HOST:PORT or ssh://USER@HOST',
    });
  }
  if (url.protocol === 'ssh:') {
    return {
      label: spec,
      options: { protocol: 'ssh', host: url.hostname, port: url.port ? Number(url.port) : 22, username: url.username || undefined },
      via,
    };
  }
  if (url.protocol === 'tcp:' || url.protocol === 'http:' || url.protocol === 'https:') {
    // As the docker CLI: any non-empty DOCKER_TLS_VERIFY (or DOCKER_TLS) turns TLS on.
    const tls = url.protocol === 'https:' || !!env.DOCKER_TLS_VERIFY || !!env.DOCKER_TLS;
    const options: Docker.DockerOptions = {
      protocol: tls ? 'https' : 'http',
      // URL keeps the brackets of an IPv6 literal ("[::1]"); a socket needs the bare address.
      host: url.hostname.replace(/^\[(.*)\]$/, '$1'),
      port: url.port ? Number(url.port) : (explicitPort(spec) ?? (tls ? 2376 : 2375)),
    };
    if (tls) {
      const dir = env.DOCKER_CERT_PATH || `${env.HOME ?? ''}/.docker`;
      const read = (f: string) => {
        try {
          return fs.readFileSync(`${dir}/${f}`);
        } catch {
          throw new TurnwiseError('docker-unreachable', `TLS is on for ${spec} but ${dir}/${f} cannot be read`, {
            hint: 'set DOCKER_CERT_PATH to the folder holding ca.pem, cert.pem and key.pem',
          });
        }
      };
      Object.assign(options, { ca: read('ca.pem'), cert: read('cert.pem'), key: read('key.pem') });
    }
    return { label: spec, options, via };
  }
  throw new TurnwiseError('invalid-input', `unsupported Docker host scheme ${url.protocol} in ${spec}`, {
    hint: 'use unix://, tcp:// or ssh:// (npipe:// for a Windows named pipe)',
  });
}

/**
 * A client for the engine. `requestTimeoutMs` bounds every request at the socket, so an engine
 * that accepts connections and never answers (a wedged dockerd, a firewalled tcp:// host) cannot
 * keep the process alive; only for short-lived clients (doctor, the start-up reaper): it would
 * also cut the long-lived attach streams of sandboxes.
 */
export function connectEngine(host?: string, opts: { requestTimeoutMs?: number } = {}): { docker: Docker; target: EngineTarget } {
  const target = resolveEngineTarget(host);
  if (target.options.protocol === 'ssh') silenceModemSshUrlWarning();
  const options = opts.requestTimeoutMs ? { ...target.options, timeout: opts.requestTimeoutMs } : target.options;
  return { docker: new Docker(options), target };
}

let sshWarningFiltered = false;

/**
 * docker-modem builds an ssh request's URL from the bare host name with the legacy url.parse,
 * which makes Node print DEP0170 ("The URL ssh:host:22host is invalid") on every request. The
 * URL is never dialled (the ssh agent carries the request), so that one warning is dropped;
 * every other warning is printed as Node would.
 */
function silenceModemSshUrlWarning(): void {
  if (sshWarningFiltered) return;
  sshWarningFiltered = true;
  const emit = process.emitWarning.bind(process);
  process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
    const text = typeof warning === 'string' ? warning : warning.message;
    const code = typeof rest[0] === 'object' && rest[0] ? (rest[0] as { code?: string }).code : rest[1];
    if ((code === 'DEP0170' || (rest[0] === 'DeprecationWarning' && /^The URL ssh:/.test(text))) && /^The URL ssh:/.test(text)) return;
    (emit as (...a: unknown[]) => void)(warning, ...rest);
  }) as typeof process.emitWarning;
}

/** Maps a low-level connection error to a message that says what to do. */
export function engineError(e: unknown, target: EngineTarget): TurnwiseError {
  const err = e as NodeJS.ErrnoException & { statusCode?: number };
  const code = err?.code ?? '';
  if (typeof err?.statusCode === 'number' && err.statusCode !== 500 && !code) {
    // Something answered HTTP, but not as a Docker engine would: dockerode's text is "(HTTP code 404) unexpected".
    return new TurnwiseError(
      'docker-unreachable',
      `${target.label} answered HTTP ${err.statusCode}, but not as a Docker engine: no Docker API there`,
      {
        hint: 'check the host and port of turnwise.docker.host / DOCKER_HOST (the engine listens on 2375, or 2376 with TLS), or unset it to use the local socket',
        cause: e,
      },
    );
  }
  const why =
    code === 'ENOENT'
      ? 'the socket does not exist'
      : code === 'ECONNREFUSED'
        ? 'nothing is listening there'
        : code === 'EACCES'
          ? 'permission denied'
          : (err?.message ?? String(e));
  const hint =
    code === 'EACCES'
      ? 'add your user to the docker group (`sudo usermod -aG docker $USER`, then log in again), or use rootless Docker or Podman (`systemctl --user start podman.socket`) and set DOCKER_HOST to its socket'
      : 'start the Docker engine (Docker Desktop; `sudo systemctl start docker`; rootless: `systemctl --user start docker`; Podman: `systemctl --user start podman.socket`), or set turnwise.docker.host / DOCKER_HOST to a running engine';
  const looked = target.tried && (code === 'ENOENT' || code === 'ECONNREFUSED') ? ` (looked at: ${target.tried.join(', ')})` : '';
  return new TurnwiseError('docker-unreachable', `Docker is not reachable at ${target.label}: ${why}${looked}`, { hint, cause: e });
}

export interface EngineInfo {
  target: string;
  version: string;
  apiVersion: string;
  os: string;
}

/** Pings the engine and reads its version; throws a docker-unreachable error otherwise. */
export async function engineInfo(docker: Docker, target: EngineTarget, timeoutMs = 5000): Promise<EngineInfo> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error(`no answer within ${timeoutMs} ms`), { code: 'ETIMEDOUT' })), timeoutMs);
  });
  try {
    const v = await Promise.race([docker.version(), timeout]);
    return { target: target.label, version: v.Version, apiVersion: v.ApiVersion, os: `${v.Os}/${v.Arch}` };
  } catch (e) {
    throw engineError(e, target);
  } finally {
    clearTimeout(timer);
  }
}
