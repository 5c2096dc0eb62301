// Open Trajectory…: a trajectory (a Runs view node, a reference, or picked run › iteration ›
// trajectory) in the trajectory panel, at a turn when one is given.
import * as vscode from 'vscode';
import { listIterations, type TrajectoryRef } from '../model/runIndex';
import { formatSigned, pct } from '../model/turnView';
import { trajectoryRef, type RunsNode } from '../runsView';
import { TrajectoryPanel } from '../trajectoryPanel';
import { command } from './context';
import { pickRun } from './pickRun';

export const openTrajectoryCommand = command('turnwise.openTrajectory', async (ctx, arg?: RunsNode | TrajectoryRef, turn?: number) => {
  let ref: TrajectoryRef | undefined;
  if (arg && 'kind' in arg && arg.kind === 'trajectory') ref = trajectoryRef(arg);
  else if (arg && 'trajId' in arg) ref = arg;
  else {
    const run = await pickRun(() => true, 'Open Trajectory: run', 'there are no runs in this workspace yet.');
    if (!run) return undefined;
    const its = listIterations(run.dir).filter((i) => i.trainFile || i.heldoutFile);
    const it = await vscode.window.showQuickPick(
      [...its].reverse().map((i) => ({
        label: `Iteration ${i.iteration}`,
        description: i.metrics
          ? `pass ${pct(i.metrics['tests/pass_rate'] as number)} · reward ${formatSigned(i.metrics['reward/mean'] as number, 2)}`
          : 'in progress',
        it: i,
      })),
      { title: 'Open Trajectory: iteration' },
    );
    if (!it) return undefined;
    const items: Array<vscode.QuickPickItem & { ref: TrajectoryRef }> = [];
    for (const [split, file] of [
      ['train', it.it.trainFile],
      ['heldout', it.it.heldoutFile],
    ] as const) {
      if (!file) continue;
      for (const s of (await ctx.tree.scans.scan(file)).summaries) {
        items.push({
          label: s.trajId,
          description: `${s.taskId}${split === 'heldout' ? ' (held-out)' : ''}`,
          detail: s.failure
            ? `unscored: ${s.failure}`
            : `reward ${formatSigned(s.reward, 2)} · pass ${pct(s.passRate)} · ${s.turns} turns${s.resolved ? ' · resolved' : ''}${s.tampered ? ' · tampered' : ''}`,
          ref: { runDir: run.dir, iteration: it.it.iteration, split, trajId: s.trajId, offset: s.offset, length: s.length },
        });
      }
    }
    const t = await vscode.window.showQuickPick(items, { title: 'Open Trajectory', matchOnDescription: true, matchOnDetail: true });
    ref = t?.ref;
  }
  if (!ref) return undefined;
  await TrajectoryPanel.show(ctx.extensionUri, ctx.editors, ref, turn);
  void vscode.commands.executeCommand('setContext', 'turnwise.trajectoryOpen', true);
  return ref;
});
