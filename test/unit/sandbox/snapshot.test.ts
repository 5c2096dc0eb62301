import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { TurnwiseError } from '../../../src/core/errors';
import { checkSnapshotSize, contextPath, listWorkspaceFiles, snapshotDockerfile, snapshotHash } from '../../../src/sandbox/snapshot';

function write(root: string, rel: string, data: string | Buffer) {
  fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
  fs.writeFileSync(path.join(root, rel), data);
}

describe('sandbox/snapshot file selection', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-snap-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('in a git repo: tracked + untracked-not-ignored, no .git, no ignored, no node_modules unless asked', () => {
    execFileSync('git', ['init', '-q', dir]);
    write(dir, '.gitignore', 'build/\n*.log\nnode_modules/\n');
    write(dir, 'src/a.py', 'a');
    write(dir, 'src/b.py', 'b');
    write(dir, 'notes.log', 'ignored');
    write(dir, 'build/out.bin', 'ignored');
    write(dir, 'new_untracked.py', 'u');
    write(dir, 'node_modules/jest/index.js', 'j');
    write(dir, 'forced.log', 'tracked though ignored');
    execFileSync('git', ['-C', dir, 'add', 'src/a.py', '.gitignore']);
    execFileSync('git', ['-C', dir, 'add', '-f', 'forced.log']);
    fs.symlinkSync('src/a.py', path.join(dir, 'link.py'));
    const rels = listWorkspaceFiles(dir).map((f) => f.rel);
    assert.deepEqual(rels, ['.gitignore', 'forced.log', 'link.py', 'new_untracked.py', 'src/a.py', 'src/b.py']);
    assert.equal(listWorkspaceFiles(dir).find((f) => f.rel === 'link.py')!.link, 'src/a.py');
    const withNm = listWorkspaceFiles(dir, { includeNodeModules: true }).map((f) => f.rel);
    assert.ok(withNm.includes('node_modules/jest/index.js'));
  });

  it("runs no program a workspace's git config names (core.fsmonitor) while listing its files", () => {
    execFileSync('git', ['init', '-q', dir]);
    write(dir, 'src/a.py', 'a');
    const mark = path.join(dir, '..', `${path.basename(dir)}-pwned`);
    execFileSync('git', ['-C', dir, 'config', 'core.fsmonitor', `touch ${mark}; false`]);
    try {
      assert.deepEqual(
        listWorkspaceFiles(dir).map((f) => f.rel),
        ['src/a.py'],
      );
      assert.equal(fs.existsSync(mark), false, "git ran the workspace's fsmonitor command on the host");
    } finally {
      fs.rmSync(mark, { force: true });
    }
  });

  it('node_modules go to the root-owned dependencies folder, linked from the workspace', () => {
    assert.deepEqual(contextPath('src/a.js'), { name: 'ws/src/a.js' });
    assert.deepEqual(contextPath('node_modules/mocha/bin/mocha.js'), {
      name: 'deps/node_modules/mocha/bin/mocha.js',
      depsRoot: 'node_modules',
    });
    assert.deepEqual(contextPath('packages/a/node_modules/x/node_modules/y/i.js'), {
      name: 'deps/packages/a/node_modules/x/node_modules/y/i.js',
      depsRoot: 'packages/a/node_modules',
    });
    assert.deepEqual(contextPath('node_modules'), { name: 'ws/node_modules' }, 'a file named node_modules is a file');
    const df = snapshotDockerfile('base:1');
    // Copied without --chown (root-owned) and before the workspace, which is the agent's.
    assert.match(df, /^COPY deps\/ \/opt\/turnwise\/deps\/$/m);
    assert.ok(df.indexOf('COPY deps/') < df.indexOf('COPY --chown=1000:1000 ws/'));
  });

  it("a subfolder of a git repo follows the repo's ignore rules, with paths relative to the subfolder", () => {
    execFileSync('git', ['init', '-q', dir]);
    write(dir, '.gitignore', '.venv/\n*.log\n');
    write(dir, 'pkg/.gitignore', 'out/\n');
    write(dir, 'pkg/src/a.py', 'a');
    write(dir, 'pkg/.venv/lib/site.py', 'ignored by the parent');
    write(dir, 'pkg/run.log', 'ignored by the parent');
    write(dir, 'pkg/out/x.bin', 'ignored by the subfolder');
    write(dir, 'other/b.py', 'outside the workspace');
    const rels = listWorkspaceFiles(path.join(dir, 'pkg')).map((f) => f.rel);
    assert.deepEqual(rels, ['.gitignore', 'src/a.py']);
  });

  it('a file that cannot be read while hashing is a clear error, not a raw ENOENT/EACCES', () => {
    write(dir, 'a.py', 'a');
    write(dir, 'b.py', 'b');
    const files = listWorkspaceFiles(dir);
    fs.rmSync(path.join(dir, 'b.py')); // changed between listing and hashing (EACCES needs non-root)
    assert.throws(
      () => snapshotHash(dir, files, 'sha256:base'),
      (e: unknown) => e instanceof TurnwiseError && /cannot read .*b\.py to snapshot the workspace \(ENOENT\)/.test(e.message) && !!e.hint,
    );
  });

  it('outside git: every file except .git and node_modules; executable bits kept', () => {
    write(dir, 'x/run.sh', '#!/bin/sh\n');
    fs.chmodSync(path.join(dir, 'x/run.sh'), 0o755);
    write(dir, '.git/config', 'not a repo, still skipped');
    write(dir, 'node_modules/m/i.js', '');
    const files = listWorkspaceFiles(dir);
    assert.deepEqual(
      files.map((f) => [f.rel, f.mode]),
      [['x/run.sh', 0o755]],
    );
  });

  it('content hash changes with content, mode and base image, and not otherwise', () => {
    write(dir, 'a.txt', 'one');
    const h1 = snapshotHash(dir, listWorkspaceFiles(dir), 'sha256:base');
    assert.equal(snapshotHash(dir, listWorkspaceFiles(dir), 'sha256:base'), h1);
    assert.notEqual(snapshotHash(dir, listWorkspaceFiles(dir), 'sha256:other'), h1);
    write(dir, 'a.txt', 'two');
    const h2 = snapshotHash(dir, listWorkspaceFiles(dir), 'sha256:base');
    assert.notEqual(h2, h1);
    fs.chmodSync(path.join(dir, 'a.txt'), 0o755);
    assert.notEqual(snapshotHash(dir, listWorkspaceFiles(dir), 'sha256:base'), h2);
  });

  it('the size cap error names the largest files and folders', () => {
    write(dir, 'data/big.bin', Buffer.alloc(3000));
    write(dir, 'data/mid.bin', Buffer.alloc(1500));
    write(dir, 'small.txt', 'x');
    const files = listWorkspaceFiles(dir);
    checkSnapshotSize(files, 10_000, dir); // under the cap: fine
    assert.throws(
      () => checkSnapshotSize(files, 2000, dir),
      (e: unknown) =>
        e instanceof TurnwiseError &&
        /data\/big\.bin/.test(e.message) &&
        /data\//.test(e.message) &&
        /over the/.test(e.message) &&
        !!e.hint,
    );
  });

  it('never takes files through a symlinked folder (a tracked path whose folder became a link, a linked node_modules)', () => {
    const outside = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-outside-'));
    try {
      write(outside, 'secret', 'host secret');
      write(outside, 'pkg/index.js', 'host module');
      execFileSync('git', ['init', '-q', dir]);
      write(dir, 'conf/secret', 'tracked');
      write(dir, 'keep.py', 'k');
      execFileSync('git', ['-C', dir, 'add', '.']);
      fs.rmSync(path.join(dir, 'conf'), { recursive: true });
      fs.symlinkSync(outside, path.join(dir, 'conf'));
      fs.symlinkSync(outside, path.join(dir, 'node_modules'));
      const files = listWorkspaceFiles(dir, { includeNodeModules: true });
      const rels = files.map((f) => f.rel);
      assert.ok(!rels.includes('conf/secret'), `took conf/secret through the link: ${rels}`);
      assert.ok(!rels.some((r) => r.startsWith('node_modules/')), `took files through linked node_modules: ${rels}`);
      assert.ok(rels.includes('keep.py'));
      // The link itself is kept (as a link), so the tree still matches the workspace.
      assert.equal(files.find((f) => f.rel === 'conf')?.link, outside);
    } finally {
      fs.rmSync(outside, { recursive: true, force: true });
    }
  });
});
