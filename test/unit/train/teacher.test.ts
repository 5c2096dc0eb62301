// The teacher pass (train/teacher.ts) on turnwise-tiny through ONNX Runtime: the reference fix read
// from a workspace file (its `sed` run by the real sed restores the line), the teacher's log-probs
// of each sampled token after the task with the fix added, and P(fix as the next action) before and
// after each turn, all at the places the policy itself gives them. The gear and a2tgpo estimators
// then read them off the turns; a task without a reference is left out and counted.
import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { trajectoryAdvantages, writeTurnAdvantages } from '../../../src/credit/advantages';
import '../../../src/credit';
import { SCHEMA, type Task, type Trajectory } from '../../../src/core/schema';
import { taskText } from '../../../src/agent/prompt';
import { loadCheckpoint } from '../../../src/policy/files/checkpoint';
import { TrainablePolicy } from '../../../src/policy/trainable';
import { actionIds, compactCodec, renderPrompt } from '../../../src/train/compact-codec';
import { embeddedModelDir } from '../../../src/train/embedded';
import type { Harness } from '../../../src/train/harness';
import { packMinibatches, turnTokenRows, updateRows } from '../../../src/train/rows';
import { referenceFix, teacherPass } from '../../../src/train/teacher';

const ORIGINAL = 'def add(a, b):\n    """Sum."""\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n';
const at = ORIGINAL.indexOf('a + b') + 2;

function mutationTask(id: string, file = 'calc.py'): Task {
  return {
    schema: SCHEMA.task,
    id,
    source: 'mutation',
    instruction: '',
    language: 'python',
    testCommand: 'python -m pytest -q {tests}',
    fail_to_pass: ['tests/test_calc.py::test_add'],
    pass_to_pass: [],
    mutation: {
      file,
      nodeKind: 'binary_operator',
      operator: 'arith',
      enclosing: 'add',
      span: { start: at, end: at + 1, text: '+' },
      replacement: '-',
    },
  };
}

