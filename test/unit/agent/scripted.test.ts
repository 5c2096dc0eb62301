// The scripted action model and its commands file, with the real tree-sitter bash grammar: a
// script is cut into actions by its syntax (heredocs, continuations), not its newlines; and every
// bad input of `turnwise episode` is refused before Docker is asked for anything (the Docker-down
// case points DOCKER_HOST at a socket that does not exist: a real refusal, not a mock).
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from '../../../src/cli/main';
import { SCHEMA, type Task } from '../../../src/core/schema';
import { parseCommandFile, ScriptedActionModel } from '../../../src/agent/scripted';
import { parseAction } from '../../../src/agent/action';
import { taskOrigin } from '../../../src/tasks/origin';

const F = '/x/cmds.sh';

describe('agent/scripted: commands files', () => {
  it('one action per line; a heredoc with its body, a continued line and `a; b` stay whole; comments and blank lines go', async () => {
    const text = [
      'tw-suspects',
      '',
      '# look first',
      "cat > fix.py <<'EOF'",
      'import sys',
      'print("a; b")  # not a comment of the script',
      'EOF',
      'python3 fix.py; echo done',
      'grep -n weekly \\',
      '  inventory/reorder.py',
      'tw-test && git diff |',
      '  head -5',
      'echo last # trailing comment',
    ].join('\n');
    const cmds = await parseCommandFile(text, F);
    assert.deepEqual(cmds, [
      'tw-suspects',
      'cat > fix.py <<\'EOF\'\nimport sys\nprint("a; b")  # not a comment of the script\nEOF',
      'python3 fix.py; echo done',
      'grep -n weekly \\\n  inventory/reorder.py',
      'tw-test && git diff |\n  head -5',
      'echo last',
    ]);
    // Each is an action the episode runs as bash (none is a format error).
    for (const c of cmds) assert.equal((await parseAction(c)).kind, 'bash', c);
  });

  it('a trailing submit is dropped; commands after a submit are refused with its line', async () => {
    assert.deepEqual(await parseCommandFile('ls\nsubmit\n', F), ['ls']);
    await assert.rejects(
      parseCommandFile('ls\nsubmit\ntw-test\n', F),
      /\/x\/cmds\.sh:2: `submit` ends the episode, so the 1 command\(s\) after it would never run/,
    );
    await assert.rejects(parseCommandFile('submit\n', F), /holds no commands \(only submit\)/);
  });

  it('a syntax error names its line (where a command ends is then unknown); empty and comment-only files are refused', async () => {
    await assert.rejects(
      parseCommandFile('ls\necho ok\necho "unterminated\n', F),
      (e: Error & { hint?: string }) => /\/x\/cmds\.sh:3: bash syntax error/.test(e.message) && /JSON array/.test(e.hint ?? ''),
    );
    await assert.rejects(parseCommandFile(' \n\n', F), /\/x\/cmds\.sh holds no commands/);
    await assert.rejects(parseCommandFile('# nothing\n# to do\n', F), /holds no commands \(only comments\)/);
    await assert.rejects(
      parseCommandFile(`ls\necho ${'x'.repeat(2100)}\n`, F),
      /cmds\.sh:2: the command is 2105 characters, over the 2000/,
    );
  });

  it('a JSON array is taken verbatim (a malformed action may be sent on purpose); other JSON is refused', async () => {
    assert.deepEqual(await parseCommandFile('["ls -la", "echo \\"(\\"", "cat <<E\\nx\\nE"]', F), ['ls -la', 'echo "("', 'cat <<E\nx\nE']);
    assert.deepEqual(await parseCommandFile('["ls", "submit"]', F), ['ls']);
    await assert.rejects(parseCommandFile('["ls", 3]', F), /element \[1\] is 3, not a command string/);
    await assert.rejects(parseCommandFile('[]', F), /an empty array/);
    await assert.rejects(parseCommandFile('{"cmd": "ls"}', F), /JSON but not an array/);
    await assert.rejects(parseCommandFile('["ls",', '/x/cmds.json'), /cmds\.json is not valid JSON/);
    // A bash test that starts with `[` is bash, not broken JSON.
    assert.deepEqual(await parseCommandFile('[ -f setup.py ] && echo yes\nls', F), ['[ -f setup.py ] && echo yes', 'ls']);
  });

  it('ScriptedActionModel: an episode with k finished turns gets command k, then submit, per episode', async () => {
    const m = new ScriptedActionModel(['ls', 'tw-test']);
    const req = (episodeId: string, k: number) => ({
      episodeId,
      task: 't',
      seed: 0,
      turns: Array.from({ length: k }, () => ({ action: 'x', observation: '' })),
    });
    const r = await m.act([req('a', 0), req('b', 1), req('a', 2), req('c', 5)]);
    assert.deepEqual(
      r.map((x) => x.text),
      ['ls', 'tw-test', 'submit', 'submit'],
    );
    assert.deepEqual(r[0].tokenIds, [...Buffer.from('ls')]);
    assert.deepEqual(r[0].logprobs, [0, 0]);
    assert.ok(r.every((x) => x.finishReason === 'stop'));
  });
});

