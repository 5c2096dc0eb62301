// `turnwise bench learn`: held-out resolved rate after the warm start and after N RL iterations
// with grpo and with turnwise, on identical seeds, tasks and budget. Slow (up to an hour on 2
// cores at the defaults); not part of `npm run bench`. The work is in src/bench/learn.ts.
import * as path from 'node:path';
import { benchLearn, LEARN_DEFAULTS, LEARN_ESTIMATORS } from '../../../bench/learn';
import { passAtKTCorners, type PassAtKT } from '../../../eval/pass-at-k';
import { boundaryVerdict } from '../../../eval/pass-curves';
import { numberInRange, valueOptions, type CliCommand } from '../../command';
import { benchConfig, modelOrEmbedded, workspaceOrDemo, type ConfigFlag } from '../options';

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
  summary: 'held-out resolved rate after warm start vs after N RL iterations with grpo and with turnwise (same seeds and budget; slow)',
  usage:
    '[--config FILE] [--iterations N] [--seeds N] [--workspace DIR] [--model DIR] [--runs DIR] [--max-tasks N] [--tasks-per-iteration N] [--group-size G] [--max-turns N] [--concurrency N] [--eval-every N] [--eval-samples K] [--json]',
  options: valueOptions('config', 'iterations', 'seeds', 'workspace', 'model', 'runs', ...LEARN_FLAGS.map(([flag]) => flag)),
  async run(args, io) {
    const v = args.values;
    const int = (name: string, fallback: number, min = 1) => numberInRange(args, name, fallback, { min, max: 10_000, integer: true });
    // Settings: the demo's (LEARN_DEFAULTS), then --config's fields (any turnwise.json field the
    // benchmark does not set itself: lr, epochs, klCoef, ...), then the flags given.
    const config = benchConfig(args, LEARN_FLAGS);
    const r = await benchLearn({
      workspace: workspaceOrDemo(args),
      model: modelOrEmbedded(args),
      iterations: int('iterations', LEARN_DEFAULTS.iterations!),
      seeds: int('seeds', 1),
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
    io.out(
      [
        `${r.heldout_tasks} held-out task(s), ${r.iterations} iteration(s), seeds ${r.seeds.join(', ')}; runs in ${r.runs_root}`,
        `  warm start   ${r.resolved_warmstart}`,
        `  grpo         ${fmtCurve(r.curve_grpo)}  (first above the warm start: ${r.first_improvement_grpo ?? 'never'})`,
        `  turnwise     ${fmtCurve(r.curve_turnwise)}  (first above the warm start: ${r.first_improvement_turnwise ?? 'never'})`,
        ...LEARN_ESTIMATORS.flatMap((e) => {
          const p = e === 'grpo' ? r.paired_grpo : r.paired_turnwise;
          if (!p) return [];
          const f = (c: typeof p.greedy) => `+${c.gained} −${c.lost} of ${c.pairs} (p ${c.p_value === null ? '—' : c.p_value.toFixed(3)})`;
          return [`  ${e.padEnd(12)} first → last evaluation, same task and seed: greedy ${f(p.greedy)}, sampled ${f(p.sampled)}`];
        }),
        ...(r.pass_at_k_t
          ? [
              'PASS@(k,T) of the sampled held-out episodes (one of k resolves the task within T actions; every k and T in --json: pass_at_k_t):',
              `  warm start   ${fmtPassAtKT(r.pass_at_k_t.warmstart)}`,
              `  grpo         ${fmtPassAtKT(r.pass_at_k_t.grpo)}`,
              `  turnwise     ${fmtPassAtKT(r.pass_at_k_t.turnwise)}`,
              ...LEARN_ESTIMATORS.flatMap((e) => {
                const base = r.pass_at_k_t!.warmstart;
                const after = r.pass_at_k_t![e];
                const v = base && after ? boundaryVerdict(base, after, { tasks: r.heldout_tasks ?? undefined }) : null;
                return v ? [`  ${e.padEnd(12)} against the warm start: ${v.line}`] : [];
              }),
            ]
          : []),
      ].join('\n'),
    );
    return 0;
  },
};
