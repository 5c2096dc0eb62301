// Turn rows from trajectories (docs/design.md "On-disk formats"), with their signatures computed once in an
// async step so that the estimators themselves stay synchronous and pure.
import { repeatFlags } from '../core/repeats';
import type { Trajectory } from '../core/schema';
import { createBashSigner, createJoinedSigner } from '../ast/bash';
import type { EstimatorContext, TurnRow } from './types';

/**
 * One row per turn, in batch order. The observation before turn k is the observation after
 * turn k − 1 ('' at the first turn). Stored signatures are reused; missing ones are left unset.
 * Each row carries the penalty its own turn cost (turnPenalties).
 */
export function rowsFromTrajectories(trajs: readonly Trajectory[]): TurnRow[] {
  const rows: TurnRow[] = [];
  for (const t of trajs) {
    const turns = [...t.turns].sort((a, b) => a.index - b.index);
    const penalties = turnPenalties(t, turns);
    turns.forEach((turn, k) => {
      rows.push({
        promptId: t.taskId,
        trajId: t.trajId,
        turn: turn.index,
        bash: turn.action,
        score: t.reward?.reward ?? NaN,
        ...(turn.intentSignature ? { signature: turn.intentSignature } : {}),
        ...(turn.editSignature ? { editSig: turn.editSignature } : {}),
        observation: k === 0 ? '' : (turns[k - 1].observation ?? ''),
        ...(penalties[k] > 0 ? { penalty: penalties[k] } : {}),
        ...(turn.reference
          ? {
              reference: {
                ...(turn.logprobs && turn.reference.teacherLogprobs
                  ? { studentLogp: turn.logprobs, teacherLogp: turn.reference.teacherLogprobs }
                  : {}),
                ...(turn.reference.refBefore !== undefined ? { refBefore: turn.reference.refBefore } : {}),
                ...(turn.reference.refAfter !== undefined ? { refAfter: turn.reference.refAfter } : {}),
              },
            }
          : {}),
      });
    });
  }
  return rows;
}

/**
 * The penalties of an episode's reward, per turn (in `turns` order): the format penalty on its
 * first unparsable turn, and the repeat penalty split over the turns repeatFlags marks. A
 * penalty whose turns cannot be found again (a count that disagrees with the stored reward, or
 * a tampered episode, whose reward is 0 whatever its turns did) stays with the episode: 0 here.
 */
export function turnPenalties(t: Trajectory, turns: Trajectory['turns']): number[] {
  const out = new Array<number>(turns.length).fill(0);
  const r = t.reward;
  if (!r || r.tampered !== undefined || !Number.isFinite(r.reward)) return out;
  const firstBad = turns.findIndex((x) => x.formatError !== undefined);
  if (r.formatPenalty > 0 && firstBad >= 0) out[firstBad] += r.formatPenalty;
  const flags = repeatFlags(turns);
  const n = flags.filter(Boolean).length;
  if ((r.repeatPenalty ?? 0) > 0 && n === r.repeats) flags.forEach((f, k) => f && (out[k] += r.repeatPenalty! / n));
  return out;
}

/** Fills in `signature` for rows that lack one and returns a context whose signJoined a3 uses for its snippets. */
export async function attachSignatures(rows: TurnRow[]): Promise<EstimatorContext> {
  const sign = await createBashSigner();
  for (const r of rows) if (!r.signature) r.signature = sign(r.bash);
  return { signJoined: await createJoinedSigner() };
}
