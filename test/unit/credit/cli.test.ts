// `turnwise advantages` and `turnwise bench credit` through the real CLI entry point.
import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from '../../../src/cli/main';

async function runCli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await main(args, { out: (t) => (out += t + '\n'), err: (t) => (err += t + '\n') });
  return { code, out, err };
}

function traj(taskId: string, trajId: string, reward: number | null, actions: string[], edits?: (string[] | undefined)[]) {
  return {
    schema: 'turnwise/trajectory@1',
    taskId,
    groupId: taskId,
    trajId,
    checkpoint: 'ckpt-0',
    turns: actions.map((action, index) => ({
      index,
      action,
      observation: `out ${index}`,
      exitCode: 0,
      durationMs: 5,
      ...(edits?.[index] ? { editSignature: edits[index] } : {}),
    })),
    reward: {
      passRate: reward ?? NaN,
      resolved: reward === 1,
      turns: actions.length,
      maxTurns: 10,
      formatError: false,
      efficiencyPenalty: 0,
      formatPenalty: 0,
      reward,
    },
  };
}

describe('turnwise advantages', function () {
  this.timeout(60000);
  let dir: string;
  let file: string;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-adv-'));
    file = path.join(dir, 'trajectories.jsonl');
    const lines = [
      traj(
        't1',
        'a',
        1,
        ['ls src', "sed -i 's/</<=/' src/m.py && python -m pytest -q"],
        [undefined, ['E:src/m.py::f', 'N:comparison_operator:<→<=']],
      ),
      traj('t1', 'b', 0, ['ls src', 'cat src/m.py']),
      traj('t1', 'c', 0.5, ['grep -rn f src']),
      traj('t2', 'd', null, ['ls']),
    ];
    fs.writeFileSync(file, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('grpo --json: per-turn rows with signature, advantage, components and diagnostics', async () => {
    const r = await runCli(['advantages', '--in', file, '--estimator', 'grpo', '--json']);
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out);
    assert.equal(j.ok, true);
    assert.equal(j.rows.length, 6);
    // t1: mean .5, std .5 → a: +1, b: −1, c: 0 (ε aside); t2's reward is null → NaN → 0
    const adv = j.rows.map((x: { advantage: number }) => +x.advantage.toFixed(5));
    assert.deepEqual(adv, [1, 1, -1, -1, 0, 0]);
    assert.deepEqual(j.rows[1].signature, ['K:list', 'V:sed', 'W:-i', 'W:src/m.py', 'V:python', 'W:-m', 'W:pytest', 'W:-q']);
    assert.deepEqual(Object.keys(j.rows[0].components), ['episode', 'baseline']);
    assert.equal(j.diagnostics.rows_nan, 1);
    assert.equal(j.diagnostics.frac_cells_multi_cluster, null);
  });

  it('turnwise with --param (repeatable): edit tokens in the signature, clusters and tree gate reported', async () => {
    const r = await runCli([
      'advantages',
      '--in',
      file,
      '--estimator',
      'turnwise',
      '--param',
      'scopes=1,-1',
      '--param',
      'scopeWeights=0.5,0.5',
      '--json',
    ]);
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out);
    assert.deepEqual(j.params.scopes, [1, -1]);
    assert.deepEqual(j.rows[1].signature.slice(-2), ['E:src/m.py::f', 'N:comparison_operator:<→<=']);
    assert.deepEqual(Object.keys(j.rows[0].clusters), ['scope1', 'scope-1', 'action']);
    assert.ok(typeof j.diagnostics.mean_tree_gate === 'number' && j.diagnostics.mean_tree_gate > 0);
    // the winner's fixing turn gets the most credit, the loser's last turn the least; both ran `ls src` first,
    // so the action margin (reported) of that shared turn is ±sh(1)·(1/6) (a: other ls-er lost, b: it won)
    const adv = j.rows.map((x: { advantage: number }) => x.advantage);
    assert.equal(Math.max(...adv), adv[1]);
    assert.ok(adv[1] > 0.5);
    assert.equal(Math.min(...adv), adv[3]);
    const sh1 = 1 / 1.100001;
    assert.ok(Math.abs(j.rows[0].components.margin + sh1 / 6) < 1e-6 && Math.abs(j.rows[2].components.margin - sh1 / 6) < 1e-6);
  });

  it('human output is a table', async () => {
    const r = await runCli(['advantages', '--in', file, '--estimator', 'rloo']);
    assert.equal(r.code, 0);
    assert.match(r.out, /rloo: 4 trajectories, 6 turns/);
    assert.match(r.out, /t1 +a +0 +0\.7500 +ls src/);
  });

  it("gear on a file without the teacher pass: GRPO's advantages, and it says so", async () => {
    const r = await runCli(['advantages', '--in', file, '--estimator', 'gear']);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /read against the reference fix: 0\.000 of the trajectories \(the rest, without the teacher pass's measurements/);
    const j = JSON.parse((await runCli(['advantages', '--in', file, '--estimator', 'gear', '--json'])).out);
    const g = JSON.parse((await runCli(['advantages', '--in', file, '--estimator', 'grpo', '--json'])).out);
    assert.deepEqual(
      j.rows.map((x: { advantage: number }) => x.advantage),
      g.rows.map((x: { advantage: number }) => x.advantage),
    );
    assert.equal(j.diagnostics.frac_reference_fallback, 1);
  });

  it('a malformed file lists every bad line with its number', async () => {
    const bad = path.join(dir, 'bad.jsonl');
    fs.writeFileSync(
      bad,
      [
        JSON.stringify(traj('t', 'a', 1, ['ls'])),
        '{not json',
        JSON.stringify({ ...traj('t', 'b', 1, ['ls']), trajId: 3, turns: [{ index: 0 }] }),
      ].join('\n'),
    );
    const r = await runCli(['advantages', '--in', bad, '--estimator', 'grpo', '--json']);
    assert.equal(r.code, 1);
    const j = JSON.parse(r.out);
    assert.equal(j.error.code, 'invalid-file');
    assert.match(j.error.message, /bad\.jsonl:2: not valid JSON/);
    assert.match(j.error.message, /bad\.jsonl:3: trajId must be a non-empty string/);
    assert.match(j.error.message, /bad\.jsonl:3: turns\[0\]\.action must be a string/);
  });

  it('unknown estimator and unknown parameter name the valid ones', async () => {
    const r = await runCli(['advantages', '--in', file, '--estimator', 'ppo']);
    assert.equal(r.code, 1);
    assert.match(r.err, /unknown advantage estimator "ppo"/);
    assert.match(r.err, /grpo, rloo, gigpo, a3, turnwise/);
    const p = await runCli(['advantages', '--in', file, '--estimator', 'a3', '--param', 'tau=1']);
    assert.equal(p.code, 1);
    assert.match(p.err, /no parameter "tau"[\s\S]*treeTau/);
  });
});

