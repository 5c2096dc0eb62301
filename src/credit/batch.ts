// Indexes a batch of turn rows into trajectories and groups, the shape every estimator needs.
// Rows whose score is not finite (NaN: the sandbox failed) are left out here, so no baseline
// ever sees them; estimators give them advantage 0.
import { TurnwiseError } from '../core/errors';
import type { CreditDiagnostics, TurnRow } from './types';

export interface TrajectoryIndex {
  promptId: string;
  trajId: string;
  score: number;
  /** Row indices of this trajectory sorted by turn ascending. */
  rows: number[];
  /** Row index of its first row in batch order. */
  firstRow: number;
}

export interface BatchIndex {
  /** Valid trajectories in order of first appearance. */
  trajs: TrajectoryIndex[];
  /** promptId → indices into `trajs`, in batch order (insertion order = order of first appearance). */
  groups: Map<string, number[]>;
  /** Row → index into `trajs`, −1 for excluded rows. */
  trajOfRow: Int32Array;
  /** Row → position of the row within its trajectory's sorted rows, −1 for excluded rows. */
  posOfRow: Int32Array;
  /** Rows whose score was not finite. */
  excluded: number;
}

export function isScored(score: number): boolean {
  return typeof score === 'number' && Number.isFinite(score);
}

export function indexBatch(rows: readonly TurnRow[]): BatchIndex {
  const byKey = new Map<string, number>();
  const trajs: TrajectoryIndex[] = [];
  const trajOfRow = new Int32Array(rows.length).fill(-1);
  const posOfRow = new Int32Array(rows.length).fill(-1);
  let excluded = 0;
  for (let i = 0; i < rows.length; i++) {
    const r = rows[i];
    if (!isScored(r.score)) {
      excluded++;
      continue;
    }
    const key = `${r.promptId}\u0000${r.trajId}`;
    let t = byKey.get(key);
    if (t === undefined) {
      t = trajs.length;
      byKey.set(key, t);
      trajs.push({ promptId: r.promptId, trajId: r.trajId, score: r.score, rows: [], firstRow: i });
    }
    trajs[t].rows.push(i);
    trajOfRow[i] = t;
  }
  const groups = new Map<string, number[]>();
  for (let t = 0; t < trajs.length; t++) {
    const tr = trajs[t];
    tr.rows.sort((a, b) => rows[a].turn - rows[b].turn);
    for (let p = 0; p < tr.rows.length; p++) {
      const i = tr.rows[p];
      if (p > 0 && rows[tr.rows[p - 1]].turn === rows[i].turn) {
        throw new TurnwiseError('invalid-input', `trajectory ${tr.trajId} of ${tr.promptId} has turn ${rows[i].turn} twice`, {
          hint: 'each (promptId, trajId, turn) must appear once in a batch',
        });
      }
      posOfRow[i] = p;
    }
    let g = groups.get(tr.promptId);
    if (!g) groups.set(tr.promptId, (g = []));
    g.push(t);
  }
  return { trajs, groups, trajOfRow, posOfRow, excluded };
}

/** Fraction of groups (with at least one scored trajectory) whose scores all equal. */
export function fracRewardZeroStd(batch: BatchIndex): number {
  let zero = 0;
  for (const members of batch.groups.values()) {
    const s = members.map((t) => batch.trajs[t].score);
    if (Math.max(...s) - Math.min(...s) === 0) zero++;
  }
  return batch.groups.size ? zero / batch.groups.size : 0;
}

export function baseDiagnostics(batch: BatchIndex): CreditDiagnostics {
  return { frac_reward_zero_std: fracRewardZeroStd(batch), frac_cells_multi_cluster: null, mean_tree_gate: null, rows_nan: batch.excluded };
}

export function num(params: Record<string, unknown>, key: string): number {
  return params[key] as number;
}
