// The episodes a warm start learns from (`turnwise warmstart --episodes FILE…`): the resolved
// episodes of evaluation results files (an endpoint's, or an earlier checkpoint's: rejection
// sampling), with the tasks they ran on, and never one of a task held out for evaluation. The
// held-out tasks are those of the run the results came from (--run: its splits.json), or the split
// a training run on the task file would make (--tasks: its seed and held-out fraction; tasks the
// starting model was warm-started on are never held out, as in a run). The tasks used are written
// to the warm-started model's warmstart.json, so a run from it keeps them in its train split.
import * as fs from 'node:fs';
import { TurnwiseError } from '../core/errors';
import { RunDir } from '../core/run';
import type { Task, Trajectory } from '../core/schema';
import { readTrajectories } from '../core/trajectory';
import { readTaskFile } from '../tasks/taskfile';
import { selectEpisodes, type EpisodeSelection } from '../demonstrations/chat';
import { splitTasks } from '../train/split';
import { demonstrationTaskIds } from '../demonstrations/record';
import { WARMSTART_DEFAULTS } from './config';

export interface EpisodeSourceOptions {
  files: readonly string[];
  /** The task file the evaluations ran on. */
  tasksFile?: string;
  /** Or the run whose tasks (and split) they ran on. */
  run?: string;
  runsRoot?: string;
  /** The split a run on `tasksFile` would make: its taskSeed and heldoutFraction (absent: WARMSTART_DEFAULTS'). */
  taskSeed?: number;
  heldoutFraction?: number;
  /** The folder the warm start starts from (its warmstart.json's demonstrations are never held out). */
  startModel?: string;
}

/** A results file's first line, when it is the header of an evaluation results file: the task source it names. */
function headerSource(file: string): string | undefined {
  try {
    const first = fs.readFileSync(file, 'utf8').split('\n', 1)[0];
    const v = JSON.parse(first) as { schema?: unknown; tasks?: { source?: unknown } };
    return typeof v?.schema === 'string' && v.schema.startsWith('turnwise/eval-results') && typeof v.tasks?.source === 'string'
      ? v.tasks.source
      : undefined;
  } catch {
    return undefined;
  }
}

/** Reads a results file, with a hint for the file `eval --json` printed (a summary, not episodes). */
function readResults(file: string): Trajectory[] {
  if (!fs.existsSync(file))
    throw new TurnwiseError('not-found', `the results file ${file} does not exist`, {
      hint: 'give the --out file of `turnwise eval` (its episodes, one a line)',
    });
  try {
    return readTrajectories(file);
  } catch (e) {
    if (!(e instanceof TurnwiseError)) throw e;
    let summary = false;
    try {
      const v = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
      summary = !!v && typeof v === 'object' && ('resolved' in v || 'ok' in v);
    } catch {
      // not one JSON document
    }
    throw new TurnwiseError(
      'invalid-file',
      `${file} is not an evaluation results file (episodes, one trajectory a line)${summary ? ': it is the summary `turnwise eval --json` prints' : ''}: ${e.message.split('\n')[0]}`,
      {
        hint: "give the file `turnwise eval … --out FILE` wrote (or a run's iterations/N/trajectories.jsonl)",
      },
    );
  }
}

/** The resolved, not held-out episodes of the files, with their tasks, and what was left out. */
export function warmstartEpisodes(o: EpisodeSourceOptions): EpisodeSelection & { tasksSource: string } {
  if (!o.files.length)
    throw new TurnwiseError('invalid-input', 'no results file given', {
      hint: 'give --episodes FILE… (files `turnwise eval --out` wrote)',
    });
  if (!!o.tasksFile === !!o.run) {
    const named = o.files.map(headerSource).find((s) => s !== undefined);
    throw new TurnwiseError(
      'invalid-input',
      o.run
        ? 'give the tasks of the episodes once: --tasks FILE or --run RUN, not both'
        : "the episodes' tasks are needed to rebuild their conversations and to keep held-out tasks out",
      {
        hint: `give --tasks FILE (the task file the evaluation ran on) or --run RUN (the run it evaluated)${named ? `; the results name ${named}` : ''}`,
      },
    );
  }
  const files = o.files.map((file) => ({ file, trajectories: readResults(file) }));
  let tasks: Task[];
  let heldout: Set<string>;
  let source: string;
  if (o.run) {
    const run = RunDir.open(o.run, o.runsRoot);
    source = run.file('tasks.jsonl');
    tasks = readTaskFile(source);
    heldout = new Set(run.readSplits(tasks).heldout);
  } else {
    source = o.tasksFile!;
    tasks = readTaskFile(source);
    const seen = new Set(o.startModel ? demonstrationTaskIds(o.startModel) : []);
    heldout = new Set(
      splitTasks(tasks, o.heldoutFraction ?? WARMSTART_DEFAULTS.heldoutFraction, o.taskSeed ?? WARMSTART_DEFAULTS.taskSeed, seen).heldout,
    );
  }
  return { ...selectEpisodes(files, tasks, heldout, source), tasksSource: source };
}
