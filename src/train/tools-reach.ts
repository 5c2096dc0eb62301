// Which mutation tasks the agent's numbered tools can fix at all: the ceiling of a policy that
// uses them. Per task, an episode in a real sandbox, through the loop the policy runs in, played
// by an agent that reads the observations as the policy would and always picks right: it runs
// `tw-suspects -n`, finds the mutated line among the suspects its observation shows, and applies
// the variant of `tw-cands` that restores the original line (`tw-apply K J && tw-test`); if the
// line is not shown or no variant restores it, it submits. The reward decides, as for any episode.
// A task this agent does not resolve, no policy resolves with `tw-apply`; only a free edit
// (`tw-edit`) could. RL cannot raise a held-out rate past this ceiling, so it says how much room
// a repository's tasks leave before any run.
import type { Task } from '../core/schema';
import { runWorkers } from '../core/workers';
import { runEpisode } from '../agent/episode';
import { SUBMIT } from '../agent/prompt';
import type { ActRequest, ActResult } from '../agent/types';
import { CUT_SHORT_MARKER } from '../agent/cache';
import { mutatedLineOf } from '../demonstrations/fix-cases';
import { lineCandidates } from '../demonstrations/line-candidates';
import { collectOriginals } from '../tasks/testfiles';
import { connectRunPool, poolSettings, TRAIN_DEFAULTS, type TrainConfig } from './config';

export const REACH_OUTCOMES = ['resolved', 'not-a-mutation', 'not-suspected', 'no-variant', 'tests-fail', 'episode-failed'] as const;
export type ReachOutcome = (typeof REACH_OUTCOMES)[number];

/** Each outcome in words. */
export const REACH_OUTCOME_TEXT: Record<ReachOutcome, string> = {
  resolved: 'resolved by the command',
  'not-a-mutation': 'not a one-line mutation the tools undo (a deleted statement, a failing-test task)',
  'not-suspected': 'the line is not among the suspects tw-suspects shows',
  'no-variant': 'the line is shown, but no tw-cands variant restores it',
  'tests-fail': 'the variant was applied and the tests still fail',
  'episode-failed': 'the episode failed (the sandbox or the tools)',
};

/** How one task fares with the numbered tools. */
export interface ReachRow {
  taskId: string;
  /** The mutated file and line (mutation tasks). */
  file?: string;
  line?: number;
  /** The mutated line's place among the suspects the observation of `tw-suspects -n` shows (1-based), or null. */
  suspect: number | null;
  /** The `tw-cands` variant that restores the original line (1-based), or null. */
  variant: number | null;
  /** The command that fixes it with the tools, when both are found. */
  command: string | null;
  /** The episode resolved the task (the reward's verdict). */
  resolved: boolean;
  /** What happened: resolved, or where the ceiling stopped it. */
  outcome: ReachOutcome;
  /** tw-suspects said its ranking was cut short by the clock (the machine was busy): a miss may be the machine's. */
  cutShort: boolean;
}

export interface ReachSummary {
  tasks: number;
  /** Tasks per outcome (every outcome present, 0 where none). */
  outcomes: Record<ReachOutcome, number>;
  /** Of the tasks, the ones whose mutated line tw-suspects showed, and the ones where a tw-cands variant restores it. */
  suspected: number;
  withVariant: number;
  /** tw-suspects answers cut short by the clock. */
  cutShort: number;
}

/** The agent's first command, and the one that applies variant J of suspect K and runs the tests. */
export const REACH_SUSPECTS = 'tw-suspects -n';
export const reachCommand = (k: number, j: number) => `tw-apply ${k} ${j} && tw-test`;

/** The numbered suspects `[k] path:line: code` of a tw-suspects -n observation, by number. */
export function shownSuspects(observation: string): Map<number, { path: string; line: number }> {
  const out = new Map<number, { path: string; line: number }>();
  for (const l of observation.split('\n')) {
    const m = /^\[(\d+)\] (\S+):(\d+): /.exec(l);
    if (m) out.set(Number(m[1]), { path: m[2], line: Number(m[3]) });
  }
  return out;
}

/**
 * The task's fix as the tools see it: the mutated line's number and the tw-cands variant (1-based)
 * that restores the original, read from the workspace. Undefined for a task that is not a one-line
 * mutation (or whose file no longer holds the original).
 */
