// What `turnwise tasks synth` prints: tests that fail on the unchanged workspace, and tests that
// passed in only one of the two baseline runs, are named apart (no task uses either).
import * as assert from 'node:assert/strict';
import { formatSynthSummary } from '../../../src/cli/commands/tasks';
import type { SynthSummary } from '../../../src/tasks/synth';

const summary = (failing: number, unstable: number): SynthSummary =>
  ({
    runner: 'pytest',
    baseline: { tests: 204, passing: 204 - failing - unstable, failing, unstable, durationMs: 3000 },
    operators: {},
    candidates: { generated: 1, duplicates: 0, tried: 1, kept: 1, dropped: 0, surplus: 0 },
    dropped: {},
    scoring: { checked: 1, passed: 1, failed: {}, firstDetail: {} },
    tasksPerMinute: 1,
    concurrency: 1,
  }) as unknown as SynthSummary;

describe('cli: tasks synth summary', () => {
  it('names the tests that fail before any change, and the unstable ones', () => {
    const text = formatSynthSummary(summary(1, 2), 'tasks.jsonl', 1);
    assert.match(text, /^suite: pytest, 201\/204 passing/m);
    assert.match(
      text,
      /^1 test\(s\) fail on the unchanged workspace: no task uses them, and the agent's tw-test and tw-suspects do not count them$/m,
    );
    assert.match(text, /^2 test\(s\) passed in only one of two runs of the suite: no task uses them$/m);
  });

  it('says nothing of either when there are none', () => {
    const text = formatSynthSummary(summary(0, 0), 'tasks.jsonl', 1);
    assert.ok(!/unchanged workspace|only one of two runs/.test(text), text);
  });
});
