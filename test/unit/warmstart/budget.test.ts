// The warm start's --minutes budget: one too small for a single training step is refused with
// the step's measured length and nothing is written to --out (it used to run the step, the
// final evaluation, write a model and log "0 tok/s"). Real trainer on ONNX Runtime. The budget
// here (60 ms) is far below any step of the tiny model (seconds), so the outcome does not hang
// on the machine's speed.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { warmstart } from '../../../src/warmstart/run';
import { checkBudget, lrAt } from '../../../src/warmstart/config';

describe('warmstart: the minutes budget', function () {
  this.timeout(300_000);
  let tmp: string;
  beforeEach(() => (tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-ws-budget-'))));
  afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('a budget shorter than one step is refused, saying how long a step took; --out is not created', async () => {
    const out = path.join(tmp, 'model');
    await assert.rejects(
      warmstart({ out, minutes: 0.001, seed: 0, poolSize: 40, evalCases: 4, settings: { provider: 'cpu' } }),
      (e: Error & { hint?: string }) =>
        /a warm-start budget of 0\.001 min is shorter than one training step here \(the first took \d+\.\d+ min/.test(e.message) &&
        /give --minutes of at least \d+/.test(e.hint ?? ''),
    );
    assert.equal(fs.existsSync(out), false, 'nothing written to --out');
    assert.equal(fs.existsSync(path.join(tmp, 'model.warmstart-log.jsonl')), false, 'no log row either');
  });

  // A budget of several steps: training stops before a step that would end past it (within one
  // step), and the closing row's throughput is the training phase's (it logged 0 tok/s).
  it("a budget of several steps is kept to within a step, and the closing row reports the phase's tokens/s", async () => {
    const out = path.join(tmp, 'model');
    const budgetMs = 0.2 * 60_000;
    const r = await warmstart({
      out,
      minutes: 0.2,
      seed: 0,
      poolSize: 40,
      evalCases: 2,
      rows: 2,
      rowTokens: 128,
      settings: { provider: 'cpu' },
    });
    assert.ok(r.steps >= 3, `${r.steps} steps`);
    const last = r.log[r.log.length - 1];
    assert.ok(last.tokens_per_s > 0 && Number.isFinite(last.tokens_per_s), `closing row: ${last.tokens_per_s} tok/s`);
    assert.equal(last.tokens, r.tokens);
    // The closing row's rate is tokens over the training phase's time: that time is the phase's length.
    const trainMs = (r.tokens / last.tokens_per_s) * 1000;
    const perStep = trainMs / r.steps;
    assert.ok(
      trainMs <= budgetMs + 2 * perStep + 500,
      `training ran ${Math.round(trainMs)} ms for a ${budgetMs} ms budget (${Math.round(perStep)} ms a step)`,
    );
    // It ends at the schedule planned from its first steps' speed, or at the budget if slower.
    const planned = JSON.parse(fs.readFileSync(path.join(out, 'warmstart.json'), 'utf8')).phases.at(-1).schedule_steps;
    assert.ok(
      r.steps === planned || trainMs >= budgetMs - 3 * perStep - 500,
      `training stopped early: ${Math.round(trainMs)} ms of ${budgetMs}, ${r.steps} of ${planned} planned steps`,
    );
    assert.ok(fs.existsSync(path.join(out, 'warmstart.json')));
  });

  // The schedule follows the step, not the clock: the same --steps gives the same rates on any
  // machine at any load (an evaluation every step logs each step's rate here).
  it('--steps: the learning rate follows step / steps, the warm start ends after them, and warmstart.json records the schedule', async () => {
    const out = path.join(tmp, 'model');
    const r = await warmstart({
      out,
      steps: 4,
      seed: 0,
      poolSize: 40,
      evalCases: 2,
      rows: 2,
      rowTokens: 128,
      peakLr: 1e-3,
      evalEveryMin: 0,
      settings: { provider: 'cpu' },
    });
    assert.equal(r.steps, 4);
    const rows = r.log.filter((x) => x.lr > 0);
    assert.deepEqual(
      rows.map((x) => x.step),
      [1, 2, 3, 4],
    );
    rows.forEach((x) => assert.equal(x.lr, lrAt((x.step - 1) / 4, { peak: 1e-3, floor: 5e-5, warmup: 0.04 }), `step ${x.step}`));
    const rec = JSON.parse(fs.readFileSync(path.join(out, 'warmstart.json'), 'utf8'));
    assert.equal(rec.phases.at(-1).schedule_steps, 4);
    assert.equal(rec.phases.at(-1).steps, 4);
  });

  it('noSed: the closing evaluation measures simulated episodes in the numbered form, the only form it trains', async () => {
    const out = path.join(tmp, 'model');
    const r = await warmstart({
      out,
      steps: 1,
      seed: 0,
      poolSize: 40,
      evalCases: 2,
      rows: 2,
      rowTokens: 128,
      evalEveryMin: 0,
      noSed: true,
      settings: { provider: 'cpu' },
    });
    const last = r.log.at(-1)!;
    assert.equal(typeof last.numbered_episode_fix, 'number', JSON.stringify(last));
  });

  it('a time budget alone plans the schedule from the first steps and records it; no length at all is refused', async () => {
    const out = path.join(tmp, 'model');
    const r = await warmstart({
      out,
      minutes: 0.25,
      seed: 0,
      poolSize: 40,
      evalCases: 2,
      rows: 2,
      rowTokens: 128,
      settings: { provider: 'cpu' },
    });
    const rec = JSON.parse(fs.readFileSync(path.join(out, 'warmstart.json'), 'utf8'));
    const planned = rec.phases.at(-1).schedule_steps;
    assert.ok(Number.isInteger(planned) && planned >= r.steps, `planned ${planned}, ran ${r.steps}`);
    assert.throws(() => checkBudget({}), /give --steps N \(the schedule\) or --minutes M/);
    assert.throws(() => checkBudget({ steps: 0 }), /whole number of steps > 0, got 0/);
    assert.throws(() => checkBudget({ steps: 2.5 }), /whole number of steps/);
    assert.doesNotThrow(() => checkBudget({ steps: 10, minutes: 1 }));
  });
});
