// Training rows as the trainer gets them. RL rows (episodeRows): an episode's turns share one row
// where each prompt continues the last, with the log-probs separate rows would give. RL
// minibatches (packMinibatches): the loss mask, advantages and old log-probs sit on the action
// tokens only, padding rows carry no loss, shapes come from a few fixed buckets. Warm-start rows (packRows): examples packed whole into rows with
// a segment id each, weights and the action mask where the example put them.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  actionLogpShift,
  episodeRows,
  sameOutcomeAdvantageShare,
  packMinibatches,
  packRows,
  turnTokenRows,
  updateRows,
  weightNegativeAdvantages,
  type TrainRow,
  type TurnRowData,
} from '../../../src/train/rows';
import { TrainablePolicy } from '../../../src/policy/trainable';
import { initWeights } from '../../../src/policy/model/weights';
import { SMALL_CONFIG } from '../policy/helpers';
import { SCHEMA, type Trajectory } from '../../../src/core/schema';
import { loadTokenizer } from '../../../src/policy/files/tokenizer';
import { actionIds, compactCodec } from '../../../src/train/compact-codec';

const row = (len: number, actionLen: number, advantage: number, base = 10): TrainRow => ({
  ids: Array.from({ length: len }, (_, i) => base + i),
  actions: [{ start: len - actionLen, logprobs: Array.from({ length: actionLen }, (_, i) => -(i + 1) / 10), advantage, weight: 1 }],
});

