// CPU time of the whole machine, for figures that say how much of it a piece of work used.
import * as fs from 'node:fs';

/**
 * Busy CPU seconds of the whole machine so far (Linux /proc/stat: everything but idle and
 * iowait), or null elsewhere. The difference over a pass says how much of the machine it used.
 */
export function machineCpuBusySeconds(statText?: string): number | null {
  let text = statText;
  if (text === undefined) {
    try {
      text = fs.readFileSync('/proc/stat', 'utf8');
    } catch {
      return null;
    }
  }
  const line = text.split('\n').find((l) => l.startsWith('cpu '));
  if (!line) return null;
  // user nice system idle iowait irq softirq steal (guest times are already inside user/nice).
  const f = line.trim().split(/\s+/).slice(1, 9).map(Number);
  if (f.length < 8 || f.some((x) => !Number.isFinite(x))) return null;
  const busy = f[0] + f[1] + f[2] + f[5] + f[6] + f[7];
  return busy / 100; // USER_HZ is 100 on Linux for /proc/stat
}
