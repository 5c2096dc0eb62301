import * as assert from 'node:assert/strict';
import { TurnwiseError } from '../../../src/core/errors';
import { sandboxError } from '../../../src/sandbox/errors';
import { parseEngineSpecs } from '../../../src/sandbox/pool';

const target = { label: '/var/run/docker.sock', options: {} };

describe('sandbox/errors', () => {
  it('maps engine failures to the three user-facing cases, each with a fix', () => {
    const disk = sandboxError(
      Object.assign(new Error('(HTTP code 500) server error - write /var/lib/docker/tmp/x: no space left on device'), { statusCode: 500 }),
      target,
      'building x',
    );
    assert.equal(disk.code, 'docker-out-of-disk');
    assert.match(disk.hint!, /sandbox prune --images/);
    const missing = sandboxError(
      Object.assign(new Error('(HTTP code 404) no such container - No such image: turnwise/x:1'), { statusCode: 404 }),
      target,
      'creating',
      'turnwise/x:1',
    );
    assert.equal(missing.code, 'docker-image-missing');
    assert.match(missing.message, /turnwise\/x:1/);
    assert.match(missing.hint!, /turnwise images build/);
    const down = sandboxError(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }), target, 'listing');
    assert.equal(down.code, 'docker-unreachable');
    assert.match(down.message, /nothing is listening/);
    const other = sandboxError(Object.assign(new Error('(HTTP code 500) server error - boom'), { statusCode: 500 }), target, 'starting y');
    assert.equal(other.code, 'sandbox-failed');
    assert.equal(other.message, 'Docker failed while starting y: boom');
    const passthrough = new TurnwiseError('not-found', 'x');
    assert.equal(sandboxError(passthrough, target, 'z'), passthrough);
  });

  it('reads the multi-engine setting as a string or as objects, and rejects nonsense', () => {
    assert.deepEqual(parseEngineSpecs('unix:///var/run/docker.sock*8, ssh://me@box*16 tcp://h:2376'), [
      { host: 'unix:///var/run/docker.sock', capacity: 8 },
      { host: 'ssh://me@box', capacity: 16 },
      { host: 'tcp://h:2376', capacity: undefined },
    ]);
    assert.deepEqual(parseEngineSpecs([{ host: 'tcp://a:1', capacity: 2 }, 'ssh://b']), [
      { host: 'tcp://a:1', capacity: 2 },
      { host: 'ssh://b', capacity: undefined },
    ]);
    assert.equal(parseEngineSpecs(''), undefined);
    assert.throws(() => parseEngineSpecs([{ host: 'x', capacity: 0 }]), /capacity/);
    assert.throws(() => parseEngineSpecs([42]), /unexpected entry/);
  });
});