describe('train/rows: packMinibatches', () => {
  it('5 rows in 2 minibatches: B=3 each, the missing row is padding without loss', () => {
    const rows = [row(40, 5, 1), row(100, 8, -0.5), row(20, 3, 2), row(130, 4, 0.25), row(60, 6, -1)];
    const mbs = packMinibatches(rows, 2);
    assert.equal(mbs.length, 2);
    assert.deepEqual(
      mbs.map((m) => m.B),
      [3, 3],
    );
    assert.deepEqual(
      mbs.map((m) => m.T),
      [128, 256],
    );
    let r = 0;
    for (const { batch, B, T } of mbs) {
      for (const k of ['inputIds', 'attentionMask', 'lossMask', 'advantages', 'oldLogp'] as const)
        assert.equal((batch[k] as ArrayLike<number>).length, B * T, k);
      for (let b = 0; b < B; b++, r++) {
        const at = (a: ArrayLike<number> | undefined, j: number) => a![b * T + j];
        if (r >= rows.length) {
          // Padding row: one attended token, nothing in the loss.
          for (let j = 0; j < T; j++) {
            assert.equal(at(batch.attentionMask, j), j === 0 ? 1 : 0);
            assert.equal(at(batch.lossMask, j), 0);
          }
          continue;
        }
        const src = rows[r];
        const a = src.actions[0];
        for (let j = 0; j < T; j++) {
          const real = j < src.ids.length;
          const action = real && j >= a.start;
          assert.equal(at(batch.inputIds, j), real ? src.ids[j] : 0);
          assert.equal(at(batch.attentionMask, j), real ? 1 : 0);
          assert.equal(at(batch.lossMask, j), action ? 1 : 0, `row ${r} token ${j}`);
          assert.equal(at(batch.advantages, j), action ? a.advantage : 0);
          assert.equal(at(batch.oldLogp, j), action ? a.logprobs[j - a.start] : 0);
        }
      }
    }
  });

  it('reference log-probs are taken position by position on action tokens', () => {
    const rows = [row(12, 4, 1), row(9, 2, -1)];
    const ref = rows.map((x) => Float32Array.from(x.ids, (_, j) => -j));
    const [mb] = packMinibatches(rows, 1, ref);
    assert.ok(mb.batch.refLogp);
    for (let b = 0; b < 2; b++) {
      for (let j = 0; j < mb.T; j++) {
        const want = j >= rows[b].actions[0].start && j < rows[b].ids.length ? -j : 0;
        assert.equal(mb.batch.refLogp![b * mb.T + j], want);
      }
    }
    assert.equal(packMinibatches(rows, 1)[0].batch.refLogp, undefined);
  });

  it('replay rows follow the RL rows: their weights in replayMask only, nothing in the RL inputs', () => {
    const rows = [row(40, 5, 1), row(100, 8, -0.5), row(20, 3, 2)];
    const drawn: [number, number][] = [];
    const demo = (len: number, s: number) => ({
      ids: Array.from({ length: len }, (_, i) => s + i),
      weights: Array.from({ length: len }, (_, i) => (i % 2 ? 1 : 0.3)),
    });
    const ref = rows.map((x) => Float32Array.from(x.ids, () => -1));
    const mbs = packMinibatches(rows, 2, ref, {
      rows: 2,
      draw: (T, k) => {
        drawn.push([T, k]);
        // The second minibatch gets one demonstration only: its last replay row is padding.
        return k === 0 ? [demo(30, 100), demo(T, 200)] : [demo(7, 300)];
      },
    });
    assert.deepEqual(
      drawn,
      [
        [128, 0],
        [128, 1],
      ],
      'each minibatch draws at its own T',
    );
    assert.deepEqual(
      mbs.map((m) => m.B),
      [4, 4],
      'B fixed: 2 RL rows per minibatch (the second has 1 and a padding row) + 2 replay rows',
    );
    const [first, second] = mbs;
    const T = first.T;
    const at = (
      mb: (typeof mbs)[number],
      name: 'inputIds' | 'attentionMask' | 'lossMask' | 'actionMask' | 'advantages' | 'oldLogp' | 'refLogp' | 'replayMask',
      b: number,
      j: number,
    ) => (mb.batch[name] as ArrayLike<number>)[b * T + j];
    for (let b = 0; b < 2; b++) for (let j = 0; j < T; j++) assert.equal(at(first, 'replayMask', b, j), 0, 'no replay weight on an RL row');
    for (const [b, d] of [
      [2, demo(30, 100)],
      [3, demo(T, 200)],
    ] as const) {
      for (let j = 0; j < T; j++) {
        const real = j < d.ids.length;
        assert.equal(at(first, 'inputIds', b, j), real ? d.ids[j] : 0);
        assert.equal(at(first, 'attentionMask', b, j), real ? 1 : 0);
        assert.equal(at(first, 'replayMask', b, j), real ? d.weights[j] : 0);
        for (const k of ['lossMask', 'actionMask', 'advantages', 'oldLogp', 'refLogp'] as const)
          assert.equal(at(first, k, b, j), 0, `${k} at replay row ${b}, token ${j}`);
      }
    }
    // Second minibatch: RL row 0, an RL padding row, one demonstration, a replay padding row.
    assert.equal(at(second, 'attentionMask', 1, 0), 1);
    assert.equal(at(second, 'attentionMask', 1, 1), 0);
    assert.equal(at(second, 'replayMask', 2, 1), 1);
    assert.equal(at(second, 'attentionMask', 3, 0), 1);
    for (let j = 0; j < T; j++) assert.equal(at(second, 'replayMask', 3, j), 0);
    assert.equal(packMinibatches(rows, 2)[0].batch.replayMask, undefined, 'no replay: no replayMask');
  });

  it('more minibatches than rows: one row each; a row over the largest bucket keeps its length', () => {
    const mbs = packMinibatches([row(10, 2, 1), row(1100, 10, 1)], 8);
    assert.deepEqual(
      mbs.map((m) => [m.B, m.T]),
      [
        [1, 128],
        [1, 1100],
      ],
    );
  });
});

