// A³ against its authors' released code on the edges the default settings hide: weight sums
// divided by (sum + 1e-9) put a distance of exactly treeTau on the release's side of tau.
import { strict as assert } from 'node:assert';
import { computeAdvantages } from '../../../src/credit/index';
import { attachSignatures } from '../../../src/credit/signatures';
import type { TurnRow } from '../../../src/credit/types';

describe('credit/a3 as released: weight sums (+1e-9)', () => {
  it('scopeWeights 0.1,0.2,0.3,0.4 with treeTau 0.3: the release advantages 0.2065 / −1.0992 / 1.0998', async () => {
    const batch: [string, number, string, number][] = [
      ['p0-t0', 0, 'ls -la src', 0.175],
      ['p0-t0', 1, 'python3 -m pytest -q', 0.175],
      ['p0-t0', 2, 'cat src/calc.py', 0.175],
      ['p0-t1', 0, 'cat src/calc.py', 0.425],
      ['p0-t1', 1, 'ls -la src', 0.425],
      ['p0-t1', 2, 'cat src/calc.py', 0.425],
      ['p0-t2', 0, 'ls -la src', 0.9375],
      ['p0-t2', 1, 'cat src/calc.py', 0.9375],
      ['p0-t2', 2, 'python3 -m pytest -q', 0.9375],
    ];
    // The release casts rewards to float32.
    const rows: TurnRow[] = batch.map(([trajId, turn, bash, score]) => ({ promptId: 'p0', trajId, turn, bash, score: Math.fround(score) }));
    const ctx = await attachSignatures(rows);
    const out = computeAdvantages('a3', rows, { scopeWeights: [0.1, 0.2, 0.3, 0.4], treeTau: 0.3 }, ctx);
    const at = (trajId: string, turn: number) => out.advantages[rows.findIndex((r) => r.trajId === trajId && r.turn === turn)];
    const expected: [string, number][] = [
      ['p0-t0', 0.2065],
      ['p0-t1', -1.0992],
      ['p0-t2', 1.0998],
    ];
    for (const [trajId, a] of expected) assert.ok(Math.abs(at(trajId, 0) - a) < 1e-4, `${trajId} turn 0: ${at(trajId, 0)} != ${a}`);
  });
});
