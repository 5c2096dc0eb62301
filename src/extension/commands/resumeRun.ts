// Resume Run: a run that stopped, failed or was interrupted (picked, or its Runs view node) goes on
// from its last complete iteration.
import * as path from 'node:path';
import type { RunsNode } from '../runsView';
import { command } from './context';
import { pickRun } from './pickRun';
import { dockerReachable, noActiveRun, workspaceRoot } from './preconditions';

export const resumeRunCommand = command('turnwise.resumeRun', async (ctx, arg?: RunsNode | string) => {
  const root = workspaceRoot('resume a run');
  noActiveRun(ctx, 'resume a run');
  let dir: string | undefined;
  if (typeof arg === 'string') dir = arg;
  else if (arg && arg.kind === 'run') dir = arg.run.dir;
  else
    dir = (
      await pickRun(
        (r) => r.state !== 'finished' && r.state !== 'running',
        'Resume Run',
        'there is no run to resume: every run of this workspace finished (or none was started).',
      )
    )?.dir;
  if (!dir) return undefined;
  await dockerReachable('resume a run');
  // A resume takes the run's own workspace and settings from its config.json (the CLI refuses --workspace with it).
  return ctx.controller.startTraining(`resuming ${path.basename(dir)}`, ['train', '--resume', dir], root);
});
