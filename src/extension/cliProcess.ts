// The `turnwise` CLI as a child process of the extension host: training and the other long
// commands run there (never in the extension host), and report through `--json` output.
// Plain Node (no vscode): unit-tested with a stand-in CLI script.
import { spawn, type ChildProcess } from 'node:child_process';
import { parseEventLine, type RunEvent } from '../core/events';

export interface CliProcessOptions {
  /** dist/cli.js of this extension. */
  cliPath: string;
  args: string[];
  cwd: string;
  /** Node to run it with; in desktop VS Code process.execPath is Electron, run as Node. */
  nodePath?: string;
  env?: NodeJS.ProcessEnv;
  onEvent?: (e: RunEvent) => void;
  /** Lines of stdout that are not events (a non-streaming command's JSON result, stray output). */
  onStdoutLine?: (line: string) => void;
  onStderrLine?: (line: string) => void;
}

export interface CliExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** All stdout that was not an event (a command's final `--json` result). */
  stdout: string;
  /** The last lines of stderr, for an error message. */
  stderrTail: string[];
  /** True when stop() was called. */
  stopped: boolean;
}

function lineSplitter(onLine: (l: string) => void): (chunk: Buffer | string) => void {
  let rest = '';
  const flush = () => {
    if (rest) onLine(rest);
    rest = '';
  };
  const fn = (chunk: Buffer | string) => {
    rest += chunk.toString();
    let nl: number;
    while ((nl = rest.indexOf('\n')) >= 0) {
      onLine(rest.slice(0, nl).replace(/\r$/, ''));
      rest = rest.slice(nl + 1);
    }
  };
  (fn as unknown as { flush: () => void }).flush = flush;
  return fn;
}

export class CliProcess {
  readonly child: ChildProcess;
  readonly exited: Promise<CliExit>;
  private stopping = false;

  constructor(readonly options: CliProcessOptions) {
    const nodePath = options.nodePath ?? process.execPath;
    this.child = spawn(nodePath, [options.cliPath, ...options.args], {
      cwd: options.cwd,
      env: { ...process.env, ...options.env, ELECTRON_RUN_AS_NODE: '1', NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    const stderrTail: string[] = [];
    const out = lineSplitter((line) => {
      const e = parseEventLine(line);
      if (e) options.onEvent?.(e);
      else {
        stdout += `${line}\n`;
        options.onStdoutLine?.(line);
      }
    });
    const err = lineSplitter((line) => {
      stderrTail.push(line);
      if (stderrTail.length > 40) stderrTail.shift();
      options.onStderrLine?.(line);
    });
    this.child.stdout!.on('data', out);
    this.child.stderr!.on('data', err);
    this.exited = new Promise((resolve) => {
      let spawnError: Error | undefined;
      this.child.on('error', (e) => {
        spawnError = e;
        stderrTail.push(`cannot start ${nodePath}: ${e.message}`);
        // 'close' may not follow a spawn failure.
        resolve({ code: null, signal: null, stdout, stderrTail, stopped: this.stopping });
      });
      this.child.on('close', (code, signal) => {
        (out as unknown as { flush: () => void }).flush();
        (err as unknown as { flush: () => void }).flush();
        if (!spawnError) resolve({ code, signal, stdout, stderrTail, stopped: this.stopping });
      });
    });
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /**
   * Stops the command cleanly: SIGINT (the CLI removes its containers and discards the partial
   * iteration), SIGTERM after `graceMs`, SIGKILL after twice that. Resolves once it has exited.
   */
  async stop(graceMs = 15000): Promise<CliExit> {
    this.stopping = true;
    if (this.running) {
      this.child.kill('SIGINT');
      const timers = [
        setTimeout(() => this.running && this.child.kill('SIGTERM'), graceMs),
        setTimeout(() => this.running && this.child.kill('SIGKILL'), 2 * graceMs),
      ];
      const r = await this.exited;
      timers.forEach(clearTimeout);
      return r;
    }
    return this.exited;
  }
}

/** The error a failed `--json` command printed ({ok:false, error:{message, hint}}), if any. */
export function cliJsonError(stdout: string): { code?: string; message: string; hint?: string } | undefined {
  const text = stdout.trim();
  // The result document is the last one that starts at the beginning of a line.
  const starts = [...text.matchAll(/^\{/gm)].map((m) => m.index ?? 0);
  const start = starts.length ? starts[starts.length - 1] : -1;
  if (start < 0) return undefined;
  try {
    const v = JSON.parse(text.slice(start)) as { ok?: boolean; error?: { code?: string; message?: string; hint?: string } };
    if (v && v.error && typeof v.error.message === 'string') return { code: v.error.code, message: v.error.message, hint: v.error.hint };
  } catch {
    // not one JSON document
  }
  return undefined;
}

/** What to tell the user when a command exited non-zero. */
export function describeFailure(name: string, exit: CliExit): { message: string; hint?: string } {
  const e = cliJsonError(exit.stdout);
  if (e) return { message: `${name} failed: ${e.message}`, hint: e.hint };
  const last = exit.stderrTail
    .filter((l) => l.trim())
    .slice(-3)
    .join(' ');
  const how = exit.signal ? `was killed (${exit.signal})` : `exited with code ${exit.code}`;
  return { message: `${name} ${how}${last ? `: ${last}` : ''}` };
}
