// Supervised warm start: teaches the policy the agent format and the fix skill before RL
// (RL cannot learn from a start that never succeeds). Packed rows of demonstrations and a copy
// curriculum whose share falls from `curriculumStart` to `curriculumEnd` over the budget;
// prompt tokens in the loss at `promptWeight`, action tokens at 1; warm-up then cosine learning
// rate by optimizer step (a step count, or one planned from a time budget). Checkpoints (weights
// + optimizer) are written every few minutes, so a killed warm start keeps its progress, and a
// JSONL log records loss and held-out fix rates.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { seededRandom } from '../core/random';
import { TurnwiseError } from '../core/errors';
import { writeFileAtomic } from '../core/fs';
import { loadCheckpoint, saveCheckpoint } from '../policy/checkpoint';
import { presetConfig } from '../policy/config';
import { Policy } from '../policy/policy';
import { byteLevelTokenizerConfig, byteLevelTokenizerJson, loadTokenizer } from '../policy/tokenizer';
import { PolicyTrainer } from '../policy/trainer';
import { initWeights } from '../policy/weights';
import type { SessionSettings } from '../onnx';
import { chatCodec, encodeDemonstration, renderPrompt, type ChatCodec } from './chat';
import { candidateEpisode, curriculumTask, fixEpisode, numberedCurriculumTask, numberedEpisode, syntheticCases, type Demonstration, type FixCase } from './demonstrations';
import { defaultSourceRoots, pythonSourceFiles, realSourcePool } from './real-source';
import { packRows } from './rows';
import { evaluateEpisodes, evaluateFixes, fixPromptTurns } from './warmstart-eval';
import { priorLog, priorRecord, startDir, warmstartRecord } from './warmstart-record';
import { episodeDemonstration } from './chat-demonstrations';
// (warmstart-chat.ts imports this module's loop back: used at call time only.)
import { warmstartChat } from './warmstart-chat';
import { modelActionFormat } from './action-format';
import type { LoraConfig } from '../policy/lora';
import type { Task, Trajectory } from '../core/schema';

export interface WarmstartOptions {
  /** Checkpoint whose warm start this continues (weights and optimizer state, or an adapter folder); absent: see `model`. */
  from?: string;
  /**
   * Model folder a new warm start starts from (a Hugging Face folder or a Turnwise checkpoint);
   * absent with no `from`: a fresh turnwise-tiny with `seed`. A chat model (one with a chat
   * template) is trained in its own chat format.
   */
  model?: string;
  /** A LoRA adapter folder over `model` to continue training (its optimizer state too, when saved). */
  adapter?: string;
  /** Train a fresh LoRA adapter on the model (chat models) instead of the whole model. */
  lora?: LoraConfig;
  /** Resolved episodes of evaluation results (selectEpisodes), with their tasks: demonstrations in the model's format. */
  episodes?: { trajectory: Trajectory; task: Task }[];
  /** Share of examples drawn from `episodes` (default 1: nothing else). */
  episodeShare?: number;
  /** Tokens a reply may take (chat models: the prompt budget and the evaluation's replies); default 128. */
  maxActionTokens?: number;
  /** Where the warm-started checkpoint is written (replaced atomically at each save). */
  out: string;
  /**
   * Length of the learning-rate and curriculum schedule in optimizer steps; the warm start ends
   * after them. Absent: planned from `minutes` at the speed of the first steps (and recorded in
   * warmstart.json as `schedule_steps`, so the phase can be repeated by step anywhere).
   */
  steps?: number;
  /** Wall-clock limit (with `steps`) or budget (without); at least one of the two is given. */
  minutes?: number;
  seed?: number;
  rows?: number;
  rowTokens?: number;
  peakLr?: number;
  floorLr?: number;
  /** Fraction of the budget spent warming the learning rate up. */
  warmupFrac?: number;
  promptWeight?: number;
  curriculumStart?: number;
  curriculumEnd?: number;
  /** Fix cases recorded from a workspace (train split only), oversampled to `workspaceShare` of episodes. */
  workspaceCases?: FixCase[];
  workspaceShare?: number;
  /** Share of fix episodes written as attempt loops (demonstrations.ts loopEpisode); 0 (default): none. */
  loopShare?: number;
  /**
   * Share of fix episodes and curriculum tasks in the numbered form (`tw-suspects -n`, `tw-edit K
   * OLD NEW`: demonstrations.ts numberedEpisode); 0 (default): none.
   */
  numberedShare?: number;
  /**
   * Share of numbered draws in the candidate form (`tw-cands K`, `tw-apply K J`:
   * demonstrations.ts candidateEpisode) where the case has one; 0 (default): none.
   */
  candsShare?: number;
  /** No sed-form examples at all: every example in the numbered (or candidate) form, a case without one drawn again (drawDemonstration). */
  noSed?: boolean;
  /** Share of generated fix cases drawn from real Python source installed on this machine (train/real-source.ts); 0 (default): none. */
  realShare?: number;
  /** Folders of Python source for `realShare` (default: the standard library and dist-packages found under /usr/lib). */
  sourceRoots?: string[];
  /** Synthetic cases generated up front (reused with fresh random phrasing). */
  poolSize?: number;
  /** Real-source cases made up front when `realShare` > 0 (default 2,000). */
  realPoolSize?: number;
  checkpointEveryMin?: number;
  evalEveryMin?: number;
  /** Held-out synthetic cases for the exact-fix rate. */
  evalCases?: number;
  settings?: SessionSettings;
  onLog?: (row: WarmstartLogRow) => void;
  signal?: AbortSignal;
}

