// The transfer bench's panel and scoring, without the network: the panel is at least five
// distinct pinned repositories, --repos names are checked, an unpacked tree in the cache is used
// without a download, a tarball that does not match its pin is never unpacked, and the held-out
// scores count greedy and sampled episodes apart.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Trajectory } from '../../../src/core/schema';
import { TurnwiseError } from '../../../src/core/errors';
import { benchTransfer, fetchRepo, heldoutScore, pickRepos, repoSettings, transferBaseConfig } from '../../../src/bench/transfer';
import { TRANSFER_PANEL } from '../../../src/tasks/panel';
import { TRAIN_DEFAULTS } from '../../../src/train/config';

// An episode that resolved its task took another path than one that did not.
const traj = (trajId: string, taskId: string, resolved: boolean, failure?: string): Trajectory =>
  ({
    trajId,
    taskId,
    groupId: `${trajId.split('-')[0]}-${taskId}`,
    turns: [{ action: resolved ? 'tw-apply 1 2' : 'submit' }],
    reward: { passRate: resolved ? 1 : 0.5, resolved },
    ...(failure ? { failure } : {}),
  }) as unknown as Trajectory;

describe('bench/transfer: the transfer panel', () => {
  it('has at least five distinct repositories, each pinned by archive path and SHA-256', () => {
    assert.ok(TRANSFER_PANEL.length >= 5);
    assert.equal(new Set(TRANSFER_PANEL.map((r) => r.name)).size, TRANSFER_PANEL.length);
    assert.equal(new Set(TRANSFER_PANEL.map((r) => r.shape)).size, TRANSFER_PANEL.length, 'different shapes');
    for (const r of TRANSFER_PANEL) {
      assert.match(r.sha256, /^[0-9a-f]{64}$/, r.name);
      assert.match(r.file, /^pool\/main\/[a-z0-9]+\/[a-z0-9.+-]+\/[^/]+\.orig\.tar\.(gz|xz|bz2)$/, r.name);
      assert.ok(path.basename(r.file).startsWith(`${r.debianSource}_${r.version}`), r.name);
    }
  });

  it('a repository with a slow traced suite gets its own command limit, unless --config sets one', () => {
    const toolz = TRANSFER_PANEL.find((r) => r.name === 'toolz')!;
    assert.ok(toolz.commandTimeoutMs! > TRAIN_DEFAULTS.commandTimeoutMs);
    assert.equal(repoSettings(toolz, { maxTasks: 8 }).commandTimeoutMs, toolz.commandTimeoutMs);
    assert.equal(repoSettings(toolz, { maxTasks: 8, commandTimeoutMs: 30_000 }, { commandTimeoutMs: 30_000 }).commandTimeoutMs, 30_000);
    const plain = TRANSFER_PANEL.find((r) => r.commandTimeoutMs === undefined)!;
    assert.equal(repoSettings(plain, { maxTasks: 8 }).commandTimeoutMs, undefined, 'the default');
  });

  it('--repos picks by name in panel order and refuses unknown names with the list', () => {
    assert.deepEqual(
      pickRepos([]).map((r) => r.name),
      TRANSFER_PANEL.map((r) => r.name),
    );
    const two = [TRANSFER_PANEL[2].name, TRANSFER_PANEL[0].name];
    assert.deepEqual(
      pickRepos(two).map((r) => r.name),
      [TRANSFER_PANEL[0].name, TRANSFER_PANEL[2].name],
    );
    assert.throws(
      () => pickRepos(['nope']),
      (e: unknown) =>
        e instanceof TurnwiseError && /no repository "nope"/.test(e.message) && (e.hint ?? '').includes(TRANSFER_PANEL[0].name),
    );
  });

  it('uses the unpacked tree in the cache without fetching; a tarball off its pin is refused, not unpacked', async () => {
    const cache = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-transfer-'));
    try {
      const repo = TRANSFER_PANEL[0];
      const tree = path.join(cache, 'src', repo.dir);
      fs.mkdirSync(tree, { recursive: true });
      fs.writeFileSync(path.join(cache, 'src', `.${repo.dir}.sha256`), `${repo.sha256}\n`);
      // An unreachable mirror: any fetch would fail.
      assert.equal(await fetchRepo(repo, { cacheDir: cache, mirror: 'https://127.0.0.1:9' }), tree);
      const other = { ...TRANSFER_PANEL[1] };
      fs.mkdirSync(path.join(cache, 'downloads'), { recursive: true });
      fs.writeFileSync(path.join(cache, 'downloads', path.basename(other.file)), 'not the pinned file');
      await assert.rejects(
        fetchRepo(other, { cacheDir: cache, mirror: 'https://127.0.0.1:9' }),
        (e: unknown) => e instanceof TurnwiseError && /cannot fetch https:\/\/127\.0\.0\.1:9\//.test(e.message),
      );
      assert.ok(!fs.existsSync(path.join(cache, 'src', other.dir)));
    } finally {
      fs.rmSync(cache, { recursive: true, force: true });
    }
  });

  it('scores greedy and sampled held-out episodes apart, failed episodes left out, tasks resolved by either, how far samples differ', () => {
    const s = heldoutScore(
      [
        traj('eval-0-0', 'a', false),
        traj('eval-0-1', 'b', true),
        traj('evals-0-0-0', 'a', true),
        traj('evals-0-0-1', 'a', false),
        traj('evals-0-1-0', 'b', false),
        traj('evals-0-1-1', 'b', false, 'sandbox died'),
      ],
      3,
    );
    assert.deepEqual(s, {
      greedy: { resolved: 1, episodes: 2, rate: 0.5 },
      sampled: { resolved: 1, episodes: 3, rate: 0.3333, tasks_resolved: 1, distinct: 1 },
      tasks_resolved: 2,
      tasks: 3,
    });
    // Task a's two samples differ (1); task b has one sample left after its failure, so it does not count.
    const same = heldoutScore(
      [traj('evals-0-0-0', 'a', false), traj('evals-0-0-1', 'a', false), traj('evals-0-1-0', 'b', true), traj('evals-0-1-1', 'b', false)],
      2,
    );
    assert.equal(same.sampled.distinct, 0.5);
    assert.equal(heldoutScore([traj('eval-0-0', 'a', true)], 1).sampled.distinct, null);
  });
});

