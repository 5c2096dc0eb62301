// Bundles the extension, the CLI and the webviews with esbuild, and copies the tree-sitter
// runtime and grammars next to them. `--watch` rebuilds on change.
import * as esbuild from 'esbuild';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { stageOnnxRuntime } from './lib/vsix.mjs';
import { copyGrammars, GRAMMARS, NODE_BUNDLE } from './lib/bundle-options.mjs';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const dist = path.join(root, 'dist');
const watch = process.argv.includes('--watch');

const common = NODE_BUNDLE;

const entries = [
  { entryPoints: [path.join(root, 'src/extension/extension.ts')], outfile: path.join(dist, 'extension.js') },
  // The extension's Docker/ONNX/doctor code, loaded on first use (src/extension/lazy.ts): activation stays small.
  { entryPoints: [path.join(root, 'src/extension/services.ts')], outfile: path.join(dist, 'extension-services.js') },
  {
    entryPoints: [path.join(root, 'src/cli/main.ts')],
    outfile: path.join(dist, 'cli.js'),
    banner: { js: '#!/usr/bin/env node' },
  },
  // The policy's worker thread (src/policy/worker.ts loads it from next to the bundle running).
  { entryPoints: [path.join(root, 'src/policy/worker-main.ts')], outfile: path.join(dist, 'policy-worker.js') },
];

// Webview apps run in the browser: src/extension/webviews/<name>/main.ts → dist/webviews/<name>.js
const webviewRoot = path.join(root, 'src/extension/webviews');
if (fs.existsSync(webviewRoot)) {
  for (const name of fs.readdirSync(webviewRoot)) {
    const main = path.join(webviewRoot, name, 'main.ts');
    if (fs.existsSync(main)) {
      entries.push({
        entryPoints: [main],
        outfile: path.join(dist, 'webviews', `${name}.js`),
        platform: 'browser',
        format: 'iife',
        target: 'es2022',
        external: [],
        plugins: [],
      });
    }
  }
}

// onnxruntime-node is a native addon that loads its binding relative to itself, so it stays
// outside the bundle. Stage it (this platform's binaries only) under dist/node_modules, where
// require() from dist/*.js finds it; `npm run package` restages it per target (scripts/lib/vsix.mjs).
function stageOnnxRuntimeHere() {
  stageOnnxRuntime(path.join(dist, 'node_modules'));
}

// The embedded warm-started policy (models/turnwise-tiny, made by `turnwise warmstart`): the
// bundle and the .vsix carry its weights, config and tokenizer, not its optimizer state.
function copyEmbeddedModel() {
  const from = path.join(root, 'models', 'turnwise-tiny');
  const to = path.join(dist, 'models', 'turnwise-tiny');
  if (!fs.existsSync(path.join(from, 'model.safetensors'))) {
    console.warn('build: models/turnwise-tiny is missing; the bundle has no embedded policy');
    return;
  }
  fs.rmSync(to, { recursive: true, force: true });
  fs.mkdirSync(to, { recursive: true });
  for (const f of ['model.safetensors', 'config.json', 'tokenizer.json', 'tokenizer_config.json', 'warmstart.json']) {
    if (fs.existsSync(path.join(from, f))) fs.copyFileSync(path.join(from, f), path.join(to, f));
  }
}

fs.mkdirSync(dist, { recursive: true });
copyGrammars(path.join(dist, 'grammars'));
stageOnnxRuntimeHere();
copyEmbeddedModel();
if (watch) {
  for (const e of entries) (await esbuild.context({ ...common, ...e })).watch();
  console.log('watching…');
} else {
  const t0 = Date.now();
  await Promise.all(entries.map((e) => esbuild.build({ ...common, ...e })));
  fs.chmodSync(path.join(dist, 'cli.js'), 0o755);
  console.log(`built ${entries.length} bundles + ${GRAMMARS.length} grammars into dist/ in ${Date.now() - t0} ms`);
}
