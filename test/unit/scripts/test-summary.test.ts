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
});
