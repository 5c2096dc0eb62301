import * as assert from 'node:assert/strict';
import { blame, changedRanges, lineOrigins, splitLines, textAt, firstLineByTurn } from '../../../src/extension/model/blame';
import { advantageStyle, turnHoverMarkdown, turnLensTitle, turnLensTooltip } from '../../../src/extension/model/turnView';
import { fractionDone, initialProgress, reduceProgress, statusBarText } from '../../../src/extension/model/progress';
import { CHARTS, chartColumns } from '../../../src/extension/model/chartSeries';
import { advantageHistogram, taskTable, toPoints } from '../../../src/extension/model/rewardData';
import { webviewHtml } from '../../../src/extension/webviewHtml';
import { makeEvent } from '../../../src/core/events';
import { SCHEMA } from '../../../src/core/schema';
import { runRow, runStartedAt } from '../../../src/extension/model/runIndex';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { trajectoryActionFormat } from '../../../src/extension/model/runModel';
import {
  BUG_LINE,
  CHAT_FORMAT_ERROR,
  CHAT_REPLY_1,
  FIXED,
  HEADER,
  ORIGINAL,
  FIXTURE_FILE,
  fixtureTrajectory,
  writeFixtureRun,
} from '../../support/runFixture';

const traj = (good = true) =>
  fixtureTrajectory({ taskId: 't', groupId: 'g', trajId: 'x', iteration: 1, split: 'train', good, r: () => 0.5, scoreBase: 0 });

describe('extension: blame by turn', () => {
  it('lineOrigins keeps common lines and marks changed and inserted ones', () => {
    assert.deepEqual(lineOrigins(['a', 'b', 'c'], ['a', 'x', 'c']), [0, -1, 2]);
    assert.deepEqual(lineOrigins(['a', 'b', 'c'], ['z', 'a', 'b', 'c']), [-1, 0, 1, 2]);
    // A swap keeps one of the two lines (either is a longest common subsequence).
    assert.equal(lineOrigins(['a', 'b', 'c', 'd'], ['a', 'c', 'b', 'd']).filter((o) => o >= 0).length, 3);
    assert.deepEqual(changedRanges([0, -1, -1, 3, -1]), [
      [1, 3],
      [4, 5],
    ]);
    // Too large to compare: the middle counts as replaced.
    assert.deepEqual(lineOrigins(['a', 'b', 'q'], ['c', 'b', 'r'], 1), [-1, -1, -1]);
  });

  it('texts before and after each turn come from the recorded edits', () => {
    const t = traj();
    assert.equal(textAt(t, FIXTURE_FILE, 1, 'after'), ORIGINAL);
    assert.equal(textAt(t, FIXTURE_FILE, 2, 'before'), ORIGINAL);
    assert.equal(textAt(t, FIXTURE_FILE, 2, 'after'), FIXED);
    assert.equal(textAt(t, FIXTURE_FILE, 4, 'after'), HEADER + FIXED);
    assert.equal(textAt(t, 'other.py', 4), undefined);
  });

  it('attributes each line to the turn that last wrote it', () => {
    const t = traj();
    const at2 = blame(t, FIXTURE_FILE, 2)!;
    assert.deepEqual(at2.currentRanges, [[BUG_LINE, BUG_LINE + 1]]);
    assert.deepEqual(
      at2.lineTurns.flatMap((x, i) => (x === undefined ? [] : [[i, x]])),
      [[BUG_LINE, 2]],
    );
    const at4 = blame(t, FIXTURE_FILE, 4)!;
    assert.deepEqual(at4.currentRanges, [[0, 2]]);
    assert.deepEqual(
      at4.lineTurns.flatMap((x, i) => (x === undefined ? [] : [[i, x]])),
      [
        [0, 4],
        [1, 4],
        [BUG_LINE + 2, 2],
      ],
    );
    assert.deepEqual(
      [...firstLineByTurn(at4)],
      [
        [4, 0],
        [2, BUG_LINE + 2],
      ],
    );
    assert.equal(at4.text.split('\n').length, splitLines(HEADER + FIXED).length);
    // Before any edit there is nothing to attribute.
    assert.deepEqual(
      blame(t, FIXTURE_FILE, 1)!.lineTurns.filter((x) => x !== undefined),
      [],
    );
  });
});

