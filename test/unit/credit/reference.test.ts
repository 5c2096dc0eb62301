import { strict as assert } from 'node:assert';
import { computeAdvantages } from '../../../src/credit';
import { gearTurnWeights } from '../../../src/credit/reference';
import type { TurnReference, TurnRow } from '../../../src/credit/types';

const close = (a: number, b: number, tol = 1e-9) => assert.ok(Math.abs(a - b) <= tol, `${a} != ${b}`);
const closeAll = (a: readonly number[], b: readonly number[], tol = 1e-9) => {
  assert.equal(a.length, b.length, `${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
  a.forEach((x, i) => close(x, b[i], tol));
};

const row = (promptId: string, trajId: string, turn: number, score: number, reference?: TurnReference): TurnRow => ({
  promptId,
  trajId,
  turn,
  bash: `cmd ${turn}`,
  score,
  ...(reference ? { reference } : {}),
});

// GRPO with the group's sample std: two episodes scored 1 and 0 → ±0.5 / (√0.5 + ε)
const A = 0.5 / (Math.SQRT1_2 + 1e-6);

describe('credit/gear', () => {
  // a (R = 1), one turn of three tokens: d = s − t = [0, 2.5, 0.1]: a spike at token 1 (> spikeTau 1)
  //   starts a segment that runs to the end of the action, so token 2 takes d = 2.5 as well.
  // b (R = 0), two turns: turn 0 d = [−0.5, 0] (no spike); turn 1 d = [1.5, 0.1]: a spike at token 0.
  // c, d: a second task with no reference (a failing-test task): the group advantage alone.
  const rows = (): TurnRow[] => [
    row('p', 'a', 0, 1, { studentLogp: [-0.1, -0.2, -0.3], teacherLogp: [-0.1, -2.7, -0.4] }),
    row('p', 'b', 0, 0, { studentLogp: [-1, -0.5], teacherLogp: [-0.5, -0.5] }),
    row('p', 'b', 1, 0, { studentLogp: [-0.2, -3], teacherLogp: [-1.7, -3.1] }),
    row('q', 'c', 0, 1),
    row('q', 'd', 0, 0),
  ];

  it('segments from divergence spikes and weights on the group advantage, by hand', () => {
    const out = computeAdvantages('gear', rows());
    const t = Math.tanh;
    // a: A > 0, weight = 1 − 0.5 · tanh(d_eff): [1, 1 − .5 tanh 2.5, 1 − .5 tanh 2.5], normalized to mean 1
    const wa = [1, 1 - 0.5 * t(2.5), 1 - 0.5 * t(2.5)];
    const na = 3 / wa.reduce((s, x) => s + x, 0);
    closeAll(out.tokenAdvantages![0]!, [A * wa[0] * na, A * wa[1] * na, A * wa[2] * na]);
    // b: A < 0, weight = 1 + 0.5 · tanh(d_eff): turn 0 [1 + .5 tanh(−.5), 1], turn 1 [1 + .5 tanh 1.5, same (segment)]
    const wb = [1 + 0.5 * t(-0.5), 1, 1 + 0.5 * t(1.5), 1 + 0.5 * t(1.5)];
    const nb = 4 / wb.reduce((s, x) => s + x, 0);
    closeAll(out.tokenAdvantages![1]!, [-A * wb[0] * nb, -A * wb[1] * nb]);
    closeAll(out.tokenAdvantages![2]!, [-A * wb[2] * nb, -A * wb[3] * nb]);
    // the failed episode's blame goes to its departure (turn 1), the winner's credit to what the teacher agreed with
    assert.ok(out.advantages[2] < out.advantages[1]);
    assert.ok(out.tokenAdvantages![0]![0] > out.tokenAdvantages![0]![1]);
    // the episode keeps GRPO's advantage mass: Σ token advantages = A × its tokens
    close(
      out.tokenAdvantages![0]!.reduce((s, x) => s + x, 0),
      3 * A,
    );
    close(
      [...out.tokenAdvantages![1]!, ...out.tokenAdvantages![2]!].reduce((s, x) => s + x, 0),
      -4 * A,
    );
    // a row's advantage is the mean of its tokens'
    close(out.advantages[2], (out.tokenAdvantages![2]![0] + out.tokenAdvantages![2]![1]) / 2);
    assert.deepEqual(out.components.spikes, [1, 0, 1, 0, 0]);
    // c, d: no reference → GRPO's advantage, every token alike; counted in the fallback share
    assert.equal(out.tokenAdvantages![3], null);
    closeAll([out.advantages[3], out.advantages[4]], [A, -A]);
    close(out.diagnostics.frac_reference_fallback!, 2 / 4);
  });

  it('with the teacher equal to the student it is GRPO, token for token', () => {
    let s = 7;
    const rnd = () => ((s = (s * 16807) % 2147483647) / 2147483647) * -3;
    const rs: TurnRow[] = [];
    for (const [p, id, score] of [
      ['p', 'a', 1],
      ['p', 'b', 0.3],
      ['p', 'c', 0],
      ['q', 'd', 0.5],
      ['q', 'e', 0.5],
    ] as const) {
      for (let k = 0; k < 3; k++) {
        const lp = Array.from({ length: 4 + k }, rnd);
        rs.push(row(p, id, k, score, { studentLogp: lp, teacherLogp: lp.slice() }));
      }
    }
    const gear = computeAdvantages('gear', rs);
    const grpo = computeAdvantages('grpo', rs);
    closeAll(gear.advantages, grpo.advantages, 1e-12);
    gear.tokenAdvantages!.forEach((tok, i) => tok!.forEach((x) => close(x, grpo.advantages[i], 1e-12)));
    close(gear.diagnostics.frac_reference_fallback!, 0);
  });

  it('a spike starts a new segment; a turn boundary ends one', () => {
    const p = { spikeTau: 1, divScale: 1, weight: 0.5 };
    const { weights, spikes } = gearTurnWeights([0.2, 3, -1, 1.2, 0], -1, p);
    const w = (d: number) => 1 + 0.5 * Math.tanh(d);
    closeAll(weights, [w(0.2), w(3), w(3), w(1.2), w(1.2)]);
    assert.equal(spikes, 2);
    // κ must leave every weight positive
    assert.throws(() => computeAdvantages('gear', rows(), { weight: 1 }), /weight must be in \[0, 1\)/);
  });
});

describe('credit/gear and a2tgpo: penalties', () => {
  // A task where every episode failed: a stopped after one read and submitted; b kept trying and
  // repeated a command (−0.05 in its reward, charged to its turn 1).
  const rows = (): TurnRow[] => {
    const lp = { studentLogp: [-0.5, -0.5], teacherLogp: [-0.5, -0.5], refBefore: -9, refAfter: -9 };
    const rs = [
      row('p', 'a', 0, 0, lp),
      row('p', 'a', 1, 0, lp),
      row('p', 'b', 0, -0.05, lp),
      row('p', 'b', 1, -0.05, lp),
      row('p', 'b', 2, -0.05, lp),
    ];
    rs[3].penalty = 0.05;
    return rs;
  };

  for (const name of ['gear', 'a2tgpo']) {
    it(`${name}: penalties in the reward credit the episode that stopped; charged to their turns, only the penalized turn moves`, () => {
      const episode = computeAdvantages(name, rows());
      // GRPO over (0, −0.05): a's every turn, its submit included, above the mean
      assert.ok(episode.advantages.slice(0, 2).every((x) => x > 0.5));
      const turn = computeAdvantages(name, rows(), { penalties: 'turn' });
      closeAll(turn.advantages, [0, 0, 0, -0.05 / 0.5, 0], 1e-12);
      if (turn.tokenAdvantages) closeAll(turn.tokenAdvantages[3]!, [-0.1, -0.1], 1e-12);
      assert.throws(
        () => computeAdvantages(name, rows(), { penalties: 'turn', penaltyScale: 0 }),
        new RegExp(`${name}: penaltyScale must be > 0`),
      );
    });
  }
});

describe('credit/a2tgpo', () => {
  // Task p: a (R = 1) and b (R = 0) two turns each, c (R = 0) one turn; log P(reference fix) before → after each turn.
  // Gains: a [4, 4], b [1, −3], c [0]. Task q: e's turn 1 was not scored against the reference: e falls back.
  const rows = (): TurnRow[] => [
    row('p', 'a', 0, 1, { refBefore: -10, refAfter: -6 }),
    row('p', 'a', 1, 1, { refBefore: -6, refAfter: -2 }),
    row('p', 'b', 0, 0, { refBefore: -10, refAfter: -9 }),
    row('p', 'b', 1, 0, { refBefore: -9, refAfter: -12 }),
    row('p', 'c', 0, 0, { refBefore: -10, refAfter: -10 }),
    row('q', 'e', 0, 1, { refBefore: -5, refAfter: -1 }),
    row('q', 'e', 1, 1),
    row('q', 'f', 0, 0, { refBefore: -5, refAfter: -5 }),
  ];

  it('turn-group normalization, variance-rescaled accumulation and the clip factor, by hand', () => {
    const out = computeAdvantages('a2tgpo', rows());
    const eps = 1e-6;
    // turn 0 of p: gains [4, 1, 0]: mean 5/3, sample sd √(((7/3)² + (2/3)² + (5/3)²) / 2)
    const m0 = 5 / 3;
    const sd0 = Math.sqrt(((4 - m0) ** 2 + (1 - m0) ** 2 + (0 - m0) ** 2) / 2);
    const [za0, zb0, zc0] = [4, 1, 0].map((x) => (x - m0) / (sd0 + eps));
    // turn 1 of p: gains [4, −3]: mean .5, sd √(2 · 3.5²) → ±3.5 / (sd + ε)
    const sd1 = Math.sqrt(2 * 3.5 ** 2);
    const za1 = 3.5 / (sd1 + eps);
    const zb1 = -za1;
    closeAll(out.components.gainNorm, [za0, za1, zb0, zb1, zc0, 0, 0, 0]);
    // P_k = Σ_{j ≥ k} γ^{j−k} z_j / √(terms), γ = .9
    const P = [(za0 + 0.9 * za1) / Math.SQRT2, za1, (zb0 + 0.9 * zb1) / Math.SQRT2, zb1, zc0];
    closeAll(out.components.process.slice(0, 5), P);
    // group advantage (p: scores 1, 0, 0) + .5 · P
    const g = computeAdvantages('grpo', rows()).advantages;
    closeAll(
      out.advantages.slice(0, 5),
      P.map((x, i) => g[i] + 0.5 * x),
    );
    // clip factor 1 + .3 (2σ(z) − 1) of each turn's own z
    const clip = (z: number) => 1 + 0.3 * (2 / (1 + Math.exp(-z)) - 1);
    closeAll(out.clipScale!.slice(0, 5), [za0, za1, zb0, zb1, zc0].map(clip), 1e-12);
    // q: e lacks a gain on turn 1, so e is left out; f alone at turn 0 has no peers: both take GRPO's advantage, clip 1
    closeAll(out.advantages.slice(5), g.slice(5));
    closeAll(out.clipScale!.slice(5), [1, 1, 1]);
    close(out.diagnostics.frac_reference_fallback!, 1 / 5);
  });

  it('without any reference it is GRPO with the loss clip unchanged', () => {
    const rs = rows().map(({ reference: _r, ...r }) => r);
    const out = computeAdvantages('a2tgpo', rs);
    closeAll(out.advantages, computeAdvantages('grpo', rs).advantages, 1e-12);
    assert.ok(out.clipScale!.every((c) => c === 1));
    close(out.diagnostics.frac_reference_fallback!, 1);
  });
});
