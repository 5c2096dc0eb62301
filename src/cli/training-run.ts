// A training run from the command line, for `turnwise train` and `turnwise demo`: where its runs
// are, the run itself stopped cleanly on a signal, and its events printed. With --json one RunEvent
// per line (what the editor reads); otherwise a progress line and a table row per iteration.
import * as path from 'node:path';
import type { RunEvent } from '../core/events';
import { RUNS_DIR } from '../core/run';
import { passAtKTCorners, type PassAtKT } from '../eval/pass-at-k';
import { boundaryVerdict } from '../eval/pass-curves';
import type { TrainConfig } from '../train/config';
import { trainRun } from '../train/run';
import { numberInRange, type CliIO, type ParsedArgs } from './command';
import { fmt } from './format';
import { stopOnSignals } from './signals';
import { providerOption } from './commands/options';

/** PASS@(k,T) at k = 1 and the largest k, at the turn limit: `k=1 T=6 0.250  k=4 T=6 0.500`. */
const passCorners = (p: PassAtKT) =>
  passAtKTCorners(p)
    .map((c) => `k=${c.k} T=${c.T} ${fmt(c.value)}`)
    .join('  ');

/** Human output of run events: a progress line on a terminal, a table row per iteration. */
export function humanEventPrinter(io: CliIO): (e: RunEvent) => void {
  const tty = !!process.stderr.isTTY;
  let headerDone = false;
  let lastPhase = '';
  // PASS@(k,T) of the first and the latest held-out evaluation with samples, for the closing summary.
  let firstPass: { iteration: number; p: PassAtKT } | undefined;
  let lastPass: { iteration: number; p: PassAtKT } | undefined;
  const header = () => {
    if (headerDone) return;
    headerDone = true;
    io.out(
      `${'iter'.padStart(4)}  ${'reward'.padStart(7)}  ${'pass'.padStart(6)}  ${'resolved'.padStart(8)}  ${'held-out'.padStart(8)}  ${'sampled'.padStart(7)}  ${'turns'.padStart(5)}  ${'mixed'.padStart(5)}  ${'time'.padStart(6)}`,
    );
  };
  return (e) => {
    switch (e.type) {
      case 'run-started':
        io.err(
          `run ${e.runId}${e.resumedFrom !== undefined ? ` (resumed after iteration ${e.resumedFrom})` : ''}: ${e.trainTasks} train task(s), ${e.heldoutTasks} held out, ${e.iterations} iteration(s)\n  ${e.runDir}`,
        );
        break;
      case 'phase':
        if (tty)
          process.stderr.write(
            `\r\x1b[2Kiteration ${e.iteration} ${e.phase}${e.total ? ` ${e.done ?? 0}/${e.total}` : ''}${e.detail ? ` ${e.detail}` : ''}`.slice(
              0,
              110,
            ),
          );
        else if (`${e.iteration}:${e.phase}` !== lastPhase || (e.total !== undefined && e.done === e.total)) {
          // Without a terminal: one line when a phase starts and one when it completes.
          lastPhase = `${e.iteration}:${e.phase}`;
          io.err(`iteration ${e.iteration}: ${e.phase}${e.total ? ` ${e.done ?? 0}/${e.total}` : ''}${e.detail ? ` (${e.detail})` : ''}`);
        }
        break;
      case 'iteration-finished': {
        if (tty) process.stderr.write('\r\x1b[2K');
        header();
        const m = e.metrics;
        io.out(
          `${String(e.iteration).padStart(4)}  ${fmt(m['reward/mean']).padStart(7)}  ${fmt(m['tests/pass_rate']).padStart(6)}  ${fmt(m.resolved).padStart(8)}  ${fmt(m['heldout/resolved']).padStart(8)}  ${fmt(m['heldout/sampled/resolved']).padStart(7)}  ${fmt(m['turns/mean'], 1).padStart(5)}  ${fmt(m['groups/mixed'], 2).padStart(5)}  ${fmt(m['time/iteration_s'] ?? m['time/eval_s'], 0).padStart(5)}s`,
        );
        if (e.pass_at_k_t && Object.keys(e.pass_at_k_t).length) {
          io.out(`      held-out PASS@(k,T): ${passCorners(e.pass_at_k_t)}`);
          firstPass ??= { iteration: e.iteration, p: e.pass_at_k_t };
          lastPass = { iteration: e.iteration, p: e.pass_at_k_t };
        }
        break;
      }
      case 'log':
        if (tty) process.stderr.write('\r\x1b[2K');
        io.err(`${e.level === 'warn' ? 'warning: ' : ''}${e.message}`);
        break;
      case 'run-finished':
        if (firstPass && lastPass && lastPass.iteration !== firstPass.iteration) {
          io.out(
            `held-out PASS@(k,T), iteration ${firstPass.iteration} → ${lastPass.iteration}: ${passCorners(firstPass.p)} → ${passCorners(lastPass.p)} (every k and T in --json: the iteration-finished events' pass_at_k_t)`,
          );
          const v = boundaryVerdict(firstPass.p, lastPass.p);
          if (v) io.out(`what RL changed (held-out, sampled): ${v.line}`);
        }
        io.err(`run finished: ${e.runDir}`);
        break;
      case 'run-stopped':
        io.err(`run stopped (${e.reason}); iterations up to ${e.lastCompleteIteration} are kept (resume with --resume)`);
        break;
      default:
        break;
    }
  };
}

/**
 * Where a command's runs are: `--runs DIR` when given; a new run of `train` in its workspace's
 * `.turnwise/runs`, whatever the current folder; the demo's (whose workspace is part of the
 * installed package) and a resume's in the current folder's.
 */
export function runsRootFor(o: { runs?: unknown; workspace?: string; resume?: unknown; demo?: boolean }, cwd = process.cwd()): string {
  if (typeof o.runs === 'string') return path.resolve(cwd, o.runs);
  if (o.workspace && !o.demo && o.resume === undefined) return path.resolve(cwd, o.workspace, RUNS_DIR);
  return path.resolve(cwd, RUNS_DIR);
}

/** A training run (or the resume of one) with config `c`, its events printed; 130 when a signal stopped it. */
export async function runTraining(c: TrainConfig, args: ParsedArgs, io: CliIO, name?: string): Promise<number> {
  const runsRoot = runsRootFor({ runs: args.values.runs, workspace: c.workspace, resume: args.values.resume, demo: name === 'demo' });
  const { signal, dispose } = stopOnSignals(io);
  const print = io.json ? (e: RunEvent) => io.out(JSON.stringify(e)) : humanEventPrinter(io);
  try {
    const resume = typeof args.values.resume === 'string' ? args.values.resume : undefined;
    const resumeIterations =
      resume && args.values.iterations !== undefined ? numberInRange(args, 'iterations', 1, { min: 0, integer: true }) : undefined;
    const resumeProvider = resume && args.values.provider !== undefined ? providerOption(args) : undefined;
    const r = await trainRun({
      config: c,
      runsRoot,
      resume,
      resumeIterations,
      ...(resumeProvider ? { resumeProvider } : {}),
      signal,
      onEvent: print,
      name,
    });
    return r.state === 'stopped' ? 130 : 0;
  } finally {
    dispose();
  }
}
