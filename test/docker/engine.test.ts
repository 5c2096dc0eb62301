// The docker tier's ground floor: a real engine runs a command in a container from the
// sandbox base image, with no network, and the doctor sees the engine and the image.
import * as assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { connectEngine } from '../../src/sandbox/engine';
import { baseImageTag } from '../../src/sandbox/images';
import { main } from '../../src/cli/main';
import type { DoctorReport } from '../../src/train/doctor';

describe('docker engine (real)', function () {
  this.timeout(60000);
  const { docker } = connectEngine();

  it('runs a command in a base-image container with no network: output and exit code come back', async () => {
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    let out = '';
    let err = '';
    stdout.on('data', (d) => (out += d));
    stderr.on('data', (d) => (err += d));
    const script = 'echo hello from $(id -un); cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d " "; echo oops >&2; exit 7';
    const [result, container] = await docker.run(baseImageTag(), ['bash', '-c', script], [stdout, stderr], {
      Tty: false,
      Labels: { 'turnwise.run': 'test-engine' },
      HostConfig: { NetworkMode: 'none', AutoRemove: false },
    });
    try {
      assert.equal(result.StatusCode, 7);
      const lines = out.trim().split('\n');
      assert.equal(lines[0], 'hello from root');
      // Only the loopback interface exists inside.
      assert.deepEqual(lines.slice(1), ['lo']);
      assert.equal(err.trim(), 'oops');
    } finally {
      await container.remove({ force: true });
    }
  });

  it('doctor --json reports the engine and the base image as ok and exits 0', async () => {
    let out = '';
    const code = await main(['doctor', '--json'], { out: (t) => (out += t), err: () => undefined });
    const report = JSON.parse(out) as DoctorReport;
    const byName = Object.fromEntries(report.checks.map((c) => [c.name, c]));
    assert.equal(byName['docker'].status, 'ok', byName['docker'].detail);
    assert.match(byName['docker'].detail, /^Docker \d+\.\d+/);
    assert.equal(byName['sandbox images'].status, 'ok', byName['sandbox images'].detail);
    assert.equal(code, 0);
    assert.equal(report.ok, true);
  });
});
