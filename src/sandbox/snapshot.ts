// Workspace snapshots: an image that layers the workspace's files on a language image, with a
// fresh git repository committed inside. Tagged by a content hash, so an unchanged workspace
// is never rebuilt, and every container starts from it copy-on-write (O(1) in workspace size).
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type Docker from 'dockerode';
import * as tar from 'tar-stream';
import { TurnwiseError } from '../core/errors';
import { formatMiB } from '../core/units';
import type { EngineTarget } from './engine';
import { sandboxError } from './errors';
import { buildFromContext, imageExists, type BuildProgress } from './images';
import { trackLive, untrackLive } from './lifecycle';
import { LABEL } from './owner';
import { DEPENDENCIES_DIR, WORKSPACE_DIR } from './types';

/** Bump when the snapshot layout changes, so old tags are not reused. */
const SNAPSHOT_FORMAT = 'snapshot@3';
export const DEFAULT_MAX_SNAPSHOT_BYTES = 1024 ** 3;

export interface WorkspaceFile {
  /** POSIX path relative to the workspace root. */
  rel: string;
  size: number;
  mode: number;
  /** Target of a symbolic link; undefined for regular files. */
  link?: string;
}

export interface ListOptions {
  /** Include node_modules/ even where it is ignored (Node test runners need it). */
  includeNodeModules?: boolean;
}

function walk(root: string, rel: string, out: string[], skip: (rel: string, name: string) => boolean): void {
  for (const e of fs.readdirSync(path.join(root, rel), { withFileTypes: true })) {
    const r = rel ? `${rel}/${e.name}` : e.name;
    if (skip(r, e.name)) continue;
    if (e.isDirectory()) walk(root, r, out, skip);
    else if (e.isFile() || e.isSymbolicLink()) out.push(r);
  }
}

/**
 * Options for every git run on a workspace: a repository's own config can name programs git runs
 * (`core.fsmonitor` runs one on `ls-files`), and a workspace's files are data, never code to run
 * on the host.
 */
const GIT_SAFE = ['-c', 'core.fsmonitor=false', '-c', 'core.untrackedCache=false'];

function isGitWorkTree(dir: string): boolean {
  try {
    // Inside a work tree at any depth: a workspace that is a subfolder of a repository (a
    // monorepo package) follows the repository's ignore rules too. ls-files paths are relative
    // to the folder it runs in.
    return (
      execFileSync('git', [...GIT_SAFE, '-C', dir, 'rev-parse', '--is-inside-work-tree'], { stdio: ['ignore', 'pipe', 'ignore'] })
        .toString()
        .trim() === 'true'
    );
  } catch {
    return false;
  }
}

/**
 * The files a snapshot holds: in a git work tree, tracked plus untracked-but-not-ignored files
 * (`git ls-files -co --exclude-standard`); elsewhere every file. Never `.git` internals.
 */
