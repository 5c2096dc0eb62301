import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { readTrajectoryAt, scanTrajectoryFile } from '../../../src/extension/model/trajScan';
import { groupByTask, listIterations, listRuns, runsRoot, summarizeRun } from '../../../src/extension/model/runIndex';
import { writeFixtureRun } from '../../support/runFixture';

describe('extension: trajectory file scan', () => {
  let tmp: string;
  before(() => (tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-scan-'))));
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('summarizes every line like JSON.parse would, and reads each back by its byte range', async () => {
    const dir = writeFixtureRun(tmp, { iterations: 2, trajectories: 12 });
    const file = path.join(dir, 'iterations', '1', 'trajectories.jsonl');
    const lines = fs
      .readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    // A tiny chunk forces lines across chunk edges and buffer growth.
    for (const chunk of [64, 4 << 20]) {
      const { summaries, badLines } = await scanTrajectoryFile(file, chunk);
      assert.deepEqual(badLines, []);
      assert.equal(summaries.length, lines.length);
      for (const [i, s] of summaries.entries()) {
        const t = lines[i];
        assert.deepEqual(
          [s.taskId, s.trajId, s.groupId, s.reward, s.passRate, s.resolved, s.turns, s.iteration, s.split],
          [t.taskId, t.trajId, t.groupId, t.reward.reward, t.reward.passRate, t.reward.resolved, t.reward.turns, t.iteration, t.split],
        );
        const back = await readTrajectoryAt(file, s.offset, s.length);
        assert.deepEqual(back, t);
      }
    }
  });

  it('copes with escapes, braces in strings, unicode, a bad line, CRLF and no final newline', async () => {
    const file = path.join(tmp, 'odd.jsonl');
    const a = {
      taskId: 'a"}{[',
      trajId: 'ü—✓',
      groupId: 'g\\',
      turns: [{ action: 'echo "}}]]\\" {', observation: '\u0000\n"' }],
      reward: { reward: -0.5, passRate: 0, resolved: false, turns: 1 },
    };
    const b = {
      turns: [],
      trajId: 'b',
      taskId: 't',
      groupId: 'g',
      failure: 'sandbox died',
      reward: { reward: null, passRate: null, resolved: false, turns: 0 },
    };
    fs.writeFileSync(file, `${JSON.stringify(a)}\r\n\nnot json\n  ${JSON.stringify(b, null, 0)}`);
    const { summaries, badLines } = await scanTrajectoryFile(file, 16);
    assert.deepEqual(badLines, [3]);
    assert.deepEqual(
      summaries.map((s) => [s.taskId, s.trajId, s.groupId, s.reward, s.failure]),
      [
        ['a"}{[', 'ü—✓', 'g\\', -0.5, undefined],
        ['t', 'b', 'g', null, 'sandbox died'],
      ],
    );
    assert.equal((await readTrajectoryAt(file, summaries[0].offset, summaries[0].length)).trajId, 'ü—✓');
  });

  it('reads the keys on both sides of the turns without walking them, in any key order', async () => {
    const file = path.join(tmp, 'orders.jsonl');
    const reward = (r: number) => ({ reward: r, passRate: r, resolved: r === 1, turns: 2, formatError: false });
    // Turns full of what a walk trips on: nested arrays and objects, escaped quotes, a "reward" key.
    const turns = [
      { action: 'echo "]}"', observation: '\\"[{', tokenIds: [1, 2], nested: [[{ reward: 9 }]], edits: [{ before: '"}', after: '{' }] },
    ];
    const rows = [
      {
        taskId: 'a',
        trajId: 'a1',
        groupId: 'ga',
        iteration: 3,
        split: 'train',
        turns,
        testReport: { passed: ['x'], failed: ['y "z"'] },
        reward: reward(1),
      },
      { turns, reward: reward(0.5), failure: 'sandbox "died"', split: 'heldout', iteration: 4, trajId: 'b1', taskId: 'b', groupId: 'gb' },
      { taskId: 'c', trajId: 'c1', groupId: 'gc', reward: { ...reward(0), tampered: 'x.py: imports pytest' }, turns },
      { taskId: 'd', trajId: 'd1', groupId: 'gd', reward: reward(0.25) },
      { taskId: 'e', trajId: 'e1', groupId: 'ge', turns, reward: reward(0.75) },
    ];
    // Spaces around every token (line 3) and an escaped "turns" key (line 5) as well as compact.
    const text = rows
      .map((r, i) =>
        i === 2
          ? JSON.stringify(r).replace(/([{}[\],:])/g, ' $1 ')
          : i === 4
            ? JSON.stringify(r).replace('"turns"', '"tur\\u006es"')
            : JSON.stringify(r),
      )
      .join('\n');
    assert.ok(text.includes('"tur\\u006es"'));
    fs.writeFileSync(file, text);
    const { summaries, badLines } = await scanTrajectoryFile(file);
    assert.deepEqual(badLines, []);
    assert.deepEqual(
      summaries.map((s) => [s.taskId, s.trajId, s.groupId, s.iteration, s.split, s.reward, s.failure ?? null]),
      [
        ['a', 'a1', 'ga', 3, 'train', 1, null],
        ['b', 'b1', 'gb', 4, 'heldout', null, 'sandbox "died"'],
        ['c', 'c1', 'gc', undefined, undefined, 0, null],
        ['d', 'd1', 'gd', undefined, undefined, 0.25, null],
        ['e', 'e1', 'ge', undefined, undefined, 0.75, null],
      ],
    );
    assert.deepEqual(
      summaries.map((s) => s.tampered ?? false),
      [false, false, true, false, false],
      'only c1 tampered with the tests',
    );
    // A line cut inside its turns (a writer that died) is a bad line, not a wrong summary.
    fs.writeFileSync(file, `${JSON.stringify(rows[0]).slice(0, 120)}\n${JSON.stringify(rows[1])}\n`);
    const cut = await scanTrajectoryFile(file);
    assert.deepEqual(cut.badLines, [1]);
    assert.deepEqual(
      cut.summaries.map((s) => s.trajId),
      ['b1'],
    );
  });

  it('a missing file is an empty scan', async () => {
    assert.deepEqual(await scanTrajectoryFile(path.join(tmp, 'nope.jsonl')), { summaries: [], badLines: [], bytes: 0 });
  });

  it('lists runs, iterations with metrics, tasks grouped with their numbers; a dead writer reads as interrupted', () => {
    const ws = fs.mkdtempSync(path.join(tmp, 'ws-'));
    writeFixtureRun(ws, { runId: 'a__grpo__1__20250101-100000', estimator: 'grpo', iterations: 2, trajectories: 8 });
    writeFixtureRun(ws, {
      runId: 'b__turnwise__1__20250102-100000',
      iterations: 1,
      trajectories: 8,
      state: 'running',
      pid: 2 ** 22 + 12345,
    });
    const runs = listRuns(runsRoot(ws));
    assert.deepEqual(
      runs.map((r) => [r.runId, r.state, r.estimator]),
      [
        ['b__turnwise__1__20250102-100000', 'interrupted', 'turnwise'],
        ['a__grpo__1__20250101-100000', 'finished', 'grpo'],
      ],
    );
    const its = listIterations(runs[1].dir);
    assert.deepEqual(
      its.map((i) => [i.iteration, !!i.trainFile, !!i.heldoutFile, typeof i.metrics?.['heldout/pass_rate']]),
      [
        [0, false, true, 'number'],
        [1, true, true, 'number'],
        [2, true, true, 'number'],
      ],
    );
    assert.equal(summarizeRun(runs[1].dir).last?.iteration, 2);
  });

  it('groups by task with means over scored episodes', async () => {
    const dir = writeFixtureRun(tmp, { runId: 'g__x__1__20250101-000000', iterations: 1, trajectories: 8, groupSize: 4 });
    const { summaries } = await scanTrajectoryFile(path.join(dir, 'iterations', '1', 'trajectories.jsonl'));
    summaries[0].reward = null;
    const tasks = groupByTask(summaries, 'train');
    assert.deepEqual(
      tasks.map((t) => [t.taskId, t.episodes]),
      [
        ['mut-clamp-compare', 4],
        ['mut-add-sign', 4],
      ],
    );
    const first = summaries.slice(1, 4).map((s) => s.reward!);
    assert.ok(Math.abs(tasks[0].meanReward! - first.reduce((a, b) => a + b, 0) / 3) < 1e-12);
    assert.equal(tasks[0].resolved, summaries.slice(0, 4).filter((s) => s.resolved).length);
  });

  it('an iteration of 10,000 trajectories is scanned without parsing the turns: JSON.parse sees under 5% of the bytes', async function () {
    // What makes the scan cheap, counted rather than timed (a timed test flakes on a busy machine;
    // the speed itself is printed): the turns, most of each line, are skipped, never parsed.
    this.timeout(120000);
    const ws = fs.mkdtempSync(path.join(tmp, 'big-'));
    const dir = writeFixtureRun(ws, { runId: 'big__turnwise__1__20250101-000000', iterations: 1, trajectories: 10000, groupSize: 8 });
    const file = path.join(dir, 'iterations', '1', 'trajectories.jsonl');
    const bytes = fs.statSync(file).size;
    const parse = JSON.parse;
    let parsedChars = 0;
    JSON.parse = ((text: string, reviver?: Parameters<typeof parse>[1]) => {
      parsedChars += String(text).length;
      return parse(text, reviver);
    }) as typeof JSON.parse;
    let summaries: Awaited<ReturnType<typeof scanTrajectoryFile>>['summaries'];
    const t0 = performance.now();
    try {
      summaries = (await scanTrajectoryFile(file)).summaries;
    } finally {
      JSON.parse = parse;
    }
    const groups = groupByTask(summaries, 'train').length;
    const ms = performance.now() - t0;
    console.log(
      `      10,000 trajectories (${(bytes / 2 ** 20).toFixed(1)} MiB): scan + group ${ms.toFixed(0)} ms (${groups} tasks); ${parsedChars} characters through JSON.parse`,
    );
    assert.equal(summaries.length, 10000);
    assert.equal(groups, 1250);
    assert.ok(parsedChars < bytes * 0.05, `JSON.parse read ${parsedChars} of ${bytes} bytes: the scan parsed the turns`);
    // The summaries are what a full parse gives.
    const full = fs
      .readFileSync(file, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { trajId: string; reward: { reward: number; resolved: boolean } });
    assert.deepEqual(
      summaries.slice(0, 50).map((x) => [x.trajId, x.reward, x.resolved]),
      full.slice(0, 50).map((t) => [t.trajId, t.reward.reward, t.reward.resolved]),
    );
  });
});
