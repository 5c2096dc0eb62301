// Diagnosis-guided reweighting and charges (src/train/diagnosis-weights.ts) and their config fields.
import * as assert from 'node:assert/strict';
import { SCHEMA, type Trajectory } from '../../../src/core/schema';
import { chargeByDiagnosis, reweightByDiagnosis } from '../../../src/train/diagnosis-weights';
import { resolveTrainConfig } from '../../../src/train/config';

const traj = (
  turns: { labels?: string[]; advantage: number; components?: Record<string, number>; tokens?: number[] }[],
  resolved = false,
): Trajectory =>
  ({
    schema: SCHEMA.trajectory,
    taskId: 't',
    groupId: 'g',
    trajId: 'e',
    checkpoint: 'c',
    reward: { resolved, reward: resolved ? 1 : 0 },
    turns: turns.map((u, index) => ({
      index,
      action: 'x',
      observation: '',
      exitCode: 0,
      durationMs: 1,
      advantage: u.advantage,
      ...(u.labels ? { labels: u.labels } : {}),
      ...(u.components ? { advantageComponents: u.components } : {}),
      ...(u.tokens ? { tokenAdvantages: u.tokens } : {}),
    })),
  }) as unknown as Trajectory;

describe('train/diagnosis-weights: diagnosis-guided reweighting', () => {
  it('scales negative advantages of labelled turns by the largest weight of their labels, components with them', () => {
    const t = traj([
      { labels: ['repeated-failed-action', 'refused-edit'], advantage: -0.5, components: { backbone: -0.4, residual: -0.1 } },
      { labels: ['refused-edit'], advantage: 0.3 },
      { advantage: -0.2 },
      { labels: ['turn-limit'], advantage: -0.1 },
    ]);
    const n = reweightByDiagnosis([t], { 'repeated-failed-action': 3, 'refused-edit': 2 });
    assert.equal(n, 1);
    assert.equal(t.turns[0].advantage, -1.5);
    assert.deepEqual(t.turns[0].advantageComponents, { backbone: -0.4 * 3, residual: -0.1 * 3 });
    assert.equal(t.turns[1].advantage, 0.3, 'a positive advantage is left alone');
    assert.equal(t.turns[2].advantage, -0.2, 'no label');
    assert.equal(t.turns[3].advantage, -0.1, 'a label without a weight');
    assert.equal(reweightByDiagnosis([t], {}), 0, 'off');
  });

  it('charges: a labelled turn of an unresolved episode loses its charge whatever its advantage (0 included); resolved episodes keep theirs', () => {
    // A group where every episode failed: the baseline leaves the giving-up submit at 0.
    const failed = traj([
      { labels: ['edit-tests-fail'], advantage: -0.2, tokens: [-0.2, -0.2] },
      { labels: ['submit-without-pass', 'test-never-run'], advantage: 0, tokens: [0, 0, 0], components: { backbone: 0 } },
      { advantage: 0.1 },
    ]);
    const resolved = traj([{ labels: ['submit-without-pass'], advantage: 0.4 }], true);
    const n = chargeByDiagnosis([failed, resolved], { 'submit-without-pass': 0.5, 'test-never-run': 0.25 });
    assert.equal(n, 1);
    assert.equal(failed.turns[1].advantage, -0.5, 'the largest charge of its labels');
    assert.deepEqual(failed.turns[1].tokenAdvantages, [-0.5, -0.5, -0.5]);
    assert.deepEqual(failed.turns[1].advantageComponents, { backbone: 0, diagnosis: -0.5 });
    assert.equal(failed.turns[0].advantage, -0.2, 'a label without a charge');
    assert.equal(failed.turns[2].advantage, 0.1, 'no label');
    assert.equal(resolved.turns[0].advantage, 0.4, 'a resolved episode is not charged');
    assert.equal(chargeByDiagnosis([failed], {}), 0, 'off');
    assert.deepEqual(resolveTrainConfig({}).diagnosisCharges, {});
    assert.deepEqual(resolveTrainConfig({ diagnosisCharges: { 'submit-without-pass': 0.5 } }).diagnosisCharges, {
      'submit-without-pass': 0.5,
    });
    assert.throws(
      () => resolveTrainConfig({ diagnosisCharges: { 'gave-up': 1 } }),
      /diagnosisCharges" names an unknown failure label "gave-up"/,
    );
    assert.throws(() => resolveTrainConfig({ diagnosisCharges: { 'turn-limit': 11 } }), /diagnosisCharges\.turn-limit/);
  });

  it('the config takes failure labels with weights, refuses unknown labels and bad weights; recoveryFeedback is a boolean', () => {
    assert.deepEqual(resolveTrainConfig({ diagnosisWeights: { 'wrong-file': 2 } }).diagnosisWeights, { 'wrong-file': 2 });
    assert.deepEqual(resolveTrainConfig({}).diagnosisWeights, {});
    assert.throws(() => resolveTrainConfig({ diagnosisWeights: { 'bad-luck': 2 } }), /unknown failure label "bad-luck"/);
    assert.throws(() => resolveTrainConfig({ diagnosisWeights: { 'wrong-file': -1 } }), /diagnosisWeights\.wrong-file/);
    assert.throws(() => resolveTrainConfig({ diagnosisWeights: [] }), /must be an object/);
    assert.equal(resolveTrainConfig({}).recoveryFeedback, false);
    assert.throws(() => resolveTrainConfig({ recoveryFeedback: 'yes' }), /"recoveryFeedback" must be true or false/);
  });
});
