// PASS@(k,T) drawn as its paper draws it: pass@k against k, one curve per turn budget T, the base
// model and the trained ones on one chart; and the line that says what RL changed. RL that only
// sharpens the policy raises pass@1 while pass@k at the largest k stays (it resolves more often
// what it could already resolve); RL that enlarges what the policy can do raises pass@k at the
// largest k too. Plain data and text only (no Node, no DOM): the CLI writes the chart as an SVG
// file, the reward panel draws the same chart in its webview.

/** pass_at_k_t[k][T], as pass-at-k.ts computes it. */
export type PassTable = Record<string, Record<string, number>>;

/** What RL changed, read at the largest T both tables have. */
export interface BoundaryVerdict {
  /**
   * `enlarged`: pass@k at the largest k went up (RL reached tasks k base samples did not);
   * `sharpened`: pass@1 went up and pass@k at the largest k did not move;
   * `sharpened-narrowed`: pass@1 up, pass@k at the largest k down (reliability bought with coverage);
   * `narrowed`: pass@k at the largest k down, pass@1 not up; `worse`: pass@1 down, pass@k at the largest k not up;
   * `unchanged`: neither moved by more than the tolerance.
   */
  kind: 'enlarged' | 'sharpened' | 'sharpened-narrowed' | 'narrowed' | 'worse' | 'unchanged';
  k: number;
  T: number;
  pass1: { base: number; rl: number };
  passK: { base: number; rl: number };
  /** A change smaller than this counts as none. */
  tolerance: number;
  /** The verdict in one line. */
  line: string;
}

const sortedKeys = (o: object) =>
  Object.keys(o)
    .map(Number)
    .filter(Number.isFinite)
    .sort((a, b) => a - b);

/**
 * The verdict of `rl` against `base` at the largest k and T both have. `tolerance`: the smallest
 * change that counts (default half a task's worth when `tasks` is given, else 0.01). Null when the
 * tables share no k and T.
 */
export function boundaryVerdict(base: PassTable, rl: PassTable, o: { tasks?: number; tolerance?: number } = {}): BoundaryVerdict | null {
  const ks = sortedKeys(base).filter((k) => rl[String(k)]);
  if (!ks.length) return null;
  const Ts = sortedKeys(base[String(ks[0])]).filter((T) =>
    ks.every((k) => typeof base[k]?.[T] === 'number' && typeof rl[k]?.[T] === 'number'),
  );
  if (!Ts.length) return null;
  const k = ks[ks.length - 1];
  const T = Ts[Ts.length - 1];
  const tol = o.tolerance ?? (o.tasks ? 0.5 / o.tasks : 0.01);
  const pass1 = { base: base['1']?.[T] ?? base[String(ks[0])][T], rl: rl['1']?.[T] ?? rl[String(ks[0])][T] };
  const passK = { base: base[String(k)][T], rl: rl[String(k)][T] };
  const d1 = pass1.rl - pass1.base;
  const dk = passK.rl - passK.base;
  const up = (d: number) => d >= tol;
  const down = (d: number) => d <= -tol;
  const kind: BoundaryVerdict['kind'] =
    k > 1 && up(dk)
      ? 'enlarged'
      : up(d1) && down(dk)
        ? 'sharpened-narrowed'
        : up(d1)
          ? 'sharpened'
          : down(dk)
            ? 'narrowed'
            : down(d1)
              ? 'worse'
              : 'unchanged';
  const pct = (v: number) => `${(v * 100).toFixed(1)}%`;
  const moved = (a: { base: number; rl: number }) => `${pct(a.base)} → ${pct(a.rl)}`;
  const what = {
    enlarged: `enlarged the boundary: pass@${k} went up as well, so RL resolves tasks that ${k} samples of the base did not`,
    sharpened: `sharpened only: pass@1 went up, pass@${k} did not move, so RL made the policy more reliable on what it could already resolve`,
    'sharpened-narrowed': `sharpened and narrowed: pass@1 went up but pass@${k} went down, so RL traded tasks the base could reach for reliability`,
    narrowed: `narrowed: pass@${k} went down and pass@1 did not go up`,
    worse: `worse: pass@1 went down and pass@${k} did not go up`,
    unchanged: `unchanged: neither pass@1 nor pass@${k} moved by ${pct(tol)} or more`,
  }[kind];
  return { kind, k, T, pass1, passK, tolerance: tol, line: `T=${T}: pass@1 ${moved(pass1)}, pass@${k} ${moved(passK)}: ${what}` };
}

