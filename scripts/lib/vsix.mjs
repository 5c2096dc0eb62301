// Packaging the extension per platform: one .vsix per VS Code target, each carrying only that
// platform's ONNX Runtime binaries (onnxruntime-node ships them all, ~290 MB together).
// Used by scripts/build.mjs (this machine's binaries under dist/node_modules) and
// scripts/package.mjs (`vsce package --target …` from a staged copy of the extension).
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as zlib from 'node:zlib';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
export const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..');

/** VS Code's target names and the Node platform/arch whose ONNX Runtime binaries each carries. */
export const TARGETS = {
  'linux-x64': { platform: 'linux', arch: 'x64' },
  'linux-arm64': { platform: 'linux', arch: 'arm64' },
  'darwin-x64': { platform: 'darwin', arch: 'x64' },
  'darwin-arm64': { platform: 'darwin', arch: 'arm64' },
  'win32-x64': { platform: 'win32', arch: 'x64' },
  'win32-arm64': { platform: 'win32', arch: 'arm64' },
};

export function ortDir() {
  return path.dirname(require.resolve('onnxruntime-node/package.json', { paths: [root] }));
}

/** onnxruntime-node's binary folders for a platform/arch, relative to the package (bin/napi-vN/<platform>/<arch>). */
export function ortBinDirs(platform, arch, dir = ortDir()) {
  const bin = path.join(dir, 'bin');
  if (!fs.existsSync(bin)) return [];
  return fs
    .readdirSync(bin)
    .filter((n) => /^napi-v\d+$/.test(n))
    .map((n) => path.join('bin', n, platform, arch))
    .filter((rel) => fs.existsSync(path.join(dir, rel, 'onnxruntime_binding.node')));
}

/** The targets this onnxruntime-node has binaries for (a target with none cannot run the policy). */
export function packagableTargets(dir = ortDir()) {
  return Object.keys(TARGETS).filter((t) => ortBinDirs(TARGETS[t].platform, TARGETS[t].arch, dir).length > 0);
}

/**
 * Copies onnxruntime-node (its JS and one platform's binaries) and onnxruntime-common into
 * `outNodeModules`, where require() from dist/*.js finds them. Returns the binary folders copied.
 */
export function stageOnnxRuntime(outNodeModules, platform = process.platform, arch = process.arch) {
  const copy = (from, to) => fs.cpSync(from, to, { recursive: true, dereference: true });
  const ort = ortDir();
  const commonDir = path.resolve(path.dirname(require.resolve('onnxruntime-common', { paths: [ort] })), '..', '..');
  const bins = ortBinDirs(platform, arch, ort);
  if (bins.length === 0) {
    const have = packagableTargets(ort).join(', ');
    throw new Error(
      `onnxruntime-node ${JSON.parse(fs.readFileSync(path.join(ort, 'package.json'), 'utf8')).version} ships no binary for ${platform}/${arch} (it has: ${have})`,
    );
  }
  fs.rmSync(outNodeModules, { recursive: true, force: true });
  copy(path.join(ort, 'package.json'), path.join(outNodeModules, 'onnxruntime-node', 'package.json'));
  copy(path.join(ort, 'dist'), path.join(outNodeModules, 'onnxruntime-node', 'dist'));
  for (const b of bins) copy(path.join(ort, b), path.join(outNodeModules, 'onnxruntime-node', b));
  copy(path.join(commonDir, 'package.json'), path.join(outNodeModules, 'onnxruntime-common', 'package.json'));
  copy(path.join(commonDir, 'dist', 'cjs'), path.join(outNodeModules, 'onnxruntime-common', 'dist', 'cjs'));
  for (const d of [path.join(outNodeModules, 'onnxruntime-node', 'dist'), path.join(outNodeModules, 'onnxruntime-common', 'dist', 'cjs')]) {
    for (const f of fs.readdirSync(d)) if (f.endsWith('.map') || f.endsWith('.d.ts')) fs.rmSync(path.join(d, f));
  }
  return bins;
}

/** What the .vsix carries besides dist/ (the allow-list in .vscodeignore says the same). */
const EXTENSION_FILES = [
  'package.json',
  'README.md',
  'CHANGELOG.md',
  'LICENSE',
  '.vscodeignore',
  'media',
  'sandbox-images',
  'scripts/bootstrap-base-image.sh',
];

/**
 * A copy of the extension for one target in `stageDir`: the files above, dist/ without this
 * machine's dist/node_modules (and without source maps), and that target's ONNX Runtime.
 */
