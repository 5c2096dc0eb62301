// The editor's commands as package.json declares them and as src/extension/commands/ registers
// them: the same ids in both places, each in the file named after it, each in the table's one
// loop. Read from the sources and the manifest; nothing here imports `vscode`.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { COMMAND_IDS } from '../../../src/extension/commands/ids';

const ROOT = path.join(__dirname, '..', '..', '..');
const DIR = path.join(ROOT, 'src', 'extension', 'commands');
const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
const sorted = (xs: Iterable<string>) => [...xs].sort();

/** Every .ts file under the commands folder, relative to it. */
function sources(dir = DIR, rel = ''): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((e) =>
      e.isDirectory() ? sources(path.join(dir, e.name), path.join(rel, e.name)) : e.name.endsWith('.ts') ? [path.join(rel, e.name)] : [],
    );
}

/** The file a command lives in: its id without `turnwise.`, dots as folders (turnwise.runs.delete → runs/delete.ts). */
const fileOf = (id: string) => path.join(...id.replace(/^turnwise\./, '').split('.')) + '.ts';

describe('extension: the command table and package.json', () => {
  it('the table lists each command once', () => {
    assert.equal(new Set(COMMAND_IDS).size, COMMAND_IDS.length);
  });

  it("contributes.commands holds exactly the table's commands, each with a title", () => {
    const contributed: Array<{ command: string; title?: string }> = manifest.contributes.commands;
    assert.deepEqual(sorted(contributed.map((c) => c.command)), sorted(COMMAND_IDS));
    assert.equal(new Set(contributed.map((c) => c.command)).size, contributed.length, 'a command contributed twice');
    for (const c of contributed) assert.ok(c.title, `${c.command} has no title`);
  });

  it('activationEvents name no command the table lacks (VS Code activates on contributed commands itself)', () => {
    const events: string[] = manifest.activationEvents ?? [];
    const onCommand = events.filter((e) => e.startsWith('onCommand:')).map((e) => e.slice('onCommand:'.length));
    assert.deepEqual(
      onCommand.filter((id) => !(COMMAND_IDS as readonly string[]).includes(id)),
      [],
    );
  });

  it("menus, keybindings, welcome views and the walkthrough name only the table's commands", () => {
    const { menus, keybindings, viewsWelcome, walkthroughs } = manifest.contributes;
    const named = new Set<string>();
    for (const items of Object.values(menus as Record<string, Array<{ command: string }>>)) for (const m of items) named.add(m.command);
    for (const k of keybindings as Array<{ command: string }>) named.add(k.command);
    // Links (command:ID) and completion events (onCommand:ID) in the welcome views and the walkthrough.
    for (const m of JSON.stringify([viewsWelcome, walkthroughs]).matchAll(/(?:command|onCommand):(turnwise\.[\w.]+)/g)) named.add(m[1]);
    const ours = [...named].filter((id) => id.startsWith('turnwise.'));
    assert.ok(ours.length > 0);
    assert.deepEqual(
      ours.filter((id) => !(COMMAND_IDS as readonly string[]).includes(id)),
      [],
    );
  });
});

describe('extension: one command per file under src/extension/commands/', () => {
  const files = sources();
  const declared = (file: string) =>
    [...fs.readFileSync(path.join(DIR, file), 'utf8').matchAll(/\bcommand\(\s*'([^']+)'/g)].map((m) => m[1]);

  it('each command is declared in the file named after its id, and nowhere else', () => {
    for (const id of COMMAND_IDS) assert.deepEqual(declared(fileOf(id)), [id], `${fileOf(id)} should declare ${id}, and only it`);
    const elsewhere = files.filter((f) => !COMMAND_IDS.some((id) => fileOf(id) === f)).filter((f) => declared(f).length > 0);
    assert.deepEqual(elsewhere, []);
  });

  it('the table in index.ts has a row for each command', () => {
    const index = fs.readFileSync(path.join(DIR, 'index.ts'), 'utf8');
    const rows = [...index.matchAll(/^\s*'(turnwise\.[\w.]+)': \w+Command,$/gm)].map((m) => m[1]);
    assert.deepEqual(sorted(rows), sorted(COMMAND_IDS));
  });

  it("commands are registered in one place: the table's loop (no other vscode.commands.registerCommand in src/extension/)", () => {
    const ext = path.join(ROOT, 'src', 'extension');
    const all = (dir: string): string[] =>
      fs
        .readdirSync(dir, { withFileTypes: true })
        .flatMap((e) => (e.isDirectory() ? all(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : []));
    const calls = all(ext).flatMap((f) =>
      [...fs.readFileSync(f, 'utf8').matchAll(/commands\.registerCommand\(/g)].map(() => path.relative(ext, f)),
    );
    assert.deepEqual(calls, [path.join('commands', 'index.ts')]);
  });

  it('ids.ts stays free of imports, so this test and others can read it without an editor', () => {
    assert.doesNotMatch(fs.readFileSync(path.join(DIR, 'ids.ts'), 'utf8'), /^\s*import\b|\brequire\(/m);
  });
});
