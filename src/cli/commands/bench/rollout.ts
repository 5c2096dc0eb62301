// `turnwise bench rollout`: episodes per minute one at a time vs 8 in flight (batched generation),
// same tasks, policy and seeds. The work is in src/bench/rollout.ts.
import * as path from 'node:path';
import { allEpisodesFailed, benchRollout } from '../../../bench/rollout';
import { TRAIN_DEFAULTS } from '../../../train/config';
import { flagOptions, numberInRange, seedOption, valueOptions, type CliCommand } from '../../command';
import { modelOrEmbedded, PRECISION_USAGE, precisionOption, PROVIDER_USAGE, providerOption, workspaceOrDemo } from '../options';

export const benchRolloutCommand: CliCommand = {
  name: 'bench rollout',
  summary: 'episodes per minute sequential vs concurrent (batched generation) on the demo tasks, with the timings that explain the speedup',
  usage: `[--workspace DIR] [--model DIR] [--tasks N] [--tasks-file FILE] [--episodes N] [--concurrency N] [--max-turns N] [--seed S] [--repeats N] [--batch-wait-ms MS] [--command-concurrency N] [--no-cache] ${PRECISION_USAGE} ${PROVIDER_USAGE} [--json]`,
  options: {
    ...valueOptions(
      'workspace',
      'model',
      'tasks',
      'tasks-file',
      'episodes',
      'concurrency',
      'max-turns',
      'seed',
      'repeats',
      'batch-wait-ms',
      'command-concurrency',
      'provider',
      'precision',
    ),
    ...flagOptions('no-cache'),
  },
  async run(args, io) {
    const v = args.values;
    const provider = providerOption(args);
    const precision = precisionOption(args);
    const tasks = numberInRange(args, 'tasks', 8, { min: 1, max: 64, integer: true });
    const r = await benchRollout({
      workspace: workspaceOrDemo(args),
      model: modelOrEmbedded(args),
      tasks,
      ...(typeof v['tasks-file'] === 'string' ? { tasksFile: path.resolve(v['tasks-file']) } : {}),
      episodes: numberInRange(args, 'episodes', tasks, { min: 1, max: 256, integer: true }),
      concurrency: numberInRange(args, 'concurrency', 8, { min: 1, max: 64, integer: true }),
      maxTurns: numberInRange(args, 'max-turns', 4, { min: 1, max: 32, integer: true }),
      seed: seedOption(args),
      repeats: numberInRange(args, 'repeats', 1, { min: 1, max: 20, integer: true }),
      config: {
        executionProvider: provider,
        ...(precision !== undefined ? { rolloutPrecision: precision } : {}),
        cacheObservations: v['no-cache'] !== true,
        batchWaitMs: numberInRange(args, 'batch-wait-ms', TRAIN_DEFAULTS.batchWaitMs, { min: 0, max: 60_000, integer: true }),
        commandConcurrency: numberInRange(args, 'command-concurrency', TRAIN_DEFAULTS.commandConcurrency, {
          min: 0,
          max: 4096,
          integer: true,
        }),
      },
      onProgress: (m) => io.err(m),
    });
    // Figures of episodes that all failed measure nothing: say so and exit non-zero.
    const verdict = () => {
      const problem = allEpisodesFailed(r);
      if (!problem) return 0;
      io.err(`error: ${problem}`);
      io.err('  hint: run one task with `turnwise episode --tasks FILE --id TASK --commands FILE` to see what the agent sees');
      return 1;
    };
    if (io.json) {
      io.out(JSON.stringify(r, null, 2));
      return verdict();
    }
    const row = (name: string, p: typeof r.sequential) =>
      `  ${name.padEnd(11)} ${String(p.episodes_per_min).padStart(7)} episodes/min  wall ${p.wall_s} s  generation ${p.generation_s} s (mean batch ${p.mean_batch}, ${p.tokens_per_s} tokens/s)  sandbox ${p.sandbox_s} s  reward ${p.reward_s} s  overlap ${p.overlap_s} s  cores busy ${p.cores_busy ?? '?'}  commands replayed ${Math.round(p.cached_turns * 100)}%`;
    io.out(
      [
        `${r.episodes} episodes of ${r.tasks} tasks, ≤ ${r.max_turns} turns, seed ${r.seed}, ${r.cpus} CPUs`,
        row('sequential', r.sequential),
        row(`${r.concurrency} in flight`, r.concurrent),
        `  command slots ${r.command_slots ?? 'no limit'}`,
        ...(r.repeats
          ? [`  repeats     speedups ${r.repeats.map((x) => `×${x.speedup ?? '?'}`).join(', ')}; the figures above are the median repeat's`]
          : []),
        `  speedup     ×${r.speedup} (target ≥ ${r.target_speedup}; the sequential pass's CPU seconds on ${r.cpus} cores allow ×${r.speedup_cpu_bound ?? '?'}); same actions in both passes: ${r.same_actions} (log-probs differ by up to ${r.logprob_max_diff ?? '?'} across batch shapes)`,
      ].join('\n'),
    );
    return verdict();
  },
};