/** One model's curves. */
export interface CurveModel {
  label: string;
  p: PassTable | null | undefined;
}

/** A chart as data: what the SVG writer and the webview both draw. */
export interface PassChart {
  width: number;
  height: number;
  /** The plot area inside the margins. */
  plot: { x: number; y: number; w: number; h: number };
  xTicks: { x: number; label: string }[];
  yTicks: { y: number; label: string }[];
  xLabel: string;
  yLabel: string;
  series: {
    model: string;
    T: number;
    color: string;
    /** SVG stroke-dasharray ('' for a solid line): one pattern per model, the first dashed (the base). */
    dash: string;
    points: { x: number; y: number; k: number; value: number }[];
  }[];
  /** Legend entries: the turn budgets by colour, the models by line pattern. */
  legend: { label: string; color?: string; dash?: string }[];
}

const DASHES = ['6 4', '', '2 3', '10 3 2 3'];

/** The colour of turn budget T among n (light to dark, one hue): later budgets are darker. */
export function budgetColor(i: number, n: number): string {
  const t = n <= 1 ? 1 : i / (n - 1);
  const light = Math.round(72 - 44 * t);
  return `hsl(212, 70%, ${light}%)`;
}

/**
 * The chart of pass@k against k, one curve per T per model (every T, or `turns` of them), y from 0
 * to 1. Models without a table are left out of the chart and the legend.
 */
export function passChart(
  models: readonly CurveModel[],
  o: { width?: number; height?: number; turns?: readonly number[] } = {},
): PassChart {
  const width = o.width ?? 640;
  const height = o.height ?? 360;
  const plot = { x: 56, y: 16, w: width - 56 - 150, h: height - 16 - 48 };
  const drawn = models.filter((m): m is CurveModel & { p: PassTable } => !!m.p && Object.keys(m.p).length > 0);
  const ks = [...new Set(drawn.flatMap((m) => sortedKeys(m.p)))].sort((a, b) => a - b);
  const allTs = [...new Set(drawn.flatMap((m) => sortedKeys(m.p[String(sortedKeys(m.p)[0])] ?? {})))].sort((a, b) => a - b);
  const Ts = o.turns ? allTs.filter((T) => o.turns!.includes(T)) : allTs;
  const kMax = Math.max(2, ...ks);
  const xOf = (k: number) => plot.x + ((k - 1) / (kMax - 1)) * plot.w;
  const yOf = (v: number) => plot.y + (1 - Math.max(0, Math.min(1, v))) * plot.h;
  const series = drawn.flatMap((m, mi) =>
    Ts.map((T, ti) => ({
      model: m.label,
      T,
      color: budgetColor(ti, Ts.length),
      dash: DASHES[mi % DASHES.length],
      points: sortedKeys(m.p)
        .filter((k) => typeof m.p[String(k)]?.[String(T)] === 'number')
        .map((k) => ({ k, value: m.p[String(k)][String(T)], x: xOf(k), y: yOf(m.p[String(k)][String(T)]) })),
    })).filter((s) => s.points.length > 0),
  );
  const step = Math.max(1, Math.ceil(ks.length / 10));
  return {
    width,
    height,
    plot,
    xTicks: ks.filter((_, i) => i % step === 0 || i === ks.length - 1).map((k) => ({ x: xOf(k), label: String(k) })),
    yTicks: [0, 0.25, 0.5, 0.75, 1].map((v) => ({ y: yOf(v), label: `${Math.round(v * 100)}%` })),
    xLabel: 'k (sampled episodes)',
    yLabel: 'pass@k',
    series,
    legend: [
      ...Ts.map((T, ti) => ({ label: `T = ${T}`, color: budgetColor(ti, Ts.length) })),
      ...drawn.map((m, mi) => ({ label: m.label, dash: DASHES[mi % DASHES.length] })),
    ],
  };
}

/** One SVG element as data: its tag, attributes, text and children (text is never markup). */
export interface SvgNode {
  tag: string;
  attrs: Record<string, string | number>;
  text?: string;
  children?: SvgNode[];
}

const n1 = (v: number) => Math.round(v * 10) / 10;

/**
 * The chart's elements: grid, ticks, frame, axis labels, a path and its points per curve (class
 * `curve`, with its model and T), the legend. `file`: fixed colours for a standalone document;
 * `page`: classes (`grid`, `frame`) and the text colour that a page's stylesheet sets.
 */
