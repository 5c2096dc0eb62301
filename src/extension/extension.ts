// VS Code entry point: a thin activate() that wires commands to the core. The core never
// imports `vscode`; everything here is glue (settings, output channel, notifications).
import * as vscode from 'vscode';
import { formatError } from '../core/errors';
import { formatDoctorReport, runDoctor } from '../train/doctor';
import { disposeAllSandboxes, reapAtStartup } from '../sandbox';

let log: vscode.LogOutputChannel | undefined;

export function activate(context: vscode.ExtensionContext): { checkEnvironment: () => Promise<unknown> } {
  log = vscode.window.createOutputChannel('Turnwise', { log: true });
  context.subscriptions.push(log);
  const checkEnvironment = () => checkEnvironmentCommand(log!);
  context.subscriptions.push(vscode.commands.registerCommand('turnwise.checkEnvironment', checkEnvironment));
  log.info(`Turnwise ${context.extension.packageJSON.version} activated`);
  // Sandboxes left behind by a Turnwise process that died (crash, kill -9) are removed at every
  // start. Best effort and capped in time: a missing engine is reported by the commands that need it.
  void reapAtStartup(dockerHostSetting()).then((r) => {
    if (r && r.removed.length > 0) log?.info(`removed ${r.removed.length} sandbox container(s) left by exited Turnwise processes`);
  });
  // The API returned here is what extension-host tests use to reach the extension's results.
  return { checkEnvironment };
}

export async function deactivate(): Promise<void> {
  // Sandboxes this window still holds are removed before the extension host goes away.
  await disposeAllSandboxes(5000);
  log = undefined;
}

function dockerHostSetting(): string | undefined {
  return vscode.workspace.getConfiguration('turnwise').get<string>('docker.host') || undefined;
}

async function checkEnvironmentCommand(out: vscode.LogOutputChannel) {
  const dockerHost = dockerHostSetting();
  try {
    const report = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: 'Turnwise: checking the environment…' },
      () => runDoctor({ dockerHost }),
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
