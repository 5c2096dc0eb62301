// Docker tier: what a run owns survives damage, signals and a second process, with real runs
// (the demo workspace, the embedded policy's copy, real sandboxes, real ONNX Runtime in the
// policy worker, the CLI as a child process where a signal or a second process is the point).
//   - metrics.jsonl cut mid-line after iteration 1 of a finished run, then --resume
//     --iterations 3: nothing complete is deleted or recomputed, the log is rebuilt, iteration 3
//     is trained;
//   - a second `train --resume` of a run that is running is refused with the first one's pid;
//   - SIGINT/SIGTERM at several points of a run and of an evaluation: exit 130, never a native
//     abort of ONNX Runtime, and a stopped `eval --out` keeps the episodes that finished;
//   - a new run whose starting evaluation cannot run (its tasks cannot be scored) stops before
//     iteration 1 with the reason and leaves no run directory.
import * as assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from '../../src/cli/main';
import { parseEventLine, type RunEvent } from '../../src/core/events';
import { RunDir } from '../../src/core/run';
import { readTrajectories } from '../../src/core/trajectory';
import { readEvalResults } from '../../src/eval/results';
import { resolveTrainConfig } from '../../src/train/config';
import { trainRun } from '../../src/train/run';

const root = path.join(__dirname, '..', '..');
const demo = path.join(root, 'examples', 'demo-python');

const TINY = {
  workspace: demo,
  maxTasks: 6,
  heldoutFraction: 0.2,
  iterations: 2,
  tasksPerIteration: 1,
  groupSize: 2,
  branchEpisodes: 1,
  maxTurns: 2,
  concurrency: 2,
  maxActionTokens: 32,
  minibatches: 1,
  evalEvery: 0,
  executionProvider: 'cpu',
  seed: 5,
};

/** Every file under `dir` (relative path → sha256). */
function hashes(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out.set(path.relative(dir, p), createHash('sha256').update(fs.readFileSync(p)).digest('hex'));
    }
  };
  walk(dir);
  return out;
}

/** The CLI as a child process: its events (with --json), its stderr, and how it ended. */
class Child {
  readonly proc: ChildProcess;
  readonly events: RunEvent[] = [];
  output = '';
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private waiters: { pred: () => boolean; resolve: () => void }[] = [];
  constructor(args: string[]) {
    this.proc = spawn(process.execPath, ['-r', 'tsx/cjs', path.join(root, 'src', 'cli', 'main.ts'), ...args], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let buf = '';
    const seen = () => (this.waiters = this.waiters.filter((w) => (w.pred() ? (w.resolve(), false) : true)));
    this.proc.stdout!.on('data', (d: Buffer) => {
      this.output += d.toString('utf8');
      buf += d.toString('utf8');
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const e = parseEventLine(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
        if (e) this.events.push(e);
      }
      seen();
    });
    this.proc.stderr!.on('data', (d: Buffer) => {
      this.output += d.toString('utf8');
      seen();
    });
    this.exited = new Promise((resolve) => this.proc.on('exit', (code, signal) => resolve({ code, signal })));
  }
  /** Resolves once `pred` holds (checked on every output); rejects if the process exits first. */
  until(pred: () => boolean, what: string): Promise<void> {
    if (pred()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.waiters.push({ pred, resolve });
      void this.exited.then((x) =>
        reject(new Error(`the CLI exited (${x.code ?? x.signal}) before ${what}:\n${this.output.slice(-3000)}`)),
      );
    });
  }
}

async function cli(args: string[]): Promise<{ code: number; out: string }> {
  let out = '';
  const code = await main(args, { out: (t) => void (out += t + '\n'), err: (t) => void (out += t + '\n') });
  return { code, out };
}

