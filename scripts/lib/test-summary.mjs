// The closing summary of `npm test` (scripts/test.mjs), kept apart so it can be unit-tested.
// A result is { tier, passed, failed, skipped, error? } for a tier that ran (skipped counts
// skipped tests) or { tier, tierSkipped: true, reason } for a tier that did not run at all.

/** The summary lines and the totals; the last line is "total: N passed, N failed, N skipped". */
export function summarize(results) {
  const lines = [];
  let passed = 0;
  let failed = 0;
  let skipped = 0;
  for (const r of results) {
    if (r.tierSkipped) {
      lines.push(`  ${r.tier.padEnd(7)} SKIPPED (${r.reason})`);
      continue;
    }
    passed += r.passed;
    failed += r.failed;
    skipped += r.skipped;
    lines.push(`  ${r.tier.padEnd(7)} ${r.passed} passed, ${r.failed} failed, ${r.skipped} skipped${r.error ? `  (${r.error})` : ''}`);
  }
  lines.push(`total: ${passed} passed, ${failed} failed, ${skipped} skipped`);
  return { lines, passed, failed, skipped };
}