export function listWorkspaceFiles(dir: string, opts: ListOptions = {}): WorkspaceFile[] {
  const root = path.resolve(dir);
  if (!fs.existsSync(root) || !fs.statSync(root).isDirectory()) {
    throw new TurnwiseError('not-found', `workspace ${root} is not a directory`, { hint: 'pass the folder that holds the project' });
  }
  let rels: string[] = [];
  if (isGitWorkTree(root)) {
    const raw = execFileSync('git', [...GIT_SAFE, '-C', root, 'ls-files', '-z', '-c', '-o', '--exclude-standard'], { maxBuffer: 1 << 30 });
    rels = raw
      .toString('utf8')
      .split('\0')
      .filter((r) => r !== '');
    // Submodules are listed as one path: take their files too.
    const expanded: string[] = [];
    for (const r of rels) {
      const st = fs.lstatSync(path.join(root, r), { throwIfNoEntry: false });
      if (st?.isDirectory()) walk(root, r, expanded, (_rel, name) => name === '.git');
      else expanded.push(r);
    }
    rels = expanded;
  } else {
    walk(root, '', rels, (rel, name) => name === '.git' || name === 'node_modules' || rel === '.turnwise');
  }
  if (opts.includeNodeModules && fs.existsSync(path.join(root, 'node_modules'))) {
    const nm: string[] = [];
    walk(root, 'node_modules', nm, (_r, name) => name === '.git');
    rels.push(...nm);
  }
  const seen = new Set<string>();
  const files: WorkspaceFile[] = [];
  // A path is taken only if every folder on it is a real folder: a tracked `conf/key` whose
  // `conf` was replaced by a link to ~/.ssh, or a linked node_modules, would otherwise copy
  // files from outside the workspace into the image (lstat only skips links in the last part).
  const realDir = new Map<string, boolean>();
  const underRealDirs = (rel: string): boolean => {
    const parts = rel.split('/');
    for (let i = 1; i < parts.length; i++) {
      const d = parts.slice(0, i).join('/');
      let ok = realDir.get(d);
      if (ok === undefined) {
        ok = fs.lstatSync(path.join(root, d), { throwIfNoEntry: false })?.isDirectory() ?? false;
        realDir.set(d, ok);
      }
      if (!ok) return false;
    }
    return true;
  };
  for (const rel of rels) {
    // .turnwise/ holds Turnwise's own runs and caches: never part of what the agent sees.
    if (seen.has(rel) || rel.split('/').includes('.git') || rel.split('/')[0] === '.turnwise') continue;
    seen.add(rel);
    if (!underRealDirs(rel)) continue;
    const abs = path.join(root, rel);
    const st = fs.lstatSync(abs, { throwIfNoEntry: false });
    if (!st) continue; // tracked but deleted in the work tree
    if (st.isSymbolicLink()) files.push({ rel, size: 0, mode: 0o777, link: fs.readlinkSync(abs) });
    else if (st.isFile()) files.push({ rel, size: st.size, mode: st.mode & 0o111 ? 0o755 : 0o644 });
  }
  files.sort((a, b) => (a.rel < b.rel ? -1 : a.rel > b.rel ? 1 : 0));
  return files;
}

/** The size-cap error: names the largest files and top-level folders so the user can act. */
export function checkSnapshotSize(files: WorkspaceFile[], maxBytes: number, root: string): void {
  const total = files.reduce((s, f) => s + f.size, 0);
  if (total <= maxBytes) return;
  const byTop = new Map<string, number>();
  for (const f of files) {
    const top = f.rel.includes('/') ? `${f.rel.split('/')[0]}/` : f.rel;
    byTop.set(top, (byTop.get(top) ?? 0) + f.size);
  }
  const largest = [...files]
    .sort((a, b) => b.size - a.size)
    .slice(0, 5)
    .map((f) => `${f.rel} (${formatMiB(f.size)})`);
  const folders = [...byTop]
    .filter(([k]) => k.endsWith('/'))
    .sort((a, b) => b[1] - a[1])
    .slice(0, 3)
    .map(([k, v]) => `${k} (${formatMiB(v)})`);
  throw new TurnwiseError(
    'invalid-input',
    `workspace ${root} is ${formatMiB(total)}, over the ${formatMiB(maxBytes)} snapshot cap. Largest files: ${largest.join(', ')}` +
      (folders.length ? `; largest folders: ${folders.join(', ')}` : ''),
    { hint: 'add large generated or data files to .gitignore (files it ignores stay out of sandboxes)' },
  );
}

function hashFile(abs: string): string {
  const h = createHash('sha256');
  let fd: number;
  try {
    fd = fs.openSync(abs, 'r');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new TurnwiseError('invalid-input', `cannot read ${abs} to snapshot the workspace (${code ?? (e as Error).message})`, {
      hint:
        code === 'EACCES'
          ? 'make the file readable, or add it to .gitignore so it stays out of sandboxes'
          : 'check that the workspace is not changing while the snapshot is built',
      cause: e,
    });
  }
  try {
    const buf = Buffer.allocUnsafe(1 << 20);
    let n: number;
    while ((n = fs.readSync(fd, buf, 0, buf.length, null)) > 0) h.update(buf.subarray(0, n));
  } finally {
    fs.closeSync(fd);
  }
  return h.digest('hex');
}

/** Content hash of the snapshot: files (path, mode, bytes) plus the image it layers on. */
export function snapshotHash(root: string, files: WorkspaceFile[], baseImageId: string): string {
  const h = createHash('sha256').update(`${SNAPSHOT_FORMAT}\0${baseImageId}\0`);
  for (const f of files) {
    h.update(`${f.rel}\0${f.mode.toString(8)}\0`);
    h.update(f.link !== undefined ? `link:${f.link}` : hashFile(path.join(root, f.rel)));
    h.update('\0');
  }
  return h.digest('hex');
}

