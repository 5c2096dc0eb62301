// The rows a policy update trains on: each episode's turns as prompt+action token rows (merged
// into one row where a turn's row continues the previous one), their advantages (negative ones
// weighted), and minibatches padded to a few fixed shapes, with demonstration rows for the replay
// term; and the update's diagnostics over them (the log-prob shift by advantage sign, the share of
// the advantage mass in same-outcome groups).
import type { Trajectory } from '../core/schema';
import { POLICY_LOSSES, type LossName } from '../core/losses';
import { mean } from '../core/stats';
import type { TrainBatch } from '../policy/training/trainer';
import { renderPrompt, type CompactCodec } from './compact-codec';
import type { LossAggregation } from './config';
import type { ReplayExample } from './replay';

/** Everything one training row needs from one turn. */
export interface TurnRowData {
  ids: number[];
  /** Index in ids where the action starts. */
  actionStart: number;
  logprobs: number[];
  advantage: number;
  /** One advantage per action token, where the estimator gave them (Turn.tokenAdvantages); else every token takes `advantage`. */
  tokenAdvantages?: number[];
  /** Factor on the clip range of this action's tokens (Turn.clipScale); absent: 1. */
  clipScale?: number;
}

/** One action inside a training row: where its tokens start, their sampling log-probs, its advantage. */
export interface ActionSpan {
  start: number;
  logprobs: number[];
  advantage: number;
  /** Per-token advantages (TurnRowData.tokenAdvantages), same length as logprobs. */
  tokenAdvantages?: number[];
  clipScale?: number;
  /** Loss weight of each of its tokens (1 unless the update weighs by episode). */
  weight: number;
}

/** A training row: token ids and the actions in it that the loss sees. */
export interface TrainRow {
  ids: number[];
  actions: ActionSpan[];
}

/** The prompt+action token rows of a trajectory's turns, as they were sampled. */
export function turnTokenRows(codec: CompactCodec, task: string, t: Trajectory, promptBudget: number): TurnRowData[] {
  const rows: TurnRowData[] = [];
  const prior: { action: string; observation: string }[] = [];
  for (const turn of t.turns) {
    // A branch's inherited turns are its parent's to train on (train/branching.ts).
    if (!turn.inherited && turn.tokenIds?.length && turn.logprobs?.length === turn.tokenIds.length) {
      const { ids } = renderPrompt(codec, task, prior, promptBudget);
      rows.push({ ids: [...ids, ...turn.tokenIds], actionStart: ids.length, logprobs: turn.logprobs, ...turnCredit(turn) });
    }
    prior.push({ action: turn.action, observation: turn.observation });
  }
  return rows;
}

/** A turn's credit as the update reads it: its advantage, per-token advantages when they fit its tokens, its clip factor. */
export function turnCredit(turn: {
  advantage?: number;
  tokenAdvantages?: number[];
  clipScale?: number;
  tokenIds?: number[];
}): Pick<TurnRowData, 'advantage' | 'tokenAdvantages' | 'clipScale'> {
  const tok = turn.tokenAdvantages;
  return {
    advantage: turn.advantage ?? 0,
    ...(tok && tok.length === turn.tokenIds?.length && tok.every(Number.isFinite) ? { tokenAdvantages: tok } : {}),
    ...(turn.clipScale !== undefined && Number.isFinite(turn.clipScale) && turn.clipScale > 0 ? { clipScale: turn.clipScale } : {}),
  };
}

/** How far an update moved the actions of its rows (actionLogpShift). */
export interface LogpShift {
  /** Mean change of an action's log-probability (summed over its tokens), over actions with positive advantage (NaN: none). */
  positive: number;
  /** The same over actions with negative advantage. */
  negative: number;
  /** Mean over every action token of the k3 estimate of KL(after ‖ before): e^d − d − 1 with d = before − after. */
  kl: number;
  /** The largest fall of one action token's log-probability (0 when none fell). */
  maxFall: number;
}