describe('turnwise bench credit', function () {
  this.timeout(120000);
  it('--json prints one object with correlations, timings and targets for every estimator', async () => {
    const r = await runCli(['bench', 'credit', '--batches', '2', '--json']);
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out);
    assert.equal(j.bench, 'credit');
    assert.equal(j.rows_per_batch, 640);
    assert.deepEqual(Object.keys(j.estimators), ['grpo', 'rloo', 'gigpo', 'a3', 'turnwise']);
    for (const e of Object.values(j.estimators) as { corr_mean: number; ms_per_batch_mean: number }[]) {
      // every estimator's advantages carry the episode signal, so they correlate positively with contributions
      assert.ok(e.corr_mean > 0.1 && e.corr_mean < 1, JSON.stringify(e));
      assert.ok(e.ms_per_batch_mean > 0);
    }
    // episode-level estimators give every turn of an episode the same advantage
    assert.equal(j.estimators.grpo.corr_within_traj_mean, 0);
    assert.equal(typeof j.targets.turnwise_beats_grpo, 'boolean');
    // the ablation: a3, turnwise's changes 1–3 one at a time, residual=loo (changes 1–4), then each margin choice; the last is turnwise
    assert.deepEqual(Object.keys(j.ablation), [
      'a3',
      'a3+per-turn-residual',
      'a3+prefix-scope',
      'a3+edit-tokens',
      'turnwise residual=loo (changes 1-4)',
      '+margin (actionKey=cluster, pool=cell)',
      '+margin (actionKey=edit-intent, pool=cell)',
      '+margin (actionKey=edit-intent, pool=task)',
      '+terms unscaled (termScale=none) = turnwise',
    ]);
    assert.equal(j.ablation.a3.corr_mean, j.estimators.a3.corr_mean);
    assert.equal(j.ablation['+terms unscaled (termScale=none) = turnwise'].corr_mean, j.estimators.turnwise.corr_mean);
  });

  it('environment settings reach the benchmark; a bad one is an error naming it', async () => {
    const r = await runCli([
      'bench',
      'credit',
      '--batches',
      '1',
      '--group',
      '4',
      '--turns',
      '6',
      '--dynamics',
      'stateful',
      '--actions',
      'few',
      '--json',
    ]);
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out);
    assert.deepEqual([j.config.group, j.config.turns, j.config.dynamics, j.config.actions], [4, 6, 'stateful', 'few']);
    assert.equal(j.rows_per_batch, 8 * 4 * 6);
    const bad = await runCli(['bench', 'credit', '--batches', '1', '--actions', 'all']);
    assert.equal(bad.code, 1);
    assert.match(bad.err, /unknown action set "all"[\s\S]*basic, few, many/);
  });
});
