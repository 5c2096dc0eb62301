// A run as the status bar and the progress notification show it, folded from the child's
// `--json` RunEvents (core/events.ts). Plain Node (no vscode): unit-tested.
import type { RunEvent, RunPhase } from '../../core/events';

export interface RunProgress {
  runId?: string;
  runDir?: string;
  state: 'starting' | 'running' | 'finished' | 'stopped' | 'failed';
  /** Iteration in progress (or last finished when the run is over). */
  iteration: number;
  iterations?: number;
  lastFinished?: number;
  phase?: RunPhase;
  done?: number;
  total?: number;
  passRate?: number;
  heldoutPassRate?: number;
  episodes: number;
  error?: { message: string; hint?: string };
  /** Why a run that was not stopped by the user stopped (its time budget). */
  stopReason?: string;
}

export const initialProgress = (): RunProgress => ({ state: 'starting', iteration: 0, episodes: 0 });

const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

export function reduceProgress(p: RunProgress, e: RunEvent): RunProgress {
  switch (e.type) {
    case 'run-started':
      return {
        ...p,
        runId: e.runId,
        runDir: e.runDir,
        state: 'running',
        iterations: e.iterations,
        iteration: e.resumedFrom !== undefined ? e.resumedFrom + 1 : 0,
      };
    case 'phase':
      return { ...p, runId: e.runId, state: 'running', iteration: e.iteration, phase: e.phase, done: e.done, total: e.total };
    case 'episode-finished':
      return { ...p, episodes: p.episodes + 1 };
    case 'iteration-finished': {
      const m = e.metrics;
      return {
        ...p,
        lastFinished: e.iteration,
        passRate: num(m['tests/pass_rate']) ?? p.passRate,
        heldoutPassRate: num(m['heldout/pass_rate']) ?? p.heldoutPassRate,
      };
    }
    case 'run-finished':
      return { ...p, state: 'finished', runDir: e.runDir };
    case 'run-stopped':
      return { ...p, state: 'stopped', lastFinished: e.lastCompleteIteration, ...(e.outOfTime ? { stopReason: e.reason } : {}) };
    case 'run-failed':
      return { ...p, state: 'failed', error: { message: e.error.message, hint: e.error.hint } };
    default:
      return p;
  }
}

const pct = (x: number | undefined) => (x === undefined ? undefined : `${Math.round(x * 100)}%`);

/** Status bar text, e.g. "$(sync~spin) Turnwise 2/5 · pass 43%". */
export function statusBarText(p: RunProgress): string {
  const icon =
    p.state === 'running' || p.state === 'starting'
      ? '$(sync~spin)'
      : p.state === 'failed'
        ? '$(error)'
        : p.state === 'stopped'
          ? '$(debug-stop)'
          : '$(check)';
  const iter =
    p.iterations !== undefined
      ? ` ${p.iteration}/${p.iterations}`
      : p.state === 'starting'
        ? ' starting…'
        : p.state === 'running'
          ? ` ${p.iteration}`
          : ` ${p.state}`;
  const pass = pct(p.heldoutPassRate ?? p.passRate);
  return `${icon} Turnwise${iter}${pass ? ` · pass ${pass}` : ''}`;
}

/** One line for the progress notification: "iteration 2/5 · rollout 12/32". */
export function progressMessage(p: RunProgress): string {
  const parts = [`iteration ${p.iteration}${p.iterations !== undefined ? `/${p.iterations}` : ''}`];
  if (p.phase) parts.push(`${p.phase}${p.total ? ` ${p.done ?? 0}/${p.total}` : ''}`);
  const pass = pct(p.heldoutPassRate ?? p.passRate);
  if (pass) parts.push(`pass ${pass}`);
  return parts.join(' · ');
}

/** Fraction of the whole run done, for the notification's bar (0..1). */
export function fractionDone(p: RunProgress): number {
  if (!p.iterations) return 0;
  const within = p.total ? Math.min(1, (p.done ?? 0) / p.total) : 0;
  return Math.min(1, (p.iteration + within) / (p.iterations + 1));
}
