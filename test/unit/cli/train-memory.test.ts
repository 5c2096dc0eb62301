// `turnwise train` checks its memory plan before any sandbox starts: a plan over the memory the
// run may use (TURNWISE_MEMORY_LIMIT_MB here) is refused with the plan's numbers and the settings
// that fit, leaving no run directory; under the limit the run goes on (to a Docker socket that
// does not exist, where it fails: a real connection failure, no mock).
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from '../../../src/cli/main';

const ROOT = path.join(__dirname, '..', '..', '..');
const WORKSPACE = path.join(ROOT, 'test', 'fixtures', 'py-shop');
const NO_ENGINE = 'unix:///nonexistent/turnwise-test/docker.sock';

async function cli(args: string[]): Promise<{ code: number; out: string }> {
  let out = '';
  const code = await main(args, { out: (t) => void (out += t + '\n'), err: (t) => void (out += t + '\n') });
  return { code, out };
}

describe('cli: train refuses a run that its memory plan says will not fit', function () {
  this.timeout(60_000);
  let tmp: string;
  const saved = { limit: process.env.TURNWISE_MEMORY_LIMIT_MB, engines: process.env.TURNWISE_DOCKER_ENGINES };
  beforeEach(() => {
    delete process.env.TURNWISE_DOCKER_ENGINES;
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-train-memory-'));
  });
  afterEach(() => {
    fs.rmSync(tmp, { recursive: true, force: true });
    for (const [k, v] of [['TURNWISE_MEMORY_LIMIT_MB', saved.limit], ['TURNWISE_DOCKER_ENGINES', saved.engines]] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });

  it('over the limit: refused before any sandbox, naming the plan and the settings that fit; no run directory', async () => {
    process.env.TURNWISE_MEMORY_LIMIT_MB = '1200';
    const runs = path.join(tmp, 'runs');
    fs.writeFileSync(path.join(tmp, 'turnwise.json'), JSON.stringify({ dockerHost: NO_ENGINE, executionProvider: 'cpu', concurrency: 8, updateTokensPerStep: 8192 }));
    const r = await cli(['train', '--workspace', WORKSPACE, '--config', path.join(tmp, 'turnwise.json'), '--runs', runs]);
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, /would not fit in memory: its plan needs [\d,]+ MB over the 1,200 MB of TURNWISE_MEMORY_LIMIT_MB/);
    assert.match(r.out, /update activations [\d,]+ MB/);
    assert.match(r.out, /"updateTokensPerStep": \d+/);
    assert.doesNotMatch(r.out, /check Docker|docker\.sock/);
    assert.ok(!fs.existsSync(runs) || fs.readdirSync(runs).length === 0, 'no run directory');
  });

  it('under the limit the run goes on past the plan (here to the missing Docker engine)', async () => {
    process.env.TURNWISE_MEMORY_LIMIT_MB = '65536';
    fs.writeFileSync(path.join(tmp, 'turnwise.json'), JSON.stringify({ dockerHost: NO_ENGINE, executionProvider: 'cpu' }));
    const r = await cli(['train', '--workspace', WORKSPACE, '--config', path.join(tmp, 'turnwise.json'), '--runs', path.join(tmp, 'runs')]);
    assert.equal(r.code, 1, r.out);
    assert.doesNotMatch(r.out, /would not fit in memory/);
    assert.match(r.out, /nonexistent|Docker|docker/);
  });
});
