// Turn-level failure labels: what went wrong in an episode, read from its trajectory and its task
// (in the manner of SEAL's diagnosis of failed rollouts). Most failed episodes fail in a few
// recognisable ways, and a count of each per iteration says what training changed where the
// resolved rate alone does not. Read from what the episode recorded: the command, its exit code
// and observation, the files it changed, the reward; and for a mutation task, the mutated file
// and the original text. Nothing here runs anything.
import type { Task, Trajectory } from '../core/schema';
import { EDIT_COMMAND, editedFiles, passedSinceLastEdit, testRun, TOOL_REFUSAL, turnFailed } from '../core/turn-state';

export { passedSinceLastEdit, turnFailed };

const TEST_FILE = /(^|\/)(tests?|spec|__tests__)\/|(^|\/)test_[^/]*$|_test\.[a-z]+$|\.(test|spec)\.[a-z]+$|(^|\/)conftest\.py$/;

export const FAILURE_LABELS = [
  'format-error',
  'command-timeout',
  'refused-edit',
  'edit-tests-fail',
  'repeated-failed-action',
  'wrong-file',
  'test-never-run',
  'submit-without-pass',
  'right-fix-not-submitted',
  'turn-limit',
] as const;
export type FailureLabel = (typeof FAILURE_LABELS)[number];

/** What each label means, for the docs, the viewer's tooltips and the report. */
export const FAILURE_LABEL_MEANING: Record<FailureLabel, string> = {
  'format-error': 'the reply was not one runnable command (it did not parse, or did not end)',
  'command-timeout': 'the command ran past its time limit',
  'refused-edit': 'an edit command changed nothing: the tool refused it (text not on the line, no such variant) or it failed',
  'edit-tests-fail': 'an edit was applied and the tests run after it still failed',
  'repeated-failed-action': 'the same command as an earlier turn of the episode that had failed',
  'wrong-file': 'an edit to a source file other than the one the bug is in',
  'test-never-run': 'the episode edited the code and no test ran after its last edit',
  'submit-without-pass': 'submit with no passing test run since the last edit',
  'right-fix-not-submitted': 'the workspace held the original code at some point, and the episode ended unresolved',
  'turn-limit': 'the episode used every turn without submitting, unresolved',
};

/** The original text of a mutation task's file, from the mutated text the episode saw before its first edit of it. */
function originalOf(task: Task, mutated: string): string | undefined {
  const m = task.mutation;
  if (!m) return undefined;
  if (mutated.slice(m.span.start, m.span.start + m.replacement.length) !== m.replacement) return undefined;
  return mutated.slice(0, m.span.start) + m.span.text + mutated.slice(m.span.start + m.replacement.length);
}

/**
 * The failure labels of each turn of `traj` (index by turn position), from the trajectory and, for
 * the labels that need it (wrong file, right fix not submitted), its task. A resolved episode can
 * carry labels too (a refused edit on the way to the fix); an episode that failed in the sandbox
 * (`failure`) gets none.
 */
export function failureLabels(traj: Pick<Trajectory, 'turns' | 'reward' | 'failure'>, task?: Task): FailureLabel[][] {
  const out: FailureLabel[][] = traj.turns.map(() => []);
  if (traj.failure) return out;
  const resolved = traj.reward.resolved;
  const failedBefore = new Set<string>();
  // Edits left in place (an edit undone in its own command, `tw-edit … || git checkout -q .`, is not).
  let lastEdit = -1;
  let testedSinceEdit = false;
  let passedSinceEdit = false;
  let original: string | undefined;
  let fixHeldAt = -1;
  let fixLostAt = -1;
  traj.turns.forEach((t, i) => {
    const labels = out[i];
    const add = (l: FailureLabel) => {
      if (!labels.includes(l)) labels.push(l);
    };
    if (t.action === 'submit' && !t.formatError) {
      if (!passedSinceEdit) add('submit-without-pass');
      return;
    }
    if (t.formatError) add('format-error');
    if (/^timeout\b/.test(t.observation)) add('command-timeout');
    const edited = t.formatError ? [] : editedFiles(t);
    const test = testRun(t);
    // What a repeat of the command is measured against: the same test as recovery feedback's.
    let failed = turnFailed(t);
    if (!t.formatError && EDIT_COMMAND.test(t.action) && edited.length === 0 && (TOOL_REFUSAL.test(t.observation) || t.exitCode !== 0)) {
      add('refused-edit');
      failed = true;
    }
    if (t.edits?.length) {
      lastEdit = i;
      testedSinceEdit = false;
    }
    if (edited.length) {
      passedSinceEdit = false;
      if (task?.mutation && edited.some((f) => f !== task.mutation!.file && !TEST_FILE.test(f))) add('wrong-file');
    }
    if (test.ran) {
      testedSinceEdit = true;
      passedSinceEdit = test.passed;
      if (!test.passed && edited.length) {
        add('edit-tests-fail');
        failed = true;
      }
    }
    // An edit left in place whose tests the next turn runs and sees fail.
    const next = traj.turns[i + 1];
    if (edited.length && !test.ran && next && !EDIT_COMMAND.test(next.action)) {
      const nt = testRun(next);
      if (nt.ran && !nt.passed) {
        add('edit-tests-fail');
        failed = true;
      }
    }
    if (failedBefore.has(t.action)) add('repeated-failed-action');
    if (failed) failedBefore.add(t.action);
    // The original code in the workspace: the mutated file's recorded text after this turn.
    const m = task?.mutation;
    const e = m && t.edits?.find((x) => x.path === m.file);
    if (m && e) {
      if (original === undefined && e.before !== null) original = originalOf(task!, e.before);
      if (original !== undefined && e.after === original) fixHeldAt = i;
      else if (original !== undefined && e.before === original && fixLostAt < fixHeldAt) fixLostAt = i;
    }
  });
  const last = out.length - 1;
  if (last < 0) return out;
  const submitted = traj.turns[last].action === 'submit' && !traj.turns[last].formatError;
  if (lastEdit >= 0 && !testedSinceEdit && !resolved) out[last].push('test-never-run');
  if (!resolved && fixHeldAt >= 0) out[fixLostAt > fixHeldAt ? fixLostAt : last].push('right-fix-not-submitted');
  if (!submitted && !resolved && traj.turns.length >= traj.reward.maxTurns) out[last].push('turn-limit');
  return out;
}

/** Writes each turn's labels onto it (`labels`, absent where there are none). */
export function labelTurns(traj: Trajectory, task?: Task): void {
  const labels = failureLabels(traj, task);
  traj.turns.forEach((t, i) => {
    if (labels[i].length) t.labels = labels[i];
    else delete t.labels;
  });
}

/**
 * Per label, the share of `trajs` (scored episodes) that carry it on any turn; the labels stored
 * on the turns, or computed where an older trajectory has none (without its task).
 */
export function failureBreakdown(trajs: readonly Trajectory[], tasks?: ReadonlyMap<string, Task>): Record<FailureLabel, number> {
  const scored = trajs.filter((t) => !t.failure);
  const counts = Object.fromEntries(FAILURE_LABELS.map((l) => [l, 0])) as Record<FailureLabel, number>;
  for (const t of scored) {
    const stored = t.turns.some((u) => u.labels);
    const labels = new Set(stored ? t.turns.flatMap((u) => u.labels ?? []) : failureLabels(t, tasks?.get(t.taskId)).flat());
    for (const l of labels) if (l in counts) counts[l as FailureLabel]++;
  }
  for (const l of FAILURE_LABELS) counts[l] = scored.length ? counts[l] / scored.length : NaN;
  return counts;
}
