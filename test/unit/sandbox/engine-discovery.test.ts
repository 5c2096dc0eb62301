// Finding the Docker engine without root, as the docker CLI and dockerode do: an explicit host,
// DOCKER_HOST, the CLI's current context, then the local sockets of the system engine, rootless
// Docker, Docker Desktop, Podman and Colima; Windows' named pipe. The error names every place
// looked at.
import * as assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import * as path from 'node:path';
import { WINDOWS_PIPE, engineError, localSocketCandidates, resolveEngineTarget, type EngineProbe } from '../../../src/sandbox/engine';

function probe(
  opts: { sockets?: string[]; denied?: string[]; files?: Record<string, string>; platform?: NodeJS.Platform; home?: string } = {},
): EngineProbe {
  const sockets = new Set(opts.sockets ?? []);
  const denied = new Set(opts.denied ?? []);
  return {
    platform: opts.platform ?? 'linux',
    home: opts.home ?? '/home/u',
    exists: (p) => sockets.has(p),
    accessible: (p) => sockets.has(p) && !denied.has(p),
    readFile: (p) => opts.files?.[p],
  };
}

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

describe('sandbox/engine discovery', () => {
  it('an explicit host, then DOCKER_HOST, win over everything found on disk', () => {
    const p = probe({ sockets: ['/var/run/docker.sock'] });
    assert.equal(resolveEngineTarget('unix:///tmp/a.sock', { DOCKER_HOST: 'unix:///tmp/b.sock' }, p).label, '/tmp/a.sock');
    const t = resolveEngineTarget(undefined, { DOCKER_HOST: 'unix:///tmp/b.sock' }, p);
    assert.deepEqual([t.label, t.via], ['/tmp/b.sock', 'DOCKER_HOST']);
  });

  it('the docker CLI current context: DOCKER_CONTEXT or config.json currentContext, its host read from the context store', () => {
    const meta = (name: string, host: string) => ({
      [path.join('/home/u/.docker/contexts/meta', sha(name), 'meta.json')]: JSON.stringify({
        Name: name,
        Endpoints: { docker: { Host: host } },
      }),
    });
    const files = {
      '/home/u/.docker/config.json': JSON.stringify({ currentContext: 'desktop-linux' }),
      ...meta('desktop-linux', 'unix:///home/u/.docker/desktop/docker.sock'),
      ...meta('rootless', 'unix:///run/user/1000/docker.sock'),
    };
    const fromConfig = resolveEngineTarget(undefined, {}, probe({ files, sockets: ['/var/run/docker.sock'] }));
    assert.deepEqual([fromConfig.label, fromConfig.via], ['/home/u/.docker/desktop/docker.sock', 'docker context desktop-linux']);
    const fromEnv = resolveEngineTarget(undefined, { DOCKER_CONTEXT: 'rootless' }, probe({ files }));
    assert.deepEqual([fromEnv.label, fromEnv.via], ['/run/user/1000/docker.sock', 'docker context rootless']);
    // DOCKER_CONFIG moves the whole store.
    const moved = Object.fromEntries(Object.entries(files).map(([k, v]) => [k.replace('/home/u/.docker', '/cfg'), v]));
    assert.equal(
      resolveEngineTarget(undefined, { DOCKER_CONFIG: '/cfg' }, probe({ files: moved })).label,
      '/home/u/.docker/desktop/docker.sock',
    );
    // The default context is no context: the sockets are looked at.
    const dflt = resolveEngineTarget(undefined, { DOCKER_CONTEXT: 'default' }, probe({ files, sockets: ['/var/run/docker.sock'] }));
    assert.equal(dflt.label, '/var/run/docker.sock');
  });

  it('without a host: the first socket found, preferring one this user may use (rootless Docker, Podman, Docker Desktop)', () => {
    const env = { XDG_RUNTIME_DIR: '/run/user/1000' };
    assert.equal(
      resolveEngineTarget(undefined, env, probe({ sockets: ['/run/user/1000/docker.sock'] })).label,
      '/run/user/1000/docker.sock',
    );
    assert.equal(
      resolveEngineTarget(undefined, env, probe({ sockets: ['/run/user/1000/podman/podman.sock'] })).label,
      '/run/user/1000/podman/podman.sock',
    );
    assert.equal(
      resolveEngineTarget(undefined, env, probe({ sockets: ['/home/u/.docker/run/docker.sock'] })).label,
      '/home/u/.docker/run/docker.sock',
    );
    // The system engine's socket, not open to this user, loses to the user's own Podman socket.
    const both = probe({ sockets: ['/var/run/docker.sock', '/run/user/1000/podman/podman.sock'], denied: ['/var/run/docker.sock'] });
    assert.equal(resolveEngineTarget(undefined, env, both).label, '/run/user/1000/podman/podman.sock');
    // Only a socket this user may not open: it is still the one to report (permission denied).
    assert.equal(
      resolveEngineTarget(undefined, env, probe({ sockets: ['/var/run/docker.sock'], denied: ['/var/run/docker.sock'] })).label,
      '/var/run/docker.sock',
    );
  });

  it('on Windows the named pipe, as dockerode finds Docker Desktop; npipe:// hosts as the docker CLI writes them', () => {
    assert.deepEqual(localSocketCandidates({}, probe({ platform: 'win32' })), [WINDOWS_PIPE]);
    assert.deepEqual(resolveEngineTarget(undefined, {}, probe({ platform: 'win32', sockets: [WINDOWS_PIPE] })).options, {
      socketPath: '//./pipe/docker_engine',
    });
    assert.deepEqual(resolveEngineTarget('npipe:////./pipe/docker_engine', {}).options, { socketPath: '//./pipe/docker_engine' });
  });

  it('nothing found: the system socket is the target, and the error names every place looked at', () => {
    const t = resolveEngineTarget(undefined, { XDG_RUNTIME_DIR: '/run/user/1000' }, probe());
    assert.equal(t.label, '/var/run/docker.sock');
    const e = engineError(Object.assign(new Error('connect ENOENT'), { code: 'ENOENT' }), t);
    assert.match(
      e.message,
      /^Docker is not reachable at \/var\/run\/docker\.sock: the socket does not exist \(looked at: DOCKER_HOST \(not set\), docker context \(default\), \/var\/run\/docker\.sock, \/run\/user\/1000\/docker\.sock, \/home\/u\/\.docker\/run\/docker\.sock, .*\/run\/user\/1000\/podman\/podman\.sock/,
    );
    assert.match(e.hint ?? '', /Docker Desktop/);
    assert.match(e.hint ?? '', /podman\.socket/);
    const denied = engineError(Object.assign(new Error('connect EACCES'), { code: 'EACCES' }), t);
    assert.match(denied.message, /permission denied$/);
    assert.match(denied.hint ?? '', /usermod -aG docker/);
  });
});
