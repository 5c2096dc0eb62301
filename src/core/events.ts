// Progress of a training run as serialisable events: `turnwise train --json` prints one per line,
// the extension reads them from the child process, and the terminal progress bar is drawn from
// the same stream. Every event names its run and carries an ISO time.
import { SCHEMA } from './schema';

/** Keys of one metrics.jsonl line (docs/run-directory.md "Metrics"): numbers by TRL-style name, plus the iteration. */
export type MetricsRow = { schema: typeof SCHEMA.metrics; iteration: number } & Record<string, number | string | null>;

export type RunPhase = 'images' | 'tasks' | 'snapshot' | 'rollout' | 'reward' | 'advantages' | 'update' | 'eval' | 'checkpoint';

interface Base {
  schema: typeof SCHEMA.event;
  runId: string;
  time: string;
}

export type RunEvent =
  | (Base & { type: 'run-started'; runDir: string; iterations: number; trainTasks: number; heldoutTasks: number; resumedFrom?: number })
  | (Base & { type: 'phase'; iteration: number; phase: RunPhase; done?: number; total?: number; detail?: string })
  | (Base & {
      type: 'episode-finished';
      iteration: number;
      split: 'train' | 'heldout';
      taskId: string;
      trajId: string;
      /** null when the episode failed (sandbox or runner error) and is unscored. */
      reward: number | null;
      passRate: number | null;
      resolved: boolean;
      turns: number;
      formatErrors: number;
      failure?: string;
    })
  | (Base & {
      type: 'iteration-finished';
      iteration: number;
      metrics: MetricsRow;
      /**
       * PASS@(k,T) of the iteration's sampled held-out episodes, when it evaluated with samples:
       * keyed by k, then by T (the probability that one of k episodes resolves a task within T actions).
       */
      pass_at_k_t?: Record<string, Record<string, number>>;
    })
  | (Base & { type: 'checkpoint-written'; iteration: number; path: string })
  | (Base & { type: 'run-finished'; iterations: number; runDir: string })
  /** `outOfTime`: the run's time budget (maxMinutes) ended it after an evaluated iteration, not a signal. */
  | (Base & { type: 'run-stopped'; lastCompleteIteration: number; reason: string; outOfTime?: true })
  | (Base & { type: 'run-failed'; error: { code: string; message: string; hint?: string } })
  | (Base & { type: 'log'; level: 'info' | 'warn'; message: string });

export type RunEventType = RunEvent['type'];

/** Distributes Omit over the union, so each variant keeps its own fields. */
export type RunEventBody = RunEvent extends infer E ? (E extends RunEvent ? Omit<E, 'schema' | 'runId' | 'time'> : never) : never;

export function makeEvent(runId: string, body: RunEventBody, now: Date = new Date()): RunEvent {
  return { schema: SCHEMA.event, runId, time: now.toISOString(), ...body } as RunEvent;
}

const TYPES: ReadonlySet<string> = new Set<RunEventType>([
  'run-started',
  'phase',
  'episode-finished',
  'iteration-finished',
  'checkpoint-written',
  'run-finished',
  'run-stopped',
  'run-failed',
  'log',
]);

/**
 * Parses one line of `--json` output as an event. Returns undefined for anything else (a
 * child's stray output must not break a reader); throws nothing.
 */
export function parseEventLine(line: string): RunEvent | undefined {
  const s = line.trim();
  if (!s.startsWith('{')) return undefined;
  try {
    const v = JSON.parse(s) as Partial<RunEvent>;
    if (v && v.schema === SCHEMA.event && typeof v.type === 'string' && TYPES.has(v.type) && typeof v.runId === 'string')
      return v as RunEvent;
  } catch {
    // not an event
  }
  return undefined;
}
