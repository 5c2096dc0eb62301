// The warm start's options, what it returns and logs, and the pure rules of its schedule (the
// learning rate at a point of it, a valid length). Shared by the compact and the chat warm start.
import { TurnwiseError } from '../core/errors';
import type { SessionSettings } from '../onnx';
import type { FixCase } from '../demonstrations/generated';
import type { LoraConfig } from '../policy/files/lora';
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
  /** Share of generated fix cases drawn from real Python source installed on this machine (demonstrations/real-source.ts); 0 (default): none. */
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

/** The learning rate at fraction `frac` of the schedule: a linear warm-up, then a cosine from `peak` to `floor`. */
export function lrAt(frac: number, o: { peak: number; floor: number; warmup: number }): number {
  if (frac < o.warmup) return o.peak * Math.max(0.02, frac / o.warmup);
  const p = Math.min(1, (frac - o.warmup) / Math.max(1e-9, 1 - o.warmup));
  return o.floor + (o.peak - o.floor) * 0.5 * (1 + Math.cos(Math.PI * p));
}

/** A warm start's length: a positive whole number of steps, or minutes > 0, or both (the minutes then a limit). */
export function checkBudget(o: Pick<WarmstartOptions, 'steps' | 'minutes'>): void {
  if (o.steps !== undefined && !(Number.isInteger(o.steps) && o.steps > 0)) throw new TurnwiseError('invalid-input', `the warm-start schedule must be a whole number of steps > 0, got ${o.steps}`);
  if (o.minutes !== undefined && !(o.minutes > 0)) throw new TurnwiseError('invalid-input', `the warm-start budget must be > 0 minutes, got ${o.minutes}`);
  if (o.steps === undefined && o.minutes === undefined) throw new TurnwiseError('invalid-input', 'a warm start needs a length: give --steps N (the schedule) or --minutes M (a budget the schedule is planned to fill)');
}

/** Steps timed before a schedule is planned from a time budget (the first, which builds the graphs, left out). */
export const PLAN_AFTER_STEPS = 3;