export interface WarmstartLogRow {
  /** 1 for a fresh start, one more than the continued checkpoint's phases with --from. */
  phase?: number;
  step: number;
  minutes: number;
  lr: number;
  curriculum: number;
  loss: number;
  action_loss: number;
  tokens: number;
  tokens_per_s: number;
  /** Set on evaluation rows. */
  exact_fix?: number;
  /** Simulated greedy episodes (the first 32 eval cases) whose bug is fixed within 5 turns (evaluateEpisodes). */
  episode_fix?: number;
  /** Share of generated commands that restore the mutated line when run (any correct command). */
  restores_line?: number;
  right_line?: number;
  valid_sed?: number;
  workspace_exact_fix?: number;
  /** Simulated greedy episodes in the numbered form (tw-suspects -n, tw-edit K …) on the generated eval cases fixed within 5 turns. */
  numbered_episode_fix?: number;
  /** Simulated greedy episodes on held-out real-source cases (files never trained on) fixed within 5 turns. */
  real_episode_fix?: number;
}

export interface WarmstartResult {
  out: string;
  steps: number;
  tokens: number;
  minutes: number;
  log: WarmstartLogRow[];
}

/** Generates `n` synthetic fix cases (several per generated module). */
export async function casePool(seed: number, n: number): Promise<FixCase[]> {
  const r = seededRandom(seed);
  const out: FixCase[] = [];
  while (out.length < n) out.push(...(await syntheticCases(r, 5)));
  return out.slice(0, n);
}

/** The held-out generated cases a warm start with `seed` evaluates on (its train pool uses another stream). */
export function evalCasePool(seed: number, n: number): Promise<FixCase[]> {
  return casePool(seed * 7919 + 2, n);
}

export function lrAt(frac: number, o: { peak: number; floor: number; warmup: number }): number {
  if (frac < o.warmup) return o.peak * Math.max(0.02, frac / o.warmup);
  const p = Math.min(1, (frac - o.warmup) / Math.max(1e-9, 1 - o.warmup));
  return o.floor + (o.peak - o.floor) * 0.5 * (1 + Math.cos(Math.PI * p));
}

