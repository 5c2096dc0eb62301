// Docker tier: `bench transfer` with an RL budget that ends before the run's next scheduled
// evaluation (evalEvery 0): the run's own time budget (maxMinutes) evaluates its last iteration
// and stops there, so the "after" figures are the end of RL and pair episode by episode with the
// "before" ones. The
// panel's first repository is stood in for by the demo workspace, unpacked in a cache of the
// test's own (the bench reads an unpacked tree whose stamp matches and fetches nothing).
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { RunDir } from '../../src/core/run';
import { benchTransfer } from '../../src/bench/transfer';
import { TRANSFER_PANEL } from '../../src/tasks/panel';

const root = path.join(__dirname, '..', '..');

describe('docker: bench transfer, an RL budget that stops between evaluations', function () {
  this.timeout(900_000);
  let cache: string;
  before(() => {
    cache = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-transfer-'));
    const repo = TRANSFER_PANEL[0];
    fs.mkdirSync(path.join(cache, 'src'), { recursive: true });
    fs.cpSync(path.join(root, 'examples', 'demo-python'), path.join(cache, 'src', repo.dir), { recursive: true });
    fs.writeFileSync(path.join(cache, 'src', `.${repo.dir}.sha256`), repo.sha256);
  });
  after(() => fs.rmSync(cache, { recursive: true, force: true }));

  it("the budget (the run's maxMinutes) stops the run after an iteration evalEvery would not evaluate, and that iteration is evaluated", async () => {
    const log: string[] = [];
    const r = await benchTransfer({
      model: path.join(root, 'models', 'turnwise-tiny'),
      repos: [TRANSFER_PANEL[0].name],
      minutes: 0.001,
      cacheDir: cache,
      // Another estimator than the default: the run trains with it and the result says so.
      estimator: 'grpo',
      config: {
        maxTasks: 6,
        heldoutFraction: 0.34,
        iterations: 50,
        tasksPerIteration: 1,
        groupSize: 2,
        branchEpisodes: 1,
        maxTurns: 2,
        concurrency: 2,
        maxActionTokens: 32,
        evalSamples: 1,
        evalEvery: 0,
        minibatches: 1,
      },
      onProgress: (m) => log.push(m),
    });
    const res = r.repos[0];
    assert.equal(res.error, undefined, res.error);
    assert.ok(res.heldout_tasks >= 1);
    assert.equal(res.rl_iterations, 1, 'the budget stopped the run after its first RL iteration');
    assert.ok(
      log.some((m) => m.includes('RL budget of 0.001 min reached after iteration 1')),
      log.join('\n'),
    );
    // The run itself ended on an evaluation: iteration 1's held-out episodes are in its directory,
    // and it says stopped (resumable), not finished.
    const run = RunDir.open(res.run_dir!);
    assert.equal(r.estimator, 'grpo');
    assert.equal(run.readConfig<{ estimator: string }>()?.estimator, 'grpo');
    assert.equal(run.readStatus()?.state, 'stopped');
    assert.equal(run.lastCompleteIteration(), 1);
    assert.equal(run.readTrajectories(1, 'heldout').length, 2 * res.heldout_tasks);
    assert.equal(typeof run.readMetrics()[1]['heldout/resolved'], 'number');
    assert.ok(res.before && res.after, 'before and after figures');
    assert.equal(res.after!.greedy.episodes, res.heldout_tasks);
    assert.equal(res.after!.sampled.episodes, res.heldout_tasks);
    // Every episode of the last checkpoint has its twin at the start (same task and seed).
    assert.equal(res.paired!.greedy.pairs, res.heldout_tasks);
    assert.equal(res.paired!.sampled.pairs, res.heldout_tasks);
    assert.equal(r.totals.after_tasks_resolved, res.after!.tasks_resolved);
  });
});
