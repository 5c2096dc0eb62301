// `turnwise demo`: a short training run on the bundled demo workspace from the embedded policy.
import { DEMO_SETTINGS, resolveTrainConfig } from '../../train/config';
import { embeddedModelDir } from '../../train/embedded';
import { flagOptions, numberInRange, seedOption, valueOptions, type CliCommand } from '../command';
import { runTraining } from '../training-run';
import { demoWorkspace } from './options';

/** The demo's settings (src/train/config.ts, shared with `bench learn`). */
export const DEMO_CONFIG = DEMO_SETTINGS;

export const demoCommand: CliCommand = {
  name: 'demo',
  summary: 'a training run on the bundled demo workspace from the embedded warm-started policy, with held-out evaluation',
  usage: '[--iterations N] [--quick] [--estimator NAME] [--runs DIR] [--seed S]',
  options: { ...valueOptions('iterations', 'estimator', 'runs', 'seed'), ...flagOptions('quick') },
  async run(args, io) {
    const quick = args.values.quick === true;
    const given: Record<string, unknown> = {
      ...DEMO_CONFIG,
      workspace: demoWorkspace(),
      ...(quick
        ? { iterations: 1, maxTasks: 8, tasksPerIteration: 2, groupSize: 2, branchEpisodes: 2, maxTurns: 4, concurrency: 4, evalSamples: 0 }
        : {}),
    };
    if (args.values.iterations !== undefined) given.iterations = numberInRange(args, 'iterations', 3, { min: 0, integer: true });
    if (typeof args.values.estimator === 'string') given.estimator = args.values.estimator;
    if (args.values.seed !== undefined) given.seed = seedOption(args);
    const c = resolveTrainConfig(given, 'the demo settings');
    if (!io.json)
      io.err(
        `demo: workspace ${c.workspace}, policy ${embeddedModelDir()}, estimator ${c.estimator}, ${c.iterations} iteration(s) of ${c.tasksPerIteration} task(s) × ${c.groupSize} rollouts`,
      );
    return runTraining(c, args, io, 'demo');
  },
};
