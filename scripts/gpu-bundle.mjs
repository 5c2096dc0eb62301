// Builds the GPU check's self-contained folder: the CLI and the check scripts bundled, the policy's
// worker, the grammars, this platform's onnxruntime-node, and run.sh (scripts/gpu-check.sh). It
// runs with plain `node` on a machine with no npm packages and no network.
//   node scripts/gpu-bundle.mjs OUT
import * as esbuild from 'esbuild';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { copyGrammars, NODE_BUNDLE } from './lib/bundle-options.mjs';
import { stageOnnxRuntime } from './lib/vsix.mjs';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const out = process.argv[2];
if (!out) {
  console.error('usage: node scripts/gpu-bundle.mjs OUT');
  process.exit(2);
}
/** The most the folder may weigh: it travels to a GPU machine with the checkout. */
const MAX_BYTES = 60 * 2 ** 20;

fs.rmSync(out, { recursive: true, force: true });
fs.mkdirSync(out, { recursive: true });
const bundles = [
  ['src/cli/main.ts', 'cli.js'],
  ['src/policy/worker-main.ts', 'policy-worker.js'],
  ['scripts/gpu-check-model.ts', 'gpu-check-model.js'],
  ['scripts/gpu-check-loop.ts', 'gpu-check-loop.js'],
];
await Promise.all(
  bundles.map(([from, to]) =>
    esbuild.build({ ...NODE_BUNDLE, sourcemap: false, entryPoints: [path.join(root, from)], outfile: path.join(out, to) }),
  ),
);
copyGrammars(path.join(out, 'grammars'));
stageOnnxRuntime(path.join(out, 'node_modules'));
fs.copyFileSync(path.join(root, 'scripts', 'gpu-check.sh'), path.join(out, 'run.sh'));
fs.chmodSync(path.join(out, 'run.sh'), 0o755);

const size = (p) => (fs.statSync(p).isDirectory() ? fs.readdirSync(p).reduce((n, f) => n + size(path.join(p, f)), 0) : fs.statSync(p).size);
const bytes = size(out);
if (bytes > MAX_BYTES) {
  console.error(`gpu-bundle: ${out} holds ${(bytes / 2 ** 20).toFixed(1)} MB, over the ${MAX_BYTES / 2 ** 20} MB it may`);
  process.exit(1);
}
console.log(`gpu-bundle: ${out} (${(bytes / 2 ** 20).toFixed(1)} MB); run it there with: bash ${path.join(out, 'run.sh')} [OUT_DIR]`);
