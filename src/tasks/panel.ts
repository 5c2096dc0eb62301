// The transfer panel: small real Python repositories Turnwise never trains on, pinned as Debian
// 12's upstream source tarballs. `turnwise bench transfer` evaluates on them; the warm start's
// real-source demonstrations leave their packages out (demonstrations/real-source.ts).

/** One repository of the panel: an upstream source tarball from Debian's archive. */
export interface TransferRepo {
  /** Short name (--repos). */
  name: string;
  /** Debian source package and version it comes from. */
  debianSource: string;
  version: string;
  /** Path under the archive root (pool/main/…). */
  file: string;
  sha256: string;
  /** The folder the tarball unpacks to. */
  dir: string;
  /** Its shape, and why it is on the panel. */
  shape: string;
  /**
   * The command time limit its episodes need, when the default is too short: `tw-suspects` runs
   * the whole suite under a line tracer, several times slower than the suite alone (--config's
   * commandTimeoutMs wins).
   */
  commandTimeoutMs?: number;
}

/**
 * The panel: pure-Python projects whose tests run with python3 and pytest alone (the sandbox's
 * packages), of different shapes, each in Debian 12 (bookworm). Pinned: a new upload is a new
 * panel, not a silent change of the figures.
 */
export const TRANSFER_PANEL: readonly TransferRepo[] = [
  {
    name: 'inflection',
    debianSource: 'inflection',
    version: '0.3.1',
    file: 'pool/main/i/inflection/inflection_0.3.1.orig.tar.gz',
    sha256: '18ea7fb7a7d152853386523def08736aa8c32636b047ade55f7578c4edeb16ca',
    dir: 'inflection-0.3.1',
    shape: 'one module (inflection.py) and one test file of 450 parametrized cases at the root: regex tables and string rules',
  },
  {
    name: 'ordered-set',
    debianSource: 'python-ordered-set',
    version: '4.1.0',
    file: 'pool/main/p/python-ordered-set/python-ordered-set_4.1.0.orig.tar.xz',
    sha256: 'cd1a0cfa973683a3cdaf841fd4d77c05292f947bac7dff94aade999c7aab71fc',
    dir: 'python-ordered-set-4.1.0',
    shape: 'one small class module (ordered_set.py) and a single test file: index arithmetic and slicing',
  },
  {
    name: 'xmltodict',
    debianSource: 'python-xmltodict',
    version: '0.13.0',
    file: 'pool/main/p/python-xmltodict/python-xmltodict_0.13.0.orig.tar.gz',
    sha256: 'd74f4099d42bcca273ffd3bc9766abaa8765960eabc4399f2a6ad48cb4f58ce0',
    dir: 'xmltodict-0.13.0',
    shape: 'one module (xmltodict.py) with a tests/ folder of unittest classes: a SAX-driven parser and an emitter',
  },
  {
    name: 'jmespath',
    debianSource: 'python-jmespath',
    version: '1.0.1',
    file: 'pool/main/p/python-jmespath/python-jmespath_1.0.1.orig.tar.gz',
    sha256: '90261b206d6defd58fdd5e85f478bf633a2901798906be2ad389150c5c60edbe',
    dir: 'jmespath-1.0.1',
    shape: 'a package of several modules (lexer, parser, visitor, functions) and tests/ driven by JSON compliance files',
  },
  {
    name: 'toolz',
    debianSource: 'toolz',
    version: '0.12.0',
    file: 'pool/main/t/toolz/toolz_0.12.0.orig.tar.gz',
    sha256: '04d555d7ccb3c84301eaad310dd27ba511ae3dcf331ada5828d7cc03942f2c2e',
    dir: 'toolz-0.12.0',
    shape:
      'a package with a subpackage (toolz/curried) and its tests inside the package (toolz/tests/), a second package (tlz) and a bench/ test that fails without its data',
    // Its suite takes ~8 s; traced, tw-suspects passed the default 20 s limit on every call.
    commandTimeoutMs: 90_000,
  },
  {
    name: 'colorama',
    debianSource: 'python-colorama',
    version: '0.4.6',
    file: 'pool/main/p/python-colorama/python-colorama_0.4.6.orig.tar.gz',
    sha256: '2d0543c3970840160b32656ab83d43b7f3533208c2c5f3ee5b839940d00af0bd',
    dir: 'colorama-0.4.6',
    shape: 'a package whose tests live in it (colorama/tests/), with Windows-only branches whose tests skip on Linux',
  },
];
