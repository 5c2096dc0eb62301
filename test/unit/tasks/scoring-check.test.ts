// The scoring check's verdicts on scored episodes (the sandbox side is in the Docker tier:
// test/docker/scoring-check.test.ts), the repository-level summary, and the canary's choice of task.
import * as assert from 'node:assert/strict';
import type { Task } from '../../../src/core/schema';
import {
  noopProblem,
  referenceProblem,
  restoredTarget,
  summarizeScoringChecks,
  type CheckedEpisode,
  type ScoringCheck,
  type ScoringProblemKind,
} from '../../../src/tasks/scoring-check';
import { canaryTask } from '../../../src/train/canary';

const task = (id: string, mutation = true): Task =>
  ({
    id,
    source: mutation ? 'mutation' : 'failing-tests',
    fail_to_pass: ['t.py::test_a'],
    pass_to_pass: ['t.py::test_b', 't.py::test_c'],
    ...(mutation
      ? { mutation: { file: 'pkg/mod.py', nodeKind: 'x', operator: 'swap', span: { start: 0, end: 1, text: 'a' }, replacement: 'b' } }
      : {}),
  }) as unknown as Task;

const ep = (over: Partial<CheckedEpisode>): CheckedEpisode => ({
  resolved: false,
  passRate: 2 / 3,
  reward: 0.5,
  notPassing: ['t.py::test_a'],
  passing: ['t.py::test_b', 't.py::test_c'],
  ...over,
});

describe('tasks/scoring-check: verdicts', () => {
  it('a no-op that fails its fail-to-pass tests and changes nothing is right; every other score is named', () => {
    const t = task('m1');
    assert.equal(noopProblem(t, ep({})), undefined);
    assert.equal(
      noopProblem(t, ep({ resolved: true, passRate: 1, notPassing: [], passing: ['t.py::test_a', 't.py::test_b', 't.py::test_c'] }))?.kind,
      'noop-resolved',
    );
    assert.equal(
      noopProblem(t, ep({ passRate: 1, notPassing: ['t.py::test_b'], passing: ['t.py::test_a', 't.py::test_c'] }))?.kind,
      'noop-passes',
    );
    assert.equal(
      noopProblem(t, ep({ tampered: 'the test report names 1 test(s) …' }))?.kind,
      'tampered',
      'a tamper flag comes first: the no-op tampered with nothing',
    );
    assert.equal(noopProblem(t, ep({ testsChanged: ['pkg/mod.py'] }))?.kind, 'tests-edited');
    assert.equal(noopProblem(t, ep({ passRate: null, error: 'no test report' }))?.kind, 'unscorable');
  });

  it('a reference fix must score resolved at pass rate 1, with nothing flagged', () => {
    const fixed = ep({ resolved: true, passRate: 1, notPassing: [], passing: ['t.py::test_a', 't.py::test_b', 't.py::test_c'] });
    assert.equal(referenceProblem(fixed), undefined);
    const p = referenceProblem(ep({ passRate: 2 / 3, notPassing: ['t.py::test_c'] }));
    assert.equal(p?.kind, 'reference-unresolved');
    assert.match(p!.detail, /t\.py::test_c/);
    assert.equal(referenceProblem({ ...fixed, tampered: 'x' })?.kind, 'tampered');
    assert.equal(referenceProblem({ ...fixed, testsChanged: ['tests/conftest.py'] })?.kind, 'tests-edited');
  });

  it('a mutation of a file scoring puts back is named before any sandbox starts', () => {
    const originals = {
      root: '/ws',
      tests: new Map([['pkg/plugin.py', Buffer.from('')]]),
      sources: new Map(),
      data: new Map(),
      links: new Map(),
    };
    assert.equal(restoredTarget(task('m1'), originals), undefined);
    const t = { ...task('m2'), mutation: { ...task('m2').mutation!, file: 'pkg/plugin.py' } };
    assert.match(restoredTarget(t, originals)!, /pkg\/plugin\.py.*put back from the snapshot.*runner configuration loads it/);
    assert.match(restoredTarget({ ...t, mutation: { ...t.mutation!, file: 'tests/helpers.py' } }, originals)!, /test infrastructure/);
  });

  it('most tasks failing the same way is a repository-level problem; scattered failures are not', () => {
    const c = (id: string, kind?: ScoringProblemKind): ScoringCheck => ({
      taskId: id,
      ok: !kind,
      ...(kind ? { problem: { kind, detail: `${kind} detail of ${id}` } } : {}),
      durationMs: 1,
    });
    const all = summarizeScoringChecks([c('a', 'tampered'), c('b', 'tampered'), c('c'), c('d', 'noop-resolved')]);
    assert.equal(all.checked, 4);
    assert.equal(all.passed, 1);
    assert.deepEqual(all.failed, { tampered: 2, 'noop-resolved': 1 });
    assert.match(
      all.repositoryProblem!,
      /^2 of 4 tasks fail the scoring check the same way \(tampered\).*the first: a: tampered detail of a$/,
    );
    assert.equal(summarizeScoringChecks([c('a', 'tampered'), c('b'), c('c'), c('d', 'noop-passes')]).repositoryProblem, undefined);
    assert.equal(summarizeScoringChecks([c('a', 'tampered')]).repositoryProblem, undefined, 'one task is no repository');
  });
});

describe('train/canary: which task', () => {
  it('goes through the mutation tasks in turn (they check both directions), else through all', () => {
    const tasks = [task('f1', false), task('m1'), task('m2'), task('f2', false)];
    assert.deepEqual(
      [0, 1, 2, 3].map((k) => canaryTask(tasks, k)?.id),
      ['m1', 'm2', 'm1', 'm2'],
    );
    assert.deepEqual(
      [0, 1, 2].map((k) => canaryTask([task('f1', false), task('f2', false)], k)?.id),
      ['f1', 'f2', 'f1'],
    );
    assert.equal(canaryTask([], 3), undefined);
  });
});
