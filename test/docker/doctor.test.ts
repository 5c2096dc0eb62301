// The sandbox layer's doctor checks against the real engine: the agent tools are found in the
// built Python image, a tool that is not there fails the check, and no container is left behind.
import * as assert from 'node:assert/strict';
import { connectEngine } from '../../src/sandbox/engine';
import { languageImageTag } from '../../src/sandbox/images';
import { agentToolsCheck, sandboxChecks } from '../../src/sandbox/doctor';

describe('doctor: sandbox checks (real engine)', function () {
  this.timeout(60000);
  const { docker } = connectEngine();
  const leftovers = async () => (await docker.listContainers({ all: true, filters: { label: ['turnwise.run=doctor'] } })).length;

  it('docker, sandbox images and agent tools are ok, in that order', async () => {
    const checks = await sandboxChecks();
    assert.deepEqual(
      checks.map((c) => [c.name, c.status]),
      [
        ['docker', 'ok'],
        ['sandbox images', 'ok'],
        ['agent tools', 'ok'],
      ],
      JSON.stringify(checks),
    );
    assert.equal(
      checks[2].detail,
      'python image has tw-test, tw-suspects, tw-show, tw-tokens, tw-edit, tw-cands, tw-apply, turnwise_tools.py',
    );
    assert.equal(await leftovers(), 0);
  });

  it('fails naming a tool the image lacks and one the sandbox user cannot run', async () => {
    const c = await agentToolsCheck(docker, { python: ['/usr/local/bin/tw-test', '/usr/local/bin/tw-nope', '/usr/bin/../../etc/passwd'] });
    assert.equal(c.status, 'fail');
    const image = languageImageTag('python');
    assert.match(c.detail, new RegExp(`/usr/local/bin/tw-nope is missing from ${image.replace(/[.]/g, '\\.')}`));
    assert.match(c.detail, /\/usr\/bin\/\.\.\/\.\.\/etc\/passwd in .* is not executable by the sandbox user/);
    assert.doesNotMatch(c.detail, /tw-test/);
    assert.match(c.fix ?? '', /turnwise images build/);
    assert.equal(await leftovers(), 0);
  });
});
