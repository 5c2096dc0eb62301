// What the policy sees: a compact chat of segments (task, then agent action / observation pairs).
// turnwise-tiny reads bytes and has 1,024 tokens of context, so the task shows at most two
// failing test ids and their count, and each observation is its exit code plus at most
// OBS_PROMPT_CHARS of output (head and tail, middle elided). The full observation (the sandbox's
// own cap) is kept in the trajectory; only the prompt view is shorter. When the context is full
// the oldest turns are dropped first, and a marker says how many.
import type { Task } from '../core/schema';

export type Role = 'task' | 'agent' | 'obs';

export interface Segment {
  role: Role;
  text: string;
}

/** One finished turn as the prompt shows it. */
export interface PromptTurn {
  action: string;
  observation: string;
  /**
   * Set on the inherited turns of a branch (EpisodeOptions.prefix), which its model did not sample
   * under this episode: the reply as the parent episode's model sampled it (a chat model builds its
   * conversation from them). Absent on turns the model sampled for this episode.
   */
  inherited?: { reply?: string; tokenIds: readonly number[] };
}

/** Characters of output kept per observation in the prompt (head 2/3, tail 1/3). */
export const OBS_PROMPT_CHARS = 360;
/** Test ids listed in the task segment; the rest are counted. */
export const TASK_TESTS_SHOWN = 2;
/** Characters kept of one test id. */
const TEST_ID_CHARS = 90;

export const SUBMIT = 'submit';

/** The task segment: what is broken, never where (a mutation's location stays hidden). */
export function taskText(task: Pick<Task, 'fail_to_pass' | 'source'>): string {
  const ids = task.fail_to_pass;
  const shown = ids.slice(0, TASK_TESTS_SHOWN).map((id) => (id.length > TEST_ID_CHARS ? `…${id.slice(-(TEST_ID_CHARS - 1))}` : id));
  const more = ids.length > shown.length ? `\n(+${ids.length - shown.length} more)` : '';
  const head = ids.length === 1 ? 'Fix the code so this test passes:' : `Fix the code so these ${ids.length} tests pass:`;
  return `${head}\n${shown.join('\n')}${more}`;
}

/** Head and tail of `text` within `max` characters, the middle replaced by a marker. */
export function capMiddle(text: string, max: number): string {
  if (text.length <= max) return text;
  const head = Math.floor((max * 2) / 3);
  const tail = max - head;
  return `${text.slice(0, head)}\n…[${text.length - head - tail} chars]…\n${text.slice(text.length - tail)}`;
}

/** The observation as the prompt shows it: `exit N` then the output (stdout then stderr), capped. */
export function observationText(r: { exitCode: number | null; stdout: string; stderr: string; timedOut?: boolean }): string {
  const status = r.timedOut ? 'timeout' : r.exitCode === null ? 'exit ?' : `exit ${r.exitCode}`;
  const out = [r.stdout.replace(/\s+$/, ''), r.stderr.replace(/\s+$/, '')].filter((s) => s !== '').join('\n');
  return out ? `${status}\n${capMiddle(out, OBS_PROMPT_CHARS)}` : status;
}

/** The observation of a turn that was not run because the action did not parse. */
export function formatErrorObservation(reason: string): string {
  return `not run: ${reason}. Reply with one bash command, or submit.`;
}

/** The segment that stands for the `k` oldest turns dropped for room. */
export function omittedMarker(k: number): Segment {
  return { role: 'obs', text: `[${k} earlier turn${k === 1 ? '' : 's'} omitted]` };
}

/**
 * Segments of a prompt: the task, then the turns from `firstTurn` on (earlier ones dropped, with
 * a marker), ready for the next action. The caller picks `firstTurn` to fit its context.
 */
export function promptSegments(task: string, turns: readonly PromptTurn[], firstTurn = 0): Segment[] {
  const segs: Segment[] = [{ role: 'task', text: task }];
  if (firstTurn > 0) segs.push(omittedMarker(firstTurn));
  for (const t of turns.slice(firstTurn)) {
    segs.push({ role: 'agent', text: t.action });
    segs.push({ role: 'obs', text: t.observation });
  }
  return segs;
}
