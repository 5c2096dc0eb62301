// sedRestores is the warm start's "any correct fix" metric: it runs the policy's command with the
// system's sed on the mutated line, so an equivalent command counts and a near miss does not.
import * as assert from 'node:assert/strict';
import { sedRestores } from '../../../src/train/warmstart';

const c = { path: 'shop/grid.py', line: 12, mutatedLine: '    return size >= 7 and a.b', originalLine: '    return size > 7 and a.b' };

describe('train/warmstart: sedRestores (a generated command fixes the mutated line when run)', () => {
  it('the demonstrated command and an equivalent one restore the line', () => {
    assert.equal(sedRestores("sed -i '12s/>=/>/' shop/grid.py", c), true);
    assert.equal(sedRestores("sed -i '12s/size >= 7/size > 7/' shop/grid.py", c), true);
    assert.equal(sedRestores("sed -i '12s/>= 7/> 7/g' shop/grid.py", c), true);
  });
  it('a wrong line, file, direction or a broken script does not', () => {
    assert.equal(sedRestores("sed -i '11s/>=/>/' shop/grid.py", c), false);
    assert.equal(sedRestores("sed -i '12s/>=/>/' shop/grids.py", c), false);
    assert.equal(sedRestores("sed -i '12s/>=/</' shop/grid.py", c), false);
    assert.equal(sedRestores("sed -i '12s/>=/>' shop/grid.py", c), false);
    assert.equal(sedRestores('tw-test', c), false);
  });
  it('sed regex semantics, not string replace: an unescaped dot matches any character', () => {
    // `a.b` as a pattern also matches `axb`; here it matches itself, and the replacement is literal.
    assert.equal(sedRestores("sed -i '12s/>= 7 and a.b/> 7 and a.b/' shop/grid.py", c), true);
    assert.equal(sedRestores("sed -i '12s/.*/    return size > 7 and a.b/' shop/grid.py", c), true);
  });
});
