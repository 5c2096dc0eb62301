// Reference pages generated from the code, so they cannot drift: docs/configuration.md from the
// one table of config fields and their settings (src/extension/model/launchConfig.ts, the
// settings' descriptions in package.json, the CLI's defaults), docs/cli.md from every command's
// summary and usage; its warm-start section from WarmstartConfig's field comments, defaults and
// the flags of `turnwise warmstart`. `npx tsx scripts/lib/docs.ts` writes them; a unit test fails
// when a page differs from what this renders.
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as ts from 'typescript';
import { COMMANDS } from '../../src/cli/commands';
import { WARMSTART_FLAGS } from '../../src/cli/commands/warmstart';
import { settingFields } from '../../src/extension/model/launchConfig';
import { TRAIN_DEFAULTS } from '../../src/train/config';
import { WARMSTART_DEFAULTS, type WarmstartKind } from '../../src/warmstart/config';

const root = path.resolve(__dirname, '..', '..');

interface SettingInfo {
  markdownDescription?: string;
  description?: string;
  default?: unknown;
  enum?: unknown[];
}

function settings(): Record<string, SettingInfo> {
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
  return pkg.contributes.configuration.properties as Record<string, SettingInfo>;
}

// VS Code's setting links (`#turnwise.x#`) read as the setting's name on a page.
const cell = (s: string) =>
  s
    .replace(/#(turnwise\.[\w.]+)#/g, '$1')
    .replace(/\|/g, '\\|')
    .replace(/\n+/g, ' ');

/** docs/configuration.md: every config field, its setting, its default and what it does. */
export function configurationPage(): string {
  const props = settings();
  const lines = [
    '# Configuration',
    '',
    "Every field of a run's configuration: `turnwise.json` in the workspace folder (or `turnwise train --config FILE`) and the",
    '`turnwise.*` settings in the editor hold the same fields. Generated from the code (`npx tsx scripts/lib/docs.ts`); a test keeps it current.',
    '',
    '| field | setting | default | what it does |',
    '|---|---|---|---|',
  ];
  for (const [setting, field] of settingFields()) {
    const p = props[`turnwise.${setting}`] ?? {};
    const d = field.startsWith('reward.')
      ? (TRAIN_DEFAULTS.reward as unknown as Record<string, unknown>)[field.slice(7)]
      : (TRAIN_DEFAULTS as unknown as Record<string, unknown>)[field];
    const shown = d === undefined ? (p.default === null ? 'none' : '—') : JSON.stringify(d);
    const what =
      cell(p.markdownDescription ?? p.description ?? '') + (p.enum ? ` One of: ${p.enum.map((e) => `\`${String(e)}\``).join(', ')}.` : '');
    lines.push(`| \`${field}\` | \`turnwise.${setting}\` | \`${cell(shown)}\` | ${what} |`);
  }
  lines.push(
    '',
    'Set by the Start Training Run command or the CLI, not by a setting: `workspace`, `taskSource`, `tasksFile`.',
    '',
    ...warmstartSection(),
  );
  return lines.join('\n');
}

/** The `/** … *\/` comment of each field of an interface, in order. */
function fieldComments(file: string, name: string): [field: string, comment: string][] {
  const source = ts.createSourceFile(file, fs.readFileSync(path.join(root, file), 'utf8'), ts.ScriptTarget.Latest, true);
  const decl = source.statements.find((s): s is ts.InterfaceDeclaration => ts.isInterfaceDeclaration(s) && s.name.text === name);
  if (!decl) throw new Error(`${file} declares no interface ${name}`);
  return decl.members.filter(ts.isPropertySignature).map((m) => [
    m.name.getText(source),
    ts
      .getJSDocCommentsAndTags(m)
      .map((d) => ts.getTextOfJSDocComment((d as ts.JSDoc).comment) ?? '')
      .join(' '),
  ]);
}

/** A warm-start setting's default: one value, or one per kind of warm start where they differ. */
function warmstartDefault(field: string): string {
  const byKind = WARMSTART_DEFAULTS.byKind as Record<WarmstartKind, Record<string, unknown>>;
  if (field in byKind.compact) {
    const groups = new Map<string, string[]>();
    for (const [kind, d] of Object.entries(byKind))
      groups.set(JSON.stringify(d[field]), [...(groups.get(JSON.stringify(d[field])) ?? []), kind]);
    return [...groups].map(([v, kinds]) => `\`${v}\` ${kinds.join(', ')}`).join('; ');
  }
  if (field === 'floorLr') return `\`peakLr\` × ${WARMSTART_DEFAULTS.floorLrShare}`;
  const d = (WARMSTART_DEFAULTS as unknown as Record<string, unknown>)[field];
  return d === undefined ? '—' : `\`${cell(JSON.stringify(d))}\``;
}

/** docs/configuration.md, "Warm start": every WarmstartConfig field, the flag that sets it, its default and what it does. */
function warmstartSection(): string[] {
  const lines = [
    '## Warm start',
    '',
    'The settings of `turnwise warmstart` (`WarmstartConfig`, src/warmstart/config.ts): each field, the flag that sets it, its default and what it does. A',
    'field without a flag keeps its default on the command line. Where the default depends on the kind of warm start it is given for each: `compact`',
    '(turnwise-tiny), `chat` (a chat model trained whole), `chat-lora` (a LoRA adapter on a chat model). `--force` lets a warm start replace the model in `--out`.',
    '',
    '| field | flag | default | what it does |',
    '|---|---|---|---|',
  ];
  for (const [field, comment] of fieldComments('src/warmstart/config.ts', 'WarmstartConfig')) {
    // A flag that sets several fields (--curriculum A,B) shows which part of its value each takes.
    const flags = WARMSTART_FLAGS.filter((f) => ([] as string[]).concat(f.field).includes(field)).map((f) => {
      if (!Array.isArray(f.field)) return `\`--${f.flag}\``;
      const parts = f.field.map((_, i) => String.fromCharCode(65 + i));
      return `\`--${f.flag} ${parts.join(',')}\` (${parts[f.field.indexOf(field)]})`;
    });
    lines.push(`| \`${field}\` | ${flags.join(', ') || '—'} | ${warmstartDefault(field)} | ${cell(comment)} |`);
  }
  lines.push('');
  return lines;
}

/** docs/cli.md: every command with its summary and usage. */
export function cliPage(): string {
  const lines = [
    '# Command line',
    '',
    'Every `turnwise` command, as `turnwise COMMAND --help` prints it. Generated from the code (`npx tsx scripts/lib/docs.ts`); a test keeps it current.',
    '',
  ];
  for (const c of COMMANDS) {
    lines.push(`## turnwise ${c.name}`, '', cell(c.summary), '', '```', `turnwise ${c.name}${c.usage ? ` ${c.usage}` : ''}`, '```', '');
  }
  return lines.join('\n');
}

export const PAGES: Record<string, () => string> = { 'docs/configuration.md': configurationPage, 'docs/cli.md': cliPage };

if (require.main === module) {
  for (const [file, render] of Object.entries(PAGES)) {
    fs.writeFileSync(path.join(root, file), render());
    console.log(`wrote ${file}`);
  }
}