export function passChartNodes(c: PassChart, style: 'file' | 'page'): SvgNode[] {
  const { x, y, w, h } = c.plot;
  const text = (attrs: SvgNode['attrs'], t: string): SvgNode => ({ tag: 'text', attrs, text: t });
  const title = (t: string): SvgNode => ({ tag: 'title', attrs: {}, text: t });
  const out: SvgNode[] = [];
  for (const t of c.yTicks)
    out.push(
      {
        tag: 'line',
        attrs: { x1: x, x2: x + w, y1: n1(t.y), y2: n1(t.y), ...(style === 'file' ? { stroke: '#ddd' } : { class: 'grid' }) },
      },
      text({ x: x - 6, y: n1(t.y + 4), 'text-anchor': 'end' }, t.label),
    );
  for (const t of c.xTicks) out.push(text({ x: n1(t.x), y: y + h + 16, 'text-anchor': 'middle' }, t.label));
  out.push(
    { tag: 'rect', attrs: { x, y, width: w, height: h, fill: 'none', ...(style === 'file' ? { stroke: '#888' } : { class: 'frame' }) } },
    text({ x: x + w / 2, y: y + h + 34, 'text-anchor': 'middle' }, c.xLabel),
    text({ transform: `translate(14 ${y + h / 2}) rotate(-90)`, 'text-anchor': 'middle' }, c.yLabel),
  );
  for (const s of c.series) {
    out.push({
      tag: 'path',
      attrs: {
        d: s.points.map((p, i) => `${i ? 'L' : 'M'}${n1(p.x)} ${n1(p.y)}`).join(' '),
        fill: 'none',
        stroke: s.color,
        'stroke-width': 2,
        ...(s.dash ? { 'stroke-dasharray': s.dash } : {}),
        class: 'curve',
        'data-model': s.model,
        'data-t': s.T,
      },
      children: [title(`${s.model}, T=${s.T}`)],
    });
    for (const p of s.points)
      out.push({
        tag: 'circle',
        attrs: { cx: n1(p.x), cy: n1(p.y), r: 2.5, fill: s.color },
        children: [title(`${s.model}, T=${s.T}, k=${p.k}: ${(p.value * 100).toFixed(1)}%`)],
      });
  }
  const lx = x + w + 16;
  c.legend.forEach((l, i) => {
    const ly = y + 8 + i * 18;
    out.push(
      {
        tag: 'line',
        attrs: {
          x1: lx,
          x2: lx + 24,
          y1: ly,
          y2: ly,
          stroke: l.color ?? (style === 'file' ? '#333' : 'currentColor'),
          'stroke-width': 2,
          ...(l.dash ? { 'stroke-dasharray': l.dash } : {}),
        },
      },
      text({ x: lx + 30, y: ly + 4 }, l.label.length > 18 ? `${l.label.slice(0, 17)}…` : l.label),
    );
  });
  return out;
}

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** An element as SVG markup, every attribute and text escaped. */
function markup(n: SvgNode): string {
  const attrs = Object.entries(n.attrs)
    .map(([k, v]) => ` ${k}="${esc(String(v))}"`)
    .join('');
  const inner = (n.text !== undefined ? esc(n.text) : '') + (n.children ?? []).map(markup).join('');
  return inner ? `<${n.tag}${attrs}>${inner}</${n.tag}>` : `<${n.tag}${attrs}/>`;
}

/** `text` in lines of at most `width` characters, broken at spaces (a longer word stands alone). */
function wrap(text: string, width: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  if (line) lines.push(line);
  return lines;
}

/**
 * The chart as a standalone SVG document (every label escaped). `title` goes on top; `note` (the
 * verdict) under the axes, wrapped to the chart's width.
 */
export function passChartSvg(c: PassChart, o: { title?: string; note?: string } = {}): string {
  const top = o.title ? 22 : 0;
  // About 6.5 px a character at 12 px: the note's lines fit the plot's width and the legend's.
  const note = o.note ? wrap(o.note, Math.floor((c.width - c.plot.x) / 6.5)) : [];
  const H = c.height + top + (note.length ? 8 + 16 * note.length : 0);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${c.width}" height="${H}" viewBox="0 0 ${c.width} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
  ];
  if (o.title) out.push(markup({ tag: 'text', attrs: { x: c.plot.x, y: 15, 'font-size': 13, 'font-weight': 'bold' }, text: o.title }));
  out.push(`<g transform="translate(0 ${top})">`, ...passChartNodes(c, 'file').map(markup), '</g>');
  note.forEach((line, i) => out.push(markup({ tag: 'text', attrs: { x: c.plot.x, y: top + c.height + 14 + 16 * i }, text: line })));
  out.push('</svg>');
  return out.join('\n') + '\n';
}
