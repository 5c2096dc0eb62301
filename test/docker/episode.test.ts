// Docker tier: episodes end to end in real sandboxes of the demo workspace. The policy here is
// scripted (a fixed list of actions per episode, or a fake that only sleeps): the one place a
// non-learned policy stands in, because these tests check the episode machinery (sandbox prep,
// format errors, edits, reward, scheduling), not what a model writes.
import * as assert from 'node:assert/strict';
import * as path from 'node:path';
import { SandboxPool, type PoolSnapshot } from '../../src/sandbox';
import type { Task } from '../../src/core/schema';
import { synthesizeMutationTasks } from '../../src/tasks/synth';
import { collectOriginals, type ScoringOriginals } from '../../src/tasks/testfiles';
import {
  FEEDBACK,
  ObservationCache,
  poolProvider,
  runRollouts,
  turnSeed,
  type ActionModel,
  type ActRequest,
  type ActResult,
  type Span,
} from '../../src/agent';
import { taskFix } from '../../src/warmstart/workspace-demonstrations';
import { Semaphore } from '../../src/core/workers';
import { assertNoContainersLeft } from '../support/containers';

const demo = path.join(__dirname, '..', '..', 'examples', 'demo-python');
const RUN = `episode-docker-${process.pid}`;

/** A scripted "model": per episode, the next action of a fixed list (then `submit`). */
class ScriptedModel implements ActionModel {
  calls: ActRequest[][] = [];
  /** Per request as it was asked (an episode's turns list grows after the call): episode, turns so far, their replayed ids. */
  asked: { episodeId: string; turns: number; inherited: (readonly number[] | undefined)[] }[] = [];
  constructor(
    private readonly scripts: Record<string, string[]>,
    private readonly delayMs = 0,
  ) {}
  async act(reqs: readonly ActRequest[]): Promise<ActResult[]> {
    this.calls.push([...reqs]);
    for (const r of reqs)
      this.asked.push({ episodeId: r.episodeId, turns: r.turns.length, inherited: r.turns.map((t) => t.inherited?.tokenIds) });
    if (this.delayMs) await new Promise((r) => setTimeout(r, this.delayMs));
    return reqs.map((r) => {
      const script = this.scripts[r.episodeId] ?? [];
      const text = script[r.turns.length] ?? 'submit';
      return { text, tokenIds: [...Buffer.from(text)], logprobs: [...Buffer.from(text)].map(() => -0.5), finishReason: 'stop' as const };
    });
  }
  release(): void {}
}

function fixFor(task: Task): string {
  const f = taskFix(demo, task);
  assert.ok(f, `a one-line fix exists for ${task.id}`);
  return f!.fix;
}

