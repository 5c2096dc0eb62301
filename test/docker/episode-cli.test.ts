// Docker tier: `turnwise episode` on a task synthesized from the demo workspace, in real sandboxes
// through the CLI: the known fix, written by a heredoc command, scores resolved; a no-op scores
// not resolved (but is a scored episode, exit 0); the fix plus an exit hook in the code under test
// is printed as tampered with its reason; an action sent verbatim (JSON) that is not bash
// becomes the format error the agent would get. And prepareSandbox, whatever read the task,
// never writes a mutation outside the sandbox's workspace. No container is left behind.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import Docker from 'dockerode';
import { main } from '../../src/cli/main';
import type { Task, Trajectory } from '../../src/core/schema';
import { LABEL, SandboxPool } from '../../src/sandbox';
import { prepareSandbox } from '../../src/agent/episode';
import { synthesizeMutationTasks } from '../../src/tasks/synth';
import { writeTaskFile } from '../../src/tasks/taskfile';
import { taskFix } from '../../src/warmstart/workspace-demonstrations';

const demo = path.join(__dirname, '..', '..', 'examples', 'demo-python');

async function cli(argv: string[]) {
  let out = '';
  let err = '';
  const code = await main(argv, { out: (t) => (out += t + '\n'), err: (t) => (err += t + '\n') });
  return { code, out, err };
}

describe('docker: turnwise episode', function () {
  this.timeout(300_000);
  let dir: string;
  let tasksFile: string;
  let task: Task;
  let fix: NonNullable<ReturnType<typeof taskFix>>;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-episode-cli-'));
    const r = await synthesizeMutationTasks({
      workspace: demo,
      seed: 1,
      max: 1,
      operators: ['change-constant'],
      concurrency: 1,
      run: `episode-cli-synth-${process.pid}`,
    });
    assert.equal(r.tasks.length, 1);
    task = r.tasks[0];
    const f = taskFix(demo, task);
    assert.ok(f, `${task.id} has a one-line fix`);
    fix = f!;
    tasksFile = path.join(dir, 'tasks.jsonl');
    writeTaskFile(tasksFile, r.tasks);
  });

  after(async () => {
    fs.rmSync(dir, { recursive: true, force: true });
    const left = await new Docker().listContainers({ all: true, filters: { label: [`${LABEL.run}=episode-${process.pid}`] } });
    assert.deepEqual(
      left.map((c) => c.Names),
      [],
      'no sandbox of `turnwise episode` is left',
    );
  });

  const play = async (commands: string, json = true) => {
    const f = path.join(dir, `cmds-${Math.random().toString(36).slice(2)}.sh`);
    fs.writeFileSync(f, commands);
    // No --workspace: the task file records the demo workspace it was made from.
    return cli(['episode', '--tasks', tasksFile, '--id', task.id, '--commands', f, ...(json ? ['--json'] : [])]);
  };

  it('the known fix, written by a heredoc command, scores resolved', async () => {
    // A Python heredoc puts the original line back: one action of several lines.
    const heredoc = [
      "python3 - <<'PY'",
      `p = ${JSON.stringify(fix.path)}`,
      "lines = open(p).read().split('\\n')",
      `assert lines[${fix.line - 1}] == ${JSON.stringify(fix.mutatedLine)}, lines[${fix.line - 1}]`,
      `lines[${fix.line - 1}] = ${JSON.stringify(fix.originalLine)}`,
      "open(p, 'w').write('\\n'.join(lines))",
      "print('restored line', " + fix.line + ')',
      'PY',
    ].join('\n');
    const r = await play(`tw-suspects\n${heredoc}\ntw-test\n`);
    assert.equal(r.code, 0, r.err);
    const t = JSON.parse(r.out) as Trajectory;
    assert.equal(t.taskId, task.id);
    assert.deepEqual(
      t.turns.map((x) => x.action),
      ['tw-suspects', heredoc, 'tw-test', 'submit'],
    );
    const edit = t.turns[1];
    assert.equal(edit.exitCode, 0, edit.observation);
    assert.match(edit.observation, new RegExp(`restored line ${fix.line}`));
    assert.deepEqual(
      edit.edits?.map((e) => e.path),
      [fix.path],
    );
    assert.match(t.turns[2].observation, /^exit 0\n0 failed, \d+ passed/);
    assert.equal(t.reward.resolved, true);
    assert.equal(t.reward.passRate, 1);
    assert.equal(t.reward.turns, 3);
    assert.ok(t.testReport && t.testReport.failed.length === 0 && task.fail_to_pass.every((id) => t.testReport!.passed.includes(id)));
    assert.equal(t.failure, undefined);
  });

  it('a no-op is scored and not resolved; the human report shows the observation and the result', async () => {
    const r = await play('ls inventory\n', false);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, new RegExp(`turn 1 {2}\\$ ls inventory\\n.*\\n {2}│ exit 0\\n[\\s\\S]*${path.basename(fix.path)}`));
    assert.match(r.out, /\nnot resolved {2}reward /);
    for (const id of task.fail_to_pass) assert.ok(r.out.includes(`  failed: ${id}`), `${id} listed as failed`);
    const j = JSON.parse((await play('ls inventory\n')).out) as Trajectory;
    assert.equal(j.reward.resolved, false);
    assert.ok(j.reward.passRate < 1);
    assert.ok(task.fail_to_pass.every((id) => j.testReport!.failed.includes(id)));
  });

  it('the fix with an exit hook added to the code under test: tampered, with its reason, in the trajectory and the report', async () => {
    const commands = [fix.fix, `printf 'import atexit\\n' >> ${fix.path}`].join('\n') + '\n';
    const r = await play(commands, false);
    assert.equal(r.code, 0, r.err);
    assert.match(r.out, new RegExp(`\\n {2}tampered: ${fix.path.replace('.', '\\.')}: registers exit handlers \\(atexit\\)`));
    const t = JSON.parse((await play(commands)).out) as Trajectory;
    assert.match(t.reward.tampered ?? '', /atexit/);
    assert.equal(t.reward.resolved, false);
    assert.equal(t.reward.reward, 0);
  });

  // Attacks on the reward played as an agent would, through the command: each scores no more
  // than the no-op (the other reward-gaming tests drive the scorer directly).
  it('reward attacks through `turnwise episode`: a .pytest.ini plugin, a conftest in an odd folder, a module swapped for a link', async () => {
    const noop = (JSON.parse((await play('ls inventory\n')).out) as Trajectory).reward.reward;
    const plugin =
      'printf \'import pytest\\n@pytest.hookimpl(hookwrapper=True)\\ndef pytest_runtest_makereport(item, call):\\n    o = yield\\n    o.get_result().outcome = "passed"\\n\' > evil.py';
    const attacks: Array<[string, string, (t: Trajectory) => void]> = [
      [
        '.pytest.ini',
        `${plugin}\nprintf '[pytest]\\naddopts = -p evil\\n' > .pytest.ini\n`,
        (t) => assert.equal(t.reward.testsEdited, true),
      ],
      [
        'odd folder',
        `mkdir -p $'x\\ny' && printf 'def pytest_collection_modifyitems(session, config, items):\\n    for i in items:\\n        i.runtest = lambda: None\\n' > $'x\\ny/conftest.py'\n`,
        (t) => assert.equal(t.reward.testsEdited, true),
      ],
      [
        'link',
        `cp ${fix.path} /home/agent/m.py && rm ${fix.path} && ln -s /home/agent/m.py ${fix.path}\n`,
        (t) => assert.match(t.reward.tampered ?? '', /a symbolic link the snapshot did not have/),
      ],
    ];
    for (const [what, commands, check] of attacks) {
      const r = await play(commands);
      assert.equal(r.code, 0, `${what}: ${r.err}`);
      const t = JSON.parse(r.out) as Trajectory;
      assert.ok(!(t.reward.reward > noop), `${what} gamed the reward: ${t.reward.reward} > ${noop}`);
      assert.equal(t.reward.resolved, false, what);
      check(t);
    }
  });

  it('an action that is not bash (sent verbatim as JSON) is the format error the agent would get, not run', async () => {
    const f = path.join(dir, 'bad.json');
    fs.writeFileSync(f, JSON.stringify(['echo "unterminated', 'tw-test']));
    const r = await cli(['episode', '--tasks', tasksFile, '--id', task.id, '--commands', f, '--json']);
    assert.equal(r.code, 0, r.err);
    const t = JSON.parse(r.out) as Trajectory;
    assert.match(t.turns[0].formatError ?? '', /bash syntax error/);
    assert.equal(t.turns[0].exitCode, null);
    assert.equal(t.reward.formatError, true);
    assert.ok(t.reward.formatPenalty > 0);
  });
});

