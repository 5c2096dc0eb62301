// Supervised warm start: teaches the policy the agent format and the fix skill before RL
// (RL cannot learn from a start that never succeeds). Packed rows of demonstrations and a copy
// curriculum whose share falls from `curriculumStart` to `curriculumEnd` over the budget;
// prompt tokens in the loss at `promptWeight`, action tokens at 1; warm-up then cosine learning
// rate by elapsed budget. Checkpoints (weights + optimizer) are written every few minutes, so a
// killed warm start keeps its progress, and a JSONL log records loss and held-out exact-fix rate.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { seededRandom } from '../core/random';
import { TurnwiseError } from '../core/errors';
import { readUserTextFile, writeFileAtomic } from '../core/fs';
import { taskText } from '../agent/prompt';
import { loadCheckpoint, saveCheckpoint } from '../policy/checkpoint';
import { presetConfig } from '../policy/config';
import { Policy } from '../policy/policy';
import { byteLevelTokenizerConfig, byteLevelTokenizerJson, loadTokenizer } from '../policy/tokenizer';
import { PolicyTrainer, type TrainBatch } from '../policy/trainer';
import { initWeights } from '../policy/weights';
import type { SessionSettings } from '../onnx';
import { chatCodec, encodeDemo, renderPrompt, type ChatCodec } from './chat';
import { curriculumTask, fixEpisode, syntheticCases, twTestOutput, type Demo, type FixCase } from './demos';
import { sedLine } from './sed';
import { episodeDemo } from './chat-demos';
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
  /** Wall-clock budget. */
  minutes: number;
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
  /** Share of fix episodes written as attempt loops (demos.ts loopEpisode); 0 (default): none. */
  loopShare?: number;
  /** Synthetic cases generated up front (reused with fresh random phrasing). */
  poolSize?: number;
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

/** Greedy packing of encoded examples into rows of `rowTokens` (each example one segment). */
export function packRows(examples: { ids: number[]; weights: number[] }[], rows: number, rowTokens: number): { batch: TrainBatch; tokens: number; used: number } {
  const ids = new Array<number>(rows * rowTokens).fill(0);
  const seg = new Array<number>(rows * rowTokens).fill(0);
  const w = new Array<number>(rows * rowTokens).fill(0);
  const act = new Array<number>(rows * rowTokens).fill(0);
  const fill = new Array<number>(rows).fill(0);
  let tokens = 0;
  let used = 0;
  let segId = 0;
  for (const ex of examples) {
    const n = Math.min(ex.ids.length, rowTokens);
    const r = fill.findIndex((f) => f + n <= rowTokens);
    if (r < 0) continue;
    segId++;
    for (let i = 0; i < n; i++) {
      const o = r * rowTokens + fill[r] + i;
      ids[o] = ex.ids[i];
      seg[o] = segId;
      w[o] = ex.weights[i];
      act[o] = ex.weights[i] >= 1 ? 1 : 0;
    }
    fill[r] += n;
    tokens += n;
    used++;
  }
  return { batch: { inputIds: ids, segmentIds: seg, lossMask: w, actionMask: act }, tokens, used };
}

export function lrAt(frac: number, o: { peak: number; floor: number; warmup: number }): number {
  if (frac < o.warmup) return o.peak * Math.max(0.02, frac / o.warmup);
  const p = Math.min(1, (frac - o.warmup) / Math.max(1e-9, 1 - o.warmup));
  return o.floor + (o.peak - o.floor) * 0.5 * (1 + Math.cos(Math.PI * p));
}

/** The prompt a fix case's episode is at when the fix is due: task, then `tw-suspects` and its output. */
export function fixPromptTurns(c: FixCase): { task: string; turns: { action: string; observation: string }[] } {
  return {
    task: taskText({ fail_to_pass: c.failing, source: 'mutation' }),
    turns: [{ action: 'tw-suspects', observation: `exit 1\n${[`${c.failing.length} failed, ${c.passing} passed`, ...c.suspects].join('\n')}` }],
  };
}

