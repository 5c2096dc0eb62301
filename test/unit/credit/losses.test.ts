import { strict as assert } from 'node:assert';
import {
  getPolicyLoss,
  gspoSeqLoss,
  klK3,
  policyLossNames,
  ppoTokenLoss,
  tokenEntropy,
  type PolicyLossInput,
} from '../../support/reference-losses';

const close = (a: number, b: number, tol = 1e-9) => assert.ok(Math.abs(a - b) <= tol, `${a} != ${b}`);

// batch 2, seq 3. Row 0 action tokens t1, t2; row 1 action tokens t0, t1. Masked positions
// hold absurd values: if they leaked into any output the numbers below would be far off.
function sample(): PolicyLossInput {
  const ln = Math.log;
  return {
    batch: 2,
    seq: 3,
    //      row 0                      row 1
    logp: [99, ln(1.5) - 1, -1, /**/ ln(0.5) - 2, ln(1.1) - 2, 99],
    oldLogp: [-99, -1, -1, /**/ -2, -2, -99],
    mask: [0, 1, 1, 1, 1, 0],
    advantages: [1, -2],
  };
}

describe('credit/losses', () => {
  it('ppo-token: clipped surrogate, token mean over action tokens', () => {
    // ratios: r0 = [1.5, 1.0], r1 = [0.5, 1.1]; clip to [0.8, 1.2]
    // row0 A=1: t1 max(-1.5, -1.2) = -1.2 (clipped); t2 max(-1, -1) = -1
    // row1 A=-2: t0 max(1.0, 1.6) = 1.6 (clipped); t1 max(2.2, 2.2) = 2.2
    // pg = (-1.2 - 1 + 1.6 + 2.2) / 4 = 0.4; clipFrac = 2/4
    const out = ppoTokenLoss(sample());
    close(out.pgLoss, 0.4);
    close(out.loss, 0.4);
    close(out.clipFrac, 0.5);
    // approxKl = mean(old - logp) = -(ln1.5 + 0 + ln0.5 + ln1.1)/4 = -ln(0.825)/4
    close(out.approxKl, -Math.log(0.825) / 4);
    // grad: clipped tokens 0; unclipped -A*ratio/4: row0 t2 = -1/4, row1 t1 = 2.2/4
    assert.deepEqual(
      [...out.gradLogp].map((g) => +g.toFixed(12)),
      [0, 0, -0.25, 0, 0.55, 0],
    );
  });

  it('ppo-token accepts per-token advantages', () => {
    const s = sample();
    s.advantages = [7, 1, 1, -2, -2, 7]; // same as per-row; masked entries ignored
    close(ppoTokenLoss(s).pgLoss, 0.4);
  });

  it('gspo-seq: one ratio per turn from the mean log-ratio', () => {
    // row0: s = (ln1.5 + 0)/2, ratio = sqrt(1.5) = 1.22474; A=1: max(-1.2247, -1.2) = -1.2 (clipped)
    // row1: s = ln(0.55)/2, ratio = sqrt(0.55) = 0.74162; A=-2: max(1.4832, 1.6) = 1.6 (clipped)
    // pg = (-1.2 + 1.6)/2 = 0.2, both clipped
    const out = gspoSeqLoss(sample());
    close(out.pgLoss, 0.2);
    close(out.clipFrac, 1);
    assert.ok(out.gradLogp.every((g) => g === 0));
    // with clipHigh 0.3 row0 is inside [0.8, 1.3]: -sqrt(1.5); pg = (-1.2247449 + 1.6)/2
    const wide = gspoSeqLoss(sample(), { clipHigh: 0.3 });
    close(wide.pgLoss, (-Math.sqrt(1.5) + 1.6) / 2);
    close(wide.clipFrac, 0.5);
    // row0 gradient per action token: -A*ratio / 2 tokens / 2 turns
    close(wide.gradLogp[1], -Math.sqrt(1.5) / 4);
    close(wide.gradLogp[2], -Math.sqrt(1.5) / 4);
  });

  it('gspo-seq caps the mean log-ratio at 10 and skips turns without action tokens', () => {
    const out = gspoSeqLoss({ batch: 2, seq: 2, logp: [20, 20, 0, 0], oldLogp: [0, 0, 0, 0], mask: [1, 1, 0, 0], advantages: [-1, 5] });
    // only row 0 counts: ratio = e^10 (not e^20); A=-1: max(e^10, 1.2) = e^10
    close(out.pgLoss, Math.exp(10), 1e-6);
    assert.equal(out.gradLogp[0], 0); // capped: no gradient
  });

  it('KL k3 and entropy terms', () => {
    // d = ref - logp = 0.5: k3 = e^0.5 - 0.5 - 1 = 0.14872127
    close(klK3(-1, -0.5), Math.exp(0.5) - 1.5);
    // logits [0,0] -> ln 2; [0, ln 3] -> p = (.25, .75), H = -(.25 ln .25 + .75 ln .75) = 0.5623351446
    const h = tokenEntropy([0, 0, 0, Math.log(3)], 2, 2);
    close(h[0], Math.LN2);
    close(h[1], 0.5623351446188083);
    const input: PolicyLossInput = {
      batch: 1,
      seq: 2,
      logp: [-1, -1],
      oldLogp: [-1, -1],
      refLogp: [-0.5, -1],
      entropy: [0.3, 0.5],
      mask: [1, 1],
      advantages: [0],
    };
    // pg = 0 (A = 0); kl = (0.14872127 + 0)/2; entropy = 0.4
    // loss = 0 + 0.1 * kl - 0.01 * 0.4
    const out = ppoTokenLoss(input, { klCoef: 0.1, entCoef: 0.01 });
    close(out.kl, (Math.exp(0.5) - 1.5) / 2);
    close(out.entropy, 0.4);
    close(out.loss, (0.1 * (Math.exp(0.5) - 1.5)) / 2 - 0.004);
    // KL gradient: klCoef * (1 - e^d) / nTok = 0.1 * (1 - e^0.5) / 2
    close(out.gradLogp[0], (0.1 * (1 - Math.exp(0.5))) / 2);
    close(out.gradLogp[1], 0);
  });

  it("replay term: the replay tokens' weighted mean NLL, apart from the RL terms", () => {
    // Row 0 is RL (mask), row 1 replay (weights 0.3 and 1 on t1, t2; its logp values would move
    // the RL terms if they leaked there, and the RL row's would move the replay mean).
    const input: PolicyLossInput = {
      batch: 2,
      seq: 3,
      logp: [0, -1, -1, /**/ 0, -2, -0.5],
      oldLogp: [0, -1, -1, /**/ 0, -9, -9],
      mask: [0, 1, 1, 0, 0, 0],
      advantages: [1, 0],
      replayMask: [0, 0, 0, 0, 0.3, 1],
    };
    const off = ppoTokenLoss(input);
    const on = ppoTokenLoss(input, { replayCoef: 0.5 });
    // replay = (0.3·2 + 1·0.5) / 1.3
    close(on.replay, 1.1 / 1.3);
    close(on.pgLoss, off.pgLoss);
    close(on.pgLoss, -1); // ratios 1, A = 1: the replay row adds nothing to the RL mean
    close(on.loss, -1 + (0.5 * 1.1) / 1.3);
    close(off.loss, -1);
    close(on.gradLogp[4], (-0.5 * 0.3) / 1.3);
    close(on.gradLogp[5], -0.5 / 1.3);
    close(on.gradLogp[1], off.gradLogp[1]);
    assert.throws(() => ppoTokenLoss({ ...input, replayMask: undefined }, { replayCoef: 0.5 }), /replayCoef > 0 needs replayMask/);
    assert.throws(() => ppoTokenLoss({ ...input, replayMask: [0, 0, 0, 0, -1, 0] }), /replayMask\[4\] is -1/);
  });

  it('gradLogp matches finite differences', () => {
    let seed = 7;
    const rnd = () => ((seed = (seed * 16807) % 2147483647) / 2147483647) * 2 - 1;
    for (const fn of [ppoTokenLoss, gspoSeqLoss]) {
      const B = 3,
        T = 4,
        n = B * T;
      const logp = Array.from({ length: n }, () => rnd() * 0.3 - 1);
      const input: PolicyLossInput = {
        batch: B,
        seq: T,
        logp,
        oldLogp: Array.from({ length: n }, (_, i) => logp[i] + rnd() * 0.1),
        refLogp: Array.from({ length: n }, (_, i) => logp[i] + rnd() * 0.2),
        mask: Array.from({ length: n }, (_, i) => (i % T === 0 || i >= 2 * T ? 0 : 1)),
        // The last row is a replay row: its gradient comes from the replay term alone.
        replayMask: Array.from({ length: n }, (_, i) => (i >= 2 * T && i % T !== 0 ? 0.3 + (i % T) / 4 : 0)),
        advantages: [1.3, -0.7, 0.4],
      };
      const params = { clipLow: 0.05, clipHigh: 0.05, klCoef: 0.3, replayCoef: 0.7 };
      const g = fn(input, params).gradLogp;
      for (let i = 0; i < n; i++) {
        const h = 1e-6;
        const up = fn({ ...input, logp: logp.map((v, j) => (j === i ? v + h : v)) }, params).loss;
        const dn = fn({ ...input, logp: logp.map((v, j) => (j === i ? v - h : v)) }, params).loss;
        close(g[i], (up - dn) / (2 * h), 1e-5);
      }
    }
  });

  it('registry: known names, unknown name lists the valid ones, bad shapes raise', () => {
    assert.deepEqual(policyLossNames(), ['ppo-token', 'gspo-seq']);
    assert.equal(getPolicyLoss('gspo-seq'), gspoSeqLoss);
    assert.throws(() => getPolicyLoss('ppo'), /unknown policy loss "ppo"/);
    try {
      getPolicyLoss('ppo');
    } catch (e) {
      assert.match((e as { hint: string }).hint, /ppo-token, gspo-seq/);
    }
    assert.throws(() => ppoTokenLoss({ ...sample(), mask: [1, 1] }), /mask has length 2/);
    assert.throws(() => ppoTokenLoss(sample(), { klCoef: 0.1 }), /needs refLogp/);
  });
});