describe('extension: turn view', () => {
  it('styles advantages by sign and size relative to the trajectory', () => {
    assert.equal(advantageStyle(0.9, 1), 'positiveStrong');
    assert.equal(advantageStyle(0.2, 1), 'positive');
    assert.equal(advantageStyle(-0.2, 1), 'negative');
    assert.equal(advantageStyle(-0.6, 1), 'negativeStrong');
    assert.equal(advantageStyle(0, 1), 'neutral');
    assert.equal(advantageStyle(undefined, 1), 'unscored');
  });
  it('lens title and hover carry the command and the advantage with its components', () => {
    const t = traj();
    const turn = t.turns[1];
    // Short: a narrow editor cuts lenses off; the components are in the tooltip.
    assert.match(turnLensTitle(turn), /^Turn 2 · A \+0\.\d{3}$/);
    assert.ok(turnLensTitle(turn).length <= 20);
    assert.match(turnLensTooltip(turn), /^A \+0\.\d{3} = backbone \+0\.300, residual [+−]0\.\d{3}, tree \+0\.010\n\$ sed -i /);
    assert.equal(turnLensTitle({ ...turn, advantage: undefined }), 'Turn 2');
    const md = turnHoverMarkdown(turn, t);
    assert.ok(md.includes(turn.action));
    assert.match(md, /advantage \*\*\+0\.\d+\*\*/);
    assert.match(md, new RegExp(`exit ${turn.exitCode} · ${turn.durationMs} ms`));
    // A replayed observation has no run time of its own: the hover says so instead.
    const replayed = turnHoverMarkdown({ ...turn, cached: true }, t);
    assert.match(replayed, /replayed from an identical workspace/);
    assert.ok(!replayed.includes(`${turn.durationMs} ms`));
    // A branch's turn taken from its parent says so; a sampled one does not.
    assert.match(turnHoverMarkdown({ ...turn, inherited: true }, t), /taken from the parent episode of this branch/);
    assert.ok(!md.includes('parent episode'));
    // The policy's text in a format error, and a run folder's trajectory id, render as text: no image, link or markup.
    const hostile = turnHoverMarkdown({ ...turn, formatError: 'near ![](https://x.y/a)' }, { ...t, trajId: '[x](https://x.y) *b*' });
    assert.ok(!hostile.includes('](https://'), hostile);
    assert.match(hostile, /format error: near \\!\\\[\\\]\\\(https:\/\/x\\\.y\/a\\\)/);
    assert.match(hostile, /of \\\[x\\\]\\\(https:\/\/x\\\.y\\\) \\\*b\\\*/);
  });
});

describe("extension: a trajectory's action format", () => {
  it("comes from its checkpoint's action_format.json, else the run's config.json, else the turns' replies", () => {
    const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-format-'));
    try {
      const dir = writeFixtureRun(ws, { runId: 'chat', iterations: 1, trajectories: 4, chat: true, model: '/models/m', loraR: 4 });
      const line = fs.readFileSync(path.join(dir, 'iterations', '1', 'trajectories.jsonl'), 'utf8').split('\n')[1];
      const t = JSON.parse(line);
      // The fixture's bad episode: turn 1 keeps its reply, turn 2 is a reply with two blocks, not run.
      assert.equal(t.turns[0].reply, CHAT_REPLY_1);
      assert.equal(t.turns[1].formatError, CHAT_FORMAT_ERROR);
      assert.equal(t.turns[1].exitCode, null);
      assert.equal(trajectoryActionFormat(dir, t), 'chat');
      fs.writeFileSync(path.join(dir, 'checkpoints', '0', 'action_format.json'), JSON.stringify({ format: 'compact' }));
      assert.equal(trajectoryActionFormat(dir, t), 'compact', "the checkpoint's record comes first");
      fs.rmSync(path.join(dir, 'checkpoints', '0', 'action_format.json'));
      assert.equal(trajectoryActionFormat(dir, t), 'chat', "then the run's config.json");
      const cfg = path.join(dir, 'config.json');
      const c = JSON.parse(fs.readFileSync(cfg, 'utf8'));
      delete c.actionFormat;
      fs.writeFileSync(cfg, JSON.stringify(c));
      assert.equal(trajectoryActionFormat(dir, t), 'chat', 'then the replies');
      assert.equal(trajectoryActionFormat(dir, traj()), undefined, 'nothing says: no format shown');
    } finally {
      fs.rmSync(ws, { recursive: true, force: true });
    }
  });
});