/**
 * Whether `cmd`, a `sed -i 'N<script>' PATH` for the case's file and line, turns the mutated line
 * back into the original as GNU sed would (train/sed.ts, in JavaScript: the policy's script never
 * reaches a program on the host): a command other than the demonstrated one can fix the bug too
 * (`s/>= 7/> 7/` for `s/>=/>/`).
 */
export function sedRestores(cmd: string, c: Pick<FixCase, 'path' | 'line' | 'mutatedLine' | 'originalLine'>): boolean {
  const e = parseLineEdit(cmd);
  if (!e || e.test || e.line !== c.line || e.path !== c.path) return false;
  return sedLine(e.script, c.mutatedLine) === c.originalLine;
}

/** A line edit as the demonstrations write it: `sed -i 'N<script>' PATH`, alone or as an attempt. */
export interface LineEdit {
  line: number;
  /** The sed script after the line address (`s/old/new/`). */
  script: string;
  path: string;
  /** Followed by `&& tw-test`. */
  test: boolean;
  /** The file of a trailing `|| git checkout [-q] [--] FILE` (the attempt's undo). */
  undo?: string;
}

const LINE_EDIT = /^sed -i '(\d+)(s[^']*)' (\S+)(?:( && tw-test)(?: \|\| git checkout (?:-q )?(?:-- )?(\S+))?)?$/;

/** Parses a line edit or an attempt (demos.ts attemptCommand); undefined for anything else. */
export function parseLineEdit(cmd: string): LineEdit | undefined {
  const m = LINE_EDIT.exec(cmd);
  if (!m) return undefined;
  return { line: Number(m[1]), script: m[2], path: m[3], test: !!m[4], ...(m[5] ? { undo: m[5] } : {}) };
}

/** The `sed` of a command that is one, or of an attempt (demos.ts attemptCommand); else the command. */
export function editOf(cmd: string): string {
  const e = parseLineEdit(cmd);
  return e ? `sed -i '${e.line}${e.script}' ${e.path}` : cmd;
}

/**
 * Greedy fix-turn accuracy on cases: the exact demonstrated command, a command that restores the
 * line when run, the right line number, any `sed -i 'N…'`.
 */
export async function evaluateFixes(policy: Policy, codec: ChatCodec, cases: readonly FixCase[], budget = 1024 - 96): Promise<{ exact: number; restores: number; rightLine: number; validSed: number }> {
  let exact = 0;
  let restores = 0;
  let line = 0;
  let sed = 0;
  const B = 16;
  for (let i = 0; i < cases.length; i += B) {
    const chunk = cases.slice(i, i + B);
    const prompts = chunk.map((c) => {
      const p = fixPromptTurns(c);
      return renderPrompt(codec, p.task, p.turns, budget).ids;
    });
    const rows = await policy.generateIds(prompts, { maxNewTokens: 96, temperature: 0, stopIds: [codec.imEnd] });
    rows.forEach((row, k) => {
      // The edit of an attempt (`sed … && tw-test || git checkout -q FILE`) is what is judged.
      const text = editOf(codec.decode(row.tokenIds.filter((t) => t !== codec.imEnd)).trim());
      const c = chunk[k];
      if (text === c.fix) exact++;
      if (sedRestores(text, c)) restores++;
      const m = /^sed -i '(\d+)s\//.exec(text);
      if (m) {
        sed++;
        if (Number(m[1]) === c.line) line++;
      }
    });
  }
  const n = Math.max(1, cases.length);
  return { exact: exact / n, restores: restores / n, rightLine: line / n, validSed: sed / n };
}

/**
 * One simulated turn of a fix case's episode: what the sandbox would do with `cmd` when only the
 * bug line matters. Understood: `sed -i 'N…' PATH`, optionally `&& tw-test`, optionally
 * `|| git checkout [-q] [--] PATH`; `tw-test`; `git checkout [-q] [--] PATH`. Anything else is
 * run as a no-op (exit 0, no output): the model only wastes the turn. An edit of another line
 * that is not undone spoils the episode (`stray`).
 */
