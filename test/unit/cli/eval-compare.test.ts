// `turnwise eval --from FILE --compare EARLIER`: two evaluations' episode files paired by task and
// seed, end to end through the CLI (no sandbox: both files exist already).
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from '../../../src/cli/main';
import { SCHEMA } from '../../../src/core/schema';
import { signTestP } from '../../../src/core/stats';

async function cli(argv: string[]) {
  let out = '';
  let err = '';
  const code = await main(argv, { out: (t) => (out += t + '\n'), err: (t) => (err += t + '\n') });
  return { code, out, err };
}

/** An evaluation episode as `turnwise eval --out` writes it: greedy `eval-…`, sampled `evals-…`. */
const episode = (checkpoint: string, taskId: string, k: number | null, resolved: boolean, observation = 'exit 1') => ({
  schema: SCHEMA.trajectory,
  taskId,
  groupId: `eval-0-${taskId}`,
  trajId: k === null ? `eval-0-${taskId}` : `evals-0-${taskId}-${k}`,
  checkpoint,
  seed: k === null ? 7 : 100 + k,
  split: 'heldout',
  turns: [{ index: 0, action: 'tw-suspects', observation, exitCode: 1, durationMs: 1 }],
  reward: {
    passRate: resolved ? 1 : 0.5,
    resolved,
    turns: 1,
    maxTurns: 6,
    formatError: false,
    efficiencyPenalty: 0,
    formatPenalty: 0,
    reward: resolved ? 1 : 0.5,
  },
});
const jsonl = (rows: unknown[]) => rows.map((r) => JSON.stringify(r)).join('\n') + '\n';

describe('cli: turnwise eval --from --compare', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-compare-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('pairs the two files by task and seed: gained, lost, the sign test, per task; a task only the earlier file has is unpaired', async () => {
    // Task a: 1 of 4 sampled resolved before, 4 of 4 after; task b: 2 of 4 before, 1 of 4 after.
    const before = [
      episode('ws', 'a', null, false),
      ...[0, 1, 2, 3].map((k) => episode('ws', 'a', k, k === 0)),
      episode('ws', 'b', null, true),
      ...[0, 1, 2, 3].map((k) => episode('ws', 'b', k, k < 2)),
      episode('ws', 'c', null, true),
    ];
    const after = [
      episode('rl', 'a', null, true),
      ...[0, 1, 2, 3].map((k) => episode('rl', 'a', k, true)),
      episode('rl', 'b', null, true),
      ...[0, 1, 2, 3].map((k) => episode('rl', 'b', k, k === 0)),
    ];
    fs.writeFileSync(path.join(dir, 'before.jsonl'), jsonl(before));
    fs.writeFileSync(path.join(dir, 'after.jsonl'), jsonl(after));
    const r = await cli(['eval', '--from', path.join(dir, 'after.jsonl'), '--compare', path.join(dir, 'before.jsonl'), '--json']);
    assert.equal(r.code, 0, r.err);
    const j = JSON.parse(r.out);
    assert.equal(j.model, 'rl');
    assert.equal(j.taskCount, 2);
    assert.equal(j.resolved, 1, 'greedy: both tasks resolved after');
    assert.equal(j.sampled.resolved, 5 / 8);
    assert.deepEqual(j.compare.greedy, { pairs: 2, gained: 1, lost: 0, p_value: 1, task_nets: { a: 1 }, p_value_tasks: 1 });
    // By task: a +3, b −1; every sign pattern of (3, 1) reaches |2|.
    assert.deepEqual(j.compare.sampled, {
      pairs: 8,
      gained: 3,
      lost: 1,
      p_value: signTestP(3, 1),
      task_nets: { a: 3, b: -1 },
      p_value_tasks: 1,
    });
    assert.deepEqual(
      j.compare.tasks.filter((t: { kind: string }) => t.kind === 'sampled'),
      [
        { taskId: 'a', kind: 'sampled', pairs: 4, before: 1, after: 4, gained: 3, lost: 0 },
        { taskId: 'b', kind: 'sampled', pairs: 4, before: 2, after: 1, gained: 0, lost: 1 },
      ],
    );
    assert.deepEqual(j.compare.unpaired, { before: 1, after: 0 });
    // PASS@(k,T) of the sampled episodes (each ended after 1 action, turn limit 6): task a 4 of 4,
    // task b 1 of 4 → k = 1: (1 + 1/4) / 2; k = 2: (1 + 1/2) / 2; the same at every T.
    assert.deepEqual(Object.keys(j.sampled.pass_at_k_t), ['1', '2', '3', '4']);
    assert.deepEqual(Object.keys(j.sampled.pass_at_k_t['1']), ['1', '2', '3', '4', '5', '6']);
    assert.equal(j.sampled.pass_at_k_t['1']['6'], 0.625);
    assert.equal(j.sampled.pass_at_k_t['2']['1'], 0.75);
    assert.equal(j.sampled.pass_at_k_t['4']['3'], 1);
    const human = await cli(['eval', '--from', path.join(dir, 'after.jsonl'), '--compare', path.join(dir, 'before.jsonl')]);
    assert.equal(human.code, 0, human.err);
    assert.match(human.out, /sampled \(4 per task\): resolved 0\.625/);
    assert.match(human.out, /sampled\s+\+3 −1 of 8 \(p 0\.625, by task 1\.000\)/);
    assert.match(human.out, /a sampled 1\/4 → 4\/4 {2}\+3 −0/);
    assert.doesNotMatch(human.out, /warning: tw-suspects/);
  });

  it('warns when either side has a tw-suspects answer cut short by its time guard', async () => {
    const cut = 'a.py:3: x\n(ranking cut short by the time limit: the machine is busy; run tw-suspects again for the full one)';
    fs.writeFileSync(path.join(dir, 'before.jsonl'), jsonl([episode('ws', 'a', 0, false, cut)]));
    fs.writeFileSync(path.join(dir, 'after.jsonl'), jsonl([episode('rl', 'a', 0, true)]));
    const r = await cli(['eval', '--from', path.join(dir, 'after.jsonl'), '--compare', path.join(dir, 'before.jsonl')]);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, /warning: tw-suspects was cut short by its time guard 1 time\(s\) earlier and 0 now/);
  });
});
