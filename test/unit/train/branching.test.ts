// Branching (train/branching.ts): which groups get the branch budget and how much of it, where
// in their episodes the branches start, and how a branch and its parent share credit. The
// sandbox side (a branch's commands replayed in a fresh sandbox) is in test/docker/episode.test.ts.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { SCHEMA, type Trajectory, type Turn } from '../../../src/core/schema';
import {
  allocateBranches,
  branchNewActions,
  branchPoints,
  branchStats,
  branchWeight,
  gradientMass,
  mixedGroups,
  planBranches,
  shareTreeCredit,
  turnUncertainty,
  uniformGroups,
} from '../../../src/train/branching';
import { turnTokenRows } from '../../../src/train/rows';
import { actionIds, compactCodec } from '../../../src/train/compact-codec';
import { loadTokenizer } from '../../../src/policy/files/tokenizer';
import { chatTurnTokenRows } from '../../../src/train/chat-model';
import { main } from '../../../src/cli/main';
import * as os from 'node:os';
import { RunDir } from '../../../src/core/run';
import { readRunConfig, resolveTrainConfig, runConfigRecord } from '../../../src/train/config';

const turn = (index: number, action: string, logprobs: number[] = [-0.1], extra: Partial<Turn> = {}): Turn => ({
  index,
  action,
  observation: `obs of ${action}`,
  exitCode: 0,
  durationMs: 1,
  tokenIds: logprobs.map((_, i) => 10 + i),
  logprobs,
  ...extra,
});

function traj(trajId: string, groupId: string, resolved: boolean, turns: Turn[], extra: Partial<Trajectory> = {}): Trajectory {
  return {
    schema: SCHEMA.trajectory,
    taskId: groupId.replace(/^g-/, 'task-'),
    groupId,
    trajId,
    checkpoint: 'c',
    turns,
    reward: {
      passRate: resolved ? 1 : 0,
      resolved,
      turns: turns.length,
      maxTurns: 6,
      formatError: false,
      efficiencyPenalty: 0,
      formatPenalty: 0,
      reward: resolved ? 1 : 0,
    },
    ...extra,
  } as Trajectory;
}

const three = (prefix: string, g: string, resolved: boolean) =>
  traj(`${prefix}`, g, resolved, [turn(0, 'tw-suspects'), turn(1, `tw-apply 1 1`, [-2, -1]), turn(2, 'submit')]);

