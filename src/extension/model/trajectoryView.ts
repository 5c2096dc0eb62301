// What the trajectory viewer shows of a trajectory (the webview's TrajectoryView): its turns with
// their command, observation and reply (capped), advantages and their style, failure labels, a
// branch's inherited turns; the reward and test report. Plain Node (no vscode): unit-tested.
import type { Trajectory } from '../../core/schema';
import type { TrajectoryView } from '../webviews/trajectory/protocol';
import { advantageScale, advantageStyle } from './turnView';
import type { TrajectoryActionFormat } from './runModel';

const OBSERVATION_CAP = 8000;
const REPLY_CAP = 8000;

const capped = (s: string, cap: number) => (s.length > cap ? `${s.slice(0, cap)}\n… (${s.length - cap} more characters)` : s);

/** What the viewer shows of a trajectory; `actionFormat` is its checkpoint's (trajectoryActionFormat). */
export function trajectoryView(traj: Trajectory, actionFormat?: TrajectoryActionFormat): TrajectoryView {
  const scale = advantageScale(traj);
  const r = traj.reward;
  const finite = (x: number | undefined) => (typeof x === 'number' && Number.isFinite(x) ? x : null);
  return {
    title: `${traj.taskId} · ${traj.trajId}`,
    trajId: traj.trajId,
    taskId: traj.taskId,
    iteration: traj.iteration,
    split: traj.split,
    checkpoint: traj.checkpoint,
    ...(actionFormat ? { actionFormat } : {}),
    reward: {
      reward: finite(r?.reward),
      passRate: finite(r?.passRate),
      resolved: !!r?.resolved,
      turns: r?.turns ?? traj.turns.length,
      efficiencyPenalty: r?.efficiencyPenalty,
      formatPenalty: r?.formatPenalty,
      repeats: r?.repeats,
      repeatPenalty: r?.repeatPenalty,
      testsEdited: r?.testsEdited,
      ...(r?.tampered !== undefined ? { tampered: r.tampered } : {}),
      error: r?.error,
    },
    tests: traj.testReport
      ? {
          passed: traj.testReport.passed.length,
          failed: traj.testReport.failed.length,
          errors: traj.testReport.errors?.length ?? 0,
          failedNames: traj.testReport.failed.slice(0, 20),
        }
      : undefined,
    failure: traj.failure,
    ...(traj.branch ? { branch: { ...traj.branch } } : {}),
    turns: traj.turns.map((t) => ({
      index: t.index,
      action: t.action,
      ...(t.reply !== undefined ? { reply: capped(t.reply, REPLY_CAP) } : {}),
      observation: capped(t.observation, OBSERVATION_CAP),
      exitCode: t.exitCode,
      durationMs: t.durationMs,
      ...(t.cached ? { cached: true } : {}),
      ...(t.inherited ? { inherited: true } : {}),
      ...(t.labels?.length ? { labels: [...t.labels] } : {}),
      formatError: t.formatError,
      intentSignature: t.intentSignature,
      editSignature: t.editSignature,
      advantage: t.advantage,
      advantageComponents: t.advantageComponents,
      style: advantageStyle(t.advantage, scale),
      files: (t.edits ?? []).map((e) => e.path),
    })),
  };
}
