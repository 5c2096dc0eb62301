// How a command that cannot run says so. Each command checks first whether it can run here and,
// when it cannot, throws CannotRun saying why and what to do; guarded() shows that as a warning
// with its buttons, a cancelled command as a log line, any other error as an error message.
import * as vscode from 'vscode';
import { formatError } from '../../core/errors';
import { CommandCancelled } from '../runController';
import type { CommandContext } from './context';

/** A command that cannot run: the message says why and what to do; actions are offered as buttons. */
export class CannotRun extends Error {
  constructor(
    message: string,
    readonly actions: Array<{ title: string; command: string; args?: unknown[] }> = [],
  ) {
    super(message);
  }
}

/** Wraps a command body: CannotRun becomes a warning with its buttons, other errors an error message. */
export function guarded<A extends unknown[], R>(
  ctx: CommandContext,
  fn: (...args: A) => Promise<R>,
): (...args: A) => Promise<R | undefined> {
  return async (...args: A) => {
    try {
      return await fn(...args);
    } catch (e) {
      if (e instanceof CommandCancelled) {
        ctx.log.info(e.message);
        return undefined;
      }
      if (e instanceof CannotRun) {
        ctx.log.warn(e.message);
        void vscode.window.showWarningMessage(`Turnwise: ${e.message}`, ...e.actions.map((a) => a.title)).then((choice) => {
          const a = e.actions.find((x) => x.title === choice);
          if (a) void vscode.commands.executeCommand(a.command, ...(a.args ?? []));
        });
        return undefined;
      }
      const hint = (e as { hint?: string }).hint;
      ctx.log.error(`${formatError(e)}${hint ? ` (${hint})` : ''}`);
      void vscode.window
        .showErrorMessage(`Turnwise: ${(e as Error).message}${hint ? ` — ${hint}` : ''}`, 'Show Log')
        .then((c) => c && ctx.log.show());
      return undefined;
    }
  };
}
