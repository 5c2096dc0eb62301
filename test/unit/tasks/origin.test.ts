// Task files are untrusted input: a mutation path must stay inside the workspace (every reader
// refuses it with the line number), and a task file records the workspace it was made from, so
// `eval`, `train` and `episode` on a workspace that lacks those files are refused before any
// sandbox starts, naming both folders. No Docker: every refusal here happens before one is needed.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from '../../../src/cli/main';
import { allEpisodesFailed } from '../../../src/core/trajectory';
import { SCHEMA, type Task, type Trajectory } from '../../../src/core/schema';
import { assertWorkspaceHoldsTasks, taskOrigin, workspaceFileProblem, workspacePathProblem } from '../../../src/tasks/origin';
import { checkTaskFile, parseTaskFile, readTaskFile, validateTask } from '../../../src/tasks/taskfile';

const SOURCE = 'def total(xs):\n    return sum(xs) + 1\n';
const mutation = (file: string): Task => ({
  schema: SCHEMA.task,
  id: 'mut-1',
  source: 'mutation',
  instruction: 'make tests/test_calc.py::test_total pass',
  language: 'python',
  testCommand: 'python3 -m pytest --junitxml=$TURNWISE_REPORT',
  reportFormat: 'junit-xml',
  runner: 'pytest',
  fail_to_pass: ['tests/test_calc.py::test_total'],
  pass_to_pass: [],
  mutation: {
    file,
    nodeKind: 'integer',
    operator: 'off-by-one',
    span: { start: SOURCE.indexOf('1'), end: SOURCE.indexOf('1') + 1, text: '1' },
    replacement: '2',
  },
});

async function cli(argv: string[]) {
  let out = '';
  let err = '';
  const code = await main(argv, { out: (t) => (out += t + '\n'), err: (t) => (err += t + '\n') });
  return { code, out, err };
}

/** A small pytest workspace: calc/core.py and its test. */
function makeWorkspace(dir: string): string {
  fs.mkdirSync(path.join(dir, 'calc'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'tests'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'calc', 'core.py'), SOURCE);
  fs.writeFileSync(
    path.join(dir, 'tests', 'test_calc.py'),
    'from calc.core import total\n\ndef test_total():\n    assert total([1]) == 2\n',
  );
  return dir;
}

const HOSTILE = [
  ['../../../etc/passwd', /leads out of the workspace/],
  ['calc/../../x.py', /leads out of the workspace/],
  ['/etc/passwd', /is absolute/],
  ['C:/Windows/win.ini', /is absolute/],
  ['calc\\core.py', /backslash/],
  ['./calc/core.py', /not normalized \(write "calc\/core.py"\)/],
  ['calc//core.py', /not normalized/],
  ['calc/core.py/', /not normalized/],
  ['calc/./core.py', /not normalized/],
  ['.git/hooks/pre-commit', /inside \.git/],
  ['calc/core\u0000.py', /control character/],
] as const;

