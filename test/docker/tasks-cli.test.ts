// `turnwise tasks synth --json` end to end on the Python fixture: summary counts add up and the
// written file passes `tasks check`.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { main } from '../../src/cli/main';
import { readTaskFile } from '../../src/tasks/taskfile';
import { MUTATION_OPERATORS } from '../../src/tasks/mutate';

describe('docker: turnwise tasks synth --json', function () {
  this.timeout(180_000);
  let dir: string;
  before(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-synth-cli-'))));
  after(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('writes valid tasks and a summary with counts per operator and drop reasons', async () => {
    const out = path.join(dir, 'tasks.jsonl');
    let stdout = '';
    const ws = path.join(__dirname, '..', 'fixtures', 'py-shop');
    const code = await main(['tasks', 'synth', '--workspace', ws, '--out', out, '--max', '5', '--seed', '11', '--json'], {
      out: (t) => (stdout += t),
      err: () => undefined,
    });
    assert.equal(code, 0, stdout);
    const doc = JSON.parse(stdout);
    assert.equal(doc.ok, true);
    assert.equal(doc.tasks, 5);
    const s = doc.summary;
    assert.deepEqual(Object.keys(s.operators).sort(), [...MUTATION_OPERATORS].sort());
    assert.deepEqual(Object.keys(s.dropped).sort(), [
      'collection-broken',
      'no-failing-test',
      'no-report',
      'sandbox-error',
      'scoring-check',
      'timeout',
    ]);
    // Every mutant the tests caught had its no-op and reference fix scored, and scored right.
    assert.ok(s.scoring.checked >= 5, JSON.stringify(s.scoring));
    assert.equal(s.scoring.passed, s.scoring.checked, JSON.stringify(s.scoring));
    assert.equal(s.baseline.unstable, 0);
    const kept = Object.values(s.operators as Record<string, { kept: number }>).reduce((a, o) => a + o.kept, 0);
    assert.equal(kept, 5);
    assert.equal(s.candidates.tried, s.candidates.kept + s.candidates.dropped + s.candidates.surplus);
    const tasks = readTaskFile(out);
    assert.equal(tasks.length, 5);
    assert.equal(new Set(tasks.map((t) => t.id)).size, 5);
    // Same seed → same tasks (ids are hashes of the mutated file).
    const out2 = path.join(dir, 'again.jsonl');
    await main(['tasks', 'synth', '--workspace', ws, '--out', out2, '--max', '5', '--seed', '11', '--concurrency', '1', '--json'], {
      out: () => undefined,
      err: () => undefined,
    });
    assert.deepEqual(
      readTaskFile(out2).map((t) => t.id),
      tasks.map((t) => t.id),
    );
  });
});
