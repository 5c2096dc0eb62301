// The VS Code test tier: a real VS Code (code-server from npm, on Node 24) driven by headless
// Chromium through playwright-core, offline (recipe: test/vscode/README.md).
//   A. extension-host tests: test/vscode/suite/*.test.js run by mocha inside code-server's
//      extension host, with the repository root as the extension under development;
//   B. UI tests: turnwise.vsix installed into code-server, "Turnwise: Check Environment" run
//      from the palette (F1), the report checked on screen; screenshots in test-results/vscode/.
// Builds nothing: `node scripts/build.mjs` and `npm run package` come first (scripts/test.mjs).
// Tools come from scripts/ci/provision-vscode-test.sh (or TURNWISE_VSCODE_TOOLS=<folder>).
// Writes {passed, failed, skipped, failures:[{title, error}]} to $TURNWISE_TEST_SUMMARY when set.
// Always stops what it started (code-server process groups, Chromium), also on failure and SIGINT.
import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { createRequire } from 'node:module';
import { format } from 'node:util';
import { firstLine } from '../../scripts/lib/test-summary.mjs';

const here = path.dirname(new URL(import.meta.url).pathname);
const root = path.resolve(here, '..', '..');
const resultsDir = path.join(root, 'test-results', 'vscode');
const suiteIndex = path.join(here, 'suite', 'index.js');
const vsixPath = path.resolve(root, process.env.TURNWISE_VSIX || 'turnwise.vsix');
const chromiumPath = process.env.TURNWISE_CHROMIUM || '/usr/bin/chromium';
const verbose = process.env.TURNWISE_VSCODE_VERBOSE === '1';
const tierLimitMs = Number(process.env.TURNWISE_VSCODE_TIMEOUT_S || 600) * 1000;
const t0 = Date.now();
const elapsed = () => `${((Date.now() - t0) / 1000).toFixed(1)}s`;
const say = (msg) => console.log(`[vscode +${elapsed()}] ${msg}`);

// ── results ───────────────────────────────────────────────────────────────────────────────────
const results = []; // { title, state: 'passed'|'failed'|'skipped', ms, error? }
const perfs = []; // { name, value, ... } from TURNWISE-PERF lines of the extension host
let aborted; // set on a signal or the tier's time limit: what fails after that is a consequence
function record(r) {
  if (aborted && !r.abort) return;
  results.push(r);
  const mark = { passed: '✓', failed: '✗', skipped: '-' }[r.state];
  console.log(
    `  ${mark} ${r.title}${r.ms ? ` (${(r.ms / 1000).toFixed(1)} s)` : ''}${r.state === 'skipped' && r.error ? `  [${r.error}]` : ''}`,
  );
  if (r.state === 'failed') console.log(indent(r.error, 6));
}
const indent = (s, n) =>
  String(s)
    .split('\n')
    .map((l) => ' '.repeat(n) + l)
    .join('\n');

let finished = false;
function finish() {
  if (finished) return;
  finished = true;
  const count = (s) => results.filter((r) => r.state === s).length;
  const summary = {
    passed: count('passed'),
    failed: count('failed'),
    skipped: count('skipped'),
    failures: results.filter((r) => r.state === 'failed').map(({ title, error }) => ({ title, error })),
  };
  if (perfs.length && fs.existsSync(resultsDir)) fs.writeFileSync(path.join(resultsDir, 'perf.json'), JSON.stringify(perfs, null, 2));
  if (process.env.TURNWISE_TEST_SUMMARY) fs.writeFileSync(process.env.TURNWISE_TEST_SUMMARY, JSON.stringify(summary, null, 2));
  console.log(`\nvscode tier: ${summary.passed} passed, ${summary.failed} failed, ${summary.skipped} skipped (${elapsed()})`);
  for (const f of summary.failures) console.log(`  ✗ ${f.title}: ${firstLine(f.error)}`);
  if (fs.existsSync(resultsDir)) console.log(`  artifacts: ${path.relative(process.cwd(), resultsDir) || resultsDir}/`);
  process.exitCode = summary.failed > 0 ? 1 : 0;
}

// ── cleanup: everything started registers a stop function ────────────────────────────────────
const stoppers = [];
const groups = new Set(); // pids of process groups we started (code-server)
let tmpDir; // isolated state of this run, removed at the end
let cleaning;
function cleanup() {
  cleaning ??= (async () => {
    for (const stop of stoppers.reverse()) {
      try {
        await stop();
      } catch (e) {
        console.error(`cleanup: ${e.message}`);
      }
    }
  })();
  return cleaning;
}
// Last resort when the process is leaving without the async cleanup having finished.
process.on('exit', () => {
  for (const pid of groups) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {}
  }
  try {
    if (tmpDir) fs.rmSync(tmpDir, { recursive: true, force: true, maxRetries: 3 });
  } catch (e) {
    console.error(`could not remove ${tmpDir}: ${e.message}`);
  }
});
/** Stops work in progress: nothing new starts, and later failures are not reported as tests. */
function abort(why) {
  record({ title: 'vscode tier', state: 'failed', error: why, abort: true });
  aborted = why;
}
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => {
    if (aborted) return;
    console.error(`\n${sig}: stopping code-server and Chromium`);
    abort(`interrupted by ${sig}`);
    cleanup().finally(() => {
      finish();
      process.exit(130);
    });
  });
}

// ── tools ─────────────────────────────────────────────────────────────────────────────────────
function toolsFolder() {
  if (process.env.TURNWISE_VSCODE_TOOLS) return path.resolve(process.env.TURNWISE_VSCODE_TOOLS);
  // Same key as scripts/ci/provision-vscode-test.sh: sha256 of package.json then the lockfile.
  const h = createHash('sha256');
  h.update(fs.readFileSync(path.join(here, 'package.json')));
  h.update(fs.readFileSync(path.join(here, 'package-lock.json')));
  const cache = process.env.TURNWISE_CACHE || path.join(process.env.HOME || os.homedir(), '.cache', 'turnwise');
  return path.join(cache, 'vscode-test-tools', h.digest('hex').slice(0, 16));
}

function loadTools() {
  const dir = toolsFolder();
  let tools;
  try {
    tools = JSON.parse(fs.readFileSync(path.join(dir, 'tools.json'), 'utf8'));
  } catch {
    return { missing: `the VS Code test tools are not installed at ${dir}` };
  }
  for (const k of ['node', 'codeServer', 'playwrightCore', 'mocha']) {
    if (!tools[k] || !fs.existsSync(tools[k])) return { missing: `${dir}/tools.json names ${k} = ${tools[k]}, which does not exist` };
  }
  if (!fs.existsSync(chromiumPath))
    return { missing: `Chromium is not at ${chromiumPath} (set TURNWISE_CHROMIUM, or install it with scripts/ci/provision-system.sh)` };
  return { tools, dir };
}