/**
 * How far `after` (per-row log-probs aligned with the ids, as PolicyService.logprobs gives them)
 * moved the rows' actions from the rollout policy (`logprobs` recorded when sampled): the mean
 * change of an action's log-probability by the sign of its advantage, and over all action tokens
 * (those with advantage 0 too) the k3 KL and the largest single-token fall. The per-step `kl`
 * metric is measured before each step, on its minibatch: these see the update's last step too.
 */
export function actionLogpShift(rows: readonly TrainRow[], after: readonly ArrayLike<number>[]): LogpShift {
  const pos: number[] = [];
  const neg: number[] = [];
  let k3 = 0;
  let tokens = 0;
  let maxFall = 0;
  rows.forEach((r, i) => {
    for (const a of r.actions) {
      let sum = 0;
      for (let k = 0; k < a.logprobs.length; k++) {
        const d = a.logprobs[k] - after[i][a.start + k];
        sum -= d;
        k3 += Math.expm1(d) - d;
        tokens++;
        if (d > maxFall) maxFall = d;
      }
      if (a.advantage !== 0) (a.advantage > 0 ? pos : neg).push(sum);
    }
  });
  return {
    positive: pos.length ? mean(pos) : NaN,
    negative: neg.length ? mean(neg) : NaN,
    kl: tokens ? k3 / tokens : NaN,
    maxFall: tokens ? maxFall : NaN,
  };
}

/**
 * The share of the advantage mass (sum of |advantage| over turns) that sits in groups whose scored
 * episodes all ended the same way (all resolved or none): there the advantages rank episodes by
 * the reward's small penalties (turns used, format errors) only. grpo with `scale: group` divides
 * those small differences by their own small std and gives them full weight: 49-60% of the mass
 * in grpo runs on the demo workspace (docs/experiments/2026-12-01-held-out-drift.md). NaN when no turn has an advantage.
 */
export function sameOutcomeAdvantageShare(trajs: readonly Trajectory[]): number {
  const groups = new Map<string, Trajectory[]>();
  for (const t of trajs) {
    if (t.failure) continue;
    const g = groups.get(t.groupId);
    if (g) g.push(t);
    else groups.set(t.groupId, [t]);
  }
  let total = 0;
  let same = 0;
  for (const members of groups.values()) {
    const mass = members.reduce((s, t) => s + t.turns.reduce((a, x) => a + Math.abs(x.advantage ?? 0), 0), 0);
    total += mass;
    if (new Set(members.map((t) => t.reward.resolved)).size === 1) same += mass;
  }
  return total > 0 ? same / total : NaN;
}

/** The update's view of the advantages: negative ones times `weight` (config negativeAdvantageWeight). */
export function weightNegativeAdvantages(rows: readonly TurnRowData[], weight: number): readonly TurnRowData[] {
  if (weight === 1) return rows;
  return rows.map((r) => {
    if (r.tokenAdvantages)
      return {
        ...r,
        advantage: r.advantage < 0 ? r.advantage * weight : r.advantage,
        tokenAdvantages: r.tokenAdvantages.map((a) => (a < 0 ? a * weight : a)),
      };
    return r.advantage < 0 ? { ...r, advantage: r.advantage * weight } : r;
  });
}

/**
 * An episode's turn rows merged into as few rows as exactness allows: when turn k+1's row begins
 * with all of turn k's row (its prompt re-renders turn k's action to the very tokens sampled,
 * and no turn was dropped for room), turn k's action is scored inside turn k+1's row. A causal
 * model gives those tokens the same logits there (same tokens before them, same positions), so
 * the loss is the same while the update reads each prefix once: on the demo's trajectories, 240
 * turn rows became 58 and the padded tokens 141k became 49k (and the step's activations with them).
 * A row that does not continue the previous one (an action re-encoded differently, a cut
 * action, the oldest turns dropped) starts a new row. Every action gets the loss weight `weight`.
 */
