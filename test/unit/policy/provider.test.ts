// Execution-provider selection as the policy sees it. No GPU here: asking for CUDA must warn once
// and run on CPU with the same results (real onnxruntime-node, no mocks).
import * as assert from 'node:assert/strict';
import { resetProviderState } from '../../../src/onnx';
import { Policy } from '../../../src/policy/policy';
import { initWeights } from '../../../src/policy/weights';
import { maxAbsDiff, SMALL_CONFIG } from './helpers';

describe('policy/provider: cuda | cpu | auto', function () {
  this.timeout(60000);
  const w = initWeights(SMALL_CONFIG, 2, 0.2);

  it('cuda without its libraries: one warning, CPU, same logits', async function () {
    resetProviderState();
    const warnings: string[] = [];
    const onWarning = (m: string) => warnings.push(m);
    const cpu = new Policy(w, undefined, { provider: 'cpu', onWarning });
    const [want] = await cpu.logits([[1, 2, 3]]);
    assert.equal(await cpu.provider, 'cpu');
    const a = new Policy(w, undefined, { provider: 'cuda', onWarning });
    if ((await a.provider) === 'cuda') this.skip(); // a machine with CUDA: nothing to fall back from
    const [got] = await a.logits([[1, 2, 3]]);
    const b = new Policy(w, undefined, { provider: 'cuda', onWarning });
    await b.logits([[4, 5]]);
    assert.equal(await b.provider, 'cpu');
    assert.equal(warnings.length, 1, warnings.join('\n'));
    assert.match(warnings[0], /cuda/i);
    assert.match(warnings[0], /CPU/);
    assert.equal(maxAbsDiff(got, want), 0);
    for (const p of [cpu, a, b]) await p.dispose();
  });

  it('auto runs without a warning', async () => {
    resetProviderState();
    const warnings: string[] = [];
    const p = new Policy(w, undefined, { provider: 'auto', onWarning: (m) => warnings.push(m) });
    await p.logits([[1]]);
    assert.deepEqual(warnings, []);
    await p.dispose();
  });
});
