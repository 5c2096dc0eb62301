// `npm run bench`: every benchmark in one command, one JSON object on stdout
// ({ machine, benches: { sandbox, tasks, credit, train, rollout } }), also saved to bench-results/.
// `rollout` takes a few minutes (real episodes with the embedded policy); `bench learn` (up to an
// hour) is not part of it: run `turnwise bench learn --json` on its own.
//   node scripts/bench.mjs [sandbox tasks credit train rollout]
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const all = ['sandbox', 'tasks', 'credit', 'train', 'rollout'];
const which = process.argv.slice(2).length ? process.argv.slice(2) : all;
const cli = path.join(root, 'dist', 'cli.js');
if (!fs.existsSync(cli)) {
  console.error('dist/cli.js is missing: run `npm run build` first');
  process.exit(2);
}

const result = {
  schema: 'turnwise/bench@1',
  date: new Date().toISOString(),
  machine: {
    cpus: os.cpus().length,
    cpu: os.cpus()[0]?.model,
    memGiB: Math.round(os.totalmem() / 2 ** 30),
    loadavg: os.loadavg(),
    node: process.version,
  },
  benches: {},
};
let failed = 0;
for (const name of which) {
  process.stderr.write(`bench ${name}…\n`);
  const t0 = Date.now();
  const r = spawnSync(process.execPath, [cli, 'bench', name, '--json'], { cwd: root, encoding: 'utf8', maxBuffer: 64 * 2 ** 20 });
  try {
    result.benches[name] = { ...JSON.parse(r.stdout), wall_s: (Date.now() - t0) / 1000 };
    if (r.status !== 0) throw new Error(`exit ${r.status}`);
  } catch (e) {
    failed++;
    result.benches[name] = { error: `${e.message}: ${(r.stderr || '').trim().split('\n').slice(-3).join(' | ')}` };
  }
}
const out = JSON.stringify(result, null, 2);
fs.mkdirSync(path.join(root, 'bench-results'), { recursive: true });
fs.writeFileSync(path.join(root, 'bench-results', 'latest.json'), out + '\n');
process.stdout.write(out + '\n');
process.exit(failed ? 1 : 0);
