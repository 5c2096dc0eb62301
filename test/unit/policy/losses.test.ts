// The ONNX policy losses against the pure reference functions of test/support/reference-losses.ts: values,
// metrics and d loss / d logp, for ppo-token and gspo-seq with KL (k3) and entropy terms.
import * as assert from 'node:assert/strict';
import { gspoSeqLoss, ppoTokenLoss, type PolicyLossFn } from '../../support/reference-losses';
import { gradients, Graph, OnnxSession, toModelProto, type HostTensor } from '../../../src/onnx';
import { buildPolicyLoss, type TrainLoss } from '../../../src/policy/training/graphs';
import { SeededRandom } from '../../../src/policy/model/weights';

const B = 4;
const N = 9;

function data(seed: number, weighted = false) {
  const r = new SeededRandom(seed);
  const n = B * N;
  const u = (lo: number, hi: number) => lo + (hi - lo) * r.next();
  const logp = Float32Array.from({ length: n }, () => u(-3, -0.05));
  // old log-probs ±0.5 away plus a per-row shift, so tokens and whole rows land on both sides of
  // the clip range.
  const shift = [0.45, -0.05, 0, -0.4];
  const oldLogp = Float32Array.from(logp, (x, i) => x + shift[Math.floor(i / N)] + u(-0.5, 0.5));
  const refLogp = Float32Array.from(logp, (x) => x + u(-1, 1));
  const advantages = Float32Array.from({ length: n }, () => u(-1.5, 1.5));
  const entropy = Float32Array.from({ length: n }, () => u(0.1, 4));
  const mask = Float32Array.from({ length: n }, (_, i) => (Math.floor(i / N) === 2 ? 0 : r.next() < 0.7 ? 1 : 0)); // row 2 has no action token
  // Per-token weights (lossMask as a weight): the means become Σ w·x / Σ w in both.
  if (weighted) for (let i = 0; i < n; i++) if (mask[i]) mask[i] = [1, 0.3, 0.05, 2][Math.floor(r.next() * 4)];
  return { logp, oldLogp, refLogp, advantages, entropy, mask } as {
    logp: Float32Array;
    oldLogp: Float32Array;
    refLogp: Float32Array;
    advantages: Float32Array;
    entropy: Float32Array;
    mask: Float32Array;
    clipScale?: Float32Array;
  };
}

/** The reference losses' input for `d` (without its clip factor). */
function lossInput(d: ReturnType<typeof data>) {
  return {
    batch: B,
    seq: N,
    logp: d.logp,
    oldLogp: d.oldLogp,
    advantages: d.advantages,
    mask: d.mask,
    refLogp: d.refLogp,
    entropy: d.entropy,
  };
}

async function onnxLoss(
  kind: TrainLoss,
  d: ReturnType<typeof data>,
  h: { clipLow: number; clipHigh: number; klCoef: number; entCoef: number },
) {
  const g = Graph.create('loss');
  const inp = (name: string) => g.input(name, 'float32', [B, N]);
  const logp = inp('logp');
  const vals = {
    logp,
    oldLogp: inp('old'),
    refLogp: inp('ref'),
    advantages: inp('adv'),
    entropy: inp('ent'),
    mask: inp('mask'),
    ...(d.clipScale ? { clipScale: inp('clip') } : {}),
  };
  const sc = (name: string) => g.input(name, 'float32', []);
  const { loss, metrics } = buildPolicyLoss(
    g,
    kind,
    vals,
    { clipLow: sc('cl'), clipHigh: sc('ch'), klCoef: sc('klc'), entCoef: sc('entc') },
    { kl: true, entropy: true },
  );
  const [dlogp] = gradients(g, loss, [logp]);
  g.output(dlogp, 'dlogp');
  for (const [k, v] of Object.entries(metrics)) g.output(v, `m_${k}`);
  const s = await OnnxSession.create(toModelProto(g), { provider: 'cpu' });
  const t = (a: Float32Array): HostTensor => ({ dtype: 'float32', dims: [B, N], data: a });
  const x = (v: number): HostTensor => ({ dtype: 'float32', dims: [], data: Float32Array.of(v) });
  const out = await s.run({
    logp: t(d.logp),
    old: t(d.oldLogp),
    ref: t(d.refLogp),
    adv: t(d.advantages),
    ent: t(d.entropy),
    mask: t(d.mask),
    ...(d.clipScale ? { clip: t(d.clipScale) } : {}),
    cl: x(h.clipLow),
    ch: x(h.clipHigh),
    klc: x(h.klCoef),
    entc: x(h.entCoef),
  });
  await s.release();
  const m = (k: string) => (out[`m_${k}`].data as Float32Array)[0];
  return {
    loss: m('loss'),
    pgLoss: m('pg_loss'),
    clipFrac: m('clip_frac'),
    approxKl: m('approx_kl'),
    kl: m('kl'),
    entropy: m('entropy'),
    grad: out.dlogp.data as Float32Array,
  };
}

