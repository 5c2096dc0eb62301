// Docker tier: a workspace whose pytest configuration also collects doctests, from the code under
// test (--doctest-modules) and from its README (--doctest-glob), as many real projects do. The
// doctests run and appear in every report, but they live in files the agent may edit: no task
// scores them, a report that lists them is not taken for a forged one, a real fix resolves its
// task, and rewriting a doctest's expected output instead of the code gains nothing.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { SandboxPool, LABEL } from '../../src/sandbox';
import type { Trajectory } from '../../src/core/schema';
import { synthesizeMutationTasks } from '../../src/tasks/synth';
import { collectOriginals } from '../../src/tasks/testfiles';
import { poolProvider, runRollouts, type ActionModel, type ActRequest, type ActResult } from '../../src/agent';
import { taskFix } from '../../src/warmstart/workspace-demonstrations';

const RUN = `doctests-${process.pid}`;

/** Per episode, a fixed list of actions, then `submit` (a script, not a policy). */
class ListModel implements ActionModel {
  constructor(private readonly lists: Record<string, string[]>) {}
  async act(reqs: readonly ActRequest[]): Promise<ActResult[]> {
    return reqs.map((r) => {
      const text = this.lists[r.episodeId]?.[r.turns.length] ?? 'submit';
      return { text, tokenIds: [...Buffer.from(text)], logprobs: [...Buffer.from(text)].map(() => -0.5), finishReason: 'stop' as const };
    });
  }
  release(): void {}
}

const MODULE = `def clamp(x, lo, hi):
    """Clamp x into [lo, hi].

    >>> clamp(5, 0, 3)
    3
    >>> clamp(-1, 0, 3)
    0
    """
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x
`;
const TESTS = `from shapes import clamp


def test_inside():
    assert clamp(2, 0, 3) == 2


def test_high():
    assert clamp(9, 0, 3) == 3


def test_low():
    assert clamp(-4, 0, 3) == 0
`;

describe('docker: doctests of the code under test are run but never scored', function () {
  this.timeout(600_000);
  let pool: SandboxPool;
  let ws: string;

  before(async () => {
    ws = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-doctests-'));
    fs.writeFileSync(path.join(ws, 'shapes.py'), MODULE);
    fs.mkdirSync(path.join(ws, 'tests'));
    fs.writeFileSync(path.join(ws, 'tests', 'test_shapes.py'), TESTS);
    fs.writeFileSync(path.join(ws, 'README.md'), '# shapes\n\n```\n>>> from shapes import clamp\n>>> clamp(7, 0, 3)\n3\n\n```\n');
    fs.writeFileSync(path.join(ws, 'pytest.ini'), '[pytest]\naddopts = --doctest-modules --doctest-glob=README.md\n');
    pool = await SandboxPool.connect({ run: RUN });
  });

  after(async () => {
    fs.rmSync(ws, { recursive: true, force: true });
    await pool?.close();
    const left = await pool.engineAt(0).docker.listContainers({ all: true, filters: { label: [`${LABEL.run}=${RUN}`] } });
    assert.equal(left.length, 0);
  });

  it('tasks name only tests of test files; a real fix resolves, a rewritten doctest does not, and neither report is called forged', async () => {
    const r = await synthesizeMutationTasks({ workspace: ws, pool, seed: 0, max: 8, operators: ['negate-condition'], concurrency: 1 });
    assert.ok(r.tasks.length >= 1, 'a negated bound breaks a test');
    assert.equal(r.summary.baseline.tests, 5, 'three tests, the doctest of clamp (one item for its examples) and the README ran');
    assert.equal(r.summary.baseline.passing, 3, 'the three of the test file are the ones that can be scored');
    for (const t of r.tasks) {
      for (const id of [...t.fail_to_pass, ...t.pass_to_pass])
        assert.match(id, /^tests\/test_shapes\.py::test_\w+$/, `${t.id}: ${id} is a test of a test file`);
    }
    const task = r.tasks[0];
    const fix = taskFix(ws, task);
    assert.ok(fix, `${task.id} has a one-line fix`);
    const snap = await pool.snapshot(ws, { language: 'python' });
    const originals = collectOriginals(ws);
    // Rewriting a doctest's expected output (the mutated line left alone) changes no scored test.
    const rewrite = `sed -i 's/^    3$/    4/' shapes.py && python3 -m pytest -q 2>&1 | tail -1`;
    const res = await runRollouts(
      ['fix', 'rewrite', 'idle'].map((id) => ({ task, episodeId: id, groupId: 'g', seed: 1, split: 'train' as const })),
      {
        provider: poolProvider(pool, snap),
        checkpoint: 'scripted',
        originals,
        concurrency: 3,
        model: new ListModel({ fix: [fix!.fix], rewrite: [rewrite], idle: ['true'] }),
      },
    );
    const by = (id: string): Trajectory => res.trajectories.find((t) => t.trajId === id)!;
    for (const id of ['fix', 'rewrite', 'idle']) {
      assert.equal(by(id).failure, undefined, by(id).failure);
      assert.equal(by(id).reward.tampered, undefined, `${id}: a report with doctests in it is the real run's`);
    }
    assert.equal(by('fix').reward.resolved, true);
    assert.equal(by('fix').reward.passRate, 1);
    assert.equal(by('rewrite').reward.resolved, false);
    assert.deepEqual({ ...by('rewrite').reward }, { ...by('idle').reward }, 'a rewritten doctest scores as doing nothing');
  });
});
