// The warm start's one config: resolveWarmstartConfig fills every setting from WARMSTART_DEFAULTS
// (those of the kind of warm start where the compact and the chat warm start differ), keeps what
// is given, settles the length (the default budget only without a schedule in steps), and refuses a
// setting out of its range, naming it.
import * as assert from 'node:assert/strict';
import { resolveWarmstartConfig, WARMSTART_DEFAULTS, WARMSTART_RANGES, type WarmstartConfig } from '../../../src/warmstart/config';

describe('warmstart/config: resolveWarmstartConfig', () => {
  it('keeps only settings: absent ones are filled, undefined ones too, and the inputs beside them stay out', () => {
    const c = resolveWarmstartConfig({
      out: '/m',
      rows: undefined,
      seed: 3,
      onLog: () => undefined,
      episodes: [],
      settings: { provider: 'cpu' },
    } as never);
    assert.equal(c.rows, 8);
    assert.equal(c.seed, 3);
    for (const k of ['onLog', 'episodes', 'settings', 'workspaceCases', 'signal']) assert.ok(!(k in c), `${k} is an input, not a setting`);
  });

  it('fills the defaults of the kind of warm start, the others shared', () => {
    const compact = resolveWarmstartConfig({ out: '/m' });
    assert.equal(compact.out, '/m');
    assert.equal(compact.minutes, WARMSTART_DEFAULTS.minutes);
    assert.equal(compact.steps, undefined);
    assert.deepEqual(
      [compact.rows, compact.rowTokens, compact.peakLr, compact.promptWeight, compact.poolSize, compact.evalCases],
      [8, 640, 2e-3, 0.3, 6000, 64],
    );
    assert.equal(compact.floorLr, compact.peakLr * WARMSTART_DEFAULTS.floorLrShare);
    const chat = resolveWarmstartConfig({ out: '/m' }, 'chat');
    assert.deepEqual(
      [chat.rows, chat.rowTokens, chat.peakLr, chat.promptWeight, chat.poolSize, chat.evalCases],
      [4, 2048, 2e-5, 0, 2000, 16],
    );
    assert.equal(resolveWarmstartConfig({ out: '/m' }, 'chat-lora').peakLr, 2e-4);
    for (const c of [compact, chat]) {
      assert.deepEqual(
        [
          c.seed,
          c.warmupFrac,
          c.curriculumStart,
          c.curriculumEnd,
          c.workspaceShare,
          c.episodeShare,
          c.loopShare,
          c.maxActionTokens,
          c.evalEveryMin,
          c.checkpointEveryMin,
        ],
        [0, 0.04, 0.7, 0.2, 0.2, 1, 0, 128, 5, 5],
      );
      assert.deepEqual([c.taskSeed, c.heldoutFraction, c.maxTasks, c.episodeFiles, c.sourceRoots, c.noSed], [0, 0.25, 32, [], [], false]);
    }
    // Settings without a default stay absent (not undefined), so a spread over inputs keeps them.
    for (const k of ['from', 'model', 'adapter', 'lora', 'steps', 'workspace', 'tasksFile', 'run'] as const) assert.ok(!(k in compact), k);
  });

  it('keeps what is given; steps without minutes have no time limit, both make the minutes a limit', () => {
    const c = resolveWarmstartConfig(
      { out: '/m', steps: 10, rows: 2, peakLr: 1e-3, floorLr: 1e-5, noSed: true, realShare: 0.5, sourceRoots: ['/src'] },
      'chat',
    );
    assert.deepEqual(
      [c.steps, c.minutes, c.rows, c.peakLr, c.floorLr, c.noSed, c.sourceRoots],
      [10, undefined, 2, 1e-3, 1e-5, true, ['/src']],
    );
    assert.ok(!('minutes' in c));
    assert.equal(resolveWarmstartConfig({ out: '/m', steps: 10, minutes: 3 }).minutes, 3);
    assert.equal(resolveWarmstartConfig({ out: '/m', peakLr: 1e-3 }).floorLr, 1e-3 * WARMSTART_DEFAULTS.floorLrShare);
  });

  it('refuses a setting out of its range, naming it; the length keeps its own messages', () => {
    const bad = (given: Partial<WarmstartConfig>, message: RegExp) =>
      assert.throws(() => resolveWarmstartConfig({ out: '/m', ...given }), message);
    bad({ steps: 0 }, /the warm-start schedule must be a whole number of steps > 0, got 0/);
    bad({ steps: 2.5 }, /whole number of steps/);
    bad({ minutes: 0 }, /the warm-start budget must be > 0 minutes, got 0/);
    bad({ rows: 0 }, /warm-start setting "rows" must be an integer in \[1, 256\], got 0/);
    bad({ peakLr: 0 }, /"peakLr" must be a number in \(0, 1\], got 0/);
    bad({ loopShare: 1.5 }, /"loopShare" must be a number in \[0, 1\]/);
    bad({ heldoutFraction: Number.NaN }, /"heldoutFraction"/);
    bad({ maxTasks: 0 }, /"maxTasks" must be an integer ≥ 1, got 0/);
    bad({ noSed: 'yes' as unknown as boolean }, /"noSed" must be true or false/);
    bad({ episodeFiles: [1 as unknown as string] }, /"episodeFiles" must be a list of paths/);
    assert.throws(() => resolveWarmstartConfig({ out: '' }), /needs a folder to write its checkpoint to/);
  });

  it('every default is in its range', () => {
    for (const kind of ['compact', 'chat', 'chat-lora'] as const) {
      const c = resolveWarmstartConfig({ out: '/m' }, kind);
      // Every number setting has a range, and every range is of a setting.
      for (const key of Object.keys(WARMSTART_RANGES)) assert.ok(key in c || key === 'steps', key);
      for (const [key, v] of Object.entries(c)) if (typeof v === 'number') assert.ok(key in WARMSTART_RANGES, key);
      assert.doesNotThrow(() => resolveWarmstartConfig({ ...c, steps: 100 }, kind));
    }
  });
});