// ── code-server ───────────────────────────────────────────────────────────────────────────────
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function httpOk(url) {
  return new Promise((resolve) => {
    const req = http.get(url, { timeout: 1000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
    req.on('timeout', () => {
      req.destroy();
      resolve(false);
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The API key of the UI test's endpoint: in code-server's environment only, never typed into the editor. */
const UI_ENDPOINT_KEY = `tw-ui-key-${randomBytes(12).toString('hex')}`;

/** code-server's environment: isolated config/data dirs, nothing inherited that points it at another VS Code. */
function codeServerEnv(tools, state, extra = {}) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    // A VS Code terminal exports VSCODE_IPC_HOOK_CLI etc.; the CLI would then talk to that editor.
    if (k.startsWith('VSCODE_') || k === 'ELECTRON_RUN_AS_NODE') continue;
    env[k] = v;
  }
  return {
    ...env,
    XDG_CONFIG_HOME: path.join(state, 'xdg-config'),
    XDG_DATA_HOME: path.join(state, 'xdg-data'),
    // Tasks that runs synthesize: this test run's folder (npm test's), else one of its own, never ~/.cache.
    TURNWISE_TASK_CACHE: process.env.TURNWISE_TASK_CACHE || path.join(state, 'task-cache'),
    // The suite's index.js loads mocha from the provisioned tools (extension host inherits env).
    TURNWISE_MOCHA: tools.mocha,
    // Lets the suite check that the extension it sees is the one under development here.
    TURNWISE_REPO_ROOT: root,
    // The variable Evaluate Policy's endpoint test names (the key is read from it, never stored).
    TW_UI_ENDPOINT_KEY: UI_ENDPOINT_KEY,
    ...extra,
  };
}

function prepareState(state) {
  const user = path.join(state, 'user');
  fs.mkdirSync(path.join(user, 'User'), { recursive: true });
  fs.mkdirSync(path.join(state, 'ext'), { recursive: true });
  // Quiet, offline-friendly workbench: no welcome page, no update or gallery checks, no AI panel.
  fs.writeFileSync(
    path.join(user, 'User', 'settings.json'),
    JSON.stringify(
      {
        'workbench.startupEditor': 'none',
        'workbench.tips.enabled': false,
        'workbench.enableExperiments': false,
        'telemetry.telemetryLevel': 'off',
        'update.mode': 'none',
        'extensions.autoUpdate': false,
        'extensions.autoCheckUpdates': false,
        'extensions.ignoreRecommendations': true,
        'chat.disableAIFeatures': true,
        'security.workspace.trust.enabled': false,
      },
      null,
      2,
    ),
  );
  return { user, ext: path.join(state, 'ext') };
}

/** Runs code-server's CLI (no server) to completion; resolves with its output. */
function codeServerCli(tools, state, args, timeoutMs = 120000) {
  if (aborted) return Promise.reject(new Error(aborted));
  const { user, ext } = prepareState(state);
  return new Promise((resolve, reject) => {
    const child = spawn(tools.node, [tools.codeServer, '--user-data-dir', user, '--extensions-dir', ext, ...args], {
      env: codeServerEnv(tools, state),
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    groups.add(child.pid);
    stoppers.push(() => stopGroup(child.pid, `code-server ${args[0]}`));
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {}
      reject(new Error(`code-server ${args.join(' ')} did not finish in ${timeoutMs / 1000} s:\n${out}`));
    }, timeoutMs);
    child.on('exit', (code) => {
      clearTimeout(timer);
      groups.delete(child.pid);
      if (code === 0) resolve(out);
      else reject(new Error(`code-server ${args.join(' ')} exited ${code}:\n${out.trim()}`));
    });
  });
}

async function stopGroup(pid, label) {
  if (!groups.has(pid)) return;
  const alive = () => {
    try {
      process.kill(-pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  try {
    process.kill(-pid, 'SIGTERM');
  } catch {}
  for (let i = 0; i < 30 && alive(); i++) await sleep(100);
  if (alive()) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {}
    for (let i = 0; i < 20 && alive(); i++) await sleep(100);
  }
  groups.delete(pid);
  if (alive()) console.error(`could not stop ${label} (process group ${pid})`);
  else if (verbose) say(`stopped ${label}`);
}

/**
 * Starts code-server on a free loopback port in its own process group (it starts helper
 * processes: the group is what gets stopped). Resolves once /healthz answers.
 */
async function startCodeServer(tools, state, workspace, label, { smokeTestDriver = false, extraArgs = [] } = {}) {
  const { user, ext } = prepareState(state);
  for (let attempt = 1; ; attempt++) {
    if (aborted) throw new Error(aborted);
    const port = await freePort();
    const logFile = path.join(resultsDir, `code-server-${label}.log`);
    const log = fs.openSync(logFile, 'w');
    const args = [
      tools.codeServer,
      '--bind-addr',
      `127.0.0.1:${port}`,
      '--auth',
      'none',
      '--user-data-dir',
      user,
      '--extensions-dir',
      ext,
      '--disable-telemetry',
      '--disable-update-check',
      '--disable-workspace-trust',
      '--disable-getting-started-override',
      // Needed for the payload (extensionDevelopmentPath/extensionTestsPath) and the
      // codeAutomation* hooks, but it also suppresses every notification toast: UI tests run without it.
      ...(smokeTestDriver ? ['--vscode-option', 'enable-smoke-test-driver'] : []),
      ...extraArgs,
      workspace,
    ];
    const child = spawn(tools.node, args, { env: codeServerEnv(tools, state), stdio: ['ignore', log, log], detached: true });
    fs.closeSync(log);
    groups.add(child.pid);
    stoppers.push(() => stopGroup(child.pid, `code-server ${label}`));
    let exited;
    child.on('exit', (code, sig) => (exited = sig || code));
    const started = Date.now();
    while (exited === undefined && Date.now() - started < 30000) {
      if (await httpOk(`http://127.0.0.1:${port}/healthz`)) {
        say(
          `code-server ${label} up on 127.0.0.1:${port} in ${((Date.now() - started) / 1000).toFixed(1)} s (log: ${path.relative(root, logFile)})`,
        );
        return { port, base: `http://127.0.0.1:${port}`, pid: child.pid };
      }
      await sleep(100);
    }
    await stopGroup(child.pid, `code-server ${label}`);
    const tail = fs.readFileSync(logFile, 'utf8').trim().split('\n').slice(-15).join('\n');
    // The port was free a moment ago; another process may have taken it. Try once more.
    if (attempt < 2 && /EADDRINUSE/.test(tail)) continue;
    throw new Error(
      `code-server ${label} did not answer /healthz (${exited !== undefined ? `exited: ${exited}` : 'timed out after 30 s'}):\n${tail}`,
    );
  }
}

// ── browser ───────────────────────────────────────────────────────────────────────────────────
async function launchBrowser(tools, state) {
  if (aborted) throw new Error(aborted);
  const require = createRequire(import.meta.url);
  const { chromium } = require(tools.playwrightCore);
  const profile = path.join(state, 'chromium-profile');
  fs.mkdirSync(profile, { recursive: true });
  const launching = chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath,
    headless: true,
    // We stop the browser ourselves, after code-server, on these signals.
    handleSIGINT: false,
    handleSIGTERM: false,
    handleSIGHUP: false,
    viewport: { width: 1400, height: 1000 },
    // Chromium keeps its crash database under $XDG_CONFIG_HOME/chromium whatever the profile:
    // keep that in the run's temporary folder too.
    env: {
      ...process.env,
      XDG_CONFIG_HOME: path.join(state, 'chromium-xdg-config'),
      XDG_CACHE_HOME: path.join(state, 'chromium-xdg-cache'),
    },
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      // Without these Chromium floods the closed network with connection attempts.
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  // Registered before the launch settles, so an interrupt during the launch still closes it.
  stoppers.push(async () => (await launching.catch(() => undefined))?.close());
  const context = await launching;
  if (aborted) throw new Error(aborted);
  return context;
}

/** Writes the page's console to a file; keeps extension activation failures for error messages. */
function pageLog(page, file) {
  const out = fs.createWriteStream(file);
  out.activationErrors = [];
  page.on('console', (m) => {
    const text = m.text();
    out.write(`[${m.type()}] ${text}\n`);
    if (/Activating extension .* failed/.test(text)) out.activationErrors.push(text.split('\n').slice(0, 4).join('\n'));
  });
  page.on('pageerror', (e) => out.write(`[pageerror] ${e.stack || e.message}\n`));
  return out;
}

async function screenshot(page, name) {
  const file = path.join(resultsDir, name);
  await page.screenshot({ path: file });
  return file;
}

// ── a small sequential harness for the UI tests ──────────────────────────────────────────────
async function uiTest(title, fn, { timeoutMs = 120000, dependsOn = [] } = {}) {
  const blocked = dependsOn.find((d) => results.find((r) => r.title === d)?.state !== 'passed');
  if (blocked) {
    record({ title, state: 'skipped', error: `not run: "${blocked}" did not pass` });
    return false;
  }
  const started = Date.now();
  let timer;
  try {
    await Promise.race([
      fn(),
      new Promise((_, rej) => (timer = setTimeout(() => rej(new Error(`timed out after ${timeoutMs / 1000} s`)), timeoutMs))),
    ]);
    record({ title, state: 'passed', ms: Date.now() - started });
    return true;
  } catch (e) {
    record({ title, state: 'failed', ms: Date.now() - started, error: e.stack || e.message || String(e) });
    return false;
  } finally {
    clearTimeout(timer);
  }
}

// ── A: extension-host tests ───────────────────────────────────────────────────────────────────
async function extensionHostTests(tools, context, tmp, workspace) {
  console.log('\nextension-host tests (mocha inside code-server, extension under development: the repository)');
  const groupTitle = 'extension host: test run';
  if (!fs.existsSync(path.join(root, 'dist', 'extension.js'))) {
    record({ title: groupTitle, state: 'failed', error: 'dist/extension.js is missing: run `node scripts/build.mjs` first' });
    return;
  }
  const started = Date.now();
  const server = await startCodeServer(tools, path.join(tmp, 'devhost'), workspace, 'devhost', { smokeTestDriver: true });
  const page = await context.newPage();
  const log = pageLog(page, path.join(resultsDir, 'browser-devhost.log'));
  const hostLog = fs.createWriteStream(path.join(resultsDir, 'extension-host-tests.log'));
  const seen = [];
  let ended = false;
  let resolveExit;
  const exit = new Promise((r) => (resolveExit = r));
  // The smoke-test driver in the workbench calls these: console output of the extension host,
  // then the exit code once the suite's run() settles.
  await page.exposeFunction('codeAutomationLog', (type, args) => {
    const line = format(...(Array.isArray(args) ? args : [args]));
    hostLog.write(`[${type}] ${line}\n`);
    for (const l of line.split('\n')) {
      if (l.startsWith('TURNWISE-TEST-END')) ended = true;
      else if (l.startsWith('TURNWISE-PERF ')) {
        try {
          const p = JSON.parse(l.slice('TURNWISE-PERF '.length));
          perfs.push(p);
          console.log(
            `    perf: ${p.name} = ${p.value}${Object.keys(p).length > 2 ? ` ${JSON.stringify(Object.fromEntries(Object.entries(p).filter(([k]) => k !== 'name' && k !== 'value')))}` : ''}`,
          );
        } catch {}
      } else if (l.startsWith('TURNWISE-TEST ')) {
        try {
          const r = JSON.parse(l.slice('TURNWISE-TEST '.length));
          seen.push(r);
          record({ title: `extension host: ${r.title}`, state: r.state, ms: r.ms, error: r.error });
        } catch {}
      } else if (verbose) console.log(`    [host] ${l}`);
    }
  });
  await page.exposeFunction('codeAutomationExit', (code) => resolveExit(Number(code)));
  const remote = (p) => `vscode-remote://127.0.0.1:${server.port}${p}`;
  const payload = JSON.stringify([
    ['extensionDevelopmentPath', remote(root)],
    ['extensionTestsPath', remote(suiteIndex)],
  ]);
  await page.goto(`${server.base}/?folder=${encodeURIComponent(workspace)}&payload=${encodeURIComponent(payload)}`);
  const limitMs = 240000;
  let timer;
  const code = await Promise.race([exit, new Promise((r) => (timer = setTimeout(() => r('timeout'), limitMs)))]);
  clearTimeout(timer);
  if (code === 'timeout' || code !== 0 || !ended || seen.length === 0) {
    await screenshot(page, 'extension-host-failure.png').catch(() => {});
    const why =
      code === 'timeout'
        ? `the extension host did not report an exit code within ${limitMs / 1000} s`
        : seen.length === 0
          ? `no test reported a result (exit code ${code}); the suite may not have loaded`
          : !ended
            ? `the run stopped before mocha's end (exit code ${code})`
            : seen.some((r) => r.state === 'failed')
              ? undefined // already recorded per test
              : `exit code ${code} though no test failed`;
    if (why) {
      const activation = log.activationErrors.length ? `\n${log.activationErrors.join('\n')}` : '';
      record({
        title: groupTitle,
        state: 'failed',
        error: `${why}.${activation}\nLogs: test-results/vscode/extension-host-tests.log, code-server-devhost.log, browser-devhost.log`,
      });
    }
  }
  say(`extension-host tests done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  await page.close().catch(() => {});
  log.end();
  hostLog.end();
  await stopGroup(server.pid, 'code-server devhost');
}

// ── B: UI tests against the installed .vsix ──────────────────────────────────────────────────
const T_INSTALL = 'ui: turnwise.vsix installs into code-server';
const T_PALETTE = 'ui: "Turnwise: Check Environment" runs from the palette (F1) and notifies "environment ready"';
const T_OUTPUT = 'ui: the "Turnwise" output channel shows the environment report';

async function uiTests(tools, context, tmp, workspace, installing) {
  console.log('\nUI tests (headless Chromium, turnwise.vsix installed)');
  const state = path.join(tmp, 'ui');
  const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
  const extId = `${manifest.publisher}.${manifest.name}`.toLowerCase();

  await uiTest(T_INSTALL, async () => {
    const out = await installing;
    if (!/successfully installed/i.test(out)) throw new Error(`unexpected install output:\n${out}`);
    const list = await codeServerCli(tools, state, ['--list-extensions', '--show-versions']);
    const want = `${extId}@${manifest.version}`;
    if (
      !list
        .split('\n')
        .map((l) => l.trim().toLowerCase())
        .includes(want)
    ) {
      throw new Error(`${want} is not in code-server --list-extensions:\n${list.trim()}`);
    }
  });

  let server;
  let page;
  let browserLog;
  const ready = await uiTest(
    'ui: the workbench opens',
    async () => {
      // A window whose connection drops keeps its extension host 10 s (default: 3 hours, for
      // reconnecting), not for ever: the close test must not depend on how the page goes away.
      server = await startCodeServer(tools, state, workspace, 'ui', { extraArgs: ['--reconnection-grace-time', '10'] });
      page = await context.newPage();
      browserLog = pageLog(page, path.join(resultsDir, 'browser-ui.log'));
      const started = Date.now();
      await page.goto(`${server.base}/?folder=${encodeURIComponent(workspace)}`);
      await page.locator('.monaco-workbench').waitFor({ state: 'visible', timeout: 60000 });
      // The status bar is among the last parts to render: then the workbench takes keys.
      await page.locator('.part.statusbar').waitFor({ state: 'visible', timeout: 60000 });
      say(`workbench rendered in ${((Date.now() - started) / 1000).toFixed(1)} s`);
      await screenshot(page, '01-workbench.png');
    },
    { dependsOn: [T_INSTALL] },
  );

  if (ready) {
    await uiTest(
      T_PALETTE,
      async () => {
        await runFromPalette(page, 'Turnwise: Check Environment');
        // The doctor tries Docker and three ONNX Runtime providers: allow it time, but stop at
        // the first error the workbench shows (a dialog, or the extension's error notification).
        const toast = page.locator('.notification-toast', { hasText: /environment ready/i }).first();
        const problem = page.locator('.monaco-dialog-box, .notification-toast:has(.codicon-error)').first();
        const deadline = Date.now() + 120000;
        while (!(await toast.isVisible())) {
          if (await problem.isVisible()) {
            await screenshot(page, 'ui-error.png').catch(() => {});
            const shown = (await problem.innerText()).replace(/\s+/g, ' ');
            const activation = browserLog.activationErrors.length ? `\n${browserLog.activationErrors.join('\n')}` : '';
            throw new Error(`the workbench shows an error instead of the report: ${shown}${activation}`);
          }
          if (Date.now() > deadline) throw new Error('no "environment ready" notification within 120 s');
          await sleep(250);
        }
        const text = (await toast.innerText()).replace(/\s+/g, ' ');
        if (!/Turnwise: environment ready \(\d+\/\d+ checks passed/.test(text)) throw new Error(`notification reads: ${text}`);
        await screenshot(page, '03-notification.png');
      },
      { timeoutMs: 180000 },
    );
    await uiTest(
      T_OUTPUT,
      async () => {
        // The output view follows the end of the log; maximize the panel so the whole report
        // (with the activation line above it) is on screen, as a user would to read it.
        const maximize = page.locator('.part.panel .action-label[aria-label*="Maximize Panel"]').first();
        await maximize.click({ timeout: 10000 });
        const text = await waitForOutputText(
          page,
          ['Environment check', '✓ docker:', '✓ sandbox images:', '✓ onnxruntime cpu:', 'Environment ready'],
          30000,
        );
        if (!/Turnwise \d+\.\d+\.\d+ activated/.test(text)) throw new Error(`the visible output channel is not Turnwise's:\n${text}`);
        await screenshot(page, '04-output-report.png');
      },
      { dependsOn: [T_PALETTE] },
    );
    await viewUiTests(page, workspace);
  } else {
    for (const t of [T_PALETTE, T_OUTPUT, ...VIEW_TESTS])
      record({ title: t, state: 'skipped', error: 'not run: the workbench did not open' });
  }
  if (page && results.some((r) => r.state === 'failed' && r.title.startsWith('ui:'))) {
    await screenshot(page, 'ui-failure.png').catch(() => {});
  }
  if (page) await page.close().catch(() => {});
  browserLog?.end();
  if (server) await stopGroup(server.pid, 'code-server ui');
}

// ── UI tests of the views (fixture runs in the UI workspace) ─────────────────────────────────
const T_REWARD = 'ui: "Turnwise: Show Reward Panel" draws charts with points, a task table, and overlays a second run';
const T_TRAJ =
  'ui: a trajectory opened from the Runs view steps to turn 2 with the keyboard; decorations, CodeLens and the diff of turn 2 show';
const T_RUN =
  'ui: "Turnwise: Start Training Run…" from the palette runs a tiny run (settings from the workspace) to the end; the status bar advances';
const T_CLOSE = 'ui: closing the window stops the run cleanly: status.json says stopped, no container with its label is left';
const T_MODEL =
  'ui: "Start Training Run…" offers the embedded model or a model folder; a folder that is not a model is refused before a run, saying what to pick; a model folder and a LoRA adapter picked are remembered as settings; a LoRA adapter folder picked as the model skips the adapter step, and one naming a base that is not here asks for the base';
const T_CHAT =
  "ui: a chat model's trajectory shows each reply as text above the command it ran, the checkpoint's chat format, and why a format error was not run";
const T_EVAL =
  'ui: "Evaluate Policy" offers an endpoint beside the checkpoints (URL, model, the key\'s variable name), runs turnwise eval --endpoint to a results file with no key anywhere, and "Compare Evaluations" draws its PASS@(k,T) heatmap';
const VIEW_TESTS = [T_REWARD, T_TRAJ, T_CHAT, T_MODEL, T_EVAL, T_RUN, T_CLOSE];

const webviewFrame = (page) => page.frameLocator('iframe.webview.ready').frameLocator('#active-frame');

async function waitFor(what, fn, timeoutMs = 30000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn().catch((e) => {
      if (/^the run failed/.test(e.message)) throw e;
      return undefined;
    });
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
    await sleep(200);
  }
}

/** Answers the open quick pick: types `text`, waits for a focused row containing it, Enter. */
async function answerQuickPick(page, text) {
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ state: 'visible', timeout: 20000 });
  const focused = page.locator('.quick-input-list .monaco-list-row.focused', { hasText: text });
  // A step that opens while the previous one is still on screen resets the box: fill it again.
  for (let i = 0; ; i++) {
    await input.fill(text);
    const shown = await focused
      .first()
      .waitFor({ state: 'visible', timeout: 3000 })
      .then(
        () => true,
        () => false,
      );
    if (shown) break;
    if (i === 3)
      throw new Error(
        `no quick pick row "${text}" came up; the rows are: ${(await page.locator('.quick-input-list .monaco-list-row').allInnerTexts()).join(' | ')}`,
      );
  }
  await page.keyboard.press('Enter');
}

async function closeEditors(page) {
  await runFromPalette(page, 'View: Close All Editors', { shot: null });
  // Room for the views in the screenshots: the bottom panel and the secondary side bar closed.
  if (
    await page
      .locator('.part.panel')
      .isVisible()
      .catch(() => false)
  )
    await page.keyboard.press('Control+J');
  if (
    await page
      .locator('.part.auxiliarybar')
      .isVisible()
      .catch(() => false)
  )
    await page.keyboard.press('Control+Alt+B');
  await sleep(500);
}

function cliHasTrain() {
  const r = spawnSync(process.execPath, [path.join(root, 'dist', 'cli.js'), 'train', '--help'], { encoding: 'utf8', timeout: 20000 });
  return r.status === 0 && !/unknown command/.test(`${r.stdout}${r.stderr}`);
}

async function viewUiTests(page, workspace) {
  await uiTest(
    T_REWARD,
    async () => {
      await closeEditors(page);
      await runFromPalette(page, 'Turnwise: Show Reward Panel', { shot: null });
      const frame = webviewFrame(page);
      await frame.locator('#chart-passRate canvas').first().waitFor({ state: 'visible', timeout: 30000 });
      const points = await waitFor('chart points', async () => {
        const n = Number(await frame.locator('body').getAttribute('data-points'));
        return n > 0 ? n : undefined;
      });
      // Eight metric charts (ten with the mixed-outcome share and the failure labels of a run that
      // has them), then the advantage histogram (it arrives after the trajectories are read).
      const canvases = await waitFor(
        '9 charts (8 metrics + the advantage histogram)',
        async () => {
          const n = await frame.locator('.uplot canvas').count();
          return n >= 9 ? n : undefined;
        },
        20000,
      );
      await frame.locator('#tasks table tbody tr').first().waitFor({ state: 'visible', timeout: 20000 });
      const rows = await frame.locator('#tasks table tbody tr').count();
      if (rows < 5) throw new Error(`the task table has ${rows} rows`);
      await frame.locator('#status', { hasText: /drawn in/ }).waitFor({ timeout: 10000 });
      await screenshot(page, '05-reward-panel.png');
      say(`reward panel: ${points} points, ${canvases} charts, ${rows} task rows`);
      await frame.locator('#overlay').selectOption(FIXTURE.overlay);
      await frame.locator('#chart-passRate .u-legend', { hasText: '· grpo' }).waitFor({ timeout: 20000 });
      await screenshot(page, '06-reward-overlay.png');
      // The panel says which model and adapter a run trained: the LoRA fixture run as the overlay.
      await frame.locator('#overlay').selectOption(FIXTURE.lora);
      // (The previous overlay's line stays until the panel has read the new run.)
      const modelLine = frame.locator('#model .overlay', { hasText: `overlay ${FIXTURE.lora}:` });
      const said = await modelLine.waitFor({ timeout: 20000 }).then(
        async () => (await modelLine.innerText()).trim(),
        async () =>
          (
            await frame
              .locator('#model .overlay')
              .first()
              .innerText()
              .catch(() => '')
          ).trim(),
      );
      const want = `overlay ${FIXTURE.lora}: model: Qwen2.5-Coder-0.5B-Instruct (${LORA_MODEL}) · adapter: LoRA r 8, lora_alpha 16 on all linear projections; latest checkpoints/2 (PEFT adapter over the model)`;
      if (said !== want) throw new Error(`the reward panel's model line reads "${said}", not "${want}"`);
      await screenshot(page, '06b-reward-lora-overlay.png');
    },
    { dependsOn: [T_INSTALL], timeoutMs: 120000 },
  );

  await uiTest(
    T_TRAJ,
    async () => {
      await closeEditors(page);
      await page
        .locator('.activitybar .action-item a[aria-label^="Turnwise"], .activitybar .action-label[aria-label^="Turnwise"]')
        .first()
        .click({ timeout: 20000 });
      const row = (text) => page.locator('.pane-body .monaco-list-row', { hasText: text }).first();
      for (const label of [FIXTURE.run, 'Iteration 1', 'mut-clamp-compare', 't1-0']) {
        await row(label).waitFor({ state: 'visible', timeout: 20000 });
        await row(label).click();
        await sleep(400);
      }
      const frame = webviewFrame(page);
      await frame.locator('.turn').first().waitFor({ state: 'visible', timeout: 30000 });
      // Turn 3's test run was replayed from the observation cache (the fixture says so): the card
      // says "replayed" where the others give their run time.
      const replayed = await frame.locator('.turn[data-turn="3"] header .replayed').innerText();
      if (replayed !== 'replayed') throw new Error(`turn 3's card says "${replayed}", not "replayed"`);
      const others = await frame.locator('.turn header .replayed').count();
      if (others !== 1) throw new Error(`${others} cards say "replayed"; only turn 3 was`);
      const ran = await frame.locator('.turn[data-turn="1"] header .duration').innerText();
      if (!/^\d+ ms$/.test(ran)) throw new Error(`turn 1's card says "${ran}", not its run time`);
      // An honest episode carries no tampered chip; the fixture's t1-1 is tampered and says why.
      if (await frame.locator('.summary .chip', { hasText: 'tampered' }).count()) throw new Error("t1-0's summary shows a tampered chip");
      await row('t1-1').click();
      await frame.locator('.summary h1', { hasText: 't1-1' }).waitFor({ timeout: 20000 });
      const chipText = await frame.locator('.summary .chip', { hasText: 'tampered' }).innerText();
      if (!/reward 0/.test(chipText)) throw new Error(`t1-1's tampered chip says "${chipText}"`);
      const reason = await frame.locator('.summary .tampered').innerText();
      if (!reason.includes("calc/ops.py: imports pytest's internals")) throw new Error(`t1-1's tampered reason reads "${reason}"`);
      await screenshot(page, '07a-trajectory-tampered.png');
      await row('t1-0').click();
      await frame.locator('.summary h1', { hasText: 't1-0' }).waitFor({ timeout: 20000 });
      await frame.locator('.summary h1').click();
      await page.keyboard.press('j');
      await waitFor('turn 2 in the webview', async () => (await frame.locator('body').getAttribute('data-current-turn')) === '2');
      // The editor shows calc/ops.py after turn 2: the fixed line, decorated, with its lenses.
      const editor = page
        .locator('.editor-instance .monaco-editor', { has: page.locator('.view-lines', { hasText: 'if x > hi:' }) })
        .first();
      await editor.waitFor({ state: 'visible', timeout: 20000 });
      const lensLine = editor.locator('.codelens-decoration', { hasText: /Turn 2 · A \+0\.\d{3}/ }).first();
      await lensLine.waitFor({ state: 'visible', timeout: 20000 });
      const lens = lensLine.locator('a', { hasText: 'Diff' }).first();
      await lens.waitFor({ state: 'visible', timeout: 20000 });
      // The editor shares the window with the trajectory panel: the lenses must fit in it, not be cut off.
      const [lineBox, editorBox] = [await lensLine.boundingBox(), await editor.locator('.overflow-guard').first().boundingBox()];
      if (!lineBox || !editorBox || lineBox.x + lineBox.width > editorBox.x + editorBox.width) {
        throw new Error(
          `the CodeLens line "${(await lensLine.innerText()).trim()}" runs past the editor (${JSON.stringify({ lineBox, editorBox })})`,
        );
      }
      const decorated = await waitFor('advantage decorations', async () => {
        const n = await editor.locator('.view-overlays [class*="ced-"]').count();
        return n > 0 ? n : undefined;
      });
      await screenshot(page, '07-trajectory-turn2.png');
      say(`trajectory viewer: turn 2, ${decorated} decorated line(s)`);
      await lens.click();
      const diff = page.locator('.monaco-diff-editor').first();
      await diff.waitFor({ state: 'visible', timeout: 20000 });
      await diff.locator('.editor.original .view-lines', { hasText: '# BUG: should be >' }).waitFor({ timeout: 20000 });
      await diff.locator('.editor.modified .view-lines', { hasText: 'if x > hi:' }).waitFor({ timeout: 20000 });
      const tabTitle = await page.locator('.tab.active').first().innerText();
      if (!/turn 2/.test(tabTitle)) throw new Error(`the active tab is "${tabTitle}"`);
      await screenshot(page, '08-diff-turn2.png');
    },
    { dependsOn: [T_INSTALL], timeoutMs: 150000 },
  );

  await uiTest(
    T_CHAT,
    async () => {
      await closeEditors(page);
      const row = (text) => page.locator('.pane-body .monaco-list-row', { hasText: text }).first();
      // The previous test left the first fixture run open: fold it, so the rows below are the LoRA run's.
      const first = row(FIXTURE.run);
      if ((await first.getAttribute('aria-expanded').catch(() => null)) === 'true') {
        await first.click();
        await waitFor(`${FIXTURE.run} folded`, async () => (await first.getAttribute('aria-expanded')) === 'false', 10000);
      }
      for (const label of [FIXTURE.lora, 'Iteration 1', 'mut-clamp-compare', 't1-1']) {
        await row(label).waitFor({ state: 'visible', timeout: 20000 });
        await row(label).click();
        await sleep(400);
      }
      const frame = webviewFrame(page);
      const format = frame.locator('.summary .chip.format');
      await format.waitFor({ state: 'visible', timeout: 30000 });
      await frame.locator('.summary h1', { hasText: 't1-1' }).waitFor({ timeout: 20000 });
      const formatText = (await format.innerText()).replace(/\s+/g, ' ').trim();
      if (!/^format chat: the model's own template/.test(formatText)) throw new Error(`the format chip reads "${formatText}"`);
      // Turn 1's reply, markup and all, is text: no element comes out of it.
      const reply = frame.locator('.turn[data-turn="1"] pre.reply');
      const replyText = await reply.innerText();
      const wantReply = 'Let me read the module first (it holds <b>clamp</b> & add).\n\n```bash\ncat calc/ops.py\n```';
      if (replyText.trim() !== wantReply) throw new Error(`turn 1's reply reads ${JSON.stringify(replyText)}`);
      if (await reply.locator('*').count()) throw new Error("turn 1's reply became markup");
      const ran = (await frame.locator('.turn[data-turn="1"] pre.action').innerText()).trim();
      if (ran !== 'cat calc/ops.py') throw new Error(`turn 1 says it ran "${ran}"`);
      // Turn 2 replied with two bash blocks: not run, and the card says why.
      const notRun = (await frame.locator('.turn[data-turn="2"] .not-run').innerText()).trim();
      if (notRun !== 'not run: the reply has 2 ```bash blocks; a turn runs exactly one') throw new Error(`turn 2 says "${notRun}"`);
      if (await frame.locator('.turn[data-turn="2"] pre.action').count()) throw new Error('turn 2 shows a command as if it ran');
      const badge = (await frame.locator('.turn[data-turn="2"] header .exit').innerText()).trim();
      if (badge !== 'format error') throw new Error(`turn 2's header says "${badge}"`);
      await screenshot(page, '07b-trajectory-chat.png');
      say('trajectory viewer: a chat episode, its replies and a format error');
    },
    { dependsOn: [T_INSTALL], timeoutMs: 120000 },
  );

  await uiTest(
    T_MODEL,
    async () => {
      await closeEditors(page);
      const runsBefore = runFolders(workspace).length;
      await runFromPalette(page, 'Turnwise: Start Training Run…', { shot: null });
      await answerQuickPick(page, 'Tasks synthesized earlier');
      // The model step offers the embedded turnwise-tiny and a folder.
      // (The task step's rows stay on screen for a moment after Enter: wait until the list changes.)
      const rows = page.locator('.quick-input-list .monaco-list-row');
      let offered = [];
      const isModelStep = (texts) => texts.some((t) => /Embedded turnwise-tiny/.test(t)) && texts.some((t) => /Model folder…/.test(t));
      await waitFor(
        'the model step',
        async () => {
          offered = (await rows.allInnerTexts()).map((t) => t.replace(/\s+/g, ' ').trim());
          return isModelStep(offered);
        },
        20000,
      ).catch(() => {
        throw new Error(`the model step offers: ${offered.join(' | ')}`);
      });
      await screenshot(page, '08b-model-pick.png');
      await answerQuickPick(page, 'Model folder…');
      // The folder dialog (code-server's own, a path box): the fixture's calc/ folder, which is code, not a model.
      const notModel = path.join(workspace, 'calc');
      const box = page.locator('.quick-input-widget input');
      await box.waitFor({ state: 'visible', timeout: 20000 });
      const target = `${notModel}/`;
      await box.fill(target);
      // The dialog lists the typed folder (its ".." row) before Enter accepts it.
      await page.locator('.quick-input-list .monaco-list-row', { hasText: '..' }).first().waitFor({ state: 'visible', timeout: 10000 });
      await sleep(1000);
      await screenshot(page, '08c-model-folder-dialog.png');
      const refusal = page.locator('.notification-toast', { hasText: /cannot start a run on this model folder/ }).first();
      for (let i = 0; i < 4 && !(await refusal.isVisible()); i++) {
        if (await box.isVisible()) {
          // An Enter that landed while the dialog was still listing may have moved it: type the folder again.
          if ((await box.inputValue()) !== target) {
            await box.fill(target);
            await sleep(1500);
          }
          await page.keyboard.press('Enter');
        }
        await sleep(1500);
      }
      await refusal.waitFor({ state: 'visible', timeout: 20000 });
      const text = (await refusal.innerText()).replace(/\s+/g, ' ');
      await screenshot(page, '08d-model-refused.png');
      for (const needle of [
        `${notModel} has no config.json, so it is not a model folder`,
        'pick a folder that holds config.json',
        'or the embedded turnwise-tiny',
      ]) {
        if (!text.includes(needle)) throw new Error(`the refusal reads "${text}", without "${needle}"`);
      }
      if (runFolders(workspace).length !== runsBefore) throw new Error('a run folder was made for a refused model');
      const settingsFile = path.join(workspace, '.vscode', 'settings.json');
      if (readJson(settingsFile)['turnwise.train.model'])
        throw new Error(`the refused folder was remembered: turnwise.train.model is ${readJson(settingsFile)['turnwise.train.model']}`);
      // A model folder (the shipped turnwise-tiny, as a folder) and a LoRA adapter: both remembered
      // as workspace settings once picked; the run is not started (Escape at the estimator step).
      const tiny = path.join(root, 'models', 'turnwise-tiny');
      await runFromPalette(page, 'Turnwise: Start Training Run…', { shot: null });
      await answerQuickPick(page, 'Tasks synthesized earlier');
      await answerQuickPick(page, 'Model folder…');
      await box.waitFor({ state: 'visible', timeout: 20000 });
      await box.fill(`${tiny}/`);
      // (A folder dialog lists only folders: the model folder's ".." row.)
      await page.locator('.quick-input-list .monaco-list-row', { hasText: '..' }).first().waitFor({ state: 'visible', timeout: 10000 });
      await sleep(1000);
      const adapterStep = page.locator('.quick-input-widget', { hasText: '(3/5): adapter' }).first();
      for (let i = 0; i < 4 && !(await adapterStep.isVisible()); i++) {
        if ((await box.inputValue()) !== `${tiny}/`) {
          await box.fill(`${tiny}/`);
          await sleep(1500);
        }
        await page.keyboard.press('Enter');
        await sleep(1500);
      }
      await answerQuickPick(page, 'LoRA adapter');
      await page.locator('.quick-input-widget', { hasText: 'advantage estimator' }).first().waitFor({ state: 'visible', timeout: 20000 });
      await page.keyboard.press('Escape');
      const kept = await waitFor(
        'the picks in .vscode/settings.json',
        async () => {
          const v = readJson(settingsFile);
          return v['turnwise.train.model'] && v['turnwise.train.lora'] ? v : undefined;
        },
        10000,
      );
      if (kept['turnwise.train.model'] !== tiny)
        throw new Error(`turnwise.train.model is ${JSON.stringify(kept['turnwise.train.model'])}, picked ${tiny}`);
      if (JSON.stringify(kept['turnwise.train.lora']) !== JSON.stringify({ r: 16, lora_alpha: 32, target_modules: 'all-linear' }))
        throw new Error(`turnwise.train.lora is ${JSON.stringify(kept['turnwise.train.lora'])}`);
      if (runFolders(workspace).length !== runsBefore) throw new Error('a run folder was made though the start was cancelled');

      // A LoRA adapter folder as the model (its base, turnwise-tiny, named in adapter_config.json):
      // no adapter step, since the run trains that adapter with its own settings.
      const estimatorStep = page.locator('.quick-input-widget', { hasText: 'advantage estimator' }).first();
      /** Types a folder into code-server's folder dialog and presses Enter until `next` shows. */
      const typeFolder = async (dir, next) => {
        await box.waitFor({ state: 'visible', timeout: 20000 });
        await box.fill(`${dir}/`);
        await page.locator('.quick-input-list .monaco-list-row', { hasText: '..' }).first().waitFor({ state: 'visible', timeout: 10000 });
        await sleep(1000);
        for (let i = 0; i < 4 && !(await next.isVisible()); i++) {
          if ((await box.inputValue()) !== `${dir}/`) {
            await box.fill(`${dir}/`);
            await sleep(1500);
          }
          await page.keyboard.press('Enter');
          await sleep(1500);
        }
        await next.waitFor({ state: 'visible', timeout: 20000 });
      };
      const adapters = adapterFolders(workspace);
      await runFromPalette(page, 'Turnwise: Start Training Run…', { shot: null });
      await answerQuickPick(page, 'Tasks synthesized earlier');
      await answerQuickPick(page, 'Model folder…');
      await typeFolder(adapters.named, estimatorStep);
      await screenshot(page, '08e-adapter-as-model.png');
      await page.keyboard.press('Escape');
      await waitFor(
        'the adapter remembered as turnwise.train.model',
        async () => readJson(settingsFile)['turnwise.train.model'] === adapters.named,
        10000,
      ).catch(() => {
        throw new Error(
          `turnwise.train.model is ${JSON.stringify(readJson(settingsFile)['turnwise.train.model'])}, picked ${adapters.named}`,
        );
      });
      // An adapter naming a hub id (PEFT's habit): the base is asked for, and a copy of the adapter names it.
      await runFromPalette(page, 'Turnwise: Start Training Run…', { shot: null });
      await answerQuickPick(page, 'Tasks synthesized earlier');
      await answerQuickPick(page, 'Model folder…');
      const baseDialog = page
        .locator('.quick-input-widget', { hasText: 'Base model of the adapter hub-lora (it names Qwen/Qwen2.5-Coder-0.5B-Instruct)' })
        .first();
      await typeFolder(adapters.hub, baseDialog);
      await screenshot(page, '08f-adapter-base-asked.png');
      await typeFolder(tiny, estimatorStep);
      await page.keyboard.press('Escape');
      const copy = await waitFor(
        'the adapter copy remembered as turnwise.train.model',
        async () => {
          const v = readJson(settingsFile)['turnwise.train.model'];
          return typeof v === 'string' && v.startsWith(path.join(workspace, '.turnwise', 'adapters', 'hub-lora-')) ? v : undefined;
        },
        10000,
      );
      const named = readJson(path.join(copy, 'adapter_config.json')).base_model_name_or_path;
      if (named !== tiny) throw new Error(`the adapter copy names ${named} as its base, not ${tiny}`);
      if (readJson(path.join(adapters.hub, 'adapter_config.json')).base_model_name_or_path !== 'Qwen/Qwen2.5-Coder-0.5B-Instruct')
        throw new Error("the picked adapter's own adapter_config.json was changed");
      if (runFolders(workspace).length !== runsBefore) throw new Error('a run folder was made though the start was cancelled');
    },
    { dependsOn: [T_INSTALL], timeoutMs: 180000 },
  );

  await uiTest(T_EVAL, () => evaluateEndpointUiTest(page, workspace), { dependsOn: [T_INSTALL], timeoutMs: 300000 });

  if (!cliHasTrain()) {
    for (const t of [T_RUN, T_CLOSE])
      record({ title: t, state: 'skipped', error: 'dist/cli.js has no `train` command; the test runs once the build has one' });
    return;
  }
  const statusItem = page.locator('.statusbar-item', { hasText: /Turnwise/ }).first();
  const failureToast = page.locator('.notification-toast:has(.codicon-error)', { hasText: 'Turnwise' }).first();
  const throwOnFailure = async (shot) => {
    if (await failureToast.isVisible()) {
      await screenshot(page, shot);
      throw new Error(`the run failed: ${(await failureToast.innerText()).replace(/\s+/g, ' ')}`);
    }
  };
  /** Starts a run from the palette on the tasks synthesized earlier with grpo and `iterations`. */
  const startFromPalette = async (iterations) => {
    await closeEditors(page);
    await runFromPalette(page, 'Turnwise: Start Training Run…', { shot: null });
    await answerQuickPick(page, 'Tasks synthesized earlier');
    await answerQuickPick(page, 'Embedded turnwise-tiny');
    await answerQuickPick(page, 'Whole model');
    await answerQuickPick(page, 'grpo');
    await answerQuickPick(page, String(iterations));
    await statusItem.waitFor({ state: 'visible', timeout: 60000 });
  };
  /** The run started after `since` (its folder in the UI workspace), once its status.json exists. */
  const newRun = (since) =>
    waitFor(
      'the run folder',
      async () => {
        await throwOnFailure('ui-run-error.png');
        return runFolders(workspace).find((r) => r.mtimeMs > since && r.status);
      },
      60000,
    );

  await uiTest(
    T_RUN,
    async () => {
      const since = Date.now() - 1000;
      await startFromPalette(1);
      const first = (await statusItem.innerText()).trim();
      await screenshot(page, '09-run-started.png');
      say(`status bar: "${first}"`);
      const run = await newRun(since);
      // The status bar advances through the run's iteration and pass rate, and the run finishes.
      const seen = new Set([first]);
      const done = page.locator('.notification-toast', { hasText: /Turnwise: run \S+ finished/ }).first();
      let shotProgress = false;
      await waitFor(
        'the run to finish',
        async () => {
          await throwOnFailure('10-run-progress.png');
          const t = (await statusItem.innerText()).trim();
          if (!seen.has(t)) say(`status bar: "${t}"`);
          seen.add(t);
          if (!shotProgress && /Turnwise \d+\/1/.test(t) && !/check/.test(t)) {
            shotProgress = true;
            await screenshot(page, '10-run-progress.png');
          }
          return (await done.isVisible()) || undefined;
        },
        420000,
      );
      await screenshot(page, '11-run-finished.png');
      const last = (await statusItem.innerText()).trim();
      say(`status bar went through: ${[...seen].join(' → ')}; finished: "${last}"`);
      if (![...seen, last].some((x) => /Turnwise 1\/1 · pass \d+%/.test(x)))
        throw new Error(`the status bar never showed iteration 1/1 with a pass rate: ${[...seen, last].join(' → ')}`);
      if (seen.size < 2) throw new Error(`the status bar did not advance: ${[...seen].join(' → ')}`);
      const status = readJson(path.join(run.dir, 'status.json'));
      if (status.state !== 'finished') throw new Error(`status.json of ${run.id} says ${status.state}`);
      // The settings reached the run: the launch file under .turnwise/ and the run's own config.
      const launch = launchFiles(workspace).at(-1);
      if (!launch) throw new Error('no .turnwise/launch-*.json was written');
      const cfg = readJson(path.join(run.dir, 'config.json'));
      for (const [key, value] of Object.entries(TINY_RUN_SETTINGS)) {
        const field =
          { 'turnwise.policy.maxActionTokens': 'maxActionTokens', 'turnwise.sandbox.concurrency': 'concurrency' }[key] ??
          key.split('.').at(-1);
        for (const [name, doc] of [
          [path.basename(launch), readJson(launch)],
          ['config.json', cfg],
        ]) {
          if (doc[field] !== value) throw new Error(`${name}: ${field} is ${JSON.stringify(doc[field])}, the setting ${key} is ${value}`);
        }
      }
      if (cfg.estimator !== 'grpo') throw new Error(`config.json: estimator ${cfg.estimator}, picked grpo`);
      // The embedded model and the whole model were picked: no model folder, no LoRA block.
      if (cfg.model !== '' || cfg.lora !== undefined)
        throw new Error(
          `config.json: model ${JSON.stringify(cfg.model)}, lora ${JSON.stringify(cfg.lora)}; picked the embedded turnwise-tiny, whole model`,
        );
      // Picking them cleared what the model test remembered (the embedded model and the whole model are the defaults).
      const ws = readJson(path.join(workspace, '.vscode', 'settings.json'));
      if ('turnwise.train.model' in ws || 'turnwise.train.lora' in ws)
        throw new Error(
          `.vscode/settings.json still holds ${JSON.stringify({ model: ws['turnwise.train.model'], lora: ws['turnwise.train.lora'] })}`,
        );
    },
    { dependsOn: [T_INSTALL], timeoutMs: 480000 },
  );

  if (
    results.find((r) => r.title === T_RUN)?.state !== 'passed' &&
    (await statusItem
      .locator('.codicon-sync')
      .count()
      .catch(() => 0))
  ) {
    await runFromPalette(page, 'Turnwise: Stop Run', { shot: null }).catch(() => {});
  }

  await uiTest(
    T_CLOSE,
    async () => {
      const since = Date.now() - 1000;
      // Three iterations: still going when the window closes.
      await startFromPalette(3);
      const run = await newRun(since);
      const containers = () => dockerIds(['ps', '-a', '--filter', `label=turnwise.run=${run.id}`, '--format', '{{.ID}}']);
      const held = await waitFor(
        `a sandbox container of ${run.id}`,
        async () => {
          await throwOnFailure('12-run-before-close.png');
          const ids = containers();
          return ids.length ? ids : undefined;
        },
        180000,
      );
      await screenshot(page, '12-run-before-close.png');
      say(`closing the window while ${run.id} holds ${held.length} container(s)`);
      await page.close();
      // The extension host shuts down with the window (at once for a window closed cleanly; after
      // the short reconnection grace for a dropped connection), and the extension stops the run.
      const end = await waitFor(
        'the run to stop and its containers to go',
        async () => {
          const status = readJson(path.join(run.dir, 'status.json'));
          const left = containers();
          return status.state !== 'running' && left.length === 0 ? { status, left } : undefined;
        },
        120000,
      );
      if (end.status.state !== 'stopped')
        throw new Error(`status.json of ${run.id} says ${end.status.state}${end.status.error ? `: ${end.status.error.message}` : ''}`);
      say(
        `after closing: ${run.id} is ${end.status.state} (last complete iteration ${end.status.lastCompleteIteration}), no container left`,
      );
      // A new window shows the run as stopped in the Runs view.
      const again = await page.context().newPage();
      try {
        await again.goto(page.url());
        await again.locator('.part.statusbar').waitFor({ state: 'visible', timeout: 60000 });
        await again
          .locator('.activitybar .action-item a[aria-label^="Turnwise"], .activitybar .action-label[aria-label^="Turnwise"]')
          .first()
          .click({ timeout: 30000 });
        const row = again.locator('.pane-body .monaco-list-row', { hasText: run.id }).first();
        await row.waitFor({ state: 'visible', timeout: 30000 });
        const text = (await row.innerText()).replace(/\s+/g, ' ');
        await screenshot(again, '13-after-close-runs-view.png');
        if (!/stopped/.test(text) || !/turnwise-tiny/.test(text))
          throw new Error(`the Runs view shows ${run.id} as: ${text} (stopped, turnwise-tiny expected)`);
      } finally {
        await again.close().catch(() => {});
      }
    },
    { dependsOn: [T_INSTALL, T_RUN], timeoutMs: 420000 },
  );
}

/** Run folders of a workspace with their status, newest first. */
function runFolders(workspace) {
  const root = path.join(workspace, '.turnwise', 'runs');
  let names;
  try {
    names = fs.readdirSync(root);
  } catch {
    return [];
  }
  return names
    .map((id) => {
      const dir = path.join(root, id);
      let status;
      try {
        status = readJson(path.join(dir, 'status.json'));
      } catch {}
      return { id, dir, status, mtimeMs: fs.statSync(dir).birthtimeMs || fs.statSync(dir).mtimeMs };
    })
    .sort((a, b) => b.mtimeMs - a.mtimeMs);
}

function launchFiles(workspace) {
  const dir = path.join(workspace, '.turnwise');
  return fs
    .readdirSync(dir)
    .filter((n) => /^launch-.*\.json$/.test(n))
    .sort()
    .map((n) => path.join(dir, n));
}

const readJson = (file) => JSON.parse(fs.readFileSync(file, 'utf8'));

function dockerIds(args) {
  const r = spawnSync('docker', args, { encoding: 'utf8', timeout: 20000 });
  if (r.status !== 0) throw new Error(`docker ${args.join(' ')}: ${r.stderr || r.error?.message}`);
  return r.stdout.split('\n').filter(Boolean);
}

/**
 * F1, type the command's title, wait until the palette row carrying that title is the focused
 * one, then Enter. Contributed commands reach the palette a few seconds after the workbench
 * renders, so the palette is reopened until the row shows up.
 */
async function runFromPalette(page, title, { shot = '02-palette.png' } = {}) {
  const deadline = Date.now() + 60000;
  const input = page.locator('.quick-input-widget input');
  const row = page.locator('.quick-input-list .monaco-list-row', { hasText: title });
  for (;;) {
    await page.keyboard.press('F1');
    await input.waitFor({ state: 'visible', timeout: 10000 });
    await input.fill(`>${title}`);
    try {
      await row.first().waitFor({ state: 'visible', timeout: 5000 });
      const focused = page.locator('.quick-input-list .monaco-list-row.focused');
      await focused.waitFor({ state: 'visible', timeout: 5000 });
      const label = (await focused.innerText()).replace(/\s+/g, ' ');
      if (!label.includes(title)) throw new Error(`focused palette row is "${label}"`);
      if (shot) await screenshot(page, shot);
      await page.keyboard.press('Enter');
      return;
    } catch (e) {
      await page.keyboard.press('Escape');
      if (Date.now() > deadline) throw new Error(`the palette never offered "${title}": ${e.message}`, { cause: e });
      await sleep(1000);
    }
  }
}

/**
 * An OpenAI-compatible server for Evaluate Policy's endpoint test: lists one model and answers
 * every turn with `submit`, refusing requests without the key from TW_UI_ENDPOINT_KEY. It stands
 * in for vLLM or a hosted API; what is under test is the editor's flow and the CLI it runs.
 */
function scriptedEndpoint() {
  const seen = { models: 0, chats: 0, refused: 0 };
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      const send = (code, v) => {
        res.writeHead(code, { 'content-type': 'application/json' });
        res.end(JSON.stringify(v));
      };
      if (req.headers.authorization !== `Bearer ${UI_ENDPOINT_KEY}`) {
        seen.refused++;
        return send(401, { error: { message: 'invalid api key', type: 'authentication_error' } });
      }
      if (req.method === 'GET' && req.url === '/v1/models') {
        seen.models++;
        return send(200, { object: 'list', data: [{ id: 'scripted-agent', object: 'model' }] });
      }
      if (req.method === 'POST' && req.url === '/v1/chat/completions') {
        seen.chats++;
        return send(200, {
          id: `c${seen.chats}`,
          object: 'chat.completion',
          model: 'scripted-agent',
          choices: [{ index: 0, message: { role: 'assistant', content: 'submit' }, finish_reason: 'stop' }],
        });
      }
      send(404, { error: { message: 'no route' } });
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({ url: `http://127.0.0.1:${server.address().port}/v1`, seen, close: () => new Promise((r) => server.close(r)) }),
    ),
  );
}

/** Files under `dir` (up to 8 MiB each) whose bytes hold `needle`. */
function filesHolding(dir, needle) {
  const hits = [];
  const walk = (d) => {
    let entries;
    try {
      entries = fs.readdirSync(d, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const f = path.join(d, e.name);
      if (e.isDirectory()) walk(f);
      else if (e.isFile()) {
        try {
          if (fs.statSync(f).size <= 8 * 1024 * 1024 && fs.readFileSync(f).includes(needle)) hits.push(f);
        } catch {}
      }
    }
  };
  walk(dir);
  return hits;
}

async function evaluateEndpointUiTest(page, workspace) {
  await closeEditors(page);
  const endpoint = await scriptedEndpoint();
  try {
    const evalsDir = path.join(workspace, '.turnwise', 'evals');
    const before = fs.existsSync(evalsDir) ? fs.readdirSync(evalsDir) : [];
    await runFromPalette(page, 'Turnwise: Evaluate Policy', { shot: null });
    // The first step offers an endpoint beside the workspace's checkpoints.
    const rows = page.locator('.quick-input-list .monaco-list-row');
    let offered = [];
    await waitFor(
      'the checkpoint-or-endpoint step',
      async () => {
        offered = (await rows.allInnerTexts()).map((t) => t.replace(/\s+/g, ' ').trim());
        return offered.some((t) => t.includes('Endpoint…')) && offered.some((t) => /checkpoint \d/.test(t));
      },
      20000,
    ).catch(() => {
      throw new Error(`the first step offers: ${offered.join(' | ')}`);
    });
    await screenshot(page, '14-eval-pick.png');
    await answerQuickPick(page, 'Endpoint…');
    const box = page.locator('.quick-input-widget input');
    const step = (title) => page.locator('.quick-input-widget', { hasText: title }).first();
    for (const [title, value] of [
      ['endpoint URL (1/3)', endpoint.url],
      ['model (2/3)', 'scripted-agent'],
      ['API key variable (3/3)', 'TW_UI_ENDPOINT_KEY'],
    ]) {
      await step(title).waitFor({ state: 'visible', timeout: 20000 });
      await box.fill(value);
      await sleep(300);
      if (title.startsWith('API')) await screenshot(page, '15-eval-key-variable.png');
      await page.keyboard.press('Enter');
    }
    await answerQuickPick(page, '2 sampled episodes per task');
    // The task file: code-server's file dialog, a path box.
    const tasks = path.join(workspace, '.turnwise', 'tasks', 'synth.jsonl');
    const progress = page.locator('.notification-toast, .notifications-center', { hasText: /Turnwise: evaluating/ }).first();
    await box.waitFor({ state: 'visible', timeout: 20000 });
    for (let i = 0; i < 5 && !(await progress.isVisible()); i++) {
      if (await box.isVisible()) {
        if ((await box.inputValue()) !== tasks) {
          await box.fill(tasks);
          await sleep(1500);
        }
        await page.keyboard.press('Enter');
      }
      await sleep(1500);
    }
    const done = page.locator('.notification-toast', { hasText: /evaluation finished/ }).first();
    const failed = page.locator('.notification-toast:has(.codicon-error)', { hasText: 'Turnwise' }).first();
    await waitFor(
      'the evaluation to finish',
      async () => {
        if (await failed.isVisible()) {
          await screenshot(page, 'eval-failure.png');
          throw new Error(`the run failed: ${(await failed.innerText()).replace(/\s+/g, ' ')}`);
        }
        return done.isVisible();
      },
      240000,
    );
    const text = (await done.innerText()).replace(/\s+/g, ' ');
    await screenshot(page, '16-eval-finished.png');
    const made = fs.readdirSync(evalsDir).filter((n) => !before.includes(n));
    if (made.length !== 1) throw new Error(`expected one new results file in .turnwise/evals, found ${made.join(', ') || 'none'}`);
    const file = path.join(evalsDir, made[0]);
    if (!text.includes(path.join('.turnwise', 'evals', made[0])))
      throw new Error(`the notification reads "${text}", not naming ${made[0]}`);
    const header = JSON.parse(fs.readFileSync(file, 'utf8').split('\n')[0]);
    const want = { kind: 'endpoint', url: endpoint.url, model: 'scripted-agent', keyEnv: 'TW_UI_ENDPOINT_KEY' };
    for (const [k, v] of Object.entries(want))
      if (header.model[k] !== v)
        throw new Error(`the results header's model.${k} is ${JSON.stringify(header.model[k])}, not ${JSON.stringify(v)}`);
    if (header.samples !== 2 || header.tasks.ids.length !== 4)
      throw new Error(`the header says ${header.samples} samples of ${header.tasks.ids.length} tasks`);
    if (endpoint.seen.chats < 12 || endpoint.seen.refused > 0) throw new Error(`the server saw ${JSON.stringify(endpoint.seen)}`);
    // The key: in code-server's environment only; not in the workspace, the results, the settings or the editor's state.
    const leaks = [...filesHolding(workspace, UI_ENDPOINT_KEY), ...filesHolding(path.join(path.dirname(workspace), 'ui'), UI_ENDPOINT_KEY)];
    if (leaks.length) throw new Error(`the API key is written in ${leaks.join(', ')}`);
    // Compare Evaluations from the notification: the reward panel's evaluations view, this file chosen, its heatmap drawn.
    await done.locator('a.monaco-button, .monaco-button', { hasText: 'Compare Evaluations' }).first().click();
    const frame = webviewFrame(page);
    const cells = frame.locator('#heatmaps td.hm-cell[data-k]');
    const maxTurns = header.maxTurns;
    await waitFor('the PASS@(k,T) heatmap', async () => (await cells.count()) === 2 * maxTurns, 30000).catch(async () => {
      throw new Error(`the heatmap has ${await cells.count()} cells, not 2 × ${maxTurns}`);
    });
    const curves = await frame.locator('#pass-curves path.curve').count();
    if (curves !== maxTurns) throw new Error(`the pass curves chart has ${curves} curves, not one per T (${maxTurns})`);
    const swatches = await frame.locator('#hm-scale .hm-swatch').count();
    if (swatches !== 5) throw new Error(`the heatmap's colour scale has ${swatches} swatches, not 5`);
    const label = await frame.locator('.heatmap-card h3').first().innerText();
    if (!label.includes('scripted-agent')) throw new Error(`the heatmap is labelled "${label}"`);
    const rowsShown = await frame.locator('#eval-models-table tbody tr').count();
    if (rowsShown < 2) throw new Error(`the models' table has ${rowsShown} rows`);
    await sleep(500);
    await screenshot(page, '17-eval-heatmap.png');
  } finally {
    await endpoint.close();
  }
}

/** Polls the panel's output editor until every needle is visible; returns its text. */
async function waitForOutputText(page, needles, timeoutMs) {
  const view = page.locator('.part.panel .monaco-editor .view-lines');
  const deadline = Date.now() + timeoutMs;
  let text = '';
  for (;;) {
    if ((await view.count()) > 0) text = (await view.first().innerText()).replace(/\u00a0/g, ' ');
    const missing = needles.filter((n) => !text.includes(n));
    if (missing.length === 0) return text;
    if (Date.now() > deadline)
      throw new Error(
        `the output panel does not show ${missing.map((m) => `"${m}"`).join(', ')}; it shows:\n${text || '(no output editor visible)'}`,
      );
    await sleep(250);
  }
}

// ── fixture workspaces ───────────────────────────────────────────────────────────────────────
const FIXTURE = {
  run: 'fixture__turnwise__1__20250101-120000',
  overlay: 'fixture__grpo__2__20250101-110000',
  long: 'long__turnwise__3__20240101-000000',
  big: 'big__turnwise__4__20230101-000000',
  lora: 'lora__grpo__5__20220101-000000',
};
/** The LoRA fixture run's model folder (named in its config.json; the views only read the name). */
const LORA_MODEL = '/models/Qwen2.5-Coder-0.5B-Instruct';

/** Two LoRA adapters on turnwise-tiny beside a workspace: one naming its base folder, one a hub id. */
function adapterFolders(dir) {
  return { named: `${dir}-adapters/tiny-lora`, hub: `${dir}-adapters/hub-lora` };
}

function makeWorkspace(dir, { big }) {
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'README.md'), '# Turnwise VS Code tier workspace\n');
  const gen = (args) => {
    const r = spawnSync(
      process.execPath,
      ['-r', 'tsx/cjs', path.join(root, 'test', 'support', 'runFixture.ts'), '--workspace', dir, ...args],
      { cwd: root, encoding: 'utf8' },
    );
    if (r.status !== 0) throw new Error(`runFixture.ts ${args.join(' ')} failed:\n${r.stderr}`);
  };
  gen(['--files', '--run-id', FIXTURE.run, '--estimator', 'turnwise', '--iterations', '3', '--seed', '1']);
  gen(['--run-id', FIXTURE.overlay, '--estimator', 'grpo', '--iterations', '3', '--seed', '2']);
  gen(['--run-id', FIXTURE.long, '--iterations', '1000', '--seed', '3', '--metrics-only']);
  gen([
    '--run-id',
    FIXTURE.lora,
    '--estimator',
    'grpo',
    '--iterations',
    '2',
    '--seed',
    '5',
    '--model',
    LORA_MODEL,
    '--lora-r',
    '8',
    '--chat',
  ]);
  if (big) gen(['--run-id', FIXTURE.big, '--iterations', '1', '--trajectories', '10000', '--seed', '4']);
  const tiny = path.join(root, 'models', 'turnwise-tiny');
  const adapters = adapterFolders(dir);
  for (const [out, base] of [
    [adapters.named, tiny],
    [adapters.hub, 'Qwen/Qwen2.5-Coder-0.5B-Instruct'],
  ]) {
    const r = spawnSync(
      process.execPath,
      ['-r', 'tsx/cjs', path.join(root, 'test', 'support', 'adapterFixture.ts'), '--model', tiny, '--out', out, '--base-name', base],
      { cwd: root, encoding: 'utf8' },
    );
    if (r.status !== 0) throw new Error(`adapterFixture.ts failed:\n${r.stderr}`);
  }
  // Tasks "synthesized earlier", which "Start Training Run…" offers first: real mutations of
  // calc/ops.py that its tests catch, so a run from the palette trains on them.
  fs.mkdirSync(path.join(dir, '.turnwise', 'tasks'), { recursive: true });
  fs.writeFileSync(path.join(dir, '.turnwise', 'tasks', 'synth.jsonl'), mutationTasks(dir));
  // A tiny run, set the way a user would: workspace settings (they reach the run's launch file).
  fs.mkdirSync(path.join(dir, '.vscode'), { recursive: true });
  fs.writeFileSync(path.join(dir, '.vscode', 'settings.json'), JSON.stringify(TINY_RUN_SETTINGS, null, 2));
}

