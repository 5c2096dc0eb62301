// Where the editor's commands write task files (.turnwise/tasks/ of the workspace), and how many
// tasks one holds.
import * as fs from 'node:fs';
import * as path from 'node:path';

export const TASKS_DIR = path.join('.turnwise', 'tasks');

/** The tasks of a task file (its non-blank lines); 0 when it cannot be read. */
export function countLines(file: string): number {
  try {
    return fs
      .readFileSync(file, 'utf8')
      .split('\n')
      .filter((l) => l.trim()).length;
  } catch {
    return 0;
  }
}
