// Execution-provider selection as the policy sees it. No GPU here: asking for CUDA must warn once
// and run on CPU with the same results (real onnxruntime-node, no mocks).
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { resetProviderState } from '../../../src/onnx';
import { Policy } from '../../../src/policy/inference/policy';
import { initWeights } from '../../../src/policy/model/weights';
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

  it('webgpu without an adapter: one warning with the reason, CPU, same logits, no native output', async () => {
    // In a fresh process, so its whole stderr can be read: the one warning must be all there is
    // (Dawn's adapter search runs in a probe child, not in the process that trains).
    const here = path.resolve(__dirname, '../../../src');
    const program = `
      const { Policy } = require(${JSON.stringify(here + '/policy/inference/policy')});
      const { initWeights } = require(${JSON.stringify(here + '/policy/model/weights')});
      const { SMALL_CONFIG } = require(${JSON.stringify(path.resolve(__dirname, 'helpers'))});
      (async () => {
        const w = initWeights(SMALL_CONFIG, 2, 0.2);
        const out = [];
        for (const provider of ['cpu', 'webgpu', 'webgpu']) {
          const p = new Policy(w, undefined, { provider });
          const [l] = await p.logits([[1, 2, 3]]);
          out.push({ provider: await p.provider, logits: Array.from(l.slice(0, 50)) });
          await p.dispose();
        }
        console.log(JSON.stringify(out));
      })();`;
    // No Vulkan driver for this process (and its probe child): the machine may have an adapter
    // (CI has lavapipe for the webgpu tier), this test wants the machine without one.
    const noVulkan = { ...process.env, VK_ICD_FILENAMES: '/nonexistent/icd.json', VK_DRIVER_FILES: '/nonexistent/icd.json' };
    const r = spawnSync(process.execPath, ['-r', 'tsx/cjs', '-e', program], { encoding: 'utf8', timeout: 60000, env: noVulkan });
    assert.equal(r.status, 0, r.stderr);
    const [cpu, a, b] = JSON.parse(r.stdout) as { provider: string; logits: number[] }[];
    assert.equal(a.provider, 'cpu');
    assert.equal(b.provider, 'cpu');
    assert.deepEqual(a.logits, cpu.logits);
    const lines = r.stderr.trim().split('\n');
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0], /^warning: the webgpu execution provider could not be loaded \(.*(adapter|Vulkan).*\); running on CPU\./);
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
