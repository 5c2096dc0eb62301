// Show Reward Panel: the reward panel, on a run when one is given (its id, or its Runs view node).
import { RewardPanel } from '../rewardPanel';
import type { RunsNode } from '../runsView';
import { command } from './context';
import { workspaceRoot } from './preconditions';

export const showRewardPanelCommand = command('turnwise.showRewardPanel', async (ctx, arg?: RunsNode | string) => {
  workspaceRoot('show the reward panel');
  const runId = typeof arg === 'string' ? arg : arg && 'run' in arg ? arg.run.runId : undefined;
  const panel = RewardPanel.show(ctx.extensionUri, { runDirs: ctx.runDirs }, ctx.tree.scans, runId);
  return { selected: panel.selected };
});
