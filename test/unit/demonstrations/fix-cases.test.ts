// The demonstrations' fix commands are the warm start's ground truth: a `sed` that does not
// restore the file teaches the policy a wrong fix. Each command is applied for real with
// /bin/sed to a file holding the mutated module and must give back the original source byte
// for byte, over many generated modules and every fixable mutation of each.
import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { seededRandom } from '../../../src/core/random';
import { mutationCandidates } from '../../../src/tasks/mutate';
import { parseAction } from '../../../src/agent/action';
import { syntheticCases } from '../../../src/demonstrations/cases';
import { fixCommand, FIXABLE_OPERATORS, undoCandidates, withTopCandidates } from '../../../src/demonstrations/fix-cases';
import { attemptCommand, curriculumTask, fixEpisode, LOOP_MAX_FAILED, LOOP_SHARE, RECOVERY_SHARE } from '../../../src/demonstrations/forms';
import { generateModule } from '../../../src/demonstrations/generated-modules';
import { SUSPECTS_TOP1 } from '../../../src/demonstrations/tool-output';

const SED = fs.existsSync('/bin/sed') ? '/bin/sed' : 'sed';

/** Runs a `sed -i '…' path` command (as the policy would) in `cwd`, without a shell. */
function applySed(cmd: string, cwd: string): void {
  const m = /^sed -i '([^']*)' (\S+)$/.exec(cmd);
  assert.ok(m, `not a single-quoted one-line sed: ${cmd}`);
  execFileSync(SED, ['-i', m![1], m![2]], { cwd, stdio: 'pipe' });
}

