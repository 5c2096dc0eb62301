// Task files are input from anyone: the paths they name must stay inside the workspace, and the
// workspace must hold the files the tasks were made from. Both are checked on the host before a
// sandbox starts, so a task file from another repository is one clear refusal, not N failed
// episodes, and a path such as `../../usr/local/bin/tw-test` never reaches a container write.
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError } from '../core/errors';
import type { Task, TaskOrigin } from '../core/schema';

/**
 * Why `rel` is not a plain path inside a workspace, or undefined: it must be relative, written
 * with `/`, normalized (no `.`, `..` or empty parts), and outside `.git` (never part of a snapshot).
 */
export function workspacePathProblem(rel: string): string | undefined {
  if (rel === '') return 'is empty';
  // eslint-disable-next-line no-control-regex -- a control character in a path is what is refused
  if (/[\u0000-\u001f\u007f]/.test(rel)) return 'contains a control character';
  if (rel.includes('\\')) return 'contains a backslash (write paths with /)';
  if (rel.startsWith('/') || /^[A-Za-z]:/.test(rel)) return 'is absolute (give it relative to the workspace)';
  const parts = rel.split('/');
  if (parts.includes('..')) return 'leads out of the workspace (..)';
  if (parts.includes('.') || parts.includes(''))
    return `is not normalized (write ${JSON.stringify(path.posix.normalize(rel).replace(/^\.\/|\/$/g, ''))})`;
  if (parts.includes('.git')) return 'is inside .git, which no snapshot holds';
  return undefined;
}

/**
 * Why `<workspace>/<rel>` is not a regular file reached through real folders, or undefined: a
 * link anywhere on the path would let a write meant for the workspace land outside it.
 */
export function workspaceFileProblem(workspace: string, rel: string): string | undefined {
  const bad = workspacePathProblem(rel);
  if (bad) return bad;
  const parts = rel.split('/');
  let p = path.resolve(workspace);
  for (let i = 0; i < parts.length; i++) {
    p = path.join(p, parts[i]);
    const st = fs.lstatSync(p, { throwIfNoEntry: false });
    const sofar = parts.slice(0, i + 1).join('/');
    if (!st) return i === parts.length - 1 ? 'does not exist' : `does not exist (no folder ${sofar})`;
    if (st.isSymbolicLink()) return i === parts.length - 1 ? 'is a symbolic link' : `goes through the symbolic link ${sofar}`;
    if (i < parts.length - 1 && !st.isDirectory()) return `does not exist (${sofar} is a file)`;
    if (i === parts.length - 1 && !st.isFile()) return 'is not a regular file';
  }
  return undefined;
}

/** sha256 (hex) of a file's bytes. */
export function fileFingerprint(file: string): string {
  return createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}

/** The origin record of a task made from `workspace` that touches `files` (paths relative to it). */
export function taskOrigin(workspace: string, files: readonly string[]): TaskOrigin {
  const root = path.resolve(workspace);
  const out: Record<string, string> = {};
  for (const f of [...new Set(files)].sort()) if (!workspaceFileProblem(root, f)) out[f] = fileFingerprint(path.join(root, f));
  return { workspace: root, files: out };
}

/** The workspace-relative files a task names: its mutation's file and its recorded ones. */
export function taskFiles(task: Pick<Task, 'mutation' | 'origin'>): string[] {
  return [...new Set([...(task.mutation ? [task.mutation.file] : []), ...Object.keys(task.origin?.files ?? {})])];
}

/** One reason a workspace cannot pose a task. */
export interface WorkspaceProblem {
  taskId: string;
  file: string;
  problem: string;
}

/**
 * Every reason `workspace` cannot pose `tasks`: a file a task names is missing, a link, or not
 * the bytes it was made from (its origin's fingerprint). Tasks written before origins were
 * recorded are checked as far as they can be: a mutation's file must exist and hold the span
 * the task replaces (what the sandbox would find too).
 */
export function workspaceProblems(tasks: readonly Task[], workspace: string): WorkspaceProblem[] {
  const root = path.resolve(workspace);
  const out: WorkspaceProblem[] = [];
  const hashes = new Map<string, string | undefined>();
  const status = new Map<string, string | undefined>();
  const fileProblem = (rel: string) => {
    if (!status.has(rel)) status.set(rel, workspaceFileProblem(root, rel));
    return status.get(rel);
  };
  for (const t of tasks) {
    for (const rel of taskFiles(t)) {
      const problem = fileProblem(rel);
      if (problem) {
        out.push({ taskId: t.id, file: rel, problem });
        continue;
      }
      const want = t.origin?.files[rel];
      if (want !== undefined) {
        if (!hashes.has(rel)) hashes.set(rel, fileFingerprint(path.join(root, rel)));
        if (hashes.get(rel) !== want)
          out.push({ taskId: t.id, file: rel, problem: 'is not the file the task was made from (its content changed)' });
      } else if (t.mutation && rel === t.mutation.file) {
        const m = t.mutation;
        const text = fs.readFileSync(path.join(root, rel), 'utf8');
        if (text.slice(m.span.start, m.span.end) !== m.span.text)
          out.push({
            taskId: t.id,
            file: rel,
            problem: `does not hold ${JSON.stringify(m.span.text.slice(0, 40))} at ${m.span.start}..${m.span.end}`,
          });
      }
    }
  }
  return out;
}

/**
 * Refuses, before any sandbox starts, to run `tasks` (read from `source`, a file name for the
 * message) on a workspace that does not hold the files they were made from. The message names
 * both folders: where the tasks were made (as recorded) and the workspace given.
 */
export function assertWorkspaceHoldsTasks(tasks: readonly Task[], workspace: string, source: string): void {
  const problems = workspaceProblems(tasks, workspace);
  if (problems.length === 0) return;
  const root = path.resolve(workspace);
  const made = [...new Set(tasks.map((t) => t.origin?.workspace).filter((w): w is string => !!w))];
  const shown = problems.slice(0, 5).map((p) => `  task ${p.taskId}: ${p.file} ${p.problem}`);
  if (problems.length > shown.length) shown.push(`  … and ${problems.length - shown.length} more`);
  const affected = new Set(problems.map((p) => p.taskId)).size;
  const sameFolder = made.length === 1 && made[0] === root;
  const where =
    made.length === 0
      ? `${source} does not record the workspace it was made from (it was written by an older Turnwise), and ${root} does not hold its files`
      : sameFolder
        ? `${source} was made from ${root}, which changed since`
        : `${source} was made from ${made.join(', ')}; the workspace ${root} does not hold its files`;
  const hint =
    made.length > 0 && !sameFolder
      ? `run it on the workspace it was made from (--workspace ${made[0]}), or make tasks for this one: \`turnwise tasks synth --workspace ${root} --out FILE\``
      : `give --workspace the folder the tasks were made from, or make them again for this one: \`turnwise tasks synth --workspace ${root} --out FILE\``;
  throw new TurnwiseError(
    'invalid-input',
    `${where}: ${affected} of ${tasks.length} task(s) cannot be posed; nothing was run:\n${shown.join('\n')}`,
    { hint },
  );
}

/**
 * A task file's mutation path read from the workspace on the host, or undefined when the path
 * is not a plain file inside it (the reasons are workspaceFileProblem's).
 */
export function readWorkspaceFile(workspace: string, rel: string): string | undefined {
  if (workspaceFileProblem(workspace, rel)) return undefined;
  return fs.readFileSync(path.join(path.resolve(workspace), rel), 'utf8');
}
