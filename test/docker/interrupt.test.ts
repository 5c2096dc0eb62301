// Ctrl-C (SIGINT) or SIGTERM while sandboxes are being created or a snapshot is being built:
// afterwards zero containers of the run and zero images of the workspace remain. And a warm start
// stopped while it records the workspace's demonstrations, or a task synthesis stopped while it
// validates mutants, says so and exits 130.
import * as assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { connectEngine } from '../../src/sandbox/engine';
import * as tar from 'tar-stream';
import { buildFromContext, ensureLanguageImage } from '../../src/sandbox/images';
import { LABEL } from '../../src/sandbox/owner';
import { reapInterruptedBuilds } from '../../src/sandbox/reaper';
import { SCHEMA, type Task } from '../../src/core/schema';
import { taskOrigin } from '../../src/tasks/origin';
import { commandForTests, detectRunner } from '../../src/tasks/runners';
import { writeTaskFile } from '../../src/tasks/taskfile';

/** A build context holding only this Dockerfile. */
function dockerfileContext(text: string): NodeJS.ReadableStream {
  const pack = tar.pack();
  pack.entry({ name: 'Dockerfile' }, text);
  pack.finalize();
  return pack as unknown as NodeJS.ReadableStream;
}

const FIXTURE = path.join(__dirname, 'fixtures', 'interrupt-child.ts');
const ROOT = path.join(__dirname, '..', '..');

