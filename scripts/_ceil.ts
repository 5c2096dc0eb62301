import { mutationCandidates } from '../src/tasks/mutate';
import { FIXABLE_OPERATORS } from '../src/train/demos';
import { evalCasePool } from '../src/train/warmstart';
(async () => {
  const cases = await evalCasePool(9, 256);
  let sum = 0; let hit = 0; const ks: number[] = [];
  for (const c of cases) {
    const line = c.mutatedLine.trim();
    const src = `def f(self, x):\n    ${line}${line.endsWith(':') ? '\n        pass' : ''}\n`;
    const cands = (await mutationCandidates('m.py', src, 'python')).filter((m) => FIXABLE_OPERATORS.has(m.operator) && m.line === 2);
    const origs = new Set(cands.map((m) => m.mutatedSource.split('\n')[1].trim()));
    // inverses that are not forward mutations
    if (/ \* /.test(line)) { origs.add('x//'); origs.add('x%'); }
    if (/\bFalse\b/.test(line)) origs.add('xNone');
    const k = Math.max(1, origs.size);
    if (origs.has(c.originalLine.trim())) hit++;
    ks.push(k); sum += 1 / k;
  }
  ks.sort((a, b) => a - b);
  console.log({ n: cases.length, ceiling: sum / cases.length, originalAmongCandidates: hit / cases.length, medianK: ks[ks.length >> 1], k1: ks.filter((k) => k === 1).length });
})();
