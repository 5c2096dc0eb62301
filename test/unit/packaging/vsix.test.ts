// One .vsix per VS Code target, each with its own platform's ONNX Runtime binaries and no other's:
// the selection for every target onnxruntime-node ships for, and one real `vsce package
// --target` of a target that is not this machine's, read back from the zip.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

type VsixLib = {
  TARGETS: Record<string, { platform: string; arch: string }>;
  packagableTargets(): string[];
  stageOnnxRuntime(out: string, platform: string, arch: string): string[];
  packageTarget(target: string, outFile: string, opts?: { quiet?: boolean; stageDir?: string }): string;
  zipEntries(file: string): string[];
  zipRead(file: string, name: string): Buffer | undefined;
};

const root = path.join(__dirname, '..', '..', '..');
const load = (): Promise<VsixLib> => import(path.join(root, 'scripts', 'lib', 'vsix.mjs')) as Promise<VsixLib>;

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out.push(path.relative(dir, p).split(path.sep).join('/'));
    }
  };
  walk(dir);
  return out;
}

/** The platform/arch folders of ONNX Runtime binaries among a list of paths. */
function binaryPlatforms(paths: string[]): string[] {
  const found = new Set<string>();
  for (const p of paths) {
    const m = /onnxruntime-node\/bin\/napi-v\d+\/([^/]+)\/([^/]+)\//.exec(p);
    if (m) found.add(`${m[1]}/${m[2]}`);
  }
  return [...found].sort();
}

describe('packaging: a .vsix per platform', function () {
  this.timeout(300000);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'turnwise-vsix-'));
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('the targets are the ones onnxruntime-node ships binaries for (darwin-x64 has none in this version)', async () => {
    const lib = await load();
    const targets = lib.packagableTargets();
    for (const t of ['linux-x64', 'linux-arm64', 'darwin-arm64', 'win32-x64'])
      assert.ok(targets.includes(t), `${t} in ${targets.join(', ')}`);
    for (const t of targets) assert.ok(lib.TARGETS[t], t);
    const ortBin = path.join(root, 'node_modules', 'onnxruntime-node', 'bin', 'napi-v6', 'darwin', 'x64');
    assert.equal(targets.includes('darwin-x64'), fs.existsSync(ortBin));
  });

  it("each target's staged runtime holds its platform's binding and no other platform's files", async () => {
    const lib = await load();
    for (const t of lib.packagableTargets()) {
      const { platform, arch } = lib.TARGETS[t];
      const out = path.join(tmp, `nm-${t}`);
      lib.stageOnnxRuntime(out, platform, arch);
      const files = filesUnder(out);
      assert.deepEqual(binaryPlatforms(files), [`${platform}/${arch}`], t);
      assert.ok(
        files.some((f) => f.endsWith(`/${platform}/${arch}/onnxruntime_binding.node`)),
        `${t}: binding`,
      );
      assert.ok(files.includes('onnxruntime-node/dist/index.js') && files.includes('onnxruntime-common/dist/cjs/index.js'), `${t}: JS`);
      fs.rmSync(out, { recursive: true, force: true });
    }
  });

  it('a target with no binary is refused, naming the ones there are', async () => {
    const lib = await load();
    assert.throws(
      () => lib.stageOnnxRuntime(path.join(tmp, 'none'), 'sunos', 'sparc'),
      /ships no binary for sunos\/sparc \(it has: .*linux-x64/,
    );
  });

  it('vsce package --target linux-arm64 (not this machine) carries linux/arm64 binaries only, and says its target', async function () {
    if (!fs.existsSync(path.join(root, 'dist', 'extension.js'))) this.skip(); // needs `npm run build`
    const lib = await load();
    const target = process.arch === 'arm64' ? 'linux-x64' : 'linux-arm64';
    const file = lib.packageTarget(target, path.join(tmp, `turnwise-${target}.vsix`), { quiet: true, stageDir: path.join(tmp, 'stage') });
    const entries = lib.zipEntries(file);
    assert.deepEqual(binaryPlatforms(entries), [lib.TARGETS[target].platform + '/' + lib.TARGETS[target].arch]);
    for (const f of [
      'extension/package.json',
      'extension/dist/extension.js',
      'extension/dist/cli.js',
      'extension/dist/grammars/tree-sitter-bash.wasm',
      'extension/sandbox-images/python/Dockerfile',
      'extension/scripts/bootstrap-base-image.sh',
    ]) {
      assert.ok(entries.includes(f), `${f} in the .vsix`);
    }
    assert.ok(!entries.some((e) => e.endsWith('.map') || e.includes('/src/')), 'no source maps or sources');
    const manifest = lib.zipRead(file, 'extension.vsixmanifest')?.toString('utf8') ?? '';
    assert.match(manifest, new RegExp(`TargetPlatform="${target}"`));
  });
});
