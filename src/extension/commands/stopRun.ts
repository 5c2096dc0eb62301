// Stop Run: the run going in this window is stopped (the CLI removes its containers).
import { CannotRun } from './cannotRun';
import { command } from './context';

export const stopRunCommand = command('turnwise.stopRun', async (ctx) => {
  if (!(await ctx.controller.stop())) throw new CannotRun('there is no run to stop: no training run is going in this window.');
  return true;
});
