// The Turnwise commands: one table, a row per command id (ids.ts), registered in one loop. Each
// command lives in the file named after its id and checks first whether it can run here; when it
// cannot, it says why and what to do (no folder open, a run already going, Docker unreachable…:
// cannotRun.ts, preconditions.ts). The `when` clauses in package.json hide them from the palette
// where they make no sense.
import * as vscode from 'vscode';
import { buildImagesCommand } from './buildImages';
import { guarded } from './cannotRun';
import { checkEnvironmentCommand } from './checkEnvironment';
import { compareEvaluationsCommand } from './compareEvaluations';
import type { Command, CommandContext } from './context';
import { evaluatePolicyCommand } from './evaluatePolicy';
import type { CommandId } from './ids';
import { openTrajectoryCommand } from './openTrajectory';
import { pruneSandboxesCommand } from './pruneSandboxes';
import { resumeRunCommand } from './resumeRun';
import { runsDeleteCommand } from './runs/delete';
import { runsRefreshCommand } from './runs/refresh';
import { runsRevealFolderCommand } from './runs/revealFolder';
import { showLogCommand } from './showLog';
import { showRewardPanelCommand } from './showRewardPanel';
import { startRunCommand } from './startRun';
import { stopRunCommand } from './stopRun';
import { synthesizeTasksCommand } from './synthesizeTasks';
import { trajectoryGoToTurnCommand } from './trajectory/goToTurn';
import { trajectoryNextTurnCommand } from './trajectory/nextTurn';
import { trajectoryPreviousTurnCommand } from './trajectory/previousTurn';
import { trajectoryShowDiffCommand } from './trajectory/showDiff';

export type { CommandContext } from './context';

/** Every command, by id: a row for each id of ids.ts and no other (the type checks both, and that a row's command has its id). */
const COMMANDS: { readonly [Id in CommandId]: Command<Id> } = {
  'turnwise.startRun': startRunCommand,
  'turnwise.stopRun': stopRunCommand,
  'turnwise.resumeRun': resumeRunCommand,
  'turnwise.synthesizeTasks': synthesizeTasksCommand,
  'turnwise.evaluatePolicy': evaluatePolicyCommand,
  'turnwise.compareEvaluations': compareEvaluationsCommand,
  'turnwise.buildImages': buildImagesCommand,
  'turnwise.pruneSandboxes': pruneSandboxesCommand,
  'turnwise.openTrajectory': openTrajectoryCommand,
  'turnwise.showRewardPanel': showRewardPanelCommand,
  'turnwise.checkEnvironment': checkEnvironmentCommand,
  'turnwise.showLog': showLogCommand,
  // Runs view
  'turnwise.runs.refresh': runsRefreshCommand,
  'turnwise.runs.revealFolder': runsRevealFolderCommand,
  'turnwise.runs.delete': runsDeleteCommand,
  // Trajectory viewer
  'turnwise.trajectory.nextTurn': trajectoryNextTurnCommand,
  'turnwise.trajectory.previousTurn': trajectoryPreviousTurnCommand,
  'turnwise.trajectory.goToTurn': trajectoryGoToTurnCommand,
  'turnwise.trajectory.showDiff': trajectoryShowDiffCommand,
};

export function registerCommands(ctx: CommandContext): vscode.Disposable[] {
  const disposables: vscode.Disposable[] = [];
  for (const [id, { run }] of Object.entries(COMMANDS)) disposables.push(registerCommand(ctx, id, run));
  return disposables;
}

/** One command, its handler given the context and the caller's arguments, its failures shown (guarded). */
function registerCommand(ctx: CommandContext, id: string, run: Command['run']): vscode.Disposable {
  return vscode.commands.registerCommand(
    id,
    guarded(ctx, (...args: unknown[]) => run(ctx, ...(args as never[]))),
  );
}