describe('train/branching: the branch budget', () => {
  it('uniformGroups: first episodes all resolved or all not, two or more scored; branches and failures left out', () => {
    const trajs = [
      three('a0', 'g-a', false),
      three('a1', 'g-a', false),
      three('b0', 'g-b', true),
      three('b1', 'g-b', false), // mixed
      three('c0', 'g-c', true),
      three('c1', 'g-c', true),
      traj('c-b0', 'g-c', false, [turn(0, 'tw-suspects')], { branch: { parent: 'c0', at: 1, shared: 1 } }),
      three('d0', 'g-d', true),
      traj('d1', 'g-d', false, [], { failure: 'no sandbox' }), // one scored: says nothing
    ];
    const u = uniformGroups(trajs);
    assert.deepEqual(
      u.map((g) => [g.groupId, g.resolved, g.members.length]),
      [
        ['g-a', false, 2],
        ['g-c', true, 2],
      ],
    );
  });

  it('branchStats and branchWeight: a branch flips when it ends otherwise than its group; untried tasks weigh 1/2, never-flipping ones fade', () => {
    const trajs = [
      three('a0', 'g-a', false),
      three('a1', 'g-a', false),
      traj('a-b0', 'g-a', true, [], { branch: { parent: 'a0', at: 1, shared: 1 } }),
      traj('a-b1', 'g-a', false, [], { branch: { parent: 'a1', at: 2, shared: 2 } }),
      traj('a-b2', 'g-a', false, [], { branch: { parent: 'a1', at: 2, shared: 2 }, failure: 'x' }),
    ];
    const s = branchStats(trajs);
    assert.deepEqual(s.get('task-a'), { tried: 2, flipped: 1 });
    assert.equal(branchWeight(undefined), 0.5);
    assert.equal(branchWeight({ tried: 2, flipped: 1 }), 0.5);
    assert.equal(branchWeight({ tried: 6, flipped: 0 }), 1 / 8);
    assert.equal(branchWeight({ tried: 2, flipped: 2 }), 3 / 4);
  });

  it('allocateBranches: the whole budget, by the tasks’ weights; a group with no state to branch from gets none', () => {
    const groups = uniformGroups([
      three('a0', 'g-a', false),
      three('a1', 'g-a', false),
      three('b0', 'g-b', true),
      three('b1', 'g-b', true),
      traj('c0', 'g-c', false, [turn(0, 'submit')]),
      traj('c1', 'g-c', false, [turn(0, 'submit')]),
    ]);
    assert.equal(groups.length, 3);
    const even = allocateBranches(groups, 8, new Map(), 1);
    assert.deepEqual([...even.entries()].sort(), [
      ['g-a', 4],
      ['g-b', 4],
    ]);
    // task-b's branches never flipped in 6 tries: weight 1/8 against 1/2.
    const learned = allocateBranches(groups, 10, new Map([['task-b', { tried: 6, flipped: 0 }]]), 1);
    assert.equal(learned.get('g-a'), 8);
    assert.equal(learned.get('g-b'), 2);
    const odd = allocateBranches(groups, 3, new Map(), 1);
    assert.equal(
      [...odd.values()].reduce((a, b) => a + b, 0),
      3,
      'a remainder is handed out, not lost',
    );
    assert.equal(allocateBranches(groups, 0, new Map(), 1).size, 0);
  });

  it('turnUncertainty sums the surprisal of the action’s tokens', () => {
    assert.equal(turnUncertainty({ logprobs: [-0.5, -1.5, 0] }), 2);
    assert.equal(turnUncertainty({}), -0);
  });

  it('branchPoints: the most uncertain shared state first, then the bound sends the next branch elsewhere', () => {
    // Both episodes share turn 0; turn 1 was written with 3 nats of surprisal in one, 0.2 in the other.
    const m0 = traj('m0', 'g-a', false, [turn(0, 'tw-suspects', [-0.1]), turn(1, 'tw-apply 1 1', [-1, -2]), turn(2, 'tw-test', [-0.1])]);
    const m1 = traj('m1', 'g-a', false, [turn(0, 'tw-suspects', [-0.1]), turn(1, 'tw-apply 2 1', [-0.2]), turn(2, 'submit', [-0.05])]);
    const [first] = branchPoints([m0, m1], 1, 0);
    assert.equal(first.at, 1, 'the state after tw-suspects, where the edit was chosen (mean surprisal 1.6 nats)');
    // Uncertainty alone keeps picking it; the exploration term moves on once it has been visited.
    assert.deepEqual(
      branchPoints([m0, m1], 3, 0).map((p) => p.at),
      [1, 1, 1],
    );
    // With weight 4: 1.6 + 4·√(ln 2 / 2) = 3.96 beats 0.1 + 4·√(ln 2 / 1) = 3.43; after one visit,
    // 1.6 + 4·√(ln 3 / 3) = 4.02 loses to 0.1 + 4·√(ln 3 / 1) = 4.29.
    const explored = branchPoints([m0, m1], 3, 4).map((p) => `${p.parent.trajId}@${p.at}`);
    assert.deepEqual(explored.slice(0, 2), ['m0@1', 'm0@2']);
    assert.deepEqual(branchPoints([traj('x', 'g-x', false, [turn(0, 'submit')])], 2, 1), [], 'no state to branch from');
  });

  it('branchPoints: a state’s written actions are the distinct ones its episodes wrote next, in play order', () => {
    const m = (id: string, second: string, third: string) =>
      traj(id, 'g-a', false, [turn(0, 'tw-suspects', [-0.1]), turn(1, second, [-3]), turn(2, third, [-0.1])]);
    const members = [m('m0', 'tw-apply 1 1', 'submit'), m('m1', 'tw-apply 1 2', 'submit'), m('m2', 'tw-apply 1 1', 'tw-test')];
    const [p] = branchPoints(members, 1, 0);
    assert.equal(p.at, 1);
    assert.deepEqual(p.written, ['tw-apply 1 1', 'tw-apply 1 2']);
    // The state after tw-suspects, tw-apply 1 1 is m0's and m2's: both of their third actions.
    const after = branchPoints([members[0], members[2]], 4, 100).find((x) => x.at === 2)!;
    assert.deepEqual(after.written, ['submit', 'tw-test']);
  });

  it('planBranches: jobs that replay the parent’s first turns, in its group, with their own ids and seeds', () => {
    const first = [three('it1-t0-g0', 'g-a', false), three('it1-t0-g1', 'g-a', false), three('b0', 'g-b', true), three('b1', 'g-b', false)];
    const task = { id: 'task-a' } as never;
    const plan = (redraws = 4) =>
      planBranches(first, {
        budget: 3,
        exploration: 1,
        redraws,
        seed: 5,
        iteration: 1,
        stats: new Map(),
        tasks: new Map([['task-a', task]]),
      });
    const jobs = plan();
    assert.equal(jobs.length, 3, 'the mixed group g-b gets none; g-a all three');
    assert.deepEqual(
      jobs.map((j) => j.episodeId),
      ['g-a-b0', 'g-a-b1', 'g-a-b2'],
    );
    for (const j of jobs) {
      assert.equal(j.groupId, 'g-a');
      assert.equal(j.split, 'train');
      assert.ok(j.prefix && j.prefix.turns.length >= 1 && j.prefix.turns.length <= 2);
      const parent = first.find((t) => t.trajId === j.prefix!.parent)!;
      assert.deepEqual(j.prefix!.turns, parent.turns.slice(0, j.prefix!.turns.length));
      // What the group wrote in that state (both episodes wrote the same there) is what the branch's first turn should not repeat.
      assert.deepEqual(j.prefix!.avoid, [parent.turns[j.prefix!.turns.length].action]);
      assert.equal(j.prefix!.redraws, 4);
    }
    assert.ok(
      plan(0).every((j) => j.prefix!.avoid === undefined && j.prefix!.redraws === undefined),
      'no redraws: nothing to avoid',
    );
    assert.equal(new Set(jobs.map((j) => j.seed)).size, 3);
    const again = plan();
    assert.deepEqual(
      again.map((j) => [j.episodeId, j.seed, j.prefix!.turns.length]),
      jobs.map((j) => [j.episodeId, j.seed, j.prefix!.turns.length]),
      'seeded: the same plan again',
    );
  });
});