export function simulateTurn(st: { line: string; stray: boolean }, c: FixCase, cmd: string): string {
  const tests = () => (st.line === c.originalLine && !st.stray ? { code: 0, out: twTestOutput([], c.failing.length + c.passing) } : { code: 1, out: twTestOutput(c.failing, c.passing) });
  const revert = (p: string) => {
    if (p === c.path) st.line = c.mutatedLine;
    st.stray = false;
  };
  const co = /^git checkout (?:-q )?(?:-- )?(\S+)$/.exec(cmd);
  if (co) return (revert(co[1]), 'exit 0');
  if (cmd === 'tw-test') {
    const t = tests();
    return `exit ${t.code}\n${t.out}`;
  }
  const e = parseLineEdit(cmd);
  if (!e) return 'exit 0';
  const { script, path: file, test: andTest, undo } = e;
  let code = 0;
  if (file === c.path && e.line === c.line) {
    const next = sedLine(script, st.line);
    if (next === undefined) code = 1;
    else st.line = next;
  } else {
    st.stray = true;
  }
  let out = '';
  if (code === 0 && andTest) {
    const t = tests();
    code = t.code;
    out = t.out;
  }
  if (code !== 0 && undo) {
    revert(undo);
    code = 0;
  }
  return out ? `exit ${code}\n${out}` : `exit ${code}`;
}

/**
 * Greedy episodes on fix cases, simulated (simulateTurn) from the point after `tw-suspects`: the
 * share whose bug line is restored, with no stray edit left, within `turns` turns. Unlike the
 * first-command figures this credits trying again after a failed attempt.
 */
export async function evaluateEpisodes(policy: Policy, codec: ChatCodec, cases: readonly FixCase[], turns = 5, budget = 1024 - 96): Promise<{ fixed: number; meanTurns: number }> {
  const st = cases.map((c) => ({ c, p: fixPromptTurns(c), line: c.mutatedLine, stray: false, done: false, n: 0 }));
  for (let t = 0; t < turns; t++) {
    const live = st.filter((s) => !s.done);
    for (let i = 0; i < live.length; i += 16) {
      const chunk = live.slice(i, i + 16);
      const rows = await policy.generateIds(chunk.map((s) => renderPrompt(codec, s.p.task, s.p.turns, budget).ids), { maxNewTokens: 96, temperature: 0, stopIds: [codec.imEnd] });
      rows.forEach((row, k) => {
        const s = chunk[k];
        const cmd = codec.decode(row.tokenIds.filter((x) => x !== codec.imEnd)).trim();
        s.n++;
        if (cmd === 'submit') {
          s.done = true;
          return;
        }
        s.p.turns.push({ action: cmd, observation: simulateTurn(s, s.c, cmd) });
      });
    }
  }
  const n = Math.max(1, st.length);
  return { fixed: st.filter((s) => s.line === s.c.originalLine && !s.stray).length / n, meanTurns: st.reduce((a, s) => a + s.n, 0) / n };
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
  if (!(o.minutes > 0)) throw new TurnwiseError('invalid-input', `the warm-start budget must be > 0 minutes, got ${o.minutes}`);

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
  const r = seededRandom(seed * 7919 + 3);
  const pickCase = (): FixCase => (wsShare > 0 && r() < wsShare ? o.workspaceCases![Math.floor(r() * o.workspaceCases!.length)] : pool[Math.floor(r() * pool.length)]);

  const save = () => saveCheckpoint(o.out, { weights: trainer.weights(), optimizer: trainer.optimizerState(), tokenizerJson, tokenizerConfig });
  const evaluate = async (): Promise<Pick<WarmstartLogRow, 'episode_fix' | 'exact_fix' | 'restores_line' | 'right_line' | 'valid_sed' | 'workspace_exact_fix'>> => {
    const policy = new Policy(trainer.weights(), tokenizer, o.settings);
    try {
      const e = await evaluateFixes(policy, codec, evalCases);
      const ws = o.workspaceCases?.length ? await evaluateFixes(policy, codec, o.workspaceCases.slice(0, 32)) : undefined;
      const ep = await evaluateEpisodes(policy, codec, evalCases.slice(0, 32));
      return { episode_fix: ep.fixed, exact_fix: e.exact, restores_line: e.restores, right_line: e.rightLine, valid_sed: e.validSed, ...(ws ? { workspace_exact_fix: ws.exact } : {}) };
    } finally {
      await policy.dispose();
    }
  };
  // Resolved episodes of evaluation results, in the compact format, drawn in `episodeShare` of examples.
  const episodeSegs = (o.episodes ?? []).map((e) => episodeDemo(e.trajectory, e.task, 'compact'));
  const epShare = episodeSegs.length ? (o.episodeShare ?? 1) : 0;
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
        const segments = epShare > 0 && (epShare >= 1 || r() < epShare) ? episodeSegs[Math.floor(r() * episodeSegs.length)] : drawDemo(r, pickCase(), { curriculum: cur, loopShare }).segments;
        const enc = encodeDemo(codec, segments, promptWeight);
        if (enc.ids.length <= Math.min(rowTokens, ctx)) examples.push(enc);
      }
      return examples;
    },
    evaluate,
    save,
    finalCurriculum: cEnd,
  });
}

