import { strict as assert } from 'node:assert';
import { machineCpuBusySeconds } from '../../../src/core/cpu';

describe('core/cpu', () => {
  it('machineCpuBusySeconds: everything but idle and iowait, in seconds of USER_HZ ticks', () => {
    const stat = 'cpu  1000 50 300 9000 400 20 30 0 0 0\ncpu0 500 25 150 4500 200 10 15 0 0 0\nintr 1 2 3\n';
    assert.equal(machineCpuBusySeconds(stat), 14); // (1000+50+300+20+30+0) / 100
    assert.equal(machineCpuBusySeconds('intr 1 2\n'), null);
    assert.equal(machineCpuBusySeconds('cpu  a b c\n'), null);
    if (process.platform === 'linux') assert.ok((machineCpuBusySeconds() ?? 0) > 0);
  });
});