function compare(kind: TrainLoss, ref: PolicyLossFn) {
  for (const [seed, h, weighted] of [
    [1, { clipLow: 0.2, clipHigh: 0.2, klCoef: 0.1, entCoef: 0.01 }, false],
    [2, { clipLow: 0.2, clipHigh: 0.28, klCoef: 0, entCoef: 0 }, false],
    [4, { clipLow: 0.1, clipHigh: 0.3, klCoef: 0.5, entCoef: 0.05 }, false],
    [6, { clipLow: 0.2, clipHigh: 0.2, klCoef: 0.2, entCoef: 0.02 }, true],
  ] as const) {
    it(`${kind} equals the reference (seed ${seed}, clip ${h.clipLow}/${h.clipHigh}, kl ${h.klCoef}, entropy ${h.entCoef}${weighted ? ', weighted tokens' : ''})`, async () => {
      const d = data(seed, weighted);
      const want = ref(lossInput(d), h);
      const got = await onnxLoss(kind, d, h);
      for (const k of ['loss', 'pgLoss', 'clipFrac', 'approxKl', 'kl', 'entropy'] as const) {
        assert.ok(Math.abs(got[k] - want[k]) < 1e-5 * Math.max(1, Math.abs(want[k])), `${k}: onnx ${got[k]} vs reference ${want[k]}`);
      }
      assert.ok(want.clipFrac > 0 && want.clipFrac < 1, 'the data exercises both clip branches');
      let gmax = 0;
      for (let i = 0; i < B * N; i++) {
        gmax = Math.max(gmax, Math.abs(want.gradLogp[i]));
        assert.ok(Math.abs(got.grad[i] - want.gradLogp[i]) < 1e-6, `d loss/d logp[${i}]: ${got.grad[i]} vs ${want.gradLogp[i]}`);
      }
      assert.ok(gmax > 1e-3, 'gradient is not trivially zero');
    });
  }
}

describe('policy/training losses vs test/support/reference-losses.ts', function () {
  this.timeout(30000);
  compare('ppo-token', ppoTokenLoss);
  compare('gspo-seq', gspoSeqLoss);

  it('ppo-token with a clip factor per token (a2tgpo) equals the reference, and the factor changes the loss', async () => {
    const d = data(3);
    const r = new SeededRandom(11);
    d.clipScale = Float32Array.from(d.logp, () => 0.3 + 1.4 * r.next());
    const h = { clipLow: 0.2, clipHigh: 0.2, klCoef: 0.1, entCoef: 0 };
    const input = lossInput(d);
    const want = ppoTokenLoss({ ...input, clipScale: d.clipScale }, h);
    const got = await onnxLoss('ppo-token', d, h);
    for (const k of ['loss', 'pgLoss', 'clipFrac'] as const)
      assert.ok(Math.abs(got[k] - want[k]) < 1e-5 * Math.max(1, Math.abs(want[k])), `${k}: onnx ${got[k]} vs reference ${want[k]}`);
    for (let i = 0; i < B * N; i++) assert.ok(Math.abs(got.grad[i] - want.gradLogp[i]) < 1e-6, `d loss/d logp[${i}]`);
    // the factor is not a no-op: the loss differs from the same batch at factor 1
    const plain = ppoTokenLoss(input, h);
    assert.ok(Math.abs(want.pgLoss - plain.pgLoss) > 1e-3, `${want.pgLoss} vs ${plain.pgLoss}`);
  });
});
