// The human output of a training run (`turnwise train`, `turnwise demo`): an iteration's held-out
// PASS@(k,T) under its row when it evaluated with samples, and the first and last evaluations'
// side by side when the run finishes.
import * as assert from 'node:assert/strict';
import { makeEvent, type MetricsRow } from '../../../src/core/events';
import { humanEventPrinter } from '../../../src/cli/training-run';

describe('cli: training run output with PASS@(k,T)', () => {
  it('prints k = 1 and the largest k at the turn limit per evaluated iteration, then first → last at the end', () => {
    let out = '';
    const print = humanEventPrinter({ out: (t) => (out += t + '\n'), err: () => undefined, json: false });
    const row = (iteration: number) => ({ schema: 'turnwise/metrics@1', iteration, 'heldout/resolved': 0.5 }) as MetricsRow;
    const p0 = { '1': { '1': 0, '2': 0.25 }, '2': { '1': 0, '2': 0.5 } };
    const p2 = { '1': { '1': 0.5, '2': 0.75 }, '2': { '1': 0.5, '2': 1 } };
    print(makeEvent('r', { type: 'iteration-finished', iteration: 0, metrics: row(0), pass_at_k_t: p0 }));
    print(makeEvent('r', { type: 'iteration-finished', iteration: 1, metrics: row(1) }));
    print(makeEvent('r', { type: 'iteration-finished', iteration: 2, metrics: row(2), pass_at_k_t: p2 }));
    print(makeEvent('r', { type: 'run-finished', iterations: 2, runDir: '/r' }));
    const lines = out.trim().split('\n');
    assert.equal(lines.filter((l) => /held-out PASS@\(k,T\): /.test(l)).length, 2, out);
    assert.match(lines[2], /^ {6}held-out PASS@\(k,T\): k=1 T=2 0\.250 {2}k=2 T=2 0\.500$/);
    assert.match(out, /held-out PASS@\(k,T\), iteration 0 → 2: k=1 T=2 0\.250 {2}k=2 T=2 0\.500 → k=1 T=2 0\.750 {2}k=2 T=2 1\.000/);
  });
});
