// The correction of rollouts drawn from quantized weights: old log-probs from the float policy,
// advantages weighted by the truncated ratio p / q, and the statistics the metrics report; and, on
// a real model sampled through an int4 session, the corrected policy gradient equal in expectation
// to the float policy's.
import * as assert from 'node:assert/strict';
import { Policy } from '../../../src/policy/inference/policy';
import { logSoftmax } from '../../../src/policy/inference/sampling';
import { initWeights } from '../../../src/policy/model/weights';
import { correctSamplerMismatch, rescoreRows } from '../../../src/train/sampler-correction';
import type { TurnRowData } from '../../../src/train/rows';
import { SMALL_CONFIG } from '../policy/helpers';

describe('train/sampler-correction: quantized rollouts trained as the float policy', function () {
  this.timeout(120000);

  it('old log-probs become the float scores; each token’s advantage is weighted by min(p/q, cap); the statistics', () => {
    // One episode of two turns, the second continuing the first (one merged row), and one of one turn.
    const a: TurnRowData = { ids: [1, 2, 3, 4], actionStart: 2, logprobs: [-1, -2], advantage: 0.5 };
    const b: TurnRowData = { ids: [1, 2, 3, 4, 5, 6], actionStart: 5, logprobs: [-0.5], advantage: 0.5, tokenAdvantages: [0.8] };
    const c: TurnRowData = { ids: [7, 8, 9], actionStart: 1, logprobs: [-3, -1], advantage: -1 };
    const { ids, places } = rescoreRows([[a, b], [c]]);
    assert.deepEqual(ids, [
      [1, 2, 3, 4, 5, 6],
      [7, 8, 9],
    ]);
    assert.deepEqual(
      places.map((p) => [p.traj, p.turn, p.row, p.start]),
      [
        [0, 0, 0, 2],
        [0, 1, 0, 5],
        [1, 0, 1, 1],
      ],
    );
    const ln = Math.log;
    // Float log-probs giving ratios 1 and e (turn a), 1/2 (turn b), 3 and 1/4 (episode c).
    const scored = [Float32Array.of(0, 0, -1, -1, 0, -0.5 + ln(0.5)), Float32Array.of(0, -3 + ln(3), -1 + ln(0.25))];
    const { rows, stats } = correctSamplerMismatch([[a, b], [c]], scored, 2);
    const close = (x: number[], y: number[]) => x.forEach((v, i) => assert.ok(Math.abs(v - y[i]) < 1e-6, `${x} vs ${y}`));
    close(rows[0][0].logprobs, [-1, -1]);
    close(rows[0][0].tokenAdvantages!, [0.5 * 1, 0.5 * 2]); // ratios 1 and e (capped)
    close(rows[0][1].logprobs, [-0.5 + ln(0.5)]);
    close(rows[0][1].tokenAdvantages!, [0.8 * 0.5]); // the per-token advantage, weighted
    close(rows[1][0].tokenAdvantages!, [-1 * 2, -1 * 0.25]); // ratio 3 capped, 0.25
    assert.equal(rows[0][0].advantage, 0.5, 'the turn advantage (the sign the update filters by) is kept');
    assert.equal(a.logprobs[0], -1, 'the input rows are not changed');
    assert.equal(stats.tokens, 5);
    assert.ok(Math.abs(stats.ratioMean - (1 + Math.E + 0.5 + 3 + 0.25) / 5) < 1e-6);
    assert.ok(Math.abs(stats.ratioMax - 3) < 1e-6);
    assert.equal(stats.cappedFrac, 2 / 5);
    assert.ok(stats.kl > 0);
  });

  it('a score that is not a number leaves its token out (weight 0) instead of poisoning the loss', () => {
    const a: TurnRowData = { ids: [1, 2, 3], actionStart: 1, logprobs: [-1, -2], advantage: 1 };
    const { rows } = correctSamplerMismatch([[a]], [Float32Array.of(0, NaN, -2)], 2);
    assert.deepEqual(rows[0][0].tokenAdvantages, [0, 1]);
    assert.deepEqual(rows[0][0].logprobs, [-1, -2]);
  });

  it('on a model sampled through int4 sessions, the corrected policy gradient is the float policy’s in expectation; uncorrected it is not', async () => {
    // The gradient of E[A(y) log p(y)] with respect to the logits at the action's position, the
    // factor every parameter's gradient goes through: Σ_y p(y) A(y) (e_y − p) for the float policy.
    const c = SMALL_CONFIG;
    const V = c.vocab_size;
    const weights = initWeights(c, 7, 0.3); // large weights, so int4 moves the distribution measurably
    const float = new Policy(weights, undefined, { provider: 'cpu', rolloutPrecision: 'float32' });
    const quant = new Policy(weights, undefined, { provider: 'cpu', rolloutPrecision: 'int4' });
    try {
      const prompt = [3, 14, 15, 9, 26];
      // A sample call draws its first token from the float prefill's logits and the next ones
      // through the decode session: each row draws two tokens, and the action is the second,
      // drawn by the int4 session given the first.
      const N = 4000;
      const seq = quant.newSequence(prompt);
      await quant.extend([{ seq }]);
      const forks = Array.from({ length: N }, () => seq.fork());
      const drawn = await quant.sample(forks.map((s, i) => ({ seq: s, seed: 1000 + i, maxNewTokens: 2, temperature: 1, stopIds: [] })));
      // The float policy's distribution after each first token drawn.
      const firsts = [...new Set(drawn.map((r) => r.tokenIds[0]))];
      const logits = await float.logits(firsts.map((y1) => [...prompt, y1]));
      const pAfter = new Map(
        firsts.map((y1, i) => [y1, logSoftmax(logits[i].subarray(prompt.length * V, (prompt.length + 1) * V), 1).map(Math.exp)]),
      );
      const A = (y: number) => (y % 3) - 1;
      // The exact float gradient, block by first token, weighted by how often it was drawn.
      const exact = new Map(firsts.map((y1) => [y1, new Array<number>(V).fill(0)]));
      for (const r of drawn) {
        const p = pAfter.get(r.tokenIds[0])!;
        const g = exact.get(r.tokenIds[0])!;
        for (let y = 0; y < V; y++) for (let v = 0; v < V; v++) g[v] += (p[y] * A(y) * ((v === y ? 1 : 0) - p[v])) / N;
      }
      const rows: TurnRowData[][] = drawn.map((r) => [
        { ids: [...prompt, ...r.tokenIds], actionStart: prompt.length + 1, logprobs: r.logprobs.slice(1), advantage: A(r.tokenIds[1]) },
      ]);
      // The update's path: the float policy scores the rows, the correction weighs the advantages.
      const scored = await float.tokenLogprobs(rescoreRows(rows).ids);
      const { rows: corrected, stats } = correctSamplerMismatch(rows, scored, 100);
      const estimate = (adv: (i: number) => number) => {
        const est = new Map(firsts.map((y1) => [y1, new Array<number>(V).fill(0)]));
        drawn.forEach((r, i) => {
          const [y1, y] = r.tokenIds;
          const p = pAfter.get(y1)!;
          const g = est.get(y1)!;
          for (let v = 0; v < V; v++) g[v] += (adv(i) * ((v === y ? 1 : 0) - p[v])) / N;
        });
        return est;
      };
      const dist = (est: Map<number, number[]>) =>
        Math.sqrt(firsts.reduce((s, y1) => s + est.get(y1)!.reduce((t, x, v) => t + (x - exact.get(y1)![v]) ** 2, 0), 0));
      const withCorrection = dist(estimate((i) => corrected[i][0].tokenAdvantages![0]));
      const without = dist(estimate((i) => rows[i][0].advantage));
      const scale = Math.sqrt(firsts.reduce((s, y1) => s + exact.get(y1)!.reduce((t, x) => t + x * x, 0), 0));
      assert.ok(stats.kl > 0.01, `int4 is measurably off the float policy here (KL ${stats.kl})`);
      assert.equal(stats.cappedFrac, 0);
      // Monte Carlo error of 4,000 draws: a few percent of the gradient's norm.
      assert.ok(withCorrection < 0.15 * scale, `corrected: off by ${withCorrection} of ${scale}`);
      assert.ok(without > 2 * withCorrection, `uncorrected off by ${without}, corrected by ${withCorrection}`);
    } finally {
      await float.dispose();
      await quant.dispose();
    }
  });
});
