// On-disk record shapes (docs/design.md "On-disk formats"). Every file carries
// `"schema": "turnwise/<kind>@<n>"` so a reader can refuse what it does not understand.

export const SCHEMA = {
  task: 'turnwise/task@1',
  trajectory: 'turnwise/trajectory@1',
  runConfig: 'turnwise/run-config@1',
  metrics: 'turnwise/metrics@1',
  checkpoint: 'turnwise/checkpoint@1',
  doctor: 'turnwise/doctor@1',
  runStatus: 'turnwise/run-status@1',
  runSplits: 'turnwise/run-splits@1',
  event: 'turnwise/event@1',
  evalResults: 'turnwise/eval-results@1',
} as const;

export type TaskSource = 'failing-tests' | 'mutation' | 'file';
export type Language = 'python' | 'javascript' | 'typescript' | 'go';

/** A test report format a runner can produce. */
export type ReportFormat = 'junit-xml' | 'jest-json' | 'go-test-json';

/** The tool that runs a task's tests (decides how report ids are built). */
export type RunnerKind = 'pytest' | 'node-test' | 'mocha' | 'jest' | 'go-test';

/** Where a mutation task's bug sits; never shown to the policy. */
export interface MutationInfo {
  file: string;
  /** tree-sitter node kind of the mutated node. */
  nodeKind: string;
  operator: string;
  /** Enclosing function or method (qualified), if any. */
  enclosing?: string;
  /** Original span as UTF-16 offsets into the original file, and its text. */
  span: { start: number; end: number; text: string };
  replacement: string;
}

export interface Task {
  schema: typeof SCHEMA.task;
  id: string;
  source: TaskSource;
  instruction: string;
  language: Language;
  /** Shell command that runs the tests; `{tests}` is replaced by selected test ids when present. */
  testCommand: string;
  reportFormat?: ReportFormat;
  runner?: RunnerKind;
  fail_to_pass: string[];
  pass_to_pass: string[];
  mutation?: MutationInfo;
  /** The workspace the task was made from; absent in task files written before it was recorded. */
  origin?: TaskOrigin;
}

/**
 * Where a task was made: the workspace folder (absolute) and the sha256 (hex) of each file the
 * task touches (a mutation's file, a failing task's test file), relative to it. A workspace that
 * does not hold these bytes cannot pose the task, so it is refused before any sandbox starts.
 */
export interface TaskOrigin {
  workspace: string;
  files: Record<string, string>;
}

/** Reward components stored with every trajectory (docs/security.md "The reward"). */
export interface RewardComponents {
  /** Fraction of fail_to_pass ∪ pass_to_pass tests that pass; NaN when the report was unusable. */
  passRate: number;
  /**
   * Mean of the fail_to_pass and the pass_to_pass pass rates (the one present when a task has a
   * single kind): what the reward is made of. Absent in trajectories scored before it existed.
   */
  testScore?: number;
  resolved: boolean;
  turns: number;
  maxTurns: number;
  formatError: boolean;
  efficiencyPenalty: number;
  formatPenalty: number;
  /** Turns that ran a command again for the output it already gave (core/repeats.ts). Absent in older trajectories. */
  repeats?: number;
  repeatPenalty?: number;
  /** R = testScore − efficiencyPenalty (resolved episodes only) − formatPenalty − repeatPenalty (NaN propagates). */
  reward: number;
  /** True when the agent changed a test file, runner configuration or dependencies (undone before scoring). */
  testsEdited?: boolean;
  /**
   * Why the episode counts as tampered with: an edit of the code under test that reaches into the
   * test machinery, or a report the test files cannot have produced (one reason a line). The
   * reward is then 0 and the episode not resolved.
   */
  tampered?: string;
  error?: string;
}

/**
 * One file a turn changed: its text before and after the turn (null = the file did not exist).
 * Texts over the cap are left out (`truncated`), so a trajectory line stays small; the viewer
 * builds its before/after documents from these, never from the user's files.
 */
export interface FileEdit {
  path: string;
  before: string | null;
  after: string | null;
  truncated?: boolean;
}

