// Connecting to a Docker engine through dockerode: the local socket, DOCKER_HOST, or an
// explicit host (tcp with TLS, ssh). Every failure becomes a TurnwiseError with the fix.
import Docker from 'dockerode';
import * as fs from 'node:fs';
import { TurnwiseError } from '../core/errors';

export interface EngineTarget {
  /** What a user would recognise: a socket path or a URL. */
  label: string;
  options: Docker.DockerOptions;
}

/** Resolves which engine to talk to: explicit host, else DOCKER_HOST, else the local socket. */
/** The port written in a URL. `URL` drops a scheme's default port (http://h:80 → ''), which is
 * still the port the user asked for. */
function explicitPort(spec: string): number | undefined {
  const m = /^[a-z][a-z0-9+.-]*:\/\/(?:[^@/]*@)?(?:\[[^\]]*\]|[^:/]*):(\d+)(?:[/?#]|$)/i.exec(spec);
  return m ? Number(m[1]) : undefined;
}

export function resolveEngineTarget(host?: string, env: NodeJS.ProcessEnv = process.env): EngineTarget {
  const spec = host?.trim() || env.DOCKER_HOST?.trim() || '';
  if (spec === '' || spec.startsWith('unix://') || spec.startsWith('/')) {
    const socketPath = spec === '' ? '/var/run/docker.sock' : spec.replace(/^unix:\/\//, '');
    return { label: socketPath, options: { socketPath } };
  }
  let url: URL;
  try {
    url = new URL(spec);
  } catch {
    throw new TurnwiseError('invalid-input', `cannot understand Docker host ${JSON.stringify(spec)}`, {
      hint: 'use unix:///path/to/docker.sock, tcp://HOST:PORT or ssh://USER@HOST',
    });
  }
  if (url.protocol === 'ssh:') {
    return {
      label: spec,
      options: { protocol: 'ssh', host: url.hostname, port: url.port ? Number(url.port) : 22, username: url.username || undefined },
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
    return { label: spec, options };
  }
  throw new TurnwiseError('invalid-input', `unsupported Docker host scheme ${url.protocol} in ${spec}`, {
    hint: 'use unix://, tcp:// or ssh://',
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
    return new TurnwiseError('docker-unreachable', `${target.label} answered HTTP ${err.statusCode}, but not as a Docker engine: no Docker API there`, {
      hint: 'check the host and port of turnwise.docker.host / DOCKER_HOST (the engine listens on 2375, or 2376 with TLS), or unset it to use the local socket',
      cause: e,
    });
  }
  const why =
    code === 'ENOENT'
      ? 'the socket does not exist'
      : code === 'ECONNREFUSED'
        ? 'nothing is listening there'
        : code === 'EACCES'
          ? 'permission denied'
          : err?.message ?? String(e);
  const hint =
    code === 'EACCES'
      ? 'add your user to the docker group (then log in again), or run with access to the socket'
      : 'start the Docker engine (e.g. `sudo systemctl start docker`), or set turnwise.docker.host / DOCKER_HOST to a running engine';
  return new TurnwiseError('docker-unreachable', `Docker is not reachable at ${target.label}: ${why}`, { hint, cause: e });
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
