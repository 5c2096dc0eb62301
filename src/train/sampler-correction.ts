// The correction for rollouts sampled with quantized weights (rolloutPrecision int8 / int4): the
// tokens were drawn from the sampler's distribution q, the update trains the float policy p. Each
// action token's log-prob is scored again by the float policy, which becomes the "old" log-prob
// the loss's ratio starts from, and the token's advantage is weighted by the truncated importance
// weight min(p / q, cap), so the policy gradient is the float policy's in expectation (up to the
// cap). Counted per iteration: the ratio's mean and max, the share of tokens capped, and
// KL(sampler ‖ float) (docs/models.md, "Quantized rollouts").
import { mean } from '../core/stats';
import { samplerKl } from '../policy/model/quantize';
import { episodeRows, type TurnRowData } from './rows';

export interface SamplerCorrection {
  /** Action tokens corrected. */
  tokens: number;
  /** Mean and max of p / q over them (before the cap). */
  ratioMean: number;
  ratioMax: number;
  /** Share of tokens whose ratio was above the cap. */
  cappedFrac: number;
  /** Mean per-token KL(sampler ‖ float policy) (samplerKl). */
  kl: number;
}

/**
 * The rows to score again: each trajectory's turn rows merged as the update merges them
 * (episodeRows), and where each turn row's action lies in them.
 */
export function rescoreRows(turnRows: readonly (readonly TurnRowData[])[]): {
  ids: number[][];
  places: { traj: number; turn: number; row: number; start: number }[];
} {
  const ids: number[][] = [];
  const places: { traj: number; turn: number; row: number; start: number }[] = [];
  turnRows.forEach((rows, traj) => {
    let turn = 0;
    for (const r of episodeRows(rows)) {
      const row = ids.length;
      ids.push(r.ids);
      for (const a of r.actions) places.push({ traj, turn: turn++, row, start: a.start });
    }
  });
  return { ids, places };
}

/**
 * The turn rows with the float policy's log-probs as their old log-probs and each token's
 * advantage weighted by min(p / q, cap); `scored` are the float policy's log-probs of
 * rescoreRows(turnRows).ids, aligned with them (PolicyService.logprobs).
 */
export function correctSamplerMismatch(
  turnRows: readonly (readonly TurnRowData[])[],
  scored: readonly ArrayLike<number>[],
  cap: number,
): { rows: TurnRowData[][]; stats: SamplerCorrection } {
  const { places } = rescoreRows(turnRows);
  const out = turnRows.map((rows) => rows.slice());
  // Per corrected token: its ratio p / q and its KL term.
  const ratios: number[] = [];
  const kls: number[] = [];
  for (const p of places) {
    const r = turnRows[p.traj][p.turn];
    const lp = r.logprobs.map((_, k) => scored[p.row][p.start + k]);
    const tokenAdvantages = r.logprobs.map((lq, k) => {
      // A score that is not a number (never from a sound policy) leaves the token out: weight 0, the sampler's log-prob kept.
      if (Number.isNaN(lp[k])) {
        lp[k] = lq;
        return 0;
      }
      const ratio = Math.exp(lp[k] - lq);
      ratios.push(ratio);
      kls.push(samplerKl(lq, lp[k]));
      return (r.tokenAdvantages?.[k] ?? r.advantage) * Math.min(ratio, cap);
    });
    out[p.traj][p.turn] = { ...r, logprobs: lp, tokenAdvantages };
  }
  const n = ratios.length;
  return {
    rows: out,
    stats: {
      tokens: n,
      ratioMean: n ? mean(ratios) : NaN,
      ratioMax: n ? ratios.reduce((a, b) => Math.max(a, b), 0) : NaN,
      cappedFrac: n ? ratios.filter((x) => x > cap).length / n : NaN,
      kl: n ? mean(kls) : NaN,
    },
  };
}