describe('train/rows: one row per episode where the turns continue each other', () => {
  // An episode as the rows turnTokenRows gives: turn k's prompt, then its sampled action; the
  // next prompt is this row plus the observation and the next action prefix.
  const turn = (prefix: number[], prompt: number[], action: number[], advantage: number): TurnRowData => ({
    ids: [...prefix, ...prompt, ...action],
    actionStart: prefix.length + prompt.length,
    logprobs: action.map((_, i) => -0.1 * (i + 1)),
    advantage,
  });

  it('merges continuing turns into one row with every action where it was; a break starts a new row', () => {
    const t0 = turn([], [1, 2, 3], [4, 5], 0.5);
    const t1 = turn(t0.ids, [6, 7], [8, 9, 10], -1);
    const t2 = turn(t1.ids, [11], [12], 2);
    // Turn 3's prompt dropped the oldest turn: it does not begin with turn 2's row.
    const t3 = turn([], [1, 2, 3, 13, 14], [15], 1);
    const t4 = turn(t3.ids, [16], [17, 18], 0);
    const rows = episodeRows([t0, t1, t2, t3, t4]);
    assert.equal(rows.length, 2);
    assert.deepEqual(rows[0].ids, t2.ids);
    assert.deepEqual(
      rows[0].actions.map((a) => [a.start, a.advantage]),
      [
        [3, 0.5],
        [7, -1],
        [11, 2],
      ],
    );
    for (const [k, a] of rows[0].actions.entries()) {
      const src = [t0, t1, t2][k];
      assert.deepEqual(
        rows[0].ids.slice(a.start, a.start + a.logprobs.length),
        src.ids.slice(src.actionStart),
        `action ${k} tokens in place`,
      );
      assert.deepEqual(a.logprobs, src.logprobs);
    }
    assert.deepEqual(rows[1].ids, t4.ids);
    assert.deepEqual(
      rows[1].actions.map((a) => a.start),
      [5, 7],
    );
    // An action re-encoded differently in the next prompt (here: a token changed) is no prefix.
    const t1b = turn([...t0.ids.slice(0, -1), 99], [6, 7], [8], 1);
    assert.equal(episodeRows([t0, t1b]).length, 2);
  });

  it('updateRows: zero-advantage actions leave the loss (not the context) unless KL or entropy needs them', () => {
    const t0 = turn([], [1, 2, 3], [4, 5], 0);
    const t1 = turn(t0.ids, [6], [7], 1);
    const lone = turn([], [20, 21], [22], 0);
    const kept = updateRows([[t0, t1], [lone]], false);
    assert.equal(kept.length, 1, 'the episode whose only action has advantage 0 is gone');
    assert.deepEqual(kept[0].ids, t1.ids, 'the zero-advantage turn stays as context');
    assert.deepEqual(
      kept[0].actions.map((a) => a.start),
      [t1.actionStart],
    );
    const all = updateRows([[t0, t1], [lone]], true);
    assert.deepEqual(
      all.map((r) => r.actions.length),
      [2, 1],
    );
    const [mb] = packMinibatches(all, 1);
    const mask = mb.batch.lossMask as number[];
    assert.deepEqual(
      [...mask.slice(0, mb.T)].map((x, j) => (x ? j : -1)).filter((j) => j >= 0),
      [3, 4, 6],
      'both actions of the merged row in the loss',
    );
  });

  it('updateRows for a sequence-level loss (gspo-seq): one row a turn, so turns of opposite advantage keep a ratio each', () => {
    const t0 = turn([], [1, 2, 3], [4, 5], 1);
    const t1 = turn(t0.ids, [6], [7, 8], -1);
    const merged = updateRows([[t0, t1]], false, 'token', 'ppo-token');
    assert.deepEqual(
      merged.map((r) => r.actions.map((a) => a.advantage)),
      [[1, -1]],
      'a token-level loss: one row, both actions',
    );
    const perTurn = updateRows([[t0, t1]], false, 'token', 'gspo-seq');
    assert.deepEqual(
      perTurn.map((r) => [r.ids, r.actions.map((a) => a.advantage)]),
      [
        [t0.ids, [1]],
        [t1.ids, [-1]],
      ],
    );
  });

  it('updateRows by episode: an episode of n action tokens weighs n̄ / n per token, carried into lossMask (actionMask stays 0/1)', () => {
    // Episode A: 2 + 1 action tokens; episode B: 1 + 5 + 3 = 9 (a failed one that kept trying).
    const a0 = turn([], [1, 2], [3, 4], 1);
    const a1 = turn(a0.ids, [5], [6], 1);
    const b0 = turn([], [1, 2], [7], -1);
    const b1 = turn(b0.ids, [8], [9, 9, 9, 9, 9], -1);
    const b2 = turn(b1.ids, [10], [11, 11, 11], -1);
    const meanSize = (3 + 9) / 2;
    const byEpisode = updateRows(
      [
        [a0, a1],
        [b0, b1, b2],
      ],
      false,
      'episode',
    );
    assert.deepEqual(
      byEpisode.map((r) => r.actions.map((a) => a.weight)),
      [
        [meanSize / 3, meanSize / 3],
        [meanSize / 9, meanSize / 9, meanSize / 9],
      ],
    );
    // Each episode's weights sum to n̄: equal totals, whatever its length.
    const totals = byEpisode.map((r) => r.actions.reduce((s, a) => s + a.weight * a.logprobs.length, 0));
    assert.ok(Math.abs(totals[0] - totals[1]) < 1e-12 && Math.abs(totals[0] - meanSize) < 1e-12);
    assert.deepEqual(
      updateRows(
        [
          [a0, a1],
          [b0, b1, b2],
        ],
        false,
      ).flatMap((r) => r.actions.map((a) => a.weight)),
      [1, 1, 1, 1, 1],
      'token: weight 1',
    );
    const [mb] = packMinibatches(byEpisode, 1);
    const rowB = (b: number) => [...(mb.batch.lossMask as number[]).slice(b * mb.T, (b + 1) * mb.T)];
    assert.deepEqual(
      rowB(0).filter((x) => x > 0),
      [meanSize / 3, meanSize / 3, meanSize / 3],
    );
    assert.deepEqual(
      rowB(1).filter((x) => x > 0),
      new Array(9).fill(meanSize / 9),
    );
    const act = [...(mb.batch.actionMask as number[])];
    assert.equal(act.filter((x) => x === 1).length, 12);
    assert.ok(
      act.every((x, j) => x === ((mb.batch.lossMask as number[])[j] > 0 ? 1 : 0)),
      'action_loss counts action tokens once, whatever their weight',
    );
  });

  it("the trainer takes lossMask as the weight: by episode the ppo loss is the mean of the episodes' own token means", async () => {
    // Real ONNX trainer at lr 0 (the loss is reported before the step): each episode alone, then
    // both in one batch. At ratio 1 the ppo-token loss is −Σ w·A / Σ w over action tokens.
    const policy = new TrainablePolicy(initWeights(SMALL_CONFIG, 3, 0.3), { settings: { provider: 'cpu', threads: 1 } });
    try {
      const V = SMALL_CONFIG.vocab_size;
      const ids = (n: number, s: number) => Array.from({ length: n }, (_, i) => (i * 5 + s) % V);
      // Old log-probs away from the current ones so the ratio (and so the loss) depends on the tokens.
      const [lpA, lpB] = await policy.logprobs([ids(10, 1), ids(14, 2)]);
      const ep = (x: number[], lp: ArrayLike<number>, start: number, advantage: number): TurnRowData => ({
        ids: x,
        actionStart: start,
        logprobs: Array.from({ length: x.length - start }, (_, k) => lp[start + k] + 0.05 * (k % 3)),
        advantage,
      });
      const A = ep(ids(10, 1), lpA, 8, 1.5); // 2 action tokens
      const B = ep(ids(14, 2), lpB, 6, -0.5); // 8 action tokens
      const lossOf = async (eps: TurnRowData[][], agg: 'token' | 'episode') => {
        const [mb] = packMinibatches(updateRows(eps, false, agg), 1);
        const [m] = await policy.train({ loss: 'ppo-token', batch: mb.B, seq: mb.T }, [mb.batch], {
          lr: 0,
          klCoef: 0,
          entCoef: 0,
          clipLow: 0.2,
          clipHigh: 0.28,
          temperature: 1,
        });
        return m.loss;
      };
      const la = await lossOf([[A]], 'token');
      const lb = await lossOf([[B]], 'token');
      const byEpisode = await lossOf([[A], [B]], 'episode');
      const byToken = await lossOf([[A], [B]], 'token');
      assert.ok(Math.abs(byEpisode - (la + lb) / 2) < 1e-5, `episode: ${byEpisode} vs ${(la + lb) / 2}`);
      assert.ok(Math.abs(byToken - (2 * la + 8 * lb) / 10) < 1e-5, `token: ${byToken} vs ${(2 * la + 8 * lb) / 10}`);
      assert.ok(Math.abs(byEpisode - byToken) > 0.1, 'the two aggregations differ on episodes of unequal length');
    } finally {
      await policy.dispose();
    }
  });

  it("the trainer adds replayCoef × the replay rows' mean NLL and leaves the RL terms as they were", async () => {
    // Real ONNX trainer at lr 0: the RL batch alone, then with replay rows; the replay rows' NLL
    // also through the sft loss, which must agree with the replay_loss metric.
    const policy = new TrainablePolicy(initWeights(SMALL_CONFIG, 4, 0.3), { settings: { provider: 'cpu', threads: 1 } });
    try {
      const V = SMALL_CONFIG.vocab_size;
      const ids = (n: number, s: number) => Array.from({ length: n }, (_, i) => (i * 7 + s) % V);
      const [lp] = await policy.logprobs([ids(12, 1)]);
      const rl: TurnRowData = {
        ids: ids(12, 1),
        actionStart: 8,
        logprobs: Array.from({ length: 4 }, (_, k) => lp[8 + k] - 0.1 * k),
        advantage: 0.8,
      };
      const demos = [
        { ids: ids(9, 3), weights: [0, 0.3, 0.3, 1, 1, 1, 0.3, 1, 1] },
        { ids: ids(15, 5), weights: Array.from({ length: 15 }, (_, i) => (i < 10 ? 0.3 : 1)) },
      ];
      const hyper = { lr: 0, klCoef: 0, entCoef: 0, clipLow: 0.2, clipHigh: 0.28, temperature: 1 };
      const rows = updateRows([[rl]], false);
      const [plain] = packMinibatches(rows, 1);
      const [withReplay] = packMinibatches(rows, 1, undefined, { rows: 2, draw: () => demos });
      const [m0] = await policy.train({ loss: 'ppo-token', batch: plain.B, seq: plain.T }, [plain.batch], hyper);
      const [m1] = await policy.train({ loss: 'ppo-token', batch: withReplay.B, seq: withReplay.T }, [withReplay.batch], {
        ...hyper,
        replayCoef: 0.5,
      });
      // The same demonstrations as an sft batch: Σ w·nll / Σ w over their tokens.
      const T = withReplay.T;
      const sftIds = new Array<number>(2 * T).fill(0);
      const sftW = new Array<number>(2 * T).fill(0);
      const sftAtt = new Array<number>(2 * T).fill(0);
      demos.forEach((d, b) =>
        d.ids.forEach((x, j) => ((sftIds[b * T + j] = x), (sftW[b * T + j] = d.weights[j]), (sftAtt[b * T + j] = 1))),
      );
      const [sft] = await policy.train({ loss: 'sft', batch: 2, seq: T }, [{ inputIds: sftIds, attentionMask: sftAtt, lossMask: sftW }], {
        lr: 0,
      });
      assert.ok(Math.abs(m1.pg_loss - m0.pg_loss) < 1e-6, `pg_loss ${m1.pg_loss} vs ${m0.pg_loss}: replay rows leaked into the RL term`);
      assert.ok(Math.abs(m1.action_loss - m0.action_loss) < 1e-6, 'action_loss counts the RL actions only');
      assert.ok(Math.abs(m1.replay_loss - sft.loss) < 1e-5, `replay_loss ${m1.replay_loss} vs sft ${sft.loss}`);
      assert.ok(Math.abs(m1.loss - (m0.loss + 0.5 * sft.loss)) < 1e-5, `loss ${m1.loss} vs ${m0.loss} + 0.5 × ${sft.loss}`);
      assert.ok(sft.loss > 1, 'an untrained model: the replay NLL is far from 0, so the check means something');
    } finally {
      await policy.dispose();
    }
  });

  it('weightNegativeAdvantages: negative advantages scaled, positive and zero ones untouched; weight 0 leaves them out of the loss', () => {
    const t0 = turn([], [1, 2, 3], [4, 5], -0.8);
    const t1 = turn(t0.ids, [6], [7], 0.5);
    const t2 = turn(t1.ids, [8], [9], 0);
    assert.deepEqual(
      weightNegativeAdvantages([t0, t1, t2], 0.25).map((r) => r.advantage),
      [-0.2, 0.5, 0],
    );
    assert.deepEqual(
      weightNegativeAdvantages([t0, t1, t2], 1).map((r) => r.advantage),
      [-0.8, 0.5, 0],
    );
    assert.equal(t0.advantage, -0.8, "the input rows (and so the trajectories) keep the estimator's advantage");
    const rows = updateRows([weightNegativeAdvantages([t0, t1, t2], 0)], false);
    assert.deepEqual(
      rows.map((r) => r.actions.map((a) => [a.start, a.advantage])),
      [[[t1.actionStart, 0.5]]],
      'only the positive action is in the loss; the others stay as context',
    );
    assert.deepEqual(rows[0].ids, t2.ids);
  });

  it('actionLogpShift: per action the summed change from its rollout log-probs, averaged by advantage sign', () => {
    const rows: TrainRow[] = [
      {
        ids: [1, 2, 3, 4, 5, 6],
        actions: [
          { start: 2, logprobs: [-0.5, -0.5], advantage: 1, weight: 1 },
          { start: 4, logprobs: [-1, -2], advantage: -1, weight: 1 },
        ],
      },
      {
        ids: [7, 8, 9],
        actions: [
          { start: 1, logprobs: [-0.3, -0.3], advantage: 0.5, weight: 1 },
          { start: 0, logprobs: [-9], advantage: 0, weight: 1 },
        ],
      },
    ];
    // after: row 0 action 1 up by 0.2 in all; action 2 down by 1 + 0.5; row 1 up by 0.1 + 0.1.
    const after = [new Float32Array([0, -1, -0.3, -0.3, -2, -2.5]), new Float32Array([0, -0.2, -0.2])];
    const r = actionLogpShift(rows, after);
    assert.ok(Math.abs(r.positive - (0.4 + 0.2) / 2) < 1e-6, `positive ${r.positive}`);
    assert.ok(Math.abs(r.negative - -1.5) < 1e-6, `negative ${r.negative}`);
    assert.ok(Number.isNaN(actionLogpShift([rows[1]], [after[1]]).negative), 'no negative action: NaN, not 0');
    // Over all seven action tokens (the advantage-0 one too), d = before − after.
    const ds = [-0.5 - -0.3, -0.5 - -0.3, -1 - -2, -2 - -2.5, -0.3 - -0.2, -0.3 - -0.2, -9 - 0];
    const k3 = ds.reduce((s, d) => s + Math.exp(d) - d - 1, 0) / ds.length;
    assert.ok(Math.abs(r.kl - k3) < 1e-6, `kl ${r.kl} vs ${k3}`);
    assert.ok(Math.abs(r.maxFall - 1) < 1e-6, `the largest fall is row 0's third action token: ${r.maxFall}`);
    assert.equal(
      actionLogpShift([{ ids: [1, 2], actions: [{ start: 1, logprobs: [-1], advantage: 1, weight: 1 }] }], [[0, -0.5]]).maxFall,
      0,
      'a rise is no fall',
    );
  });

  it('sameOutcomeAdvantageShare: the |advantage| mass of groups whose episodes all resolved or all failed', () => {
    const ep = (groupId: string, resolved: boolean, advs: number[], failure?: string): Trajectory =>
      ({
        groupId,
        failure,
        turns: advs.map((advantage, index) => ({ index, advantage })),
        reward: { resolved },
      }) as unknown as Trajectory;
    const trajs = [
      // Mixed outcomes: mass 1 + 1 + 2 = 4.
      ep('a', true, [1, 1]),
      ep('a', false, [-2]),
      // All resolved: mass 0.5 + 0.5 + 1 = 2 (only the penalties told them apart).
      ep('b', true, [0.5, -0.5]),
      ep('b', true, [1]),
      // All failed: mass 2.
      ep('c', false, [-1, 1]),
      // A failed episode (no reward) does not make group a's outcomes uniform, nor count.
      ep('a', false, [-9], 'sandbox died'),
    ];
    assert.ok(Math.abs(sameOutcomeAdvantageShare(trajs) - 4 / 8) < 1e-12);
    // Group a alone is mixed; b alone is uniform.
    assert.equal(sameOutcomeAdvantageShare(trajs.slice(0, 2)), 0);
    assert.equal(sameOutcomeAdvantageShare(trajs.slice(2, 4)), 1);
    assert.ok(Number.isNaN(sameOutcomeAdvantageShare([ep('z', true, [0])])), 'no advantage mass: NaN');
  });

  it('the prompt format lets real episodes merge: the shipped tokenizer, actions as sampled, one row until the context is full', () => {
    const tokenizer = JSON.parse(
      fs.readFileSync(path.join(__dirname, '..', '..', '..', 'models', 'turnwise-tiny', 'tokenizer.json'), 'utf8'),
    );
    const codec = compactCodec(loadTokenizer(tokenizer));
    const actions = [
      'tw-suspects',
      "sed -i '12s/>=/>/' inventory/stock.py && tw-test || git checkout -q inventory/stock.py",
      'tw-test',
      'submit',
    ];
    const traj = (obsLen: number): Trajectory =>
      ({
        schema: SCHEMA.trajectory,
        taskId: 't',
        groupId: 'g',
        trajId: 'e',
        checkpoint: 'c',
        turns: actions.map((action, index) => ({
          index,
          action,
          observation: `exit 1\n${'FAIL tests/test_stock.py::test_x\n'.repeat(obsLen)}`,
          exitCode: 1,
          durationMs: 1,
          tokenIds: actionIds(codec, action),
          logprobs: actionIds(codec, action).map(() => -0.5),
          advantage: 1,
        })),
        reward: {
          passRate: 1,
          resolved: true,
          turns: 3,
          maxTurns: 6,
          formatError: false,
          efficiencyPenalty: 0,
          formatPenalty: 0,
          reward: 1,
        },
      }) as Trajectory;
    const task = 'Fix the bug: 1 failing test.\nFAIL tests/test_stock.py::test_x';
    const rows = turnTokenRows(codec, task, traj(2), 928);
    assert.equal(rows.length, 4);
    const merged = episodeRows(rows);
    assert.equal(merged.length, 1, 'each prompt continues the previous row exactly');
    assert.deepEqual(merged[0].ids, rows[3].ids);
    // Long observations: the context drops old turns, and a dropped turn breaks the chain.
    const long = turnTokenRows(codec, task, traj(12), 928);
    assert.ok(episodeRows(long).length > 1);
  });

  it('a causal policy gives each action the same log-probs inside the merged row as in its own row', async () => {
    const policy = new TrainablePolicy(initWeights(SMALL_CONFIG, 7, 0.3), { settings: { provider: 'cpu', threads: 1 } });
    try {
      const V = SMALL_CONFIG.vocab_size;
      const r = (n: number, s: number) => Array.from({ length: n }, (_, i) => (i * 7 + s * 13 + 3) % V);
      const t0 = turn([], r(9, 1), r(4, 2), 1);
      const t1 = turn(t0.ids, r(6, 3), r(5, 4), -1);
      const t2 = turn(t1.ids, r(7, 5), r(3, 6), 0.5);
      const [merged] = episodeRows([t0, t1, t2]);
      const [one, two, three, whole] = await policy.logprobs([t0.ids, t1.ids, t2.ids, merged.ids]);
      for (const [k, own] of [one, two, three].entries()) {
        const a = merged.actions[k];
        for (let j = 0; j < a.logprobs.length; j++) {
          const x = own[a.start + j];
          const y = whole[a.start + j];
          assert.ok(Math.abs(x - y) < 1e-5, `action ${k} token ${j}: ${x} vs ${y}`);
        }
      }
    } finally {
      await policy.dispose();
    }
  });
});