describe('demonstrations/fix-cases: fix commands restore the original source when run with sed', function () {
  this.timeout(300_000);
  let dir: string;
  before(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-demos-'))));
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('every fixable mutation of 20 generated modules: sed(mutated) = original', async () => {
    const r = seededRandom(11);
    let tried = 0;
    let fixed = 0;
    const byOp = new Map<string, number>();
    for (let k = 0; k < 20; k++) {
      const mod = generateModule(r);
      const cands = (await mutationCandidates(mod.path, mod.source, 'python')).filter((c) => FIXABLE_OPERATORS.has(c.operator));
      for (const c of cands) {
        const before = mod.source.split('\n');
        const after = c.mutatedSource.split('\n');
        if (before.length !== after.length || before[c.line - 1] === after[c.line - 1]) continue;
        tried++;
        const cmd = fixCommand(mod.path, c.line, after[c.line - 1], before[c.line - 1]);
        if (!cmd) continue;
        const file = path.join(dir, mod.path);
        fs.mkdirSync(path.dirname(file), { recursive: true });
        fs.writeFileSync(file, c.mutatedSource);
        applySed(cmd, dir);
        assert.equal(
          fs.readFileSync(file, 'utf8'),
          mod.source,
          `${c.operator} at ${mod.path}:${c.line}\n  mutated:  ${after[c.line - 1]}\n  original: ${before[c.line - 1]}\n  command:  ${cmd}`,
        );
        fixed++;
        byOp.set(c.operator, (byOp.get(c.operator) ?? 0) + 1);
      }
    }
    assert.ok(tried > 50, `${tried} candidates`);
    // Single-line mutations of generated code nearly always have a one-line fix.
    assert.ok(fixed / tried > 0.9, `${fixed}/${tried} have a fix command`);
    assert.ok(byOp.size >= 5, `operators covered: ${[...byOp.keys()].join(', ')}`);
  });

  it("syntheticCases: each case's fix turns its mutated line back, in a file with look-alike lines around it", async () => {
    const r = seededRandom(5);
    let n = 0;
    for (let k = 0; k < 40; k++) {
      for (const c of await syntheticCases(r, 4)) {
        // Lines before and after hold the mutated text too: the command must touch only its line.
        const lines = [...Array(c.line - 1).fill(c.mutatedLine), c.mutatedLine, c.mutatedLine];
        const file = path.join(dir, c.path);
        fs.mkdirSync(path.dirname(file), { recursive: true });
        fs.writeFileSync(file, lines.join('\n') + '\n');
        applySed(c.fix, dir);
        const want = [...lines];
        want[c.line - 1] = c.originalLine;
        assert.equal(fs.readFileSync(file, 'utf8'), want.join('\n') + '\n', c.fix);
        assert.ok(
          c.suspects.some((s) => s.startsWith(`${c.path}:${c.line}:`)),
          'the bug line is among the suspects',
        );
        n++;
      }
    }
    assert.ok(n > 80, `${n} cases`);
  });

  const tricky: [string, string][] = [
    ['    return a[0] * 2', '    return a[1] * 2'],
    ['    return x.y <= 3', '    return x.y < 3'],
    ['    if a == b and a == c:', '    if a == b and a != c:'],
    ['    return price ^ 2 & mask', '    return price ^ 3 & mask'],
    ['    s = "a/b\\\\c" + t', '    s = "a/b\\\\c" - t'],
    ['    return f(b, a)', '    return f(a, b)'],
    ['    return $x * .5', '    return $x * .6'],
  ];
  for (const [mutated, original] of tricky) {
    it(`special characters: ${mutated.trim()} → ${original.trim()}`, () => {
      const cmd = fixCommand('m.py', 2, mutated, original);
      assert.ok(cmd, 'a command exists');
      fs.writeFileSync(path.join(dir, 'm.py'), `# head\n${mutated}\n${mutated}\n`);
      applySed(cmd!, dir);
      assert.equal(fs.readFileSync(path.join(dir, 'm.py'), 'utf8'), `# head\n${original}\n${mutated}\n`, cmd);
    });
  }

  it('no command for an unchanged line or a line with a single quote (the command is single-quoted)', () => {
    assert.equal(fixCommand('m.py', 1, 'x = 1', 'x = 1'), undefined);
    assert.equal(fixCommand('m.py', 1, "x = 'a' + b", "x = 'a' - b"), undefined);
  });

  it('no command for a file whose name bash would interpret: a workspace file name is data, not part of a command', () => {
    assert.equal(fixCommand('pkg/m.py', 1, 'x = a + b', 'x = a - b'), "sed -i '1s/+/-/' pkg/m.py");
    for (const p of ['my file.py', '$(touch pwned).py', 'a;b.py', '`x`.py', 'a*.py'])
      assert.equal(fixCommand(p, 1, 'x = a + b', 'x = a - b'), undefined, p);
  });

  it('episodes and curriculum tasks are deterministic per seed and end with submit', async () => {
    const cases = await syntheticCases(seededRandom(3), 3);
    assert.ok(cases.length > 0);
    const a = fixEpisode(seededRandom(1), cases[0]);
    const b = fixEpisode(seededRandom(1), cases[0]);
    assert.deepEqual(a, b);
    assert.equal(a.segments[0].role, 'task');
    assert.deepEqual(a.segments[a.segments.length - 1], { role: 'agent', text: 'submit' });
    assert.ok(a.segments.some((s) => s.role === 'agent' && s.text === cases[0].fix));
    const r = seededRandom(2);
    for (let i = 0; i < 50; i++) {
      const d = curriculumTask(r, cases[i % cases.length]);
      assert.deepEqual(
        d.segments.map((s) => s.role),
        ['task', 'agent'],
      );
      assert.ok(d.segments[1].text.length > 0, d.kind);
    }
  });
  it('recovery episodes: the wrong sed really changes a shown line and is not the fix, git checkout names its file, then the fix', async () => {
    const r = seededRandom(21);
    let episodes = 0;
    let recoveries = 0;
    let otherLine = 0;
    // Enough episodes that a bug ranked below the first suspect (a tenth of them) shows up.
    for (let k = 0; k < 150; k++) {
      for (const c of await syntheticCases(r, 3)) {
        const ep = fixEpisode(r, c);
        assert.ok(!ep.kind.startsWith('episode-loop'), 'no attempt loops unless asked for');
        episodes++;
        const actions = ep.segments.filter((s) => s.role === 'agent').map((s) => s.text);
        if (ep.kind !== 'episode-recovery') {
          assert.ok(!actions.some((a) => a.startsWith('git ')), 'only recovery episodes undo');
          continue;
        }
        recoveries++;
        // tw-suspects, wrong sed, tw-test, git checkout, right sed, tw-test, submit.
        assert.equal(actions.length, 7, actions.join(' | '));
        const [, wrong, , undo, right] = actions;
        assert.equal(right, c.fix);
        const wrongFile = /^sed -i '(\d+)s\/.*' (\S+)$/.exec(wrong);
        assert.ok(wrongFile, wrong);
        assert.notEqual(wrong, c.fix);
        if (Number(wrongFile![1]) !== c.line) otherLine++;
        assert.equal(undo, `git checkout -- ${wrongFile![2]}`);
        // The wrong sed must really change its line (a no-op would teach nothing), and be one of
        // the lines the policy was shown.
        const shown = c.suspects[0].startsWith(`${wrongFile![2]}:${wrongFile![1]}: `) ? c.suspects[0] : undefined;
        assert.ok(shown, `${wrong} targets the first suspect`);
        const code = shown!.replace(/^\S+:\d+: /, '');
        const file = path.join(dir, 'w.py');
        fs.writeFileSync(file, `${code}\n`);
        applySed(wrong.replace(/^(sed -i ')\d+/, '$11').replace(/ \S+$/, ' w.py'), dir);
        assert.notEqual(fs.readFileSync(file, 'utf8'), `${code}\n`, wrong);
        if (Number(wrongFile![1]) === c.line)
          assert.notEqual(fs.readFileSync(file, 'utf8').trim(), c.originalLine.trim(), `${wrong} is a wrong attempt`);
      }
    }
    const share = recoveries / episodes;
    // RECOVERY_SHARE of episodes try a wrong sed where the case has one (about 7 in 10 do).
    assert.ok(share > RECOVERY_SHARE * 0.55 && share <= RECOVERY_SHARE * 1.1, `${recoveries}/${episodes} recovery episodes`);
    // Wrong attempts are on the first suspect: another line only when the bug is not ranked first
    // (a few percent of generated cases: a short function's bug is often its first line anyway).
    assert.ok(otherLine < recoveries / 3, `${otherLine}/${recoveries} wrong attempts on another line than the bug's`);
    // A bug ranked second: the wrong attempt is on the first suspect's line, then the fix.
    const base = (await syntheticCases(seededRandom(4), 3)).find((c) => c.suspects.length >= 2)!;
    const bug = base.suspects.find((l) => l.startsWith(`${base.path}:${base.line}: `))!;
    const lower = await withTopCandidates({ ...base, suspects: [base.suspects.find((l) => l !== bug)!, bug], topCandidates: undefined });
    const first = Number(/^\S+:(\d+): /.exec(lower.suspects[0])![1]);
    let seen = 0;
    for (let s = 0; s < 200 && seen < 3; s++) {
      const ep = fixEpisode(seededRandom(s), lower);
      if (ep.kind !== 'episode-recovery') continue;
      seen++;
      const [, wrong, , , right] = ep.segments.filter((x) => x.role === 'agent').map((x) => x.text);
      assert.equal(Number(/^sed -i '(\d+)s/.exec(wrong)![1]), first, `${wrong} edits the first suspect`);
      assert.equal(right, lower.fix);
    }
    assert.ok(seen >= 1, 'a recovery episode for a bug ranked second');
  });

  it('simulated suspects rank the bug line first about as often as tw-suspects does on the demo workspace', async () => {
    const r = seededRandom(8);
    let n = 0;
    let first = 0;
    for (let k = 0; k < 80; k++) {
      for (const c of await syntheticCases(r, 3)) {
        n++;
        if (c.suspects[0].startsWith(`${c.path}:${c.line}: `)) first++;
      }
    }
    assert.ok(n > 150, `${n} cases`);
    // A function with one body line ranks it first whatever the draw: a few points over SUSPECTS_TOP1.
    assert.ok(first / n > SUSPECTS_TOP1 - 0.03 && first / n < SUSPECTS_TOP1 + 0.09, `${first}/${n} first, want about ${SUSPECTS_TOP1}`);
  });

  it("undoCandidates: the original line is among a mutated line's candidates, in a fixed left-to-right order", async () => {
    assert.deepEqual(await undoCandidates('if cols == 12:'), [
      'if cols != 12:',
      'if cols == 13:',
      'if cols == 11:',
      'if not (cols == 12):',
    ]);
    assert.deepEqual(await undoCandidates('if level:'), ['if not level:']);
    assert.deepEqual(await undoCandidates('return False'), ['return True', 'return None']);
    assert.deepEqual((await undoCandidates('return maximum * 7')).slice(0, 2), ['return maximum // 7', 'return maximum / 7']);
    assert.equal((await undoCandidates('    if not (x >= 2):'))[0], 'if x >= 2:');
    assert.equal((await undoCandidates('for i in range(total - 1):'))[0], 'for i in range(total):');
    const r = seededRandom(5);
    let n = 0;
    let found = 0;
    for (let k = 0; k < 40; k++) {
      for (const c of await syntheticCases(r, 3)) {
        n++;
        if ((await undoCandidates(c.mutatedLine)).includes(c.originalLine.trim())) found++;
      }
    }
    assert.ok(found / n >= 0.97, `original among the candidates in ${found}/${n} cases`);
  });

  it('attempt loops: valid bash; under bash with a git checkout they undo each failed edit and keep the fix', async () => {
    // tw-test is a stand-in here (the sandbox's real one runs pytest): it passes when the file
    // holds the original line. Everything else is real: bash, sed, git.
    const r = seededRandom(31);
    const repo = path.join(dir, 'loop');
    const bin = path.join(dir, 'bin');
    fs.mkdirSync(bin, { recursive: true });
    let episodes = 0;
    let loops = 0;
    let withFailures = 0;
    for (let k = 0; k < 40 && withFailures < 12; k++) {
      for (const c of await syntheticCases(r, 3)) {
        const ep = fixEpisode(r, c, { loopShare: LOOP_SHARE });
        episodes++;
        if (!ep.kind.startsWith('episode-loop')) continue;
        loops++;
        const actions = ep.segments.filter((s) => s.role === 'agent').map((s) => s.text);
        assert.equal(actions[0], 'tw-suspects');
        assert.equal(actions[actions.length - 1], 'submit');
        const attempts = actions.slice(1, -1);
        assert.equal(attempts[attempts.length - 1], attemptCommand(c.fix, c.path));
        assert.ok(attempts.length - 1 <= LOOP_MAX_FAILED, `${attempts.length - 1} failed attempts`);
        for (const a of attempts) assert.equal((await parseAction(a)).kind, 'bash', a);
        assert.equal(new Set(attempts).size, attempts.length, 'no edit tried twice');
        if (attempts.length === 1) continue;
        withFailures++;
        // The file as the task has it: the suspect lines (the bug line holds the mutated code).
        fs.rmSync(repo, { recursive: true, force: true });
        const lines = new Map<number, string>();
        for (const sl of c.suspects) {
          const m = /^(\S+):(\d+): (.*)$/.exec(sl)!;
          if (m[1] === c.path) lines.set(Number(m[2]), m[3]);
        }
        const size = Math.max(...lines.keys());
        const text = Array.from({ length: size }, (_, i) => lines.get(i + 1) ?? '').join('\n') + '\n';
        const want = text
          .split('\n')
          .map((l, i) => (i + 1 === c.line ? c.originalLine.trim() : l))
          .join('\n');
        fs.mkdirSync(path.join(repo, path.dirname(c.path)), { recursive: true });
        fs.writeFileSync(path.join(repo, c.path), text);
        fs.writeFileSync(path.join(dir, 'want'), want);
        fs.writeFileSync(
          path.join(bin, 'tw-test'),
          `#!/bin/sh\ncmp -s ${c.path} ${path.join(dir, 'want')} && echo '0 failed' && exit 0\necho '1 failed'; exit 1\n`,
          { mode: 0o755 },
        );
        const git = (...args: string[]) => execFileSync('git', args, { cwd: repo, stdio: 'pipe' });
        git('init', '-q');
        git('add', '.');
        git('-c', 'user.email=t@t', '-c', 'user.name=t', 'commit', '-qm', 'task');
        const run = (cmd: string) =>
          execFileSync('bash', ['-c', cmd], {
            cwd: repo,
            env: { ...process.env, PATH: `${bin}:${process.env.PATH}` },
            encoding: 'utf8',
            stdio: ['ignore', 'pipe', 'pipe'],
          });
        for (const a of attempts.slice(0, -1)) {
          assert.match(run(a), /1 failed/, a);
          assert.equal(fs.readFileSync(path.join(repo, c.path), 'utf8'), text, `${a} left the file as the task had it`);
        }
        assert.match(run(attempts[attempts.length - 1]), /0 failed/);
        assert.equal(fs.readFileSync(path.join(repo, c.path), 'utf8'), want);
      }
    }
    assert.ok(withFailures >= 5, `${withFailures} loops with a failed attempt`);
    assert.ok(Math.abs(loops / episodes - LOOP_SHARE) < 0.15, `${loops}/${episodes} loop episodes, want about ${LOOP_SHARE}`);
  });
});
