// Refresh Runs (the Runs view's title bar).
import { command } from '../context';

export const runsRefreshCommand = command('turnwise.runs.refresh', async (ctx) => ctx.tree.refresh());
