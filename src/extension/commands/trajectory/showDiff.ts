// Show Diff for Turn: what a turn changed in a file, as a diff editor (the trajectory viewer's CodeLens).
import type { TrajectoryRef } from '../../model/runIndex';
import { command } from '../context';

export const trajectoryShowDiffCommand = command(
  'turnwise.trajectory.showDiff',
  async (ctx, ref: TrajectoryRef, turn: number, file: string) => ctx.editors.showDiff(ref, turn, file),
);
