// classifyMutant: what a mutant's test run means for the task (pure; runs built by hand).
import * as assert from 'node:assert/strict';
import { classifyMutant, stablePassing } from '../../../src/tasks/synth';
import { outcomesOf, type RunTestsResult } from '../../../src/tasks/reward';
import type { TestResult } from '../../../src/tasks/report';

const run = (
  tests: TestResult[],
  extra: Partial<RunTestsResult> = {},
  collection: Array<{ file?: string; message: string }> = [],
): RunTestsResult => ({
  report: { format: 'junit-xml', tests, collectionErrors: collection },
  timedOut: false,
  exitCode: 1,
  durationMs: 10,
  ...extra,
});
const t = (id: string, outcome: TestResult['outcome'], message?: string): TestResult => ({
  id,
  outcome,
  durationMs: 1,
  ...(message ? { message } : {}),
});
const base = ['a::1', 'a::2', 'b::1'];

describe('tasks/synth: classifyMutant', () => {
  it('failing and erroring baseline tests are fail-to-pass; the rest pass-to-pass', () => {
    const v = classifyMutant(base, run([t('a::1', 'failed', 'boom'), t('a::2', 'passed'), t('b::1', 'error', 'E'), t('new', 'failed')]));
    assert.ok(v.kept);
    if (v.kept) {
      assert.deepEqual(v.failToPass, [
        { id: 'a::1', message: 'boom' },
        { id: 'b::1', message: 'E' },
      ]);
      assert.deepEqual(v.passToPass, ['a::2']);
    }
  });

  it('tests missing because their file failed to load are fail-to-pass, with the load error as output', () => {
    const v = classifyMutant(base, run([t('a::1', 'passed'), t('a::2', 'passed')], {}, [{ file: 'b', message: 'ImportError: x' }]));
    assert.ok(v.kept);
    if (v.kept) {
      assert.equal(v.failToPass[0].id, 'b::1');
      assert.match(v.failToPass[0].message!, /did not run[\s\S]*ImportError: x/);
    }
  });

  it('a surviving mutant, a broken collection, a timeout and a missing report are drops with their reason', () => {
    assert.deepEqual(classifyMutant(base, run(base.map((id) => t(id, 'passed')))), { kept: false, reason: 'no-failing-test' });
    assert.equal((classifyMutant(base, run([], {}, [{ message: 'SyntaxError' }])) as { reason: string }).reason, 'collection-broken');
    assert.equal((classifyMutant(base, run([t('a::1', 'failed')], { timedOut: true })) as { reason: string }).reason, 'timeout');
    assert.equal(
      (classifyMutant(base, { timedOut: false, exitCode: 2, durationMs: 5, error: 'no test report' }) as { reason: string }).reason,
      'no-report',
    );
  });
});

describe('tasks/synth: stablePassing and the reward: an id reported twice', () => {
  const report = (tests: TestResult[]) => ({ format: 'junit-xml' as const, tests, collectionErrors: [] });

  it('an id the report holds twice (two tests of one title) is neither passing nor unstable: no task uses it', () => {
    const a = report([t('f::adds', 'passed'), t('f::works', 'passed'), t('f::works', 'passed'), t('f::flaky', 'passed')]);
    const b = report([t('f::adds', 'passed'), t('f::works', 'passed'), t('f::works', 'passed'), t('f::flaky', 'failed')]);
    assert.deepEqual(stablePassing(a, b), { passing: ['f::adds'], unstable: ['f::flaky'] });
  });

  it('the reward: an id with a copy that did not pass has not passed, whichever copy comes last', () => {
    const o = outcomesOf(
      report([t('f::works', 'failed'), t('f::works', 'passed'), t('f::ok', 'passed'), t('f::x', 'passed'), t('f::x', 'error')]),
    );
    assert.deepEqual(
      [...o],
      [
        ['f::works', 'failed'],
        ['f::ok', 'passed'],
        ['f::x', 'error'],
      ],
    );
  });
});
