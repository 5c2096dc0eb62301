// The run directory under faults: `turnwise train --resume RUN` on a run whose files were damaged,
// table-driven. Dimensions: each file of the run (config, tasks, split, status, metrics log, the
// last iteration's marker, an iteration's episodes, the last and the first checkpoint) × each
// damage (missing, empty, cut mid-line, a folder in its place, the same file of another run) ×
// the run's state (live: a real process holds its lock; finished; failed; stopped). Every row
// asserts the exit code, that the message names the file, the problem and a fix that exists, and
// that nothing complete was deleted or changed (only the metrics log and a lost iteration marker,
// which are rebuilt from what is complete, may be rewritten).
//
// Real parts: the run directory is written by RunDir itself (checkpoints are the shipped
// turnwise-tiny's files, hard-linked), the CLI runs in-process, the live holder is a real
// process. A run that passes every check goes on to connect to its Docker engine: its config
// names an engine socket that does not exist, so the resume fails there (a real connection
// failure, no mock), which also checks that a resume that did no work leaves the run as it was.
import * as assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from '../../../src/cli/main';
import { RunDir, RUN_LOCK_SCHEMA } from '../../../src/core/run';
import { SCHEMA, type Task } from '../../../src/core/schema';
import { resolveTrainConfig } from '../../../src/train/config';
import { runConfigRecord } from '../../../src/train/config';

const ROOT = path.join(__dirname, '..', '..', '..');
const MODEL = path.join(ROOT, 'models', 'turnwise-tiny');
const WORKSPACE = path.join(ROOT, 'test', 'fixtures', 'py-shop');
const NO_ENGINE = 'unix:///nonexistent/turnwise-test/docker.sock';

type State = 'live' | 'finished' | 'failed' | 'stopped';
type Damage = 'missing' | 'empty' | 'cut mid-line' | 'a folder' | "another run's";

const task = (id: string): Task =>
  ({
    schema: SCHEMA.task,
    id,
    source: 'mutation',
    instruction: `fix ${id}`,
    language: 'python',
    testCommand: 'pytest',
    fail_to_pass: ['t1'],
    pass_to_pass: [],
  }) as unknown as Task;

/** Copies a tree; large files (the weights) are hard-linked: a damage replaces a file, never edits it in place. */
function copyTree(from: string, to: string): void {
  fs.mkdirSync(to, { recursive: true });
  for (const e of fs.readdirSync(from, { withFileTypes: true })) {
    const a = path.join(from, e.name);
    const b = path.join(to, e.name);
    if (e.isDirectory()) copyTree(a, b);
    else if (e.name.endsWith('.safetensors')) fs.linkSync(a, b);
    else fs.copyFileSync(a, b);
  }
}

/** A run of 3 complete iterations (0, 1, 2) as trainRun writes it, in `state`. */
function makeRun(runsRoot: string, runId: string, ids: string[], state: Exclude<State, 'live'> | 'running', pid?: number): RunDir {
  const c = resolveTrainConfig({
    workspace: WORKSPACE,
    iterations: state === 'finished' ? 2 : 3,
    dockerHost: NO_ENGINE,
    executionProvider: 'cpu',
    maxActionTokens: 32,
  });
  const run = RunDir.create(runsRoot, runId, runConfigRecord(c, { runId, startModel: MODEL, createdAt: '2026-01-01T00:00:00Z' }));
  run.writeTasks(ids.map(task), { train: ids.slice(0, -1), heldout: ids.slice(-1) });
  for (const n of [0, 1, 2]) {
    copyTree(MODEL, run.checkpointDir(n));
    run.writeTrajectories(n, n === 0 ? 'heldout' : 'train', [
      {
        schema: SCHEMA.trajectory,
        trajId: `${runId}-${n}`,
        taskId: ids[0],
        iteration: n,
        checkpoint: run.checkpointDir(Math.max(0, n - 1)),
      } as never,
    ]);
    run.commitIteration({ schema: SCHEMA.metrics, iteration: n, 'reward/mean': n / 10 + (runId === 'run-other' ? 0.5 : 0) } as never);
  }
  const error = state === 'failed' ? { error: { code: 'sandbox-failed', message: 'every episode of iteration 3 failed' } } : {};
  run.writeStatus({ state, iterations: state === 'finished' ? 2 : 3, lastCompleteIteration: 2, ...(pid ? { pid } : {}), ...error });
  return run;
}

const FILES = {
  'config.json': 'config.json',
  'tasks.jsonl': 'tasks.jsonl',
  'splits.json': 'splits.json',
  'status.json': 'status.json',
  'metrics.jsonl': 'metrics.jsonl',
  'the last marker': 'iterations/2/iteration.json',
  "iteration 1's episodes": 'iterations/1/trajectories.jsonl',
  'the last checkpoint': 'checkpoints/2/model.safetensors',
  'checkpoint 0': 'checkpoints/0/model.safetensors',
} as const;
type FileKey = keyof typeof FILES;

