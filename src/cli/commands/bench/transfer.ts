// `turnwise bench transfer`: the policy on a panel of small real repositories it never saw,
// fetched from Debian's archive when the bench runs (src/bench/transfer.ts): per repository,
// held-out tasks resolved greedy and in samples before RL, and after a short RL run on its own
// train tasks, paired as `eval --compare` pairs them. Slow; not part of `npm run bench`.
import * as path from 'node:path';
import { benchTransfer, transferCacheDir, type HeldoutScore } from '../../../bench/transfer';
import { formatPaired } from '../../../eval/compare';
import { compareTransferResults, formatTransferComparison, readTransferResult } from '../../../bench/transfer-compare';
import { TRANSFER_PANEL } from '../../../tasks/panel';
import {
  flagOptions,
  listOption,
  numberInRange,
  refuseStrayFiles,
  UsageError,
  valueOptions,
  type CliCommand,
  type CliIO,
  type ParsedArgs,
} from '../../command';
import { benchConfig, modelOrEmbedded, type ConfigFlag } from '../options';

const score = (s: HeldoutScore | null) =>
  s
    ? `greedy ${s.greedy.resolved}/${s.greedy.episodes}, sampled ${s.sampled.resolved}/${s.sampled.episodes} (${s.sampled.tasks_resolved} task(s)${s.sampled.distinct === null ? '' : `, distinct ${s.sampled.distinct.toFixed(2)}`}), either ${s.tasks_resolved}/${s.tasks} tasks`
    : '—';

/** The flags that set a field of the runs' config, with the integers each takes. */
const TRANSFER_FLAGS: readonly ConfigFlag[] = [
  ['iterations', 'iterations', 1, 10_000],
  ['max-tasks', 'maxTasks', 2, 10_000],
  ['samples', 'evalSamples', 0, 64],
];

const TRANSFER_OPTIONS = {
  ...valueOptions(
    'repos',
    'minutes',
    ...TRANSFER_FLAGS.map(([flag]) => flag),
    'estimator',
    'model',
    'config',
    'seed',
    'rl-seed',
    'cache',
    'mirror',
  ),
  ...flagOptions('no-rl', 'compare', 'start'),
};

/** --compare A.json B.json: two benches' results compared episode by episode (no sandbox). */
function runCompare(args: ParsedArgs, io: CliIO, flags: readonly string[]): number {
  const files = args.positionals;
  if (files.length !== 2)
    throw new UsageError(
      `--compare takes two results files of \`turnwise bench transfer --json\`: --compare A.json B.json (got ${files.length})`,
    );
  const clash = flags.filter((k) => k !== 'compare' && k !== 'start' && args.values[k] !== undefined);
  if (clash.length) throw new UsageError(`--compare reads benches already run; it takes no ${clash.map((k) => `--${k}`).join(', ')}`);
  const [a, b] = files.map((f) => path.resolve(f));
  const c = compareTransferResults(readTransferResult(a), readTransferResult(b), { a, b }, args.values.start === true ? 'start' : 'last');
  if (io.json) io.out(JSON.stringify(c, null, 2));
  else for (const line of formatTransferComparison(c)) io.out(line);
  return c.repos.length ? 0 : 1;
}

export const benchTransferCommand: CliCommand = {
  name: 'bench transfer',
  summary:
    'held-out resolved rate on a panel of real repositories the policy never saw (fetched from Debian), before and after a short RL run on each (slow)',
  // The two files of --compare are positional.
  allowPositionals: true,
  options: TRANSFER_OPTIONS,
  usage:
    '[--repos A,B] [--no-rl] [--minutes M] [--iterations N] [--max-tasks N] [--samples K] [--estimator NAME] [--model DIR] [--config FILE] [--seed S] [--rl-seed S] [--cache DIR] [--mirror URL] [--json]; or --compare A.json B.json [--start] [--json]',
  async run(args, io) {
    if (args.values.compare === true) return runCompare(args, io, Object.keys(TRANSFER_OPTIONS));
    if (args.values.start === true)
      throw new UsageError('--start goes with --compare A.json B.json: it compares the starting evaluations of two benches');
    refuseStrayFiles(args, 'compare');
    const v = args.values;
    const config = benchConfig(args, TRANSFER_FLAGS);
    const repos = listOption(args, 'repos', []);
    const r = await benchTransfer({
      model: modelOrEmbedded(args),
      repos,
      noRl: v['no-rl'] === true,
      minutes: numberInRange(args, 'minutes', 30, { min: 0, max: 100_000, minExclusive: true }),
      config,
      ...(typeof v.estimator === 'string' ? { estimator: v.estimator } : {}),
      seed: numberInRange(args, 'seed', 0, { min: 0, max: 2 ** 31, integer: true }),
      ...(v['rl-seed'] !== undefined ? { rlSeed: numberInRange(args, 'rl-seed', 0, { min: 0, max: 2 ** 31, integer: true }) } : {}),
      cacheDir: typeof v.cache === 'string' ? path.resolve(v.cache) : transferCacheDir(),
      ...(typeof v.mirror === 'string' ? { mirror: v.mirror } : {}),
      onProgress: (m) => io.err(m),
      onEvent: (e, repo) => {
        if (e.type === 'iteration-finished')
          io.err(
            `  ${repo}: iteration ${e.iteration} held-out resolved ${e.metrics['heldout/resolved'] ?? '—'} sampled ${e.metrics['heldout/sampled/resolved'] ?? '—'}`,
          );
        else if (e.type === 'log' && e.level === 'warn') io.err(`  ${repo}: warning: ${e.message}`);
      },
    });
    if (io.json) {
      io.out(JSON.stringify(r, null, 2));
      return r.repos.every((x) => x.error) ? 1 : 0;
    }
    const lines = [
      `transfer panel (${r.repos.length} of ${TRANSFER_PANEL.length} repositories), ${r.samples} samples per held-out task, ${r.rl ? `RL (${r.estimator}) up to ${r.iterations} iterations or ${r.minutes} min each` : 'no RL'}; cache ${r.cache_dir}`,
    ];
    for (const x of r.repos) {
      lines.push(`${x.name}  ${x.source}`);
      if (x.error) {
        lines.push(`  failed: ${x.error}`);
        continue;
      }
      lines.push(`  ${x.tasks} tasks (${x.train_tasks} train, ${x.heldout_tasks} held out), ${x.wall_s} s`);
      lines.push(`  before RL  ${score(x.before)}`);
      if (r.rl) lines.push(`  after ${x.rl_iterations} it.  ${score(x.after)}`);
      if (x.paired) {
        lines.push(`  paired     greedy ${formatPaired(x.paired.greedy)}, sampled ${formatPaired(x.paired.sampled, { byTask: true })}`);
      }
    }
    io.out(lines.join('\n'));
    return r.repos.every((x) => x.error) ? 1 : 0;
  },
};