export function toolsFix(workspace: string, task: Task): { file: string; line: number; variant: number | null } | undefined {
  if (!task.mutation) return undefined;
  const at = mutatedLineOf(workspace, task.mutation);
  if (!at) return undefined;
  const j = lineCandidates(at.mutatedLine).indexOf(at.originalLine);
  return { file: task.mutation.file, line: at.line, variant: j >= 0 ? j + 1 : null };
}

/** The reach of each task (in the order given), one sandbox per task, `concurrency` at a time. */
export async function toolsReach(
  tasks: readonly Task[],
  o: {
    workspace: string;
    config?: Partial<TrainConfig>;
    concurrency?: number;
    onProgress?: (done: number, total: number, row: ReachRow) => void;
  },
): Promise<{ rows: ReachRow[]; summary: ReachSummary }> {
  const c = { ...TRAIN_DEFAULTS, ...o.config };
  const pool = await connectRunPool(`tools-reach-${process.pid}`, c);
  const rows: ReachRow[] = new Array(tasks.length);
  let done = 0;
  try {
    const ps = poolSettings(c);
    const originals = collectOriginals(o.workspace);
    const snapshots = new Map<string, ReturnType<typeof pool.snapshot>>();
    const snapshotFor = (language: string) => {
      if (!snapshots.has(language))
        snapshots.set(language, pool.snapshot(o.workspace, { language, ...(ps.baseImage ? { baseImage: ps.baseImage } : {}) }));
      return snapshots.get(language)!;
    };
    let next = 0;
    await runWorkers(
      Math.max(1, Math.min(o.concurrency ?? 2, tasks.length || 1)),
      () => (next < tasks.length ? next++ : undefined),
      async (i) => {
        rows[i] = await reachOf(tasks[i]);
        o.onProgress?.(++done, tasks.length, rows[i]);
      },
    );

    async function reachOf(task: Task): Promise<ReachRow> {
      const fix = toolsFix(o.workspace, task);
      const row: ReachRow = {
        taskId: task.id,
        ...(fix ? { file: fix.file, line: fix.line } : {}),
        suspect: null,
        variant: fix?.variant ?? null,
        command: null,
        resolved: false,
        outcome: 'not-a-mutation',
        cutShort: false,
      };
      if (!fix) return row;
      const act = async (req: ActRequest): Promise<ActResult> => {
        let text = SUBMIT;
        if (req.turns.length === 0) text = REACH_SUSPECTS;
        else if (req.turns.length === 1) {
          const obs = req.turns[0].observation;
          row.cutShort = obs.includes(CUT_SHORT_MARKER);
          const k = [...shownSuspects(obs)].find(([, s]) => s.path === fix.file && s.line === fix.line)?.[0];
          row.suspect = k ?? null;
          if (k !== undefined && fix.variant !== null) text = row.command = reachCommand(k, fix.variant);
        }
        const tokenIds = [...Buffer.from(text, 'utf8')];
        return { text, tokenIds, logprobs: tokenIds.map(() => 0), finishReason: 'stop' };
      };
      const sandbox = await pool.acquire(await snapshotFor(task.language), { rollout: `reach-${task.id}` });
      try {
        const t = await runEpisode({
          task,
          sandbox,
          act,
          episodeId: `reach-${task.id}`,
          groupId: `reach-${task.id}`,
          checkpoint: 'tools-reach',
          seed: 0,
          originals,
          maxTurns: 3,
          commandTimeoutMs: c.commandTimeoutMs,
          testTimeoutMs: c.testTimeoutMs,
          rewardWeights: c.reward,
        });
        row.resolved = !t.failure && t.reward.resolved === true;
        row.outcome = row.resolved
          ? 'resolved'
          : t.failure
            ? 'episode-failed'
            : row.suspect === null
              ? 'not-suspected'
              : row.variant === null
                ? 'no-variant'
                : 'tests-fail';
      } finally {
        await sandbox.dispose().catch(() => undefined);
      }
      return row;
    }
  } finally {
    await pool.close();
  }
  return { rows, summary: summarizeReach(rows) };
}

export function summarizeReach(rows: readonly ReachRow[]): ReachSummary {
  const outcomes = Object.fromEntries(REACH_OUTCOMES.map((k) => [k, rows.filter((r) => r.outcome === k).length])) as Record<
    ReachOutcome,
    number
  >;
  return {
    tasks: rows.length,
    outcomes,
    suspected: rows.filter((r) => r.suspect !== null).length,
    withVariant: rows.filter((r) => r.variant !== null).length,
    cutShort: rows.filter((r) => r.cutShort).length,
  };
}
