/**
 * The tasks layer: task sources (mutation synthesis, failing tests, task files), test runners
 * and report parsers, and the reward after an episode.
 *
 * ```ts
 * import { synthesizeMutationTasks, readTaskFile, collectOriginals, scoreEpisode } from './';
 *
 * const { tasks, summary } = await synthesizeMutationTasks({ workspace, pool, max: 20, seed: 1 });
 * const tasks2 = readTaskFile('tasks.jsonl');             // throws listing every bad line
 * const originals = collectOriginals(workspace);          // once per snapshot
 * // after an episode, in its own sandbox (started from the same snapshot):
 * const { reward, testReport, restored } = await scoreEpisode(sb, task, { originals, turns, maxTurns, formatError });
 * // reward: RewardComponents; reward.reward is NaN when the report was unusable (leave it out of baselines)
 * ```
 *
 * A task's `testCommand` must write its report to `$TURNWISE_REPORT` (= /tmp/turnwise/report);
 * `reportFormat` and `runner` say how to read it (runners.ts builds these for detected suites).
 */
export { buildInstruction, redactLocations, type FailingTest } from './instruction';
export {
  MUTATION_OPERATORS,
  candidateDiff,
  dedupeCandidates,
  mutationCandidates,
  orderCandidates,
  type MutationCandidate,
  type MutationOperator,
} from './mutate';
export {
  parseReport,
  splitReportParts,
  type CollectionError,
  type JunitFlavor,
  type TestOutcome,
  type TestReport,
  type TestResult,
} from './report';
export {
  DEFAULT_REWARD_WEIGHTS,
  computeReward,
  outcomesOf,
  restoreTestFiles,
  runTests,
  scoreEpisode,
  type EpisodeScore,
  type RestoreResult,
  type RewardWeights,
  type RunTestsResult,
  type ScoreOptions,
} from './reward';
export {
  DEFAULT_REPORT_PATH,
  RUNNER_KINDS,
  commandForTests,
  detectRunner,
  runnerCommand,
  type RunnerOverride,
  type TestRunner,
} from './runners';
export {
  DROP_REASONS,
  classifyMutant,
  failingTestTasks,
  synthesizeMutationTasks,
  type DropReason,
  type FailingOptions,
  type SynthOptions,
  type SynthResult,
  type SynthSummary,
} from './synth';
export { checkTaskFile, parseTaskFile, readTaskFile, validateTask, writeTaskFile, type TaskFileCheck } from './taskfile';
export { collectOriginals, isMutableSource, isTestInfraFile, type ScoringOriginals } from './testfiles';
