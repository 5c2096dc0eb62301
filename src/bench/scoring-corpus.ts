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
import { TRANSFER_PANEL, type TransferRepo } from '../tasks/panel';
import { fetchRepo, transferCacheDir } from './transfer';

/**
 * The repositories beyond the transfer panel: each of another layout or configuration (what
 * `shape` says), whose suite runs in the Python sandbox image (python3 and pytest 7.2.1 from
 * Debian 12) with nothing else installed.
 */
export const SCORING_CORPUS_EXTRA: readonly TransferRepo[] = [
  {
    name: 'traitlets',
    debianSource: 'traitlets',
    version: '5.5.0',
    file: 'pool/main/t/traitlets/traitlets_5.5.0.orig.tar.gz',
    sha256: '3cecc9eec54c830d02f1f8e0ff2a594ca441c3ea4ba7482d1e0dda778ee9dc55',
    dir: 'traitlets-5.5.0',
    shape:
      "a package with its tests inside (traitlets/tests, traitlets/config/tests), pyproject.toml's [tool.pytest.ini_options] with --doctest-modules in addopts",
  },
  {
    name: 'h11',
    debianSource: 'python-h11',
    version: '0.14.0',
    file: 'pool/main/p/python-h11/python-h11_0.14.0.orig.tar.gz',
    sha256: 'd65a85d094b76846653fa7c3b45abdaf8b4f055c643bb6eec623f1311636a474',
    dir: 'h11-0.14.0',
    shape: 'an HTTP/1.1 state machine with its tests inside (h11/tests), parametrized ids holding byte strings with \\x escapes',
  },
  {
    name: 'mock',
    debianSource: 'python-mock',
    version: '4.0.3',
    file: 'pool/main/p/python-mock/python-mock_4.0.3.orig.tar.gz',
    sha256: 'a6b89933b91a7cce566a999f29914e97e7e6d0002dff7fe2636d9b0028fcfa6d',
    dir: 'mock-4.0.3',
    shape: "unittest suites inside the package (mock/tests), setup.cfg's [tool:pytest] (python_files, filterwarnings)",
  },
  {
    name: 'blinker',
    debianSource: 'blinker',
    version: '1.5',
    file: 'pool/main/b/blinker/blinker_1.5.orig.tar.gz',
    sha256: '96e236b53f83c48d2433710e38e39c897491581b638c3d8260eb60650adb3afe',
    dir: 'blinker-1.5',
    shape: "a small package with tests/, setup.cfg's [tool:pytest] (testpaths, warnings as errors) and a tox.ini",
  },
  {
    name: 'zope.interface',
    debianSource: 'zope.interface',
    version: '5.5.2',
    file: 'pool/main/z/zope.interface/zope.interface_5.5.2.orig.tar.gz',
    sha256: '1b3486c6fbdb737dca12a51e475079c77dd5385a15cfd3bef2b4912d79e5ac49',
    dir: 'zope.interface-5.5.2',
    shape:
      'a src/ layout with a namespace package (src/zope/interface) whose unittest suites live inside it; tests that need the unbuilt C extension fail and join no task',
  },
  {
    name: 'lark',
    debianSource: 'python-lark',
    version: '1.1.5',
    file: 'pool/main/p/python-lark/python-lark_1.1.5.orig.tar.gz',
    sha256: 'b7a10ba0e3fa335a45502e228a7df4d80bf0a320b6c9d322fe7893c70b7a2448',
    dir: 'lark-1.1.5',
    shape:
      'a parser package with pytest.ini (testpaths, addopts) and unittest classes that inherit their test methods from classes in other files',
  },
  {
    name: 'sortedcontainers',
    debianSource: 'sortedcontainers',
    version: '2.4.0',
    file: 'pool/main/s/sortedcontainers/sortedcontainers_2.4.0.orig.tar.gz',
    sha256: '70e22f4fd29b204f75f989e3c1e847aa1de267a028aab4233c0db783aaff78c1',
    dir: 'python-sortedcontainers-2.4.0',
    shape:
      "a package with tests/ and tox.ini's [pytest] addopts running doctests of the modules and documents (--doctest-modules, --doctest-glob)",
  },
  {
    name: 'boltons',
    debianSource: 'python-boltons',
    version: '21.0.0',
    file: 'pool/main/p/python-boltons/python-boltons_21.0.0.orig.tar.gz',
    sha256: '9f29e135661071968b9cea1783dd5bd2403b2a141ccd5f5637692fc544bcc4db',
    dir: 'boltons-21.0.0',
    shape:
      'many utility modules with tests/, a conftest, pytest.ini, parameter ids that hold `::`, and one test file that no longer imports under Python 3.11',
  },
  {
    name: 'uritemplate',
    debianSource: 'python-uritemplate',
    version: '4.1.1',
    file: 'pool/main/p/python-uritemplate/python-uritemplate_4.1.1.orig.tar.xz',
    sha256: 'd9d2ab1d02ba671e0c7c662f7b4086b64bdd773f1611cffc879beb23cce073f0',
    dir: 'python-uritemplate-4.1.1',
    shape: 'a package with unittest classes in tests/, some of whose test methods are made by a class factory at import time',
  },
  {
    name: 'bracex',
    debianSource: 'python-bracex',
    version: '2.2.1',
    file: 'pool/main/p/python-bracex/python-bracex_2.2.1.orig.tar.gz',
    sha256: 'b77472121aebd6550538f44291dbe1b11f3c77b451984f431bf531de0e935181',
    dir: 'bracex-2.2.1',
    shape: 'a brace-expansion package with tests/, a pyproject.toml and a tox.ini',
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
  if (unknown.length)
    throw new TurnwiseError('invalid-input', `no repository ${unknown.map((n) => JSON.stringify(n)).join(', ')} in the scoring corpus`, {
      hint: `--repos takes names from: ${all.map((r) => r.name).join(', ')}`,
    });
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
        o.onProgress?.(
          `${repo.name}: synthesizing up to ${tasksPerRepo} tasks, each mutant its tests catch scored as a no-op and as its reference fix`,
        );
        const r = await synthesizeMutationTasks({
          workspace: tree,
          pool,
          max: tasksPerRepo,
          seed: o.seed ?? 0,
          concurrency: o.concurrency ?? 2,
        });
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
        results.push({
          ...head,
          checked,
          passed: sc?.passed ?? 0,
          share: checked ? round((sc?.passed ?? 0) / checked) : null,
          failed,
          first_detail: sc?.firstDetail ?? {},
          ...(sc?.repositoryProblem ? { repository_problem: sc.repositoryProblem } : {}),
          error: formatError(e).split('\n')[0],
          wall_s: round((Date.now() - r0) / 1000, 1),
        });
      }
      const last = results[results.length - 1];
      o.onProgress?.(
        `${repo.name}: ${last.error ? `refused: ${last.error}` : `${last.passed} of ${last.checked} mutants scored right`} (${last.wall_s} s)`,
      );
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
