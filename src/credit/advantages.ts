// Per-turn advantages of a batch of trajectories under one estimator, as typed rows: what
// `turnwise advantages` prints and what a run stores with each turn.
import type { Trajectory } from '../core/schema';
import { computeAdvantages, getEstimator, resolveParams } from './registry';
import { attachSignatures, rowsFromTrajectories } from './signatures';
import type { CreditDiagnostics, Params } from './types';

export interface AdvantageRow {
  promptId: string;
  trajId: string;
  turn: number;
  /** The turn's bash command. */
  command: string;
  /** The tokens the estimator clustered by: intent signature, plus edit tokens for turnwise. */
  signature: string[];
  advantage: number;
  /** The named terms the advantage is made of, for this row. */
  components: Record<string, number>;
  /** Cluster label per scope (comparable only within a (promptId, turn) cell). */
  clusters?: Record<string, number>;
  /** One advantage per sampled token, where the estimator gives a turn's tokens different credit (gear). */
  tokenAdvantages?: number[];
  /** A factor on the loss's clip range for this turn (a2tgpo). */
  clipScale?: number;
}

export interface AdvantageReport {
  estimator: string;
  /** Defaults overlaid with the overrides. */
  params: Params;
  trajectories: number;
  diagnostics: CreditDiagnostics;
  rows: AdvantageRow[];
}

/** Writes each row's advantage and components onto its trajectory's turn (rows of trajectories not in `trajs` are skipped). */
export function writeTurnAdvantages(trajs: readonly Trajectory[], rows: readonly AdvantageRow[]): void {
  const byTraj = new Map(trajs.map((x) => [x.trajId, x]));
  for (const r of rows) {
    const turn = byTraj.get(r.trajId)?.turns.find((x) => x.index === r.turn);
    if (turn) {
      turn.advantage = r.advantage;
      turn.advantageComponents = r.components;
      // Six decimals: a turn of a few hundred tokens stays a few kilobytes in trajectories.jsonl.
      if (r.tokenAdvantages) turn.tokenAdvantages = r.tokenAdvantages.map((x) => Math.round(x * 1e6) / 1e6);
      else delete turn.tokenAdvantages;
      if (r.clipScale !== undefined && r.clipScale !== 1) turn.clipScale = r.clipScale;
      else delete turn.clipScale;
    }
  }
}

/** Signs every turn, runs estimator `name` with `overrides` and returns one row per turn. */
export async function trajectoryAdvantages(
  trajs: readonly Trajectory[],
  name: string,
  overrides: Partial<Params> = {},
): Promise<AdvantageReport> {
  const spec = getEstimator(name);
  const params = resolveParams(spec, overrides);
  const rows = rowsFromTrajectories(trajs);
  const ctx = await attachSignatures(rows);
  const result = computeAdvantages(spec.name, rows, overrides, ctx);
  const names = Object.keys(result.components);
  return {
    estimator: spec.name,
    params,
    trajectories: trajs.length,
    diagnostics: result.diagnostics,
    rows: rows.map((r, i) => ({
      promptId: r.promptId,
      trajId: r.trajId,
      turn: r.turn,
      command: r.bash,
      signature: [...(r.signature ?? []), ...(spec.name === 'turnwise' ? (r.editSig ?? []) : [])],
      advantage: result.advantages[i],
      components: Object.fromEntries(names.map((n) => [n, result.components[n][i]])),
      ...(result.clusters ? { clusters: Object.fromEntries(Object.entries(result.clusters).map(([k, v]) => [k, v[i]])) } : {}),
      ...(result.tokenAdvantages?.[i] ? { tokenAdvantages: result.tokenAdvantages[i]! } : {}),
      ...(result.clipScale ? { clipScale: result.clipScale[i] } : {}),
    })),
  };
}