/**
 * Where a file of the workspace goes in the build context: under `deps/` when it is inside a
 * `node_modules` folder (copied to DEPENDENCIES_DIR, root-owned), under `ws/` otherwise. Returns
 * also the workspace path of that top-most `node_modules` folder, which becomes a link.
 */
export function contextPath(rel: string): { name: string; depsRoot?: string } {
  const parts = rel.split('/');
  const k = parts.indexOf('node_modules');
  if (k < 0 || k === parts.length - 1) return { name: `ws/${rel}` };
  return { name: `deps/${rel}`, depsRoot: parts.slice(0, k + 1).join('/') };
}

/**
 * The Dockerfile of a snapshot. The RUN commits the files as the repository's first commit.
 * Dependencies (`node_modules`) go to DEPENDENCIES_DIR as root, read-only for the sandbox user,
 * and the workspace links to them: what the test runners load cannot be rewritten by an agent.
 * The labels come first so that every intermediate image of the build carries them: a build
 * interrupted after COPY leaves an image holding the whole workspace, and without the label
 * `sandbox prune --images` (and the shutdown cleanup) could not tell it is Turnwise's.
 */
export function snapshotDockerfile(baseImage: string, labels: Record<string, string> = {}): string {
  const labelLine = Object.entries(labels)
    .map(([k, v]) => `${JSON.stringify(k)}=${JSON.stringify(v)}`)
    .join(' ');
  return [
    `FROM ${baseImage}`,
    ...(labelLine ? [`LABEL ${labelLine}`] : []),
    `COPY deps/ ${DEPENDENCIES_DIR}/`,
    `COPY --chown=1000:1000 ws/ ${WORKSPACE_DIR}/`,
    `USER 1000:1000`,
    `WORKDIR ${WORKSPACE_DIR}`,
    // -f: the files were chosen already; a tracked file matching .gitignore must still be committed.
    `RUN git init -q && git add -A -f . && git commit -q --no-verify -m "turnwise snapshot"`,
    '',
  ].join('\n');
}

function packSnapshot(root: string, files: WorkspaceFile[], baseImage: string, labels: Record<string, string>): NodeJS.ReadableStream {
  const pack = tar.pack();
  void (async () => {
    try {
      const add = (header: Partial<tar.Header> & { name: string }, body: Buffer | string = '') =>
        new Promise<void>((res, rej) => {
          pack.entry(header, body, (err) => (err ? rej(err) : res()));
        });
      await add({ name: 'Dockerfile', mode: 0o644 }, snapshotDockerfile(baseImage, labels));
      // An empty workspace still needs ws/ (and deps/) for the COPY.
      await add({ name: 'ws/', type: 'directory', mode: 0o755 });
      await add({ name: 'deps/', type: 'directory', mode: 0o755 });
      const linked = new Set<string>();
      for (const f of files) {
        const { name, depsRoot } = contextPath(f.rel);
        if (depsRoot !== undefined && !linked.has(depsRoot)) {
          linked.add(depsRoot);
          await add({ name: `ws/${depsRoot}`, type: 'symlink', linkname: `${DEPENDENCIES_DIR}/${depsRoot}`, mode: 0o777 });
        }
        if (f.link !== undefined) {
          await add({ name, type: 'symlink', linkname: f.link, mode: 0o777 });
          continue;
        }
        const abs = path.join(root, f.rel);
        const size = fs.statSync(abs).size;
        await new Promise<void>((res, rej) => {
          const entry = pack.entry({ name, size, mode: f.mode }, (err) => (err ? rej(err) : res()));
          const rs = fs.createReadStream(abs);
          rs.on('error', rej);
          rs.pipe(entry);
        });
      }
      pack.finalize();
    } catch (e) {
      pack.destroy(e as Error);
    }
  })();
  return pack as unknown as NodeJS.ReadableStream;
}

export interface Snapshot {
  /** Image tag: `turnwise/snapshot:<hash>`. */
  image: string;
  hash: string;
  workspace: string;
  files: number;
  bytes: number;
  /** False when an image with this content hash already existed. */
  built: boolean;
  ms: number;
}

export interface SnapshotOptions extends ListOptions {
  /** The language image to layer on (see images.ts `languageImageTag`). */
  baseImage: string;
  maxBytes?: number;
  onProgress?: BuildProgress;
}

