// Turn rows from trajectories (docs/design.md "On-disk formats"), with their signatures computed once in an
// async step so that the estimators themselves stay synchronous and pure.
import type { Trajectory } from '../core/schema';
import { createBashSigner, createJoinedSigner } from '../ast/bash';
import type { EstimatorContext, TurnRow } from './types';

/**
 * One row per turn, in batch order. The observation before turn k is the observation after
 * turn k − 1 ('' at the first turn). Stored signatures are reused; missing ones are left unset.
 */
export function rowsFromTrajectories(trajs: readonly Trajectory[]): TurnRow[] {
  const rows: TurnRow[] = [];
  for (const t of trajs) {
    const turns = [...t.turns].sort((a, b) => a.index - b.index);
    turns.forEach((turn, k) => {
      rows.push({
        promptId: t.taskId,
        trajId: t.trajId,
        turn: turn.index,
        bash: turn.action,
        score: t.reward?.reward ?? NaN,
        ...(turn.intentSignature ? { signature: turn.intentSignature } : {}),
        ...(turn.editSignature ? { editSig: turn.editSignature } : {}),
        observation: k === 0 ? '' : turns[k - 1].observation ?? '',
      });
    });
  }
  return rows;
}

/** Fills in `signature` for rows that lack one and returns a context whose signJoined a3 uses for its snippets. */
export async function attachSignatures(rows: TurnRow[]): Promise<EstimatorContext> {
  const sign = await createBashSigner();
  for (const r of rows) if (!r.signature) r.signature = sign(r.bash);
  return { signJoined: await createJoinedSigner() };
}
