// Packages the extension as .vsix files, one per VS Code target, each with only its platform's
// ONNX Runtime binaries (needs `npm run build` first).
//   node scripts/package.mjs                         # this machine's target → turnwise.vsix
//   node scripts/package.mjs --target linux-arm64 …  # → vsix/turnwise-<target>-<version>.vsix
//   node scripts/package.mjs --all                   # every target onnxruntime-node ships for
//   --out FILE (one target) or --out-dir DIR
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { TARGETS, hostTarget, packageTarget, packagableTargets, root } from './lib/vsix.mjs';

const { values } = parseArgs({
  options: { target: { type: 'string', multiple: true }, all: { type: 'boolean' }, out: { type: 'string' }, 'out-dir': { type: 'string' } },
});
const version = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).version;
const available = packagableTargets();
const targets = values.all ? available : (values.target ?? [hostTarget()]);
for (const t of targets) {
  if (!TARGETS[t]) {
    console.error(`unknown target ${t}; VS Code targets: ${Object.keys(TARGETS).join(', ')}`);
    process.exit(2);
  }
  if (!available.includes(t)) {
    console.error(`cannot package ${t}: onnxruntime-node ships no binary for it (it has: ${available.join(', ')})`);
    process.exit(2);
  }
}
if (values.out && targets.length > 1) {
  console.error('--out names one file: give one --target, or use --out-dir');
  process.exit(2);
}
const single = !values.all && !values.target;
for (const t of targets) {
  const out =
    values.out ??
    (single ? path.join(root, 'turnwise.vsix') : path.join(values['out-dir'] ?? path.join(root, 'vsix'), `turnwise-${t}-${version}.vsix`));
  const t0 = Date.now();
  const file = packageTarget(t, out);
  console.log(
    `${t}: ${path.relative(process.cwd(), file)} (${(fs.statSync(file).size / 1e6).toFixed(1)} MB, ${((Date.now() - t0) / 1000).toFixed(1)} s)`,
  );
}
