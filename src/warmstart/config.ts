// The warm start's configuration in one place: every setting with a one-line meaning
// (WarmstartConfig), their defaults (WARMSTART_DEFAULTS, where the compact and the chat warm start
// differ kept apart by kind), the range of each number, and resolveWarmstartConfig, which fills
// and checks them. `turnwise warmstart` maps its flags onto these fields (src/cli); the warm start
// itself (run.ts, chat.ts, loop.ts) reads the resolved config. Also what a warm start returns and
// logs, and the pure rules of its schedule (the learning rate at a point of it, a valid length).
import { TurnwiseError } from '../core/errors';
import { RUNS_DIR } from '../core/run';
import type { SessionSettings } from '../onnx';
import type { FixCase } from '../demonstrations/fix-cases';
import { defaultSourceRoots } from '../demonstrations/real-source';
import type { LoraConfig } from '../policy/files/lora';
import type { Task, Trajectory } from '../core/schema';

/**
 * A warm start's settings, resolved. The kind of warm start (WarmstartKind) picks the defaults of
 * a few of them; some are read by one kind only, as their line says. The last group names where
 * demonstrations come from: `turnwise warmstart` reads them and hands warmstart() what it found.
 */
export interface WarmstartConfig {
  /** Where the warm-started checkpoint is written (replaced atomically at each save). */
  out: string;
  /** Checkpoint whose warm start this continues (its weights and optimizer state, or an adapter folder); absent: see `model`. */
  from?: string;
  /** Model folder a new warm start starts from (Hugging Face or Turnwise; a chat model is trained in its chat format); absent with no `from`: a fresh turnwise-tiny from `seed`. */
  model?: string;
  /** A LoRA adapter folder over `model` to continue training (its optimizer state too, when saved). */
  adapter?: string;
  /** A fresh LoRA adapter (PEFT's fields) trained on `model` instead of the whole model; chat models only. */
  lora?: LoraConfig;
  /** Length of the learning-rate and curriculum schedule in optimizer steps, after which the warm start ends; absent: planned from `minutes` at the speed of the first steps (recorded in warmstart.json as `schedule_steps`). */
  steps?: number;
  /** Wall-clock limit in minutes with `steps`, the budget the schedule is planned to fill without; absent: no limit with `steps`, the default budget without. */
  minutes?: number;
  /** Seed of the generated cases, of their draws and of a fresh model's weights. */
  seed: number;
  /** Packed rows per optimizer step. */
  rows: number;
  /** Tokens per packed row: a longer demonstration is left out (compact) or cut after the last reply that fits (chat, whose rows are at most its context). */
  rowTokens: number;
  /** Peak learning rate, reached at the end of the warm-up. */
  peakLr: number;
  /** Learning rate at the end of the cosine decay; absent: `floorLrShare` (WARMSTART_DEFAULTS) of `peakLr`. */
  floorLr: number;
  /** Fraction of the schedule spent warming the learning rate up (linearly). */
  warmupFrac: number;
  /** Weight of prompt tokens in the loss (action tokens weigh 1). */
  promptWeight: number;
  /** Share of copy-curriculum tasks at the start of the schedule, falling linearly to `curriculumEnd`; compact only (a chat model has no curriculum). */
  curriculumStart: number;
  /** Share of copy-curriculum tasks at the end of the schedule; compact only. */
  curriculumEnd: number;
  /** Share of examples drawn from the resolved episodes of evaluation results, when there are any (1: nothing else). */
  episodeShare: number;
  /** Share of fix episodes drawn from the workspace's recorded cases, when there are any. */
  workspaceShare: number;
  /** Share of fix episodes written as attempt loops (demonstrations/forms.ts loopEpisode); 0: none. */
  loopShare: number;
  /** Share of fix episodes and curriculum tasks in the numbered form (`tw-suspects -n`, `tw-edit K OLD NEW`: numberedEpisode); compact only. */
  numberedShare: number;
  /** Share of numbered draws in the candidate form (`tw-cands K`, `tw-apply K J`: candidateEpisode) where the case has one; compact only. */
  candsShare: number;
  /** Share of candidate-form draws in the walk form (`tw-apply K J` down the ranking, no `tw-cands`: walkEpisode) where the case has one; compact only. */
  walkShare: number;
  /** Share of walk draws whose case's ranking is redrawn with the bug at suspect 2 to 5 (withBugRanked); compact only. */
  lowerShare: number;
  /**
   * Fix episodes longer than a prompt can hold: `turns` trains each later action after the prompt
   * the episode loop would give it (encodeDemonstrationTurns); `drop` leaves such an episode out
   * (how phases 1-11 of turnwise-tiny were trained). Compact only.
   */
  longEpisodes: 'turns' | 'drop';
  /** No sed-form examples at all: every example in the numbered (or candidate) form, a case without one drawn again (drawDemonstration); compact only. */
  noSed: boolean;
  /** Share of generated fix cases drawn from real Python source installed on this machine (demonstrations/real-source.ts); compact only. */
  realShare: number;
  /** Folders of Python source for `realShare`; absent: the standard library and dist-packages found under /usr/lib and /usr/local/lib. */
  sourceRoots: string[];
  /** Synthetic fix cases generated up front (reused with fresh random phrasing). */
  poolSize: number;
  /** Real-source cases made up front when `realShare` > 0. */
  realPoolSize: number;
  /** Tokens a reply may take: a chat model's prompt budget and its evaluation's replies. */
  maxActionTokens: number;
  /** Held-out synthetic cases evaluated (exact fix, simulated episodes). */
  evalCases: number;
  /** Minutes between evaluations (each a log row); 0: after every step. */
  evalEveryMin: number;
  /** Minutes between saves of `out` (it is saved at the end in any case). */
  checkpointEveryMin: number;
  /** Workspace whose train-split mutation tasks are recorded in sandboxes as fix demonstrations. */
  workspace?: string;
  /** Most mutation tasks synthesized from `workspace`. */
  maxTasks: number;
  /** Evaluation results files (`turnwise eval --out`) whose resolved episodes are demonstrations. */
  episodeFiles: string[];
  /** The task file the episodes' evaluation ran on (or `run`). */
  tasksFile?: string;
  /** The run whose tasks (and split) the episodes ran on (or `tasksFile`). */
  run?: string;
  /** Where `run` is looked for. */
  runsRoot: string;
  /** Seed of the task synthesis and split a training run will use (its taskSeed): its held-out tasks never become demonstrations. */
  taskSeed: number;
  /** Fraction of tasks a training run will hold out (its heldoutFraction), left out of the demonstrations. */
  heldoutFraction: number;
}

