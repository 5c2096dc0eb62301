// `turnwise bench tasks`: validated mutation tasks per minute on a generated workspace whose
// suite takes ~1 s, with the given sandbox concurrency, and the share of them whose reward tells a
// fix from no fix; `--corpus`: that share on public repositories of different layouts, fetched
// from Debian's archive (src/bench/scoring-corpus.ts; slow, not part of `npm run bench`).
import * as path from 'node:path';
import { flagOptions, listOption, numberInRange, optionalNumber, valueOptions, type CliCommand } from '../../command';
import { benchTasks } from '../../../bench/tasks';
import { benchScoringCorpus, scoringCorpus } from '../../../bench/scoring-corpus';
import { transferCacheDir } from '../../../bench/transfer';
import { escapeControlChars } from '../../../core/text';
import { ProgressBar } from '../../progress';

export const benchTasksCommand: CliCommand = {
  name: 'bench tasks',
  summary:
    'validated mutation tasks per minute (suite ≈1 s), with candidates tried, kept and dropped and the share whose reward tells a fix from no fix; --corpus: that share on public repositories (slow)',
  usage:
    '[--concurrency N] [--max N] [--seed S] [--suite-seconds S] | --corpus [--repos A,B] [--tasks N] [--concurrency N] [--cache DIR] [--mirror URL]  [--json]',
  options: {
    ...valueOptions('concurrency', 'max', 'seed', 'suite-seconds', 'repos', 'tasks', 'cache', 'mirror'),
    ...flagOptions('corpus'),
  },
  async run(args, io) {
    if (args.values.corpus === true) return corpus(args, io);
    const max = optionalNumber(args, 'max', 24);
    const bar = new ProgressBar('bench tasks', max, { json: io.json });
    const r = await benchTasks({
      concurrency: optionalNumber(args, 'concurrency', 4),
      max,
      seed: optionalNumber(args, 'seed', 0),
      suiteSeconds: optionalNumber(args, 'suite-seconds', 1),
      onProgress: (line) => bar.update(Number(/kept (\d+)/.exec(line)?.[1] ?? 0), line),
    });
    bar.done();
    if (io.json) {
      io.out(JSON.stringify(r));
      return 0;
    }
    io.out(
      [
        `${r.tasks_per_minute} validated tasks/min (${r.candidates_per_minute} candidates/min) with ${r.concurrency} sandboxes`,
        `suite ${r.suite_s} s; candidates: ${r.candidates_tried} tried, ${r.kept} kept, ${r.dropped} dropped, ${r.surplus} surplus`,
        `dropped because: ${
          Object.entries(r.dropped_by_reason)
            .filter(([, v]) => v > 0)
            .map(([k, v]) => `${k} ${v}`)
            .join(', ') || 'none'
        }`,
        `scoring check: ${r.scoring_passed} of ${r.scoring_checked} caught mutants scored right (no-op unresolved, reference fix resolved)`,
        `validation ${r.validation_s} s, total ${r.total_s} s (${r.workspace})`,
      ].join('\n'),
    );
    return 0;
  },
};

async function corpus(args: Parameters<CliCommand['run']>[0], io: Parameters<CliCommand['run']>[1]): Promise<number> {
  const v = args.values;
  const r = await benchScoringCorpus({
    repos: listOption(args, 'repos', []),
    tasksPerRepo: numberInRange(args, 'tasks', 4, { min: 1, max: 1000, integer: true }),
    concurrency: numberInRange(args, 'concurrency', 2, { min: 1, max: 64, integer: true }),
    seed: numberInRange(args, 'seed', 0, { min: 0, max: 2 ** 31, integer: true }),
    cacheDir: typeof v.cache === 'string' ? path.resolve(v.cache) : transferCacheDir(),
    ...(typeof v.mirror === 'string' ? { mirror: v.mirror } : {}),
    onProgress: (m) => io.err(m),
  });
  if (io.json) {
    io.out(JSON.stringify(r, null, 2));
  } else {
    const lines = [
      `scoring corpus (${r.repos.length} of ${scoringCorpus().length} repositories), up to ${r.tasks_per_repo} tasks each; cache ${r.cache_dir}`,
    ];
    for (const x of r.repos) {
      lines.push(`${x.name.padEnd(18)} ${x.error ? 'refused' : `${x.passed}/${x.checked} scored right`.padEnd(20)} ${x.source}`);
      if (x.error) lines.push(`  ${escapeControlChars(x.error).slice(0, 400)}`);
      for (const [k, d] of Object.entries(x.first_detail)) lines.push(`  ${k}: ${escapeControlChars(d ?? '').slice(0, 400)}`);
    }
    lines.push(
      `all: ${r.passed} of ${r.checked} caught mutants scored right (${r.share === null ? '—' : `${(r.share * 100).toFixed(1)}%`}); ${r.repos_all_right} of ${r.repos.length} repositories at 100%; ${r.wall_s} s`,
    );
    io.out(lines.join('\n'));
  }
  return r.passed === r.checked && r.repos.every((x) => !x.error) ? 0 : 1;
}
