// Check Environment: the doctor's checks (Docker, ONNX Runtime, grammars…), the model and LoRA
// block a run would train, and the memory plan at the current settings, reported in the output
// channel and a notification. Extension-host tests call runEnvironmentCheck through the
// extension's exports.
import * as vscode from 'vscode';
import { formatError } from '../../core/errors';
import { services } from '../lazy';
import { config } from '../config';
import { launchConfig } from '../model/launchConfig';
import { command } from './context';

/** The environment report, or undefined when the check itself failed (said in a message). */
export async function runEnvironmentCheck(out: vscode.LogOutputChannel) {
  const dockerHost = config.dockerHost();
  try {
    const { runDoctor, formatDoctorReport, reapAtStartup, modelChecks, memoryPlanCheck, doctorReport } = services();
    // Sandboxes left behind by a Turnwise process that died are removed when Docker is first used.
    void reapAtStartup(dockerHost).then((r) => {
      if (r && r.removed.length > 0) out.info(`removed ${r.removed.length} sandbox container(s) left by exited Turnwise processes`);
    });
    const workspace = (vscode.workspace.workspaceFolders ?? []).find((f) => f.uri.scheme === 'file')?.uri.fsPath;
    const report = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: 'Turnwise: checking the environment…' },
      // The doctor's checks, then the model a run would train (turnwise.train.model, .lora), checked from its
      // headers, and the memory plan of a run at the current settings.
      async () => {
        const r = await runDoctor({ dockerHost });
        const plan = memoryPlanCheck(launchConfig({ workspace: workspace ?? process.cwd(), setting: config.inspect }));
        return doctorReport([...r.checks, ...modelChecks(workspace, config.model(), config.lora()), plan]);
      },
    );
    out.info('Environment check');
    for (const line of formatDoctorReport(report).split('\n')) {
      if (line.startsWith('✗')) out.error(line);
      else if (line.startsWith('!')) out.warn(line);
      else out.info(line);
    }
    out.show(true);
    const failed = report.checks.filter((c) => c.status === 'fail');
    if (report.ok) {
      const warns = report.checks.filter((c) => c.status === 'warn').length;
      void vscode.window.showInformationMessage(
        `Turnwise: environment ready (${report.checks.length - warns}/${report.checks.length} checks passed${warns ? `, ${warns} optional unavailable` : ''}).`,
      );
    } else {
      void vscode.window
        .showErrorMessage(`Turnwise: ${failed.length} problem(s): ${failed.map((c) => c.name).join(', ')}.`, 'Show Details')
        .then((choice) => choice && out.show());
    }
    return report;
  } catch (e) {
    out.error(formatError(e));
    void vscode.window.showErrorMessage(`Turnwise: environment check failed: ${formatError(e)}`);
    return undefined;
  }
}

export const checkEnvironmentCommand = command('turnwise.checkEnvironment', async (ctx) => runEnvironmentCheck(ctx.log));
