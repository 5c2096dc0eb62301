// Follows CLI children from the extension host: the one training run (status bar item,
// cancellable progress notification, log channel, `turnwise.runActive` context key) and the
// shorter commands (tasks synth, eval, images build, sandbox prune). Nothing runs in the
// extension host itself; closing the window stops the children (SIGINT: the CLI removes its
// containers and discards a partial iteration).
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { RunEvent } from '../core/events';
import { cliEnv } from './config';
import { CliProcess, describeFailure, type CliExit, type CliProcessOptions } from './cliProcess';
import { fractionDone, initialProgress, progressMessage, reduceProgress, statusBarText, type RunProgress } from './model/progress';

export interface ActiveRun {
  label: string;
  cli: CliProcess;
  progress: RunProgress;
}

export class RunController implements vscode.Disposable {
  private active: ActiveRun | undefined;
  private readonly others = new Set<CliProcess>();
  private readonly statusItem: vscode.StatusBarItem;
  private readonly changed = new vscode.EventEmitter<RunProgress>();
  /** Fires on every event of the active run (the Runs view and reward panel refresh on it). */
  readonly onDidChange = this.changed.event;
  private readonly events = new vscode.EventEmitter<RunEvent>();
  readonly onEvent = this.events.event;

  constructor(
    private readonly extensionPath: string,
    private readonly log: vscode.LogOutputChannel,
  ) {
    this.statusItem = vscode.window.createStatusBarItem('turnwise.run', vscode.StatusBarAlignment.Left, 10);
    this.statusItem.name = 'Turnwise Run';
    this.statusItem.command = { command: 'turnwise.showRewardPanel', title: 'Show Reward Panel', arguments: [] };
  }

  get cliPath(): string {
    return path.join(this.extensionPath, 'dist', 'cli.js');
  }

  get current(): ActiveRun | undefined {
    return this.active;
  }

  /** `turnwise ARGS --json` in `cwd`, with the environment the settings give the CLI. */
  private spawn(args: string[], cwd: string, on: Pick<CliProcessOptions, 'onEvent' | 'onStdoutLine' | 'onStderrLine'>): CliProcess {
    return new CliProcess({ cliPath: this.cliPath, args: [...args, '--json'], cwd, env: cliEnv(), ...on });
  }

