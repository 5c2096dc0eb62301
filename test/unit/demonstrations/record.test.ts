// demonstrationTaskIds: the ids a checkpoint was warm-started on keep those tasks out of the
// held-out split, so a warmstart.json that is there but unreadable must stop the run, never read
// as "no demonstrations".
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { demonstrationTaskIds } from '../../../src/demonstrations/record';

describe('demonstrations/record: demonstrationTaskIds', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-demo-ids-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('reads the recorded ids; a checkpoint without the file, or a record without ids, has none', () => {
    assert.deepEqual(demonstrationTaskIds(dir), []);
    fs.writeFileSync(path.join(dir, 'warmstart.json'), JSON.stringify({ phases: [{}] }));
    assert.deepEqual(demonstrationTaskIds(dir), []);
    fs.writeFileSync(path.join(dir, 'warmstart.json'), JSON.stringify({ demonstrationTaskIds: ['mut-a', 'mut-b'] }));
    assert.deepEqual(demonstrationTaskIds(dir), ['mut-a', 'mut-b']);
  });

  for (const [what, write] of [
    ['cut short (not JSON)', (f: string) => fs.writeFileSync(f, '{"demonstrationTaskIds": ["mut-a", ')],
    ['not an object', (f: string) => fs.writeFileSync(f, '["mut-a"]')],
    ['ids that are not strings', (f: string) => fs.writeFileSync(f, JSON.stringify({ demonstrationTaskIds: ['mut-a', 7] }))],
    ['ids that are not a list', (f: string) => fs.writeFileSync(f, JSON.stringify({ demonstrationTaskIds: 'mut-a' }))],
    ['a folder', (f: string) => fs.mkdirSync(f)],
    ['binary', (f: string) => fs.writeFileSync(f, Buffer.from([0x7b, 0, 0, 0x7d]))],
  ] as const) {
    it(`a record that is ${what} is an error naming the file`, () => {
      const f = path.join(dir, 'warmstart.json');
      write(f);
      assert.throws(
        () => demonstrationTaskIds(dir),
        (e: Error & { code?: string; hint?: string }) =>
          e.name === 'TurnwiseError' && e.message.includes(f) && /warmstart\.json/.test(e.hint ?? ''),
      );
    });
  }
});