/** Builds (or finds) the snapshot image of `dir` on one engine. */
export async function buildSnapshot(docker: Docker, target: EngineTarget, dir: string, opts: SnapshotOptions): Promise<Snapshot> {
  const t0 = Date.now();
  const root = path.resolve(dir);
  const files = listWorkspaceFiles(root, opts);
  checkSnapshotSize(files, opts.maxBytes ?? DEFAULT_MAX_SNAPSHOT_BYTES, root);
  let baseId: string;
  try {
    baseId = (await docker.getImage(opts.baseImage).inspect()).Id;
  } catch (e) {
    throw sandboxError(e, target, `looking up ${opts.baseImage}`, opts.baseImage);
  }
  const hash = snapshotHash(root, files, baseId).slice(0, 16);
  const image = `turnwise/snapshot:${hash}`;
  const info = { image, hash, workspace: root, files: files.length, bytes: files.reduce((s, f) => s + f.size, 0) };
  let exists: boolean;
  try {
    exists = await imageExists(docker, image);
  } catch (e) {
    throw sandboxError(e, target, `looking up ${image}`);
  }
  if (exists) return { ...info, built: false, ms: Date.now() - t0 };
  const labels = { [LABEL.snapshot]: hash, [LABEL.workspace]: root };
  // While the build runs, a signal aborts it and removes what it leaves: the untagged images
  // of this snapshot's steps (each holds a copy of the workspace).
  const abort = new AbortController();
  let building: Promise<void> = Promise.resolve();
  const leftovers = {
    dispose: async () => {
      abort.abort();
      await Promise.race([building.catch(() => undefined), new Promise((r) => setTimeout(r, 2000))]);
      // The engine stops the build when the request goes away, and may commit a step meanwhile
      // (seconds later on a busy machine, for a large COPY): keep removing for a while, within
      // the shutdown's cap.
      const until = Date.now() + 2500;
      do {
        await removeUntaggedSnapshotImages(docker, hash);
        await new Promise((r) => setTimeout(r, 300));
      } while (Date.now() < until);
      await removeUntaggedSnapshotImages(docker, hash);
    },
  };
  trackLive(leftovers);
  try {
    building = buildFromContext(
      docker,
      target,
      packSnapshot(root, files, opts.baseImage, labels),
      { t: image, labels, abortSignal: abort.signal },
      opts.onProgress,
    );
    await building;
  } finally {
    untrackLive(leftovers);
  }
  return { ...info, built: true, ms: Date.now() - t0 };
}

/** Removes the untagged images of snapshot `hash` (intermediate ones included): what an interrupted build leaves. Best effort. */
export async function removeUntaggedSnapshotImages(docker: Docker, hash: string): Promise<void> {
  const images = await docker.listImages({ all: true, filters: { label: [`${LABEL.snapshot}=${hash}`] } }).catch(() => []);
  await removeChildrenFirst(docker, images.filter(isUntagged), { force: true }, () => false);
}

/** An image without a tag: a build step's image, or one whose tag went. */
export function isUntagged(i: Docker.ImageInfo): boolean {
  return !(i.RepoTags ?? []).some((t) => t !== '<none>:<none>');
}

/**
 * Removes `images` one at a time (noprune), an image only once none of the others left names it
 * as parent: a step image is the parent of the next, and steps committed within one second share
 * `Created`, so age alone cannot order them. `failed` says whether an image that could not be
 * removed is gone anyway (true) or stays, keeping its parent (false); it may throw. Returns the
 * ids removed.
 */
export async function removeChildrenFirst(
  docker: Docker,
  images: readonly Docker.ImageInfo[],
  o: { force: boolean },
  failed: (e: unknown, img: Docker.ImageInfo) => boolean,
): Promise<string[]> {
  let left = [...images];
  const removed: string[] = [];
  while (left.length) {
    const parents = new Set(left.map((i) => i.ParentId));
    const gone = new Set<string>();
    for (const img of left.filter((i) => !parents.has(i.Id))) {
      try {
        await docker.getImage(img.Id).remove({ force: o.force, noprune: true });
        removed.push(img.Id);
        gone.add(img.Id);
      } catch (e) {
        if (failed(e, img)) gone.add(img.Id);
      }
    }
    if (!gone.size) break; // what is left is in use, or the parent of an image that stays
    left = left.filter((i) => !gone.has(i.Id));
  }
  return removed;
}
