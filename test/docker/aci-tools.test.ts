// Docker tier: the numbered-suspect commands of the Python sandbox (`tw-suspects -n`, `tw-show K`,
// `tw-tokens K`, `tw-edit K OLD NEW`, `tw-cands K`, `tw-apply K J`), run for real in episodes of a
// mutation task: what each prints, that the read-only ones change no file, that `tw-edit` and
// `tw-apply` change only the line they name and refuse everything else (text not on the line, a
// variant not listed, test files, paths outside the workspace, a ranking file the agent forged),
// and that the reward is the one the code earns: calling the tools scores exactly as doing
// nothing, and a fix through `tw-edit` or `tw-apply` exactly as the same fix by sed. The sandbox's
// `tw-cands` and the demonstrations' lineCandidates are held to the same lists on real source.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { SandboxPool, type PoolSnapshot } from '../../src/sandbox';
import { shellQuote } from '../../src/sandbox/shell';
import type { Task, Trajectory } from '../../src/core/schema';
import { synthesizeMutationTasks } from '../../src/tasks/synth';
import { writeTaskFile } from '../../src/tasks/taskfile';
import { collectOriginals, type ScoringOriginals } from '../../src/tasks/testfiles';
import {
  ObservationCache,
  poolProvider,
  REQUIRED_TESTS_FILE,
  runRollouts,
  type ActionModel,
  type ActRequest,
  type ActResult,
} from '../../src/agent';
import { taskFix } from '../../src/warmstart/workspace-demonstrations';
import { lineCandidates, twCandsOutput, variantView } from '../../src/demonstrations/line-candidates';
import { twApplyRefusal } from '../../src/demonstrations/tool-output';
import { main } from '../../src/cli/main';
import { assertNoContainersLeft } from '../support/containers';

const demo = path.join(__dirname, '..', '..', 'examples', 'demo-python');
const RUN = `aci-tools-${process.pid}`;

type Script = (turns: ActRequest['turns']) => string;

/** Per episode, the next action from what the episode has seen so far (then `submit`). */
class ScriptedModel implements ActionModel {
  constructor(private readonly scripts: Record<string, Script>) {}
  async act(reqs: readonly ActRequest[]): Promise<ActResult[]> {
    return reqs.map((r) => {
      const text = this.scripts[r.episodeId]?.(r.turns) ?? 'submit';
      return { text, tokenIds: [...Buffer.from(text)], logprobs: [...Buffer.from(text)].map(() => -0.5), finishReason: 'stop' as const };
    });
  }
  release(): void {}
}

/** A fixed list of actions, then `submit`. */
const list =
  (...actions: string[]): Script =>
  (turns) =>
    actions[turns.length] ?? 'submit';

/**
 * Doing nothing for up to six turns: distinct no-op commands, so that none is a repeat (a turn
 * that re-ran a command for the same output costs reward.repeat).
 */
const IDLE_ACTIONS = ['true', ': 1', ': 2', ': 3', ': 4', ': 5', ': 6'];
const idleFor = (n: number): Script => list(...IDLE_ACTIONS.slice(0, n));

