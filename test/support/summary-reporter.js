// Mocha reporter: the usual spec output, plus the counts written as JSON to
// $TURNWISE_TEST_SUMMARY so scripts/test.mjs can print one summary across tiers.
'use strict';
const fs = require('node:fs');
const Mocha = require('mocha');

class SummaryReporter extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    const failures = [];
    runner.on('fail', (test, err) => failures.push({ title: test.fullTitle(), error: String(err && err.message) }));
    runner.once('end', () => {
      const file = process.env.TURNWISE_TEST_SUMMARY;
      if (!file) return;
      const s = runner.stats || {};
      fs.writeFileSync(file, JSON.stringify({ passed: s.passes || 0, failed: s.failures || 0, skipped: s.pending || 0, failures }));
    });
  }
}
module.exports = SummaryReporter;
