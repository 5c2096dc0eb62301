import * as assert from 'node:assert/strict';
import { containerSpec } from '../../../src/sandbox/container';
import { LABEL, ownerId, ownerState, processStartTime, stateWithoutStat } from '../../../src/sandbox/owner';
import { resolveEngineTarget } from '../../../src/sandbox/engine';
import { baseImageTag, sandboxLanguageFor } from '../../../src/sandbox/images';
import { execFileSync, spawnSync } from 'node:child_process';
import * as path from 'node:path';

describe('sandbox/container spec', () => {
  it('sets every isolation setting and the owner labels', () => {
    const s = containerSpec({ image: 'img', run: 'run 1', rollout: 'r7' }, '123:456', 'hostA');
    const h = s.HostConfig!;
    assert.equal(h.NetworkMode, 'none');
    assert.deepEqual(h.CapDrop, ['ALL']);
    assert.deepEqual(h.SecurityOpt, ['no-new-privileges']);
    assert.equal(h.Memory, 2 * 1024 ** 3);
    assert.equal(h.MemorySwap, h.Memory);
    assert.equal(h.PidsLimit, 256);
    assert.equal(h.NanoCpus, 1e9);
    assert.equal(h.Init, true);
    assert.match(h.Tmpfs!['/tmp'], /size=536870912/);
    // The shell server is root with only CAP_SETUID, CAP_SETGID, CAP_KILL and CAP_SETPCAP; its commands run as 1000:1000.
    assert.equal(s.User, '0:0');
    assert.deepEqual(h.CapAdd, ['SETUID', 'SETGID', 'KILL', 'SETPCAP']);
    assert.ok(s.Env!.includes('TW_UID=1000') && s.Env!.includes('TW_GID=1000') && s.Env!.includes('HOME=/home/agent'));
    assert.deepEqual(s.Labels, { [LABEL.run]: 'run 1', [LABEL.rollout]: 'r7', [LABEL.owner]: '123:456', [LABEL.host]: 'hostA' });
    assert.match(s.name!, /^tw-run-1-[0-9a-f]{8}$/);
    const custom = containerSpec({ image: 'i', run: 'r', limits: { memoryBytes: 1e8, pidsLimit: 32 } });
    assert.equal(custom.HostConfig!.Memory, 1e8);
    assert.equal(custom.HostConfig!.MemorySwap, 1e8);
    assert.equal(custom.HostConfig!.PidsLimit, 32);
  });
});

describe('sandbox/owner', () => {
  it('knows this process is alive and a dead or reused pid is gone', () => {
    const me = ownerId();
    assert.equal(me, `${process.pid}:${processStartTime(process.pid)}`);
    assert.equal(ownerState(me, undefined), 'alive');
    const [pid] = me.split(':');
    assert.equal(ownerState(`${pid}:1`, undefined), 'gone', 'same pid, other start time = a reused pid');
    const child = spawnSync('true');
    assert.equal(ownerState(`${child.pid}:${processStartTime(process.pid)}`, undefined), 'gone');
    assert.equal(ownerState(me, 'some-other-host', 'this-host'), 'unknown');
    assert.equal(ownerState(undefined, undefined), 'gone');
  });

  it('a pid hidden from /proc (hidepid) that the kernel still knows is not reaped', () => {
    // hidepid cannot be mounted in a test; the kernel's answers are stood in for by `kill`.
    const throwing = (code: string) => () => {
      throw Object.assign(new Error(code), { code });
    };
    assert.equal(stateWithoutStat(4242, throwing('EPERM')), 'unknown', "another user's live process");
    assert.equal(stateWithoutStat(4242, throwing('ESRCH')), 'gone');
    assert.equal(
      stateWithoutStat(4242, () => undefined),
      'unknown',
    );
    // And for real: a pid that has exited is gone.
    const child = spawnSync('true');
    assert.equal(stateWithoutStat(child.pid!), 'gone');
  });
});

describe('sandbox/engine targets and languages', () => {
  it('resolves unix, tcp, tls and ssh hosts', () => {
    assert.deepEqual(resolveEngineTarget('', {}).options, { socketPath: '/var/run/docker.sock' });
    assert.deepEqual(resolveEngineTarget('unix:///tmp/d.sock', {}).options, { socketPath: '/tmp/d.sock' });
    assert.deepEqual(resolveEngineTarget(undefined, { DOCKER_HOST: 'tcp://127.0.0.1:2375' }).options, {
      protocol: 'http',
      host: '127.0.0.1',
      port: 2375,
    });
    assert.equal(resolveEngineTarget('ssh://me@box', {}).options.protocol, 'ssh');
    assert.throws(() => resolveEngineTarget('tcp://h:2376', { DOCKER_TLS_VERIFY: '1', DOCKER_CERT_PATH: '/nonexistent' }), /ca\.pem/);
    assert.throws(() => resolveEngineTarget('ftp://x', {}), /unsupported/);
  });

  it('follows the docker CLI on TLS env values and IPv6 hosts', () => {
    // docker turns TLS on for any non-empty DOCKER_TLS_VERIFY (and for DOCKER_TLS), not only '1'.
    for (const env of [{ DOCKER_TLS_VERIFY: 'true' }, { DOCKER_TLS_VERIFY: 'yes' }, { DOCKER_TLS: '1' }]) {
      assert.throws(
        () => resolveEngineTarget('tcp://h:2376', { ...env, DOCKER_CERT_PATH: '/nonexistent' }),
        /ca\.pem/,
        JSON.stringify(env),
      );
    }
    assert.equal(resolveEngineTarget('tcp://h:2375', { DOCKER_TLS_VERIFY: '' }).options.protocol, 'http');
    // URL keeps the brackets of an IPv6 literal; a socket connect to "[::1]" fails with ENOTFOUND.
    assert.deepEqual(resolveEngineTarget('tcp://[::1]:2375', {}).options, { protocol: 'http', host: '::1', port: 2375 });
  });

  it('keeps a port the URL parser would drop as the scheme default', () => {
    assert.equal(resolveEngineTarget('http://h:80', {}).options.port, 80);
    assert.equal(resolveEngineTarget('http://[::1]:80/', {}).options.port, 80);
    assert.equal(resolveEngineTarget('http://h', {}).options.port, 2375);
    assert.equal(resolveEngineTarget('tcp://h:2375', {}).options.port, 2375);
  });

  it('the base image tag is the one scripts/bootstrap-base-image.sh builds (two implementations, one answer)', () => {
    const script = path.join(__dirname, '..', '..', '..', 'scripts', 'bootstrap-base-image.sh');
    const fromScript = execFileSync('bash', [script, '--print-tag']).toString().trim();
    assert.match(fromScript, /^turnwise\/base:bookworm-[0-9a-f]{12}$/);
    assert.equal(baseImageTag(), fromScript);
  });

  it('maps task languages to sandbox images', () => {
    assert.equal(sandboxLanguageFor('python'), 'python');
    assert.equal(sandboxLanguageFor('typescript'), 'node');
    assert.throws(() => sandboxLanguageFor('cobol'), /no sandbox image/);
  });
});
