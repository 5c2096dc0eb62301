// Reference pages generated from the code, so they cannot drift: docs/configuration.md from the
// one table of config fields and their settings (src/extension/model/launchConfig.ts, the
// settings' descriptions in package.json, the CLI's defaults), docs/cli.md from every command's
// summary and usage. `npx tsx scripts/lib/docs.ts` writes them; a unit test fails when a page
// differs from what this renders.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { COMMANDS } from '../../src/cli/commands';
import { settingFields } from '../../src/extension/model/launchConfig';
import { TRAIN_DEFAULTS } from '../../src/train/config';

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
const cell = (s: string) => s.replace(/#(turnwise\.[\w.]+)#/g, '$1').replace(/\|/g, '\\|').replace(/\n+/g, ' ');

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
    const d = field.startsWith('reward.') ? (TRAIN_DEFAULTS.reward as unknown as Record<string, unknown>)[field.slice(7)] : (TRAIN_DEFAULTS as unknown as Record<string, unknown>)[field];
    const shown = d === undefined ? (p.default === null ? 'none' : '—') : JSON.stringify(d);
    const what = cell(p.markdownDescription ?? p.description ?? '') + (p.enum ? ` One of: ${p.enum.map((e) => `\`${String(e)}\``).join(', ')}.` : '');
    lines.push(`| \`${field}\` | \`turnwise.${setting}\` | \`${cell(shown)}\` | ${what} |`);
  }
  lines.push('', 'Set by the Start Training Run command or the CLI, not by a setting: `workspace`, `taskSource`, `tasksFile`.', '');
  return lines.join('\n');
}

/** docs/cli.md: every command with its summary and usage. */
export function cliPage(): string {
  const lines = ['# Command line', '', 'Every `turnwise` command, as `turnwise COMMAND --help` prints it. Generated from the code (`npx tsx scripts/lib/docs.ts`); a test keeps it current.', ''];
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
