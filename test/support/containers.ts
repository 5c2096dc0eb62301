// The Docker tier's check that a suite left no container behind: every sandbox a test started
// under the suite's run label is gone once its pool is closed.
import * as assert from 'node:assert/strict';
import { LABEL, type SandboxPool } from '../../src/sandbox';

export async function assertNoContainersLeft(pool: SandboxPool, run: string): Promise<void> {
  const left = await pool.engineAt(0).docker.listContainers({ all: true, filters: { label: [`${LABEL.run}=${run}`] } });
  assert.equal(left.length, 0, `containers left behind: ${left.map((c) => c.Names.join(',')).join(' ')}`);
}
