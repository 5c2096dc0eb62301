// Compare Evaluations: the reward panel's evaluations view, results files compared (a PASS@(k,T)
// heatmap per model).
import * as path from 'node:path';
import { RewardPanel } from '../rewardPanel';
import { command } from './context';
import { workspaceRoot } from './preconditions';

export const compareEvaluationsCommand = command('turnwise.compareEvaluations', async (ctx, files?: string[]) => {
  workspaceRoot('compare evaluations');
  const chosen = Array.isArray(files) ? [...new Set(files.filter((f) => typeof f === 'string').map((f) => path.resolve(f)))] : undefined;
  const panel = RewardPanel.showEvaluations(ctx.extensionUri, { runDirs: ctx.runDirs }, ctx.tree.scans, chosen);
  return { view: panel.view, selected: panel.selectedEvaluations };
});
