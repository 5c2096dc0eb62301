// Estimators that read each turn against the task's reference fix (docs/credit-assignment.md
// "gear and a2tgpo"): a mutation task knows the line it broke, so the policy shown that line is a
// teacher for free. Both start from GRPO's group advantage and fall back to it alone where a
// trajectory was not scored against a reference (a failing-test task has none).
//   gear: the student's tokens scored by the teacher; where they diverge, a spike starts a segment
//         whose tokens share the weight of the divergence at its start; aligned tokens keep their own.
//   a2tgpo: the information gain of each turn on the reference fix, normalized among the turns at
//         the same depth of the same task, accumulated discounted over the remaining turns and
//         divided by the square root of their number; each turn's clip range widened or narrowed by it.
import { mean, stdUnbiased } from '../core/stats';
import { TurnwiseError } from '../core/errors';
import { baseDiagnostics, indexBatch, num } from './batch';
import { grpoAdvantages } from './grpo';
import { chargePenaltiesToTurns } from './penalties';
import type { EstimatorResult, EstimatorSpec, Params, TurnRow } from './types';

/** The group advantage both estimators reshape: GRPO's, with its scale and epsilon. */
function groupAdvantage(rows: readonly TurnRow[], params: Params): number[] {
  return grpoAdvantages(rows, { scale: params.scale, epsilon: params.epsilon }).advantages;
}

/** A row's per-token divergence log π_student − log π_teacher, or undefined where the teacher pass did not score it. */
export function tokenDivergence(r: TurnRow): number[] | undefined {
  const s = r.reference?.studentLogp;
  const t = r.reference?.teacherLogp;
  if (!s || !t || s.length === 0 || s.length !== t.length) return undefined;
  const d = s.map((x, j) => x - t[j]);
  return d.every(Number.isFinite) ? d : undefined;
}

/**
 * GEAR's raw token weights for one turn: a token whose divergence exceeds `spikeTau` starts a
 * segment that runs to the next spike or the end of the action; segment tokens take the
 * divergence at the segment's start, aligned tokens their own. weight = 1 − sign(A) · κ ·
 * tanh(d / divScale): with A > 0 the tokens the teacher would also write gain, a departure loses;
 * with A < 0 the departure takes more of the blame, the agreed tokens less.
 */
export function gearTurnWeights(
  d: readonly number[],
  sign: number,
  p: { spikeTau: number; divScale: number; weight: number },
): { weights: number[]; spikes: number } {
  let anchor: number | undefined;
  let spikes = 0;
  const weights = d.map((x) => {
    if (x > p.spikeTau) {
      anchor = x;
      spikes++;
    }
    const u = Math.tanh((anchor ?? x) / p.divScale);
    return 1 - sign * p.weight * u;
  });
  return { weights, spikes };
}

export function gearAdvantages(rows: readonly TurnRow[], params: Params): EstimatorResult {
  const batch = indexBatch(rows);
  const base = groupAdvantage(rows, params);
  const p = { spikeTau: num(params, 'spikeTau'), divScale: num(params, 'divScale'), weight: num(params, 'weight') };
  inRange('gear', 'weight', p.weight, 0, 1, 'the largest share a token weight moves from 1, e.g. 0.5');
  if (!(p.divScale > 0)) throw new TurnwiseError('invalid-input', `gear: divScale must be > 0, got ${p.divScale}`);
  const advantages = base.slice();
  const tokenAdvantages: (number[] | null)[] = rows.map(() => null);
  const spikesOf = new Array<number>(rows.length).fill(0);
  const maxDiv = new Array<number>(rows.length).fill(0);
  const weightMean = new Array<number>(rows.length).fill(1);
  let fallback = 0;
  for (const tr of batch.trajs) {
    const A = base[tr.rows[0]];
    const perRow = tr.rows.map((i) => ({ i, d: tokenDivergence(rows[i]) }));
    if (!perRow.some((x) => x.d)) {
      fallback++;
      continue;
    }
    const raw = perRow.map(({ i, d }) => {
      if (!d) return undefined;
      maxDiv[i] = Math.max(...d);
      const w = gearTurnWeights(d, Math.sign(A), p);
      spikesOf[i] = w.spikes;
      return w.weights;
    });
    // Mean weight 1 over the trajectory's scored tokens: the episode keeps GRPO's advantage mass, spread anew.
    const all = raw.flatMap((w) => w ?? []);
    const norm = all.length / all.reduce((s, w) => s + w, 0);
    perRow.forEach(({ i }, k) => {
      const w = raw[k];
      if (!w) return;
      const tokens = w.map((x) => A * x * norm);
      tokenAdvantages[i] = tokens;
      advantages[i] = mean(tokens);
      weightMean[i] = mean(w) * norm;
    });
  }
  const diagnostics = {
    ...baseDiagnostics(batch),
    frac_reference_fallback: batch.trajs.length ? fallback / batch.trajs.length : 0,
  };
  return {
    advantages,
    tokenAdvantages,
    components: { episode: base, weight: weightMean, spikes: spikesOf, divergenceMax: maxDiv },
    diagnostics,
  };
}

/** Per row, the information gain log P(ref | after the turn) − log P(ref | before it), or undefined. */
export function informationGain(r: TurnRow): number | undefined {
  const a = r.reference?.refAfter;
  const b = r.reference?.refBefore;
  return a !== undefined && b !== undefined && Number.isFinite(a) && Number.isFinite(b) ? a - b : undefined;
}

