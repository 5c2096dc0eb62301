// The `turnwise` command line: dispatches to src/cli/commands/*, prints errors with their fix,
// and exits non-zero on failure. `--json` makes every command print machine-readable output.
import { parseArgs } from 'node:util';
import { errorToJson, formatError, isTurnwiseError } from '../core/errors';
import { UsageError, type CliCommand, type CliIO } from './command';
import { COMMANDS } from './commands/index';
import { reapAtStartup } from '../sandbox/reaper';

function usage(commands: CliCommand[]): string {
  const width = Math.max(...commands.map((c) => c.name.length));
  return [
    'usage: turnwise <command> [options] [--json]',
    '',
    ...commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    '',
    'turnwise <command> --help shows the options of one command.',
  ].join('\n');
}

/** Finds the command whose words are the longest prefix of argv. */
export function findCommand(argv: string[], commands: CliCommand[] = COMMANDS): { command?: CliCommand; rest: string[] } {
  let best: CliCommand | undefined;
  let bestLen = 0;
  for (const c of commands) {
    const words = c.name.split(' ');
    if (words.length > bestLen && words.every((w, i) => argv[i] === w)) {
      best = c;
      bestLen = words.length;
    }
  }
  return { command: best, rest: argv.slice(bestLen) };
}

export async function main(argv: string[], io?: Partial<CliIO>): Promise<number> {
  const json = argv.includes('--json');
  const cli: CliIO = {
    out: io?.out ?? ((t) => process.stdout.write(t.endsWith('\n') ? t : t + '\n')),
    err: io?.err ?? ((t) => process.stderr.write(t.endsWith('\n') ? t : t + '\n')),
    json,
  };
  if (argv.length === 0 || argv[0] === '--help' || argv[0] === '-h' || argv[0] === 'help') {
    cli.out(usage(COMMANDS));
    return argv.length === 0 ? 2 : 0;
  }
  const { command, rest } = findCommand(argv);
  if (!command) {
    if (json)
      cli.out(
        JSON.stringify(
          {
            ok: false,
            error: {
              code: 'invalid-input',
              message: `unknown command "${argv.filter((a) => !a.startsWith('-')).join(' ')}"`,
              hint: 'run `turnwise --help` for the list of commands',
            },
          },
          null,
          2,
        ),
      );
    cli.err(`turnwise: unknown command "${argv.filter((a) => !a.startsWith('-')).join(' ')}"\n\n${usage(COMMANDS)}`);
    return 2;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    cli.out(`usage: turnwise ${command.name} ${command.usage ?? ''}\n\n${command.summary}`);
    return 0;
  }
  try {
    const parsed = parseArgs({
      args: rest,
      options: { ...(command.options ?? {}), json: { type: 'boolean' } },
      allowPositionals: command.allowPositionals ?? false,
      strict: true,
    });
    return await command.run({ values: parsed.values, positionals: parsed.positionals }, cli);
  } catch (e) {
    const isUsage = e instanceof UsageError || (e as NodeJS.ErrnoException)?.code?.startsWith?.('ERR_PARSE_ARGS');
    if (json) {
      // A usage error is the caller's input, not Turnwise failing: never code "internal".
      const error = isUsage
        ? { code: 'invalid-input', message: (e as Error).message, hint: `usage: turnwise ${command.name} ${command.usage ?? ''}`.trim() }
        : errorToJson(e);
      cli.out(JSON.stringify({ ok: false, error }, null, 2));
    }
    if (isUsage) {
      cli.err(`turnwise ${command.name}: ${(e as Error).message}\nusage: turnwise ${command.name} ${command.usage ?? ''}`);
      return 2;
    }
    cli.err(`turnwise ${command.name}: ${formatError(e)}`);
    if (!isTurnwiseError(e) && process.env.TURNWISE_DEBUG) cli.err((e as Error).stack ?? '');
    // Stopped on a signal before the work was done (core/stop.ts): the shell's code for SIGINT.
    return isTurnwiseError(e) && e.code === 'stopped' ? 130 : 1;
  }
}

if (require.main === module) {
  void reapAtStartup(); // removes sandboxes left by crashed Turnwise processes; best effort, never throws
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (e) => {
      process.stderr.write(`turnwise: ${formatError(e)}\n`);
      process.exitCode = 1;
    },
  );
}
