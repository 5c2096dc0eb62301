// The GRPO-family baselines (docs/credit-assignment.md: grpo, rloo, gigpo): one
// advantage per episode broadcast to its turns (grpo, rloo), plus GiGPO's anchor-state step term.
import { baseDiagnostics, indexBatch, num, type BatchIndex } from './batch';
import { mean, stdUnbiased } from '../core/stats';
import type { EstimatorResult, EstimatorSpec, Params, TurnRow } from './types';

/**
 * Episode-level group-relative advantage per trajectory: (R − mean_g) / (std + ε), with std the
 * sample std (n − 1, as torch.std) of the group (`group`), of all scored trajectories (`batch`),
 * or no division (`none`, Dr.GRPO). A group of one gets 0.
 */
function grpoPerTraj(batch: BatchIndex, scale: string, eps: number): { adv: number[]; baseline: number[] } {
  const adv = new Array<number>(batch.trajs.length).fill(0);
  const baseline = new Array<number>(batch.trajs.length).fill(0);
  const batchStd = stdUnbiased(batch.trajs.map((t) => t.score));
  for (const members of batch.groups.values()) {
    const scores = members.map((t) => batch.trajs[t].score);
    const m = mean(scores);
    const std = scale === 'group' ? stdUnbiased(scores) : scale === 'batch' ? batchStd : 0;
    for (let i = 0; i < members.length; i++) {
      baseline[members[i]] = m;
      if (members.length < 2) continue;
      const centered = scores[i] - m;
      adv[members[i]] = scale === 'none' ? centered : centered / (std + eps);
    }
  }
  return { adv, baseline };
}

function broadcast(rows: readonly TurnRow[], batch: BatchIndex, perTraj: readonly number[]): number[] {
  const out = new Array<number>(rows.length).fill(0);
  for (let i = 0; i < rows.length; i++) if (batch.trajOfRow[i] >= 0) out[i] = perTraj[batch.trajOfRow[i]];
  return out;
}

export function grpoAdvantages(rows: readonly TurnRow[], params: Params): EstimatorResult {
  const batch = indexBatch(rows);
  const { adv, baseline } = grpoPerTraj(batch, params.scale as string, num(params, 'epsilon'));
  const advantages = broadcast(rows, batch, adv);
  return {
    advantages,
    components: { episode: advantages.slice(), baseline: broadcast(rows, batch, baseline) },
    diagnostics: baseDiagnostics(batch),
  };
}

/** RLOO: A = R − mean of the other scored members of the group; a group of one gets 0. */
export function rlooAdvantages(rows: readonly TurnRow[]): EstimatorResult {
  const batch = indexBatch(rows);
  const adv = new Array<number>(batch.trajs.length).fill(0);
  const baseline = new Array<number>(batch.trajs.length).fill(0);
  for (const members of batch.groups.values()) {
    const n = members.length;
    const total = members.reduce((s, t) => s + batch.trajs[t].score, 0);
    for (const t of members) {
      const r = batch.trajs[t].score;
      baseline[t] = n > 1 ? (total - r) / (n - 1) : r;
      adv[t] = n > 1 ? r - baseline[t] : 0;
    }
  }
  const advantages = broadcast(rows, batch, adv);
  return {
    advantages,
    components: { episode: advantages.slice(), baseline: broadcast(rows, batch, baseline) },
    diagnostics: baseDiagnostics(batch),
  };
}

/**
 * GiGPO: A = episode GRPO term (group scale) + ω · step term. Anchor states are the turns of one
 * group whose observation before the turn is identical; the step term is the discounted return
 * γ^(T−1−j) · R of the turn at position j of a T-turn trajectory, normalized within its anchor
 * group as (x − mean) / (std + ε); an anchor group of one gets step term 0.
 */
export function gigpoAdvantages(rows: readonly TurnRow[], params: Params): EstimatorResult {
  const batch = indexBatch(rows);
  const eps = num(params, 'epsilon');
  const omega = num(params, 'omega');
  const gamma = num(params, 'gamma');
  const { adv: episodeTraj } = grpoPerTraj(batch, 'group', eps);
  const episode = broadcast(rows, batch, episodeTraj);
  const step = new Array<number>(rows.length).fill(0);
  const anchor = new Array<number>(rows.length).fill(-1);
  const anchors = new Map<string, number[]>();
  const ret = new Array<number>(rows.length).fill(0);
  for (let i = 0; i < rows.length; i++) {
    const t = batch.trajOfRow[i];
    if (t < 0) continue;
    const tr = batch.trajs[t];
    ret[i] = Math.pow(gamma, tr.rows.length - 1 - batch.posOfRow[i]) * tr.score;
    const key = `${rows[i].promptId}\u0000${rows[i].observation ?? ''}`;
    let a = anchors.get(key);
    if (!a) anchors.set(key, (a = []));
    a.push(i);
  }
  let label = 0;
  for (const members of anchors.values()) {
    const xs = members.map((i) => ret[i]);
    const m = mean(xs);
    const std = stdUnbiased(xs);
    for (const i of members) {
      anchor[i] = label;
      step[i] = members.length > 1 ? (ret[i] - m) / (std + eps) : 0;
    }
    label++;
  }
  const advantages = episode.map((e, i) => (batch.trajOfRow[i] >= 0 ? e + omega * step[i] : 0));
  return {
    advantages,
    components: { episode, step, discountedReturn: ret },
    clusters: { anchor },
    diagnostics: baseDiagnostics(batch),
  };
}

export const GRPO_SPECS: EstimatorSpec[] = [
  {
    name: 'grpo',
    summary: 'episode reward standardized within its group (scale group|batch|none), broadcast to every turn',
    defaults: { scale: 'group', epsilon: 1e-6 },
    choices: { scale: ['group', 'batch', 'none'] },
    fn: (rows, params) => grpoAdvantages(rows, params),
  },
  {
    name: 'rloo',
    summary: 'episode reward minus the mean of the other rollouts of the task, broadcast to every turn',
    defaults: {},
    fn: (rows) => rlooAdvantages(rows),
  },
  {
    name: 'gigpo',
    summary: 'GRPO episode term plus ω × discounted return normalized among turns with the same prior observation',
    defaults: { omega: 1.0, gamma: 0.95, epsilon: 1e-6 },
    fn: (rows, params) => gigpoAdvantages(rows, params),
  },
];
