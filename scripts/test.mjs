// `npm test`: installs the tiers' test tools (scripts/setup-test-tools.sh: fixtures' runners,
// lavapipe, Chromium, code-server; quick when present), then runs the test tiers (unit, webgpu,
// docker, vscode) in order, each with its own summary, then one closing line
// "total: N passed, N failed, N skipped".
//   node scripts/test.mjs [unit|webgpu|docker|vscode ...]
// TURNWISE_SKIP_TEST_SETUP=1 skips the tools step (they are installed already).
// A tier that cannot run fails with the reason. A developer may skip the webgpu, docker or vscode
// tier only by setting TURNWISE_SKIP_WEBGPU=1 / TURNWISE_SKIP_DOCKER=1 / TURNWISE_SKIP_VSCODE=1
// (CI never sets them); the summary then says it was skipped.
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { summarize } from './lib/test-summary.mjs';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const requested = process.argv.slice(2);
const tiers = requested.length ? requested : ['unit', 'webgpu', 'docker', 'vscode'];
const mochaBin = path.join(root, 'node_modules', 'mocha', 'bin', 'mocha.js');

function run(cmd, args, env = {}) {
  const r = spawnSync(cmd, args, { cwd: root, stdio: 'inherit', env: { ...process.env, ...env } });
  return r.status ?? 1;
}

function readSummary(file) {
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch {
    return undefined;
  }
}

/** Why no Docker engine answers (found as Turnwise finds it: DOCKER_HOST, context, local sockets), or undefined. */
function dockerReachable() {
  const r = spawnSync(
    process.execPath,
    [
      '-r',
      'tsx/cjs',
      '-e',
      `
    const { connectEngine, engineInfo } = require('./src/sandbox/engine');
    const { docker, target } = connectEngine(undefined, { requestTimeoutMs: 8000 });
    engineInfo(docker, target).then(() => process.exit(0), (e) => { console.error(e.message); process.exit(1); });
  `,
    ],
    { cwd: root, encoding: 'utf8', timeout: 30000 },
  );
  return r.status === 0 ? undefined : (r.stderr || 'no answer').trim();
}

/** Why no WebGPU adapter can be used here (the same child-process probe as `turnwise doctor`), or undefined. */
function webgpuUnavailable() {
  const r = spawnSync(
    process.execPath,
    [
      '-r',
      'tsx/cjs',
      '-e',
      `
    require('./src/onnx/runtime').probeProvider('webgpu').then((p) => { console.log(JSON.stringify(p)); });
  `,
    ],
    { cwd: root, encoding: 'utf8', timeout: 120000 },
  );
  try {
    const p = JSON.parse(r.stdout.trim().split('\n').pop());
    return p.ok ? undefined : p.error;
  } catch {
    return (r.stderr || 'the probe gave no answer').trim().slice(0, 500);
  }
}

function build() {
  const code = run(process.execPath, [path.join(root, 'scripts', 'build.mjs')]);
  if (code !== 0) throw new Error('build failed');
}

