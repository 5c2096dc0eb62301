// `turnwise train`: a training run. Flags are parsed here (on top of turnwise.json); the work is
// in src/train, the run's output in ../training-run.ts.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ESTIMATOR_NAMES } from '../../credit/names';
import { readConfigFile, resolveTrainConfig, type TrainConfig } from '../../train/config';
import { numberInRange, seedOption, UsageError, valueOptions, type CliCommand, type ParsedArgs } from '../command';
import { runTraining } from '../training-run';
import { PROVIDER_USAGE } from './options';

/**
 * The config file a run reads: --config FILE, else the turnwise.json of the workspace folder
 * (--workspace DIR, else the current folder) when there is one. The editor reads the same file:
 * the workspace's turnwise.json. Flags override its fields.
 */
export function configFileFor(values: ParsedArgs['values']): string | undefined {
  if (typeof values.config === 'string') return values.config;
  const inWorkspace = path.join(typeof values.workspace === 'string' ? path.resolve(values.workspace) : process.cwd(), 'turnwise.json');
  return fs.existsSync(inWorkspace) ? inWorkspace : undefined;
}

function configFromArgs(args: ParsedArgs): TrainConfig {
  const file = configFileFor(args.values);
  const given: Record<string, unknown> = file ? readConfigFile(file) : {};
  const v = args.values;
  if (typeof v.workspace === 'string') given.workspace = path.resolve(v.workspace);
  if (typeof v.tasks === 'string') {
    given.taskSource = 'file';
    given.tasksFile = path.resolve(v.tasks);
  }
  if (typeof v['task-source'] === 'string') given.taskSource = v['task-source'];
  if (typeof v.model === 'string') given.model = path.resolve(v.model);
  if (typeof v.estimator === 'string') given.estimator = v.estimator;
  if (v.iterations !== undefined) given.iterations = numberInRange(args, 'iterations', 1, { min: 0, integer: true });
  if (v['group-size'] !== undefined) given.groupSize = numberInRange(args, 'group-size', 4, { min: 1, integer: true });
  if (v['max-minutes'] !== undefined) given.maxMinutes = numberInRange(args, 'max-minutes', 0, { min: 0 });
  if (v.seed !== undefined) given.seed = seedOption(args);
  if (typeof v.provider === 'string') given.executionProvider = v.provider;
  const c = resolveTrainConfig(given, file ?? 'the flags');
  c.workspace = path.resolve(c.workspace);
  return c;
}

const TRAIN_OPTIONS = valueOptions(
  'config',
  'workspace',
  'resume',
  'runs',
  'tasks',
  'task-source',
  'model',
  'estimator',
  'iterations',
  'group-size',
  'max-minutes',
  'seed',
  'provider',
);

/**
 * The train flags a resume takes: the run, where runs are, how many iterations to go to, and the
 * execution provider (to continue on the CPU after a GPU failed).
 */
const RESUME_OPTIONS = new Set(['resume', 'runs', 'iterations', 'provider']);

export const trainCommand: CliCommand = {
  name: 'train',
  summary: 'a training run: tasks from the workspace, rollouts in sandboxes, advantages, policy updates, held-out evaluation',
  usage: `[--config turnwise.json] [--workspace DIR] [--resume RUN] [--runs DIR] [--tasks FILE | --task-source mutation|failing-tests] [--model DIR] [--estimator ${ESTIMATOR_NAMES.join('|')}] [--iterations N] [--group-size G] [--max-minutes M] [--seed S] ${PROVIDER_USAGE}`,
  options: TRAIN_OPTIONS,
  async run(args, io) {
    if (args.values.resume !== undefined) {
      // A resume continues the run as it was started; only its length can change (--iterations).
      const fixed = Object.keys(TRAIN_OPTIONS).filter((k) => !RESUME_OPTIONS.has(k) && args.values[k] !== undefined);
      if (fixed.length) {
        throw new UsageError(
          `--resume continues a run with its own settings, so it cannot honour ${fixed.map((k) => `--${k}`).join(', ')} (fixed when the run started); only --iterations N (train it further), --provider (continue on another device) and --runs go with it. For other settings start a new run, e.g. from one of its checkpoints: --model RUN/checkpoints/N`,
        );
      }
    }
    const c = args.values.resume !== undefined ? resolveTrainConfig({}) : configFromArgs(args);
    return runTraining(c, args, io);
  },
};
