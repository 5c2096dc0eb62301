// The candidate form: `tw-cands K` (a line's one-token variants, numbered) and `tw-apply K J`, as
// the demonstrations write them and the warm start simulates them. The list itself must be the
// sandbox tool's (the docker tier compares the two on the standard library); here: the cases a
// broken port would get wrong, the episodes' observations against the simulation, and the
// simulation's refusals.
import * as assert from 'node:assert/strict';
import { seededRandom } from '../../../src/core/random';
import type { FixCase } from '../../../src/demonstrations/fix-cases';
import {
  CANDS_MAX_TURNS,
  candidateAttempt,
  candidateEpisode,
  candidateFix,
  fixVariant,
  numberedCurriculumTask,
  walkEpisode,
  withBugRanked,
  type Demonstration,
} from '../../../src/demonstrations/forms';
import { argumentSwaps, CANDS_MAX, lineCandidates, twCandsOutput, variantView } from '../../../src/demonstrations/line-candidates';
import { OBS_PROMPT_CHARS } from '../../../src/agent/prompt';
import { drawDemonstration, syntheticCases } from '../../../src/demonstrations/cases';
import { simulateNumbered, simulateTurn, type SimState } from '../../../src/demonstrations/simulator';
import { LEDGER_CASE } from '../train/ledger-case';

const fc = LEDGER_CASE;

/** A demonstration's actions and observations, in order. */
const turnsOf = (d: Demonstration) => ({
  acts: d.segments.filter((x) => x.role === 'agent').map((x) => x.text),
  obs: d.segments.filter((x) => x.role === 'obs').map((x) => x.text),
});

/** Every action but the closing submit simulated on `c` from its bug, each observation the demonstration's own (`label` before the action in a failure); the state it ends in. */
function replay(c: FixCase, acts: readonly string[], obs: readonly string[], label = ''): SimState {
  const st = { line: c.mutatedLine, stray: false };
  for (let i = 0; i < acts.length - 1; i++) assert.equal(simulateTurn(st, c, acts[i]), obs[i], `${label}${acts[i]}`);
  return st;
}

