// What an episode's turns say about its workspace, read from their text: which commands edit,
// which turns ran the tests and whether they passed, which failed. Shared by the failure labels
// (agent/diagnosis.ts) and recovery feedback (agent/episode.ts).
import type { Turn } from './schema';

/** An edit tool's command: Turnwise's line tools, sed in place, patch, git apply. */
export const EDIT_COMMAND = /\btw-(?:edit|apply)\b|\bsed\s+(?:-[a-zA-Z]*i|--in-place)|\bpatch\b|\bgit\s+apply\b/;
/** A test run's summary line as tw-test, tw-suspects and pytest print it. */
const TEST_SUMMARY = /\b(\d+) (?:failed|passed)\b/;
const FAILED_COUNT = /\b([1-9]\d*) failed\b/;
/** What tw-edit and tw-apply print when they change a line. */
const EDITED = /^edited (\S+?):\d+/m;
/** A refusal of tw-edit or tw-apply (they prefix their errors with their name). */
export const TOOL_REFUSAL = /^tw-(?:edit|apply): /m;

/** Whether a turn failed in a way a repeat of its command would fail again: a format error, a refused edit, a non-zero exit that was not a test run's. */
export function turnFailed(t: Pick<Turn, 'action' | 'observation' | 'exitCode' | 'formatError'>): boolean {
  if (t.formatError) return true;
  if (EDIT_COMMAND.test(t.action) && TOOL_REFUSAL.test(t.observation)) return true;
  return t.exitCode !== null && t.exitCode !== 0 && !TEST_SUMMARY.test(t.observation);
}

/** Whether the turns passed the tests since their last edit (a test run after it with nothing failing). */
export function passedSinceLastEdit(turns: readonly Turn[]): boolean {
  let passed = false;
  for (const t of turns) {
    if (t.action === 'submit') continue;
    if (!t.formatError && editedFiles(t).length) passed = false;
    const r = testRun(t);
    if (r.ran) passed = r.passed;
  }
  return passed;
}

/** The files a turn edited: those it left changed, and those a line tool said it edited (the edit may have been undone in the same command). */
export function editedFiles(t: Turn): string[] {
  const files = new Set((t.edits ?? []).map((e) => e.path));
  for (const m of t.observation.matchAll(new RegExp(EDITED.source, 'gm'))) files.add(m[1]);
  return [...files];
}

/** Whether the turn ran the tests, and whether they all passed. */
export function testRun(t: Turn): { ran: boolean; passed: boolean } {
  if (t.formatError || !TEST_SUMMARY.test(t.observation)) return { ran: false, passed: false };
  // The last summary line counts (an edit tool's output may come first).
  const summaries = t.observation.split('\n').filter((l) => TEST_SUMMARY.test(l));
  const last = summaries[summaries.length - 1] ?? '';
  return { ran: true, passed: !FAILED_COUNT.test(last) && !/\berror/i.test(last) };
}