export async function warmstart(o: WarmstartOptions): Promise<WarmstartResult> {
  const seed = o.seed ?? 0;
  const rows = o.rows ?? 8;
  const rowTokens = o.rowTokens ?? 640;
  const peak = o.peakLr ?? 2e-3;
  const floor = o.floorLr ?? peak * 0.05;
  const warmup = o.warmupFrac ?? 0.04;
  const promptWeight = o.promptWeight ?? 0.3;
  const cStart = o.curriculumStart ?? 0.7;
  const cEnd = o.curriculumEnd ?? 0.2;
  const wsShare = o.workspaceCases?.length ? (o.workspaceShare ?? 0.2) : 0;
  const loopShare = o.loopShare ?? 0;
  // With noSed every example is in the numbered form, and the simulated episodes are measured in it.
  const numberedShare = o.noSed ? 1 : (o.numberedShare ?? 0);
  const realShare = o.realShare ?? 0;
  checkBudget(o);

  // A chat model (its own template) is warm-started in its own format, LoRA when asked.
  const start = startDir(o);
  if (start && modelActionFormat(o.adapter && o.model ? o.model : start).kind === 'chat') {
    return warmstartChat(o);
  }
  if (o.adapter || o.lora) {
    throw new TurnwiseError('invalid-input', `${start ?? 'turnwise-tiny'} writes in the compact format, whose warm start trains the whole model; LoRA warm starts are for chat models`, {
      hint: 'leave out --lora / --adapter (turnwise-tiny is small enough to train whole), or give a chat model folder with --model',
    });
  }
  let weights;
  let optimizer;
  let tokenizerJson: Record<string, unknown>;
  let tokenizerConfig: Record<string, unknown> | undefined;
  if (start) {
    const ck = loadCheckpoint(start, { optimizer: true });
    if (ck.adapter) {
      throw new TurnwiseError('invalid-input', `${start} is a LoRA adapter over ${ck.dir}, a model in the compact format; its warm start trains a whole model`, {
        hint: `merge it first (turnwise policy merge --model ${ck.dir} --adapter ${start} --out DIR), then warm-start --from DIR`,
      });
    }
    weights = ck.weights;
    // A new warm start of a model (--model) starts its optimizer afresh; --from continues it.
    optimizer = o.from ? ck.optimizer : undefined;
    tokenizerJson = ck.tokenizerJson;
    tokenizerConfig = ck.tokenizerConfig;
  } else {
    weights = initWeights(presetConfig('tiny'), seed);
    tokenizerJson = byteLevelTokenizerJson();
    tokenizerConfig = byteLevelTokenizerConfig();
  }
  const tokenizer = loadTokenizer(tokenizerJson, tokenizerConfig);
  const codec = chatCodec(tokenizer);
  const ctx = weights.config.max_position_embeddings;
  if (rowTokens > ctx) throw new TurnwiseError('invalid-input', `rows of ${rowTokens} tokens are longer than the model's context of ${ctx}`, { hint: `give --row-tokens of at most ${ctx}` });
  const trainer = new PolicyTrainer(weights, optimizer, o.settings);

  // Train cases and held-out eval cases come from different seeds of the generator (none are
  // generated for a warm start on episodes alone).
  const onlyEpisodes = !!o.episodes?.length && (o.episodeShare ?? 1) >= 1;
  const pool = onlyEpisodes ? [] : await casePool(seed * 7919 + 1, o.poolSize ?? 6000);
  const evalCases = await evalCasePool(seed, o.evalCases ?? 64);
  // Real source: train cases from most files, held-out cases from the files set aside for evaluation.
  let realPool: FixCase[] = [];
  let realEval: FixCase[] = [];
  if (realShare > 0 && !onlyEpisodes) {
    const roots = o.sourceRoots ?? defaultSourceRoots();
    const files = pythonSourceFiles(roots);
    realPool = await realSourcePool(seededRandom(seed * 7919 + 5), files, o.realPoolSize ?? 2000);
    realEval = await realSourcePool(seededRandom(seed * 7919 + 6), files, 32, { heldOut: true, perFile: 2 });
    if (realPool.length === 0) {
      throw new TurnwiseError('invalid-input', `no fix case could be made from Python source under ${roots.length ? roots.join(', ') : '(no folder found)'}`, {
        hint: 'install Python 3 (its standard library is the default source), give folders of Python modules with --source-root DIR, or leave out --real-share',
      });
    }
  }
  const r = seededRandom(seed * 7919 + 3);
  const generated = (): FixCase => (realShare > 0 && r() < realShare ? realPool[Math.floor(r() * realPool.length)] : pool[Math.floor(r() * pool.length)]);
  const pickCase = (): FixCase => (wsShare > 0 && r() < wsShare ? o.workspaceCases![Math.floor(r() * o.workspaceCases!.length)] : generated());

  const save = () => saveCheckpoint(o.out, { weights: trainer.weights(), optimizer: trainer.optimizerState(), tokenizerJson, tokenizerConfig });
  const evaluate = async (): Promise<Partial<WarmstartLogRow>> => {
    const policy = new Policy(trainer.weights(), tokenizer, o.settings);
    try {
      const e = await evaluateFixes(policy, codec, evalCases);
      const ws = o.workspaceCases?.length ? await evaluateFixes(policy, codec, o.workspaceCases.slice(0, 32)) : undefined;
      const ep = await evaluateEpisodes(policy, codec, evalCases.slice(0, 32));
      // The numbered form, on the generated cases and on held-out real source (the form the
      // warm start teaches most, else the sed form).
      const num = numberedShare > 0 ? await evaluateEpisodes(policy, codec, evalCases.slice(0, 32), 5, undefined, 'numbered') : undefined;
      const real = realEval.length ? await evaluateEpisodes(policy, codec, realEval, 5, undefined, numberedShare >= 0.5 ? 'numbered' : 'sed') : undefined;
      return {
        episode_fix: ep.fixed,
        exact_fix: e.exact,
        restores_line: e.restores,
        right_line: e.rightLine,
        valid_sed: e.validSed,
        ...(ws ? { workspace_exact_fix: ws.exact } : {}),
        ...(num ? { numbered_episode_fix: num.fixed } : {}),
        ...(real ? { real_episode_fix: real.fixed } : {}),
      };
    } finally {
      await policy.dispose();
    }
  };
  // Resolved episodes of evaluation results, in the compact format, drawn in `episodeShare` of examples.
  const episodeSegs = (o.episodes ?? []).map((e) => episodeDemonstration(e.trajectory, e.task, 'compact'));
  const epShare = episodeSegs.length ? (o.episodeShare ?? 1) : 0;
  const drawMix = (cur: number) => {
    const mix = { curriculum: cur, loopShare, numberedShare, candsShare: o.candsShare ?? 0 };
    if (!o.noSed) return drawDemonstration(r, pickCase(), mix).segments;
    // A case without a numbered form is drawn again; after 20 such the example is left out.
    for (let t = 0; t < 20; t++) {
      const d = drawDemonstration(r, pickCase(), { ...mix, noSed: true });
      if (d) return d.segments;
    }
    return undefined;
  };
  return runWarmstartLoop(o, {
    trainer,
    rows,
    rowTokens,
    seed,
    curriculum: (frac) => cStart + (cEnd - cStart) * frac,
    lr: (frac) => lrAt(frac, { peak, floor, warmup }),
    draw: (frac) => {
      const cur = cStart + (cEnd - cStart) * frac;
      const examples: { ids: number[]; weights: number[] }[] = [];
      // Over-draw: packing keeps what fits.
      for (let i = 0; i < rows * 10; i++) {
        // No draw without episodes: the random stream of the generated demonstrations stays as it was.
        const segments = epShare > 0 && (epShare >= 1 || r() < epShare) ? episodeSegs[Math.floor(r() * episodeSegs.length)] : drawMix(cur);
        if (!segments) continue;
        const enc = encodeDemonstration(codec, segments, promptWeight);
        if (enc.ids.length <= Math.min(rowTokens, ctx)) examples.push(enc);
      }
      return examples;
    },
    evaluate,
    save,
    finalCurriculum: cEnd,
  });
}

