// The closing summary of `npm test`. A tier with skipped tests once printed as "SKIPPED" and its
// counts were dropped from the total (a numeric `skipped` was read as "the tier was skipped").
import * as assert from 'node:assert/strict';
import * as path from 'node:path';

describe('scripts/lib/test-summary', () => {
  it('counts a tier with skipped tests, and tells a tier that did not run apart', async () => {
    const { summarize } = (await import(path.resolve(__dirname, '../../../scripts/lib/test-summary.mjs'))) as {
      summarize: (r: object[]) => { lines: string[]; passed: number; failed: number; skipped: number };
    };
    const s = summarize([
      { tier: 'unit', passed: 337, failed: 0, skipped: 1 },
      { tier: 'docker', tierSkipped: true, reason: 'TURNWISE_SKIP_DOCKER=1' },
      { tier: 'vscode', passed: 8, failed: 1, skipped: 0, error: 'boom' },
    ]);
    assert.deepEqual(s.lines, [
      '  unit    337 passed, 0 failed, 1 skipped',
      '  docker  SKIPPED (TURNWISE_SKIP_DOCKER=1)',
      '  vscode  8 passed, 1 failed, 0 skipped  (boom)',
      'total: 345 passed, 1 failed, 1 skipped',
    ]);
    assert.equal(s.failed, 1);
  });

  it('names each failed test under its tier with the first line of its message, so the tail of a long log says what failed', async () => {
    const { summarize } = (await import(path.resolve(__dirname, '../../../scripts/lib/test-summary.mjs'))) as {
      summarize: (r: object[]) => { lines: string[] };
    };
    const long = 'x'.repeat(400);
    const s = summarize([
      {
        tier: 'unit',
        passed: 10,
        failed: 2,
        skipped: 0,
        failures: [
          { title: 'a suite a test', error: '\nexpected 1 to equal 2\n  at stack' },
          { title: 'b long', error: long },
        ],
      },
    ]);
    assert.equal(s.lines[1], '    ✗ a suite a test: expected 1 to equal 2');
    assert.equal(s.lines[2], `    ✗ b long: ${'x'.repeat(299)}…`);
    assert.equal(s.lines.at(-1), 'total: 10 passed, 2 failed, 0 skipped');
  });
});
