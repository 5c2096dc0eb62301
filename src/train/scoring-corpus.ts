// The scoring corpus: public pure-Python repositories of different layouts on which the reward
// must tell the truth. `turnwise bench tasks --corpus` fetches each (Debian 12's upstream source
// tarballs, pinned like the transfer panel's), synthesizes tasks and runs the scoring check
// (tasks/scoring-check.ts) on every mutant its tests catch: the no-op must score unresolved and
// the reference fix resolved at pass rate 1, neither flagged. The figure is the share of mutants
// whose two episodes score right, per repository; anything under 100% is a scorer bug or a
// repository problem to name.
import * as fs from 'node:fs';
import { formatError, TurnwiseError } from '../core/errors';
import { SandboxPool } from '../sandbox';
import { synthesizeMutationTasks } from '../tasks/synth';
import { ScoringCheckError, type ScoringProblemKind } from '../tasks/scoring-check';
import { TRANSFER_PANEL, type TransferRepo } from './transfer-panel';
import { fetchRepo, transferCacheDir } from './transfer';

/**
 * The repositories beyond the transfer panel: each of another layout or configuration (what
 * `shape` says), whose suite runs in the Python sandbox image (python3 and pytest 7.2.1 from
 * Debian 12) with nothing else installed.
 */
export const SCORING_CORPUS_EXTRA: readonly TransferRepo[] = [
  {
    name: 'sqlparse',
    debianSource: 'sqlparse',
    version: '0.4.2',
    file: 'pool/main/s/sqlparse/sqlparse_0.4.2.orig.tar.gz',
    sha256: '0c00730c74263a94e5a9919ade150dfc3b19c574389985446148402998287dae',
    dir: 'sqlparse-0.4.2',
    shape: 'a package with tests/ and conftest fixtures, setup.cfg\'s [tool:pytest] and a tox.ini; parametrized ids that hold `::` (`test_group_identifier_list[sum(a)::integer, b]`)',
  },
  {
    name: 'six',
    debianSource: 'six',
    version: '1.16.0',
    file: 'pool/main/s/six/six_1.16.0.orig.tar.gz',
    sha256: '1e61c37477a1626458e36f7b1d82aa5c9b094fa4802892072e49de9c60c4c926',
    dir: 'six-1.16.0',
    shape: 'one module and one test file at the root, setup.cfg\'s [tool:pytest]; tests that skip by Python version',
  },
  {
    name: 'iniconfig',
    debianSource: 'python-iniconfig',
    version: '1.1.1',
    file: 'pool/main/p/python-iniconfig/python-iniconfig_1.1.1.orig.tar.gz',
    sha256: 'a4489e91242e035cb58700d9a3c4bf49e0b106a85fefefe48025e333ea5ee49c',
    dir: 'iniconfig-1.1.1',
    shape: 'a src/ layout with its tests in testing/, tox.ini\'s [pytest] (testpaths) and a conftest',
  },
  {
    name: 'traitlets',
    debianSource: 'traitlets',
    version: '5.5.0',
    file: 'pool/main/t/traitlets/traitlets_5.5.0.orig.tar.gz',
    sha256: '3cecc9eec54c830d02f1f8e0ff2a594ca441c3ea4ba7482d1e0dda778ee9dc55',
    dir: 'traitlets-5.5.0',
    shape: 'a package with its tests inside (traitlets/tests, traitlets/config/tests), pyproject.toml\'s [tool.pytest.ini_options]',
  },
  {
    name: 'more-itertools',
    debianSource: 'more-itertools',
    version: '8.10.0',
    file: 'pool/main/m/more-itertools/more-itertools_8.10.0.orig.tar.gz',
    sha256: '1debcabeb1df793814859d64a81ad7cb10504c24349368ccf214c664c474f41f',
    dir: 'more-itertools-8.10.0',
    shape: 'a package with unittest suites in tests/ and a tox.ini without a pytest section',
  },
  {
    name: 'simplejson',
    debianSource: 'simplejson',
    version: '3.18.3',
    file: 'pool/main/s/simplejson/simplejson_3.18.3.orig.tar.gz',
    sha256: 'ebb53837c5ffcb6100646018565d3f1afed6f4b185b14b2c9cbccf874fe40157',
    dir: 'simplejson-3.18.3',
    shape: 'a package with unittest tests inside (simplejson/tests) and an optional C extension left unbuilt',
  },
  {
    name: 'pyflakes',
    debianSource: 'pyflakes',
    version: '2.5.0',
    file: 'pool/main/p/pyflakes/pyflakes_2.5.0.orig.tar.gz',
    sha256: '491feb020dca48ccc562a8c0cbe8df07ee13078df59813b83959cbdada312ea3',
    dir: 'pyflakes-2.5.0',
    shape: 'a package with unittest classes in pyflakes/test that share a harness base class in another file',
  },
  {
    name: 'colorlog',
    debianSource: 'python-colorlog',
    version: '6.7.0',
    file: 'pool/main/p/python-colorlog/python-colorlog_6.7.0.orig.tar.gz',
    sha256: '73852877342c61187a2ff39b87069fdecee2c8283d5e85483c43ab5aea54e392',
    dir: 'colorlog-6.7.0',
    shape: 'a package with tests inside and conftest fixtures; setup.cfg\'s [tool:pytest] addopts `-p no:logging`',
  },
  {
    name: 'parso',
    debianSource: 'parso',
    version: '0.8.3',
    file: 'pool/main/p/parso/parso_0.8.3.orig.tar.gz',
    sha256: '8c07be290bb59f03588915921e29e8a50002acaf2cdc5fa0e0114f91709fafa0',
    dir: 'parso-0.8.3',
    shape: 'a parser package with pytest.ini, a conftest that parametrizes over data files, and tests that already fail under Python 3.11 (left out of every task)',
  },
  {
    name: 'tabulate',
    debianSource: 'python-tabulate',
    version: '0.8.9',
    file: 'pool/main/p/python-tabulate/python-tabulate_0.8.9.orig.tar.gz',
    sha256: 'eb1d13f25760052e8931f2ef80aaf6045a6cceb47514db8beab24cded16f13a7',
    dir: 'tabulate-0.8.9',
    shape: 'one module with its tests in a test/ folder (not tests/) and a benchmark script at the root',
  },
];