  /** Starts `turnwise train … --json`; resolves once the run ends. */
  async startTraining(label: string, args: string[], cwd: string): Promise<RunProgress> {
    if (this.active) throw new Error(`a run is already going (${this.active.progress.runId ?? this.active.label})`);
    let progress = initialProgress();
    let reportProgress: ((p: RunProgress) => void) | undefined;
    this.log.info(`starting: turnwise ${args.join(' ')} (in ${cwd})`);
    const cli = this.spawn(args, cwd, {
      onEvent: (e) => {
        progress = reduceProgress(progress, e);
        if (this.active) this.active.progress = progress;
        this.logEvent(e);
        this.showStatus(progress);
        reportProgress?.(progress);
        this.events.fire(e);
        this.changed.fire(progress);
      },
      onStdoutLine: (l) => l.trim() && this.log.info(l),
      onStderrLine: (l) => l.trim() && this.log.trace(l),
    });
    this.active = { label, cli, progress };
    void vscode.commands.executeCommand('setContext', 'turnwise.runActive', true);
    this.showStatus(progress);
    this.changed.fire(progress);

    const exit = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Turnwise: ${label}`, cancellable: true },
      async (report, token) => {
        let lastFraction = 0;
        reportProgress = (p) => {
          const f = fractionDone(p);
          report.report({ message: progressMessage(p), increment: Math.max(0, (f - lastFraction) * 100) });
          lastFraction = Math.max(lastFraction, f);
        };
        token.onCancellationRequested(() => {
          this.log.info('stopping the run (cancelled from the notification)');
          void cli.stop();
        });
        return cli.exited;
      },
    );
    this.active = undefined;
    void vscode.commands.executeCommand('setContext', 'turnwise.runActive', false);
    progress = this.finalState(progress, exit);
    this.showStatus(progress);
    this.changed.fire(progress);
    this.announce(label, progress, exit);
    return progress;
  }

  private finalState(p: RunProgress, exit: CliExit): RunProgress {
    if (p.state === 'finished' || p.state === 'failed' || p.state === 'stopped') return p;
    if (exit.stopped) return { ...p, state: 'stopped' };
    if (exit.code === 0) return { ...p, state: 'finished' };
    const f = describeFailure('the run', exit);
    return { ...p, state: 'failed', error: { message: f.message, hint: f.hint } };
  }

  private announce(label: string, p: RunProgress, exit: CliExit): void {
    const name = p.runId ?? label;
    if (p.state === 'finished') {
      this.log.info(`run ${name} finished`);
      void vscode.window
        .showInformationMessage(
          `Turnwise: run ${name} finished${p.passRate !== undefined || p.heldoutPassRate !== undefined ? ` (${statusBarText(p).split('· ')[1] ?? ''})` : ''}.`,
          'Show Reward Panel',
        )
        .then((c) => c && vscode.commands.executeCommand('turnwise.showRewardPanel', p.runId));
    } else if (p.state === 'stopped') {
      this.log.info(`run ${name} stopped`);
      void vscode.window.showInformationMessage(
        `Turnwise: run ${name} stopped${p.lastFinished !== undefined ? ` after iteration ${p.lastFinished}` : ''}${p.stopReason ? ` (${p.stopReason})` : ''}; resume it with "Turnwise: Resume Run".`,
      );
    } else {
      const msg = (p.error?.message ?? describeFailure('the run', exit).message).replace(/^the run failed: /, '');
      this.log.error(`run ${name} failed: ${msg}${p.error?.hint ? ` (${p.error.hint})` : ''}`);
      void vscode.window
        .showErrorMessage(`Turnwise: run failed: ${msg}${p.error?.hint ? ` — ${p.error.hint}` : ''}`, 'Show Log')
        .then((c) => c && this.log.show());
    }
  }

  private logEvent(e: RunEvent): void {
    switch (e.type) {
      case 'run-started':
        this.log.info(
          `run ${e.runId}: ${e.iterations} iteration(s), ${e.trainTasks} train / ${e.heldoutTasks} held-out task(s) in ${e.runDir}${e.resumedFrom !== undefined ? ` (resumed after iteration ${e.resumedFrom})` : ''}`,
        );
        break;
      case 'phase':
        this.log.debug(
          `iteration ${e.iteration}: ${e.phase}${e.total ? ` ${e.done ?? 0}/${e.total}` : ''}${e.detail ? ` ${e.detail}` : ''}`,
        );
        break;
      case 'episode-finished':
        this.log.trace(
          `episode ${e.trajId} (${e.taskId}, ${e.split}): reward ${e.reward ?? 'unscored'}, ${e.turns} turn(s)${e.failure ? `, failure: ${e.failure}` : ''}`,
        );
        break;
      case 'iteration-finished':
        this.log.info(
          `iteration ${e.iteration} finished: ${Object.entries(e.metrics)
            .filter(([k, v]) => typeof v === 'number' && /pass_rate|resolved|reward\/mean/.test(k))
            .map(([k, v]) => `${k}=${(v as number).toFixed(3)}`)
            .join(' ')}`,
        );
        break;
      case 'checkpoint-written':
        this.log.info(`checkpoint ${e.iteration}: ${e.path}`);
        break;
      case 'run-failed':
        this.log.error(`${e.error.message}${e.error.hint ? ` (${e.error.hint})` : ''}`);
        break;
      case 'log':
        (e.level === 'warn' ? this.log.warn : this.log.info).call(this.log, e.message);
        break;
      default:
        this.log.info(`${e.type}`);
    }
  }

  private showStatus(p: RunProgress): void {
    this.statusItem.text = statusBarText(p);
    this.statusItem.tooltip = `Turnwise run ${p.runId ?? ''}\n${progressMessage(p)}\nClick to open the reward panel.`;
    this.statusItem.command = { command: 'turnwise.showRewardPanel', title: 'Show Reward Panel', arguments: p.runId ? [p.runId] : [] };
    this.statusItem.show();
  }

  /** Stops the active run; resolves once its process has exited. */
  async stop(): Promise<boolean> {
    const a = this.active;
    if (!a) return false;
    this.log.info(`stopping run ${a.progress.runId ?? a.label}`);
    await a.cli.stop();
    return true;
  }

  /**
   * Runs a short CLI command with a cancellable notification; resolves with its stdout JSON
   * (parsed when it is one document) or throws with the CLI's own message and hint.
   */
  async runCommand<T = unknown>(title: string, args: string[], cwd: string): Promise<T | undefined> {
    this.log.info(`turnwise ${args.join(' ')}`);
    return vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Turnwise: ${title}`, cancellable: true },
      async (report, token) => {
        const cli = this.spawn(args, cwd, {
          onEvent: (e) => {
            if (e.type === 'phase') report.report({ message: `${e.phase}${e.total ? ` ${e.done ?? 0}/${e.total}` : ''}` });
            this.logEvent(e);
          },
          onStderrLine: (l) => {
            if (!l.trim()) return;
            this.log.info(l);
            report.report({ message: l.slice(0, 120) });
          },
        });
        this.others.add(cli);
        token.onCancellationRequested(() => void cli.stop());
        const exit = await cli.exited;
        this.others.delete(cli);
        if (exit.stopped) throw new CommandCancelled(title);
        if (exit.code !== 0) {
          const f = describeFailure(`turnwise ${args[0]}${args[1] && !args[1].startsWith('-') ? ` ${args[1]}` : ''}`, exit);
          throw Object.assign(new Error(f.message), { hint: f.hint });
        }
        try {
          return JSON.parse(exit.stdout) as T;
        } catch {
          return undefined;
        }
      },
    );
  }

  /** Stops every child; used when the window closes. */
  async stopAll(graceMs = 4000): Promise<void> {
    const all = [...this.others, ...(this.active ? [this.active.cli] : [])];
    await Promise.all(all.map((c) => c.stop(graceMs)));
  }

  dispose(): void {
    for (const c of [...this.others, ...(this.active ? [this.active.cli] : [])]) if (c.running) c.child.kill('SIGINT');
    this.statusItem.dispose();
    this.changed.dispose();
    this.events.dispose();
  }
}

export class CommandCancelled extends Error {
  constructor(what: string) {
    super(`${what} was cancelled`);
  }
}
