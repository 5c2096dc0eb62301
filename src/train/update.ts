// The policy update of an iteration: its scored episodes become training rows (each prompt built
// again from the trajectory's own token ids), trained on for `epochs` passes in a seeded order and
// `minibatches` steps each; then one forward pass measures how far the update moved the
// log-probabilities of the actions it learned from.
import { seedOf } from '../core/random';
import type { Task, Trajectory } from '../core/schema';
import { mean } from '../core/stats';
import { chatSystemMessage, chatTaskMessage } from '../agent/chat-format';
import { taskText } from '../agent/prompt';
import type { StepMetrics } from '../policy/training/trainer';
import { chatTurnTokenRows } from './chat-model';
import type { TrainConfig } from './config';
import type { ReplaySource } from './replay';
import type { Harness } from './harness';
import {
  actionLogpShift,
  packMinibatches,
  type LogpShift,
  turnTokenRows,
  updateRows,
  weightNegativeAdvantages,
  type ReplayRows,
} from './rows';
import { correctSamplerMismatch, rescoreRows, type SamplerCorrection } from './sampler-correction';

/** What one update did. */
export interface PolicyUpdate {
  /** One entry per optimizer step (none when no row carried an advantage). */
  steps: StepMetrics[];
  /** Training rows, and actions in them. */
  rows: number;
  actions: number;
  /** How far the update moved the actions it learned from (undefined without a step). */
  moved?: LogpShift;
  /** With rollouts sampled from quantized weights: how far the sampler was from the float policy (sampler-correction.ts). */
  sampler?: SamplerCorrection;
  /** Wall time, the log-prob shift pass included. */
  seconds: number;
}

export interface UpdateOptions {
  config: TrainConfig;
  iteration: number;
  /** The run's tasks by id: a row's prompt is built from its task. */
  tasks: ReadonlyMap<string, Task>;
  /** Token cap of a micro-batch (the run's memory plan). */
  updateTokens: number;
  /** Demonstrations replayed beside the episodes (replayCoef > 0, compact models). */
  replay?: ReplaySource;
  /** Throws to stop the run; called before each optimizer step. */
  check: () => void;
}

/** Updates the harness's policy on the scored episodes of iteration `o.iteration` (their turns carry their advantages). */
export async function updatePolicy(harness: Harness, scored: readonly Trajectory[], o: UpdateOptions): Promise<PolicyUpdate> {
  const c = o.config;
  const n = o.iteration;
  const t0 = Date.now();
  const promptBudget = harness.contextTokens - c.maxActionTokens;
  let turnRows = scored.map((t) => {
    const task = o.tasks.get(t.taskId)!;
    // A chat episode's rows are its conversation built again from the trajectory's ids.
    return harness.chat
      ? chatTurnTokenRows(harness.chat.format, chatSystemMessage(task), chatTaskMessage(task), t, harness.chat.stopIds)
      : turnTokenRows(harness.codec!, taskText(task), t, promptBudget);
  });
  // Rollouts drawn from quantized weights: the float policy's log-probs become the old ones, and
  // each token's advantage carries the truncated ratio of the float policy to the sampler.
  let sampler: SamplerCorrection | undefined;
  if ((await harness.policy.info()).rolloutPrecision !== 'float32') {
    const scoredRows = await harness.policy.logprobs(rescoreRows(turnRows).ids, { temperature: c.temperature });
    const corrected = correctSamplerMismatch(turnRows, scoredRows, c.samplerRatioCap);
    turnRows = corrected.rows;
    sampler = corrected.stats;
  }
  const rows = updateRows(
    turnRows.map((r) => weightNegativeAdvantages(r, c.negativeAdvantageWeight)),
    c.klCoef > 0 || c.entCoef > 0,
    c.lossAggregation,
    c.loss,
  );
  const steps: StepMetrics[] = [];
  if (rows.length) {
    for (let epoch = 0; epoch < c.epochs; epoch++) {
      // A seeded order: one hash per row, not two per comparison.
      const shuffled = rows
        .map((r) => ({ r, key: seedOf(c.seed, n, epoch, r.ids.length, r.actions[0].advantage, r.actions.length) }))
        .sort((a, b) => a.key - b.key)
        .map((x) => x.r);
      const ref =
        c.klCoef > 0
          ? await harness.policy.logprobs(
              shuffled.map((r) => r.ids),
              { temperature: c.temperature, model: 'reference' },
            )
          : undefined;
      const replay: ReplayRows | undefined = o.replay && {
        rows: c.replayRows,
        draw: (T, k) => o.replay!.draw(c.replayRows, T, seedOf(c.seed, 'replay', n, epoch, k)),
      };
      for (const mb of packMinibatches(shuffled, c.minibatches, ref, replay)) {
        o.check();
        const ms = await harness.policy.train({ loss: c.loss, batch: mb.B, seq: mb.T, microBatchTokens: o.updateTokens }, [mb.batch], {
          lr: c.lr,
          klCoef: c.klCoef,
          entCoef: c.entCoef,
          replayCoef: c.replayCoef,
          clipLow: c.clipLow,
          clipHigh: c.clipHigh,
          temperature: c.temperature,
        });
        steps.push(...ms);
      }
    }
  }
  // The rollout log-probs are the "before". A drop of the positive actions as well means the
  // negative ones dominate and push probability elsewhere.
  const learned = updateRows(turnRows, false);
  const moved =
    steps.length && learned.length
      ? actionLogpShift(
          learned,
          await harness.policy.logprobs(
            learned.map((r) => r.ids),
            { temperature: c.temperature },
          ),
        )
      : undefined;
  return {
    steps,
    rows: rows.length,
    actions: rows.reduce((a, r) => a + r.actions.length, 0),
    ...(moved ? { moved } : {}),
    ...(sampler ? { sampler } : {}),
    seconds: (Date.now() - t0) / 1000,
  };
}

/** The update's keys of a metrics row (docs/run-directory.md#metrics), in the row's order; NaN where there was no step. */
export function updateMetrics(u: PolicyUpdate, c: Pick<TrainConfig, 'replayCoef'>): Record<string, number> {
  const sm = (k: keyof StepMetrics) => (u.steps.length ? mean(u.steps.map((s) => s[k])) : NaN);
  return {
    'loss/policy': sm('pg_loss'),
    'loss/total': sm('loss'),
    kl: sm('kl'),
    approx_kl: sm('approx_kl'),
    clip_frac: sm('clip_frac'),
    entropy: sm('entropy'),
    grad_norm: sm('grad_norm'),
    'update/steps': u.steps.length,
    'update/rows': u.rows,
    'update/actions': u.actions,
    'update/dlogp_pos': u.moved?.positive ?? NaN,
    'update/dlogp_neg': u.moved?.negative ?? NaN,
    'update/kl_moved': u.moved?.kl ?? NaN,
    'update/max_token_fall': u.moved?.maxFall ?? NaN,
    'update/replay_loss': c.replayCoef > 0 ? sm('replay_loss') : NaN,
    'sampler/ratio_mean': u.sampler?.ratioMean ?? NaN,
    'sampler/ratio_max': u.sampler?.ratioMax ?? NaN,
    'sampler/capped': u.sampler?.cappedFrac ?? NaN,
    'sampler/kl': u.sampler?.kl ?? NaN,
  };
}
