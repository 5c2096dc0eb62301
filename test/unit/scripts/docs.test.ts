// docs/configuration.md and docs/cli.md are generated from the code: this fails when a config
// field, a setting's description or a command's usage changed and the pages were not rebuilt
// (`npx tsx scripts/lib/docs.ts`).
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { PAGES } from '../../../scripts/lib/docs';
import { COMMANDS } from '../../../src/cli/commands';

const root = path.resolve(__dirname, '..', '..', '..');

describe('docs: generated reference pages', () => {
  for (const [file, render] of Object.entries(PAGES)) {
    it(`${file} is what the code renders`, () => {
      assert.equal(fs.readFileSync(path.join(root, file), 'utf8'), render(), `${file} is out of date: run npx tsx scripts/lib/docs.ts`);
    });
  }
  it('name every command and every config field', () => {
    const cli = PAGES['docs/cli.md']();
    for (const c of COMMANDS) assert.ok(cli.includes(`## turnwise ${c.name}\n`), c.name);
    const cfg = PAGES['docs/configuration.md']();
    for (const f of ['maxTasks', 'lora', 'reward.efficiency', 'executionProvider']) assert.ok(cfg.includes(`| \`${f}\` |`), f);
    assert.doesNotMatch(cfg, /#turnwise\./, 'setting links are made plain');
  });
});
