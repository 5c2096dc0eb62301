// `turnwise bench tasks`: validated mutation tasks per minute on a generated workspace whose
// suite takes ~1 s, with the given sandbox concurrency.
import { optionalNumber, valueOptions, type CliCommand } from '../command';
import { benchTasks } from '../../tasks/bench';
import { ProgressBar } from '../progress';

export const benchTasksCommand: CliCommand = {
  name: 'bench tasks',
  summary: 'validated mutation tasks per minute (suite ≈1 s), with candidates tried, kept and dropped',
  usage: '[--concurrency N] [--max N] [--seed S] [--suite-seconds S] [--json]',
  options: valueOptions('concurrency', 'max', 'seed', 'suite-seconds'),
  async run(args, io) {
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
        `dropped because: ${Object.entries(r.dropped_by_reason).filter(([, v]) => v > 0).map(([k, v]) => `${k} ${v}`).join(', ') || 'none'}`,
        `validation ${r.validation_s} s, total ${r.total_s} s (${r.workspace})`,
      ].join('\n'),
    );
    return 0;
  },
};