/** A warm start's length: a positive whole number of steps, or minutes > 0, or both (the minutes then a limit). */
export function checkBudget(o: Pick<WarmstartOptions, 'steps' | 'minutes'>): void {
  if (o.steps !== undefined && !(Number.isInteger(o.steps) && o.steps > 0)) throw new TurnwiseError('invalid-input', `the warm-start schedule must be a whole number of steps > 0, got ${o.steps}`);
  if (o.minutes !== undefined && !(o.minutes > 0)) throw new TurnwiseError('invalid-input', `the warm-start budget must be > 0 minutes, got ${o.minutes}`);
  if (o.steps === undefined && o.minutes === undefined) throw new TurnwiseError('invalid-input', 'a warm start needs a length: give --steps N (the schedule) or --minutes M (a budget the schedule is planned to fill)');
}

/** Steps timed before a schedule is planned from a time budget (the first, which builds the graphs, left out). */
export const PLAN_AFTER_STEPS = 3;

/** What a warm start's training loop needs besides its options: the trainer, how to draw a step's examples, evaluate and save. */
export interface WarmstartLoop {
  trainer: PolicyTrainer;
  rows: number;
  rowTokens: number;
  seed: number;
  /** The share of curriculum tasks at a fraction of the schedule (logged). */
  curriculum: (frac: number) => number;
  lr: (frac: number) => number;
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
export async function runWarmstartLoop(o: WarmstartOptions, l: WarmstartLoop): Promise<WarmstartResult> {
  const { trainer, rows, rowTokens } = l;
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
      const lr = l.lr(frac);
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
        throw new TurnwiseError('invalid-input', `a warm-start budget of ${o.minutes} min is shorter than one training step here (the first took ${stepMin.toFixed(2)} min, building its graphs included)`, {
          hint: `give --minutes of at least ${Math.max(1, Math.ceil(stepMin * 4))} (a few steps; each later step is faster than the first), or --steps N; nothing was written to ${path.resolve(o.out)}`,
        });
      }
      tokens += n;
      windowTokens += n;
      lossAcc += m.loss;
      actAcc += (m as Record<string, number>).action_loss ?? m.loss;
      accN++;
      const now = Date.now();
      const dueEval = now - lastEval >= (o.evalEveryMin ?? 5) * 60_000;
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
      if (Date.now() - lastSave >= (o.checkpointEveryMin ?? 5) * 60_000) {
        l.save();
        lastSave = Date.now();
      }
    }
    const trainMs = Date.now() - t0;
    l.save();
    const final = await l.evaluate();
    // The closing row (the final evaluation) reports the throughput of the whole training phase.
    emit({ step, minutes: (Date.now() - t0) / 60_000, lr: 0, curriculum: l.finalCurriculum, loss: NaN, action_loss: NaN, tokens, tokens_per_s: (tokens / Math.max(1, trainMs)) * 1000, ...final });
    const outDir = path.resolve(o.out);
    writeFileAtomic(path.join(outDir, 'warmstart.json'), JSON.stringify(warmstartRecord(o, { steps: step, schedule_steps: schedule ?? step, tokens, minutes: (Date.now() - t0) / 60_000, seed: l.seed, final }), null, 2) + '\n');
    // The whole curve travels with the checkpoint: the earlier phases' log, then this one's.
    writeFileAtomic(path.join(outDir, 'warmstart-log.jsonl'), priorLog(o) + log.map((row) => JSON.stringify(row) + '\n').join(''));
    return { out: path.resolve(o.out), steps: step, tokens, minutes: (Date.now() - t0) / 60_000, log };
  } finally {
    await trainer.dispose();
  }
}