describe('tasks/origin: paths inside the workspace', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-origin-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('a plain relative path is fine; each way out of the workspace has its reason', () => {
    assert.equal(workspacePathProblem('calc/core.py'), undefined);
    assert.equal(workspacePathProblem('a..b/c.py'), undefined, 'dots inside a name are not a way up');
    for (const [p, why] of HOSTILE) assert.match(workspacePathProblem(p) ?? '', why, p);
  });

  it('validateTask refuses each hostile mutation.file; a task file reports it with the line number', () => {
    assert.deepEqual(validateTask(mutation('calc/core.py')), []);
    for (const [p, why] of HOSTILE) {
      const reasons = validateTask(mutation(p));
      assert.equal(reasons.length, 1, `${p}: ${reasons.join('; ')}`);
      assert.match(reasons[0], why);
      assert.match(reasons[0], /^mutation\.file /);
    }
    const text = [JSON.stringify(mutation('calc/core.py')), JSON.stringify({ ...mutation('../../../etc/passwd'), id: 'evil' })].join('\n');
    const { tasks, errors } = parseTaskFile(text);
    assert.deepEqual(
      tasks.map((t) => t.id),
      ['mut-1'],
    );
    assert.deepEqual(
      errors.map((e) => e.line),
      [2],
    );
    const f = path.join(dir, 'tasks.jsonl');
    fs.writeFileSync(f, text + '\n');
    assert.throws(() => readTaskFile(f), /tasks\.jsonl:2: mutation\.file "\.\.\/\.\.\/\.\.\/etc\/passwd" leads out of the workspace/);
    const check = checkTaskFile(f);
    assert.equal(check.ok, false);
    assert.deepEqual(
      check.errors.map((e) => e.line),
      [2],
    );
  });

  it('`tasks check` exits 1 on ../../../etc/passwd and names the line', async () => {
    const f = path.join(dir, 'tasks.jsonl');
    fs.writeFileSync(f, JSON.stringify(mutation('../../../etc/passwd')) + '\n');
    const r = await cli(['tasks', 'check', f]);
    assert.equal(r.code, 1);
    assert.match(r.out, /tasks\.jsonl:1: mutation\.file "\.\.\/\.\.\/\.\.\/etc\/passwd" leads out of the workspace/);
  });

  it('a malformed origin record is refused field by field', () => {
    const t = mutation('calc/core.py');
    assert.deepEqual(validateTask({ ...t, origin: { workspace: '/w', files: { 'calc/core.py': 'a'.repeat(64) } } }), []);
    const reasons = validateTask({ ...t, origin: { workspace: 'rel/ws', files: { '../x': 'a'.repeat(64), 'ok.py': 'nothex' }, extra: 1 } });
    assert.deepEqual(reasons.length, 4, reasons.join('; '));
    assert.match(reasons.join('|'), /origin\.workspace must be the absolute path/);
    assert.match(reasons.join('|'), /origin\.files path "\.\.\/x" leads out/);
    assert.match(reasons.join('|'), /origin\.files\["ok\.py"\] must be a sha256/);
    assert.match(reasons.join('|'), /unknown field "origin\.extra"/);
    assert.match(validateTask({ ...t, origin: 'here' })[0], /origin must be an object/);
  });

  it('on the host, a link anywhere on the path is refused, and so is a missing file or a folder', () => {
    const ws = makeWorkspace(path.join(dir, 'ws'));
    const outside = path.join(dir, 'outside');
    fs.mkdirSync(outside);
    fs.writeFileSync(path.join(outside, 'secret.py'), 'x = 1\n');
    fs.symlinkSync(path.join(outside, 'secret.py'), path.join(ws, 'calc', 'link.py'));
    fs.symlinkSync(outside, path.join(ws, 'linked'));
    assert.equal(workspaceFileProblem(ws, 'calc/core.py'), undefined);
    assert.equal(workspaceFileProblem(ws, 'calc/link.py'), 'is a symbolic link');
    assert.equal(workspaceFileProblem(ws, 'linked/secret.py'), 'goes through the symbolic link linked');
    assert.equal(workspaceFileProblem(ws, 'calc/nope.py'), 'does not exist');
    assert.equal(workspaceFileProblem(ws, 'nope/x.py'), 'does not exist (no folder nope)');
    assert.equal(workspaceFileProblem(ws, 'calc/core.py/x'), 'does not exist (calc/core.py is a file)');
    assert.equal(workspaceFileProblem(ws, 'calc'), 'is not a regular file');
    assert.match(workspaceFileProblem(ws, '../outside/secret.py') ?? '', /leads out/);
  });
});

