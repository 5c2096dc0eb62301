// Entry point the extension host loads as extensionTestsPath: runs the *.test.js files in this
// folder with mocha inside the real extension host and reports each test as one machine-readable
// line ("TURNWISE-TEST {json}") that test/vscode/run.mjs reads back through codeAutomationLog.
// mocha comes from the provisioned test tools (TURNWISE_MOCHA, set by run.mjs on code-server's
// environment, which the extension host inherits); mocha 11 because 12 is ESM-only.
const fs = require('node:fs');
const path = require('node:path');

const MARK = 'TURNWISE-TEST';

function reporterFactory(Mocha) {
  const { EVENT_TEST_PASS, EVENT_TEST_FAIL, EVENT_TEST_PENDING, EVENT_RUN_END } = Mocha.Runner.constants;
  return class LineReporter {
    constructor(runner) {
      const emit = (state, test, err) =>
        console.log(
          `${MARK} ${JSON.stringify({ state, title: test.fullTitle(), ms: test.duration ?? 0, error: err ? String(err.stack || err.message || err) : undefined })}`,
        );
      runner.on(EVENT_TEST_PASS, (t) => emit('passed', t));
      runner.on(EVENT_TEST_FAIL, (t, err) => emit('failed', t, err));
      runner.on(EVENT_TEST_PENDING, (t) => emit('skipped', t));
      runner.on(EVENT_RUN_END, () => console.log(`${MARK}-END`));
    }
  };
}

// eslint-disable-next-line no-redeclare -- VS Code calls the suite's exported `run`
function run() {
  const Mocha = require(process.env.TURNWISE_MOCHA || 'mocha');
  const mocha = new Mocha({ ui: 'bdd', timeout: 60000, color: false, reporter: reporterFactory(Mocha) });
  for (const f of fs
    .readdirSync(__dirname)
    .filter((f) => f.endsWith('.test.js'))
    .sort()) {
    mocha.addFile(path.join(__dirname, f));
  }
  return new Promise((resolve, reject) => {
    try {
      mocha.run((failures) => (failures > 0 ? reject(new Error(`${failures} test(s) failed`)) : resolve()));
    } catch (e) {
      reject(e);
    }
  });
}

module.exports = { run };