describe('docker: runs and models are never lost, and a run says what it did', function () {
  this.timeout(900_000);
  let dir: string;
  let model: string;
  let finished: RunDir;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-integrity-'));
    model = path.join(dir, 'model');
    fs.cpSync(path.join(root, 'models', 'turnwise-tiny'), model, { recursive: true });
    const r = await trainRun({ config: resolveTrainConfig({ ...TINY, model }), runsRoot: path.join(dir, 'runs') });
    assert.equal(r.state, 'finished');
    finished = RunDir.open(r.runDir);
  });
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** A copy of the finished run under its own id (a run's id is its folder's name). */
  const copyRun = (name: string): RunDir => {
    const to = path.join(dir, 'runs', name);
    fs.cpSync(finished.dir, to, { recursive: true });
    const cfg = JSON.parse(fs.readFileSync(path.join(to, 'config.json'), 'utf8'));
    fs.writeFileSync(path.join(to, 'config.json'), JSON.stringify({ ...cfg, runId: name }));
    for (const n of [0, 1, 2]) {
      const m = path.join(to, 'iterations', String(n), 'iteration.json');
      fs.writeFileSync(m, JSON.stringify({ ...JSON.parse(fs.readFileSync(m, 'utf8')), runId: name }));
    }
    return RunDir.open(to);
  };

  it('metrics.jsonl cut mid-line after iteration 1, then --resume --iterations 3: nothing complete is lost or redone, the log is rebuilt, iteration 3 trains', async () => {
    const run = copyRun('cut-log');
    const text = fs.readFileSync(run.file('metrics.jsonl'), 'utf8');
    const lines = text.split('\n');
    fs.writeFileSync(run.file('metrics.jsonl'), `${lines[0]}\n${lines[1]}\n${lines[2].slice(0, 40)}`);
    const before = hashes(run.dir);
    const r = await cli(['train', '--resume', run.dir, '--iterations', '3', '--json']);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /metrics\.jsonl: line 3 is not valid JSON[^"]*rebuilt from the iterations' own markers/);
    assert.doesNotMatch(r.out, /discarded/);
    for (const [p, h] of before) {
      if (p === 'metrics.jsonl' || p === 'status.json' || p === 'config.json') continue;
      assert.equal(hashes(run.dir).get(p), h, `${p} of a complete iteration was changed or deleted`);
    }
    const rows = run.readMetrics();
    assert.deepEqual(
      rows.map((m) => m.iteration),
      [0, 1, 2, 3],
    );
    assert.deepEqual(rows.slice(0, 3), finished.readMetrics(), 'iterations 0-2 keep their metrics');
    assert.equal(run.readStatus()!.state, 'finished');
    assert.equal(run.readStatus()!.lastCompleteIteration, 3);
    assert.equal(run.readConfig<{ iterations: number }>().iterations, 3);
  });

  it('a second `train --resume` of a running run is refused with the pid of the first; signals at every phase exit 130 with no native abort', async () => {
    const run = copyRun('busy');
    const first = new Child(['train', '--resume', run.dir, '--iterations', '4', '--json']);
    try {
      await first.until(() => first.events.some((e) => e.type === 'run-started'), 'its run started');
      const second = await cli(['train', '--resume', run.dir]);
      assert.equal(second.code, 1, second.out);
      assert.match(second.out, new RegExp(`busy is in use by process ${first.proc.pid} `));
      first.proc.kill('SIGINT');
      const end = await first.exited;
      assert.equal(end.code, 130, first.output.slice(-2000));
      assert.doesNotMatch(first.output, /terminate called|Napi::Error/);
    } finally {
      first.proc.kill('SIGKILL');
    }
    // SIGTERM / SIGINT while the policy generates (first episode under way), at an episode's end,
    // and during the update; each stop releases the lock for the next.
    const points: [NodeJS.Signals, string, (c: Child) => boolean][] = [
      ['SIGTERM', 'a rollout under way', (c) => c.events.some((e) => e.type === 'phase' && e.phase === 'rollout')],
      ['SIGINT', 'the first episode finished', (c) => c.events.some((e) => e.type === 'episode-finished')],
      ['SIGTERM', 'the update started', (c) => c.events.some((e) => e.type === 'phase' && e.phase === 'update')],
      ['SIGINT', 'the run started', (c) => c.events.some((e) => e.type === 'run-started')],
    ];
    for (const [sig, what, at] of points) {
      const c = new Child(['train', '--resume', run.dir, '--iterations', '4', '--json']);
      try {
        await c.until(() => at(c), what);
        c.proc.kill(sig);
        const end = await c.exited;
        assert.doesNotMatch(c.output, /terminate called|Napi::Error/, `${sig} at ${what}`);
        assert.equal(end.code, 130, `${sig} at ${what}: ${c.output.slice(-2000)}`);
      } finally {
        c.proc.kill('SIGKILL');
      }
    }
    assert.equal(run.lastCompleteIteration() >= 2, true);
    assert.ok(!fs.existsSync(run.file('lock.json')), 'every stop released the lock');
  });

  it('SIGINT during eval --out exits 130 and keeps the episodes that finished', async () => {
    const tasks = path.join(dir, 'three.jsonl');
    fs.writeFileSync(
      tasks,
      fs.readFileSync(finished.file('tasks.jsonl'), 'utf8').split('\n').filter(Boolean).slice(0, 3).join('\n') + '\n',
    );
    const out = path.join(dir, 'eval-stopped.jsonl');
    const c = new Child([
      'eval',
      '--tasks',
      tasks,
      '--model',
      model,
      '--workspace',
      demo,
      '--max-turns',
      '2',
      '--concurrency',
      '1',
      '--samples',
      '2',
      '--out',
      out,
    ]);
    try {
      await c.until(() => /1\/9 episodes/.test(c.output), 'the first episode finished');
      c.proc.kill('SIGINT');
      const end = await c.exited;
      assert.equal(end.code, 130, c.output.slice(-2000));
      assert.doesNotMatch(c.output, /terminate called|Napi::Error/);
      assert.match(c.output, /eval stopped: \d of 9 episodes had finished; they are in /);
      const kept = readTrajectories(out);
      assert.equal(readEvalResults(out).header?.complete, false, 'the results header says the evaluation stopped early');
      assert.ok(kept.length >= 1 && kept.length < 9, `${kept.length} episodes kept`);
      for (const t of kept) assert.ok(!t.failure || !/stopped/.test(t.failure), `a cut episode was kept: ${t.failure}`);
    } finally {
      c.proc.kill('SIGKILL');
    }
  });

  it('a new run whose starting evaluation cannot run stops before iteration 1 with the reason and leaves no run directory', async () => {
    // Tasks whose test command writes no report: every episode's scoring fails.
    const tasks = path.join(dir, 'unscorable.jsonl');
    const rows = fs
      .readFileSync(finished.file('tasks.jsonl'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => ({ ...JSON.parse(l), testCommand: 'true' }));
    fs.writeFileSync(tasks, rows.map((t) => JSON.stringify(t)).join('\n') + '\n');
    const runs = path.join(dir, 'runs-unscorable');
    const ws = path.join(dir, 'ws');
    fs.mkdirSync(ws);
    fs.writeFileSync(path.join(ws, 'turnwise.json'), JSON.stringify({ ...TINY, model, heldoutFraction: 0.5, iterations: 1 }));
    const r = await cli(['train', '--config', path.join(ws, 'turnwise.json'), '--tasks', tasks, '--runs', runs]);
    assert.equal(r.code, 1, r.out);
    // The evaluation's reward canary names the cause first: the task's no-op cannot be scored.
    assert.match(
      r.out,
      /the reward canary failed in the evaluation of iteration 0: task [^:]+: unscorable: the no-op episode could not be scored: no test report/,
    );
    assert.doesNotMatch(r.out, /run finished/);
    assert.deepEqual(fs.existsSync(runs) ? fs.readdirSync(runs) : [], [], 'no run directory is left');
  });

  it('taskSource failing-tests on a workspace whose tests all pass names the other sources, not the one in use', async () => {
    const ws = path.join(dir, 'passing');
    fs.cpSync(path.join(root, 'test', 'fixtures', 'py-shop'), ws, { recursive: true });
    const r = await cli([
      'train',
      '--workspace',
      ws,
      '--task-source',
      'failing-tests',
      '--model',
      model,
      '--runs',
      path.join(dir, 'runs-passing'),
    ]);
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, /no test of .*passing fails, so taskSource "failing-tests" finds no task/);
    assert.match(r.out, /use taskSource "mutation"/);
    assert.doesNotMatch(r.out, /or use taskSource "failing-tests"/);
    assert.deepEqual(
      fs.existsSync(path.join(dir, 'runs-passing')) ? fs.readdirSync(path.join(dir, 'runs-passing')) : [],
      [],
      'no run directory is left',
    );
  });

  it('a test suite that hangs: the message names a time limit that exists (tasks synth --timeout, then train --tasks)', async () => {
    const ws = path.join(dir, 'hangs');
    fs.cpSync(path.join(root, 'test', 'fixtures', 'py-shop'), ws, { recursive: true });
    fs.writeFileSync(path.join(ws, 'tests', 'test_hang.py'), 'import time\n\n\ndef test_hang():\n    time.sleep(3600)\n');
    const r = await cli(['tasks', 'synth', '--workspace', ws, '--timeout', '3', '--out', path.join(dir, 'hang-tasks.jsonl')]);
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, /did not finish within 3 s/);
    assert.match(r.out, /turnwise tasks synth --workspace DIR --timeout SECONDS --out tasks\.jsonl.*turnwise train --tasks tasks\.jsonl/);
  });
});
