import * as assert from 'node:assert/strict';
import { escapeControlChars } from '../../../src/core/text';

describe('core/text escapeControlChars', () => {
  it('writes ESC, CSI, NUL, CR, BEL and DEL as escapes and keeps text, tabs, newlines and non-ASCII', () => {
    assert.equal(escapeControlChars('\u001b[2J\u001b]0;pwned\u0007'), '\\x1b[2J\\x1b]0;pwned\\x07');
    assert.equal(escapeControlChars('a\u0000b\rc\u007fd\u009b31m'), 'a\\x00b\\rc\\x7fd\\x9b31m');
    assert.equal(escapeControlChars('ls -la\n\tok ✓ é 日本'), 'ls -la\n\tok ✓ é 日本');
  });
});
