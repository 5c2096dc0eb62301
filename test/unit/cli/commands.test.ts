// The command table (src/cli/commands/index.ts): a row per command, named as the command names
// itself, and every command a module of src/cli/commands exports is in it. A command lives in the
// file named after its first words (`train` in train.ts, `bench model` in bench/model.ts).
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { CliCommand } from '../../../src/cli/command';
import { COMMAND_TABLE, COMMANDS } from '../../../src/cli/commands';

const DIR = path.resolve(__dirname, '..', '..', '..', 'src', 'cli', 'commands');

const isCommand = (v: unknown): v is CliCommand =>
  !!v &&
  typeof v === 'object' &&
  typeof (v as CliCommand).name === 'string' &&
  typeof (v as CliCommand).summary === 'string' &&
  typeof (v as CliCommand).run === 'function';

/** Every module under src/cli/commands, as its path without `.ts` (`bench/model`). */
function modules(dir = DIR): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((e) =>
      e.isDirectory()
        ? modules(path.join(dir, e.name))
        : e.name.endsWith('.ts')
          ? [path.relative(DIR, path.join(dir, e.name)).replace(/\.ts$/, '')]
          : [],
    );
}

describe('cli: the command table', () => {
  it('each row is named as its command, no command twice, rows sorted', () => {
    for (const [name, command] of Object.entries(COMMAND_TABLE)) assert.equal(command.name, name);
    assert.equal(new Set(Object.values(COMMAND_TABLE)).size, Object.keys(COMMAND_TABLE).length);
    const names = Object.keys(COMMAND_TABLE);
    assert.deepEqual(
      names,
      [...names].sort((a, b) => a.localeCompare(b)),
    );
    assert.deepEqual(
      COMMANDS.map((c) => c.name),
      names,
    );
  });

  it('every command a module exports is a row, and lives in the file named after its first words', () => {
    const registered = new Set(Object.values(COMMAND_TABLE));
    let found = 0;
    for (const m of modules()) {
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- the modules are found at run time
      for (const [exported, v] of Object.entries(require(path.join(DIR, m)) as Record<string, unknown>)) {
        if (!isCommand(v)) continue;
        found++;
        assert.ok(registered.has(v), `${m}.ts exports ${exported} (turnwise ${v.name}), which is not in the command table`);
        assert.ok(`${v.name} `.startsWith(`${m.split('/').join(' ')} `), `turnwise ${v.name} lives in ${m}.ts`);
      }
    }
    assert.ok(found >= registered.size, `${found} exported commands, ${registered.size} rows`);
  });
});