/** Settings of the UI workspace: one iteration of one task, 2 episodes of 2 turns. */
const TINY_RUN_SETTINGS = {
  'turnwise.train.iterations': 1,
  'turnwise.tasks.maxTasks': 4,
  'turnwise.train.tasksPerIteration': 1,
  'turnwise.train.groupSize': 2,
  'turnwise.train.branchEpisodes': 1,
  'turnwise.train.maxTurns': 2,
  'turnwise.policy.maxActionTokens': 32,
  'turnwise.sandbox.concurrency': 2,
};

/** Task JSONL: mutations of the fixture's calc/ops.py, each breaking one of its two tests. */
function mutationTasks(dir) {
  const src = fs.readFileSync(path.join(dir, 'calc', 'ops.py'), 'utf8');
  // The command `turnwise tasks synth` would write (it runs pytest the hardened way, with a report).
  const r = spawnSync(
    process.execPath,
    ['-r', 'tsx/cjs', '-e', "process.stdout.write(require('./src/tasks/runners').runnerCommand('pytest', ['tests/test_ops.py']))"],
    { cwd: root, encoding: 'utf8' },
  );
  if (r.status !== 0 || !r.stdout) throw new Error(`runnerCommand failed:\n${r.stderr}`);
  const testCommand = r.stdout;
  const muts = [
    ['mut-clamp-compare', 'if x > hi:', 'if x < hi:', 'test_clamp', 'test_add', 'comparison_operator', 'swap-comparison'],
    ['mut-add-sign', 'return a + b', 'return a - b', 'test_add', 'test_clamp', 'binary_operator', 'swap-arithmetic'],
    ['mut-clamp-return', 'return hi', 'return lo', 'test_clamp', 'test_add', 'identifier', 'swap-identifier'],
    ['mut-add-mul', 'return a + b', 'return a * b', 'test_add', 'test_clamp', 'binary_operator', 'swap-arithmetic'],
  ];
  return (
    muts
      .map(([id, text, replacement, f2p, p2p, nodeKind, operator]) => {
        const start = src.indexOf(text);
        if (start < 0) throw new Error(`"${text}" is not in the fixture's calc/ops.py`);
        return JSON.stringify({
          schema: 'turnwise/task@1',
          id,
          source: 'mutation',
          language: 'python',
          instruction: 'A test of calc/ops.py fails. Find the bug and fix it; do not edit the tests.',
          testCommand,
          runner: 'pytest',
          reportFormat: 'junit-xml',
          fail_to_pass: [`tests/test_ops.py::${f2p}`],
          pass_to_pass: [`tests/test_ops.py::${p2p}`],
          mutation: { file: 'calc/ops.py', nodeKind, operator, replacement, span: { start, end: start + text.length, text } },
        });
      })
      .join('\n') + '\n'
  );
}

