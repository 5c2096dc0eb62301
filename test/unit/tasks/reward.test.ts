import * as assert from 'node:assert/strict';
import { repeatFlags, repeatedTurns } from '../../../src/core/repeats';
import { computeReward } from '../../../src/tasks/reward';
import { buildInstruction, dropRuntimeFrames, redactLocations } from '../../../src/tasks/instruction';
import type { TestOutcome } from '../../../src/tasks/report';

const outcomes = (o: Record<string, TestOutcome>) => new Map(Object.entries(o));

describe('tasks/reward: computeReward', () => {
  it('R = test score − 0.1·turns/max·[resolved] − 0.5·[format error] with the defaults; the test score weighs each kind of test half', () => {
    const r = computeReward({
      outcomes: outcomes({ a: 'passed', b: 'failed', c: 'passed', d: 'passed', e: 'passed', z: 'failed' }),
      failToPass: ['a', 'b'],
      passToPass: ['c', 'd', 'e'],
      turns: 5,
      maxTurns: 20,
      formatError: true,
    });
    assert.equal(r.passRate, 0.8);
    assert.ok(Math.abs(r.testScore! - (0.5 * 0.5 + 0.5 * 1)) < 1e-12);
    assert.equal(r.resolved, false);
    assert.equal(r.efficiencyPenalty, 0, 'an unresolved episode loses nothing for its length');
    assert.equal(r.formatPenalty, 0.5);
    assert.ok(Math.abs(r.reward - (0.75 - 0.5)) < 1e-12);
    const fixed = computeReward({
      outcomes: outcomes({ a: 'passed', b: 'passed', c: 'passed', d: 'passed', e: 'passed' }),
      failToPass: ['a', 'b'],
      passToPass: ['c', 'd', 'e'],
      turns: 5,
      maxTurns: 20,
      formatError: false,
    });
    assert.equal(fixed.resolved, true);
    assert.ok(Math.abs(fixed.efficiencyPenalty - 0.025) < 1e-12);
    assert.ok(Math.abs(fixed.reward - 0.975) < 1e-12);
  });

  it('one failing test among many passing ones: fixing it pays more than any number of turns costs, and ending at once never beats a fix', () => {
    const p2p = Array.from({ length: 57 }, (_, i) => `p${i}`);
    const all = (f2p: 'passed' | 'failed') => outcomes({ f: f2p, ...Object.fromEntries(p2p.map((id) => [id, 'passed' as const])) });
    const quit = computeReward({ outcomes: all('failed'), failToPass: ['f'], passToPass: p2p, turns: 0, maxTurns: 6, formatError: false });
    const tried = computeReward({ outcomes: all('failed'), failToPass: ['f'], passToPass: p2p, turns: 6, maxTurns: 6, formatError: false });
    const slowFix = computeReward({
      outcomes: all('passed'),
      failToPass: ['f'],
      passToPass: p2p,
      turns: 6,
      maxTurns: 6,
      formatError: false,
    });
    assert.ok(quit.passRate > 0.98, 'the suite mostly passes with the bug in it');
    assert.equal(quit.reward, 0.5);
    assert.equal(tried.reward, quit.reward, 'trying and failing costs nothing over quitting');
    assert.ok(slowFix.reward >= quit.reward + 0.4, `${slowFix.reward} vs ${quit.reward}`);
    // Breaking a passing test while trying costs its share of the pass-to-pass half.
    const broke = computeReward({
      outcomes: outcomes({
        f: 'failed',
        ...Object.fromEntries(p2p.map((id, i) => [id, i === 0 ? ('failed' as const) : ('passed' as const)])),
      }),
      failToPass: ['f'],
      passToPass: p2p,
      turns: 3,
      maxTurns: 6,
      formatError: false,
    });
    assert.ok(Math.abs(broke.reward - 0.5 * (56 / 57)) < 1e-12);
  });

  it('all passing is resolved; weights are configurable; tests missing from the report count as failing; one kind alone is the whole score', () => {
    const all = computeReward({
      outcomes: outcomes({ a: 'passed', c: 'passed' }),
      failToPass: ['a'],
      passToPass: ['c'],
      turns: 10,
      maxTurns: 10,
      formatError: false,
      weights: { efficiency: 0.2 },
    });
    assert.equal(all.resolved, true);
    assert.ok(Math.abs(all.reward - 0.8) < 1e-12);
    const missing = computeReward({
      outcomes: outcomes({ a: 'passed' }),
      failToPass: ['a'],
      passToPass: ['c'],
      turns: 0,
      maxTurns: 10,
      formatError: false,
    });
    assert.equal(missing.passRate, 0.5);
    assert.equal(missing.testScore, 0.5);
    assert.equal(missing.resolved, false);
    const skipped = computeReward({
      outcomes: outcomes({ a: 'skipped' }),
      failToPass: ['a'],
      passToPass: [],
      turns: 0,
      maxTurns: 10,
      formatError: false,
    });
    assert.equal(skipped.passRate, 0, 'a skipped test is not a pass');
    const onlyF2p = computeReward({
      outcomes: outcomes({ a: 'passed', b: 'failed', c: 'failed' }),
      failToPass: ['a', 'b', 'c'],
      passToPass: [],
      turns: 1,
      maxTurns: 10,
      formatError: false,
    });
    assert.ok(Math.abs(onlyF2p.testScore! - 1 / 3) < 1e-12);
    // A test listed as both kinds counts once, as fail-to-pass.
    const both = computeReward({
      outcomes: outcomes({ a: 'failed', c: 'passed' }),
      failToPass: ['a'],
      passToPass: ['a', 'c'],
      turns: 1,
      maxTurns: 10,
      formatError: false,
    });
    assert.equal(both.testScore, 0.5);
  });

  it('a turn that ran a command again for the output it already gave costs λ_rep (0.05), resolved or not, and never makes a fix worth less than quitting', () => {
    const t = (action: string, observation: string, more: { edits?: unknown[]; formatError?: string } = {}) => ({
      action,
      observation,
      ...more,
    });
    const turns = [
      t('tw-suspects -n', '[1] a.py:3'),
      t('tw-cands 1', 'a.py:3: x < y\n[1] x <= y'),
      t('tw-cands  1 ', 'a.py:3: x < y\n[1] x <= y'), // the same command, spaced differently
      t('tw-cands 1', 'a.py:3: x < y\n[1] x <= y'),
      t('tw-apply 1 1 && tw-test || git checkout -q .', '1 failed'),
      t('tw-apply 1 1 && tw-test || git checkout -q .', '1 failed'), // the same wrong variant again
      t('tw-test', '1 failed'), // a new command: not a repeat
      t("sed -i 's/</<=/' a.py", '', { edits: [{}] }),
      t("sed -i 's/</<=/' a.py", '', { edits: [{}] }), // changed a file: not a repeat
      t('tw-cands 1', 'garbled', { formatError: 'no command' }),
      t('submit', ''),
      t('submit', ''),
    ];
    assert.equal(repeatedTurns(turns), 3);
    assert.deepEqual(
      repeatFlags(turns).flatMap((f, i) => (f ? [i] : [])),
      [2, 3, 5],
    );
    assert.equal(repeatedTurns([t('tw-cands 1', 'A'), t('tw-cands 1', 'B')]), 0, 'a different output is news');
    const base = { failToPass: ['f'], passToPass: ['p'], maxTurns: 6, formatError: false };
    const quit = computeReward({ ...base, outcomes: outcomes({ f: 'failed', p: 'passed' }), turns: 1 });
    const looped = computeReward({ ...base, outcomes: outcomes({ f: 'failed', p: 'passed' }), turns: 6, repeats: 4 });
    const fixAfterRepeats = computeReward({ ...base, outcomes: outcomes({ f: 'passed', p: 'passed' }), turns: 6, repeats: 4 });
    assert.equal(looped.repeats, 4);
    assert.ok(Math.abs(looped.repeatPenalty! - 0.2) < 1e-12);
    assert.ok(Math.abs(looped.reward - 0.3) < 1e-12, `${looped.reward}`);
    assert.ok(Math.abs(fixAfterRepeats.reward - (1 - 0.1 - 0.2)) < 1e-12, 'a fix pays for its repeats too');
    assert.ok(fixAfterRepeats.reward > quit.reward);
    assert.equal(
      computeReward({ ...base, outcomes: outcomes({ f: 'failed', p: 'passed' }), turns: 6, repeats: 4, weights: { repeat: 0 } }).reward,
      0.5,
    );
  });

  it('an unusable report gives NaN, never 0, and keeps the reason', () => {
    const r = computeReward({
      outcomes: undefined,
      failToPass: ['a'],
      passToPass: [],
      turns: 3,
      maxTurns: 10,
      formatError: false,
      error: 'the JUnit XML test report cannot be read',
    });
    assert.ok(Number.isNaN(r.passRate));
    assert.ok(Number.isNaN(r.reward));
    assert.equal(r.resolved, false);
    assert.match(r.error!, /cannot be read/);
  });
});