/**
 * The kind of warm start, which picks the defaults where they differ: turnwise-tiny in the compact
 * format (run.ts), a chat model trained whole, or a LoRA adapter on a chat model (chat.ts).
 */
export type WarmstartKind = 'compact' | 'chat' | 'chat-lora';

/** The settings whose default depends on the kind of warm start. */
export type KindSetting = 'rows' | 'rowTokens' | 'peakLr' | 'promptWeight' | 'poolSize' | 'evalCases';

/** Settings without a default: where it starts and writes, the schedule's length in steps, the sources named. */
type NoDefault = 'out' | 'from' | 'model' | 'adapter' | 'lora' | 'steps' | 'workspace' | 'tasksFile' | 'run';

/** Settings whose default is computed: `floorLr` (from `peakLr`) and `sourceRoots` (found on this machine). */
type ComputedDefault = 'floorLr' | 'sourceRoots';

export type WarmstartDefaults = Required<Omit<WarmstartConfig, NoDefault | ComputedDefault | KindSetting>> & {
  /** `floorLr` when not given, as a share of `peakLr`. */
  floorLrShare: number;
  /** The defaults that differ between the kinds of warm start. */
  byKind: Record<WarmstartKind, Pick<WarmstartConfig, KindSetting>>;
};

/** Every default of a warm start; `minutes` is the budget when no `steps` is given. */
export const WARMSTART_DEFAULTS: WarmstartDefaults = {
  minutes: 70,
  seed: 0,
  floorLrShare: 0.05,
  warmupFrac: 0.04,
  curriculumStart: 0.7,
  curriculumEnd: 0.2,
  episodeShare: 1,
  workspaceShare: 0.2,
  loopShare: 0,
  numberedShare: 0,
  candsShare: 0,
  walkShare: 0,
  lowerShare: 0,
  longEpisodes: 'turns',
  noSed: false,
  realShare: 0,
  realPoolSize: 2000,
  maxActionTokens: 128,
  evalEveryMin: 5,
  checkpointEveryMin: 5,
  maxTasks: 32,
  episodeFiles: [],
  runsRoot: RUNS_DIR,
  taskSeed: 0,
  heldoutFraction: 0.25,
  byKind: {
    // turnwise-tiny: rows of 640 tokens (its context is 1,024), prompts in the loss at 0.3.
    compact: { rows: 8, rowTokens: 640, peakLr: 2e-3, promptWeight: 0.3, poolSize: 6000, evalCases: 64 },
    // A chat model: rows of up to 2,048 tokens, no loss on prompts, a rate for a whole model...
    chat: { rows: 4, rowTokens: 2048, peakLr: 2e-5, promptWeight: 0, poolSize: 2000, evalCases: 16 },
    // ...and one ten times higher for a LoRA adapter.
    'chat-lora': { rows: 4, rowTokens: 2048, peakLr: 2e-4, promptWeight: 0, poolSize: 2000, evalCases: 16 },
  },
};

