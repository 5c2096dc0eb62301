// The warm start's training loop, shared by the compact and the chat warm start: packed rows per
// step, the schedule (planned from a time budget after the first steps), evaluations, checkpoints
// every few minutes and the log.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError } from '../core/errors';
import { writeFileAtomic } from '../core/fs';
import { PolicyTrainer } from '../policy/training/trainer';
import { packRows } from '../train/rows';
import { priorLog, priorRecord, warmstartRecord } from './record';
import { lrAt, PLAN_AFTER_STEPS, type ResolvedWarmstart, type WarmstartLogRow, type WarmstartResult } from './config';

/** What a warm start's training loop needs besides its settings: the trainer, how to draw a step's examples, evaluate and save. */
export interface WarmstartLoop {
  trainer: PolicyTrainer;
  /** Tokens per packed row: the setting, or less where the model's context is shorter. */
  rowTokens: number;
  /** The share of curriculum tasks at a fraction of the schedule (logged). */
  curriculum: (frac: number) => number;
  /** Examples for one step (more than fit: packing keeps what does). */
  draw: (frac: number) => { ids: number[]; weights: number[] }[];
  evaluate: () => Promise<Partial<WarmstartLogRow>>;
  /** Writes --out (weights and optimizer state, or the adapter). */
  save: () => void;
  finalCurriculum: number;
}

/**
 * The warm start's loop, whatever the model and format: packed SFT steps along a schedule by
 * step (its length given, or planned from the time budget after the first steps), a log
 * row every 25 steps, an evaluation and a checkpoint every few minutes, then the last save, the
 * final evaluation, and warmstart.json / warmstart-log.jsonl beside the model.
 */
export async function runWarmstartLoop(o: ResolvedWarmstart, l: WarmstartLoop): Promise<WarmstartResult> {
  const { trainer, rowTokens } = l;
  const rows = o.rows;
  const log: WarmstartLogRow[] = [];
  const logFile = path.join(path.dirname(path.resolve(o.out)), `${path.basename(o.out)}.warmstart-log.jsonl`);
  // A warm start continued with --from is the next phase of the one it continues.
  const phase = (priorRecord(o).phases?.length ?? 0) + 1;
  const emit = (row: WarmstartLogRow) => {
    row = { phase, ...row };
    log.push(row);
    fs.mkdirSync(path.dirname(logFile), { recursive: true });
    fs.appendFileSync(logFile, JSON.stringify(row) + '\n');
    o.onLog?.(row);
  };

  const t0 = Date.now();
  const budgetMs = o.minutes !== undefined ? o.minutes * 60_000 : Infinity;
  // The schedule's length in steps: given, or planned once the first steps are timed.
  let schedule = o.steps;
  let timedFrom = 0;
  let lastSave = t0;
  let lastEval = t0;
  let step = 0;
  let tokens = 0;
  let windowTokens = 0;
  let windowT = t0;
  let lossAcc = 0;
  let actAcc = 0;
  let accN = 0;
  // The time budget is kept to within a step: the loop ends before a step that, taking as long
  // as the last one, would end past it.
  let lastStepMs = 0;
  try {
    while ((schedule === undefined || step < schedule) && Date.now() - t0 + lastStepMs < budgetMs && !o.signal?.aborted) {
      const stepT0 = Date.now();
      // Before a planned schedule is known the rate stays at the warm-up's start.
      const frac = schedule === undefined ? 0 : step / schedule;
      const cur = l.curriculum(frac);
      const { batch, tokens: n } = packRows(l.draw(frac), rows, rowTokens);
      const lr = lrAt(frac, { peak: o.peakLr, floor: o.floorLr, warmup: o.warmupFrac });
      const [m] = await trainer.train({ loss: 'sft', batch: rows, seq: rowTokens }, [batch], { lr, weightDecay: 0.01 });
      step++;
      lastStepMs = Date.now() - stepT0;
      if (step === 1) timedFrom = Date.now();
      if (schedule === undefined && step === 1 + PLAN_AFTER_STEPS) {
        const perStep = (Date.now() - timedFrom) / PLAN_AFTER_STEPS;
        schedule = Math.max(step + 1, step + Math.floor((budgetMs - (Date.now() - t0)) / Math.max(1, perStep)));
      }
      if (step === 1 && Date.now() - t0 > budgetMs) {
        // Not even one step fits: nothing is written to --out, and the message says what would.
        const stepMin = (Date.now() - t0) / 60_000;
        throw new TurnwiseError(
          'invalid-input',
          `a warm-start budget of ${o.minutes} min is shorter than one training step here (the first took ${stepMin.toFixed(2)} min, building its graphs included)`,
          {
            hint: `give --minutes of at least ${Math.max(1, Math.ceil(stepMin * 4))} (a few steps; each later step is faster than the first), or --steps N; nothing was written to ${path.resolve(o.out)}`,
          },
        );
      }
      tokens += n;
      windowTokens += n;
      lossAcc += m.loss;
      actAcc += (m as Record<string, number>).action_loss ?? m.loss;
      accN++;
      const now = Date.now();
      const dueEval = now - lastEval >= o.evalEveryMin * 60_000;
      if (step % 25 === 0 || dueEval) {
        const row: WarmstartLogRow = {
          step,
          minutes: (now - t0) / 60_000,
          lr,
          curriculum: cur,
          loss: lossAcc / accN,
          action_loss: actAcc / accN,
          tokens,
          tokens_per_s: (windowTokens / Math.max(1, now - windowT)) * 1000,
        };
        lossAcc = actAcc = accN = 0;
        windowTokens = 0;
        windowT = now;
        if (dueEval) {
          Object.assign(row, await l.evaluate());
          lastEval = Date.now();
        }
        emit(row);
      }
      if (Date.now() - lastSave >= o.checkpointEveryMin * 60_000) {
        l.save();
        lastSave = Date.now();
      }
    }
    const trainMs = Date.now() - t0;
    l.save();
    const final = await l.evaluate();
    // The closing row (the final evaluation) reports the throughput of the whole training phase.
    emit({
      step,
      minutes: (Date.now() - t0) / 60_000,
      lr: 0,
      curriculum: l.finalCurriculum,
      loss: NaN,
      action_loss: NaN,
      tokens,
      tokens_per_s: (tokens / Math.max(1, trainMs)) * 1000,
      ...final,
    });
    const outDir = path.resolve(o.out);
    writeFileAtomic(
      path.join(outDir, 'warmstart.json'),
      JSON.stringify(
        warmstartRecord(o, {
          steps: step,
          schedule_steps: schedule ?? step,
          tokens,
          minutes: (Date.now() - t0) / 60_000,
          seed: o.seed,
          final,
        }),
        null,
        2,
      ) + '\n',
    );
    // The whole curve travels with the checkpoint: the earlier phases' log, then this one's.
    writeFileAtomic(path.join(outDir, 'warmstart-log.jsonl'), priorLog(o) + log.map((row) => JSON.stringify(row) + '\n').join(''));
    return { out: path.resolve(o.out), steps: step, tokens, minutes: (Date.now() - t0) / 60_000, log };
  } finally {
    await trainer.dispose();
  }
}