describe('train/teacher: the reference fix and the teacher pass (turnwise-tiny, ONNX Runtime)', function () {
  this.timeout(120_000);
  let ws: string;
  before(() => {
    ws = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-teacher-'));
    fs.writeFileSync(path.join(ws, 'calc.py'), ORIGINAL);
  });
  after(() => fs.rmSync(ws, { recursive: true, force: true }));

  it("a mutation task's fix: the line and its original text, and a sed that restores it", () => {
    const fix = referenceFix(mutationTask('t'), ws)!;
    assert.equal(fix.hint, 'Reference fix: calc.py line 3 (in add) should read:\nreturn a + b');
    // the command, run by sed on the mutated file, gives back the original
    const mutated = path.join(ws, 'mutated');
    fs.mkdirSync(mutated, { recursive: true });
    fs.writeFileSync(path.join(mutated, 'calc.py'), ORIGINAL.slice(0, at) + '-' + ORIGINAL.slice(at + 1));
    assert.match(fix.command!, /^sed -i '3s\//);
    execFileSync('bash', ['-c', fix.command!], { cwd: mutated });
    assert.equal(fs.readFileSync(path.join(mutated, 'calc.py'), 'utf8'), ORIGINAL);
    // no mutation: no reference; a file that no longer holds the original text: the hint without its line, no command
    assert.equal(referenceFix({ ...mutationTask('f'), mutation: undefined, source: 'failing-tests' } as Task, ws), undefined);
    const moved = referenceFix(mutationTask('m', 'missing.py'), ws)!;
    assert.equal(moved.hint, 'Reference fix: in missing.py (in add), `-` should be `+`.');
    assert.equal(moved.command, undefined);
  });

  it("teacher log-probs and the fix's log-prob before and after each turn are the policy's own, and the estimators read them", async () => {
    const ck = loadCheckpoint(embeddedModelDir());
    const codec = compactCodec(ck.tokenizer);
    const policy = new TrainablePolicy(ck.weights);
    try {
      const harness = { codec, contextTokens: ck.weights.config.max_position_embeddings, policy } as unknown as Harness;
      const task = mutationTask('t');
      const other: Task = { ...mutationTask('u'), mutation: undefined, source: 'failing-tests' };
      const commands = ['tw-suspects', 'tw-test'];
      const episode = (id: string, taskId: string, resolved: boolean): Trajectory => ({
        schema: SCHEMA.trajectory,
        taskId,
        groupId: taskId,
        trajId: id,
        checkpoint: 'c0',
        turns: commands.map((action, index) => ({
          index,
          action,
          observation: `out ${index} of ${id}`,
          exitCode: 0,
          tokenIds: actionIds(codec, action),
          logprobs: actionIds(codec, action).map(() => -0.5),
        })) as Trajectory['turns'],
        reward: {
          passRate: resolved ? 1 : 0,
          resolved,
          turns: 2,
          maxTurns: 4,
          formatError: false,
          efficiencyPenalty: 0,
          formatPenalty: 0,
          reward: resolved ? 1 : 0,
        },
      });
      // Student log-probs as sampled: the policy's over its own prompts (so gear's divergence is the hint's alone).
      const trajs = [episode('a', 't', true), episode('b', 't', false), episode('c', 'u', true), episode('d', 'u', false)];
      for (const t of trajs) {
        const rows = turnTokenRows(codec, taskText(t.taskId === 't' ? task : other), t, 900);
        const lps = await policy.logprobs(rows.map((r) => r.ids));
        rows.forEach((r, k) => (t.turns[k].logprobs = Array.from(lps[k].subarray(r.actionStart))));
      }
      const tasks = new Map([
        ['t', task],
        ['u', other],
      ]);
      const res = await teacherPass(harness, trajs, tasks, {
        workspace: ws,
        temperature: 1,
        maxActionTokens: 64,
        teacher: true,
        gain: true,
      });
      assert.equal(res.withoutReference, 2);
      assert.equal(res.rows, 2 * (2 + 3), 'per episode of task t: a teacher row per turn, a gain row per turn and one after the last');
      const fix = referenceFix(task, ws)!;
      const shown = `${taskText(task)}\n${fix.hint}`;
      const budget = ck.weights.config.max_position_embeddings - 64;
      for (const t of trajs.slice(0, 2)) {
        const prior = t.turns.map((u) => ({ action: u.action, observation: u.observation }));
        // teacher: the sampled tokens after the task with the hint, at their own places
        const rows = t.turns.map((u, k) => [...renderPrompt(codec, shown, prior.slice(0, k), budget).ids, ...u.tokenIds!]);
        const lps = await policy.logprobs(rows);
        t.turns.forEach((u, k) => {
          const want = Array.from(lps[k].subarray(rows[k].length - u.tokenIds!.length));
          assert.equal(u.reference!.teacherLogprobs!.length, u.tokenIds!.length);
          u.reference!.teacherLogprobs!.forEach((x, j) => assert.ok(Math.abs(x - want[j]) < 1e-4, `${t.trajId} turn ${k} token ${j}`));
        });
        // gain: log P(fix) after the history before turn k is turn k's refBefore and turn k−1's refAfter
        const ref = actionIds(codec, fix.command!);
        const gainRows = [0, 1, 2].map((k) => [...renderPrompt(codec, taskText(task), prior.slice(0, k), budget).ids, ...ref]);
        const g = await policy.logprobs(gainRows);
        const p = g.map((x, k) => Array.from(x.subarray(gainRows[k].length - ref.length)).reduce((s, v) => s + v, 0));
        assert.ok(Math.abs(t.turns[0].reference!.refBefore! - p[0]) < 1e-3);
        assert.ok(Math.abs(t.turns[0].reference!.refAfter! - p[1]) < 1e-3);
        assert.equal(t.turns[1].reference!.refBefore, t.turns[0].reference!.refAfter);
        assert.ok(Math.abs(t.turns[1].reference!.refAfter! - p[2]) < 1e-3);
        // the hint moves the teacher: its log-probs differ from the student's somewhere
        assert.ok(t.turns.some((u) => u.reference!.teacherLogprobs!.some((x, j) => Math.abs(x - u.logprobs![j]) > 1e-3)));
      }
      for (const t of trajs.slice(2)) assert.ok(t.turns.every((u) => u.reference === undefined));

      // gear: per-token advantages on task t's turns, GRPO's on task u's; a2tgpo: a clip factor per turn
      const gear = await trajectoryAdvantages(trajs, 'gear');
      assert.equal(gear.diagnostics.frac_reference_fallback, 0.5);
      writeTurnAdvantages(trajs, gear.rows);
      assert.ok(trajs[0].turns.every((u) => u.tokenAdvantages?.length === u.tokenIds!.length));
      assert.ok(trajs[2].turns.every((u) => u.tokenAdvantages === undefined));
      // and the update's minibatch carries them token by token
      const rows = updateRows([turnTokenRows(codec, taskText(task), trajs[0], 900)], false);
      const [mb] = packMinibatches(rows, 1);
      const u0 = trajs[0].turns[1];
      const start = rows[0].actions[1].start;
      assert.deepEqual(Array.from(mb.batch.advantages!).slice(start, start + u0.tokenIds!.length), u0.tokenAdvantages!);
      const a2 = await trajectoryAdvantages(trajs, 'a2tgpo');
      writeTurnAdvantages(trajs, a2.rows);
      const [mb2] = packMinibatches(updateRows([turnTokenRows(codec, taskText(task), trajs[0], 900)], false), 1);
      assert.ok(mb2.batch.clipScale, 'the minibatch carries the clip factor');
      // A fix longer than one action (maxActionTokens) is no next action the policy can write: no gain rows, a2tgpo falls back
      const short = await teacherPass(harness, trajs, tasks, {
        workspace: ws,
        temperature: 1,
        maxActionTokens: 8,
        teacher: false,
        gain: true,
      });
      assert.equal(short.rows, 0);
      assert.ok(trajs.every((t) => t.turns.every((u) => u.reference?.refBefore === undefined)));
      assert.equal((await trajectoryAdvantages(trajs, 'a2tgpo')).diagnostics.frac_reference_fallback, 1);
    } finally {
      await policy.dispose();
    }
  });
});
