// A chat template's clock: Llama 3.x templates print today's date in the system message. The date
// is pinned once per chat format and written as Python writes it in the C locale, whatever the
// process's locale; a conversation that crosses midnight keeps its prompt.
import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as path from 'node:path';
import { ChatFormat } from '../../../src/agent/chat-format';
import { ChatTemplate, strftime, templateTokens } from '../../../src/agent/chat-template';
import { chatTokenizerFiles } from '../../../src/policy/files/bpe';
import { loadTokenizer } from '../../../src/policy/files/tokenizer';

/** The date logic of Llama 3.1's template (its system header), before Turnwise's header-kind template. */
const DATED = `{%- if not date_string is defined %}{%- if strftime_now is defined %}{%- set date_string = strftime_now("%d %b %Y") %}{%- else %}{%- set date_string = "26 Jul 2024" %}{%- endif %}{%- endif %}{{- bos_token }}<|start_header_id|>system<|end_header_id|>\n\nToday Date: {{ date_string }}\n\n{{ messages[0]['content'] }}<|eot_id|>{%- for m in messages[1:] %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n{{ m['content'] }}<|eot_id|>{%- endfor %}{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}`;

describe('agent/chat-template: the template clock', () => {
  it("strftime writes what Python's time.strftime writes in the C locale", () => {
    const stamps = [
      new Date(2026, 11, 4, 23, 59, 59),
      new Date(2024, 0, 1, 0, 0, 0),
      new Date(2025, 6, 26, 12, 5, 9),
      new Date(2024, 1, 29, 13, 0, 0),
    ];
    const fmts = ['%d %b %Y', '%B %d, %Y', '%a %A %j %y %H:%M:%S %I %p %m %%'];
    const script = `import sys, time\nfor ts in sys.argv[2:]:\n    for f in sys.argv[1].split('|'):\n        print(time.strftime(f, time.localtime(float(ts))))`;
    const want = execFileSync('python3', ['-c', script, fmts.join('|'), ...stamps.map((d) => String(d.getTime() / 1000))], {
      env: { ...process.env, LC_ALL: 'C', TZ: process.env.TZ ?? '' },
      encoding: 'utf8',
    })
      .trim()
      .split('\n');
    const got = stamps.flatMap((d) => fmts.map((f) => strftime(d, f)));
    assert.deepEqual(got, want);
  });

  it('the month is English whatever the locale the process runs in (de_DE, fr_FR, ja_JP)', () => {
    const src = path.resolve(__dirname, '../../../src/agent/chat-template.ts');
    for (const lang of ['de_DE.UTF-8', 'fr_FR.UTF-8', 'ja_JP.UTF-8']) {
      const code = `const { ChatTemplate } = require(${JSON.stringify(src)}); const t = new ChatTemplate(${JSON.stringify('{{ strftime_now("%d %b %Y") }}|{{ strftime_now("%B") }}')}, 'x'); process.stdout.write(new Intl.DateTimeFormat(undefined, { month: 'short' }).format(new Date(2026, 11, 4)) + '|' + t.render([], false, new Date(2026, 11, 4)));`;
      const out = execFileSync(process.execPath, ['--require', 'tsx/cjs', '-e', code], {
        env: { ...process.env, LANG: lang, LC_ALL: lang },
        encoding: 'utf8',
        cwd: path.resolve(__dirname, '../../..'),
      });
      const [intlMonth, rendered, long] = out.split('|');
      assert.equal(`${rendered}|${long}`, '04 Dec 2026|December', `${lang}: ${out}`);
      // The process's own locale really is another one (else this test would prove nothing).
      assert.notEqual(intlMonth, 'Dec', `${lang}: Intl says ${intlMonth}`);
    }
  });

  it('a conversation that crosses midnight keeps its date and its prompt (the clock is faked: a test cannot wait for midnight)', () => {
    const files = chatTokenizerFiles('llama3');
    const tok = loadTokenizer(files.tokenizerJson, files.tokenizerConfig);
    const RealDate = Date;
    let clock = new RealDate(2026, 11, 4, 23, 59, 58).getTime();
    class FakeDate extends RealDate {
      constructor(...args: unknown[]) {
        if (args.length === 0) super(clock);
        else super(...(args as [number]));
      }
      static override now() {
        return clock;
      }
    }
    globalThis.Date = FakeDate as DateConstructor;
    try {
      const template = new ChatTemplate(DATED, 'llama-3.1/tokenizer_config.json', templateTokens(files.tokenizerConfig));
      const format = new ChatFormat({ template, tokenizer: tok, contextTokens: 4096, maxActionTokens: 128 });
      const conv = format.conversation('You fix bugs.', 'Fix tests/test_calc.py::test_add');
      const first = conv.prompt().ids;
      assert.match(conv.text(), /Today Date: 04 Dec 2026/);
      clock = new RealDate(2026, 11, 5, 0, 0, 2).getTime();
      conv.addReply({ text: 'tw-test', tokenIds: [...tok.encode('tw-test', { special: false }), format.endOfTurn.id], stopped: true });
      conv.addObservation('exit 1');
      const second = conv.prompt().ids;
      assert.deepEqual(second.slice(0, first.length), first, 'turn 2 extends turn 1');
      assert.match(conv.text(), /Today Date: 04 Dec 2026/);
      // A format made after midnight says the new date.
      const later = new ChatFormat({ template, tokenizer: tok, contextTokens: 4096, maxActionTokens: 128 }).conversation('s', 't');
      later.prompt();
      assert.match(later.text(), /Today Date: 05 Dec 2026/);
    } finally {
      globalThis.Date = RealDate;
    }
  });
});