export function episodeRows(turnRows: readonly TurnRowData[], weight = 1, merge = true): TrainRow[] {
  const out: TrainRow[] = [];
  for (const r of turnRows) {
    const span: ActionSpan = {
      start: r.actionStart,
      logprobs: r.logprobs,
      advantage: r.advantage,
      ...(r.tokenAdvantages ? { tokenAdvantages: r.tokenAdvantages } : {}),
      ...(r.clipScale !== undefined ? { clipScale: r.clipScale } : {}),
      weight,
    };
    const last = out[out.length - 1];
    if (merge && last && r.ids.length >= last.ids.length && last.ids.every((x, i) => r.ids[i] === x)) {
      last.ids = r.ids;
      last.actions.push(span);
    } else {
      out.push({ ids: r.ids, actions: [span] });
    }
  }
  return out;
}

/**
 * The rows an update trains on: each trajectory's turns merged (episodeRows; one row a turn for a
 * sequence-level loss), keeping only the
 * actions the loss can move: with no KL or entropy term, an action whose advantage is zero adds
 * nothing but weight to the token mean, so it is left out.
 * `aggregation` (config lossAggregation): `token` weighs every action token 1; `episode` gives
 * the tokens of an episode with n action tokens the weight n̄ / n (n̄ the mean n over the
 * update's episodes), so each episode weighs the same in the token mean whatever its length and
 * the weights still average 1.
 */
export function updateRows(
  trajRows: readonly (readonly TurnRowData[])[],
  keepZeroAdvantage: boolean,
  aggregation: LossAggregation = 'token',
  loss: LossName = 'ppo-token',
): TrainRow[] {
  const sizes = trajRows.map((rows) => rows.reduce((s, r) => s + r.logprobs.length, 0));
  const meanSize = mean(sizes.filter((n) => n > 0));
  // A sequence-level loss (gspo-seq) takes one ratio per row: its rows stay one a turn, or the
  // turns of an episode would share one ratio and turns of opposite advantage cancel.
  const merge = POLICY_LOSSES[loss].meanOver !== 'sequences';
  return trajRows
    .flatMap((rows, e) => episodeRows(rows, aggregation === 'episode' && sizes[e] > 0 ? meanSize / sizes[e] : 1, merge))
    .map((r) => ({ ids: r.ids, actions: keepZeroAdvantage ? r.actions : r.actions.filter(carriesAdvantage) }))
    .filter((r) => r.actions.length > 0);
}

/** An action the policy-gradient term can move: some token's advantage is not 0. */
function carriesAdvantage(a: ActionSpan): boolean {
  return a.tokenAdvantages ? a.tokenAdvantages.some((x) => Math.abs(x) > 1e-9) : Math.abs(a.advantage) > 1e-9;
}

const BUCKETS = [128, 256, 384, 512, 768, 1024];

/**
 * Replay rows for packMinibatches: `rows` demonstrations per minibatch, `draw(T, k)` giving the
 * k-th minibatch's, each at most T tokens (train/replay.ts).
 */
export interface ReplayRows {
  rows: number;
  draw: (maxTokens: number, minibatch: number) => ReplayExample[];
}

/**
 * Minibatches of training rows, padded to a few fixed shapes (each new shape builds a session).
 * With `replay`, each minibatch ends with replay.rows demonstration rows: their weights in
 * replayMask, nothing in the RL inputs (lossMask, advantages, old and reference log-probs 0).
 */
