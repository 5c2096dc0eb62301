// What every Node bundle of Turnwise is built with (scripts/build.mjs, scripts/gpu-bundle.mjs):
// esbuild's options, and the tree-sitter runtime and grammars copied beside the bundle.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

// Grammars Turnwise parses (src/ast/treesitter.ts GRAMMARS).
export const GRAMMARS = ['bash', 'python', 'javascript', 'typescript', 'tsx', 'go'];

export const NODE_BUNDLE = {
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  sourcemap: true,
  logLevel: 'warning',
  // onnxruntime-node loads its native binding relative to itself: external, staged under
  // node_modules beside the bundle. ssh2 (dockerode's ssh transport) is bundled; its optional native
  // speed-ups (cpu-features, *.node) are required inside try/catch and simply absent.
  external: ['vscode', 'onnxruntime-node', 'cpu-features', '*.node'],
  // The ESM build of web-tree-sitter calls createRequire(import.meta.url), which breaks in CJS.
  plugins: [
    {
      name: 'web-tree-sitter-cjs',
      setup(b) {
        b.onResolve({ filter: /^web-tree-sitter$/ }, () => ({ path: require.resolve('web-tree-sitter') }));
      },
    },
  ],
};

/** Copies the tree-sitter runtime and the grammars into `out` (a bundle's grammars/ folder). */
export function copyGrammars(out) {
  fs.mkdirSync(out, { recursive: true });
  const wasmDir = path.join(path.dirname(require.resolve('@vscode/tree-sitter-wasm/package.json')), 'wasm');
  for (const g of GRAMMARS) fs.copyFileSync(path.join(wasmDir, `tree-sitter-${g}.wasm`), path.join(out, `tree-sitter-${g}.wasm`));
  fs.copyFileSync(require.resolve('web-tree-sitter/web-tree-sitter.wasm'), path.join(out, 'web-tree-sitter.wasm'));
}