describe('extension: run progress', () => {
  it('folds events into the status bar text and a fraction done', () => {
    const ev = (b: Parameters<typeof makeEvent>[1]) => makeEvent('r1', b);
    let p = initialProgress();
    assert.equal(statusBarText(p), '$(sync~spin) Turnwise starting…');
    p = reduceProgress(p, ev({ type: 'run-started', runDir: '/x', iterations: 3, trainTasks: 4, heldoutTasks: 1 }));
    p = reduceProgress(p, ev({ type: 'phase', iteration: 1, phase: 'rollout', done: 8, total: 16 }));
    assert.equal(statusBarText(p), '$(sync~spin) Turnwise 1/3');
    assert.ok(Math.abs(fractionDone(p) - 1.5 / 4) < 1e-9);
    p = reduceProgress(
      p,
      ev({ type: 'iteration-finished', iteration: 1, metrics: { schema: SCHEMA.metrics, iteration: 1, 'tests/pass_rate': 0.43 } }),
    );
    assert.equal(statusBarText(p), '$(sync~spin) Turnwise 1/3 · pass 43%');
    p = reduceProgress(p, ev({ type: 'run-failed', error: { code: 'x', message: 'boom', hint: 'do y' } }));
    assert.equal(p.state, 'failed');
    assert.equal(p.error?.hint, 'do y');
  });

  it('a run its time budget stopped keeps the reason; one the user stopped does not', () => {
    const ev = (b: Parameters<typeof makeEvent>[1]) => makeEvent('r1', b);
    const started = reduceProgress(
      initialProgress(),
      ev({ type: 'run-started', runDir: '/x', iterations: 9, trainTasks: 4, heldoutTasks: 1 }),
    );
    const budget = reduceProgress(
      started,
      ev({ type: 'run-stopped', lastCompleteIteration: 3, reason: 'its time budget of 30 min would pass', outOfTime: true }),
    );
    assert.deepEqual([budget.state, budget.lastFinished, budget.stopReason], ['stopped', 3, 'its time budget of 30 min would pass']);
    const user = reduceProgress(started, ev({ type: 'run-stopped', lastCompleteIteration: 2, reason: 'stopped by the user' }));
    assert.deepEqual([user.state, user.stopReason], ['stopped', undefined]);
  });
});