describe('train/branching: credit as a tree', () => {
  it('a shared turn is trained once, in the parent, with the mean advantage of every episode through it', () => {
    const adv = (t: Trajectory, a: number[]) =>
      t.turns.forEach((u, k) => ((u.advantage = a[k]), (u.advantageComponents = { backbone: a[k] })));
    const parent = three('p', 'g-a', false);
    const b1 = traj('b1', 'g-a', true, [turn(0, 'tw-suspects', [-0.1], { inherited: true }), turn(1, 'tw-apply 3 1'), turn(2, 'submit')], {
      branch: { parent: 'p', at: 1, shared: 1 },
    });
    const b2 = traj(
      'b2',
      'g-a',
      false,
      [turn(0, 'tw-suspects', [-0.1], { inherited: true }), turn(1, 'tw-apply 1 1', [-2, -1], { inherited: true }), turn(2, 'tw-test')],
      // Its turn 1 came back otherwise than the parent's: only turn 0 is shared.
      { branch: { parent: 'p', at: 2, shared: 1 } },
    );
    adv(parent, [-0.5, -0.5, -0.5]);
    adv(b1, [1.5, 1.5, 1.5]);
    adv(b2, [-0.5, -0.4, -0.3]);
    const changed = shareTreeCredit([parent, b1, b2]);
    assert.equal(changed, 1);
    assert.ok(Math.abs(parent.turns[0].advantage! - (-0.5 + 1.5 - 0.5) / 3) < 1e-12, 'turn 0: the mean over the three');
    assert.deepEqual(parent.turns[0].advantageComponents, { backbone: parent.turns[0].advantage });
    assert.equal(parent.turns[1].advantage, -0.5, 'turn 1 was not shared (b2 diverged, b1 branched before it)');
    assert.deepEqual([b1.turns[0].advantage, b2.turns[0].advantage, b2.turns[1].advantage], [0, 0, 0], 'inherited turns keep no credit');
    assert.equal(b1.turns[1].advantage, 1.5, 'sampled turns keep theirs');
    assert.equal(b2.turns[2].advantage, -0.3);
  });

  it('a failed branch shares nothing', () => {
    const parent = three('p', 'g-a', false);
    parent.turns.forEach((u) => (u.advantage = 1));
    const b = traj('b', 'g-a', false, [turn(0, 'tw-suspects', [-0.1], { inherited: true, advantage: -3 })], {
      branch: { parent: 'p', at: 1, shared: 1 },
      failure: 'sandbox died',
    });
    assert.equal(shareTreeCredit([parent, b]), 0);
    assert.equal(parent.turns[0].advantage, 1);
  });

  it('inherited turns make no training rows, compact or chat, and the turns after them keep their prompts', () => {
    const tokenizer = loadTokenizer(
      JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', '..', 'models', 'turnwise-tiny', 'tokenizer.json'), 'utf8')),
    );
    const codec = compactCodec(tokenizer);
    const mk = (inherited: boolean) =>
      traj('b', 'g-a', true, [
        turn(
          0,
          'tw-suspects',
          actionIds(codec, 'tw-suspects').map(() => -0.1),
          {
            tokenIds: actionIds(codec, 'tw-suspects'),
            ...(inherited ? { inherited } : {}),
            advantage: 0.7,
          },
        ),
        turn(
          1,
          'tw-test',
          actionIds(codec, 'tw-test').map(() => -0.1),
          { tokenIds: actionIds(codec, 'tw-test'), advantage: 0.7 },
        ),
      ]);
    const whole = turnTokenRows(codec, 'Fix it.', mk(false), 900);
    const branch = turnTokenRows(codec, 'Fix it.', mk(true), 900);
    assert.equal(whole.length, 2);
    assert.equal(branch.length, 1);
    assert.deepEqual(branch[0], whole[1], 'the sampled turn’s row is the same, its prompt holding the replayed turn');
    // The chat rows take the same path: a stand-in format whose prompt is the ids so far.
    const format = {
      conversation: () => {
        const ids: number[] = [1];
        return {
          prompt: () => ({ ids: [...ids] }),
          addReply: (r: { tokenIds: number[] }) => ids.push(...r.tokenIds),
          addObservation: () => ids.push(2),
        };
      },
    } as never;
    const chat = chatTurnTokenRows(format, 's', 't', mk(true), [0]);
    assert.equal(chat.length, 1);
    assert.deepEqual(chat[0].ids.slice(0, 1 + actionIds(codec, 'tw-suspects').length), [1, ...actionIds(codec, 'tw-suspects')]);
  });
});