export function packMinibatches(
  rows: readonly TrainRow[],
  minibatches: number,
  refLogp?: Float32Array[],
  replay?: ReplayRows,
): { batch: TrainBatch; B: number; T: number }[] {
  const n = Math.max(1, Math.min(minibatches, rows.length));
  const per = Math.ceil(rows.length / n);
  const out: { batch: TrainBatch; B: number; T: number }[] = [];
  // A per-token clip factor only when some action carries one (a2tgpo): the graph without it stays as it was.
  const clipped = rows.some((r) => r.actions.some((a) => a.clipScale !== undefined));
  for (let i = 0; i < rows.length; i += per) {
    const part = rows.slice(i, i + per);
    const refs = refLogp?.slice(i, i + per);
    const maxLen = Math.max(...part.map((r) => r.ids.length));
    const T = BUCKETS.find((b) => b >= maxLen) ?? maxLen;
    const demonstrations = replay ? replay.draw(T, out.length) : [];
    const B = per + (replay?.rows ?? 0);
    const ids = new Array<number>(B * T).fill(0);
    const att = new Array<number>(B * T).fill(0);
    const mask = new Array<number>(B * T).fill(0);
    const adv = new Array<number>(B * T).fill(0);
    const old = new Array<number>(B * T).fill(0);
    const act = new Array<number>(B * T).fill(0);
    const ref = refs ? new Array<number>(B * T).fill(0) : undefined;
    const clip = clipped ? new Array<number>(B * T).fill(1) : undefined;
    const rep = replay ? new Array<number>(B * T).fill(0) : undefined;
    part.forEach((r, b) => {
      for (let j = 0; j < r.ids.length; j++) {
        ids[b * T + j] = r.ids[j];
        att[b * T + j] = 1;
      }
      for (const a of r.actions) {
        for (let k = 0; k < a.logprobs.length; k++) {
          const o = b * T + a.start + k;
          mask[o] = a.weight;
          act[o] = 1;
          adv[o] = a.tokenAdvantages?.[k] ?? a.advantage;
          old[o] = a.logprobs[k];
          if (clip) clip[o] = a.clipScale ?? 1;
          if (ref) ref[o] = refs![b][a.start + k];
        }
      }
    });
    demonstrations.forEach((d, k) => {
      const o = (per + k) * T;
      for (let j = 0; j < Math.min(d.ids.length, T); j++) {
        ids[o + j] = d.ids[j];
        att[o + j] = 1;
        rep![o + j] = d.weights[j];
      }
    });
    // Rows of padding only (B is fixed per run: a short last minibatch, fewer demonstrations than
    // replayRows) keep one attended token so every row is valid; real rows start with one.
    for (let b = 0; b < B; b++) att[b * T] = 1;
    out.push({
      batch: {
        inputIds: ids,
        attentionMask: att,
        lossMask: mask,
        actionMask: act,
        advantages: adv,
        oldLogp: old,
        ...(ref ? { refLogp: ref } : {}),
        ...(rep ? { replayMask: rep } : {}),
        ...(clip ? { clipScale: clip } : {}),
      },
      B,
      T,
    });
  }
  return out;
}

/**
 * Supervised rows (the warm start): encoded examples packed greedily into `rows` rows of
 * `rowTokens`, several per row, each its own segment (attention stays within it); where RL rows
 * (packMinibatches) hold one episode each with its advantages and log-probs.
 */
export function packRows(
  examples: { ids: number[]; weights: number[] }[],
  rows: number,
  rowTokens: number,
): { batch: TrainBatch; tokens: number; used: number } {
  const ids = new Array<number>(rows * rowTokens).fill(0);
  const seg = new Array<number>(rows * rowTokens).fill(0);
  const w = new Array<number>(rows * rowTokens).fill(0);
  const act = new Array<number>(rows * rowTokens).fill(0);
  const fill = new Array<number>(rows).fill(0);
  let tokens = 0;
  let used = 0;
  let segId = 0;
  for (const ex of examples) {
    const n = Math.min(ex.ids.length, rowTokens);
    const r = fill.findIndex((f) => f + n <= rowTokens);
    if (r < 0) continue;
    segId++;
    for (let i = 0; i < n; i++) {
      const o = r * rowTokens + fill[r] + i;
      ids[o] = ex.ids[i];
      seg[o] = segId;
      w[o] = ex.weights[i];
      act[o] = ex.weights[i] >= 1 ? 1 : 0;
    }
    fill[r] += n;
    tokens += n;
    used++;
  }
  return { batch: { inputIds: ids, segmentIds: seg, lossMask: w, actionMask: act }, tokens, used };
}