/** What a warm start's training loop needs besides its options: the trainer, how to draw a step's examples, evaluate and save. */
export interface WarmstartLoop {
  trainer: PolicyTrainer;
  rows: number;
  rowTokens: number;
  seed: number;
  /** The share of curriculum tasks at a fraction of the budget (logged). */
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
 * The warm start's loop, whatever the model and format: packed SFT steps until the budget, a log
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
  const budgetMs = o.minutes * 60_000;
  let lastSave = t0;
  let lastEval = t0;
  let step = 0;
  let tokens = 0;
  let windowTokens = 0;
  let windowT = t0;
  let lossAcc = 0;
  let actAcc = 0;
  let accN = 0;
  // The budget is kept to within a step: the loop ends before a step that, taking as long as the
  // last one, would end past it.
  let lastStepMs = 0;
  try {
    while (Date.now() - t0 + lastStepMs < budgetMs && !o.signal?.aborted) {
      const stepT0 = Date.now();
      const frac = (Date.now() - t0) / budgetMs;
      const cur = l.curriculum(frac);
      const { batch, tokens: n } = packRows(l.draw(frac), rows, rowTokens);
      const lr = l.lr(frac);
      const [m] = await trainer.train({ loss: 'sft', batch: rows, seq: rowTokens }, [batch], { lr, weightDecay: 0.01 });
      step++;
      lastStepMs = Date.now() - stepT0;
      if (step === 1 && Date.now() - t0 > budgetMs) {
        // Not even one step fits: nothing is written to --out, and the message says what would.
        const stepMin = (Date.now() - t0) / 60_000;
        throw new TurnwiseError('invalid-input', `a warm-start budget of ${o.minutes} min is shorter than one training step here (the first took ${stepMin.toFixed(2)} min, building its graphs included)`, {
          hint: `give --minutes of at least ${Math.max(1, Math.ceil(stepMin * 4))} (a few steps; each later step is faster than the first); nothing was written to ${path.resolve(o.out)}`,
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
    writeFileAtomic(path.join(outDir, 'warmstart.json'), JSON.stringify(warmstartRecord(o, { steps: step, tokens, minutes: (Date.now() - t0) / 60_000, seed: l.seed, final }), null, 2) + '\n');
    // The whole curve travels with the checkpoint: the earlier phases' log, then this one's.
    writeFileAtomic(path.join(outDir, 'warmstart-log.jsonl'), priorLog(o) + log.map((row) => JSON.stringify(row) + '\n').join(''));
    return { out: path.resolve(o.out), steps: step, tokens, minutes: (Date.now() - t0) / 60_000, log };
  } finally {
    await trainer.dispose();
  }
}

/**
 * What warmstart.json records: this phase's numbers appended to the earlier phases' (a warm start
 * continued with --from keeps its history), and every workspace task used as a demonstration:
 * a training run never holds one of those out (splitTasks' `neverHeldOut`).
 */
export function warmstartRecord(o: WarmstartOptions, phase: Record<string, unknown>): Record<string, unknown> {
  const prev = priorRecord(o);
  const ids = new Set([
    ...(prev.demonstrationTaskIds ?? []),
    ...(o.workspaceCases ?? []).map((c) => c.taskId).filter((x): x is string => !!x),
    ...(o.episodes ?? []).map((e) => e.task.id),
  ]);
  return { phases: [...(prev.phases ?? []), phase], demonstrationTaskIds: [...ids].sort() };
}

/**
 * The folder a warm start starts from: the adapter it continues, else the checkpoint (--from),
 * else the model (--model); undefined for a fresh turnwise-tiny.
 */
export function startDir(o: Pick<WarmstartOptions, 'from' | 'model' | 'adapter'>): string | undefined {
  return o.adapter ?? o.from ?? o.model;
}

/**
 * The warmstart.json of the folder a phase starts from ({} for a fresh start or none recorded):
 * its phases continue, and the tasks it was warm-started on stay demonstrations.
 */
function priorRecord(o: Pick<WarmstartOptions, 'from' | 'model' | 'adapter'>): { phases?: unknown[]; demonstrationTaskIds?: string[] } {
  const dir = startDir(o);
  if (!dir) return {};
  try {
    const v = JSON.parse(fs.readFileSync(path.join(path.resolve(dir), 'warmstart.json'), 'utf8'));
    return v && typeof v === 'object' && !Array.isArray(v) ? v : {};
  } catch {
    return {};
  }
}

/** The warmstart-log.jsonl of the checkpoint a phase continues ('' when none), newline-terminated. */
function priorLog(o: Pick<WarmstartOptions, 'from' | 'model' | 'adapter'>): string {
  const dir = startDir(o);
  if (!dir) return '';
  try {
    const text = fs.readFileSync(path.join(path.resolve(dir), 'warmstart-log.jsonl'), 'utf8');
    return text && !text.endsWith('\n') ? `${text}\n` : text;
  } catch {
    return '';
  }
}

/**
 * Task ids a checkpoint was warm-started on (its warmstart.json); [] when the checkpoint has no
 * such file or it records no ids. A file that is there but cannot be read is an error: taken as
 * "none", the tasks the policy was trained on would land in the held-out split unnoticed.
 */
export function demonstrationTaskIds(checkpointDir: string): string[] {
  const file = path.resolve(checkpointDir, 'warmstart.json');
  if (!fs.lstatSync(file, { throwIfNoEntry: false })) return [];
  const hint = `restore ${file} from where the checkpoint came from, or delete it if the checkpoint was not warm-started on this workspace's tasks`;
  const text = readUserTextFile(file, 'warm-start record', { hint });
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new TurnwiseError('invalid-file', `the warm-start record ${file} is not valid JSON (${(e as Error).message})`, { hint });
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new TurnwiseError('invalid-file', `the warm-start record ${file} is not a JSON object`, { hint });
  const ids = (v as { demonstrationTaskIds?: unknown }).demonstrationTaskIds;
  if (ids === undefined) return [];
  if (!Array.isArray(ids) || ids.some((x) => typeof x !== 'string')) throw new TurnwiseError('invalid-file', `the warm-start record ${file}: "demonstrationTaskIds" must be an array of task ids (strings)`, { hint });
  return ids as string[];
}

/**
 * One training example of a fix case, as the warm start mixes them: a curriculum task with
 * probability `curriculum`, else a whole fix episode (85%; attempt loops in `loopShare` of them)
 * or just the fix turn in context. RL's replay term (train/replay.ts) draws the same way.
 */
export function drawDemo(r: () => number, c: FixCase, o: { curriculum: number; loopShare: number }): Demo {
  if (r() < o.curriculum) return curriculumTask(r, c);
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

