// `turnwise bench learn`: held-out resolved rate after the warm start and after N RL iterations
// with each estimator (grpo and turnwise unless --estimators names others), on identical seeds, tasks and budget. Slow (up to an hour on 2
// cores at the defaults); not part of `npm run bench`. The work is in src/bench/learn.ts.
import * as path from 'node:path';
import { benchLearn, LEARN_DEFAULTS, LEARN_ESTIMATORS } from '../../../bench/learn';
import { formatPaired, type PairedChange } from '../../../eval/compare';
import { passAtKTCorners, type PassAtKT } from '../../../eval/pass-at-k';
import { boundaryVerdict } from '../../../eval/pass-curves';
import { listOption, numberInRange, valueOptions, type CliCommand } from '../../command';
import { benchConfig, modelOrEmbedded, precisionOption, workspaceOrDemo, type ConfigFlag } from '../options';

const fmtCurve = (c: (number | null)[]) => c.map((x) => (x === null ? '—' : x.toFixed(2))).join(' → ');

/** PASS@(k,T) at k = 1 and the largest k, at the turn limit: `k=1 T=6 0.25  k=2 T=6 0.50`. */
export const fmtPassAtKT = (p: PassAtKT | null) =>
  p
    ? passAtKTCorners(p)
        .map((c) => `k=${c.k} T=${c.T} ${c.value.toFixed(2)}`)
        .join('  ')
    : '—';

/** The flags that set a field of the runs' config, with the integers each takes. */
const LEARN_FLAGS: readonly ConfigFlag[] = [
  ['max-tasks', 'maxTasks', 2, 10_000],
  ['tasks-per-iteration', 'tasksPerIteration', 1, 10_000],
  ['group-size', 'groupSize', 1, 10_000],
  ['max-turns', 'maxTurns', 1, 10_000],
  ['concurrency', 'concurrency', 1, 10_000],
  ['eval-every', 'evalEvery', 0, 10_000],
  ['eval-samples', 'evalSamples', 0, 10_000],
];

export const benchLearnCommand: CliCommand = {
  name: 'bench learn',
  summary: 'held-out resolved rate after warm start vs after N RL iterations per estimator (default grpo, turnwise; same seeds; slow)',
  usage:
    '[--config FILE] [--iterations N] [--seeds N] [--first-seed K] [--estimators A,B,...] [--workspace DIR] [--model DIR] [--runs DIR] [--max-tasks N] [--tasks-per-iteration N] [--group-size G] [--max-turns N] [--concurrency N] [--eval-every N] [--eval-samples K] [--precision auto|float32|int8|int4] [--json]',
  options: valueOptions(
    'config',
    'iterations',
    'seeds',
    'first-seed',
    'estimators',
    'workspace',
    'model',
    'runs',
    'precision',
    ...LEARN_FLAGS.map(([flag]) => flag),
  ),
  async run(args, io) {
    const v = args.values;
    const int = (name: string, fallback: number, min = 1) => numberInRange(args, name, fallback, { min, max: 10_000, integer: true });
    // Settings: the demo's (LEARN_DEFAULTS), then --config's fields (any turnwise.json field the
    // benchmark does not set itself: lr, epochs, klCoef, ...), then the flags given.
    const config = benchConfig(args, LEARN_FLAGS);
    // --precision: the rollouts' (rolloutPrecision), the update's correction with it.
    const precision = precisionOption(args);
    if (precision !== undefined) config.rolloutPrecision = precision;
    const r = await benchLearn({
      workspace: workspaceOrDemo(args),
      model: modelOrEmbedded(args),
      iterations: int('iterations', LEARN_DEFAULTS.iterations!),
      seeds: int('seeds', 1),
      firstSeed: int('first-seed', 0, 0),
      estimators: listOption(args, 'estimators', LEARN_ESTIMATORS),
      ...(typeof v.runs === 'string' ? { runsRoot: path.resolve(v.runs) } : {}),
      config,
      onProgress: (m) => io.err(m),
      onEvent: (e, run) => {
        if (e.type === 'iteration-finished')
          io.err(
            `  seed ${run.seed} ${run.estimator}: iteration ${e.iteration} held-out resolved ${e.metrics['heldout/resolved'] ?? '—'} reward ${e.metrics['reward/mean'] ?? '—'}`,
          );
        else if (e.type === 'log' && e.level === 'warn') io.err(`  warning: ${e.message}`);
      },
    });
    if (io.json) {
      io.out(JSON.stringify(r, null, 2));
      return 0;
    }
    const pad = Math.max(12, ...r.estimators.map((e) => e.length + 2));
    const f = (c: PairedChange) => formatPaired(c, { byTask: true });
    const warm = r.pass_at_k_t_warmstart;
    io.out(
      [
        `${r.heldout_tasks} held-out task(s), ${r.iterations} iteration(s), seeds ${r.seeds.join(', ')}; runs in ${r.runs_root}`,
        `  ${'warm start'.padEnd(pad)} ${r.resolved_warmstart}`,
        ...r.estimators.map((e) => {
          const x = r.by_estimator[e];
          return `  ${e.padEnd(pad)} ${fmtCurve(x.curve)}  (first above the warm start: ${x.first_improvement ?? 'never'})`;
        }),
        ...r.estimators.flatMap((e) => {
          const p = r.by_estimator[e].paired;
          return p
            ? [`  ${e.padEnd(pad)} first → last evaluation, same task and seed: greedy ${f(p.greedy)}, sampled ${f(p.sampled)}`]
            : [];
        }),
        ...(Object.keys(r.head_to_head).length
          ? [
              'Head to head at the last evaluation (same task and seed; + the first resolved and the second did not):',
              ...Object.entries(r.head_to_head)
                .filter(([k]) => r.estimators.indexOf(k.split(' vs ')[0]) > r.estimators.indexOf(k.split(' vs ')[1]))
                .map(([k, p]) => `  ${k.padEnd(pad * 2)} greedy ${f(p.greedy)}, sampled ${f(p.sampled)}`),
            ]
          : []),
        ...(warm
          ? [
              'PASS@(k,T) of the sampled held-out episodes (one of k resolves the task within T actions; every k and T in --json):',
              `  ${'warm start'.padEnd(pad)} ${fmtPassAtKT(warm)}`,
              ...r.estimators.map((e) => `  ${e.padEnd(pad)} ${fmtPassAtKT(r.by_estimator[e].pass_at_k_t)}`),
              ...r.estimators.flatMap((e) => {
                const after = r.by_estimator[e].pass_at_k_t;
                const v = after ? boundaryVerdict(warm, after, { tasks: r.heldout_tasks ?? undefined }) : null;
                return v ? [`  ${e.padEnd(pad)} against the warm start: ${v.line}`] : [];
              }),
            ]
          : []),
      ].join('\n'),
    );
    return 0;
  },
};