/** The transfer panel, then the repositories only the scoring corpus has. */
export function scoringCorpus(): TransferRepo[] {
  return [...TRANSFER_PANEL, ...SCORING_CORPUS_EXTRA];
}

export interface ScoringRepoResult {
  name: string;
  source: string;
  shape: string;
  /** Tests in the baseline run, passing in both runs, and passing in only one. */
  tests?: number;
  passing?: number;
  unstable?: number;
  /** Mutants its tests catch whose no-op and reference fix were scored. */
  checked: number;
  /** Of those, the ones whose two episodes scored right. */
  passed: number;
  /** passed / checked; null when nothing was checked. */
  share: number | null;
  failed: Partial<Record<ScoringProblemKind, number>>;
  first_detail: Partial<Record<ScoringProblemKind, string>>;
  repository_problem?: string;
  /** Set when the repository could not be checked at all (its suite, the fetch): the reason. */
  error?: string;
  wall_s: number;
}

export interface ScoringCorpusResult {
  bench: 'tasks-corpus';
  tasks_per_repo: number;
  repos: ScoringRepoResult[];
  checked: number;
  passed: number;
  /** Over every repository's checked mutants. */
  share: number | null;
  /** Repositories where every checked mutant scored right (and at least one was checked). */
  repos_all_right: number;
  cache_dir: string;
  wall_s: number;
}

export interface ScoringCorpusOptions {
  /** Names from the corpus (all when empty). */
  repos?: readonly string[];
  /** Tasks kept per repository (the check runs on every mutant its tests catch until then). Default 4. */
  tasksPerRepo?: number;
  /** Sandboxes validating in parallel per repository. Default 2. */
  concurrency?: number;
  seed?: number;
  cacheDir?: string;
  mirror?: string;
  onProgress?: (line: string) => void;
}