describe('train/branching: the setting', () => {
  it('a run made before branching existed resumes without branches; a new run has the default budget', () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-branch-cfg-'));
    try {
      const c = resolveTrainConfig({});
      assert.equal(c.branchEpisodes, 8);
      const {
        branchEpisodes: _b,
        branchExploration: _x,
        branchRedraws: _r,
        ...older
      } = runConfigRecord(c, { runId: 'old', startModel: '/m', createdAt: 'then' });
      const old = RunDir.create(root, 'old', older);
      assert.equal(readRunConfig(old).branchEpisodes, 0);
      assert.equal(readRunConfig(old).branchRedraws, 0, 'nor redraws');
      // A run made with branches but before redraws keeps its budget and draws once.
      const { branchRedraws: _r2, ...before } = runConfigRecord(c, { runId: 'before', startModel: '/m', createdAt: 'then' });
      const mid = readRunConfig(RunDir.create(root, 'before', before));
      assert.deepEqual([mid.branchEpisodes, mid.branchRedraws], [8, 0]);
      assert.equal(
        readRunConfig(
          RunDir.create(root, 'four', runConfigRecord({ ...c, branchRedraws: 4 }, { runId: 'four', startModel: '/m', createdAt: 'now' })),
        ).branchRedraws,
        4,
      );
      assert.equal(c.branchRedraws, 0, 'off by default');
      assert.throws(() => resolveTrainConfig({ branchRedraws: 1.5 }), /"branchRedraws" must be an integer in \[0, 64\]/);
      const now = RunDir.create(
        root,
        'now',
        runConfigRecord({ ...c, branchEpisodes: 3 }, { runId: 'now', startModel: '/m', createdAt: 'now' }),
      );
      assert.equal(readRunConfig(now).branchEpisodes, 3);
      assert.throws(() => resolveTrainConfig({ branchEpisodes: -1 }), /"branchEpisodes" must be an integer in \[0, 100000\]/);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('turnwise advantages on a file with branches', () => {
  it('shares credit as the run does: the inherited turn 0, the parent’s turn 0 the mean of the two', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-branch-adv-'));
    try {
      const parent = three('p', 'g-a', false);
      const other = three('q', 'g-a', false);
      const b = traj('b', 'g-a', true, [turn(0, 'tw-suspects', [-0.1], { inherited: true }), turn(1, 'tw-apply 1 2'), turn(2, 'submit')], {
        branch: { parent: 'p', at: 1, shared: 1 },
      });
      const file = path.join(dir, 'trajectories.jsonl');
      fs.writeFileSync(file, [parent, other, b].map((t) => JSON.stringify(t)).join('\n') + '\n');
      let out = '';
      const code = await main(['advantages', '--in', file, '--estimator', 'grpo', '--param', 'scale=none', '--json'], {
        out: (t) => (out += t),
        err: () => undefined,
      });
      assert.equal(code, 0);
      const rows = (JSON.parse(out) as { rows: { trajId: string; turn: number; advantage: number }[] }).rows;
      const at = (id: string, k: number) => rows.find((r) => r.trajId === id && r.turn === k)!.advantage;
      // Rewards 0, 0, 1: grpo without scaling gives −1/3, −1/3, 2/3.
      assert.ok(Math.abs(at('b', 1) - 2 / 3) < 1e-9);
      assert.equal(at('b', 0), 0, 'inherited');
      assert.ok(Math.abs(at('p', 0) - (-1 / 3 + 2 / 3) / 2) < 1e-9, 'the parent’s shared turn: the mean of itself and its branch');
      assert.ok(Math.abs(at('p', 1) + 1 / 3) < 1e-9, 'not shared');
      assert.ok(Math.abs(at('q', 0) + 1 / 3) < 1e-9, 'another episode with the same command is its own');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('train/branching: what an iteration reports', () => {
  it('branchNewActions: the share of branches whose first own action no first episode wrote in that state', () => {
    const first = [
      traj('f0', 'g-a', false, [turn(0, 'tw-suspects'), turn(1, 'tw-apply 1 1'), turn(2, 'submit')]),
      traj('f1', 'g-a', false, [turn(0, 'tw-suspects'), turn(1, 'tw-apply 1 2'), turn(2, 'submit')]),
    ];
    const branch = (id: string, second: string, extra: Partial<Trajectory> = {}) =>
      traj(id, 'g-a', false, [turn(0, 'tw-suspects', [-0.1], { inherited: true }), turn(1, second), turn(2, 'submit')], {
        branch: { parent: 'f0', at: 1, shared: 1 },
        ...extra,
      });
    // f1 wrote tw-apply 1 2 in the same state: not new, although the parent wrote otherwise.
    const trajs = [...first, branch('b0', 'tw-apply 1 3'), branch('b1', 'tw-apply 1 2'), branch('b2', 'tw-apply 1 1')];
    assert.equal(branchNewActions(trajs), 1 / 3);
    // Another group's first episodes are not this one's.
    assert.equal(branchNewActions([...first.map((t) => ({ ...t, groupId: 'g-b' })), branch('b1', 'tw-apply 1 2')]), 1);
    // A branch that failed in its sandbox is not counted; none left: NaN.
    assert.ok(Number.isNaN(branchNewActions([...first, branch('b3', 'tw-apply 1 3', { failure: 'no sandbox' })])));
  });

  it('mixedGroups over all episodes and over the first ones; gradientMass counts trained tokens only', () => {
    const trajs = [
      three('a0', 'g-a', false),
      three('a1', 'g-a', false),
      traj(
        'a-b0',
        'g-a',
        true,
        [turn(0, 'tw-suspects', [-0.1], { inherited: true, advantage: 5 }), turn(1, 'x', [-1, -1], { advantage: 1 })],
        {
          branch: { parent: 'a0', at: 1, shared: 1 },
        },
      ),
      three('b0', 'g-b', true),
      three('b1', 'g-b', false),
    ];
    assert.deepEqual(mixedGroups(trajs), { mixed: 1, mixedFirst: 0.5 });
    assert.equal(gradientMass(trajs), 2 / 5, 'the branch’s sampled turn: |1| × 2 tokens, over 5 episodes');
    assert.ok(Number.isNaN(mixedGroups([three('x', 'g-x', true)]).mixed), 'no group of two: NaN');
  });
});
