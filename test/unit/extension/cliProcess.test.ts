import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { CliProcess, describeFailure } from '../../../src/extension/cliProcess';
import type { RunEvent } from '../../../src/core/events';

// A stand-in for dist/cli.js that speaks the `train --json` contract: events on stdout, noise on
// stderr, a clean stop on SIGINT (run-stopped, exit 130), or a failure document.
const FAKE = `
const ev = (b) => console.log(JSON.stringify({ schema: 'turnwise/event@1', runId: 'r1', time: new Date().toISOString(), ...b }));
const mode = process.argv[2];
if (mode === 'fail') {
  console.error('progress noise');
  console.log(JSON.stringify({ ok: false, error: { code: 'docker-unavailable', message: 'Docker is not reachable', hint: 'start Docker' } }, null, 2));
  process.exit(1);
}
ev({ type: 'run-started', runDir: '/tmp/r1', iterations: 5, trainTasks: 2, heldoutTasks: 1 });
console.log('stray line');
let i = 0;
const t = setInterval(() => ev({ type: 'phase', iteration: 1, phase: 'rollout', done: ++i, total: 100 }), 20);
process.on('SIGINT', () => { clearInterval(t); ev({ type: 'run-stopped', lastCompleteIteration: 0, reason: 'SIGINT' }); process.exit(130); });
`;

describe('extension: CLI child process', () => {
  let dir: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-cli-'));
    fs.writeFileSync(path.join(dir, 'cli.js'), FAKE);
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('reads events line by line and stops the child cleanly with SIGINT', async function () {
    this.timeout(20000);
    const events: RunEvent[] = [];
    const other: string[] = [];
    const cli = new CliProcess({
      cliPath: path.join(dir, 'cli.js'),
      args: ['run'],
      cwd: dir,
      onEvent: (e) => events.push(e),
      onStdoutLine: (l) => other.push(l),
    });
    while (!events.some((e) => e.type === 'phase')) await new Promise((r) => setTimeout(r, 20));
    const exit = await cli.stop(5000);
    assert.equal(exit.code, 130);
    assert.equal(exit.stopped, true);
    assert.equal(cli.running, false);
    assert.equal(events[0].type, 'run-started');
    assert.equal(events[events.length - 1].type, 'run-stopped');
    assert.deepEqual(other, ['stray line']);
  });

  it("a failed command is described with the CLI's own message and hint", async () => {
    const cli = new CliProcess({ cliPath: path.join(dir, 'cli.js'), args: ['fail'], cwd: dir });
    const exit = await cli.exited;
    assert.equal(exit.code, 1);
    assert.deepEqual(exit.stderrTail, ['progress noise']);
    assert.deepEqual(describeFailure('turnwise train', exit), {
      message: 'turnwise train failed: Docker is not reachable',
      hint: 'start Docker',
    });
  });

  it('a command that cannot start says so', async () => {
    const cli = new CliProcess({ cliPath: 'x', args: [], cwd: dir, nodePath: path.join(dir, 'no-such-node') });
    const exit = await cli.exited;
    assert.match(describeFailure('turnwise train', exit).message, /cannot start .*no-such-node/);
  });
});
