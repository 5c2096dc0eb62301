// `turnwise tasks reach`: which tasks the agent's numbered tools can fix at all (src/train/tools-reach.ts),
// from a task file and its workspace, or from a run's split with the run's own settings.
import * as path from 'node:path';
import { TurnwiseError } from '../../core/errors';
import { RunDir } from '../../core/run';
import type { Task } from '../../core/schema';
import { assertWorkspaceHoldsTasks } from '../../tasks/origin';
import { readTaskFile } from '../../tasks/taskfile';
import { readRunConfig, type TrainConfig } from '../../train/config';
import { REACH_OUTCOME_TEXT, REACH_OUTCOMES, toolsReach, type ReachRow } from '../../train/tools-reach';
import { listOption, numberInRange, oneOf, UsageError, valueOptions, type CliCommand } from '../command';
import { ProgressBar } from '../progress';

const rowText = (r: ReachRow) =>
  `  ${r.taskId}  ${r.file ? `${r.file}:${r.line}` : '—'}  suspect ${r.suspect ?? '—'}  variant ${r.variant ?? '—'}  ${r.outcome}${r.cutShort ? ' (tw-suspects cut short by the clock)' : ''}`;

export const tasksReachCommand: CliCommand = {
  name: 'tasks reach',
  summary:
    "which tasks the agent's numbered tools can fix at all: per task, an episode that runs tw-suspects -n and applies the tw-cands variant restoring the mutated line, scored by the reward (the ceiling of tw-apply for any policy)",
  usage: 'FILE --workspace DIR | --run RUN [--split heldout|train] [--runs DIR]; then [--ids A,B] [--concurrency N] [--json]',
  allowPositionals: true,
  options: valueOptions('workspace', 'run', 'split', 'runs', 'ids', 'concurrency'),
  async run(args, io) {
    const v = args.values;
    let tasks: Task[];
    let workspace: string;
    let config: Partial<TrainConfig> = {};
    if (typeof v.run === 'string') {
      if (args.positionals.length || v.workspace !== undefined)
        throw new UsageError('--run takes the tasks and the workspace from the run; give no task file or --workspace');
      const run = RunDir.open(v.run, typeof v.runs === 'string' ? path.resolve(v.runs) : undefined);
      const split = oneOf(args, 'split', ['heldout', 'train'] as const, 'heldout');
      config = readRunConfig(run);
      const ids = new Set(run.readSplits()[split]);
      tasks = run.readTasks().filter((t) => ids.has(t.id));
      workspace = path.resolve(config.workspace!);
    } else {
      for (const k of ['split', 'runs']) if (v[k] !== undefined) throw new UsageError(`--${k} goes with --run RUN`);
      if (args.positionals.length !== 1) throw new UsageError('give one task file (or --run RUN)');
      if (typeof v.workspace !== 'string') throw new UsageError('give --workspace DIR, the folder the tasks were made from');
      tasks = readTaskFile(path.resolve(args.positionals[0]));
      workspace = path.resolve(v.workspace);
    }
    const wanted: readonly string[] = listOption(args, 'ids', [] as string[]);
    if (wanted.length) {
      const unknown = wanted.filter((id) => !tasks.some((t) => t.id === id));
      if (unknown.length)
        throw new TurnwiseError(
          'invalid-input',
          `no task ${unknown.map((id) => JSON.stringify(id)).join(', ')} among the ${tasks.length} given`,
          {
            hint: 'give --ids from the task file (or the run split)',
          },
        );
      tasks = tasks.filter((t) => wanted.includes(t.id));
    }
    if (!tasks.length)
      throw new TurnwiseError('invalid-input', 'no task to check', {
        hint: 'give a task file with tasks, or a run whose split holds some',
      });
    assertWorkspaceHoldsTasks(tasks, workspace, typeof v.run === 'string' ? `run ${v.run}` : args.positionals[0]);
    const bar = new ProgressBar('tools reach', tasks.length, { json: io.json });
    const r = await toolsReach(tasks, {
      workspace,
      config,
      concurrency: numberInRange(args, 'concurrency', 2, { min: 1, max: 64, integer: true }),
      onProgress: (done, _n, row) => bar.update(done, `${row.taskId} ${row.outcome}`),
    });
    bar.done(`${r.summary.outcomes.resolved} of ${r.summary.tasks} resolved`);
    if (io.json) {
      io.out(JSON.stringify({ workspace, ...r }, null, 2));
      return 0;
    }
    const s = r.summary;
    io.out(
      [
        `${s.tasks} task(s) in ${workspace}: ${s.outcomes.resolved} resolved by tw-suspects -n then the right tw-apply (the ceiling of the numbered tools); the line shown among the suspects in ${s.suspected}, a variant restoring it in ${s.withVariant}`,
        ...REACH_OUTCOMES.filter((k) => s.outcomes[k] > 0).map((k) => `  ${String(s.outcomes[k]).padStart(4)}  ${REACH_OUTCOME_TEXT[k]}`),
        ...(s.cutShort
          ? [`  tw-suspects was cut short by the clock in ${s.cutShort} episode(s): run again on an idle machine before reading its misses`]
          : []),
        ...r.rows.map(rowText),
      ].join('\n'),
    );
    return 0;
  },
};
