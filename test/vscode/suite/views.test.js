// Extension-host tests of the views: every command registered, the Runs view over fixture run
// directories (test/support/runFixture.ts, written into the workspace by run.mjs), decorations
// and CodeLens of the trajectory viewer on the right lines, the diff of one turn, the reward
// panel's charts and its render time at 1,000 iterations. Real VS Code API, nothing mocked.
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const vscode = require('vscode');

const EXTENSION_ID = 'turnwise.turnwise';
const RUN = 'fixture__turnwise__1__20250101-120000';
const OVERLAY = 'fixture__grpo__2__20250101-110000';
const LONG = 'long__turnwise__3__20240101-000000';
const BIG = 'big__turnwise__4__20230101-000000';
const LORA = 'lora__grpo__5__20220101-000000';
const FILE = 'calc/ops.py';
const BUG_LINE = 11; // 0-based line the good episodes fix at turn 2 (runFixture.ts)

const perf = (name, value, extra = {}) => console.log(`TURNWISE-PERF ${JSON.stringify({ name, value, ...extra })}`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(what, fn, timeoutMs = 20000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

describe('Turnwise views', function () {
  let api;
  const ws = () => vscode.workspace.workspaceFolders[0].uri.fsPath;

  before(async function () {
    const ext = vscode.extensions.getExtension(EXTENSION_ID);
    api = await ext.activate();
    assert.ok(fs.existsSync(path.join(ws(), '.turnwise', 'runs', RUN)), `run.mjs did not write the fixture run into ${ws()}`);
  });

  it('registers every contributed command', async function () {
    const contributed = vscode.extensions.getExtension(EXTENSION_ID).packageJSON.contributes.commands.map((c) => c.command);
    const all = new Set(await vscode.commands.getCommands(true));
    const missing = contributed.filter((c) => !all.has(c));
    assert.deepEqual(missing, []);
    for (const c of [
      'turnwise.startRun',
      'turnwise.stopRun',
      'turnwise.resumeRun',
      'turnwise.synthesizeTasks',
      'turnwise.evaluatePolicy',
      'turnwise.buildImages',
      'turnwise.openTrajectory',
      'turnwise.showRewardPanel',
      'turnwise.checkEnvironment',
      'turnwise.pruneSandboxes',
    ]) {
      assert.ok(contributed.includes(c), `${c} is not contributed`);
    }
  });

  it('"Stop Run" with no run going says why instead of failing silently', async function () {
    const r = await vscode.commands.executeCommand('turnwise.stopRun');
    assert.equal(r, undefined);
  });

  it('the Runs view says which model a LoRA run trained and its newest adapter checkpoint; a run whose config names no model shows none', async function () {
    const tree = api.runsTree;
    const runs = await tree.getChildren();
    const lora = runs.find((n) => n.run.runId === LORA);
    assert.ok(lora, `${LORA} is not listed`);
    const item = tree.getTreeItem(lora);
    // Told apart by start time, estimator and model; the id in the description.
    assert.match(item.label, /^\d{4}-\d{2}-\d{2} \d{2}:\d{2} · grpo · Qwen2\.5-Coder-0\.5B-Instruct \+ LoRA r 8$/);
    assert.match(item.description, new RegExp(`^finished · 2/2 it · (held-out|pass) \\d+% · ${LORA}$`));
    const tip = item.tooltip.value;
    assert.match(tip, /model: Qwen2\\\.5\\-Coder\\-0\\\.5B\\-Instruct/, tip);
    assert.match(
      tip,
      /adapter: LoRA r 8, lora\\_alpha 16 on all linear projections; latest checkpoints\/2 \\\(PEFT adapter over the model\\\)/,
      tip,
    );
    const plain = tree.getTreeItem(runs.find((n) => n.run.runId === RUN));
    assert.doesNotMatch(plain.tooltip.value, /model:|adapter:/);
  });

  it('the Runs view lists the fixture runs, their iterations, tasks and trajectories with their numbers', async function () {
    const tree = api.runsTree;
    const runs = await tree.getChildren();
    const ids = runs.map((n) => n.run.runId);
    assert.deepEqual(
      ids.filter((id) => [RUN, OVERLAY, LONG].includes(id)),
      [RUN, OVERLAY, LONG],
      `runs listed newest first: ${ids.join(', ')}`,
    );
    const run = runs.find((n) => n.run.runId === RUN);
    const runItem = tree.getTreeItem(run);
    assert.match(runItem.label, /^\d{4}-\d{2}-\d{2} \d{2}:\d{2} · turnwise$/);
    assert.match(runItem.description, new RegExp(`^finished · 3/3 it · (held-out|pass) \\d+% · ${RUN}$`));
    assert.equal(runItem.contextValue, 'run run-finished');
    const its = await tree.getChildren(run);
    assert.deepEqual(
      its.map((n) => tree.getTreeItem(n).label),
      ['Iteration 0', 'Iteration 1', 'Iteration 2', 'Iteration 3'],
    );
    assert.match(tree.getTreeItem(its[1]).description, /^reward [+−]\d\.\d\d · pass \d+% · resolved \d+% · held-out \d+%$/);
    const tasks = await tree.getChildren(its[1]);
    assert.deepEqual(
      tasks.map((n) => tree.getTreeItem(n).label),
      ['mut-clamp-compare', 'mut-add-sign', 'mut-mean-len', 'mut-clamp-lo', 'mut-heldout-mean'],
    );
    assert.match(tree.getTreeItem(tasks[4]).description, /^held-out · 4 ep · /);
    const trajs = await tree.getChildren(tasks[0]);
    assert.deepEqual(
      trajs.map((n) => n.traj.trajId),
      ['t1-0', 't1-1', 't1-2', 't1-3'],
    );
    const first = tree.getTreeItem(trajs[0]);
    assert.equal(first.description, 'reward +0.94 · pass 100% · 5 turns · resolved');
    assert.equal(first.command.command, 'turnwise.openTrajectory');
    // The fixture's t1-1 tampered with the tests: reward 0, and the tree says so.
    assert.equal(tree.getTreeItem(trajs[1]).description, 'reward +0.00 · pass 0% · 5 turns · tampered');
    assert.equal(tree.getTreeItem(trajs[2]).description.includes('tampered'), false);
  });

  // Speed is reported (perf lines, target ≤ 1 s); the test fails only at ten times the target, the
  // sign of a scan that went quadratic rather than of a busy machine.
  it('performance: a run with 10,000 trajectories opens in the Runs view (reported; fails past 10 s)', async function () {
    const tree = api.runsTree;
    tree.scans.invalidate();
    const t0 = performance.now();
    const runs = await tree.getChildren();
    const big = runs.find((n) => n.run.runId === BIG);
    assert.ok(big, `${BIG} is not listed`);
    tree.getTreeItem(big);
    const its = await tree.getChildren(big);
    its.forEach((n) => tree.getTreeItem(n));
    const tasks = await tree.getChildren(its.find((n) => n.it.iteration === 1));
    tasks.forEach((n) => tree.getTreeItem(n));
    const trajs = await tree.getChildren(tasks[0]);
    trajs.forEach((n) => tree.getTreeItem(n));
    const ms = performance.now() - t0;
    const count = tasks.reduce((s, t) => s + (t.task ? t.task.episodes : 0), 0);
    perf('runs_view_open_10k_ms', Math.round(ms), { trajectories: count, tasks: tasks.length, scanMs: Math.round(tree.timings.iteration) });
    assert.ok(count >= 10000, `only ${count} trajectories listed`);
    assert.ok(ms <= 10000, `opening took ${ms.toFixed(0)} ms`);
  });

  describe('trajectory viewer', function () {
    let ref;
    const currentEditor = () =>
      vscode.window.visibleTextEditors.find(
        (e) => e.document.uri.scheme === 'turnwise-traj' && new URLSearchParams(e.document.uri.query).get('view') === 'current',
      );

    before(async function () {
      const tree = api.runsTree;
      const run = (await tree.getChildren()).find((n) => n.run.runId === RUN);
      const it1 = (await tree.getChildren(run)).find((n) => n.it.iteration === 1);
      const task = (await tree.getChildren(it1))[0];
      const node = (await tree.getChildren(task))[0];
      ref = await vscode.commands.executeCommand('turnwise.openTrajectory', node);
      assert.equal(ref && ref.trajId, 't1-0');
      await until('the trajectory webview to be ready', () => api.trajectoryPanel() && api.trajectoryPanel().webviewReady);
    });

    it('turn 2: its changed line is decorated as a positive advantage, with its CodeLens and hover', async function () {
      await vscode.commands.executeCommand('turnwise.trajectory.goToTurn', 2);
      const editor = await until('the file editor of turn 2', () => currentEditor());
      assert.ok(editor.document.uri.path.endsWith(FILE), editor.document.uri.toString());
      await until('turn 2 content', () => editor.document.getText().includes('if x > hi:'));
      const d = await until('decorations of turn 2', () => {
        const a = api.trajectories.applied.get(editor.document.uri.toString());
        return a && a.upTo === 2 ? a : undefined;
      });
      assert.deepEqual(d.current, [BUG_LINE]);
      assert.deepEqual(d.byStyle.positiveStrong, [BUG_LINE]);
      assert.deepEqual([...d.byStyle.negative, ...d.byStyle.negativeStrong, ...d.byStyle.positive], []);
      assert.equal(editor.document.lineAt(BUG_LINE).text, '    if x > hi:');
      const lenses = await vscode.commands.executeCommand('vscode.executeCodeLensProvider', editor.document.uri);
      const titles = lenses.map((l) => `${l.range.start.line}:${l.command.title}`);
      assert.ok(
        lenses.some(
          (l) =>
            l.range.start.line === BUG_LINE &&
            l.command.title === '$(diff) Diff' &&
            l.command.command === 'turnwise.trajectory.showDiff' &&
            l.command.arguments[1] === 2,
        ),
        titles.join(' | '),
      );
      assert.ok(
        titles.some((t) => new RegExp(`^${BUG_LINE}:Turn 2 · A \\+0\\.\\d{3}$`).test(t)),
        titles.join(' | '),
      );
      const hovers = await vscode.commands.executeCommand(
        'vscode.executeHoverProvider',
        editor.document.uri,
        new vscode.Position(BUG_LINE, 4),
      );
      const text = hovers.flatMap((h) => h.contents.map((c) => c.value ?? String(c))).join('\n');
      assert.match(text, /turn 2/);
      assert.match(text, /sed -i 's\/if x >= hi/);
    });

    it("stepping to turn 4 moves the decorations: its two new lines negative, turn 2's line shifted by two", async function () {
      await vscode.commands.executeCommand('turnwise.trajectory.nextTurn'); // 3: no edit
      await vscode.commands.executeCommand('turnwise.trajectory.nextTurn'); // 4
      const editor = currentEditor();
      // The virtual document's new text arrives asynchronously (onDidChange → provider).
      await until('turn 4 content', () => editor.document.lineAt(0).text === '# edited by the agent');
      const d = await until('decorations of turn 4', () => {
        const a = api.trajectories.applied.get(editor.document.uri.toString());
        return a && a.upTo === 4 ? a : undefined;
      });
      assert.deepEqual(d.current, [0, 1]);
      // -0.39 against the trajectory's largest |A| of 0.96: negative, not strongly so.
      assert.deepEqual([...d.byStyle.negative, ...d.byStyle.negativeStrong].sort(), [0, 1]);
      assert.deepEqual(d.byStyle.positiveStrong, [BUG_LINE + 2]);
      assert.equal(editor.document.lineAt(0).text, '# edited by the agent');
      const lenses = await vscode.commands.executeCommand('vscode.executeCodeLensProvider', editor.document.uri);
      const diffs = lenses
        .filter((l) => l.command.command === 'turnwise.trajectory.showDiff')
        .map((l) => `${l.range.start.line}:${l.command.title}:${l.command.arguments[1]}`);
      assert.deepEqual(diffs.sort(), [`0:$(diff) Diff:4`, `${BUG_LINE + 2}:$(diff) Diff:2`].sort());
    });

    it('"Show Diff for Turn 2" opens the diff editor on that turn\'s change, from the trajectory', async function () {
      const lenses = await vscode.commands.executeCommand('vscode.executeCodeLensProvider', currentEditor().document.uri);
      const lens = lenses.find((l) => l.command.command === 'turnwise.trajectory.showDiff' && l.command.arguments[1] === 2);
      await vscode.commands.executeCommand(lens.command.command, ...lens.command.arguments);
      const tab = await until('a diff tab', () =>
        vscode.window.tabGroups.all
          .flatMap((g) => g.tabs)
          .find((t) => t.input instanceof vscode.TabInputTextDiff && t.input.modified.scheme === 'turnwise-traj'),
      );
      assert.match(tab.label, /ops\.py · turn 2 \(t1-0\)/);
      const before = await vscode.workspace.openTextDocument(tab.input.original);
      const after = await vscode.workspace.openTextDocument(tab.input.modified);
      const b = before.getText().split('\n');
      const a = after.getText().split('\n');
      assert.equal(b.length, a.length);
      const changed = b.flatMap((l, i) => (l === a[i] ? [] : [i]));
      assert.deepEqual(changed, [BUG_LINE]);
      assert.equal(b[BUG_LINE], '    if x >= hi:  # BUG: should be >');
      assert.equal(a[BUG_LINE], '    if x > hi:');
      // The user's own file (the fixture workspace's calc/ops.py) is not what the diff shows.
      assert.notEqual(tab.input.original.scheme, 'file');
    });
  });

  describe("trajectory viewer: a chat model's episode", function () {
    it("shows each turn's whole reply beside its command and the checkpoint's action format; a format error says why it was not run", async function () {
      const tree = api.runsTree;
      const run = (await tree.getChildren()).find((n) => n.run.runId === LORA);
      const it1 = (await tree.getChildren(run)).find((n) => n.it.iteration === 1);
      const task = (await tree.getChildren(it1)).find((n) => n.task && n.task.taskId === 'mut-clamp-compare' && n.task.split === 'train');
      const node = (await tree.getChildren(task)).find((n) => n.traj && n.traj.trajId === 't1-1');
      assert.ok(node, 't1-1 is not listed under the LoRA run');
      const ref = await vscode.commands.executeCommand('turnwise.openTrajectory', node);
      assert.equal(ref.trajId, 't1-1');
      const view = await until('the chat trajectory sent to the webview', () => {
        const p = api.trajectoryPanel();
        return p && p.webviewReady && p.lastView && p.lastView.trajId === 't1-1' && p.lastView.actionFormat ? p.lastView : undefined;
      });
      // The run's checkpoints record the chat format (action_format.json).
      assert.equal(view.actionFormat, 'chat');
      assert.equal(view.turns[0].reply, 'Let me read the module first (it holds <b>clamp</b> & add).\n\n```bash\ncat calc/ops.py\n```');
      assert.equal(view.turns[0].action, 'cat calc/ops.py');
      assert.equal(view.turns[1].formatError, 'the reply has 2 ```bash blocks; a turn runs exactly one');
      assert.match(view.turns[1].reply, /```bash\nls tests\n```\n\n```bash\npython -m pytest -q\n```/);
      assert.equal(view.turns[1].exitCode, null);
      // A run in the compact format: no replies, its format as recorded (nothing recorded: none shown).
      const plainRun = (await tree.getChildren()).find((n) => n.run.runId === RUN);
      const pIt = (await tree.getChildren(plainRun)).find((n) => n.it.iteration === 1);
      const pNode = (await tree.getChildren((await tree.getChildren(pIt))[0]))[0];
      await vscode.commands.executeCommand('turnwise.openTrajectory', pNode);
      const plain = await until('the compact trajectory', () => {
        const v = api.trajectoryPanel().lastView;
        return v && v.trajId === 't1-0' ? v : undefined;
      });
      assert.equal(plain.actionFormat, undefined);
      assert.ok(plain.turns.every((t) => t.reply === undefined));
    });
  });

  describe('reward panel', function () {
    it('opens on a run and draws every chart with points', async function () {
      await vscode.commands.executeCommand('turnwise.showRewardPanel', RUN);
      const r = await until('a render of the fixture run', () => {
        const p = api.rewardPanel();
        return p && p.lastRender && p.lastRender.iterations === 4 ? p.lastRender : undefined;
      });
      assert.equal(r.charts, 10, 'eight metric charts, the mixed-outcome share and the failure labels (hidden for a run without them)');
      assert.ok(r.points > 20, `only ${r.points} points drawn`);
    });

    // Draw times are reported (target ≤ 100 ms); the test fails only at ten times the target.
    it('performance: 1,000 iterations draw, and a new metrics line updates the charts live (reported; fails past 1 s)', async function () {
      this.timeout(60000);
      const panel = api.rewardPanel();
      panel.select(LONG);
      const first = await until(
        'a render of 1,001 iterations',
        () => (panel.lastRender && panel.lastRender.iterations === 1001 ? panel.lastRender : undefined),
        30000,
      );
      perf('reward_panel_draw_1000_ms', Number(first.ms.toFixed(1)), {
        iterations: first.iterations,
        points: first.points,
        kind: 'first draw (charts created)',
      });
      const metrics = path.join(ws(), '.turnwise', 'runs', LONG, 'metrics.jsonl');
      const times = [];
      for (let k = 0; k < 3; k++) {
        const n = 1001 + k;
        const line = JSON.stringify({
          schema: 'turnwise/metrics@1',
          iteration: n,
          'tests/pass_rate': 0.9,
          'heldout/pass_rate': 0.85,
          'reward/mean': 0.8,
          'reward/std': 0.1,
          resolved: 0.7,
          kl: 0.01,
          grad_norm: 1,
          'loss/policy': 0.1,
          'turns/mean': 4,
          format_errors: 0,
        });
        fs.appendFileSync(metrics, line + '\n');
        const r = await until(
          `the live update to iteration ${n}`,
          () => (panel.lastRender && panel.lastRender.iterations === n + 1 ? panel.lastRender : undefined),
          20000,
        );
        times.push(r.ms);
      }
      perf('reward_panel_update_1000_ms', Number(Math.max(...times).toFixed(1)), {
        updates: times.map((t) => Number(t.toFixed(1))),
        kind: 'live update (setData)',
      });
      assert.ok(Math.max(...times) <= 1000, `updates took ${times.map((t) => t.toFixed(1)).join(', ')} ms`);
      assert.ok(first.ms <= 1000, `the first draw took ${first.ms.toFixed(1)} ms`);
    });

    it('"Compare Evaluations": two results files, a PASS@(k,T) heatmap per model with a cell per k and T, and the models\' table', async function () {
      this.timeout(30000);
      const dir = path.join(ws(), '.turnwise', 'evals');
      const files = writeResultsFixtures(dir);
      try {
        const r = await vscode.commands.executeCommand('turnwise.compareEvaluations', files);
        assert.equal(r.view, 'evals');
        const panel = api.rewardPanel();
        const drawn = await until('the comparison drawn', () =>
          panel.lastEvalRender && panel.lastEvalRender.models === 2 ? panel.lastEvalRender : undefined,
        );
        // Model A resolves task a after 1 and 3 actions, task b after 2 (2 samples each, turn limit 4):
        // k = 1, 2 by T = 1…4, and at k = 2 from T = 2 on both tasks, 1; model B resolves nothing.
        assert.deepEqual(drawn.heatmaps, [
          { label: 'run1 · checkpoint 3', ks: 2, ts: 4, cells: 8, max: 1 },
          { label: 'qwen @ 127.0.0.1:9', ks: 2, ts: 4, cells: 8, max: 0 },
        ]);
        assert.equal(drawn.rows, 4, 'greedy and sampled rows of both models');
        // Pass curves: one per model and T on one chart; B against A lost pass@1 and pass@2.
        assert.equal(drawn.curves, 8);
        assert.equal(drawn.verdicts.length, 1);
        assert.match(
          drawn.verdicts[0],
          /^qwen @ 127\.0\.0\.1:9 against run1 · checkpoint 3: T=4: pass@1 75\.0% → 0\.0%, pass@2 100\.0% → 0\.0%: narrowed/,
        );
        assert.deepEqual(panel.selectedEvaluations, files);
      } finally {
        for (const f of files) fs.rmSync(f, { force: true });
      }
    });
  });
});

/**
 * Two evaluation results files as `turnwise eval --out` writes them (a header line, then the
 * episodes) on tasks a and b with 2 samples each: a local checkpoint and an endpoint.
 */
function writeResultsFixtures(dir) {
  fs.mkdirSync(dir, { recursive: true });
  const episode = (taskId, k, resolved, actions) => ({
    schema: 'turnwise/trajectory@1',
    taskId,
    groupId: `eval-0-${taskId}`,
    trajId: k === null ? `eval-0-${taskId}` : `evals-0-${taskId}-${k}`,
    checkpoint: 'fixture',
    seed: (k === null ? 0 : 100 + k) + taskId.charCodeAt(0),
    split: 'heldout',
    turns: [
      ...Array.from({ length: actions }, (_, i) => ({
        index: i,
        action: `cmd ${i}`,
        observation: '',
        exitCode: 0,
        durationMs: 1,
        tokenIds: [1, 2],
      })),
      { index: actions, action: 'submit', observation: '', exitCode: null, durationMs: 0, tokenIds: [3] },
    ],
    reward: {
      passRate: resolved ? 1 : 0,
      resolved,
      turns: actions + 1,
      maxTurns: 4,
      formatError: false,
      efficiencyPenalty: 0,
      formatPenalty: 0,
      reward: resolved ? 1 : 0,
    },
    durationMs: 1500,
  });
  const header = (model, createdAt) => ({
    schema: 'turnwise/eval-results@1',
    createdAt,
    model,
    tasks: { source: 'tasks.jsonl', ids: ['a', 'b'], digests: { a: 'da', b: 'db' } },
    seed: 0,
    samples: 2,
    maxTurns: 4,
    sampling: { temperature: 1, topP: 1 },
    complete: true,
    summary: { greedy: null, sampled: null },
    episodes: [],
  });
  const a = [
    episode('a', null, true, 1),
    episode('b', null, false, 4),
    episode('a', 0, true, 1),
    episode('a', 1, true, 3),
    episode('b', 0, true, 2),
    episode('b', 1, false, 4),
  ];
  const b = [
    episode('a', null, false, 4),
    episode('b', null, false, 4),
    episode('a', 0, false, 4),
    episode('a', 1, false, 4),
    episode('b', 0, false, 4),
    episode('b', 1, false, 4),
  ];
  const write = (name, h, eps) => {
    const f = path.join(dir, name);
    fs.writeFileSync(f, [h, ...eps].map((x) => JSON.stringify(x)).join('\n') + '\n');
    return f;
  };
  return [
    write(
      'fixture-a.jsonl',
      header({ kind: 'checkpoint', path: '/runs/run1/checkpoints/3', label: 'run1 · checkpoint 3' }, '2025-01-02T00:00:00.000Z'),
      a,
    ),
    write(
      'fixture-b.jsonl',
      header({ kind: 'endpoint', url: 'http://127.0.0.1:9/v1', model: 'qwen', label: 'qwen @ 127.0.0.1:9' }, '2025-01-01T00:00:00.000Z'),
      b,
    ),
  ];
}
