// Loaded by mocha before every test file (.mocharc.json): the tasks that training runs cache
// (tasks/cache.ts) go to a folder of this test process, never the user's ~/.cache/turnwise/tasks,
// so a change to synthesis is never hidden by tasks an older build cached. `npm test` gives every
// tier one folder (scripts/test.mjs), so the runs of a tier share what the first one made.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

if (!process.env.TURNWISE_TASK_CACHE) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'turnwise-task-cache-'));
  process.env.TURNWISE_TASK_CACHE = dir;
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
}