/** Token counts an OpenAI-compatible server reports for one request (its `usage` object). */
export interface TokenUsage {
  promptTokens: number;
  completionTokens: number;
}

export interface Turn {
  index: number;
  /** The command run (or `submit`); for a format error, the text that did not parse. */
  action: string;
  /**
   * A chat model's whole reply as it was sampled (its text; tokenIds holds its ids): `action` is
   * the command of its one bash block. Absent in the compact format, where the reply is the action.
   */
  reply?: string;
  /** bash intent signature tokens (credit/ast). */
  intentSignature?: string[];
  /** edit signature tokens: E:<path>::<def>, N:<kind>:<old>→<new>. */
  editSignature?: string[];
  /** observation text shown to the policy (capped). */
  observation: string;
  exitCode: number | null;
  durationMs: number;
  formatError?: string;
  tokenIds?: number[];
  logprobs?: number[];
  /** Tokens of the request and of the reply as the model's server counted them (an endpoint's `usage`). */
  usage?: TokenUsage;
  /** Files this turn changed (git status in the sandbox after the turn). */
  edits?: FileEdit[];
  /**
   * The observation was replayed: the same read-only tool command had run on an identical
   * workspace in this run (agent/cache.ts), so the command did not run again.
   */
  cached?: boolean;
  /**
   * The turn was inherited from the parent episode of a branch (Trajectory.branch): its command ran
   * again in this episode's sandbox but the model did not write it here, so it is not trained on
   * from this episode (the parent's turn carries the credit of both).
   */
  inherited?: boolean;
  /** What went wrong in this turn (agent/diagnosis.ts FAILURE_LABELS), when anything did. */
  labels?: string[];
  /**
   * The line of recovery feedback the observation ends with (TrainConfig.recoveryFeedback): the
   * command repeated one that had failed, or a submit came with no passing test since the last edit.
   */
  feedback?: string;
  /**
   * What the teacher pass measured on this turn against the task's reference fix (estimators that
   * need it: gear, a2tgpo; train/teacher.ts). `teacherLogprobs`: the log-prob of each of this turn's
   * sampled tokens under the same policy shown the reference fix (tokenIds order); `refBefore`,
   * `refAfter`: log P(the reference fix as the next action) given the history before this turn
   * and after it. Absent where the task has no reference or the pass could not place the turn.
   */
  reference?: { teacherLogprobs?: number[]; refBefore?: number; refAfter?: number };
  /** Per-turn advantage from the run's estimator, once computed (train trajectories only). */
  advantage?: number;
  /** The named terms of `advantage` (e.g. backbone, residual, tree). */
  advantageComponents?: Record<string, number>;
  /** An advantage per sampled token (tokenIds order) where the estimator gives them different credit (gear); `advantage` is their mean. */
  tokenAdvantages?: number[];
  /** A factor on the loss's clip range for this turn's tokens (a2tgpo); absent: 1. */
  clipScale?: number;
}

export interface Trajectory {
  schema: typeof SCHEMA.trajectory;
  taskId: string;
  groupId: string;
  trajId: string;
  checkpoint: string;
  turns: Turn[];
  testReport?: { passed: string[]; failed: string[]; errors?: string[] };
  reward: RewardComponents;
  /** RL iteration that produced it (0 = evaluation of the starting checkpoint). */
  iteration?: number;
  /** 'train' rollouts are trained on; 'heldout' ones only evaluated. */
  split?: 'train' | 'heldout';
  /** Sampling seed of the episode (reproducible with the same checkpoint). */
  seed?: number;
  startedAt?: string;
  durationMs?: number;
  /**
   * A branch of an earlier episode of its iteration (train/branching.ts): turns 0..at−1 replayed
   * from episode `parent`, the rest sampled. `shared`: the leading inherited turns whose
   * observation came back as the parent saw it (the state the two share; at most `at`).
   * `redrawn`: draws of turn `at` set aside because they repeated an action the group had
   * already written in that state (agent/episode.ts BranchPrefix); absent when none.
   */
  branch?: { parent: string; at: number; shared: number; redrawn?: number };
  /** Set when the sandbox or the runner failed: the episode is unscored (reward NaN). */
  failure?: string;
}