describe('docker: numbered suspects in the Python sandbox (tw-suspects -n, tw-show, tw-tokens, tw-edit, tw-cands, tw-apply)', function () {
  this.timeout(600_000);
  let pool: SandboxPool;
  let snap: PoolSnapshot;
  let task: Task;
  let originals: ScoringOriginals;
  let fix: NonNullable<ReturnType<typeof taskFix>>;
  let dir: string;
  let tasksFile: string;

  before(async () => {
    pool = await SandboxPool.connect({ run: RUN });
    const r = await synthesizeMutationTasks({ workspace: demo, pool, seed: 1, max: 1, operators: ['flip-comparison'], concurrency: 1 });
    assert.equal(r.tasks.length, 1);
    task = r.tasks[0];
    const f = taskFix(demo, task);
    assert.ok(f, `${task.id} has a one-line fix`);
    fix = f!;
    snap = await pool.snapshot(demo, { language: 'python' });
    originals = collectOriginals(demo);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-aci-'));
    tasksFile = path.join(dir, 'tasks.jsonl');
    writeTaskFile(tasksFile, r.tasks);
  });

  after(async () => {
    fs.rmSync(dir, { recursive: true, force: true });
    await pool?.close();
    await assertNoContainersLeft(pool, RUN);
  });

  const play = async (scripts: Record<string, Script>, cache?: ObservationCache): Promise<Record<string, Trajectory>> => {
    const ids = Object.keys(scripts);
    const r = await runRollouts(
      ids.map((id) => ({ task, episodeId: id, groupId: 'g', seed: 1, split: 'train' as const })),
      {
        provider: poolProvider(pool, snap),
        checkpoint: 'scripted',
        originals,
        concurrency: ids.length,
        model: new ScriptedModel(scripts),
        ...(cache ? { observationCache: cache } : {}),
      },
    );
    const out: Record<string, Trajectory> = {};
    for (const id of ids) {
      out[id] = r.trajectories.find((t) => t.trajId === id)!;
      assert.equal(out[id].failure, undefined, out[id].failure);
    }
    return out;
  };

  /** The number of the bug's line in a `tw-suspects -n` observation. */
  const bugNumber = (observation: string): number => {
    const m = observation.match(new RegExp(`^\\[(\\d+)\\] ${fix.path.replace(/[.]/g, '\\.')}:${fix.line}: `, 'm'));
    assert.ok(m, `the bug line ${fix.path}:${fix.line} is a numbered suspect:\n${observation}`);
    return Number(m![1]);
  };

  it('each tool prints its fixed shape, the read-only ones change no file, and calling them scores as doing nothing', async () => {
    const { tools, idle, again } = await play({
      tools: list('tw-suspects -n', 'tw-show 1', 'tw-tokens 1', "tw-edit 1 'no such text' 'x'", 'tw-show 9', 'tw-suspects'),
      idle: idleFor(6),
      again: list('tw-suspects -n', 'tw-cands 1', 'tw-cands  1', 'tw-cands 1'),
    });
    // Asking again for an output already given costs reward.repeat (0.05) a turn.
    assert.equal(again.reward.repeats, 2, again.turns.map((t) => t.action).join(' | '));
    assert.ok(Math.abs(again.reward.reward - (idle.reward.reward - 0.1)) < 1e-9, `${again.reward.reward} vs ${idle.reward.reward}`);
    const [suspects, show, tokens, refused, none, plain] = tools.turns;
    // Numbered: "[K] path:line: code", K from 1, the same lines as the plain output in the same order.
    assert.match(suspects.observation, /^exit 1\n\d+ failed, \d+ passed\n\[1\] \S+:\d+: /);
    const numbered = suspects.observation.split('\n').filter((l) => /^\[\d+\] /.test(l));
    assert.deepEqual(
      numbered.map((l) => Number(l.match(/^\[(\d+)\]/)![1])),
      numbered.map((_, i) => i + 1),
    );
    const plainLines = plain.observation.split('\n').filter((l) => /^\S+:\d+: /.test(l));
    assert.deepEqual(
      numbered.map((l) => l.replace(/^\[\d+\] /, '')),
      plainLines,
      'the plain format is unchanged: the same lines without the numbers',
    );
    const [, top, topLine] = numbered[0].match(/^\[1\] (\S+):(\d+): (.*)$/)!;
    // tw-show: the header, then the file's lines around it, the line itself marked.
    assert.equal(show.exitCode, 0, show.observation);
    assert.equal(show.observation.split('\n')[1], `${top}:${topLine}`);
    assert.ok(
      show.observation.split('\n').some((l) => l.startsWith(`>${topLine} `) && l.includes(numbered[0].replace(/^\[1\] \S+: /, ''))),
      show.observation,
    );
    // tw-tokens: the line, then its tokens; nothing about which change fixes it.
    assert.equal(tokens.exitCode, 0, tokens.observation);
    assert.match(tokens.observation, /^exit 0\n\S+:\d+: .*\n\d+ tokens: .+$/);
    // tw-edit of text not on the line, and a suspect number not listed: refused, nothing written.
    assert.equal(refused.exitCode, 1);
    assert.match(refused.observation, /tw-edit: 'no such text' is not on /);
    assert.match(none.observation, /^exit 1\ntw-show: no suspect 9: the last tw-suspects listed \d+/);
    for (const t of tools.turns.slice(0, 6)) assert.equal(t.edits, undefined, `${t.action} changed no workspace file`);
    // The reward is the code's: the same as six turns of `true`.
    assert.deepEqual({ ...tools.reward }, { ...idle.reward });
    assert.equal(tools.reward.resolved, false);
    assert.ok(!tools.reward.testsEdited);
  });

  it("a test the workspace ships broken is not the task's: tw-test passes after the fix and counts it apart, tw-suspects ranks without it", async () => {
    // A test that fails whatever the code does, added before the fix (as a repository might ship
    // one that needs a data file it lacks). The task's list (the episode wrote it) does not name it.
    const broken = "printf 'def test_shipped_broken():\\n    assert False\\n' > tests/test_shipped_broken.py";
    const { a } = await play({
      a: list(broken, 'tw-suspects -n', fix.fix, 'tw-test', `rm ${REQUIRED_TESTS_FILE}`, 'tw-test'),
    });
    const [, suspects, , counted, , every] = a.turns;
    assert.match(
      suspects.observation,
      /^exit \d\n\d+ failed, \d+ passed, 1 other failing \(not the task's tests\)\n/,
      suspects.observation,
    );
    assert.ok(!suspects.observation.includes('test_shipped_broken'), 'its lines are not suspects');
    bugNumber(suspects.observation);
    assert.equal(counted.exitCode, 0, counted.observation);
    assert.match(counted.observation, /^exit 0\n0 failed, \d+ passed, 1 other failing \(not the task's tests\)$/);
    // Without the task's list every test counts: the shipped-broken one fails tw-test.
    assert.equal(every.exitCode, 1, every.observation);
    assert.match(every.observation, /FAIL tests\/test_shipped_broken\.py::test_shipped_broken\n1 failed, \d+ passed$/);
    assert.equal(a.reward.resolved, true, 'the reward scores the task’s tests alone, as before');
  });

  it("a module that fails to import: tw-suspects ranks its traceback's source lines, innermost first; fixed, the ranking is the tests' again", async () => {
    // The agent breaks the import of a module every test file imports: no test runs, each test
    // module is a collection error, and the tracebacks end in the source line that raised.
    const broken =
      "printf '\\n\\ndef _scale(n):\\n    return 10 // (n - 1)\\n\\n\\nSCALES = [_scale(k) for k in range(3)]\\n' >> inventory/stock.py";
    const { a } = await play({ a: list(broken, 'tw-suspects -n', 'tw-show 1', "tw-edit 1 '(n - 1)' '(n + 1)'", 'tw-suspects -n') });
    const [, suspects, show, edit, again] = a.turns;
    const lines = fs.readFileSync(path.join(demo, 'inventory', 'stock.py'), 'utf8').split('\n').length;
    // printf appends after the file's last newline: `def _scale` is on line lines + 2.
    const raises = lines + 3;
    assert.equal(suspects.exitCode, 1, suspects.observation);
    assert.match(suspects.observation, /^exit 1\n0 failed, 0 passed, \d+ errors?\nERROR tests\/test_\w+\.py\n/, suspects.observation);
    assert.match(
      suspects.observation,
      new RegExp(`\\n\\[1\\] inventory/stock\\.py:${raises}: return 10 // \\(n - 1\\)\\n`),
      suspects.observation,
    );
    assert.match(
      suspects.observation,
      new RegExp(`\\n\\[2\\] inventory/stock\\.py:${raises + 3}: SCALES = \\[_scale\\(k\\) for k in range\\(3\\)\\]`),
    );
    assert.match(show.observation, new RegExp(`^>${raises} `, 'm'), show.observation);
    assert.match(
      edit.observation,
      new RegExp(`edited inventory/stock\\.py:${raises}\\n- return 10 // \\(n - 1\\)\\n\\+ return 10 // \\(n \\+ 1\\)`),
      edit.observation,
    );
    // The module imports again: the tests run, and the task's bug is a suspect as it was.
    assert.doesNotMatch(again.observation, /ERROR/);
    bugNumber(again.observation);
  });

  it("tw-test does not call a run clean while one of the task's tests is skipped: skipping the failing tests is no fix", async () => {
    // The bug stays; the agent marks the failing tests' file skipped (scoring restores the file).
    const file = task.fail_to_pass[0].split('::')[0];
    const skip = `{ printf 'import pytest\\npytestmark = pytest.mark.skip\\n'; cat ${file}; } > /tmp/skipped.py && cp /tmp/skipped.py ${file}`;
    const { a } = await play({ a: list(skip, 'tw-test') });
    const t = a.turns[1];
    assert.equal(t.exitCode, 1, t.observation);
    assert.match(t.observation, new RegExp(`NOT PASSED ${task.fail_to_pass[0].replace(/[.[\]()]/g, '\\$&')} \\(skipped\\)`));
    assert.match(t.observation, /^0 failed, \d+ passed, \d+ of the task's tests skipped or not run$/m);
    assert.equal(a.reward.resolved, false);
  });

  it('a fix through tw-edit K scores exactly as the same fix by sed; the edit changes only that line', async () => {
    const q = (s: string) => shellQuote(s);
    const { edit, sed } = await play({
      edit: (turns) =>
        turns.length === 0
          ? 'tw-suspects -n'
          : turns.length === 1
            ? `tw-edit ${bugNumber(turns[0].observation)} ${q(fix.mutatedLine.trim())} ${q(fix.originalLine.trim())}`
            : turns.length === 2
              ? 'tw-test'
              : 'submit',
      sed: list('tw-suspects', fix.fix, 'tw-test'),
    });
    const e = edit.turns[1];
    assert.equal(e.exitCode, 0, e.observation);
    assert.equal(e.observation, `exit 0\nedited ${fix.path}:${fix.line}\n- ${fix.mutatedLine.trim()}\n+ ${fix.originalLine.trim()}`);
    assert.deepEqual(
      e.edits?.map((x) => x.path),
      [fix.path],
    );
    const before = e.edits![0].before!.split('\n');
    const after = e.edits![0].after!.split('\n');
    assert.equal(after.length, before.length);
    assert.deepEqual(
      after.map((l, i) => (l === before[i] ? null : i + 1)).filter((x) => x !== null),
      [fix.line],
      'only the suspect line changed',
    );
    assert.equal(e.edits![0].after, sed.turns[1].edits![0].after, 'the same file as the sed fix');
    assert.match(edit.turns[2].observation, /^exit 0\n0 failed, \d+ passed/);
    assert.equal(edit.reward.resolved, true);
    assert.deepEqual({ ...edit.reward }, { ...sed.reward });
  });

  it('tw-cands K lists the variants the demonstrations compute; tw-apply K J of the original line scores as the sed fix', async () => {
    const j = lineCandidates(fix.mutatedLine).indexOf(fix.originalLine) + 1;
    assert.ok(j > 0, `the original line is a variant of the mutated one: ${fix.mutatedLine.trim()} -> ${fix.originalLine.trim()}`);
    const { apply, sed } = await play({
      apply: (turns) =>
        turns.length === 0
          ? 'tw-suspects -n'
          : turns.length === 1
            ? `tw-cands ${bugNumber(turns[0].observation)}`
            : turns.length === 2
              ? `tw-apply ${bugNumber(turns[0].observation)} ${j} && tw-test`
              : 'submit',
      sed: list('tw-suspects', fix.fix, 'tw-test'),
    });
    const [, cands, applied] = apply.turns;
    assert.equal(cands.observation, `exit 0\n${twCandsOutput(fix.path, fix.line, fix.mutatedLine)}`);
    assert.equal(cands.edits, undefined, 'tw-cands changes no file');
    const n = lineCandidates(fix.mutatedLine).length;
    assert.match(
      applied.observation,
      new RegExp(`^exit 0\\nedited ${fix.path.replace(/[.]/g, '\\.')}:${fix.line} \\(variant ${j} of ${n}\\)\\n`),
    );
    assert.match(applied.observation, /\n0 failed, \d+ passed/);
    assert.deepEqual(
      applied.edits?.map((x) => x.path),
      [fix.path],
    );
    assert.equal(applied.edits![0].after, sed.turns[1].edits![0].after, 'the same file as the sed fix');
    assert.equal(apply.reward.resolved, true);
    assert.deepEqual({ ...apply.reward }, { ...sed.reward });
  });

  it('tw-apply refuses a variant not listed, a test file and a bad number; nothing is written and the reward does not move', async () => {
    const testFile = [...originals.tests.keys()][0];
    const { bad, idle } = await play({
      bad: list(
        'tw-suspects -n',
        'tw-apply 1 99',
        `tw-apply ${testFile}:1 1`,
        'tw-apply 1 x',
        'tw-apply 1',
        'tw-cands 1 2',
        'tw-apply inventory/stock.py:1 1',
      ),
      idle: idleFor(7),
    });
    const [, far, test, word, short, extra, none] = bad.turns;
    assert.match(far.observation, /^exit 1\ntw-apply: no variant 99: tw-cands 1 lists \d+ \(1-\d+\)/);
    // Word for word what the demonstrations and their simulator show (twApplyRefusal).
    const docstring = fs.readFileSync(path.join(demo, 'inventory', 'stock.py'), 'utf8').split('\n')[0];
    assert.equal(none.observation, `exit 1\n${twApplyRefusal('inventory/stock.py', 1, docstring, 1, 1, 0)}`);
    assert.match(test.observation, /^exit 1\ntw-apply: \S+ is a test file: tw-apply changes the code under test/);
    assert.match(word.observation, /^exit 2\ntw-apply: usage: tw-apply K J/);
    assert.match(short.observation, /^exit 2\ntw-apply: usage: tw-apply K J/);
    assert.match(extra.observation, /^exit 2\ntw-cands: usage: tw-cands K/);
    for (const t of bad.turns) assert.equal(t.edits, undefined, `${t.action} changed no workspace file`);
    assert.deepEqual({ ...bad.reward }, { ...idle.reward });
  });

  it("the sandbox's tw-cands and the demonstrations' lineCandidates list (and print) the same variants for every line of the image's Python standard library", async () => {
    // Written in the workspace (a tmpfs /tmp is not readable through the engine's archive API); the sandbox is thrown away after.
    const sb = await pool.acquire(snap, { rollout: 'cands-parity' });
    try {
      const script = [
        'import glob, json, sys',
        "sys.path.insert(0, '/opt/turnwise')",
        'import turnwise_tools as t',
        'rows = []',
        "for f in sorted(glob.glob('/usr/lib/python3*/*.py')):",
        '    try:',
        "        text = open(f, encoding='utf-8').read()",
        '    except (OSError, UnicodeDecodeError):',
        '        continue',
        "    for l in text.split('\\n'):",
        "        l = l[:-1] if l.endswith('\\r') else l",
        '        if l.strip():',
        '            c = t.line_candidates(l)',
        '            rows.append([l, c, [t.variant_view(l, v) for v in c]])',
        "json.dump(rows, open('/workspace/cands.json', 'w'))",
        'print(len(rows))',
      ].join('\n');
      const r = await sb.exec(`python3 - <<'PY'\n${script}\nPY`, { timeoutMs: 300_000 });
      assert.equal(r.exitCode, 0, r.stderr);
      const rows: [string, string[], string[]][] = JSON.parse((await sb.readFile('/workspace/cands.json')).toString('utf8'));
      assert.ok(rows.length > 50_000, `${rows.length} lines read`);
      assert.ok(rows.filter(([, c]) => c.length > 0).length > 10_000, 'many lines have variants');
      const ours = (l: string) => {
        const c = lineCandidates(l);
        return [c, c.map((v) => variantView(l, v))];
      };
      const differ = rows.filter(([l, c, v]) => JSON.stringify(ours(l)) !== JSON.stringify([c, v]));
      assert.deepEqual(
        differ.slice(0, 5).map(([l, c, v]) => ({ line: l, python: [c, v], typescript: ours(l) })),
        [],
      );
    } finally {
      await sb.dispose();
    }
  });

  it('refuses test files, paths outside the workspace, links and a forged ranking; the reward does not move', async () => {
    const testFile = [...originals.tests.keys()][0];
    const forge = (p: string, n: number) =>
      `mkdir -p /tmp/turnwise-tools && printf '%s' ${shellQuote(JSON.stringify({ root: '/workspace', suspects: [[p, n]] }))} > /tmp/turnwise-tools/suspects.json`;
    const { bad, idle } = await play({
      bad: list(
        `tw-edit ${testFile}:1 ${shellQuote('i')} x`,
        `${forge(testFile, 1)} && tw-edit 1 i x`,
        `${forge('../etc/passwd', 1)} && tw-edit 1 root x; tw-show 1`,
        `ln -s ${fix.path} linked.py && tw-edit linked.py:${fix.line} ${shellQuote(fix.mutatedLine.trim())} ok; rm linked.py`,
        `tw-edit ${fix.path}:${fix.line} ${shellQuote(fix.mutatedLine.trim())} ${shellQuote('a\nb')}`,
      ),
      idle: idleFor(5),
    });
    const obs = bad.turns.map((t) => t.observation);
    assert.match(obs[0], /is a test file: tw-edit changes the code under test/);
    assert.match(obs[1], /is a test file/);
    assert.match(
      obs[2],
      /tw-edit: \.\.\/etc\/passwd is outside the workspace \/workspace\ntw-show: \.\.\/etc\/passwd is outside the workspace/,
    );
    assert.match(obs[3], /linked\.py is reached through a symbolic link/);
    assert.match(obs[4], /may not hold a line break/);
    for (const t of bad.turns) assert.ok(!t.edits?.some((e) => e.path !== 'linked.py'), `${t.action}: no file of the workspace changed`);
    assert.deepEqual({ ...bad.reward }, { ...idle.reward });
  });

  it('a replayed tw-suspects (observation cache) restores the ranking, so tw-show K means the same line in every episode', async () => {
    const cache = new ObservationCache();
    const eps = await play(
      { a: list('tw-suspects -n', 'tw-show 2', 'tw-suspects -n'), b: list('tw-suspects -n', 'tw-show 2', 'tw-test') },
      cache,
    );
    const replayed = [eps.a, eps.b].filter((t) => t.turns[0].cached);
    assert.equal(replayed.length, 1, 'one of the two ran tw-suspects, the other replayed it');
    assert.equal(eps.a.turns[1].observation, eps.b.turns[1].observation);
    assert.match(eps.a.turns[1].observation, /^exit 0\n\S+:\d+\n/);
    // The tools' state folder is not "outside the workspace changed": the cache stays on.
    assert.equal(eps.a.turns[2].cached, true, 'tw-suspects -n again on the same tree is replayed');
  });

  it("one episode cannot plant a tw-test answer for the others: a fix the tracker's index overlooks, or a rewritten test list, is not stored under the starting state", async () => {
    const cache = new ObservationCache();
    const failingAt = (t: Trajectory['turns'][number]) => /^exit 1\n/.test(t.observation) && /[1-9]\d* failed/.test(t.observation);
    // A: the tracker's index told to overlook the buggy file, the fix applied, then tw-test (0 failed).
    const hide = `git --git-dir=/home/agent/.turnwise-track --work-tree=/workspace update-index --assume-unchanged ${fix.path}`;
    const { a } = await play({ a: list(hide, fix.fix, 'tw-test') }, cache);
    assert.match(a.turns[2].observation, /^exit 0\n0 failed/, a.turns[2].observation);
    // A2: the task's test list rewritten to one passing test, then tw-test (0 failed).
    const { a2 } = await play(
      { a2: list(`printf '%s\\n' ${task.pass_to_pass[0] ? `'${task.pass_to_pass[0]}'` : 'x'} > ${REQUIRED_TESTS_FILE}`, 'tw-test') },
      cache,
    );
    assert.match(a2.turns[1].observation, /^exit 0\n0 failed/, a2.turns[1].observation);
    // B, afterwards on the same cache, with the bug in place: its tw-test says the tests fail.
    const { b } = await play({ b: list('tw-test') }, cache);
    assert.ok(failingAt(b.turns[0]), `B sees its own failing tests, not a planted answer:\n${b.turns[0].observation}`);
  });

  it("an episode that deletes the edit tracker goes on and is scored (its turns record no edits); the tracker is the agent's to break", async () => {
    const { a } = await play({ a: list('rm -rf /home/agent/.turnwise-track', fix.fix, 'tw-test') });
    assert.equal(a.failure, undefined);
    assert.equal(a.turns.length, 4);
    assert.match(a.turns[2].observation, /^exit 0\n0 failed/);
    assert.equal(a.reward.resolved, true, 'the fix is scored as any other');
  });

  it('turnwise episode shows what the tools print', async () => {
    const cmds = path.join(dir, 'cmds.sh');
    fs.writeFileSync(cmds, 'tw-suspects -n\ntw-show 1\ntw-tokens 1\ntw-cands 1\n');
    let out = '';
    let err = '';
    const code = await main(['episode', '--tasks', tasksFile, '--id', task.id, '--commands', cmds], {
      out: (t) => (out += t + '\n'),
      err: (t) => (err += t + '\n'),
    });
    assert.equal(code, 0, err);
    assert.match(out, /\$ tw-suspects -n\n[\s\S]*│ \[1\] \S+:\d+: /);
    assert.match(out, /\$ tw-show 1\n[\s\S]*│ >\s*\d+ /);
    assert.match(out, /\$ tw-tokens 1\n[\s\S]*│ \d+ tokens: /);
    assert.match(out, /\$ tw-cands 1\n[\s\S]*│ \[1\] /);
    assert.match(out, /\nnot resolved {2}reward /);
  });
});