describe('cli: turnwise episode refuses bad input before any sandbox', () => {
  let dir: string;
  let ws: string;
  let tasks: string;
  let cmds: string;
  const saved = { DOCKER_HOST: process.env.DOCKER_HOST, TURNWISE_DOCKER_ENGINES: process.env.TURNWISE_DOCKER_ENGINES };
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-episode-'));
    ws = path.join(dir, 'ws');
    fs.mkdirSync(path.join(ws, 'calc'), { recursive: true });
    fs.mkdirSync(path.join(ws, 'tests'));
    fs.writeFileSync(path.join(ws, 'calc', 'core.py'), 'def one():\n    return 2\n');
    fs.writeFileSync(path.join(ws, 'tests', 'test_core.py'), 'from calc.core import one\n\ndef test_one():\n    assert one() == 1\n');
    const task = (id: string, withOrigin: boolean): Task => ({
      schema: SCHEMA.task,
      id,
      source: 'mutation',
      instruction: 'make tests/test_core.py::test_one pass',
      language: 'python',
      testCommand: 'python3 -m pytest --junitxml=$TURNWISE_REPORT',
      reportFormat: 'junit-xml',
      runner: 'pytest',
      fail_to_pass: ['tests/test_core.py::test_one'],
      pass_to_pass: [],
      mutation: {
        file: 'calc/core.py',
        nodeKind: 'integer',
        operator: 'change-constant',
        span: { start: 23, end: 24, text: '2' },
        replacement: '2',
      },
      ...(withOrigin ? { origin: taskOrigin(ws, ['calc/core.py']) } : {}),
    });
    tasks = path.join(dir, 'tasks.jsonl');
    fs.writeFileSync(tasks, ['a', 'b', 'c', 'd', 'e', 'f', 'g'].map((id) => JSON.stringify(task(`mut-${id}`, true))).join('\n') + '\n');
    fs.writeFileSync(path.join(dir, 'old.jsonl'), JSON.stringify(task('mut-old', false)) + '\n');
    cmds = path.join(dir, 'cmds.sh');
    fs.writeFileSync(cmds, 'ls\n');
  });
  after(() => {
    fs.rmSync(dir, { recursive: true, force: true });
    for (const [k, v] of Object.entries(saved))
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
  });

  async function cli(argv: string[]) {
    let out = '';
    let err = '';
    const code = await main(argv, { out: (t) => (out += t + '\n'), err: (t) => (err += t + '\n') });
    return { code, out, err };
  }

  it('an unknown id lists a few known ones', async () => {
    const r = await cli(['episode', '--tasks', tasks, '--id', 'mut-zz', '--commands', cmds]);
    assert.equal(r.code, 1);
    assert.match(r.err, /has no task "mut-zz"; its 7 task\(s\) include mut-a, mut-b, mut-c, mut-d, mut-e, …/);
    assert.match(r.err, /→ give --id one of the ids/);
  });

  it('an empty commands file, a missing one, and missing flags', async () => {
    const empty = path.join(dir, 'empty.sh');
    fs.writeFileSync(empty, '\n\n');
    const r = await cli(['episode', '--tasks', tasks, '--id', 'mut-a', '--commands', empty]);
    assert.equal(r.code, 1);
    assert.match(r.err, /empty\.sh holds no commands\n {2}→ write one bash command per line/);
    assert.match(
      (await cli(['episode', '--tasks', tasks, '--id', 'mut-a', '--commands', path.join(dir, 'nope.sh')])).err,
      /cannot read commands file .*nope\.sh: it does not exist/,
    );
    const usage = await cli(['episode', '--tasks', tasks, '--commands', cmds]);
    assert.equal(usage.code, 2);
    assert.match(usage.err, /--id is required\nusage: turnwise episode --tasks FILE --id TASK \(--commands FILE \| --endpoint URL/);
  });

  it("more commands than turns, a workspace without the task's files, an old file without --workspace", async () => {
    const many = path.join(dir, 'many.sh');
    fs.writeFileSync(many, 'ls\nls\nls\n');
    assert.match(
      (await cli(['episode', '--tasks', tasks, '--id', 'mut-a', '--commands', many, '--max-turns', '2'])).err,
      /3 commands do not fit in 2 turns[\s\S]*→ give --max-turns 3 or more/,
    );
    const other = path.join(dir, 'other');
    fs.mkdirSync(other);
    const r = await cli(['episode', '--tasks', tasks, '--id', 'mut-a', '--commands', cmds, '--workspace', other, '--json']);
    assert.equal(r.code, 1);
    const j = JSON.parse(r.out);
    assert.ok(j.error.message.includes(`was made from ${ws}; the workspace ${other} does not hold its files`), j.error.message);
    assert.match(
      (await cli(['episode', '--tasks', path.join(dir, 'old.jsonl'), '--id', 'mut-old', '--commands', cmds])).err,
      /does not record the workspace[\s\S]*→ give --workspace DIR/,
    );
  });

  it('Docker down: the engine error with its fix, after every file was checked', async () => {
    delete process.env.TURNWISE_DOCKER_ENGINES;
    process.env.DOCKER_HOST = `unix://${path.join(dir, 'no-docker.sock')}`;
    const r = await cli(['episode', '--tasks', tasks, '--id', 'mut-a', '--commands', cmds, '--json']);
    assert.equal(r.code, 1);
    const j = JSON.parse(r.out);
    assert.equal(j.error.code, 'docker-unreachable');
    assert.match(j.error.message, /no-docker\.sock/);
    assert.match(j.error.hint, /start the Docker engine/);
  });
});