/** Runs the fixture, sends `signal` `delayMs` after it says "ready", resolves when it has exited. */
function interrupt(args: string[], signal: NodeJS.Signals, delayMs: number): Promise<string> {
  const child = spawn(process.execPath, ['--require', 'tsx/cjs', FIXTURE, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => {
    out += d;
    if (out.startsWith('ready')) setTimeout(() => child.kill(signal), delayMs);
  });
  child.stderr.on('data', (d) => (err += d));
  return new Promise((resolve) => child.once('exit', () => resolve(out + err)));
}

/**
 * Runs the CLI with `args`, sends SIGINT one second after its output first matches `when`, and
 * resolves when it has exited: its exit code, its output, its pid, and the seconds from the
 * signal to the exit (NaN when the signal was never sent).
 */
async function interruptCli(args: string[], when: RegExp): Promise<{ code: number | null; text: string; pid: number; stopS: number }> {
  const child = spawn(process.execPath, ['--require', 'tsx/cjs', path.join(ROOT, 'src', 'cli', 'main.ts'), ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let text = '';
  let seen = false;
  let sentAt = NaN;
  const onData = (d: Buffer) => {
    text += d;
    if (!seen && when.test(text)) {
      seen = true;
      setTimeout(() => {
        sentAt = Date.now();
        child.kill('SIGINT');
      }, 1000);
    }
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  return { code, text, pid: child.pid!, stopS: (Date.now() - sentAt) / 1000 };
}

/** A copy of py-failing (two failing tests) under `tmp` with a test that sleeps a minute: a stop that waited for the suite would be seen. */
function slowFailingWorkspace(tmp: string): string {
  const ws = path.join(tmp, 'ws');
  fs.cpSync(path.join(ROOT, 'test', 'fixtures', 'py-failing'), ws, { recursive: true });
  fs.writeFileSync(path.join(ws, 'tests', 'test_slow.py'), 'import time\n\n\ndef test_slow():\n    time.sleep(60)\n');
  return ws;
}

/** Containers (any state) whose run label starts with `prefix`: what a stopped command left. */
async function containersLeft(prefix: string): Promise<number> {
  const all = await connectEngine().docker.listContainers({ all: true });
  return all.filter((c) => (c.Labels?.[LABEL.run] ?? '').startsWith(prefix)).length;
}

describe('interrupted runs leave nothing behind (docker)', function () {
  this.timeout(240_000);
  const { docker, target } = connectEngine();
  let langImage: string;
  before(async () => {
    langImage = (await ensureLanguageImage(docker, target, 'python')).tag;
  });

  for (const [signal, delay] of [
    ['SIGINT', 0],
    ['SIGTERM', 30],
    ['SIGINT', 80],
  ] as const) {
    it(`${signal} ${delay} ms into sandbox creation: zero containers of the run`, async () => {
      const run = `test-interrupt-${process.pid}-${signal}-${delay}`;
      const log = await interrupt(['create', run, langImage], signal, delay);
      assert.ok(log.startsWith('ready'), log);
      const left = await docker.listContainers({ all: true, filters: { label: [`${LABEL.run}=${run}`] } });
      assert.deepEqual(
        left.map((c) => `${c.Id.slice(0, 12)} ${c.State}`),
        [],
      );
    });
  }

  it("SIGINT while `turnwise warmstart --workspace` records the workspace's demonstrations: exit 130, stopped, nothing written, no container left", async () => {
    // A real signal to a child process: in this one it would also stop every later test's sandboxes.
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-ws-stop-'));
    const out = path.join(tmp, 'model');
    // Mutants are being validated in sandboxes: the workspace's tasks are being made.
    const { code, text, pid, stopS } = await interruptCli(
      ['warmstart', '--workspace', path.join(ROOT, 'examples', 'demo-python'), '--out', out, '--steps', '5'],
      /validating mutants/,
    );
    try {
      assert.ok(Number.isFinite(stopS), text);
      assert.ok(stopS < 30, `stopped ${stopS} s after the signal`);
      assert.equal(code, 130, text);
      assert.match(
        text,
        /turnwise warmstart: stopped while (synthesizing tasks|making the workspace's tasks|preparing the workspace's demonstrations|recording the workspace's demonstrations|generating fix cases)/,
      );
      assert.equal(fs.existsSync(out), false, 'nothing written');
      const left = await docker.listContainers({ all: true, filters: { label: [`${LABEL.run}=warmstart-${pid}`] } });
      assert.equal(left.length, 0, `${left.length} container(s) of the warm start left`);
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });

  it('SIGINT while `turnwise tasks synth` validates mutants: exit 130, stopped, --out not written, no container left', async () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-synth-stop-'));
    const out = path.join(tmp, 'tasks.jsonl');
    const { code, text, pid, stopS } = await interruptCli(
      ['tasks', 'synth', '--workspace', path.join(ROOT, 'examples', 'demo-python'), '--out', out, '--max', '50'],
      /validating mutants/,
    );
    try {
      assert.ok(Number.isFinite(stopS), text);
      assert.ok(stopS < 30, `stopped ${stopS} s after the signal`);
      assert.equal(code, 130, text);
      assert.match(text, /turnwise tasks synth: stopped while synthesizing tasks \(validating mutants/);
      assert.equal(fs.existsSync(out), false, 'nothing written');
      // The pool's run label is tasks-<pid>-…: no container of this process is left.
      const left = await containersLeft(`tasks-${pid}-`);
      assert.equal(left, 0, `${left} container(s) of the synthesis left`);
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });

  it('SIGINT while `turnwise tasks failing` runs a slow suite: exit 130 within seconds, stopped, --out not written, no container left', async () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-failing-stop-'));
    // Two runs of this suite take two minutes.
    const ws = slowFailingWorkspace(tmp);
    const out = path.join(tmp, 'tasks.jsonl');
    const { code, text, pid, stopS } = await interruptCli(['tasks', 'failing', '--workspace', ws, '--out', out], /running the test suite/);
    try {
      assert.ok(Number.isFinite(stopS), text);
      assert.ok(stopS < 30, `stopped ${stopS} s after the signal`);
      assert.equal(code, 130, text);
      assert.match(
        text,
        /turnwise tasks failing: stopped while collecting failing tests \((taking the workspace snapshot|running the workspace's tests)\)/,
      );
      assert.equal(fs.existsSync(out), false, 'nothing written');
      const left = await containersLeft(`tasks-${pid}-`);
      assert.equal(left, 0, `${left} container(s) left`);
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });

  it('SIGINT while `turnwise tasks check --workspace` scores tasks of a slow suite: exit 130 within seconds, no container left', async () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-check-stop-'));
    const ws = slowFailingWorkspace(tmp);
    // Three failing-test tasks whose runs each include the minute-long test: a stop that waited for them would be seen.
    const runner = detectRunner(ws);
    const ids = ['test_slugify_joins_with_dashes', 'test_slugify_drops_punctuation_words', 'test_slugify_joins_with_dashes'].map(
      (t) => `tests/test_textkit.py::${t}`,
    );
    const tasks: Task[] = ids.map((id, k) => ({
      schema: SCHEMA.task,
      id: `slow-${k}`,
      source: 'failing-tests',
      instruction: `make ${id} pass`,
      language: 'python',
      testCommand: commandForTests(runner, [id, 'tests/test_slow.py::test_slow']),
      reportFormat: runner.reportFormat,
      runner: runner.kind,
      fail_to_pass: [id],
      pass_to_pass: ['tests/test_slow.py::test_slow'],
      origin: taskOrigin(ws, ['tests/test_textkit.py']),
    }));
    const file = path.join(tmp, 'tasks.jsonl');
    writeTaskFile(file, tasks);
    const { code, text, pid, stopS } = await interruptCli(['tasks', 'check', file, '--workspace', ws], /scoring 3 task\(s\) in sandboxes/);
    try {
      assert.ok(Number.isFinite(stopS), text);
      assert.ok(stopS < 30, `stopped ${stopS} s after the signal`);
      assert.equal(code, 130, text);
      assert.match(text, /turnwise tasks check: stopped while checking how the tasks score/);
      const left = await containersLeft(`tasks-check-${pid}-`);
      assert.equal(left, 0, `${left} container(s) left`);
    } finally {
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });

  it('what a killed snapshot build left is reaped at the next start once stale; finished snapshots and other images stay', async () => {
    const { docker, target } = connectEngine();
    const stamp = `${process.pid}-${Date.now()}`;
    const dead = `test-dead-${stamp}`;
    const done = `test-done-${stamp}`;
    const labelsOf = async (hash: string) => docker.listImages({ all: true, filters: { label: [`${LABEL.snapshot}=${hash}`] } });
    // A build that stops after two committed steps leaves labelled, untagged step images: what a
    // process killed mid-build (SIGKILL: no cleanup of its own) leaves on the engine.
    const steps = (hash: string, last: string) =>
      `FROM ${langImage}\nLABEL ${JSON.stringify(LABEL.snapshot)}="${hash}"\nRUN echo one > /tmp/one\nRUN echo two > /tmp/two\n${last}\n`;
    await assert.rejects(
      buildFromContext(docker, target, dockerfileContext(steps(dead, 'RUN exit 3')), { t: `turnwise/snapshot:${dead}` }),
    );
    const tag = `turnwise/snapshot:${done}`;
    await buildFromContext(docker, target, dockerfileContext(steps(done, 'RUN echo three > /tmp/three')), { t: tag });
    // An unlabelled dangling image (not Turnwise's) must survive every reap.
    const allIds = async () => new Set((await docker.listImages({ all: true })).map((i) => i.Id));
    const beforeForeign = await allIds();
    await assert.rejects(
      buildFromContext(docker, target, dockerfileContext(`FROM ${langImage}\nRUN echo ${stamp} > /tmp/f\nRUN exit 3\n`), {
        t: `test-foreign:${stamp}`,
      }),
    );
    const foreignIds = [...(await allIds())].filter((id) => !beforeForeign.has(id));
    assert.equal(foreignIds.length, 1, 'the unlabelled failed build left one step image');
    const [foreignId] = foreignIds;
    try {
      const deadBefore = await labelsOf(dead);
      const doneBefore = await labelsOf(done);
      assert.ok(deadBefore.length >= 2, `the failed build left its step images: ${deadBefore.length}`);
      assert.ok(doneBefore.length >= 2, 'the finished snapshot has labelled parent step images too');
      // Fresh leftovers could belong to a build still running elsewhere: the default age spares them.
      const early = await reapInterruptedBuilds(docker, target);
      assert.ok(!early.some((id) => deadBefore.some((i) => i.Id === id)), 'a fresh build image was taken before it was stale');
      assert.equal((await labelsOf(dead)).length, deadBefore.length);
      // Ten minutes later (simulated clock), every one of them goes, child before parent.
      const removed = await reapInterruptedBuilds(docker, target, { now: Date.now() + 11 * 60_000 });
      for (const i of deadBefore) assert.ok(removed.includes(i.Id), `step image ${i.Id.slice(7, 19)} of the killed build was not removed`);
      assert.deepEqual(await labelsOf(dead), []);
      // The finished snapshot, its step images and the foreign image are untouched.
      assert.deepEqual((await labelsOf(done)).map((i) => i.Id).sort(), doneBefore.map((i) => i.Id).sort());
      assert.ok((await docker.getImage(tag).inspect()).Id);
      await docker.getImage(foreignId).inspect();
    } finally {
      await docker
        .getImage(tag)
        .remove({ force: true })
        .catch(() => undefined);
      await docker
        .getImage(foreignId)
        .remove({ force: true })
        .catch(() => undefined);
      for (const i of await labelsOf(dead))
        await docker
          .getImage(i.Id)
          .remove({ force: true })
          .catch(() => undefined);
    }
  });

  it('SIGINT during a snapshot build: no image of the workspace remains, tagged or not', async () => {
    const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-interrupt-'));
    try {
      fs.writeFileSync(path.join(ws, 'data.bin'), Buffer.alloc(300 * 1024 * 1024, 7));
      fs.writeFileSync(path.join(ws, 'a.py'), `x = ${Date.now()}\n`);
      const log = await interrupt(['snapshot', ws, langImage], 'SIGINT', 1500);
      assert.ok(log.startsWith('ready') && !log.includes('built'), `the build was not interrupted: ${log}`);
      // The engine may still be removing what the build left when the process exits; on a loaded
      // machine that takes more than a second. Whatever is left after 15 s was left for good.
      let left: { Id: string }[] = [];
      for (const until = Date.now() + 15_000; ;) {
        left = await docker.listImages({ all: true, filters: { label: [`${LABEL.workspace}=${ws}`] } });
        if (left.length === 0 || Date.now() > until) break;
        await new Promise((r) => setTimeout(r, 500));
      }
      assert.deepEqual(
        left.map((i) => i.Id.slice(7, 19)),
        [],
      );
    } finally {
      fs.rmSync(ws, { recursive: true, force: true });
    }
  });
});
