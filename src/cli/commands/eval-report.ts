// `turnwise eval --report A B …`: results files of several models (each written by
// `turnwise eval --out`) compared episode by episode; the work is in src/eval/report.ts.
import * as path from 'node:path';
import { writeFileAtomic } from '../../core/fs';
import { evalReport, formatReport, reportSvg } from '../../eval/report';
import { UsageError, type CliIO, type ParsedArgs } from '../command';

/** The eval flags a report takes besides its files. */
const REPORT_FLAGS = new Set(['report', 'intersect', 'plot']);

export function runEvalReport(args: ParsedArgs, io: CliIO, evalFlags: readonly string[]): number {
  const files = args.positionals;
  if (files.length === 0)
    throw new UsageError('--report takes the results files to compare: --report A.jsonl B.jsonl … (the --out files of `turnwise eval`)');
  const clash = evalFlags.filter((k) => !REPORT_FLAGS.has(k) && args.values[k] !== undefined);
  if (clash.length) throw new UsageError(`--report reads evaluations already run; it takes no ${clash.map((k) => `--${k}`).join(', ')}`);
  const plot = args.values.plot;
  if (plot !== undefined && (typeof plot !== 'string' || !plot.endsWith('.svg')))
    throw new UsageError('--plot takes the SVG file to write the pass curves to: --plot curves.svg');
  const r = evalReport(
    files.map((f) => path.resolve(f)),
    { intersect: args.values.intersect === true },
  );
  if (typeof plot === 'string') {
    if (!r.models.some((m) => m.pass_at_k_t))
      throw new UsageError('--plot draws PASS@(k,T), which needs sampled episodes: evaluate with --samples K');
    writeFileAtomic(path.resolve(plot), reportSvg(r));
    if (!io.json) io.out(`pass curves written to ${path.resolve(plot)}`);
  }
  if (io.json) {
    io.out(JSON.stringify({ ok: true, ...r }, null, 2));
    return 0;
  }
  for (const line of formatReport(r)) io.out(line);
  return 0;
}
