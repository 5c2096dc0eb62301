// The numbered form of the fix skill: `tw-suspects -n` and `tw-edit K OLD NEW` demonstrations,
// and the warm start's simulation of those tools. The simulation is what the warm start's
// figures are measured against, so it must refuse what the real tool refuses (OLD absent or
// ambiguous on the line, a suspect that is not listed), count an edit of another suspect as a
// stray one, and never treat shell text it cannot read as a tool call.
import * as assert from 'node:assert/strict';
import { seededRandom } from '../../../src/core/random';
import { bugSuspect, numberedAttempt, numberedCurriculumTask, numberedEpisode, numberedFix } from '../../../src/demonstrations/forms';
import { numberedSuspects, twEditOutput } from '../../../src/demonstrations/tool-output';
import { drawDemonstration, syntheticCases } from '../../../src/demonstrations/cases';
import { fixPromptTurns, numberedRestores, shellWords, simulateNumbered, simulateTurn } from '../../../src/demonstrations/simulator';
import { LEDGER_CASE } from '../train/ledger-case';

const fc = LEDGER_CASE;

describe('demonstrations/numbered + warmstart-eval: the numbered form', () => {
  it('the ranking is numbered from 1 and the fix names the bug by its number, quoted, as one attempt', () => {
    assert.deepEqual(numberedSuspects(fc).slice(0, 2), [
      '[1] src/books/_core/ledger.py:10: if amount <= 0:',
      '[2] src/books/_core/ledger.py:12: if len(self.rows) > self.limit:',
    ]);
    assert.equal(bugSuspect(fc), 2);
    assert.equal(numberedFix(fc), "tw-edit 2 '>' '>=' && tw-test || git checkout -q .");
    // The span is widened until it occurs once on the line.
    assert.equal(
      numberedAttempt(1, '    return a < b and b < c', '    return a <= b and b < c'),
      "tw-edit 1 'a < b' 'a <= b' && tw-test || git checkout -q .",
    );
    // A span with a single quote cannot be single-quoted: no attempt.
    assert.equal(numberedAttempt(1, "    c = '", '    c = "'), undefined);
  });

  it('an episode lower in the ranking tries the first suspect, is put back by git, then fixes suspect 2; no action names a path', () => {
    const ep = numberedEpisode(seededRandom(1), fc)!;
    const acts = ep.segments.filter((s) => s.role === 'agent').map((s) => s.text);
    assert.equal(ep.kind, 'episode-numbered-lower');
    assert.equal(acts[0], 'tw-suspects -n');
    assert.equal(acts[1], "tw-edit 1 '<=' '<' && tw-test || git checkout -q .");
    assert.equal(acts[acts.length - 2], numberedFix(fc));
    assert.equal(acts[acts.length - 1], 'submit');
    for (const a of acts) assert.ok(!a.includes('ledger.py'), a);
    // The demonstrated observations are what the simulation gives for the same commands.
    const st = { line: fc.mutatedLine, stray: false };
    const obs = ep.segments.filter((s) => s.role === 'obs').map((s) => s.text);
    for (let i = 0; i < acts.length - 1; i++) assert.equal(simulateTurn(st, fc, acts[i]), obs[i], acts[i]);
    assert.equal(st.line, fc.originalLine);
  });

  it('simulation: an edit of the bug line with tests passes; a wrong one is undone; a stray edit fails the tests until undone', () => {
    let st = { line: fc.mutatedLine, stray: false };
    assert.equal(
      simulateNumbered(st, fc, "tw-edit 2 '>' '<' && tw-test || git checkout -q ."),
      `exit 0\n${twEditOutput(fc.path, 12, fc.mutatedLine, '        if len(self.rows) < self.limit:')}\nFAIL tests/test_ledger.py::test_add_limit\n1 failed, 9 passed`,
    );
    assert.equal(st.line, fc.mutatedLine, 'put back by git checkout');
    // A stray edit (suspect 1) left in place: the right fix then still fails the tests.
    st = { line: fc.mutatedLine, stray: false };
    assert.match(simulateNumbered(st, fc, "tw-edit 1 '<=' '<'")!, /^exit 0\nedited src\/books\/_core\/ledger.py:10/);
    assert.equal(st.stray, true);
    assert.match(simulateNumbered(st, fc, "tw-edit 2 '>' '>=' && tw-test")!, /1 failed, 9 passed$/);
    assert.equal(simulateTurn(st, fc, 'git checkout -q .'), 'exit 0');
    assert.equal(st.line, fc.mutatedLine);
    assert.equal(st.stray, false);
    assert.match(simulateNumbered(st, fc, numberedFix(fc)!)!, /\n0 failed, 10 passed$/);
    assert.equal(numberedRestores(numberedFix(fc)!, fc), true);
    assert.equal(numberedRestores("tw-edit 2 '> self' '>= self' && tw-test", fc), true, 'an equivalent edit restores too');
    assert.equal(numberedRestores("tw-edit 1 '<=' '<'", fc), false);
  });

  it('simulation refuses what tw-edit refuses: text not on the line, text twice, no such suspect, a bad usage', () => {
    const st = { line: fc.mutatedLine, stray: false };
    assert.equal(simulateNumbered(st, fc, "tw-edit 2 '<' '>'"), 'exit 1');
    assert.equal(simulateNumbered(st, fc, "tw-edit 2 's' 'x'"), 'exit 1', '`s` occurs several times');
    assert.equal(simulateNumbered(st, fc, "tw-edit 7 '>' '>='"), 'exit 1');
    assert.equal(simulateNumbered(st, fc, "tw-edit 2 '>'"), 'exit 2');
    assert.equal(simulateNumbered(st, fc, "tw-edit 2 '>' '>'"), 'exit 1');
    assert.equal(st.line, fc.mutatedLine);
    assert.equal(st.stray, false);
    assert.match(
      simulateNumbered(st, fc, 'tw-show 2')!,
      /^exit 0\nsrc\/books\/_core\/ledger.py:12\n 10 {9}if amount <= 0:\n 11 .*\n>12 {9}if len/,
    );
    assert.equal(simulateNumbered(st, fc, 'tw-show 9'), 'exit 1');
    assert.match(simulateNumbered(st, fc, 'tw-suspects -n')!, /^exit 1\n1 failed, 9 passed\n\[1\] /);
  });

  it('shell text the simulation cannot read is not a tool call (quotes, substitutions, globs stay data)', () => {
    assert.deepEqual(shellWords("tw-edit 2 'a < b' 'a <= b'"), ['tw-edit', '2', 'a < b', 'a <= b']);
    assert.equal(shellWords('tw-edit 2 "$(touch x)" y'), undefined);
    assert.equal(shellWords('tw-edit 2 `id` y'), undefined);
    assert.equal(shellWords('tw-edit 2 a* b'), undefined);
    assert.equal(shellWords("tw-edit 2 'a' 'b'; rm -rf /"), undefined);
    const st = { line: fc.mutatedLine, stray: false };
    assert.equal(simulateNumbered(st, fc, 'tw-edit 2 "$(touch x)" y'), undefined);
    assert.equal(simulateTurn(st, fc, 'tw-edit 2 "$(touch x)" y'), 'exit 0', 'run as a no-op, the turn wasted');
    assert.equal(simulateNumbered(st, fc, "tw-edit 2 '>' '>='\nrm -rf /"), undefined, 'several lines');
    assert.equal(simulateNumbered(st, fc, '\n'), undefined);
    assert.equal(st.line, fc.mutatedLine);
  });

  it('the prompt of the numbered form opens with tw-suspects -n and its numbered ranking', () => {
    const p = fixPromptTurns(fc, 'numbered');
    assert.equal(p.turns[0].action, 'tw-suspects -n');
    assert.match(p.turns[0].observation, /^exit 1\n1 failed, 9 passed\n\[1\] src\/books\/_core\/ledger.py:10: /);
    assert.equal(fixPromptTurns(fc).turns[0].action, 'tw-suspects');
  });

  it('curriculum tasks read the numbered ranking: the number of a location, an edit of a given suspect', () => {
    const kinds = new Set<string>();
    for (let s = 0; s < 40; s++) {
      const d = numberedCurriculumTask(seededRandom(s), fc)!;
      kinds.add(d.kind);
      const answer = d.segments[1].text;
      if (d.kind === 'numbered-which') assert.equal(answer, '2');
      else assert.equal(answer, numberedFix(fc));
    }
    assert.deepEqual([...kinds].sort(), ['numbered-edit', 'numbered-which']);
  });

  it('drawDemonstration mixes in the numbered form at its share, and draws as before without it', async () => {
    const cases = await syntheticCases(seededRandom(5), 4);
    const kinds = (numberedShare?: number) => {
      const r = seededRandom(9);
      return Array.from(
        { length: 200 },
        (_, i) =>
          drawDemonstration(r, cases[i % cases.length], {
            curriculum: 0.2,
            loopShare: 0.5,
            ...(numberedShare !== undefined ? { numberedShare } : {}),
          }).kind,
      );
    };
    const none = kinds();
    assert.deepEqual(kinds(0), none, 'a share of 0 draws exactly as no share');
    assert.ok(!none.some((k) => k.startsWith('numbered') || k.startsWith('episode-numbered')));
    const mixed = kinds(0.7);
    const share = mixed.filter((k) => k.startsWith('numbered') || k.startsWith('episode-numbered')).length / mixed.length;
    assert.ok(share > 0.5 && share < 0.85, `numbered share ${share}`);
  });
});