describe('docker: episodes in the demo workspace', function () {
  this.timeout(300_000);
  let pool: SandboxPool;
  let snap: PoolSnapshot;
  let task: Task;
  let originals: ScoringOriginals;

  before(async () => {
    pool = await SandboxPool.connect({ run: RUN });
    const r = await synthesizeMutationTasks({ workspace: demo, pool, seed: 1, max: 1, operators: ['flip-comparison'], concurrency: 1 });
    assert.equal(r.tasks.length, 1);
    task = r.tasks[0];
    snap = await pool.snapshot(demo, { language: 'python' });
    originals = collectOriginals(demo);
  });

  after(async () => {
    await pool?.close();
    await assertNoContainersLeft(pool, RUN);
  });

  it('a fixing episode: bug hidden from git, tools, a recorded edit, resolved with the tests restored', async () => {
    const fs = await import('node:fs');
    const source = fs.readFileSync(path.join(demo, task.mutation!.file), 'utf8');
    const fix = fixFor(task);
    // The original file's git blob id: it must not be in the sandbox's object store at all.
    const { createHash } = await import('node:crypto');
    const blobId = (text: string) =>
      createHash('sha1')
        .update(`blob ${Buffer.byteLength(text)}\0`)
        .update(text)
        .digest('hex');
    const blob = blobId(source);
    const m = task.mutation!;
    // Control: the mutated file's blob is there, so the id is computed the way git does.
    const mutatedBlob = blobId(source.slice(0, m.span.start) + m.replacement + source.slice(m.span.end));
    const model = new ScriptedModel({
      e1: [
        `git status --porcelain; git log --oneline | wc -l; git diff HEAD | wc -c; git cat-file -e ${blob} 2>/dev/null && echo original-found || echo original-absent; git cat-file -e ${mutatedBlob} && echo mutated-found`,
        'echo "unterminated',
        '',
        'tw-suspects',
        fix,
        'echo tampered > tests/test_reorder.py',
        'tw-test',
      ],
    });
    const res = await runRollouts([{ task, episodeId: 'e1', groupId: 'g', seed: 1, split: 'train' }], {
      provider: poolProvider(pool, snap),
      model,
      checkpoint: 'scripted',
      originals,
      concurrency: 1,
    });
    const t = res.trajectories[0];
    assert.equal(t.failure, undefined, t.failure);
    const [git, bad, empty, suspects, sed, tamper, after, submit] = t.turns;
    // The mutation is the repository's only state: no diff, one commit, a clean tree, and the
    // original file's blob nowhere in the object store.
    assert.equal(git.observation, 'exit 0\n1\n0\noriginal-absent\nmutated-found');
    // A format error is not run; the observation says why and the episode goes on.
    assert.match(bad.formatError ?? '', /bash syntax error/);
    assert.match(bad.observation, /^not run: bash syntax error/);
    assert.equal(bad.exitCode, null);
    // An empty action (the policy wrote only <|im_end|>) is a format error too.
    assert.equal(empty.formatError, 'empty action');
    assert.match(empty.observation, /^not run: empty action\./);
    assert.equal(empty.exitCode, null);
    assert.equal(empty.edits, undefined);
    // tw-suspects names the mutated file among the suspects.
    assert.match(
      suspects.observation,
      new RegExp(`^exit 1\\n\\d+ failed, \\d+ passed\\n[\\s\\S]*${task.mutation!.file.replace('.', '\\.')}:`),
    );
    // The fix is recorded as an edit of that file, with its signature.
    assert.equal(sed.exitCode, 0);
    assert.equal(sed.edits?.length, 1);
    assert.equal(sed.edits![0].path, task.mutation!.file);
    assert.equal(sed.edits![0].after, source, 'after the sed the file is the original again');
    assert.ok(sed.edits![0].before!.includes(task.mutation!.replacement));
    assert.ok(
      sed.editSignature?.some((s) => s.startsWith(`E:${task.mutation!.file}::`)),
      JSON.stringify(sed.editSignature),
    );
    assert.deepEqual(
      tamper.edits?.map((e) => e.path),
      ['tests/test_reorder.py'],
    );
    assert.match(after.observation, /^exit 1\n/, 'tw-test sees the tampered test file fail');
    assert.equal(submit.action, 'submit');
    // Scored with the tests restored: resolved, format penalty for the bad turn.
    assert.equal(t.reward.passRate, 1);
    assert.equal(t.reward.resolved, true);
    assert.equal(t.reward.testsEdited, true);
    assert.equal(t.reward.formatError, true);
    assert.equal(t.reward.turns, 7);
    assert.ok(t.turns.every((x) => x.tokenIds && x.logprobs && x.tokenIds.length === x.logprobs.length));
  });

  it('a branch: the parent’s first turns run again in a fresh sandbox without the model, then the model writes the rest', async () => {
    const fix = fixFor(task);
    const cache = new ObservationCache();
    const opts = { provider: poolProvider(pool, snap), checkpoint: 'scripted', originals, concurrency: 1, observationCache: cache };
    const parentModel = new ScriptedModel({ p: ['echo "unterminated', 'tw-suspects', fix, 'date +%s%N', 'git diff --stat'] });
    const [parent] = (await runRollouts([{ task, episodeId: 'p', groupId: 'g', seed: 1, split: 'train' }], { ...opts, model: parentModel }))
      .trajectories;
    assert.equal(parent.failure, undefined, parent.failure);
    assert.equal(parent.reward.resolved, true);
    // The branch replays turns 0..3 and writes turn 4 itself (a command that undoes the fix).
    const branchModel = new ScriptedModel({ b: ['', '', '', '', `git checkout -q -- ${task.mutation!.file}`] });
    const prefix = { parent: 'p', turns: parent.turns.slice(0, 4) };
    const [b] = (
      await runRollouts([{ task, episodeId: 'b', groupId: 'g', seed: 2, split: 'train', prefix }], { ...opts, model: branchModel })
    ).trajectories;
    assert.equal(b.failure, undefined, b.failure);
    const asked = branchModel.asked;
    assert.equal(asked[0].turns, 4, 'the model is first asked for turn 4');
    assert.deepEqual(
      asked[0].inherited,
      parent.turns.slice(0, 4).map((t) => t.tokenIds),
      "the inherited turns reach the model with the parent's sampled ids",
    );
    assert.deepEqual(
      b.turns.map((t) => !!t.inherited),
      [true, true, true, true, false, false],
    );
    for (let k = 0; k < 4; k++) {
      assert.equal(b.turns[k].action, parent.turns[k].action);
      assert.deepEqual(b.turns[k].tokenIds, parent.turns[k].tokenIds);
      assert.deepEqual(b.turns[k].logprobs, parent.turns[k].logprobs);
    }
    assert.equal(b.turns[0].formatError, parent.turns[0].formatError, 'a replayed format error is one again, not run');
    assert.equal(b.turns[0].exitCode, null);
    // The fix really ran in the branch's own sandbox: its edit is recorded there.
    assert.equal(b.turns[2].edits?.[0]?.path, task.mutation!.file);
    assert.notEqual(b.turns[3].observation, parent.turns[3].observation, 'date prints another time');
    assert.deepEqual(b.branch, { parent: 'p', at: 4, shared: 3 }, 'three turns came back as the parent saw them; the clock did not');
    assert.equal(b.reward.resolved, false, 'the branch undid the fix');
  });

  it('a branch’s first own turn is drawn again, with a new seed, while it repeats what its group wrote there; the last draw stands', async () => {
    const opts = { provider: poolProvider(pool, snap), checkpoint: 'scripted', originals, concurrency: 2 };
    const [parent] = (
      await runRollouts([{ task, episodeId: 'p', groupId: 'g', seed: 1, split: 'train' }], {
        ...opts,
        model: new ScriptedModel({ p: ['echo one', 'echo two', 'submit'] }),
      })
    ).trajectories;
    assert.equal(parent.failure, undefined, parent.failure);
    /** Per episode, the replies of successive requests for the branch's first own turn (2), then `submit`; the seeds it was asked with. */
    class DrawModel implements ActionModel {
      seeds: Record<string, number[]> = {};
      constructor(private readonly draws: Record<string, string[]>) {}
      async act(reqs: readonly ActRequest[]): Promise<ActResult[]> {
        return reqs.map((r) => {
          let text = 'submit';
          if (r.turns.length === 2) {
            (this.seeds[r.episodeId] ??= []).push(r.seed);
            text = this.draws[r.episodeId].shift() ?? 'submit';
          }
          return {
            text,
            tokenIds: [...Buffer.from(text)],
            logprobs: [...Buffer.from(text)].map(() => -0.5),
            finishReason: 'stop' as const,
          };
        });
      }
      release(): void {}
    }
    const model = new DrawModel({
      r: ['submit', 'echo three', 'echo four'],
      all: ['submit', 'submit', 'submit', 'echo x'],
      one: ['submit', 'echo y'],
    });
    const prefix = (redraws?: number) => ({
      parent: 'p',
      turns: parent.turns.slice(0, 2),
      ...(redraws !== undefined ? { avoid: ['submit', 'echo three'], redraws } : {}),
    });
    const { trajectories } = await runRollouts(
      [
        { task, episodeId: 'r', groupId: 'g', seed: 5, split: 'train', prefix: prefix(3) },
        { task, episodeId: 'all', groupId: 'g', seed: 6, split: 'train', prefix: prefix(2) },
        { task, episodeId: 'one', groupId: 'g', seed: 7, split: 'train', prefix: prefix() },
      ],
      { ...opts, model },
    );
    const by = Object.fromEntries(trajectories.map((t) => [t.trajId, t]));
    // Two draws repeated what the group wrote; the third did not and stands.
    assert.deepEqual(
      by.r.turns.map((t) => t.action),
      ['echo one', 'echo two', 'echo four', 'submit'],
    );
    assert.deepEqual(by.r.branch, { parent: 'p', at: 2, shared: 2, redrawn: 2 });
    assert.equal(model.seeds.r[0], turnSeed(5, 2, 0), 'the first draw has the seed an unbranched turn would have');
    assert.equal(new Set(model.seeds.r).size, 3, 'each draw its own seed');
    // Redraws run out: the last draw stands even though it repeats.
    assert.equal(model.seeds.all.length, 3);
    assert.equal(by.all.turns[2].action, 'submit');
    assert.deepEqual(by.all.branch, { parent: 'p', at: 2, shared: 2, redrawn: 2 });
    // Nothing to avoid: one draw, whatever it writes.
    assert.equal(model.seeds.one.length, 1);
    assert.equal(by.one.turns.length, 3);
    assert.deepEqual(by.one.branch, { parent: 'p', at: 2, shared: 2 });
  });

  it('recovery feedback: a repeated failed command and an untested submit are answered with a line; evaluations without it are unchanged', async () => {
    const fix = fixFor(task);
    const opts = { provider: poolProvider(pool, snap), checkpoint: 'scripted', originals, concurrency: 2 };
    const script = ["tw-edit 1 'no such text' 'x'", "tw-edit 1 'no such text' 'x'", 'submit', fix, 'submit'];
    const model = new ScriptedModel({ fb: script, plain: script });
    const job = (id: string) => ({ task, episodeId: id, groupId: 'g', seed: 4, split: 'train' as const });
    const [fb] = (await runRollouts([job('fb')], { ...opts, model, recoveryFeedback: true })).trajectories;
    const [plain] = (await runRollouts([job('plain')], { ...opts, model })).trajectories;
    assert.equal(fb.failure, undefined, fb.failure);
    // tw-suspects never ran, so tw-edit refuses suspect 1; the second time the observation says so.
    assert.equal(fb.turns[0].feedback, undefined);
    assert.equal(fb.turns[1].feedback, FEEDBACK.repeat(0));
    assert.ok(fb.turns[1].observation.endsWith(`\n${FEEDBACK.repeat(0)}`), fb.turns[1].observation);
    // The first submit came with no passing test: answered, not ended; the fix and a second submit end it.
    assert.equal(fb.turns[2].action, 'submit');
    assert.equal(fb.turns[2].observation, FEEDBACK.submit);
    assert.deepEqual(
      fb.turns.map((t) => t.action),
      [...script],
    );
    assert.equal(fb.reward.resolved, true);
    // Without it the first submit ends the episode, unresolved, and no turn carries feedback.
    assert.equal(plain.turns.length, 3);
    assert.equal(plain.reward.resolved, false);
    assert.ok(plain.turns.every((t) => t.feedback === undefined && !t.observation.includes('note:')));
    assert.deepEqual(plain.turns[1].labels, ['refused-edit', 'repeated-failed-action'], 'labels are written on every episode');
  });

  it('the observation cache: read-only tools replayed on identical workspaces, exactly as a run gives them, never after a detaching command', async () => {
    const fix = fixFor(task);
    const cache = new ObservationCache();
    const opts = { provider: poolProvider(pool, snap), checkpoint: 'scripted', originals, concurrency: 3, observationCache: cache };
    const job = (id: string) => ({ task, episodeId: id, groupId: 'g', seed: 3, split: 'train' as const });
    // A group of three in flight at once, as in RL: the same first command on the same workspace.
    const group = new ScriptedModel({
      a: ['tw-suspects', fix, 'tw-test'],
      b: ['tw-suspects', fix, 'tw-test'],
      c: ['tw-suspects', 'tw-test', 'sleep 2 & true', 'tw-test', 'cat ' + task.mutation!.file],
    });
    const r1 = await runRollouts([job('a'), job('b'), job('c')], { ...opts, model: group });
    const [a, b, c] = ['a', 'b', 'c'].map((id) => r1.trajectories.find((t) => t.trajId === id)!);
    for (const t of [a, b, c]) assert.equal(t.failure, undefined, t.failure);
    // tw-suspects ran once for the three; the others waited for it and got the same observation.
    assert.equal([a, b, c].filter((t) => t.turns[0].cached).length, 2);
    assert.equal(new Set([a, b, c].map((t) => t.turns[0].observation)).size, 1);
    assert.match(a.turns[0].observation, /^exit 1\n\d+ failed/);
    // After the same fix the workspaces are identical again: one tw-test for a and b, all passing.
    assert.equal([a, b].filter((t) => t.turns[2].cached).length, 1);
    assert.equal(a.turns[2].observation, b.turns[2].observation);
    assert.match(a.turns[2].observation, /^exit 0\n/);
    // c's tw-test on the unfixed workspace is not a's tw-test on the fixed one.
    assert.match(c.turns[1].observation, /^exit 1\n/);
    // A command that may leave a process running ends caching for its episode, even on a key the
    // cache holds (c's own tw-test of turn 1, same tree); reading files is never cached.
    assert.equal(c.turns[3].cached, undefined);
    assert.equal(c.turns[3].observation, c.turns[1].observation);
    assert.equal(c.turns[4].cached, undefined);
    // Edits are recorded as without the cache, and the rewards are the same.
    assert.equal(a.turns[1].edits?.length, 1);
    assert.equal(a.reward.resolved, true);
    assert.equal(b.reward.resolved, true);
    assert.equal([a, b, c].flatMap((t) => t.turns).filter((x) => x.cached).length, 3, 'three replays in all');

    // Later episodes (another iteration) replay from the same cache; the same script without any
    // cache gives the same observations: a replay is exactly what the command prints.
    const again = await runRollouts([job('d'), job('f')], {
      ...opts,
      // f writes outside the workspace (where Python looks for usercustomize.py): the tree id no
      // longer covers what tw-test may read, so f runs it although the cache holds that tree.
      model: new ScriptedModel({ d: ['tw-test', fix, 'tw-test'], f: ['mkdir -p ~/.local && echo x > ~/.local/note', 'tw-test'] }),
    });
    const f = again.trajectories.find((t) => t.trajId === 'f')!;
    assert.equal(f.turns[0].edits, undefined, 'a file outside the workspace is not a workspace edit');
    assert.equal(f.turns[1].cached, undefined);
    assert.equal(f.turns[1].observation, c.turns[1].observation);
    const fresh = await runRollouts([job('e')], {
      ...opts,
      observationCache: undefined,
      model: new ScriptedModel({ e: ['tw-suspects', fix, 'tw-test', 'tw-test'] }),
    });
    const d = again.trajectories.find((t) => t.trajId === 'd')!;
    const e = fresh.trajectories[0];
    assert.deepEqual(
      d.turns.map((x) => x.cached ?? false),
      [true, false, true, false],
    );
    assert.equal(d.turns[0].observation, c.turns[1].observation);
    assert.ok(e.turns.every((x) => !x.cached));
    assert.equal(e.turns[0].observation, a.turns[0].observation, 'tw-suspects replayed = tw-suspects run');
    assert.equal(e.turns[2].observation, d.turns[2].observation, 'tw-test replayed = tw-test run');
    assert.equal(e.turns[3].observation, e.turns[2].observation, 'the tools print the same on the same files (what makes replay sound)');
  });

  it("command slots: with one slot no two agent commands run at once, and a turn's duration leaves the wait out", async () => {
    // Each command prints the container clock (the host's) before and after a short sleep.
    const cmd = 'date +%s%N; sleep 0.4; date +%s%N';
    const scripts: Record<string, string[]> = { s0: [cmd, cmd], s1: [cmd, cmd], s2: [cmd, cmd] };
    const jobs = Object.keys(scripts).map((id) => ({ task, episodeId: id, groupId: 'g', seed: 2, split: 'train' as const }));
    const intervals = (trajs: { turns: { observation: string }[] }[]) =>
      trajs
        .flatMap((t) =>
          t.turns.map((x) => (/(\d{19})\n(\d{19})/.exec(x.observation) ?? []).slice(1).map((n) => Number(BigInt(n) / 1000000n))),
        )
        .filter((x) => x.length === 2)
        .sort((a, b) => a[0] - b[0]);
    const slots = new Semaphore(1);
    const one = await runRollouts(jobs, {
      provider: poolProvider(pool, snap),
      model: new ScriptedModel(scripts),
      checkpoint: 'scripted',
      originals,
      concurrency: 3,
      commandSlots: slots,
    });
    const serial = intervals(one.trajectories);
    assert.equal(serial.length, 6);
    for (let i = 1; i < serial.length; i++)
      assert.ok(
        serial[i][0] >= serial[i - 1][1],
        `command ${i} started at ${serial[i][0]}, before the one before it ended (${serial[i - 1][1]})`,
      );
    // Six 0.4 s commands one at a time (and three scoring runs): the later ones waited, and
    // their recorded run time does not include the wait.
    assert.ok(one.wallMs > 2400, `wall ${one.wallMs} ms`);
    const durations = one.trajectories.flatMap((t) => t.turns.filter((x) => x.action === cmd).map((x) => x.durationMs));
    assert.ok(Math.max(...durations) < 1500, `turn durations ${durations}`);
    assert.equal(slots.inUse, 0);
    // Without slots the same episodes' commands do overlap: the check above can fail.
    const free = intervals(
      (
        await runRollouts(jobs, {
          provider: poolProvider(pool, snap),
          model: new ScriptedModel(scripts),
          checkpoint: 'scripted',
          originals,
          concurrency: 3,
        })
      ).trajectories,
    );
    assert.ok(
      free.some((x, i) => i > 0 && x[0] < free[i - 1][1]),
      'no overlap without slots either',
    );
  });

  it('generation and sandbox commands overlap, and a sandbox failure fails only its episode', async () => {
    const spans: Span[] = [];
    const scripts: Record<string, string[]> = {};
    for (let i = 0; i < 4; i++) scripts[`o${i}`] = ['sleep 0.6', 'sleep 0.6', 'true'];
    const model = new ScriptedModel(scripts, 300);
    const provider = poolProvider(pool, snap);
    let n = 0;
    const flaky = {
      acquire: (o: { rollout: string }) => (o.rollout === 'o2' && ++n ? Promise.reject(new Error('engine hiccup')) : provider.acquire(o)),
    };
    const res = await runRollouts(
      Object.keys(scripts).map((id) => ({ task, episodeId: id, groupId: 'g', seed: 2, split: 'train' as const })),
      { provider: flaky, model, checkpoint: 'scripted', originals, concurrency: 4, spans },
    );
    const failed = res.trajectories.filter((t) => t.failure);
    assert.deepEqual(
      failed.map((t) => t.trajId),
      ['o2'],
    );
    assert.ok(Number.isNaN(failed[0].reward.reward));
    assert.match(failed[0].failure!, /engine hiccup/);
    for (const t of res.trajectories.filter((x) => !x.failure)) assert.equal(t.turns.length, 4);
    const gens = spans.filter((s) => s.kind === 'generate');
    const execs = spans.filter((s) => s.kind === 'exec');
    const overlap = gens.some((g) => execs.some((e) => e.start < g.end && g.start < e.end));
    assert.ok(overlap, 'some generation ran while a sandbox command ran');
    assert.ok(
      model.calls.some((c) => c.length > 1),
      `requests were batched: ${model.calls.map((c) => c.length)}`,
    );
  });
});