const tierDefs = {
  unit: () => {
    // The type check is part of the unit tier: a type error fails the run like a failing test.
    const tsc = run(process.execPath, [path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '--noEmit', '-p', root]);
    if (tsc !== 0) return { fail: 'type check failed (tsc --noEmit): see the errors above' };
    // So is the lint: ESLint's findings and Prettier's layout (npm run lint; npm run format fixes the layout).
    const eslint = run(process.execPath, [path.join(root, 'node_modules', 'eslint', 'bin', 'eslint.js'), root]);
    if (eslint !== 0) return { fail: 'lint failed (eslint): see the findings above' };
    const prettier = run(process.execPath, [
      path.join(root, 'node_modules', 'prettier', 'bin', 'prettier.cjs'),
      '--check',
      '--log-level',
      'warn',
      root,
    ]);
    if (prettier !== 0) return { fail: 'layout check failed (prettier --check): `npm run format` rewrites the files listed above' };
    return { cmd: process.execPath, args: [mochaBin, 'test/unit/**/*.test.ts'] };
  },
  webgpu: () => {
    if (process.env.TURNWISE_SKIP_WEBGPU === '1') return { skip: 'TURNWISE_SKIP_WEBGPU=1' };
    const why = webgpuUnavailable();
    if (why) {
      return {
        fail: `the webgpu tier needs a WebGPU adapter (${why}). Without a GPU, Mesa's lavapipe >= 24 is one (Debian 12: mesa-vulkan-drivers from bookworm-backports; scripts/ci/provision-system.sh installs it), or set TURNWISE_SKIP_WEBGPU=1 to skip this tier on purpose.`,
      };
    }
    return { cmd: process.execPath, args: [mochaBin, '--timeout', '300000', 'test/webgpu/**/*.test.ts'] };
  },
  docker: () => {
    if (process.env.TURNWISE_SKIP_DOCKER === '1') return { skip: 'TURNWISE_SKIP_DOCKER=1' };
    const why = dockerReachable();
    if (why)
      return {
        fail: `the docker tier needs a running Docker engine (${why}). Start it (Docker Desktop, 'systemctl start docker', rootless Docker or Podman's socket; as root on Debian scripts/ci/provision-engine.sh), or set TURNWISE_SKIP_DOCKER=1 to skip this tier on purpose.`,
      };
    return { cmd: process.execPath, args: [mochaBin, '--timeout', '120000', 'test/docker/**/*.test.ts'] };
  },
  vscode: () => {
    if (process.env.TURNWISE_SKIP_VSCODE === '1') return { skip: 'TURNWISE_SKIP_VSCODE=1' };
    build();
    const pkg = run('npm', ['run', '--silent', 'package']);
    if (pkg !== 0) return { fail: 'packaging the .vsix failed (npm run package)' };
    return { cmd: process.execPath, args: [path.join(root, 'test', 'vscode', 'run.mjs')] };
  },
};

if (process.env.TURNWISE_SKIP_TEST_SETUP !== '1') {
  console.log('\n━━ test tools ━━');
  // Never fatal: a tier whose tool is missing fails below with its own reason.
  run('bash', [path.join(root, 'scripts', 'setup-test-tools.sh'), ...tiers]);
}

const results = [];
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'turnwise-test-'));
// Tasks cached by training runs (tasks/cache.ts): one folder for this test run, not the user's.
const taskCache = path.join(tmp, 'task-cache');
for (const tier of tiers) {
  const def = tierDefs[tier];
  if (!def) {
    console.error(`unknown tier ${tier}; tiers: ${Object.keys(tierDefs).join(', ')}`);
    process.exit(2);
  }
  console.log(`\n━━ ${tier} tier ━━`);
  const t0 = Date.now();
  let plan;
  try {
    plan = def();
  } catch (e) {
    plan = { fail: e.message };
  }
  if (plan.skip) {
    results.push({ tier, tierSkipped: true, reason: plan.skip });
    console.log(`${tier}: SKIPPED (${plan.skip})`);
    continue;
  }
  if (plan.fail) {
    results.push({ tier, passed: 0, failed: 1, skipped: 0, error: plan.fail });
    console.log(`${tier}: FAILED: ${plan.fail}`);
    continue;
  }
  const summaryFile = path.join(tmp, `${tier}.json`);
  const code = run(plan.cmd, plan.args, { TURNWISE_TEST_SUMMARY: summaryFile, TURNWISE_TASK_CACHE: taskCache });
  const s = readSummary(summaryFile);
  const secs = ((Date.now() - t0) / 1000).toFixed(1);
  if (!s) {
    results.push({ tier, passed: 0, failed: 1, skipped: 0, error: `exited ${code} without a summary` });
    console.log(`${tier}: FAILED: exited ${code} without writing a summary (${secs} s)`);
  } else {
    // A non-zero exit with no failed test (e.g. a crash after the run) still fails the tier.
    const failed = s.failed + (code !== 0 && s.failed === 0 ? 1 : 0);
    results.push({ tier, passed: s.passed, failed, skipped: s.skipped, failures: s.failures });
    console.log(`${tier}: ${s.passed} passed, ${failed} failed, ${s.skipped} skipped (${secs} s)`);
  }
}
fs.rmSync(tmp, { recursive: true, force: true });

console.log('\n━━ summary ━━');
const summary = summarize(results);
for (const line of summary.lines) console.log(line);
process.exit(summary.failed > 0 ? 1 : 0);