/** The values a number setting may take: inclusive bounds (`min` exclusive with `minExclusive`), whole numbers with `integer`. */
export interface SettingRange {
  min?: number;
  max?: number;
  minExclusive?: boolean;
  integer?: boolean;
}

/** The settings that are numbers. */
export type NumberSetting = {
  [K in keyof WarmstartConfig]-?: NonNullable<WarmstartConfig[K]> extends number ? K : never;
}[keyof WarmstartConfig];

const SHARE: SettingRange = { min: 0, max: 1 };
const SEED: SettingRange = { min: 0, max: 4294967295, integer: true };

/** The range of every number setting, checked by resolveWarmstartConfig and by the flags that set them. */
export const WARMSTART_RANGES: Record<NumberSetting, SettingRange> = {
  steps: { min: 1, max: 10_000_000, integer: true },
  minutes: { min: 0, minExclusive: true, max: 10_000 },
  seed: SEED,
  rows: { min: 1, max: 256, integer: true },
  rowTokens: { min: 64, max: 131_072, integer: true },
  peakLr: { min: 0, minExclusive: true, max: 1 },
  floorLr: { min: 0, max: 1 },
  warmupFrac: SHARE,
  promptWeight: SHARE,
  curriculumStart: SHARE,
  curriculumEnd: SHARE,
  episodeShare: SHARE,
  workspaceShare: SHARE,
  loopShare: SHARE,
  numberedShare: SHARE,
  candsShare: SHARE,
  walkShare: SHARE,
  lowerShare: SHARE,
  realShare: SHARE,
  poolSize: { min: 1, max: 1_000_000, integer: true },
  realPoolSize: { min: 1, max: 1_000_000, integer: true },
  maxActionTokens: { min: 8, max: 4096, integer: true },
  evalCases: { min: 1, max: 100_000, integer: true },
  evalEveryMin: { min: 0, max: 1_000_000 },
  checkpointEveryMin: { min: 0, max: 1_000_000 },
  maxTasks: { min: 1, integer: true },
  taskSeed: SEED,
  heldoutFraction: { min: 0, max: 0.9 },
};

/** What a warm start brings besides its settings: the demonstrations found, the runtime's settings, and its hooks. */
export interface WarmstartInputs {
  /** Resolved episodes of evaluation results (selectEpisodes), with their tasks: demonstrations in the model's format. */
  episodes?: { trajectory: Trajectory; task: Task }[];
  /** Fix cases recorded from a workspace (train split only), drawn in `workspaceShare` of fix episodes. */
  workspaceCases?: FixCase[];
  /** ONNX Runtime settings of the trainer and the evaluation's policy. */
  settings?: SessionSettings;
  onLog?: (row: WarmstartLogRow) => void;
  signal?: AbortSignal;
}

/** A warm start's settings as given: `out`, and any others (resolveWarmstartConfig fills the rest). */
export type WarmstartSettings = Partial<WarmstartConfig> & Pick<WarmstartConfig, 'out'>;

/** What warmstart() takes: settings as given, and its inputs. */
export type WarmstartOptions = WarmstartSettings & WarmstartInputs;

/** A resolved warm start: its settings, every one set, and its inputs. */
export type ResolvedWarmstart = WarmstartConfig & WarmstartInputs;

/** The keys of WarmstartInputs (a key added there and not here does not compile). */
const INPUTS: Record<keyof WarmstartInputs, true> = { episodes: true, workspaceCases: true, settings: true, onLog: true, signal: true };

const invalid = (msg: string) =>
  new TurnwiseError('invalid-input', msg, { hint: 'see docs/configuration.md, "Warm start", for the settings and their ranges' });

