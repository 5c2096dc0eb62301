import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  cacheableCommand,
  cachedTurnFraction,
  CUT_SHORT_MARKER,
  keepableObservation,
  mayDetach,
  ObservationCache,
} from '../../../src/agent/cache';
import { SCHEMA, type Trajectory, type Turn } from '../../../src/core/schema';

describe('agent/cache: replayed observations of read-only tool commands', () => {
  it('cacheableCommand: the deterministic sandbox tools with plain arguments, nothing else', () => {
    for (const c of ['tw-suspects', 'tw-test', '  tw-test  ', 'tw-test tests/test_stock.py', 'tw-test tests/test_stock.py::test_ship -k=x'])
      assert.ok(cacheableCommand(c), c);
    for (const c of [
      'tw-test; echo x > f', // a second command that writes
      'tw-test && sed -i 1d a.py',
      'tw-test | tee log',
      'tw-test $(date)', // expansion: output not a function of the files
      'tw-test > out.txt',
      'tw-suspects &',
      'cat inventory/stock.py', // cheap, and not declared deterministic
      'python -c "import random; print(random.random())"',
      'tw-testx',
      'echo tw-test',
    ]) {
      assert.ok(!cacheableCommand(c), c);
    }
  });

  it('mayDetach: a lone & or a detaching command, not && or redirections', () => {
    for (const c of ['sleep 5 &', 'sleep 5 & echo hi', 'nohup python server.py', 'setsid sh -c x', '(sleep 1; touch f) &'])
      assert.ok(mayDetach(c), c);
    for (const c of ['tw-test && submit', 'pytest 2>&1 | tail', 'cmd &> log', 'cmd >&2', 'cat <&3', 'echo a && echo b'])
      assert.ok(!mayDetach(c), c);
  });

  it('keepableObservation: not after a timeout, not when tw-suspects says the clock cut its ranking short', () => {
    const full = 'exit 1\n1 failed, 12 passed\ninventory/reorder.py:12: packs = (missing + pack_size - 2) // pack_size';
    assert.ok(keepableObservation(full, false));
    assert.ok(!keepableObservation(full, true));
    // The marker is the tool's own last line: read it from the tool's source, so the two cannot drift.
    const tool = fs.readFileSync(path.join(__dirname, '..', '..', '..', 'sandbox-images', 'python', 'tools', 'turnwise_tools.py'), 'utf8');
    const line = /^CUT_SHORT = "([^"]+)"$/m.exec(tool)?.[1];
    assert.ok(line, 'turnwise_tools.py defines CUT_SHORT');
    assert.ok(line.startsWith(CUT_SHORT_MARKER), line);
    assert.ok(!keepableObservation(`${full}\n${line}`, false));
  });

  it('claim: one producer per key, waiters get what it settles; undefined frees the key', async () => {
    const cache = new ObservationCache();
    const key = ObservationCache.key('t1', 'tw-test', 20_000);
    const first = cache.claim(key);
    assert.ok('settle' in first, 'the first claim produces');
    const second = cache.claim(key);
    assert.ok('wait' in second, 'a concurrent claim waits instead of running the command again');
    first.settle({ exitCode: 1, observation: 'exit 1\n1 failed' });
    assert.deepEqual(await second.wait, { exitCode: 1, observation: 'exit 1\n1 failed' });
    const later = cache.claim(key);
    assert.ok('wait' in later);
    assert.deepEqual(await later.wait, { exitCode: 1, observation: 'exit 1\n1 failed' });

    // Not cacheable after all (it changed files or timed out): waiters run it themselves, and the
    // next claim produces again.
    const k2 = ObservationCache.key('t2', 'tw-test', 20_000);
    const p = cache.claim(k2);
    const w = cache.claim(k2);
    assert.ok('settle' in p && 'wait' in w);
    p.settle(undefined);
    assert.equal(await w.wait, undefined);
    assert.ok('settle' in cache.claim(k2));
  });

  it('keys: the tree, the command and its time limit all count', () => {
    const k = ObservationCache.key('abc', 'tw-test', 20_000);
    assert.notEqual(k, ObservationCache.key('abd', 'tw-test', 20_000));
    assert.notEqual(k, ObservationCache.key('abc', 'tw-suspects', 20_000));
    assert.notEqual(k, ObservationCache.key('abc', 'tw-test', 10_000), 'tw-suspects budgets by TW_COMMAND_TIMEOUT_MS');
    assert.equal(k, ObservationCache.key('abc', ' tw-test ', 20_000));
  });

  it('bounded: the oldest keys go first', () => {
    const cache = new ObservationCache(3);
    for (const t of ['a', 'b', 'c', 'd']) {
      const c = cache.claim(ObservationCache.key(t, 'tw-test', 1));
      assert.ok('settle' in c);
      c.settle({ exitCode: 0, observation: t });
    }
    assert.equal(cache.size, 3);
    assert.ok('settle' in cache.claim(ObservationCache.key('a', 'tw-test', 1)), 'a was evicted');
    assert.ok('wait' in cache.claim(ObservationCache.key('d', 'tw-test', 1)));
  });

  it('cachedTurnFraction: of the commands run, submit and format errors left out', () => {
    const turn = (action: string, extra: Partial<Turn> = {}): Turn => ({
      index: 0,
      action,
      observation: '',
      exitCode: 0,
      durationMs: 1,
      ...extra,
    });
    const traj = (turns: Turn[]): Trajectory => ({
      schema: SCHEMA.trajectory,
      taskId: 't',
      groupId: 'g',
      trajId: 'x',
      checkpoint: 'c',
      turns,
      reward: {
        passRate: 0,
        resolved: false,
        turns: 1,
        maxTurns: 4,
        formatError: false,
        efficiencyPenalty: 0,
        formatPenalty: 0,
        reward: 0,
      },
    });
    const r = cachedTurnFraction([
      traj([turn('tw-suspects', { cached: true }), turn('sed -i 1d a'), turn('submit')]),
      traj([turn('tw-test', { cached: true }), turn('"', { formatError: 'unterminated quote' })]),
    ]);
    assert.equal(r, 2 / 3);
    assert.equal(cachedTurnFraction([]), 0);
  });
});
