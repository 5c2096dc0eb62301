// The id of every Turnwise command, in a module that imports nothing (no `vscode`), so a unit
// test can hold the list against package.json without an editor. The table in index.ts has a
// row for each of these and for nothing else (its type says so); each command lives in the file
// named after its id: `turnwise.startRun` in startRun.ts, `turnwise.runs.delete` in runs/delete.ts.
export const COMMAND_IDS = [
  'turnwise.startRun',
  'turnwise.stopRun',
  'turnwise.resumeRun',
  'turnwise.synthesizeTasks',
  'turnwise.evaluatePolicy',
  'turnwise.compareEvaluations',
  'turnwise.buildImages',
  'turnwise.pruneSandboxes',
  'turnwise.openTrajectory',
  'turnwise.showRewardPanel',
  'turnwise.checkEnvironment',
  'turnwise.showLog',
  // Runs view
  'turnwise.runs.refresh',
  'turnwise.runs.revealFolder',
  'turnwise.runs.delete',
  // Trajectory viewer
  'turnwise.trajectory.nextTurn',
  'turnwise.trajectory.previousTurn',
  'turnwise.trajectory.goToTurn',
  'turnwise.trajectory.showDiff',
] as const;

export type CommandId = (typeof COMMAND_IDS)[number];