/**
 * One training example of a fix case, as the warm start mixes them: a curriculum task with
 * probability `curriculum`, else a whole fix episode (85%; attempt loops in `loopShare` of them)
 * or just the fix turn in context; in `numberedShare` of draws the numbered form of either
 * (numbered curriculum tasks, numberedEpisode) where the case has one, and in `candsShare` of
 * those the candidate form (candidateEpisode). RL's replay term (train/replay.ts) draws the same way.
 */
export function drawDemonstration(r: () => number, c: FixCase, o: { curriculum: number; loopShare: number; numberedShare?: number; candsShare?: number }): Demonstration;
export function drawDemonstration(r: () => number, c: FixCase, o: { curriculum: number; loopShare: number; numberedShare?: number; candsShare?: number; noSed: true }): Demonstration | undefined;
/**
 * With `noSed`, every draw is in the numbered form (numberedShare 1) and a case without one
 * gives undefined (the caller draws another case): no example writes a path or a sed command.
 */
export function drawDemonstration(r: () => number, c: FixCase, o: { curriculum: number; loopShare: number; numberedShare?: number; candsShare?: number; noSed?: boolean }): Demonstration | undefined {
  // No draw without the numbered (or candidate) form: the random stream of earlier recipes stays as it was.
  const numbered = o.noSed || (!!o.numberedShare && r() < o.numberedShare);
  const cands = numbered && !!o.candsShare && r() < o.candsShare;
  if (r() < o.curriculum) return (numbered && numberedCurriculumTask(r, c, { cands })) || (o.noSed ? undefined : curriculumTask(r, c));
  if (numbered) {
    const d = (cands && candidateEpisode(c)) || numberedEpisode(r, c);
    if (d) return d;
    if (o.noSed) return undefined;
  }
  return r() < 0.85 ? fixEpisode(r, c, { loopShare: o.loopShare }) : { kind: 'fix-turn', segments: fixOnlySegments(c) };
}

/** Just the fix turn in context (task, tw-suspects and its output, the fix), a short full-weight example. */
function fixOnlySegments(c: FixCase) {
  const p = fixPromptTurns(c);
  return [
    { role: 'task' as const, text: p.task },
    { role: 'agent' as const, text: p.turns[0].action },
    { role: 'obs' as const, text: p.turns[0].observation },
    { role: 'agent' as const, text: c.fix },
  ];
}

