// What the trajectory viewer shows (src/extension/model/trajectoryView.ts): a branch's inherited
// turns and where it came from, each turn's failure labels, long observations capped.
import * as assert from 'node:assert/strict';
import { SCHEMA, type Trajectory } from '../../../src/core/schema';
import { trajectoryView } from '../../../src/extension/model/trajectoryView';

const t = {
  schema: SCHEMA.trajectory,
  taskId: 'mut-1',
  groupId: 'it2-t0',
  trajId: 'it2-t0-b0',
  checkpoint: 'ck',
  iteration: 2,
  split: 'train',
  branch: { parent: 'it2-t0-g1', at: 1, shared: 1 },
  turns: [
    { index: 0, action: 'tw-suspects -n', observation: 'x'.repeat(9000), exitCode: 1, durationMs: 5, inherited: true, advantage: 0 },
    {
      index: 1,
      action: "tw-edit 1 'a' 'b'",
      observation: "exit 0\ntw-edit: 'a' is not on x",
      exitCode: 0,
      durationMs: 3,
      labels: ['refused-edit'],
      advantage: -0.5,
    },
    { index: 2, action: 'submit', observation: '', exitCode: null, durationMs: 0, labels: ['submit-without-pass'], advantage: -0.5 },
  ],
  reward: { passRate: 0.5, resolved: false, turns: 2, maxTurns: 6, formatError: false, efficiencyPenalty: 0, formatPenalty: 0, reward: 0 },
} as unknown as Trajectory;

describe('extension: the trajectory view', () => {
  it("carries a branch's origin, its inherited turns and each turn's failure labels", () => {
    const v = trajectoryView(t);
    assert.deepEqual(v.branch, { parent: 'it2-t0-g1', at: 1, shared: 1 });
    assert.deepEqual(
      v.turns.map((x) => [!!x.inherited, x.labels ?? []]),
      [
        [true, []],
        [false, ['refused-edit']],
        [false, ['submit-without-pass']],
      ],
    );
    assert.ok(v.turns[0].observation.length < 9000 && v.turns[0].observation.endsWith('(1000 more characters)'));
    const plain = trajectoryView({
      ...t,
      branch: undefined,
      turns: t.turns.map(({ inherited: _i, labels: _l, ...rest }) => rest),
    } as Trajectory);
    assert.equal(plain.branch, undefined);
    assert.ok(plain.turns.every((x) => x.inherited === undefined && x.labels === undefined));
  });
});
