// Docker tier: `tasks reach` on the demo workspace's own mutation tasks. Its agent runs the real
// tools in real sandboxes and the reward decides: a flipped comparison the suspects name is
// resolved by the command it reports (run again here in a fresh sandbox, through the reward); a
// deleted statement, which no tw-cands variant restores, is not; a task with no mutation is
// refused without a sandbox.
import * as assert from 'node:assert/strict';
import * as path from 'node:path';
import type { Task } from '../../src/core/schema';
import { SandboxPool, LABEL } from '../../src/sandbox';
import { synthesizeMutationTasks } from '../../src/tasks/synth';
import { collectOriginals } from '../../src/tasks/testfiles';
import { scoreEpisode } from '../../src/tasks/reward';
import { prepareSandbox } from '../../src/agent/episode';
import { mutatedLineOf } from '../../src/demonstrations/fix-cases';
import { lineCandidates } from '../../src/demonstrations/line-candidates';
import { REACH_SUSPECTS, toolsReach } from '../../src/train/tools-reach';

const demo = path.join(__dirname, '..', '..', 'examples', 'demo-python');
const RUN = `tools-reach-test-${process.pid}`;

describe('docker: tasks reach, the ceiling of the numbered tools', function () {
  this.timeout(600_000);
  let pool: SandboxPool;
  let flips: Task[];
  let deletes: Task[];
  before(async () => {
    pool = await SandboxPool.connect({ run: RUN });
    flips = (await synthesizeMutationTasks({ workspace: demo, pool, seed: 2, max: 2, operators: ['flip-comparison'], concurrency: 1 }))
      .tasks;
    deletes = (await synthesizeMutationTasks({ workspace: demo, pool, seed: 2, max: 1, operators: ['delete-statement'], concurrency: 1 }))
      .tasks;
    assert.ok(flips.length >= 1 && deletes.length >= 1, 'the demo has both kinds of task');
  });
  after(async () => {
    await pool?.close();
    const left = await pool.engineAt(0).docker.listContainers({ all: true, filters: { label: [`${LABEL.run}=${RUN}`] } });
    assert.equal(left.length, 0);
  });

  it('a flipped comparison is resolved by the command it names; a deleted statement is not; a task with no mutation needs no sandbox', async () => {
    const noMutation = { ...flips[0], id: 'no-mutation' } as Task;
    delete noMutation.mutation;
    const r = await toolsReach([...flips, deletes[0], noMutation], { workspace: demo, concurrency: 1 });
    assert.equal(r.rows.length, flips.length + 2);
    const resolved = r.rows.filter((x) => x.outcome === 'resolved');
    assert.ok(resolved.length >= 1, `a flip is reachable: ${JSON.stringify(r.rows)}`);
    const originals = collectOriginals(demo);
    for (const row of resolved) {
      const task = flips.find((t) => t.id === row.taskId)!;
      const at = mutatedLineOf(demo, task.mutation!)!;
      assert.equal(row.line, at.line);
      assert.equal(lineCandidates(at.mutatedLine)[row.variant! - 1], at.originalLine, 'the variant restores the line');
      assert.equal(row.command, `tw-apply ${row.suspect} ${row.variant} && tw-test`);
      // The same two commands in a fresh sandbox, scored by the reward: resolved.
      const snapshot = await pool.snapshot(demo, { language: 'python' });
      const sb = await pool.acquire(snapshot, { rollout: `again-${row.taskId}` });
      try {
        await prepareSandbox(sb, task);
        const s = await sb.exec(REACH_SUSPECTS);
        assert.match(s.stdout, new RegExp(`^\\[${row.suspect}\\] ${task.mutation!.file.replace(/\./g, '\\.')}:${row.line}: `, 'm'));
        const a = await sb.exec(row.command!);
        assert.equal(a.exitCode, 0, a.stdout + a.stderr);
        const score = await scoreEpisode(sb, task, { originals, turns: 2, maxTurns: 3, formatError: false });
        assert.equal(score.reward.resolved, true);
      } finally {
        await sb.dispose();
      }
    }
    const del = r.rows.find((x) => x.taskId === deletes[0].id)!;
    assert.equal(del.resolved, false);
    assert.ok(['no-variant', 'not-suspected'].includes(del.outcome), del.outcome);
    assert.equal(del.command, null, 'nothing to apply');
    assert.deepEqual(
      { ...r.rows.find((x) => x.taskId === 'no-mutation')! },
      {
        taskId: 'no-mutation',
        suspect: null,
        variant: null,
        command: null,
        resolved: false,
        outcome: 'not-a-mutation',
        cutShort: false,
      },
    );
    assert.equal(r.summary.tasks, r.rows.length);
    assert.equal(r.summary.outcomes.resolved, resolved.length);
    assert.equal(r.summary.outcomes['not-a-mutation'], 1);
  });
});
