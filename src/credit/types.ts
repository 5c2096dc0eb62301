// The data every advantage estimator works on (docs/credit-assignment.md "Turn rows"): one row per turn, in
// batch order (trajectories in order of first appearance, turns ascending).

export interface TurnRow {
  /** Task id: rows with the same promptId form a group (the G rollouts of one task). */
  promptId: string;
  trajId: string;
  /** Turn index within the trajectory (ascending). */
  turn: number;
  /** The bash command of this turn. */
  bash: string;
  /** Episode reward R of the trajectory (same on every row of it); NaN when the sandbox failed. */
  score: number;
  /** Intent signature of `bash` (src/ast/bash.ts); a3/turnwise need it, see attachSignatures. */
  signature?: string[];
  /** Edit tokens of the turn: E:<path>::<def>, N:<kind>:<old>→<new> (turnwise only). */
  editSig?: string[];
  /** Observation text the policy saw before this turn (gigpo's anchor state); '' at turn 0. */
  observation?: string;
  /**
   * The part of `score` this turn's own action cost: the format penalty on the episode's first
   * unparsable turn, λ_rep on each repeated turn (core/repeats.ts). Already inside `score`;
   * turnwise charges it to this turn alone (`penalties: turn`), the other estimators ignore it.
   */
  penalty?: number;
  /** What the teacher pass measured on this turn (gear, a2tgpo; src/train/teacher.ts); absent where the task has no reference fix. */
  reference?: TurnReference;
}

/**
 * A turn seen against its task's reference fix (the mutation's original text and place). The
 * teacher is the policy itself with the reference fix added to the task it is shown.
 */
export interface TurnReference {
  /** Per action token: the log-prob the student gave the token it sampled (its own prompt). */
  studentLogp?: number[];
  /** Per action token: the teacher's log-prob of the same token (the same history, the reference fix in the task). */
  teacherLogp?: number[];
  /** log P(the reference fix as the next action) given the history before this turn, and given the history after it. */
  refBefore?: number;
  refAfter?: number;
}

/** Parameter values an estimator accepts: numbers, number lists (scopes) or enum strings (scale). */
export type ParamValue = number | string | number[];
export type Params = Record<string, ParamValue>;

export interface EstimatorContext {
  /**
   * Intent signature of commands joined by "\n" (createJoinedSigner in src/ast/bash.ts). a3
   * signs its multi-command scope snippets with it; when absent, a snippet's signature is the
   * concatenation of its rows' `signature`s (the same unless a command continues onto the next).
   */
  signJoined?: (commands: readonly string[]) => string[];
}

export interface CreditDiagnostics {
  /** Fraction of groups whose (non-NaN) scores all equal. */
  frac_reward_zero_std: number;
  /** Fraction of (promptId, turn, scope) clustering cells with at least two clusters; null when the estimator does not cluster. */
  frac_cells_multi_cluster: number | null;
  /** Mean over rows of the tree gate S / (S + p + ε); null when the estimator has no tree term. */
  mean_tree_gate: number | null;
  /** Rows whose score is NaN (excluded, advantage 0). */
  rows_nan: number;
  /**
   * Share of scored trajectories the estimator could not read against a reference fix (a task with
   * none, such as a failing-test task, or a turn the teacher pass did not score): they took the
   * group baseline alone. Only estimators that use the reference report it.
   */
  frac_reference_fallback?: number;
}

export interface EstimatorResult {
  /** One advantage per input row, same order. */
  advantages: number[];
  /** Named per-row terms the advantage is made of (e.g. backbone, residual, tree, gate). */
  components: Record<string, number[]>;
  /** Per-row cluster labels, one list per scope (key "scope<s>"); labels are comparable only within a (promptId, turn) cell. */
  clusters?: Record<string, number[]>;
  /**
   * Per row, an advantage per action token where the estimator gives tokens of one turn different
   * credit (gear); null or absent: every token takes the row's advantage. A row's `advantages`
   * entry is then the mean of its tokens'.
   */
  tokenAdvantages?: (number[] | null)[];
  /** Per row, a factor on the loss's clip range (a2tgpo's adaptive turn-level clipping); absent: 1. */
  clipScale?: number[];
  diagnostics: CreditDiagnostics;
}

export type EstimatorFn = (rows: readonly TurnRow[], params: Params, ctx: EstimatorContext) => EstimatorResult;

export interface EstimatorSpec {
  name: string;
  summary: string;
  /** Every parameter with its default; params not listed here are rejected. */
  defaults: Params;
  /** For enum parameters: the allowed values. */
  choices?: Record<string, readonly string[]>;
  /**
   * What the rows must carry beyond the commands and scores, from the run's teacher pass before
   * the estimator runs (TurnRow.reference): the teacher's log-probs of the sampled tokens
   * (`teacher`), the reference fix's log-probability before and after each turn (`gain`).
   */
  needs?: { teacher: boolean; gain: boolean };
  fn: EstimatorFn;
}