/** Files that only summarize what is complete: a resume may rebuild them from it. */
const REBUILT: readonly string[] = ['metrics.jsonl', 'iterations/2/iteration.json'];

/**
 * What a resume must do with each file's damage (states other than live): 'refuse' (exit 1, the
 * message names the file), or 'go on' (it is reported or rebuilt, and the resume continues: exit
 * 0 with nothing to do for a finished run, else the unreachable engine).
 */
function expected(file: FileKey, damage: Damage): 'refuse' | 'go on' {
  switch (file) {
    case 'config.json':
    case 'tasks.jsonl':
    case 'splits.json':
      return 'refuse';
    case 'status.json':
    case 'metrics.jsonl':
      // Both are rebuilt from what is complete; a folder in their place is not Turnwise's to remove.
      return damage === 'a folder' ? 'refuse' : 'go on';
    case "iteration 1's episodes":
      return 'go on';
    case 'the last marker':
      // The metrics log still holds its row: a lost or torn marker is rewritten from it; a folder in
      // its place or another run's marker is not ours to replace.
      return damage === 'a folder' || damage === "another run's" ? 'refuse' : 'go on';
    case 'the last checkpoint':
    case 'checkpoint 0':
      // Another run's checkpoint of the same model is a loadable checkpoint: nothing tells it apart.
      return damage === "another run's" ? 'go on' : 'refuse';
  }
}

function damageFile(run: RunDir, other: RunDir, rel: string, damage: Damage): void {
  const f = run.file(rel);
  const text = fs.readFileSync(f);
  fs.rmSync(f, { force: true });
  switch (damage) {
    case 'missing':
      return;
    case 'empty':
      fs.writeFileSync(f, '');
      return;
    case 'cut mid-line': {
      // Cut inside a line, not at its end: the last line is torn.
      let at = Math.floor(text.length / 2);
      while (at > 1 && (text[at - 1] === 0x0a || text[at] === 0x0a)) at--;
      fs.writeFileSync(f, text.subarray(0, at));
      return;
    }
    case 'a folder':
      fs.mkdirSync(f);
      fs.writeFileSync(path.join(f, 'x'), 'x');
      return;
    case "another run's":
      fs.writeFileSync(f, fs.readFileSync(other.file(rel)));
      return;
  }
}

/** Every file under `dir` with its sha256 (folders as "dir"). */
function snapshot(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      const rel = path.relative(dir, p);
      if (e.isDirectory()) {
        out.set(rel, 'dir');
        walk(p);
      } else out.set(rel, createHash('sha256').update(fs.readFileSync(p)).digest('hex'));
    }
  };
  walk(dir);
  return out;
}

async function resume(
  runDir: string,
): Promise<{ code: number; out: string; error?: { code: string; message: string; hint?: string }; logs: string[] }> {
  let out = '';
  const code = await main(['train', '--resume', runDir, '--json'], {
    out: (t) => void (out += t + '\n'),
    err: (t) => void (out += t + '\n'),
  });
  const lines = out.split('\n').filter((l) => l.trim().startsWith('{'));
  let error: { code: string; message: string; hint?: string } | undefined;
  const logs: string[] = [];
  // The error object is pretty-printed over several lines: parse the last JSON value of the output.
  const start = out.lastIndexOf('{\n  "ok": false');
  if (start >= 0) error = (JSON.parse(out.slice(start, out.indexOf('\n}', start) + 2)) as { error: typeof error }).error;
  for (const l of lines) {
    try {
      const e = JSON.parse(l) as { type?: string; message?: string };
      if (e.type === 'log' && e.message) logs.push(e.message);
    } catch {
      // a line of the pretty-printed error
    }
  }
  return { code, out, error, logs };
}

/** Hints that name a fix that does not exist for a damaged run (or give a random model). */
const WRONG_FIXES = [/policy init/, /--workspace/, /--timeout/, /start a new run.*lower heldoutFraction/];

