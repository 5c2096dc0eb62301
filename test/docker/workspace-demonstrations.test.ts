// Docker tier: demonstrations recorded from a workspace's own mutation tasks. The recorded
// tw-suspects output points at the bug, and the demonstrated fix, run in a sandbox with the bug
// written in, resolves the task with the tests restored: the warm start's ground truth is real.
import * as assert from 'node:assert/strict';
import * as path from 'node:path';
import { SandboxPool, LABEL } from '../../src/sandbox';
import { synthesizeMutationTasks } from '../../src/tasks/synth';
import { collectOriginals } from '../../src/tasks/testfiles';
import { scoreEpisode } from '../../src/tasks/reward';
import { prepareSandbox } from '../../src/agent/episode';
import { recordWorkspaceCases } from '../../src/warmstart/workspace-demonstrations';
import { attemptCommand, candidateEpisode, fixEpisode, numberedEpisode, walkEpisode } from '../../src/demonstrations/forms';
import { observationText } from '../../src/agent/prompt';
import { seededRandom } from '../../src/core/random';

const demo = path.join(__dirname, '..', '..', 'examples', 'demo-python');
const RUN = `workspace-demos-${process.pid}`;

describe('docker: demonstrations recorded from the demo workspace', function () {
  this.timeout(300_000);
  let pool: SandboxPool;
  before(async () => {
    pool = await SandboxPool.connect({ run: RUN });
  });
  after(async () => {
    await pool?.close();
    const left = await pool.engineAt(0).docker.listContainers({ all: true, filters: { label: [`${LABEL.run}=${RUN}`] } });
    assert.equal(left.length, 0);
  });

  it('suspects name the bug; a wrong attempt is undone by the loop and the demonstrated sed resolves the task', async () => {
    const { tasks } = await synthesizeMutationTasks({
      workspace: demo,
      pool,
      seed: 2,
      max: 3,
      operators: ['flip-comparison', 'swap-arithmetic'],
      concurrency: 1,
    });
    assert.ok(tasks.length >= 2);
    const snapshot = await pool.snapshot(demo, { language: 'python' });
    const cases = await recordWorkspaceCases({ workspace: demo, tasks, pool, snapshot });
    assert.ok(cases.length >= 1, 'at least one task is demonstrable');
    const originals = collectOriginals(demo);
    for (const c of cases) {
      const task = tasks.find((t) => t.id === c.taskId)!;
      assert.ok(
        c.suspects.some((l) => l.startsWith(`${c.path}:${c.line}: `)),
        `the suspects include the mutated line: ${c.suspects.join(' | ')}`,
      );
      assert.deepEqual(c.failing, task.fail_to_pass);
      // The episode a demonstration teaches, with the fix as its second action.
      const ep = fixEpisode(seededRandom(1), c);
      assert.ok(ep.segments.some((s) => s.role === 'agent' && s.text === c.fix));
      const sb = await pool.acquire(snapshot, { rollout: `check-${c.taskId}` });
      try {
        await prepareSandbox(sb, task);
        // The attempt loop in the real sandbox: a wrong candidate of the first suspect is
        // tested and undone by git (the file as the task had it), then the fix is kept.
        const top = /^(\S+):(\d+): /.exec(c.suspects[0])!;
        const wrong = c.topCandidates?.find((x) => x.code !== c.originalLine.trim());
        assert.ok(wrong, `candidates for ${c.suspects[0]}`);
        const before = await sb.exec(`cat ${top[1]}`);
        const w = await sb.exec(attemptCommand(wrong!.fix, top[1]));
        assert.equal(w.exitCode, 0, w.stderr);
        assert.match(w.stdout, /[1-9]\d* failed/, `${wrong!.fix} fails the tests`);
        assert.equal((await sb.exec(`cat ${top[1]}`)).stdout, before.stdout, 'undone by git checkout');
        const r = await sb.exec(attemptCommand(c.fix, c.path));
        assert.equal(r.exitCode, 0, r.stderr);
        assert.match(r.stdout, /^0 failed, \d+ passed/m);
        const score = await scoreEpisode(sb, task, { originals: originals, turns: 1, maxTurns: 8, formatError: false });
        assert.equal(score.reward.resolved, true, `${c.fix} resolves ${task.id}`);
      } finally {
        await sb.dispose();
      }
    }
  });

  // The numbered form's tool output is simulated in the warm start: run command by command in
  // the real sandbox, each demonstrated observation must be what the real tools print.
  it('numbered demonstrations (tw-suspects -n, tw-show, tw-edit K OLD NEW attempts) print in the sandbox exactly what they teach, and resolve the task', async () => {
    const { tasks } = await synthesizeMutationTasks({
      workspace: demo,
      pool,
      seed: 3,
      max: 3,
      operators: ['flip-comparison', 'swap-arithmetic', 'off-by-one'],
      concurrency: 1,
    });
    const snapshot = await pool.snapshot(demo, { language: 'python' });
    const cases = await recordWorkspaceCases({ workspace: demo, tasks, pool, snapshot });
    assert.ok(cases.length >= 1, 'at least one task is demonstrable');
    const originals = collectOriginals(demo);
    let checked = 0;
    let withShow = 0;
    let withTry = 0;
    for (const c of cases) {
      const task = tasks.find((t) => t.id === c.taskId)!;
      // Seeds until an episode that shows tw-show or a failed try, where the case allows one.
      let ep = numberedEpisode(seededRandom(0), c);
      for (
        let s = 1;
        s < 40 &&
        ep &&
        !ep.segments.some(
          (x) => x.role === 'agent' && (x.text.startsWith('tw-show') || (x.text.startsWith('tw-edit 1 ') && x !== ep!.segments.at(-3))),
        );
        s++
      )
        ep = numberedEpisode(seededRandom(s), c);
      if (!ep) continue;
      const sb = await pool.acquire(snapshot, { rollout: `numbered-${c.taskId}` });
      try {
        await prepareSandbox(sb, task);
        const segs = ep.segments;
        for (let i = 1; i < segs.length; i++) {
          if (segs[i].role !== 'agent' || segs[i].text === 'submit') continue;
          const cmd = segs[i].text;
          assert.ok(!cmd.includes(c.path), `${cmd} names no path`);
          const r = await sb.exec(cmd, { timeoutMs: 60_000 });
          assert.equal(observationText(r), segs[i + 1].text, `observation of ${cmd}`);
          if (cmd.startsWith('tw-show')) withShow++;
          if (cmd.startsWith('tw-edit') && i + 1 < segs.length - 2) withTry++;
        }
        const score = await scoreEpisode(sb, task, { originals, turns: 1, maxTurns: 8, formatError: false });
        assert.equal(score.reward.resolved, true, `the numbered episode resolves ${task.id}`);
        checked++;
      } finally {
        await sb.dispose();
      }
    }
    assert.ok(checked >= 1, `${checked} numbered episodes run`);
    assert.ok(withShow + withTry >= 1, `tw-show ${withShow}, failed tries ${withTry}: more than the plain fix was checked`);
  });

  // The candidate form likewise. A wrong variant's tests are shown as the task's own failures
  // (the warm start does not run them): there the edit's lines must match and the tests fail;
  // every other observation must be exactly what the real tools print.
  it('candidate and walk demonstrations (tw-suspects -n, [tw-cands K,] tw-apply K J tries) print in the sandbox what they teach, "variant J of N" included, and resolve the task', async () => {
    const { tasks } = await synthesizeMutationTasks({
      workspace: demo,
      pool,
      seed: 5,
      max: 4,
      operators: ['flip-comparison', 'swap-arithmetic', 'off-by-one', 'swap-boolean'],
      concurrency: 1,
    });
    const snapshot = await pool.snapshot(demo, { language: 'python' });
    const cases = await recordWorkspaceCases({ workspace: demo, tasks, pool, snapshot });
    const originals = collectOriginals(demo);
    let checked = 0;
    let tries = 0;
    const walks = new Set<string>();
    for (const [c, ep] of cases.flatMap((c) => [[c, candidateEpisode(c)] as const, [c, walkEpisode(c)] as const])) {
      const task = tasks.find((t) => t.id === c.taskId)!;
      // Its variants tried in order up to the fix: failed tries where the fix is not the first.
      if (!ep) continue;
      if (ep.kind.startsWith('episode-walk')) walks.add(c.taskId!);
      const sb = await pool.acquire(snapshot, { rollout: `cands-${c.taskId}` });
      try {
        await prepareSandbox(sb, task);
        const segs = ep.segments;
        const fixAt = segs.length - 3;
        for (let i = 1; i < segs.length; i++) {
          if (segs[i].role !== 'agent' || segs[i].text === 'submit') continue;
          const cmd = segs[i].text;
          assert.ok(!cmd.includes(c.path) && !cmd.includes("'"), `${cmd} names no path and quotes nothing`);
          const r = await sb.exec(cmd, { timeoutMs: 60_000 });
          const seen = observationText(r);
          if (cmd.startsWith('tw-apply') && i !== fixAt) {
            tries++;
            const taught = segs[i + 1].text.split('\n');
            assert.deepEqual(seen.split('\n').slice(0, 4), taught.slice(0, 4), `the edit of ${cmd}`);
            assert.match(seen, /\n\d+ failed, \d+ passed$/, `${cmd}: a wrong variant fails the tests (and is put back)`);
          } else {
            assert.equal(seen, segs[i + 1].text, `observation of ${cmd}`);
          }
        }
        const score = await scoreEpisode(sb, task, { originals, turns: 1, maxTurns: 8, formatError: false });
        assert.equal(score.reward.resolved, true, `the candidate episode resolves ${task.id}`);
        checked++;
      } finally {
        await sb.dispose();
      }
    }
    assert.ok(checked >= 2, `${checked} candidate episodes run`);
    assert.ok(walks.size >= 2, `${walks.size} walks run`);
    assert.ok(tries >= 1, `${tries} failed tries checked`);
  });
});
