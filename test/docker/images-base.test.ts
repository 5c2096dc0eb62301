// Sandbox images FROM either base: the public base (debian:bookworm-slim) when the engine has it
// or a registry gives it, the base bootstrapped from Debian packages when no registry answers,
// and the image --base names. The registry path is exercised without a registry: the
// bootstrapped base tagged under the public name is resolved locally, never pulled. Every image
// built must hold what the sandboxes rely on: python3, pytest, node, git, the `agent` user.
import * as assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import type Docker from 'dockerode';
import { connectEngine } from '../../src/sandbox/engine';
import {
  BASE_LABEL,
  PUBLIC_BASE_IMAGE,
  baseImageTag,
  chooseBase,
  ensureLanguageImage,
  imageExists,
  type SandboxLanguage,
} from '../../src/sandbox/images';

const PROBE = [
  'set -e',
  'echo "user $(id -un) $(id -u)"',
  'python3 -m pytest --version 2>&1 | head -1',
  'node --version',
  'git --version',
  'test -w /workspace && echo "workspace writable"',
].join('; ');

async function probe(docker: Docker, image: string): Promise<string> {
  const stdout = new PassThrough();
  let out = '';
  stdout.on('data', (d) => (out += d));
  const [result, container] = await docker.run(image, ['bash', '-c', PROBE], [stdout, stdout], {
    Tty: false,
    Labels: { 'turnwise.run': 'test-images-base' },
    HostConfig: { NetworkMode: 'none', AutoRemove: false },
  });
  await container.remove({ force: true });
  assert.equal(result.StatusCode, 0, out);
  return out;
}

function assertSandboxReady(out: string, image: string): void {
  assert.match(out, /^user agent 1000$/m, `${image}: ${out}`);
  assert.match(out, /^pytest \d+/m, `${image}: ${out}`);
  assert.match(out, /^v\d+\.\d+/m, `${image}: ${out}`);
  assert.match(out, /^git version /m, `${image}: ${out}`);
  assert.match(out, /^workspace writable$/m, `${image}: ${out}`);
}

describe('sandbox images from a registry base or the bootstrapped one (real engine)', function () {
  this.timeout(300000);
  const { docker, target } = connectEngine();
  const boot = baseImageTag();
  const suffix = `${process.pid}-${Date.now().toString(36)}`;
  const made: string[] = [];
  let taggedPublic = false;

  before(async function () {
    if (!(await imageExists(docker, boot))) this.skip();
    if (!(await imageExists(docker, PUBLIC_BASE_IMAGE))) {
      // The public name resolves locally, as a pulled debian:bookworm-slim would.
      const [repo, tag] = PUBLIC_BASE_IMAGE.split(':');
      await docker.getImage(boot).tag({ repo, tag });
      taggedPublic = true;
    }
  });

  after(async () => {
    for (const t of made)
      await docker
        .getImage(t)
        .remove({ force: true })
        .catch(() => undefined);
    // Untags only: the image stays under its bootstrapped name.
    if (taggedPublic)
      await docker
        .getImage(PUBLIC_BASE_IMAGE)
        .remove()
        .catch(() => undefined);
  });

  for (const language of ['python', 'node'] as SandboxLanguage[]) {
    it(`${language}: builds FROM ${PUBLIC_BASE_IMAGE} when the engine has it, says why, and the image is a working sandbox`, async () => {
      const tag = `turnwise-test/sandbox-${language}:registry-${suffix}`;
      made.push(tag);
      const lines: string[] = [];
      const r = await ensureLanguageImage(docker, target, language, (l) => lines.push(l), { tag, bootstrap: false });
      assert.equal(r.built, true);
      assert.equal(r.base, PUBLIC_BASE_IMAGE);
      assert.match(r.baseWhy ?? '', /debian:bookworm-slim is on /);
      assert.ok(
        lines.some((l) => l.startsWith(`base ${PUBLIC_BASE_IMAGE}: `)),
        lines.join('\n'),
      );
      const labels = (await docker.getImage(tag).inspect()).Config.Labels ?? {};
      assert.equal(labels[BASE_LABEL], PUBLIC_BASE_IMAGE);
      assertSandboxReady(await probe(docker, tag), tag);
    });
  }

  it('offline (the public base cannot be pulled) it builds FROM the bootstrapped base and says the registry did not answer', async () => {
    const tag = `turnwise-test/sandbox-python:offline-${suffix}`;
    made.push(tag);
    // Port 1 on loopback: the pull is refused at once, as with no registry in reach.
    const unreachable = '127.0.0.1:1/turnwise-test/no-registry:bookworm-slim';
    const r = await ensureLanguageImage(docker, target, 'python', () => undefined, { tag, bootstrap: false, publicBase: unreachable });
    assert.equal(r.base, boot);
    assert.match(
      r.baseWhy ?? '',
      /^no registry gave 127\.0\.0\.1:1\/turnwise-test\/no-registry:bookworm-slim \(.+\): using the base bootstrapped from Debian packages$/,
    );
    assertSandboxReady(await probe(docker, tag), tag);
  });

  it('--base names the image: used as given, an image built FROM another base is rebuilt, and one that cannot be pulled fails naming it', async () => {
    const tag = `turnwise-test/sandbox-node:option-${suffix}`;
    made.push(tag);
    const first = await ensureLanguageImage(docker, target, 'node', () => undefined, { tag, base: PUBLIC_BASE_IMAGE });
    assert.equal(first.built, true);
    const same = await ensureLanguageImage(docker, target, 'node', () => undefined, { tag, base: PUBLIC_BASE_IMAGE });
    assert.equal(same.built, false, 'the same base: the image is reused');
    const lines: string[] = [];
    const other = await ensureLanguageImage(docker, target, 'node', (l) => lines.push(l), { tag, base: boot });
    assert.equal(other.built, true, 'another base: rebuilt');
    assert.ok(
      lines.some((l) => l.includes(`was built FROM ${PUBLIC_BASE_IMAGE}; rebuilding it FROM ${boot}`)),
      lines.join('\n'),
    );
    assert.equal((await docker.getImage(tag).inspect()).Config.Labels?.[BASE_LABEL], boot);
    const choice = await chooseBase(docker, target, { base: boot });
    assert.deepEqual([choice.source, choice.image], ['option', boot]);
    await assert.rejects(
      ensureLanguageImage(docker, target, 'node', () => undefined, {
        tag: `turnwise-test/sandbox-node:never-${suffix}`,
        base: '127.0.0.1:1/turnwise-test/mirror:bookworm-slim',
      }),
      (e: Error & { hint?: string }) =>
        /127\.0\.0\.1:1\/turnwise-test\/mirror:bookworm-slim is not on .* could not be pulled/.test(e.message) &&
        /docker pull/.test(e.hint ?? ''),
    );
  });
});