/** `given` with its absent settings filled for a warm start of `kind`; throws naming a setting out of its range. */
export function resolveWarmstartConfig(given: WarmstartSettings, kind: WarmstartKind = 'compact'): WarmstartConfig {
  const { byKind, floorLrShare, ...shared } = WARMSTART_DEFAULTS;
  // The settings `given` sets: not its absent ones, nor the inputs a WarmstartOptions carries beside them.
  const set = Object.fromEntries(Object.entries(given).filter(([k, v]) => v !== undefined && !(k in INPUTS))) as WarmstartSettings;
  const peakLr = set.peakLr ?? byKind[kind].peakLr;
  const c: WarmstartConfig = {
    ...shared,
    ...byKind[kind],
    episodeFiles: [...shared.episodeFiles],
    floorLr: peakLr * floorLrShare,
    // Looked for only when real source is asked for.
    sourceRoots: set.sourceRoots ?? ((set.realShare ?? shared.realShare) > 0 ? defaultSourceRoots() : []),
    ...set,
  };
  // The default budget only when no schedule is given: with steps, minutes are a limit.
  if (set.minutes === undefined && set.steps !== undefined) delete c.minutes;
  checkBudget(c);
  for (const [key, range] of Object.entries(WARMSTART_RANGES) as [NumberSetting, SettingRange][]) {
    const v = c[key];
    if (v !== undefined && !inRange(v, range))
      throw invalid(`warm-start setting "${key}" must be ${describeRange(range)}, got ${JSON.stringify(v)}`);
  }
  for (const key of ['out', 'from', 'model', 'adapter', 'workspace', 'tasksFile', 'run', 'runsRoot'] as const) {
    if (c[key] !== undefined && typeof c[key] !== 'string')
      throw invalid(`warm-start setting "${key}" must be a path, got ${JSON.stringify(c[key])}`);
  }
  if (!c.out) throw invalid('a warm start needs a folder to write its checkpoint to ("out")');
  for (const key of ['sourceRoots', 'episodeFiles'] as const) {
    if (!Array.isArray(c[key]) || c[key].some((x) => typeof x !== 'string'))
      throw invalid(`warm-start setting "${key}" must be a list of paths, got ${JSON.stringify(c[key])}`);
  }
  if (typeof c.noSed !== 'boolean') throw invalid(`warm-start setting "noSed" must be true or false, got ${JSON.stringify(c.noSed)}`);
  if (c.longEpisodes !== 'turns' && c.longEpisodes !== 'drop')
    throw invalid(`warm-start setting "longEpisodes" must be "turns" or "drop", got ${JSON.stringify(c.longEpisodes)}`);
  return c;
}

function inRange(v: unknown, r: SettingRange): boolean {
  if (typeof v !== 'number' || !Number.isFinite(v) || (r.integer && !Number.isInteger(v))) return false;
  if (r.min !== undefined && (r.minExclusive ? v <= r.min : v < r.min)) return false;
  return r.max === undefined || v <= r.max;
}

/** A range in words: `an integer in [1, 256]`, `a number in (0, 1]`, `an integer ≥ 1`. */
export function describeRange(r: SettingRange): string {
  const kind = r.integer ? 'an integer' : 'a number';
  if (r.min !== undefined && r.max !== undefined) return `${kind} in ${r.minExclusive ? '(' : '['}${r.min}, ${r.max}]`;
  if (r.min !== undefined) return `${kind} ${r.minExclusive ? '>' : '≥'} ${r.min}`;
  return r.max !== undefined ? `${kind} ≤ ${r.max}` : kind;
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
  if (o.steps !== undefined && !(Number.isInteger(o.steps) && o.steps > 0))
    throw new TurnwiseError('invalid-input', `the warm-start schedule must be a whole number of steps > 0, got ${o.steps}`);
  if (o.minutes !== undefined && !(o.minutes > 0))
    throw new TurnwiseError('invalid-input', `the warm-start budget must be > 0 minutes, got ${o.minutes}`);
  if (o.steps === undefined && o.minutes === undefined)
    throw new TurnwiseError(
      'invalid-input',
      'a warm start needs a length: give --steps N (the schedule) or --minutes M (a budget the schedule is planned to fill)',
    );
}

/** Steps timed before a schedule is planned from a time budget (the first, which builds the graphs, left out). */
export const PLAN_AFTER_STEPS = 3;