describe('train --resume over a damaged run directory (fault suite)', function () {
  this.timeout(120_000);
  let tmp: string;
  let pristine: Record<string, string>;
  let holder: ChildProcess;
  const saved = process.env.TURNWISE_DOCKER_ENGINES;

  before(() => {
    delete process.env.TURNWISE_DOCKER_ENGINES;
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-run-faults-'));
    pristine = {};
    for (const s of ['finished', 'failed', 'stopped', 'running'] as const)
      pristine[s] = makeRun(path.join(tmp, 'pristine'), `run-${s}`, ['a', 'b', 'c', 'd'], s).dir;
    pristine.other = makeRun(path.join(tmp, 'pristine'), 'run-other', ['w', 'x', 'y', 'z'], 'finished').dir;
    // A real, live process that holds the live rows' lock.
    holder = spawn('sleep', ['600'], { stdio: 'ignore' });
  });
  after(() => {
    holder.kill('SIGKILL');
    if (saved !== undefined) process.env.TURNWISE_DOCKER_ENGINES = saved;
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  let row = 0;
  for (const state of ['live', 'finished', 'failed', 'stopped'] as const) {
    for (const file of Object.keys(FILES) as FileKey[]) {
      for (const damage of ['missing', 'empty', 'cut mid-line', 'a folder', "another run's"] as const) {
        const rel = FILES[file];
        it(`${state} run, ${file} ${damage === "another run's" ? 'from another run' : damage}`, async () => {
          const runsRoot = path.join(tmp, `row-${row++}`);
          const runId = `run-${state === 'live' ? 'running' : state}`;
          const dir = path.join(runsRoot, runId);
          copyTree(state === 'live' ? pristine.running : pristine[state], dir);
          const run = RunDir.open(dir);
          if (state === 'live') {
            fs.writeFileSync(
              run.file('lock.json'),
              JSON.stringify({
                schema: RUN_LOCK_SCHEMA,
                pid: holder.pid,
                host: os.hostname(),
                startedAt: new Date().toISOString(),
                token: 'holder',
              }) + '\n',
            );
            run.writeStatus({ state: 'running', pid: holder.pid, iterations: 3, lastCompleteIteration: 2 });
          }
          damageFile(run, RunDir.open(pristine.other), rel, damage);
          const before = snapshot(dir);
          const r = await resume(dir);
          const after = snapshot(dir);

          // Nothing complete is deleted or changed; only what is rebuilt from it may be rewritten.
          for (const [p, h] of before) {
            if (REBUILT.includes(p) && expected(file, damage) === 'go on' && state !== 'live') continue;
            assert.equal(after.get(p), h, `${p} was ${after.has(p) ? 'changed' : 'deleted'}:\n${r.out}`);
          }
          const expect = state === 'live' && !(file === 'config.json' && damage === 'missing') ? 'locked' : expected(file, damage);
          if (expect === 'locked') {
            assert.equal(r.code, 1, r.out);
            assert.match(r.error?.message ?? '', new RegExp(`in use by process ${holder.pid}`), r.out);
            assert.match(r.error?.hint ?? '', new RegExp(`kill ${holder.pid}`));
            return;
          }
          if (expect === 'refuse') {
            assert.equal(r.code, 1, r.out);
            const e = r.error!;
            assert.ok(e, `no error:\n${r.out}`);
            const named =
              file === 'tasks.jsonl' && damage === "another run's"
                ? /splits\.json names .*tasks\.jsonl does not hold/
                : new RegExp(rel.replace(/[.]/g, '\\.'));
            assert.match(e.message, named, `the message names the file: ${e.message}`);
            assert.ok(e.message.length > run.file(rel).length + 10, `the message says what is wrong: ${e.message}`);
            assert.match(e.hint ?? '', /restore|delete|move/, `the hint gives a fix: ${e.hint}`);
            for (const w of WRONG_FIXES) assert.doesNotMatch(e.hint ?? '', w);
            return;
          }
          // Going on: what was found is said, and rebuilt files hold what is complete.
          const said = [...r.logs, r.out].join('\n');
          {
            if (
              file !== 'status.json' &&
              !(file === 'the last marker' && damage === 'missing') &&
              !(file === 'checkpoint 0' || file === 'the last checkpoint')
            )
              assert.match(said, new RegExp(rel.replace(/[.]/g, '\\.')), `the damage to ${rel} is reported`);
          }
          assert.deepEqual(
            run.readMetrics().map((m) => [m.iteration, m['reward/mean']]),
            [
              [0, 0],
              [1, 0.1],
              [2, 0.2],
            ],
            'the metrics log holds the complete iterations',
          );
          assert.equal(run.lastCompleteIteration(), 2);
          if (state === 'finished') {
            assert.equal(r.code, 0, r.out);
            assert.match(said, /is finished: iterations 0–2 are complete.*nothing to do/);
            assert.doesNotMatch(said, /run finished/);
          } else {
            assert.equal(r.code, 1, r.out);
            assert.match(r.error?.code ?? '', /docker-unreachable/, r.out);
            assert.ok(!fs.existsSync(run.file('lock.json')), 'the lock is released');
          }
        });
      }
    }
  }
});