describe('tasks/origin: the workspace a task file was made from', () => {
  let dir: string;
  let made: string;
  let other: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-origin-'));
    made = makeWorkspace(path.join(dir, 'made'));
    other = path.join(dir, 'other');
    fs.mkdirSync(path.join(other, 'tests'), { recursive: true });
    fs.writeFileSync(path.join(other, 'tests', 'test_other.py'), 'def test_x():\n    pass\n');
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  const withOrigin = (): Task => ({ ...mutation('calc/core.py'), origin: taskOrigin(made, ['calc/core.py']) });

  it("taskOrigin records the folder and each file's sha256, and leaves out what is not a plain file", () => {
    fs.symlinkSync(path.join(made, 'calc', 'core.py'), path.join(made, 'calc', 'alias.py'));
    const o = taskOrigin(made, ['calc/core.py', 'calc/alias.py', 'calc/missing.py']);
    assert.equal(o.workspace, made);
    assert.deepEqual(Object.keys(o.files), ['calc/core.py']);
    assert.match(o.files['calc/core.py'], /^[0-9a-f]{64}$/);
    assert.deepEqual(validateTask(withOrigin()), [], 'what taskOrigin writes, validateTask reads');
  });

  it('the workspace it was made from holds the tasks; another is refused naming both folders', () => {
    assertWorkspaceHoldsTasks([withOrigin()], made, 'tasks.jsonl');
    assert.throws(
      () => assertWorkspaceHoldsTasks([withOrigin()], other, '/x/tasks.jsonl'),
      (e: Error & { code?: string; hint?: string }) => {
        assert.equal(e.code, 'invalid-input');
        assert.ok(e.message.includes(`/x/tasks.jsonl was made from ${made}; the workspace ${other} does not hold its files`), e.message);
        assert.match(e.message, /1 of 1 task\(s\) cannot be posed; nothing was run/);
        assert.match(e.message, /task mut-1: calc\/core\.py does not exist \(no folder calc\)/);
        assert.ok(e.hint!.includes(`--workspace ${made}`), e.hint);
        assert.ok(e.hint!.includes(`turnwise tasks synth --workspace ${other}`), e.hint);
        return true;
      },
    );
  });

  it('the same folder with the file edited since (even away from the span) is refused as changed', () => {
    const task = withOrigin();
    fs.appendFileSync(path.join(made, 'calc', 'core.py'), '\n# a comment\n');
    assert.throws(
      () => assertWorkspaceHoldsTasks([task], made, 'tasks.jsonl'),
      new RegExp(`tasks\\.jsonl was made from ${made}, which changed since[\\s\\S]*calc/core\\.py is not the file the task was made from`),
    );
  });

  it('an old task file (no origin): a missing file or a span the file no longer holds is refused; a matching one runs', () => {
    const old = mutation('calc/core.py');
    assertWorkspaceHoldsTasks([old], made, 'old.jsonl');
    assert.throws(
      () => assertWorkspaceHoldsTasks([old], other, 'old.jsonl'),
      new RegExp(`old\\.jsonl does not record the workspace it was made from.*${other} does not hold its files`),
    );
    fs.writeFileSync(path.join(made, 'calc', 'core.py'), SOURCE.replace('+ 1', '+ 7'));
    assert.throws(() => assertWorkspaceHoldsTasks([old], made, 'old.jsonl'), /calc\/core\.py does not hold "1" at/);
    // A failing-tests task of an old file names no file: nothing to check, it runs as before.
    assertWorkspaceHoldsTasks([{ ...old, source: 'failing-tests', mutation: undefined }], other, 'old.jsonl');
  });

  it('`tasks check` says which workspace the tasks were made from, or that an old file records none', async () => {
    const f = path.join(dir, 'tasks.jsonl');
    fs.writeFileSync(f, [JSON.stringify(withOrigin()), JSON.stringify({ ...mutation('calc/core.py'), id: 'mut-old' })].join('\n') + '\n');
    const r = await cli(['tasks', 'check', f]);
    assert.equal(r.code, 0, r.err);
    assert.ok(r.out.includes(`2 valid task(s) (mutation 2), made from ${made}`), r.out);
    assert.deepEqual(checkTaskFile(f).madeFrom, [made]);
    fs.writeFileSync(f, JSON.stringify(mutation('calc/core.py')) + '\n');
    assert.match((await cli(['tasks', 'check', f])).out, /1 valid task\(s\) \(mutation 1\), no workspace recorded \(an older task file\)/);
  });

  it('`eval --tasks` on another workspace is refused before any sandbox, with both folders named (exit 1)', async () => {
    const f = path.join(dir, 'tasks.jsonl');
    fs.writeFileSync(f, JSON.stringify(withOrigin()) + '\n');
    const r = await cli(['eval', '--tasks', f, '--workspace', other, '--json']);
    assert.equal(r.code, 1, r.err);
    const j = JSON.parse(r.out);
    assert.equal(j.ok, false);
    assert.equal(j.error.code, 'invalid-input');
    assert.ok(j.error.message.includes(`was made from ${made}; the workspace ${other} does not hold its files`), j.error.message);
  });

  it('`train --tasks` on another workspace is refused before any sandbox and leaves no run directory', async () => {
    const f = path.join(dir, 'tasks.jsonl');
    fs.writeFileSync(f, JSON.stringify(withOrigin()) + '\n');
    const runs = path.join(dir, 'runs');
    const r = await cli(['train', '--tasks', f, '--workspace', other, '--runs', runs, '--iterations', '1']);
    assert.equal(r.code, 1, r.err);
    assert.ok(r.err.includes(`was made from ${made}; the workspace ${other} does not hold its files`), r.err);
    assert.equal(fs.existsSync(runs), false, 'no run directory was created');
  });
});