describe('extension: reward panel data', () => {
  const rows = (n: number, f: number) =>
    Array.from({ length: n }, (_, i) => ({
      schema: SCHEMA.metrics,
      iteration: i,
      'tests/pass_rate': i * f,
      'reward/mean': 0.5,
      'reward/std': 0.1,
    }));
  it('aligns two runs on the union of their iterations, with a ± std band', () => {
    const main = toPoints(rows(3, 0.1));
    const over = toPoints(rows(5, 0.2));
    const pass = chartColumns(
      CHARTS.find((c) => c.id === 'passRate')!,
      main,
      over,
      { main: 'turnwise', overlay: 'grpo' },
    );
    assert.deepEqual(pass.x, [0, 1, 2, 3, 4]);
    assert.deepEqual(pass.ys[0], [0, 0.1, 0.2, null, null]);
    assert.deepEqual(
      pass.series.map((s) => s.label),
      ['train · turnwise', 'held-out · turnwise', 'train · grpo', 'held-out · grpo'],
    );
    assert.equal(pass.points, 8);
    const reward = chartColumns(
      CHARTS.find((c) => c.id === 'reward')!,
      main,
    );
    assert.deepEqual(
      reward.series.map((s) => s.kind),
      ['line', 'lower', 'upper'],
    );
    assert.deepEqual(reward.ys[1], [0.4, 0.4, 0.4]);
    // The sampled held-out series shows only when a run wrote it.
    const resolved = CHARTS.find((c) => c.id === 'resolved')!;
    assert.deepEqual(
      chartColumns(resolved, main).series.map((s) => s.label),
      ['train', 'held-out'],
    );
    const sampled = toPoints([{ schema: SCHEMA.metrics, iteration: 0, 'heldout/resolved': 0.25, 'heldout/sampled/resolved': 0.375 }]);
    const cols = chartColumns(resolved, sampled);
    assert.deepEqual(
      cols.series.map((s) => s.label),
      ['train', 'held-out', 'held-out sampled'],
    );
    assert.deepEqual(cols.ys[2], [0.375]);
  });
  it('stacks the failure labels per iteration: each layer on the ones below, labels never seen left out, no overlay', () => {
    const failures = CHARTS.find((c) => c.id === 'failures')!;
    const m = toPoints([
      { schema: SCHEMA.metrics, iteration: 0, 'heldout/resolved': 0.5 },
      { schema: SCHEMA.metrics, iteration: 1, 'failures/refused-edit': 0.5, 'failures/turn-limit': 0.25, 'failures/wrong-file': 0 },
      { schema: SCHEMA.metrics, iteration: 2, 'failures/refused-edit': 0.25, 'failures/turn-limit': 0, 'failures/wrong-file': 0 },
    ]);
    const cols = chartColumns(failures, m, m);
    assert.deepEqual(
      cols.series.map((s) => [s.label, s.kind, s.run]),
      [
        ['refused-edit', 'stack', 'main'],
        ['turn-limit', 'stack', 'main'],
      ],
    );
    assert.deepEqual(cols.ys[0], [null, 0.5, 0.25]);
    assert.deepEqual(cols.ys[1], [null, 0.75, 0.25], 'the top of the stack: labels per episode');
  });
  it('builds the per-task table and the advantage histogram', () => {
    const s = (taskId: string, passRate: number | null) => ({ taskId, passRate }) as never;
    const table = taskTable([
      { iteration: 1, split: 'train', summaries: [s('a', 1), s('a', 0), s('b', null)] },
      { iteration: 2, split: 'train', summaries: [s('a', 1)] },
      { iteration: 2, split: 'heldout', summaries: [s('h', 0.5)] },
    ]);
    assert.deepEqual(table, {
      iterations: [1, 2],
      rows: [
        { taskId: 'a', split: 'train', passRates: [0.5, 1] },
        { taskId: 'h', split: 'heldout', passRates: [null, 0.5] },
      ],
    });
    const h = advantageHistogram([traj(true), traj(false)], 1, 10)!;
    assert.equal(h.turns, 10);
    assert.deepEqual(Object.keys(h.counts), ['total', 'backbone', 'residual', 'tree']);
    for (const c of Object.values(h.counts))
      assert.equal(
        c.reduce((a, b) => a + b, 0),
        10,
      );
    assert.equal(advantageHistogram([{ turns: [] }], 1), null);
  });
  it("the webview shell allows only its nonce'd script", () => {
    const html = webviewHtml({ cspSource: 'vscode-resource:', scriptUri: 'x.js', styleUris: ['x.css'], title: 't', nonce: 'abc' });
    assert.match(html, /default-src 'none'/);
    assert.match(html, /script-src 'nonce-abc'/);
    assert.match(html, /<script nonce="abc" src="x.js">/);
  });
});

describe("extension/model/runIndex: a run's row in the Runs view", () => {
  const base = { dir: '/w/.turnwise/runs/x', iterations: 8, lastCompleteIteration: 3 };
  const local = (iso: string) => {
    const d = new Date(iso);
    const two = (n: number) => String(n).padStart(2, '0');
    return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${two(d.getHours())}:${two(d.getMinutes())}`;
  };

  it('two runs of one workspace, estimator and seed read apart by start time, model and held-out rate; the id is in the description', () => {
    const a = runRow({
      ...base,
      runId: 'fixture__turnwise__1__20250101-120000',
      state: 'finished',
      estimator: 'turnwise',
      last: { 'heldout/resolved': 0.375, 'tests/pass_rate': 0.9 } as never,
    });
    const b = runRow({
      ...base,
      runId: 'fixture__turnwise__1__20250101-120000-2',
      state: 'running',
      estimator: 'turnwise',
      model: { label: 'Qwen2.5-0.5B + LoRA r 16' } as never,
      last: { 'tests/pass_rate': 0.5 } as never,
    });
    assert.equal(a.label, `${local('2025-01-01T12:00:00Z')} · turnwise`);
    assert.equal(a.description, 'finished · 3/8 it · held-out 38% · fixture__turnwise__1__20250101-120000');
    assert.equal(b.label, `${local('2025-01-01T12:00:00Z')} · turnwise · Qwen2.5-0.5B + LoRA r 16`);
    assert.equal(b.description, 'running · 3/8 it · pass 50% · fixture__turnwise__1__20250101-120000-2');
    assert.notEqual(a.label + a.description, b.label + b.description);
    assert.equal(runStartedAt('x__grpo__0__20261205-225857')?.toISOString(), '2026-12-05T22:58:57.000Z');
  });

  it('a run folder whose name has no timestamp keeps its name as the label', () => {
    const r = runRow({ ...base, runId: 'my-run', state: 'stopped', estimator: 'grpo' });
    assert.deepEqual(r, { label: 'my-run', description: 'stopped · 3/8 it' });
  });
});