describe('demonstrations/line-candidates: tw-cands variants and the candidate form', () => {
  it('flips each operator token left to right, then drops a "- 1" bound, then negates the condition', () => {
    assert.deepEqual(lineCandidates('    if a < b and c:'), ['    if a <= b and c:', '    if a < b or c:', '    if not (a < b and c):']);
    assert.deepEqual(lineCandidates('    for i in range(len(xs) - 1):'), [
      '    for i in range(len(xs) + 1):',
      '    for i in range(len(xs) - 2):',
      '    for i in range(len(xs) - 0):',
      '    for i in range(len(xs)):',
    ]);
    assert.deepEqual(lineCandidates('    if not (a <= b):'), ['    if not (a < b):', '    if a <= b:']);
    assert.deepEqual(lineCandidates('    if ready:'), ['    if not ready:']);
    assert.deepEqual(lineCandidates('    return a is not None'), ['    return a is None', '    return a is not False']);
    assert.deepEqual(lineCandidates('    x = a * b'), ['    x = a / b', '    x = a // b', '    x = a % b']);
  });

  it("leaves strings, comments, unary signs, a loop's own `in` and string joins alone", () => {
    assert.deepEqual(lineCandidates("    s = 'a<b' + name  # x < 2"), []);
    assert.deepEqual(lineCandidates('    x = -y'), []);
    assert.deepEqual(lineCandidates('    y = [v for v in xs if v in ok]'), ['    y = [v for v in xs if v not in ok]']);
    assert.deepEqual(lineCandidates('    n = x1 + 2.5'), ['    n = x1 - 2.5']);
    assert.deepEqual(lineCandidates('    def f(a) -> int:'), []);
    // Past 2^53 a constant is still exact.
    assert.deepEqual(lineCandidates('    n = 9007199254740993'), ['    n = 9007199254740994', '    n = 9007199254740992']);
  });

  it("swaps a call's adjacent positional arguments last, calls left to right; keyword and * arguments, definitions, tuples, strings and comments stay", () => {
    assert.deepEqual(lineCandidates('    if not isinstance(_unicode, iv):'), [
      '    if isinstance(_unicode, iv):',
      '    if not isinstance(iv, _unicode):',
    ]);
    assert.deepEqual(argumentSwaps("    x = f(a, g(b, c), 'x,y', k=1)"), [
      "    x = f(g(b, c), a, 'x,y', k=1)",
      "    x = f(a, 'x,y', g(b, c), k=1)",
      "    x = f(a, g(c, b), 'x,y', k=1)",
    ]);
    assert.deepEqual(argumentSwaps('    return re.sub(rule, replacement, word)  # f(a, b)'), [
      '    return re.sub(replacement, rule, word)  # f(a, b)',
      '    return re.sub(rule, word, replacement)  # f(a, b)',
    ]);
    assert.deepEqual(argumentSwaps('    out = g(*xs, y) + h(a=1, b=2) + k(a, a)'), []);
    assert.deepEqual(argumentSwaps('    def f(a, b):'), []);
    assert.deepEqual(argumentSwaps('    if (a, b) == c:'), []);
    assert.deepEqual(argumentSwaps('    return [(a, b)]'), []);
    // A call that goes on past the line, and a string that holds a bracket or an escaped quote.
    assert.deepEqual(argumentSwaps('    ik = _process(ik, namespaces, sep,'), []);
    assert.deepEqual(argumentSwaps("    s = f('(\\')', x)"), ["    s = f(x, '(\\')')"]);
    // A bracket's own `(` after a subscript or a call is a call.
    assert.deepEqual(argumentSwaps('    h[0](a, b)'), ['    h[0](b, a)']);
  });

  it('lists at most CANDS_MAX variants without repeats; tw-cands prints the line cut, then each change in a few characters of context', () => {
    const many = lineCandidates('    t = a < b < c < d < e < f < g < h < i < j < k');
    assert.equal(many.length, CANDS_MAX);
    assert.equal(new Set(many).size, many.length);
    const out = twCandsOutput('m.py', 3, `    return ${'x + '.repeat(30)}y`).split('\n');
    assert.match(out[0], /^m\.py:3: return x \+ x/);
    assert.ok(out[0].endsWith('...') && out[0].length === 'm.py:3: '.length + 60);
    assert.equal(out[1], '[1] ...eturn x - x + x +...');
    assert.equal(out[2], '[2] ...n x + x - x + x +...');
    assert.equal(
      twCandsOutput('m.py', 8, '        return round(qty / (sum(price) * 2), 1)'),
      [
        'm.py:8: return round(qty / (sum(price) * 2), 1)',
        '[1] ...und(qty * (sum(pr...',
        '[2] ...(price) / 2), 1)',
        '[3] ...(price) // 2), 1)',
        '[4] ...(price) % 2), 1)',
        '[5] ...rice) * 3), 1)',
        '[6] ...rice) * 1), 1)',
        '[7] ...) * 2), 2)',
        '[8] ...) * 2), 0)',
      ].join('\n'),
    );
    // A negation that is removed: the line's start, cut.
    assert.equal(
      variantView('    if not (self.count(item) <= self.limit):', '    if self.count(item) <= self.limit:'),
      'if self.count(item) <= s...',
    );
    assert.equal(twCandsOutput('m.py', 1, '    pass'), 'm.py:1: pass\nno one-token variants of this line');
  });

  it("tw-cands' output fits a small model's observation for the lines of real code", () => {
    const line = `        if self._cache.get(key_name) is not None and len(self._entries[key_name]) > max_size - 1:`;
    assert.ok(
      twCandsOutput('src/pkg/_internal/cache_store.py', 1234, line).length <= OBS_PROMPT_CHARS,
      twCandsOutput('src/pkg/_internal/cache_store.py', 1234, line),
    );
  });

  it("an episode of a bug lower in the ranking tries every variant of suspect 1 in order, lists suspect 2 and writes the fix by number; its observations are the simulation's", () => {
    assert.equal(fixVariant(fc), 1);
    assert.equal(candidateFix(fc), 'tw-apply 2 1 && tw-test || git checkout -q .');
    // Suspect 1 with two variants: both tried, in their order, then suspect 2.
    const c: FixCase = { ...fc, suspects: ['src/books/_core/ledger.py:10: if ready or late:', ...fc.suspects.slice(1)] };
    const ep = candidateEpisode(c)!;
    assert.equal(ep.kind, 'episode-cands-lower');
    const { acts, obs } = turnsOf(ep);
    assert.deepEqual(acts, [
      'tw-suspects -n',
      'tw-cands 1',
      candidateAttempt(1, 1),
      candidateAttempt(1, 2),
      'tw-cands 2',
      candidateFix(fc),
      'submit',
    ]);
    for (const a of acts) assert.ok(!a.includes('ledger') && !a.includes("'"), `${a}: no path, nothing copied`);
    const st = replay(c, acts, obs);
    assert.equal(st.line, c.originalLine);
    assert.equal(st.stray, false);
    // The ledger's own suspect 1 has three variants: with suspect 2's fix they do not fit in the turns.
    assert.equal(lineCandidates('        if amount <= 0:').length, 3);
    assert.equal(candidateEpisode(fc), undefined);
  });

  it("an episode tries the bug line's variants in their order up to the fix: each try follows from the one before, not from the fix's number", () => {
    // Variants of `return total * 2`: /, //, %, * 3, * 1; the fix (* 3) is the fourth.
    const c: FixCase = {
      ...fc,
      line: 14,
      mutatedLine: '        return total * 2',
      originalLine: '        return total * 3',
      suspects: ['src/books/_core/ledger.py:14: return total * 2', ...fc.suspects],
    };
    assert.equal(fixVariant(c), 4);
    const acts = candidateEpisode(c)!
      .segments.filter((x) => x.role === 'agent')
      .map((x) => x.text);
    assert.deepEqual(acts, [
      'tw-suspects -n',
      'tw-cands 1',
      candidateAttempt(1, 1),
      candidateAttempt(1, 2),
      candidateAttempt(1, 3),
      candidateAttempt(1, 4),
      'submit',
    ]);
    // The fifth variant would be the seventh command: past the turns.
    assert.equal(candidateEpisode({ ...c, originalLine: '        return total * 1' }), undefined);
  });

  it('an episode walks past suspects whose line has no variants to the bug, tries each line that has some, and fits the turn budget', () => {
    // Suspect 1 (an append) has no variants, suspect 2 has one, the bug is suspect 3 (its fix the first variant).
    const c: FixCase = {
      ...fc,
      line: 14,
      mutatedLine: '        return total - 2',
      originalLine: '        return total + 2',
      suspects: [
        'src/books/_core/ledger.py:11: self.rows.append((amount, note))',
        'src/books/_core/ledger.py:12: if ready:',
        'src/books/_core/ledger.py:14: return total - 2',
      ],
    };
    const ep = candidateEpisode(c)!;
    assert.equal(ep.kind, 'episode-cands-lower');
    const { acts, obs } = turnsOf(ep);
    assert.deepEqual(acts.slice(0, 3), ['tw-suspects -n', 'tw-cands 1', 'tw-cands 2'], 'straight on from a line without variants');
    assert.match(obs[1], /no one-token variants of this line$/);
    assert.equal(acts[3], candidateAttempt(2, 1), "suspect 2's only variant, tried");
    assert.deepEqual(acts.slice(-3), ['tw-cands 3', candidateFix(c), 'submit']);
    assert.ok(acts.length - 1 <= CANDS_MAX_TURNS, 'the fix within the budget');
    const st = replay(c, acts, obs);
    assert.equal(st.line, c.originalLine);
    // Four suspects with variants above the bug cannot each be tried and the fix written within the budget.
    const deep = {
      ...c,
      suspects: [...Array.from({ length: 4 }, (_, i) => `src/books/_core/ledger.py:${20 + i}: x${i} = f(a)`), c.suspects[2]],
    };
    assert.equal(candidateEpisode(deep), undefined);
  });

  it('the walk form: tw-apply down the ranking with no tw-cands, on to the next suspect after "variant N of N"; its observations are the simulation\'s', () => {
    // The ledger's bug is suspect 2, its fix variant 1; suspect 1 has three variants. The listed
    // form (a tw-cands per suspect) does not fit in the turns; the walk does, in five commands.
    assert.equal(candidateEpisode(fc), undefined);
    const ep = walkEpisode(fc)!;
    assert.equal(ep.kind, 'episode-walk-lower');
    const { acts, obs } = turnsOf(ep);
    assert.deepEqual(acts, [
      'tw-suspects -n',
      candidateAttempt(1, 1),
      candidateAttempt(1, 2),
      candidateAttempt(1, 3),
      candidateFix(fc),
      'submit',
    ]);
    assert.match(
      obs[1],
      /^exit 0\nedited src\/books\/_core\/ledger\.py:10 \(variant 1 of 3\)\n- if amount <= 0:\n\+ if amount < 0:\nFAIL /,
    );
    assert.match(obs[3], /ledger\.py:10 \(variant 3 of 3\)\n/, 'the last of the line: the next try is the next suspect');
    assert.match(obs[4], /ledger\.py:12 \(variant 1 of 2\)\n[^]*\n0 failed, 10 passed$/);
    const st = replay(fc, acts, obs);
    assert.equal(st.line, fc.originalLine);
    assert.equal(st.stray, false);
    // A suspect above the bug with no variants costs one try, which tw-apply refuses; then the next suspect.
    const noVariants = { ...fc, suspects: ['src/books/_core/ledger.py:14: self.rows.append((amount, note))', fc.suspects[1]] };
    const past = walkEpisode(noVariants)!;
    const { acts: pastActs, obs: pastObs } = turnsOf(past);
    assert.deepEqual(pastActs, ['tw-suspects -n', candidateAttempt(1, 1), candidateFix(fc), 'submit']);
    assert.equal(pastObs[1], 'exit 0\ntw-apply: src/books/_core/ledger.py:14 has no one-token variants: self.rows.append((amount, note))');
    replay(noVariants, pastActs, pastObs);
    // Six tries above the bug and the fix do not fit in CANDS_MAX_TURNS commands.
    const deep = {
      ...fc,
      suspects: ['src/books/_core/ledger.py:20: x = a * b * c', 'src/books/_core/ledger.py:21: y = a * b', fc.suspects[1]],
    };
    assert.equal(lineCandidates('x = a * b * c').length + lineCandidates('y = a * b').length, 9);
    assert.equal(walkEpisode(deep), undefined);
  });

  it("withBugRanked moves the bug to suspect K, keeps the other lines in their order, and drops the first suspect's undo candidates", () => {
    const top: FixCase = { ...fc, suspects: [fc.suspects[1], fc.suspects[0], fc.suspects[2]] };
    const c = withBugRanked(top, 3)!;
    assert.deepEqual(c.suspects, [fc.suspects[0], fc.suspects[2], fc.suspects[1]]);
    assert.equal(c.topCandidates, undefined);
    assert.deepEqual(withBugRanked(top, 2)!.suspects, fc.suspects);
    assert.equal(withBugRanked(top, 4), undefined, 'only three lines ranked');
    assert.equal(withBugRanked({ ...fc, suspects: [fc.suspects[0]] }, 1), undefined, 'the bug is not shown');
  });

  it('the warm start draws the walk only when asked: without walkShare its draws are the same as before; with it, walks and, in lowerShare, walks past the first suspect', async () => {
    let cases: FixCase[] = [];
    for (let seed = 3; cases.length < 8; seed++)
      cases = cases.concat((await syntheticCases(seededRandom(seed), 4)).filter((c) => walkEpisode(c)));
    const kinds = (extra: { walkShare?: number; lowerShare?: number }) => {
      const r = seededRandom(11);
      return Array.from(
        { length: 400 },
        (_, i) =>
          drawDemonstration(r, cases[i % cases.length], { curriculum: 0.2, loopShare: 0.6, numberedShare: 1, candsShare: 0.85, ...extra })
            .kind,
      );
    };
    const before = kinds({});
    assert.deepEqual(kinds({ walkShare: 0, lowerShare: 0.5 }), before, 'walkShare 0: the same random stream');
    assert.ok(!before.some((k) => k.includes('walk')));
    const walks = kinds({ walkShare: 1 });
    assert.ok(walks.filter((k) => k.startsWith('episode-walk')).length > 200, 'most episode draws are walks');
    assert.ok(!walks.some((k) => k.startsWith('episode-cands')), 'every case here has a walk');
    const lower = kinds({ walkShare: 1, lowerShare: 1 });
    const n = lower.filter((k) => k === 'episode-walk-lower').length;
    assert.ok(n > 3 * walks.filter((k) => k === 'episode-walk-lower').length && n > 60, `${n} walks past the first suspect`);
  });

  it("generated cases: each walk episode restores its case in the simulation, and each try is the next variant or, after a line's last, the next suspect's first", async () => {
    const r = seededRandom(7);
    let cases: FixCase[] = [];
    while (cases.length < 60) cases = cases.concat(await syntheticCases(r, 4));
    let walked = 0;
    let lower = 0;
    for (const base of cases) {
      for (const c of [base, withBugRanked(base, 2), withBugRanked(base, 3)]) {
        const ep = c && walkEpisode(c);
        if (!c || !ep) continue;
        walked++;
        if (ep.kind === 'episode-walk-lower') lower++;
        const { acts, obs } = turnsOf(ep);
        const st = replay(c, acts, obs, `${c.path}:${c.line} `);
        assert.equal(st.line, c.originalLine, `${c.path}:${c.line}`);
        assert.ok(acts.length - 1 <= CANDS_MAX_TURNS);
        let [k, j, last] = [1, 0, false];
        for (let i = 1; i < acts.length - 1; i++) {
          const t = /^tw-apply (\d+) (\d+) /.exec(acts[i])!;
          [k, j] = last ? [k + 1, 1] : [k, j + 1];
          assert.deepEqual([Number(t[1]), Number(t[2])], [k, j], acts.join(' | '));
          // After a line's last variant, or a refusal (a line without variants), the next suspect.
          const m = /\(variant (\d+) of (\d+)\)/.exec(obs[i]);
          last = m ? m[1] === m[2] : /has no one-token variants/.test(obs[i]);
        }
      }
    }
    assert.ok(walked >= 60 && lower >= 15, `${walked} walks, ${lower} past the first suspect`);
  });

  it('the warm start with noSed draws no sed-form example at all: no path, no sed, a case without a numbered form drawn again', async () => {
    const cases = await syntheticCases(seededRandom(3), 6);
    const r = seededRandom(5);
    let none = 0;
    for (let i = 0; i < 300; i++) {
      const d = drawDemonstration(r, cases[i % cases.length], { curriculum: 0.3, loopShare: 0.6, candsShare: 0.8, noSed: true });
      if (!d) {
        none++;
        continue;
      }
      for (const a of d.segments.filter((x) => x.role === 'agent')) assert.ok(!/\bsed\b|\.py\b/.test(a.text), `${d.kind}: ${a.text}`);
    }
    assert.ok(none < 150, `${none} of 300 draws without a numbered form`);
    // The same draws without noSed write sed commands.
    const r2 = seededRandom(5);
    assert.ok(
      Array.from({ length: 100 }, (_, i) => drawDemonstration(r2, cases[i % cases.length], { curriculum: 0.3, loopShare: 0.6 })).some((d) =>
        d.segments.some((x) => x.role === 'agent' && x.text.startsWith('sed ')),
      ),
    );
  });

  it('simulation: tw-apply of another variant fails and is put back; of another suspect is a stray edit; a variant or suspect not listed is refused', () => {
    let st = { line: fc.mutatedLine, stray: false };
    assert.equal(simulateNumbered(st, fc, 'tw-cands 2'), `exit 0\n${twCandsOutput(fc.path, 12, fc.mutatedLine)}`);
    assert.match(
      simulateNumbered(st, fc, candidateAttempt(2, 2))!,
      /^exit 0\nedited src\/books\/_core\/ledger\.py:12 \(variant 2 of 2\)\n- if len\(self\.rows\) > self\.limit:\n\+ if not \(len/,
    );
    assert.equal(st.line, fc.mutatedLine, 'put back by git checkout');
    // The refusals read as the sandbox tool prints them (test/docker/aci-tools.test.ts).
    assert.equal(simulateNumbered(st, fc, 'tw-apply 2 9'), 'exit 1\ntw-apply: no variant 9: tw-cands 2 lists 2 (1-2)');
    assert.equal(
      simulateNumbered(st, fc, 'tw-apply 3 1'),
      'exit 1\ntw-apply: src/books/_core/ledger.py:14 has no one-token variants: self.rows.append((amount, note))',
    );
    assert.equal(simulateNumbered(st, fc, 'tw-apply 7 1'), 'exit 1');
    assert.equal(simulateNumbered(st, fc, 'tw-apply 2'), 'exit 2');
    assert.equal(simulateNumbered(st, fc, 'tw-cands'), 'exit 2');
    assert.equal(st.line, fc.mutatedLine);
    st = { line: fc.mutatedLine, stray: false };
    assert.match(
      simulateNumbered(st, fc, 'tw-apply 1 1')!,
      /^exit 0\nedited src\/books\/_core\/ledger\.py:10 \(variant 1 of 3\)\n- if amount <= 0:\n\+ if amount < 0:$/,
    );
    assert.equal(st.stray, true);
    assert.match(simulateNumbered(st, fc, 'tw-apply 2 1 && tw-test')!, /1 failed, 9 passed$/, 'the fix with a stray edit left still fails');
    assert.equal(
      simulateNumbered(st, fc, 'git checkout -q . && tw-apply 2 1 && tw-test'),
      undefined,
      'a command it cannot read as one tool call is not simulated as one',
    );
  });

  it('generated cases: most one-token bugs have a candidate fix, and each such episode restores its case in the simulation', async () => {
    const r = seededRandom(7);
    let cases: FixCase[] = [];
    while (cases.length < 60) cases = cases.concat(await syntheticCases(r, 4));
    const fixable = cases.filter((c) => candidateFix(c));
    assert.ok(fixable.length >= 0.7 * cases.length, `${fixable.length} of ${cases.length} have a candidate fix`);
    let episodes = 0;
    for (const c of fixable) {
      const ep = candidateEpisode(c);
      if (!ep) continue;
      episodes++;
      const { acts, obs } = turnsOf(ep);
      const st = replay(c, acts, obs, `${c.path}:${c.line} `);
      assert.equal(st.line, c.originalLine, `${c.path}:${c.line}`);
      // Each try is the next variant of the suspect its tw-cands listed last, from 1.
      let listed = 0;
      let next = 1;
      for (const a of acts) {
        const m = /^tw-cands (\d+)$/.exec(a);
        if (m) [listed, next] = [Number(m[1]), 1];
        const t = /^tw-apply (\d+) (\d+) /.exec(a);
        if (t) assert.deepEqual([Number(t[1]), Number(t[2])], [listed, next++], `${c.path}:${c.line}: ${acts.join(' | ')}`);
      }
    }
    assert.ok(episodes >= 0.5 * fixable.length, `${episodes} of ${fixable.length} fit in the turns`);
  });

  it('the warm start draws the candidate form only when asked, in about its share of numbered draws', async () => {
    // Cases whose candidate episode fits in the turns (the others fall back to the numbered form).
    let cases: FixCase[] = [];
    for (let seed = 3; cases.length < 4; seed++)
      cases = cases.concat((await syntheticCases(seededRandom(seed), 4)).filter((c) => candidateEpisode(c)));
    const kinds = (candsShare?: number) => {
      const r = seededRandom(11);
      return Array.from(
        { length: 400 },
        (_, i) =>
          drawDemonstration(r, cases[i % cases.length], {
            curriculum: 0.3,
            loopShare: 0.6,
            numberedShare: 1,
            ...(candsShare !== undefined ? { candsShare } : {}),
          }).kind,
      );
    };
    assert.ok(!kinds().some((k) => k.includes('cands')));
    const mixed = kinds(0.5);
    const share = mixed.filter((k) => k.includes('cands')).length / mixed.length;
    assert.ok(share > 0.3 && share < 0.6, `candidate form in ${share} of draws`);
    const d = numberedCurriculumTask(seededRandom(1), fc, { cands: true })!;
    assert.equal(d.kind, 'cands-apply');
    assert.equal(d.segments[1].text, 'tw-apply 2 1 && tw-test || git checkout -q .');
    assert.ok(d.segments[0].text.includes('\n[1] ....rows) >= self.li...\n'), d.segments[0].text);
  });
});
