// PASS@(k,T) curves and the verdict on what RL changed (src/eval/pass-curves.ts): each kind of
// verdict from tables made by hand, the chart's geometry, and labels from files kept as text.
import * as assert from 'node:assert/strict';
import { boundaryVerdict, passChart, passChartSvg, type PassTable } from '../../../src/eval/pass-curves';

/** A table over k = 1..K and T = 1..3 whose value at the largest T is given per k (smaller T: half of it). */
const table = (atMaxT: number[]): PassTable =>
  Object.fromEntries(atMaxT.map((v, i) => [String(i + 1), { '1': v / 2, '2': v / 2, '3': v }]));

describe('eval/pass-curves: what RL changed', () => {
  const base = table([0.3, 0.45, 0.5, 0.55]);
  it('each verdict, read at the largest k and T', () => {
    const kind = (rl: PassTable) => boundaryVerdict(base, rl, { tolerance: 0.02 })!.kind;
    assert.equal(kind(table([0.4, 0.5, 0.55, 0.56])), 'sharpened', 'pass@1 +0.1, pass@4 +0.01');
    assert.equal(kind(table([0.4, 0.55, 0.62, 0.7])), 'enlarged', 'pass@4 +0.15');
    assert.equal(kind(table([0.3, 0.5, 0.6, 0.7])), 'enlarged', 'pass@4 up with pass@1 flat still enlarges');
    assert.equal(kind(table([0.45, 0.45, 0.45, 0.45])), 'sharpened-narrowed');
    assert.equal(kind(table([0.3, 0.4, 0.4, 0.4])), 'narrowed');
    assert.equal(kind(table([0.2, 0.4, 0.5, 0.56])), 'worse');
    assert.equal(kind(table([0.31, 0.45, 0.5, 0.56])), 'unchanged');
  });

  it('the tolerance is half a task by default when the tasks are known; the line names both numbers', () => {
    const rl = table([0.35, 0.5, 0.55, 0.6]);
    assert.equal(boundaryVerdict(base, rl, { tasks: 8 })!.kind, 'unchanged', '0.05 < 1/16');
    const v = boundaryVerdict(base, rl, { tasks: 20 })!;
    assert.equal(v.tolerance, 0.025);
    assert.equal(v.kind, 'enlarged');
    assert.equal(
      v.line,
      'T=3: pass@1 30.0% → 35.0%, pass@4 55.0% → 60.0%: enlarged the boundary: pass@4 went up as well, so RL resolves tasks that 4 samples of the base did not',
    );
  });

  it('read at the largest k both tables have; none without a common cell', () => {
    const v = boundaryVerdict(base, table([0.3, 0.6]), { tolerance: 0.01 })!;
    assert.equal(v.k, 2);
    assert.deepEqual(v.passK, { base: 0.45, rl: 0.6 });
    assert.equal(boundaryVerdict({}, base), null);
  });
});

describe('eval/pass-curves: the chart', () => {
  it('one curve per model and T, x by k, y by pass@k; the base dashed, the trained solid; darker for larger T', () => {
    const c = passChart([
      { label: 'base', p: table([0.2, 0.4]) },
      { label: 'rl', p: table([0.5, 0.6]) },
      { label: 'no samples', p: null },
    ]);
    assert.equal(c.series.length, 6);
    const rl3 = c.series.find((s) => s.model === 'rl' && s.T === 3)!;
    assert.equal(rl3.dash, '');
    assert.equal(c.series.find((s) => s.model === 'base')!.dash, '6 4');
    assert.deepEqual(
      rl3.points.map((p) => p.x),
      [c.plot.x, c.plot.x + c.plot.w],
    );
    assert.equal(rl3.points[1].y, c.plot.y + 0.4 * c.plot.h, 'pass@2 = 0.6 sits 60% up');
    const light = (T: number) => Number(/(\d+)%\)$/.exec(c.series.find((s) => s.model === 'rl' && s.T === T)!.color)![1]);
    assert.ok(light(1) > light(2) && light(2) > light(3));
    assert.deepEqual(
      c.legend.map((l) => l.label),
      ['T = 1', 'T = 2', 'T = 3', 'base', 'rl'],
    );
  });

  it('the SVG escapes labels from files', () => {
    const svg = passChartSvg(passChart([{ label: '<script>x</script> & "q"', p: table([0.5]) }]), { title: 'a<b', note: 'n>1' });
    assert.ok(!svg.includes('<script>'));
    assert.match(svg, /&lt;script&gt;x&lt;\/script&gt; &amp; &quot;q&quot;/);
    assert.match(svg, /a&lt;b/);
    assert.match(svg, /n&gt;1/);
    // A long note is wrapped to the chart's width, every word kept.
    const note = Array.from({ length: 40 }, (_, i) => `word${i}`).join(' ');
    const lines = [
      ...passChartSvg(passChart([{ label: 'm', p: table([0.5]) }]), { note }).matchAll(/<text x="56" y="\d+">([^<]*)<\/text>/g),
    ].map((m) => m[1]);
    assert.ok(lines.length >= 3, `${lines.length} lines`);
    assert.ok(
      lines.every((l) => l.length <= 89),
      lines.join('|'),
    );
    assert.equal(lines.join(' '), note);
  });
});