export function a2tgpoAdvantages(rows: readonly TurnRow[], params: Params): EstimatorResult {
  const batch = indexBatch(rows);
  const base = groupAdvantage(rows, params);
  const eps = num(params, 'epsilon');
  const gamma = num(params, 'gamma');
  const igCoef = num(params, 'igCoef');
  const clipBeta = num(params, 'clipBeta');
  inRange('a2tgpo', 'clipBeta', clipBeta, 0, 1, "the largest share a turn's clip range moves, e.g. 0.3");
  if (!(gamma >= 0 && gamma <= 1)) throw new TurnwiseError('invalid-input', `a2tgpo: gamma must be in [0, 1], got ${gamma}`);
  const ig = new Array<number>(rows.length).fill(0);
  const z = new Array<number>(rows.length).fill(0);
  const process = new Array<number>(rows.length).fill(0);
  const clipScale = new Array<number>(rows.length).fill(1);
  // A trajectory counts when every one of its turns has its gain: the accumulation reads them all.
  const counted = batch.trajs.map((tr) => tr.rows.every((i) => informationGain(rows[i]) !== undefined));
  // Turn-group normalization: among the counted turns of one task at the same turn index.
  const cells = new Map<string, number[]>();
  batch.trajs.forEach((tr, t) => {
    if (!counted[t]) return;
    for (const i of tr.rows) {
      ig[i] = informationGain(rows[i])!;
      const key = `${tr.promptId}\u0000${rows[i].turn}`;
      let c = cells.get(key);
      if (!c) cells.set(key, (c = []));
      c.push(i);
    }
  });
  for (const members of cells.values()) {
    if (members.length < 2) continue;
    const xs = members.map((i) => ig[i]);
    const m = mean(xs);
    const sd = stdUnbiased(xs);
    for (const i of members) z[i] = (ig[i] - m) / (sd + eps);
  }
  // Variance-rescaled discounted accumulation over the turns from k on, then the clip factor of each turn's own z.
  batch.trajs.forEach((tr, t) => {
    if (!counted[t]) return;
    const n = tr.rows.length;
    for (let k = 0; k < n; k++) {
      let acc = 0;
      for (let j = k; j < n; j++) acc += Math.pow(gamma, j - k) * z[tr.rows[j]];
      const i = tr.rows[k];
      process[i] = acc / Math.sqrt(n - k);
      clipScale[i] = 1 + clipBeta * Math.tanh(z[i] / 2); // 1 + β(2σ(z) − 1)
    }
  });
  const advantages = base.map((a, i) => (batch.trajOfRow[i] >= 0 ? a + igCoef * process[i] : 0));
  const fallback = counted.filter((c) => !c).length;
  return {
    advantages,
    clipScale,
    components: { episode: base, gain: ig, gainNorm: z, process, clip: clipScale },
    diagnostics: { ...baseDiagnostics(batch), frac_reference_fallback: batch.trajs.length ? fallback / batch.trajs.length : 0 },
  };
}

/** lo ≤ x < hi, or a clear error. */
function inRange(estimator: string, key: string, x: number, lo: number, hi: number, hint: string): void {
  if (!(x >= lo && x < hi)) throw new TurnwiseError('invalid-input', `${estimator}: ${key} must be in [${lo}, ${hi}), got ${x}`, { hint });
}

/** Shared by both: the penalties stay in the reward (`episode`, as GRPO has them) or are charged to their own turns (`turn`, as turnwise). */
const PENALTY_DEFAULTS: Params = { penalties: 'episode', penaltyScale: 0.5 };
export const GEAR_DEFAULTS: Params = { scale: 'group', epsilon: 1e-6, spikeTau: 1.0, divScale: 1.0, weight: 0.5, ...PENALTY_DEFAULTS };
export const A2TGPO_DEFAULTS: Params = { scale: 'group', epsilon: 1e-6, gamma: 0.9, igCoef: 0.5, clipBeta: 0.3, ...PENALTY_DEFAULTS };

/**
 * An estimator that reads the teacher pass: GRPO's group scale choices, the run's teacher pass
 * before it, and its penalties in the reward or charged to their own turns (chargePenaltiesToTurns).
 */
const referenceSpec = (
  name: string,
  summary: string,
  defaults: Params,
  needs: NonNullable<EstimatorSpec['needs']>,
  fn: (rows: readonly TurnRow[], p: Params) => EstimatorResult,
): EstimatorSpec => ({
  name,
  summary,
  defaults,
  choices: { scale: ['group', 'batch', 'none'], penalties: ['episode', 'turn'] },
  needs,
  fn: (rows, params) =>
    params.penalties === 'turn'
      ? chargePenaltiesToTurns(name, rows, num(params, 'penaltyScale'), (outcome) => fn(outcome, params))
      : fn(rows, params),
});

export const REFERENCE_SPECS: EstimatorSpec[] = [
  referenceSpec(
    'gear',
    "GRPO's group advantage reweighted per token by a teacher shown the reference fix: segments from divergence spikes share the weight at their start",
    GEAR_DEFAULTS,
    { teacher: true, gain: false },
    gearAdvantages,
  ),
  referenceSpec(
    'a2tgpo',
    "GRPO's group advantage plus each turn's information gain on the reference fix (turn-group normalized, accumulated / √terms); clip range scaled per turn",
    A2TGPO_DEFAULTS,
    { teacher: false, gain: true },
    a2tgpoAdvantages,
  ),
];