// ── main ──────────────────────────────────────────────────────────────────────────────────────
async function main() {
  if (process.env.TURNWISE_SKIP_VSCODE === '1') {
    say('SKIPPED: TURNWISE_SKIP_VSCODE=1 (CI never sets it)');
    record({ title: 'vscode tier', state: 'skipped', error: 'TURNWISE_SKIP_VSCODE=1' });
    return;
  }
  const found = loadTools();
  if (found.missing) {
    record({
      title: 'vscode tier: test tools',
      state: 'failed',
      error: `${found.missing}. Install them with scripts/ci/provision-vscode-test.sh (or point TURNWISE_VSCODE_TOOLS at a provisioned folder); set TURNWISE_SKIP_VSCODE=1 only to skip this tier on purpose.`,
    });
    return;
  }
  const { tools } = found;
  say(`tools: ${found.dir} (code-server ${tools.codeServerVersion || '?'})`);
  fs.rmSync(resultsDir, { recursive: true, force: true });
  fs.mkdirSync(resultsDir, { recursive: true });
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'turnwise-vscode-'));
  tmpDir = tmp;
  stoppers.push(() => fs.rmSync(tmp, { recursive: true, force: true, maxRetries: 3 }));
  // Two workspaces with fixture runs (test/support/runFixture.ts): the extension-host one also
  // holds a run with 10,000 trajectories for the Runs view timing.
  const workspace = path.join(tmp, 'workspace');
  const uiWorkspace = path.join(tmp, 'ui-workspace');
  makeWorkspace(workspace, { big: true });
  makeWorkspace(uiWorkspace, { big: false });

  // Install the .vsix (its own code-server state) while the extension-host tests run.
  const installing = fs.existsSync(vsixPath)
    ? codeServerCli(tools, path.join(tmp, 'ui'), ['--install-extension', vsixPath], 180000)
    : Promise.reject(new Error(`${vsixPath} does not exist: run \`npm run package\` first`));
  installing.catch(() => {}); // reported by the install test

  const context = await launchBrowser(tools, tmp);
  try {
    await extensionHostTests(tools, context, tmp, workspace);
  } catch (e) {
    record({ title: 'extension host: test run', state: 'failed', error: e.stack || e.message });
  }
  await uiTests(tools, context, tmp, uiWorkspace, installing);
}

const guard = setTimeout(() => {
  abort(`the tier ran past ${tierLimitMs / 1000} s (TURNWISE_VSCODE_TIMEOUT_S)`);
  cleanup().finally(() => {
    finish();
    process.exit(1);
  });
}, tierLimitMs);
guard.unref();

main()
  .catch((e) => record({ title: 'vscode tier', state: 'failed', error: e.stack || e.message }))
  .finally(async () => {
    await cleanup();
    finish();
    // Nothing should be left running; exit now rather than wait on a stray handle.
    process.exit(process.exitCode ?? 0);
  });
