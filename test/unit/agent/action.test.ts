// The action language: `submit`, one bash command (heredocs allowed), or a format error that
// says why (empty, syntax error, comment only, over length, cut by the token budget).
import * as assert from 'node:assert/strict';
import { MAX_ACTION_CHARS, parseAction } from '../../../src/agent/action';

describe('agent/action: parseAction', () => {
  const ok: [string, string][] = [
    ['submit', 'submit'],
    ['  submit\n', 'submit'],
    ['ls -la', 'bash'],
    ["sed -i '3s/>=/>/' shop/cart.py", 'bash'],
    ['cat > f.py <<EOF\nx = 1\nEOF', 'bash'],
    ['python -m pytest -q 2>&1 | tail -5', 'bash'],
    ['for f in *.py; do wc -l "$f"; done', 'bash'],
    ['ls # list', 'bash'],
  ];
  for (const [text, kind] of ok) {
    it(`${JSON.stringify(text)} → ${kind}`, async () => {
      const p = await parseAction(text);
      assert.equal(p.kind, kind, JSON.stringify(p));
      if (p.kind === 'bash') assert.equal(p.command, text.trim());
    });
  }

  const bad: [string, string, RegExp][] = [
    ['empty', '', /empty action/],
    ['whitespace only', ' \n\t ', /empty action/],
    ['unterminated quote', 'echo "unterminated', /bash syntax error/],
    ['unbalanced if', 'if true; then echo x', /bash syntax error/],
    ['stray paren', 'echo )(', /bash syntax error/],
    ['comment only', '# just thinking about it', /no command/],
    ['over length', `echo ${'a'.repeat(MAX_ACTION_CHARS)}`, new RegExp(`over the ${MAX_ACTION_CHARS} limit`)],
    ['NUL byte', 'echo a\0b', /NUL/],
  ];
  for (const [name, text, why] of bad) {
    it(`${name} → format error`, async () => {
      const p = await parseAction(text);
      assert.equal(p.kind, 'format-error', JSON.stringify(p));
      assert.match((p as { reason: string }).reason, why);
    });
  }

  it('a command cut by the action budget is a format error even when it parses', async () => {
    const p = await parseAction('ls -la', false);
    assert.equal(p.kind, 'format-error');
    assert.match((p as { reason: string }).reason, /did not end/);
    assert.equal((await parseAction('submit', false)).kind, 'format-error');
  });

  it('a syntax error names where it is', async () => {
    const p = await parseAction('echo ok && && ls');
    assert.equal(p.kind, 'format-error');
    assert.match((p as { reason: string }).reason, /column \d+/);
  });
});
