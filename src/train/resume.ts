// What `turnwise train --resume` checks before it changes anything in a run directory: the run's
// own files (config, tasks, split, every committed iteration, the checkpoints it loads), the
// workspace it trains on, and whether anything is left to do. A resume that cannot go on, or
// has nothing to do, stops here with the run's files as they were.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError } from '../core/errors';
import { nonUtf8Name } from '../core/fs';
import type { RunDir, RunInventory, RunProblem } from '../core/run';
import type { Task } from '../core/schema';
import { loadCheckpoint } from '../policy/files/checkpoint';
import type { TrainConfig } from './config';

export interface ResumePlan {
  inventory: RunInventory;
  /** The run's tasks and split, when it has them (a run stopped before its tasks were made has none). */
  tasks?: { tasks: Task[]; splits: { train: string[]; heldout: string[] } };
  /** The iterations the run goes to: its config's, or the larger number a resume asked for. */
  iterations: number;
  /** Set when every iteration the run asks for is complete: what to tell the user instead of working. */
  nothingToDo?: string;
}

/** A list of problems as one error: the first named with its fix, the rest counted. */
function damageError(run: RunDir, problems: readonly RunProblem[]): TurnwiseError {
  const [first, ...rest] = problems;
  const more = rest.length ? `\n${rest.map((p) => `  also ${p.file}: ${p.problem}`).join('\n')}` : '';
  return new TurnwiseError('invalid-file', `${run.runId} cannot be resumed: ${first.file}: ${first.problem}${more}`, {
    hint: `${first.fix}; nothing in the run directory was changed`,
  });
}

/**
 * Checks a run directory for a resume (read-only) and says what the resume is to do. Throws a
 * TurnwiseError naming the file, the problem and the fix when the run cannot be resumed as it is.
 * `iterations`: a larger iteration count than the run's config (`train --resume --iterations N`).
 */
export function planResume(run: RunDir, c: TrainConfig, o: { iterations?: number } = {}): ResumePlan {
  const inventory = run.inventory();
  if (inventory.damage.length) throw damageError(run, inventory.damage);
  const last = inventory.lastComplete;
  if (o.iterations !== undefined && o.iterations < last) {
    throw new TurnwiseError(
      'invalid-input',
      `--iterations ${o.iterations} is fewer than the ${last} iteration(s) ${run.runId} has already completed`,
      {
        hint: `give --iterations N with N ≥ ${last} (the run's config asks for ${c.iterations}); completed iterations are never removed`,
      },
    );
  }
  const iterations = o.iterations ?? c.iterations;
  let tasks: ResumePlan['tasks'];
  if (last >= 0 || fs.existsSync(run.file('splits.json'))) {
    const all = run.readTasks();
    tasks = { tasks: all, splits: run.readSplits(all) };
  }
  if (last >= 0) {
    checkCheckpoint(run, last, `the checkpoint the run continues from (iteration ${last})`);
    if (last > 0) checkCheckpoint(run, 0, "the run's starting policy, the reference of its KL term");
  }
  if (last >= iterations) {
    return {
      inventory,
      tasks,
      iterations,
      nothingToDo: `${run.runId} is finished: iterations 0–${last} are complete and it asks for ${iterations}; nothing to do (give --iterations N with N > ${last} to train it further)`,
    };
  }
  if (!fs.existsSync(c.workspace) || !fs.statSync(c.workspace).isDirectory()) {
    throw new TurnwiseError(
      'not-found',
      `${run.runId} trains on the workspace ${c.workspace}, which no longer exists (moved or deleted?)`,
      {
        hint: `put the folder back at ${c.workspace}, or set "workspace" in ${run.file('config.json')} to where it is now (the run's tasks were made from its code)`,
      },
    );
  }
  assertWorkspaceNames(c.workspace);
  return { inventory, tasks, iterations };
}

function checkCheckpoint(run: RunDir, n: number, what: string): void {
  const dir = run.checkpointDir(n);
  try {
    loadCheckpoint(dir, { optimizer: n > 0 });
  } catch (e) {
    const intact =
      n > 0
        ? ` (an earlier checkpoint, e.g. ${run.checkpointDir(n - 1)}, can start a new run: \`turnwise train --model ${run.checkpointDir(n - 1)}\`)`
        : '';
    throw new TurnwiseError(
      'invalid-file',
      `${run.runId} cannot be resumed: ${path.relative(run.dir, dir)}, ${what}, cannot be loaded: ${(e as Error).message}`,
      {
        hint:
          n === 0
            ? `restore ${dir} from a backup (a newly initialized model would be another policy); or start a new run from the last checkpoint: \`turnwise train --model ${run.checkpointDir(run.inventory().lastComplete)}\`; nothing was changed`
            : `restore ${dir} from a backup${intact}; nothing was changed`,
        cause: e,
      },
    );
  }
}

/** Refuses a workspace holding a file or folder whose name is not UTF-8 (it could be listed, never read). */
export function assertWorkspaceNames(workspace: string): void {
  const bad = nonUtf8Name(workspace, new Set(['.git']));
  if (!bad) return;
  throw new TurnwiseError(
    'invalid-input',
    `the workspace ${workspace} holds a name that is not UTF-8: ${bad} (its bytes shown as \\xNN); Turnwise reads file names as UTF-8 and cannot open it`,
    {
      hint: 'rename it to a UTF-8 name (e.g. `convmv -f latin1 -t utf-8 -r --notest DIR`, or mv in a shell), or move it out of the workspace',
    },
  );
}