export function stageExtension(target, stageDir, distDir = path.join(root, 'dist')) {
  const t = TARGETS[target];
  if (!t) throw new Error(`unknown target ${target}; targets: ${Object.keys(TARGETS).join(', ')}`);
  if (!fs.existsSync(path.join(distDir, 'extension.js')))
    throw new Error(`${distDir}/extension.js is missing: run \`npm run build\` first`);
  fs.rmSync(stageDir, { recursive: true, force: true });
  fs.mkdirSync(stageDir, { recursive: true });
  for (const f of EXTENSION_FILES) {
    const from = path.join(root, f);
    if (fs.existsSync(from)) fs.cpSync(from, path.join(stageDir, f), { recursive: true });
  }
  // package.json's `files` is npm's list (the CLI package); vsce refuses it beside .vscodeignore.
  const pkg = JSON.parse(fs.readFileSync(path.join(stageDir, 'package.json'), 'utf8'));
  delete pkg.files;
  fs.writeFileSync(path.join(stageDir, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);
  fs.cpSync(distDir, path.join(stageDir, 'dist'), {
    recursive: true,
    filter: (src) => {
      const rel = path.relative(distDir, src);
      return !(rel === 'node_modules' || rel.startsWith(`node_modules${path.sep}`) || rel.endsWith('.map'));
    },
  });
  return stageOnnxRuntime(path.join(stageDir, 'dist', 'node_modules'), t.platform, t.arch);
}

/** `vsce package --target` of a staged copy; returns the .vsix path. */
export function packageTarget(target, outFile, opts = {}) {
  const stageDir = opts.stageDir ?? path.join(root, 'out', 'vsix', target);
  stageExtension(target, stageDir, opts.distDir);
  const vsce = path.join(root, 'node_modules', '@vscode', 'vsce', 'vsce');
  fs.mkdirSync(path.dirname(path.resolve(outFile)), { recursive: true });
  const args = [vsce, 'package', '--no-dependencies', '--target', target, '--out', path.resolve(outFile)];
  const pkg = JSON.parse(fs.readFileSync(path.join(stageDir, 'package.json'), 'utf8'));
  if (!pkg.repository) args.push('--allow-missing-repository');
  const r = spawnSync(process.execPath, args, { cwd: stageDir, stdio: opts.quiet ? 'pipe' : 'inherit', encoding: 'utf8' });
  if (r.status !== 0)
    throw new Error(
      `vsce package --target ${target} failed (exit ${r.status})${opts.quiet ? `: ${(r.stderr || r.stdout || '').trim().slice(-2000)}` : ''}`,
    );
  if (!opts.keepStage) fs.rmSync(stageDir, { recursive: true, force: true });
  return path.resolve(outFile);
}

/** The names of a zip's entries, read from its central directory (enough for a .vsix). */
export function zipEntries(file) {
  return zipDirectory(file).map((e) => e.name);
}

/** One entry's content (stored or deflated), or undefined when the zip has no such entry. */
export function zipRead(file, name) {
  const e = zipDirectory(file).find((x) => x.name === name);
  if (!e) return undefined;
  const buf = fs.readFileSync(file);
  const start = e.offset + 30 + buf.readUInt16LE(e.offset + 26) + buf.readUInt16LE(e.offset + 28);
  const data = buf.subarray(start, start + e.compressedSize);
  return e.method === 0 ? Buffer.from(data) : zlib.inflateRawSync(data);
}

function zipDirectory(file) {
  const buf = fs.readFileSync(file);
  let eocd = -1;
  for (let i = buf.length - 22; i >= Math.max(0, buf.length - 65557); i--) {
    if (buf.readUInt32LE(i) === 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) throw new Error(`${file} is not a zip file (no end of central directory)`);
  const count = buf.readUInt16LE(eocd + 10);
  let off = buf.readUInt32LE(eocd + 16);
  const names = [];
  for (let i = 0; i < count; i++) {
    if (buf.readUInt32LE(off) !== 0x02014b50) throw new Error(`${file}: bad central directory entry ${i}`);
    const nameLen = buf.readUInt16LE(off + 28);
    const extraLen = buf.readUInt16LE(off + 30);
    const commentLen = buf.readUInt16LE(off + 32);
    names.push({
      name: buf.toString('utf8', off + 46, off + 46 + nameLen),
      method: buf.readUInt16LE(off + 10),
      compressedSize: buf.readUInt32LE(off + 20),
      offset: buf.readUInt32LE(off + 42),
    });
    off += 46 + nameLen + extraLen + commentLen;
  }
  return names;
}

/** Host platform's VS Code target name (linux-x64, darwin-arm64, …). */
export function hostTarget() {
  return `${process.platform}-${process.arch}`;
}
