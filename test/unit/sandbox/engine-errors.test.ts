// Engine connection failures as a user reads them, against real sockets (no Docker needed).
import * as assert from 'node:assert/strict';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { TurnwiseError } from '../../../src/core/errors';
import { connectEngine, engineInfo } from '../../../src/sandbox/engine';

describe('sandbox/engine errors', function () {
  this.timeout(20000);

  it('a host that answers HTTP but is no Docker engine says so (not "(HTTP code 404) unexpected")', async () => {
    const server = http.createServer((_req, res) => res.writeHead(404).end('not found'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const { docker, target } = connectEngine(`tcp://127.0.0.1:${(server.address() as AddressInfo).port}`);
      await assert.rejects(engineInfo(docker, target, 5000), (e: unknown) => {
        assert.ok(e instanceof TurnwiseError);
        assert.match(e.message, /answered HTTP 404, but not as a Docker engine/);
        assert.doesNotMatch(e.message, /unexpected/);
        assert.match(e.hint ?? '', /DOCKER_HOST/);
        return true;
      });
    } finally {
      server.close();
    }
  });

  it('an ssh engine prints no Node deprecation warning (DEP0170)', async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error & { code?: string }) => warnings.push(`${w.code ?? ''} ${w.message}`);
    process.on('warning', onWarning);
    try {
      const { docker, target } = connectEngine('ssh://nobody@127.0.0.1:1', { requestTimeoutMs: 3000 });
      await assert.rejects(engineInfo(docker, target, 3000), /Docker is not reachable at ssh:\/\/nobody@127.0.0.1:1/);
      await new Promise((r) => setImmediate(r));
      assert.deepEqual(
        warnings.filter((w) => /DEP0170|The URL ssh:/.test(w)),
        [],
      );
    } finally {
      process.off('warning', onWarning);
    }
  });
});
