// The closing summary of `npm test` (scripts/test.mjs), kept apart so it can be unit-tested.
// A result is { tier, passed, failed, skipped, error?, failures? } for a tier that ran (skipped
// counts skipped tests; failures lists {title, error} of each failed test) or
// { tier, tierSkipped: true, reason } for a tier that did not run at all.
// Each failed test is named again here, under its tier: a long run's log is often read from its
// tail only, and the tier's own report of the failure may be thousands of lines above it.

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
    for (const f of r.failures ?? []) lines.push(`    ✗ ${f.title}: ${firstLine(f.error)}`);
  }
  lines.push(`total: ${passed} passed, ${failed} failed, ${skipped} skipped`);
  return { lines, passed, failed, skipped };
}

/** An error message's first non-empty line, cut to 300 characters. */
export function firstLine(message) {
  const line =
    String(message ?? '')
      .split('\n')
      .find((l) => l.trim()) ?? '(no message)';
  return line.length > 300 ? `${line.slice(0, 299)}…` : line;
}