/** The corpus's repositories named by `names` (all when empty), in its order; unknown names refused. */
export function pickCorpusRepos(names: readonly string[] = []): TransferRepo[] {
  const all = scoringCorpus();
  const unknown = names.filter((n) => !all.some((r) => r.name === n));
  if (unknown.length) throw new TurnwiseError('invalid-input', `no repository ${unknown.map((n) => JSON.stringify(n)).join(', ')} in the scoring corpus`, { hint: `--repos takes names from: ${all.map((r) => r.name).join(', ')}` });
  return names.length ? all.filter((r) => names.includes(r.name)) : all;
}

const round = (x: number, d = 4) => Math.round(x * 10 ** d) / 10 ** d;

export async function benchScoringCorpus(o: ScoringCorpusOptions = {}): Promise<ScoringCorpusResult> {
  const t0 = Date.now();
  const repos = pickCorpusRepos(o.repos);
  const cacheDir = o.cacheDir ?? transferCacheDir();
  const tasksPerRepo = o.tasksPerRepo ?? 4;
  fs.mkdirSync(cacheDir, { recursive: true });
  const pool = await SandboxPool.connect({ run: `bench-scoring-${process.pid}` });
  const results: ScoringRepoResult[] = [];
  try {
    for (const repo of repos) {
      const r0 = Date.now();
      const head = { name: repo.name, source: `${repo.debianSource} ${repo.version} (Debian 12)`, shape: repo.shape };
      try {
        const tree = await fetchRepo(repo, { cacheDir, mirror: o.mirror, log: o.onProgress });
        o.onProgress?.(`${repo.name}: synthesizing up to ${tasksPerRepo} tasks, each mutant its tests catch scored as a no-op and as its reference fix`);
        const r = await synthesizeMutationTasks({ workspace: tree, pool, max: tasksPerRepo, seed: o.seed ?? 0, concurrency: o.concurrency ?? 2 });
        const s = r.summary.scoring;
        results.push({
          ...head,
          tests: r.summary.baseline.tests,
          passing: r.summary.baseline.passing,
          unstable: r.summary.baseline.unstable,
          checked: s.checked,
          passed: s.passed,
          share: s.checked ? round(s.passed / s.checked) : null,
          failed: s.failed,
          first_detail: s.firstDetail,
          ...(s.repositoryProblem ? { repository_problem: s.repositoryProblem } : {}),
          wall_s: round((Date.now() - r0) / 1000, 1),
        });
      } catch (e) {
        // A repository refused at synthesis (no task passes the check, a suite that cannot run):
        // its reason is the result, with the check's counts when it got that far.
        const sc = e instanceof ScoringCheckError ? e.summary : undefined;
        const failed = sc?.failed ?? {};
        const checked = sc?.checked ?? 0;
        results.push({ ...head, checked, passed: sc?.passed ?? 0, share: checked ? round((sc?.passed ?? 0) / checked) : null, failed, first_detail: sc?.firstDetail ?? {}, ...(sc?.repositoryProblem ? { repository_problem: sc.repositoryProblem } : {}), error: formatError(e).split('\n')[0], wall_s: round((Date.now() - r0) / 1000, 1) });
      }
      const last = results[results.length - 1];
      o.onProgress?.(`${repo.name}: ${last.error ? `refused: ${last.error}` : `${last.passed} of ${last.checked} mutants scored right`} (${last.wall_s} s)`);
    }
  } finally {
    await pool.close();
  }
  const checked = results.reduce((a, r) => a + r.checked, 0);
  const passed = results.reduce((a, r) => a + r.passed, 0);
  return {
    bench: 'tasks-corpus',
    tasks_per_repo: tasksPerRepo,
    repos: results,
    checked,
    passed,
    share: checked ? round(passed / checked) : null,
    repos_all_right: results.filter((r) => r.checked > 0 && r.passed === r.checked).length,
    cache_dir: cacheDir,
    wall_s: round((Date.now() - t0) / 1000, 1),
  };
}