describe('train/rows: packRows', () => {
  const ex = (len: number, actionFrom: number, v: number) => ({
    ids: Array(len).fill(v),
    weights: Array.from({ length: len }, (_, i) => (i >= actionFrom ? 1 : 0.3)),
  });

  it('examples packed whole, one segment id each, weights and action mask carried', () => {
    const exs = [ex(50, 40, 1), ex(30, 10, 2), ex(14, 5, 3), ex(20, 0, 4)];
    const { batch, tokens, used } = packRows(exs, 2, 64);
    assert.equal(used, 4);
    assert.equal(tokens, 114);
    const ids = batch.inputIds as number[];
    const seg = batch.segmentIds as number[];
    const w = batch.lossMask as number[];
    const act = batch.actionMask as number[];
    for (const a of [ids, seg, w, act]) assert.equal(a.length, 128);
    // Each example is one contiguous run of one segment id, never split across rows.
    for (let s = 1; s <= 4; s++) {
      const at = seg.map((x, i) => (x === s ? i : -1)).filter((i) => i >= 0);
      assert.equal(at.length, exs[s - 1].ids.length, `segment ${s}`);
      assert.equal(at[at.length - 1] - at[0] + 1, at.length, 'contiguous');
      assert.equal(Math.floor(at[0] / 64), Math.floor(at[at.length - 1] / 64), 'one row');
      at.forEach((i, k) => {
        assert.equal(ids[i], s);
        assert.equal(w[i], exs[s - 1].weights[k]);
        assert.equal(act[i], exs[s - 1].weights[k] >= 1 ? 1 : 0);
      });
    }
    // Padding: segment 0, no weight.
    for (let i = 0; i < 128; i++) if (seg[i] === 0) assert.equal(w[i], 0);
  });

  it('an example that fits nowhere is skipped; one longer than a row is cut to the row', () => {
    const r = packRows([ex(60, 0, 1), ex(60, 0, 2), ex(4, 0, 3)], 1, 64);
    assert.equal(r.used, 2);
    assert.equal(r.tokens, 64);
    assert.ok(!(r.batch.inputIds as number[]).includes(2), 'the example that did not fit is not there at all');
    const long = packRows([ex(100, 0, 5)], 1, 64);
    assert.equal(long.tokens, 64);
    assert.ok((long.batch.segmentIds as number[]).every((s) => s === 1));
  });
});
