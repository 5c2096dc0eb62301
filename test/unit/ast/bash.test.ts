import { strict as assert } from 'node:assert';
import { createBashSigner, createJoinedSigner, normalizeSurface } from '../../../src/ast/bash';

describe('ast/bash intent signatures (real tree-sitter-bash)', () => {
  let sign: (bash: string) => string[];
  let joined: (commands: readonly string[]) => string[];
  before(async () => {
    sign = await createBashSigner();
    joined = await createJoinedSigner();
  });

  it('deeply nested command substitutions (agent output) sign without overflowing the stack', () => {
    // 20000 levels: the recursive walk threw RangeError (Maximum call stack size exceeded) at ~5000.
    const n = 20000;
    const sig = sign('$('.repeat(n) + 'x' + ')'.repeat(n));
    assert.equal(sig.length, n + 1);
    assert.deepEqual(sig.slice(0, 2), ['V:?', 'V:?']);
    assert.equal(sig[n], 'V:x');
  });

  it('list with && : K:list, verbs, literals; raw_string arguments are not literals', () => {
    assert.deepEqual(sign("sed -i 's/a/b/' src/x.py && python -m pytest -q tests/test_x.py"), [
      'K:list',
      'V:sed',
      'W:-i',
      'W:src/x.py',
      'V:python',
      'W:-m',
      'W:pytest',
      'W:-q',
      'W:tests/test_x.py',
    ]);
  });

  it('pipelines and double-quoted strings (string_content, variable_name, trimmed and lowercased)', () => {
    assert.deepEqual(sign('echo "Hi $X" | grep -c "A b"'), ['K:pipeline', 'V:echo', 'W:hi', 'W:x', 'V:grep', 'W:-c', 'W:a b']);
  });

  it('subshells, and ; separated commands at top level (no list node)', () => {
    assert.deepEqual(sign('(cd d; make) ; ls'), ['K:subshell', 'V:cd', 'W:d', 'V:make', 'V:ls']);
  });

  it('|| list and negation', () => {
    assert.deepEqual(sign('! grep -q x f || echo no'), ['K:list', 'K:negated_command', 'V:grep', 'W:-q', 'W:x', 'W:f', 'V:echo', 'W:no']);
  });

  it('heredoc: redirected_statement; the body and the file redirect hang off the statement, not the command', () => {
    assert.deepEqual(sign("cat <<'EOF' > fix.py\nprint(1)\nEOF"), ['K:redirected_statement', 'V:cat']);
    assert.deepEqual(sign('python3 - <<EOF\nimport os\nEOF'), ['K:redirected_statement', 'V:python3']);
  });

  it('arithmetic expansion literals are skipped; nested command substitutions sign themselves after the outer literals', () => {
    assert.deepEqual(sign('echo $((a + 2)) $(ls -la) done'), ['V:echo', 'W:done', 'V:ls', 'W:-la']);
  });

  it('true, false and : become :noop; a quoted or variable verb is ?', () => {
    assert.deepEqual(sign('true'), ['V::noop']);
    assert.deepEqual(sign('false && :'), ['K:list', 'V::noop', 'V::noop']);
    assert.deepEqual(sign('if [ -f x ]; then :; fi'), ['K:if_statement', 'V::noop']);
    // a quoted verb parses as a `string`, so the verb is `?` and its content is a literal
    assert.deepEqual(sign('"My Cmd" x'), ['V:?', 'W:my cmd', 'W:x']);
    assert.deepEqual(sign('$CMD arg'), ['V:?', 'W:cmd', 'W:arg']);
  });

  it('control kinds: for/do_group, function_definition/compound_statement, case_item, variable assignments', () => {
    assert.deepEqual(sign('for i in 1 2; do echo $i; done'), ['K:for_statement', 'K:do_group', 'V:echo', 'W:i']);
    assert.deepEqual(sign('f() { ls; }'), ['K:function_definition', 'K:compound_statement', 'V:ls']);
    assert.deepEqual(sign('case $x in a) ls;; esac'), ['K:case_statement', 'K:case_item', 'V:ls']);
    assert.deepEqual(sign('FOO=1 make test'), ['V:make', 'W:foo', 'W:1', 'W:test']);
  });

  it('as the release: a literal command name of any kind is never a W: token, and literals are not descended into', () => {
    assert.deepEqual(sign('42'), ['V:?']);
    assert.deepEqual(sign('42 x'), ['V:?', 'W:x']);
    assert.deepEqual(sign('echo 16#${x}'), ['V:echo', 'W:16#${x}']);
  });

  it('normalization: trim, strip quotes, lowercase, 96 characters', () => {
    assert.equal(normalizeSurface(`  "'ABC'" `), 'abc');
    assert.equal(normalizeSurface('x'.repeat(200)).length, 96);
  });

  it('joined signer equals signing the joined text, including commands that reach into the next line', () => {
    const cmds = [
      'ls -la',
      'cat <<EOF > a.py\nx = 1\nEOF',
      'echo a \\',
      'grep -rn "foo" src | head',
      "echo 'unterminated",
      'python -m pytest -q',
      'cd src && make',
    ];
    for (let i = 0; i < cmds.length; i++) {
      for (let j = 0; j < cmds.length; j++) {
        const pair = [cmds[i], cmds[j]];
        assert.deepEqual(joined(pair), sign(pair.join('\n')), JSON.stringify(pair));
      }
    }
    // a trailing backslash joins the next line into the same command
    assert.deepEqual(joined(['echo a \\', 'ls']), ['V:echo', 'W:a', 'W:ls']);
  });
});
