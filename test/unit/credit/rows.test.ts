import { strict as assert } from 'node:assert';
import { repeatedTurns } from '../../../src/core/repeats';
import { computeReward } from '../../../src/tasks/reward';
import { rowsFromTrajectories } from '../../../src/credit/signatures';
import type { Trajectory, Turn } from '../../../src/core/schema';

const turn = (index: number, action: string, observation: string, more: Partial<Turn> = {}): Turn => ({
  index,
  action,
  observation,
  exitCode: 0,
  durationMs: 1,
  ...more,
});

/** A scored trajectory whose reward is computed by the real formula from its turns. */
function scored(trajId: string, turns: Turn[], resolved: boolean, tampered?: string): Trajectory {
  const formatError = turns.some((t) => t.formatError !== undefined);
  const outcomes = new Map([
    ['f', resolved ? 'passed' : 'failed'],
    ['p', 'passed'],
  ] as const);
  const reward = computeReward({
    outcomes,
    failToPass: ['f'],
    passToPass: ['p'],
    turns: turns.length,
    maxTurns: 6,
    formatError,
    repeats: repeatedTurns(turns),
    ...(tampered ? { tampered } : {}),
  });
  return { schema: 'turnwise/trajectory@1', taskId: 't', groupId: 't', trajId, checkpoint: 'c', turns, reward };
}

describe('credit/rows: the penalty each turn cost', () => {
  it('puts the format penalty on the first unparsable turn and λ_rep on each repeated one; their sum is what the reward charged', () => {
    const t = scored(
      'a',
      [
        turn(0, 'tw-cands 1', 'x < y\n[1] x <= y'),
        turn(1, 'tw-cands 1', 'x < y\n[1] x <= y'),
        turn(2, 'tw-cands 1', 'garbled', { formatError: 'no command' }),
        turn(3, 'tw-cands 1', 'garbled', { formatError: 'no command' }),
        turn(4, 'tw-cands 1', 'x < y\n[1] x <= y'),
        turn(5, 'submit', ''),
      ],
      false,
    );
    const rows = rowsFromTrajectories([t]);
    assert.deepEqual(
      rows.map((r) => r.penalty ?? 0),
      [0, 0.05, 0.5, 0, 0.05, 0],
    );
    const charged = rows.reduce((s, r) => s + (r.penalty ?? 0), 0);
    assert.ok(Math.abs(charged - (t.reward.formatPenalty + t.reward.repeatPenalty!)) < 1e-12);
    assert.ok(Math.abs(t.reward.reward + charged - t.reward.testScore!) < 1e-12, 'outcome = reward + the turns’ penalties');
  });

  it('leaves a penalty with the episode when its turns cannot be found again, and charges nothing in a tampered episode', () => {
    const t = scored('b', [turn(0, 'ls', 'a'), turn(1, 'ls', 'a'), turn(2, 'submit', '')], true);
    t.reward.repeats = 2; // stored count disagrees with the turns (a trimmed observation, an older rule)
    assert.deepEqual(
      rowsFromTrajectories([t]).map((r) => r.penalty ?? 0),
      [0, 0, 0],
    );
    const bad = scored('c', [turn(0, 'ls', 'a'), turn(1, 'ls', 'a', { formatError: 'x' })], false, 'edited the runner');
    assert.equal(bad.reward.reward, 0);
    assert.deepEqual(
      rowsFromTrajectories([bad]).map((r) => r.penalty ?? 0),
      [0, 0],
    );
  });
});