describe('bench/transfer: settings refused before any download', () => {
  const model = path.join(__dirname, '..', '..', '..', 'models', 'turnwise-tiny');
  let cache: string;
  beforeEach(() => (cache = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-transfer-unit-'))));
  afterEach(() => fs.rmSync(cache, { recursive: true, force: true }));
  // A mirror nothing answers on: a download attempt would fail with another message.
  const o = () => ({ model, repos: ['xmltodict'], cacheDir: cache, mirror: 'http://127.0.0.1:9' });

  it('an unknown --estimator, naming the known ones', async () => {
    await assert.rejects(benchTransfer({ ...o(), estimator: 'nope' }), (e: Error) => {
      assert.ok(e instanceof TurnwiseError);
      assert.match(e.message, /unknown estimator "nope"/);
      assert.match(String(e.hint), /grpo.*turnwise|turnwise.*grpo/);
      return true;
    });
    assert.deepEqual(fs.readdirSync(cache), [], 'nothing fetched or written');
  });

  it('the estimator given in --config instead of --estimator', async () => {
    await assert.rejects(benchTransfer({ ...o(), config: { estimator: 'grpo' } }), /sets "estimator" itself/);
    assert.deepEqual(fs.readdirSync(cache), []);
  });

  it('--seed sets the tasks and the held-out episodes, --rl-seed the RL runs alone; seeds in --config are refused', async () => {
    assert.deepEqual([transferBaseConfig({}).seed, transferBaseConfig({}).taskSeed], [0, 0]);
    assert.deepEqual([transferBaseConfig({ seed: 2 }).seed, transferBaseConfig({ seed: 2 }).taskSeed], [2, 2]);
    const b = transferBaseConfig({ seed: 2, rlSeed: 5, estimator: 'gear', config: { lr: 5e-5 } });
    assert.deepEqual([b.seed, b.taskSeed, b.estimator, b.lr, b.maxTasks], [5, 2, 'gear', 5e-5, 64]);
    await assert.rejects(benchTransfer({ ...o(), config: { seed: 3 } }), (e: Error) => {
      assert.match(e.message, /sets "seed" itself/);
      assert.match(String((e as TurnwiseError).hint), /--rl-seed/);
      return true;
    });
    assert.deepEqual(fs.readdirSync(cache), []);
  });
});