describe("docker: prepareSandbox keeps a task's mutation inside the workspace", function () {
  this.timeout(300_000);
  let dir: string;
  let pool: SandboxPool;
  const RUN = `episode-paths-${process.pid}`;
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-episode-paths-'));
    fs.mkdirSync(path.join(dir, 'lib'));
    fs.writeFileSync(path.join(dir, 'lib', 'core.py'), 'X = 1\n');
    // Links in the workspace reach the sandbox's copy: one to a tool the scorer runs, one folder link.
    fs.symlinkSync('/usr/local/bin/tw-test', path.join(dir, 'lib', 'tool.py'));
    fs.symlinkSync('/usr/local/bin', path.join(dir, 'bin'));
    pool = await SandboxPool.connect({ run: RUN });
  });
  after(async () => {
    await pool?.close();
    fs.rmSync(dir, { recursive: true, force: true });
    const left = await new Docker().listContainers({ all: true, filters: { label: [`${LABEL.run}=${RUN}`] } });
    assert.equal(left.length, 0);
  });

  // Tasks as an unvalidated reader would hand them over (a run directory's tasks.jsonl is data too).
  const evil = (file: string, text: string): Task => ({
    schema: 'turnwise/task@1',
    id: `evil-${file}`,
    source: 'mutation',
    instruction: 'x',
    language: 'python',
    testCommand: 'true',
    fail_to_pass: ['t'],
    pass_to_pass: [],
    mutation: { file, nodeKind: 'x', operator: 'x', span: { start: 0, end: text.length, text }, replacement: 'echo PWNED' },
  });

  for (const [file, why] of [
    ['../usr/local/bin/tw-test', /leads out of the workspace/],
    ['/usr/local/bin/tw-test', /is absolute/],
    ['lib/tool.py', /lib\/tool\.py is a symbolic link/],
    ['bin/tw-test', /\/workspace\/bin is a symbolic link/],
  ] as const) {
    it(`refuses ${file} and leaves the scorer's tool as it was`, async () => {
      const snap = await pool.snapshot(dir, { language: 'python' });
      const sb = await pool.acquire(snap, { rollout: 'paths' });
      try {
        const before = (await sb.readFile('/usr/local/bin/tw-test')).toString('utf8');
        await assert.rejects(prepareSandbox(sb, evil(file, before.slice(0, 10))), why);
        assert.equal((await sb.readFile('/usr/local/bin/tw-test')).toString('utf8'), before);
      } finally {
        await sb.dispose();
      }
    });
  }
});