describe('tasks/instruction', () => {
  const pytestFailure = [
    'tests/test_pricing.py:31: in test_total_member_discount',
    '    assert total([(30, 2)], member=True) == 54',
    'shop/pricing.py:22: in total',
    '    subtotal = discount(subtotal, 10)',
    'E   assert 60 == 54',
  ].join('\n');
  const nodeFailure = [
    'AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:',
    '60 !== 54',
    '    at total (/workspace/src/pricing.js:21:5)',
    '    at TestContext.<anonymous> (/workspace/test/pricing.test.js:27:16)',
  ].join('\n');

  it('removes every frame that points into the mutated file, keeps the rest', () => {
    const py = redactLocations(pytestFailure, ['shop/pricing.py']);
    assert.doesNotMatch(py, /\bpricing\.py|subtotal = discount/);
    assert.match(py, /tests\/test_pricing\.py:31/);
    assert.match(py, /assert total\(\[\(30, 2\)\], member=True\) == 54/);
    assert.match(py, /E {3}assert 60 == 54/);
    assert.doesNotMatch(
      dropRuntimeFrames(
        'x\n    at Test.run (node:internal/test_runner/test:631:25)\n    at async Promise.all (index 0)\n    at async startSubtest (node:internal/test_runner/harness:214:3)',
      ),
      /node:internal/,
    );
    const js = redactLocations(nodeFailure, ['src/pricing.js']);
    assert.doesNotMatch(js, /src\/pricing\.js|at total/);
    assert.match(js, /pricing\.test\.js:27/);
    assert.match(js, /60 !== 54/);
  });

  it('names the failing tests and their output, never the hidden file', () => {
    const text = buildInstruction(
      [
        { id: 'tests/test_pricing.py::test_total_member_discount', message: pytestFailure },
        { id: 'tests/test_pricing.py::test_total_sums_lines' },
      ],
      { hideFiles: ['shop/pricing.py'] },
    );
    assert.match(text, /These 2 tests fail:/);
    assert.match(text, /- tests\/test_pricing\.py::test_total_member_discount/);
    assert.match(text, /- tests\/test_pricing\.py::test_total_sums_lines/);
    assert.match(text, /E {3}assert 60 == 54/);
    assert.doesNotMatch(text, /shop\/pricing\.py|\bpricing\.py/);
  });
});