describe('core/trajectory: allEpisodesFailed', () => {
  const traj = (trajId: string, failure?: string): Trajectory => ({
    schema: SCHEMA.trajectory,
    taskId: 't',
    groupId: 'g',
    trajId,
    checkpoint: 'c',
    turns: [],
    reward: {
      passRate: failure ? NaN : 0,
      resolved: false,
      turns: 0,
      maxTurns: 4,
      formatError: false,
      efficiencyPenalty: 0,
      formatPenalty: 0,
      reward: failure ? NaN : 0,
    },
    ...(failure ? { failure } : {}),
  });

  it('an error with the reasons, most frequent first, only when every episode failed', () => {
    assert.equal(allEpisodesFailed([], 'h'), undefined);
    assert.equal(allEpisodesFailed([traj('a', 'x'), traj('b')], 'h'), undefined, 'one scored episode (even a reward of 0) is a result');
    const e = allEpisodesFailed(
      [
        traj('a', '/workspace/inflection/__init__.py does not exist'),
        traj('b', 'docker gone'),
        traj('c', '/workspace/inflection/__init__.py does not exist'),
      ],
      'see the reasons',
    );
    assert.ok(e);
    assert.match(
      e.message,
      /every one of the 3 episode\(s\) failed[\s\S]*2× \/workspace\/inflection\/__init__\.py does not exist\n {2}1× docker gone/,
    );
    assert.equal(e.hint, 'see the reasons');
  });

  it('`eval --from` a file whose every episode failed exits 1 with the reasons; one scored episode makes it a result', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-allfailed-'));
    try {
      const f = path.join(dir, 'eval.jsonl');
      const failed = [
        traj('eval-0-0', '/workspace/inflection/__init__.py does not exist in sandbox x'),
        traj('eval-0-1', '/workspace/inflection/__init__.py does not exist in sandbox x'),
      ];
      fs.writeFileSync(f, failed.map((t) => JSON.stringify(t)).join('\n') + '\n');
      const r = await cli(['eval', '--from', f, '--json']);
      assert.equal(r.code, 1);
      const j = JSON.parse(r.out);
      assert.equal(j.ok, false);
      assert.equal(j.error.code, 'sandbox-failed');
      assert.match(j.error.message, /every one of the 2 episode\(s\) failed[\s\S]*2× \/workspace\/inflection\/__init__\.py does not exist/);
      fs.writeFileSync(f, [...failed, traj('eval-0-2')].map((t) => JSON.stringify(t)).join('\n') + '\n');
      const ok = await cli(['eval', '--from', f, '--json']);
      assert.equal(ok.code, 0, ok.err);
      assert.equal(JSON.parse(ok.out).ok, true);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
