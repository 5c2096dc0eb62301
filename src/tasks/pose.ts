// Posing a task in a sandbox started from the workspace's snapshot, as every episode does: a
// mutation task's bug written into its file, and the repository's history replaced by one commit
// of the buggy tree, so neither `git diff` nor the log shows the original. The reference fix is
// the mutation undone: the original text written back at its place.
import { TurnwiseError } from '../core/errors';
import type { Task } from '../core/schema';
import { shellQuote } from '../sandbox/shell';
import type { Sandbox } from '../sandbox/types';
import { WORKSPACE_DIR } from '../sandbox/types';
import { workspacePathProblem } from './origin';

/** Makes the workspace a fresh repository whose only commit is the tree as it is now. */
export const HIDE_HISTORY_COMMAND = 'rm -rf .git && git init -q && git add -A -f . && git commit -q --no-verify -m "workspace"';

/** The mutated file's path in the sandbox, checked: relative, inside the workspace, a regular file reached through real folders. */
async function mutationFile(sb: Sandbox, task: Task): Promise<string> {
  const m = task.mutation!;
  // The file is written through the engine (as root, resolving links inside the container), so
  // the task's path is checked here too, whatever read the task.
  const bad = workspacePathProblem(m.file);
  if (bad)
    throw new TurnwiseError('invalid-input', `task ${task.id}: mutation.file ${JSON.stringify(m.file)} ${bad}`, {
      hint: 'a task may only name files inside the workspace; check the task file with `turnwise tasks check`',
    });
  const file = `${WORKSPACE_DIR}/${m.file}`;
  const steps = m.file.split('/').map((_, i, parts) => shellQuote(`${WORKSPACE_DIR}/${parts.slice(0, i + 1).join('/')}`));
  const linkFree = `for p in ${steps.join(' ')}; do if [ -L "$p" ]; then echo "$p is a symbolic link"; exit 3; fi; done; [ -f ${shellQuote(file)} ] || { echo ${shellQuote(`${file} is not a regular file`)}; exit 4; }`;
  const r = await sb.exec(linkFree, { timeoutMs: 30_000 });
  if (r.exitCode !== 0) {
    throw new TurnwiseError(
      'invalid-input',
      `task ${task.id}: ${m.file} cannot be mutated in the sandbox: ${(r.stdout || r.stderr).trim().slice(-200) || `exit ${r.exitCode}`}`,
      {
        hint: 'a task may only name a regular file of the workspace, reached through real folders (no symbolic links)',
      },
    );
  }
  return file;
}

/** Writes a mutation task's bug into its file (nothing for other tasks). */
export async function writeTaskBug(sb: Sandbox, task: Task): Promise<void> {
  if (!task.mutation) return;
  const m = task.mutation;
  const file = await mutationFile(sb, task);
  const original = (await sb.readFile(file)).toString('utf8');
  if (original.slice(m.span.start, m.span.end) !== m.span.text) {
    throw new TurnwiseError(
      'invalid-input',
      `task ${task.id}: ${m.file} does not hold ${JSON.stringify(m.span.text)} at ${m.span.start}..${m.span.end}; the workspace changed since the task was made`,
      {
        hint: 'synthesize the tasks again (`turnwise tasks synth`) for the current workspace',
      },
    );
  }
  await sb.writeFile(file, original.slice(0, m.span.start) + m.replacement + original.slice(m.span.end));
}

/** Poses the task as an episode starts: the bug written in and, for a mutation, the history hidden. */
export async function poseTask(sb: Sandbox, task: Task): Promise<void> {
  await writeTaskBug(sb, task);
  if (!task.mutation) return;
  const r = await sb.exec(HIDE_HISTORY_COMMAND, { timeoutMs: 60_000 });
  if (r.exitCode !== 0)
    throw new TurnwiseError(
      'sandbox-failed',
      `hiding the task from git failed in the sandbox (exit ${r.exitCode}): ${(r.stderr || r.stdout).trim().slice(-300)}`,
    );
}

/**
 * Undoes a posed mutation task's bug: the original text written back where the mutation put its
 * replacement. What a perfect agent would do, as an edit of the file.
 */
export async function writeReferenceFix(sb: Sandbox, task: Task): Promise<void> {
  const m = task.mutation;
  if (!m) throw new TurnwiseError('invalid-input', `task ${task.id} has no reference fix (it is not a mutation task)`);
  const file = await mutationFile(sb, task);
  const buggy = (await sb.readFile(file)).toString('utf8');
  if (buggy.slice(m.span.start, m.span.start + m.replacement.length) !== m.replacement) {
    throw new TurnwiseError(
      'invalid-input',
      `task ${task.id}: ${m.file} does not hold the mutation's replacement at ${m.span.start}, so the reference fix cannot be written`,
    );
  }
  await sb.writeFile(file, buggy.slice(0, m.span.start) + m.span.text + buggy.slice(m.span.start + m.replacement.length));
}
