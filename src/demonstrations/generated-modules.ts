// Random Python modules for generated fix cases: 2 to 4 functions from templates, sometimes a
// class's methods, for the real mutation engine (tasks/mutate.ts) to mutate (cases.ts).
export type Rng = () => number;
export const pick = <T>(r: Rng, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];
export const int = (r: Rng, lo: number, hi: number) => lo + Math.floor(r() * (hi - lo + 1));

export const NOUNS = [
  'qty',
  'total',
  'price',
  'limit',
  'count',
  'items',
  'size',
  'stock',
  'rate',
  'score',
  'level',
  'budget',
  'width',
  'height',
  'start',
  'end',
  'step',
  'value',
  'amount',
  'index',
  'weight',
  'cost',
  'days',
  'hours',
  'balance',
  'quota',
  'capacity',
  'available',
  'threshold',
  'target',
  'minimum',
  'maximum',
  'offset',
  'delta',
  'speed',
  'depth',
  'tax',
  'fee',
  'rows',
  'cols',
];
const VERBS = [
  'compute',
  'check',
  'needs',
  'count',
  'apply',
  'clamp',
  'scale',
  'is',
  'has',
  'total',
  'pick',
  'find',
  'split',
  'merge',
  'round',
  'cap',
];
const MODULES = [
  'pricing',
  'billing',
  'stock',
  'orders',
  'grid',
  'stats',
  'calendar',
  'ledger',
  'shipping',
  'scores',
  'quota',
  'rates',
  'cart',
  'report',
  'budget',
  'levels',
];
const PACKAGES = ['shop', 'app', 'core', 'lib', 'inventory', 'billing', 'tools', 'engine', 'src', 'util'];
const CMP = ['<', '<=', '>', '>=', '==', '!='];
const ARITH = ['+', '-', '*', '//'];

function ident(r: Rng, taken: Set<string>): string {
  for (let i = 0; i < 20; i++) {
    const n = pick(r, NOUNS);
    if (!taken.has(n)) {
      taken.add(n);
      return n;
    }
  }
  const n = `${pick(r, NOUNS)}_${taken.size}`;
  taken.add(n);
  return n;
}

/** One function: its name and source lines (4-space indentation). */
function genFunction(r: Rng): { name: string; lines: string[] } {
  const taken = new Set<string>();
  const a = ident(r, taken);
  const b = ident(r, taken);
  const c = ident(r, taken);
  const k = String(int(r, 0, 12));
  const k2 = String(int(r, 1, 9));
  const name = `${pick(r, VERBS)}_${pick(r, NOUNS)}`;
  const shapes: (() => string[])[] = [
    () => [`def ${name}(${a}, ${b}):`, `    return ${a} ${pick(r, CMP)} ${b}`],
    () => [
      `def ${name}(${a}, ${b}):`,
      `    if ${a} ${pick(r, CMP)} ${b}:`,
      `        return ${a} ${pick(r, ARITH)} ${k}`,
      `    return ${b}`,
    ],
    () => [`def ${name}(${a}, ${b}, ${c}):`, `    ${c} = (${a} ${pick(r, ARITH)} ${b}) ${pick(r, ARITH)} ${k2}`, `    return ${c}`],
    () => [
      `def ${name}(${a}):`,
      `    ${b} = 0`,
      `    for x in ${a}:`,
      `        if x ${pick(r, CMP)} ${k}:`,
      `            ${b} += x`,
      `    return ${b}`,
    ],
    () => [`def ${name}(${a}, ${b}):`, `    return ${a} ${pick(r, CMP)} ${k} and ${b} ${pick(r, CMP)} ${k2}`],
    () => [`def ${name}(${a}):`, `    if not ${a}:`, `        return None`, `    return ${a}[${int(r, 0, 1)}]`],
    () => [`def ${name}(${a}, ${b}):`, `    ${c} = []`, `    for i in range(${a}):`, `        ${c}.append(i * ${b})`, `    return ${c}`],
    () => [
      `def ${name}(${a}, ${b}):`,
      `    if ${a} ${pick(r, CMP)} ${b} or ${a} ${pick(r, CMP)} ${k}:`,
      `        return True`,
      `    return False`,
    ],
    () => [
      `def ${name}(${a}, ${b}):`,
      `    ${c} = ${a} ${pick(r, ARITH)} ${b}`,
      `    if ${c} ${pick(r, CMP)} ${k}:`,
      `        return ${k}`,
      `    return ${c} ${pick(r, ARITH)} ${k2}`,
    ],
    () => [`def ${name}(${a}, ${b}):`, `    ${c} = max(${a}, ${b}) - min(${a}, ${b})`, `    return ${c} ${pick(r, CMP)} ${k}`],
    () => [`def ${name}(${a}, ${b}):`, `    return ${a}.get(${b}, 0) ${pick(r, ARITH)} ${k2}`],
    () => [
      `def ${name}(${a}, ${b}, ${c}):`,
      `    if ${b} ${pick(r, CMP)} ${c}:`,
      `        raise ValueError("${b} out of range")`,
      `    ${a}[${b}] = ${a}.get(${b}, 0) ${pick(r, ARITH)} ${c}`,
      `    return ${a}[${b}]`,
    ],
    () => [`def ${name}(${a}, ${b}):`, `    if not ${a}:`, `        return 0`, `    return round(${b} / (sum(${a}) / ${k2}), 1)`],
  ];
  return { name, lines: pick(r, shapes)() };
}

/** The function as a method of a class: its first parameter becomes `self.<name>` state. */
function asMethod(f: { name: string; lines: string[] }): { name: string; lines: string[] } | undefined {
  const m = /^def (\w+)\((\w+)(, )?(.*)\):$/.exec(f.lines[0]);
  if (!m) return undefined;
  const attr = m[2];
  const re = new RegExp(`\\b${attr}\\b`, 'g');
  return {
    name: f.name,
    lines: [`    def ${m[1]}(self${m[4] ? `, ${m[4]}` : ''}):`, ...f.lines.slice(1).map((l) => `    ${l.replace(re, `self.${attr}`)}`)],
  };
}

export interface GeneratedModule {
  path: string;
  source: string;
  /** Function name → [first line, last line], 1-based. */
  functions: Map<string, [number, number]>;
}

export function generateModule(r: Rng): GeneratedModule {
  const pkg = pick(r, PACKAGES);
  const mod = pick(r, MODULES);
  const lines: string[] = [];
  if (r() < 0.5) lines.push(`"""${mod[0].toUpperCase()}${mod.slice(1)} rules."""`, '', '');
  const functions = new Map<string, [number, number]>();
  const n = int(r, 2, 4);
  const asClass = r() < 0.35;
  if (asClass) lines.push(`class ${mod[0].toUpperCase()}${mod.slice(1)}:`);
  for (let i = 0; i < n; i++) {
    const g = genFunction(r);
    const f = asClass ? asMethod(g) : g;
    if (!f || functions.has(f.name)) continue;
    const first = lines.length + 1;
    lines.push(...f.lines);
    functions.set(f.name, [first, lines.length]);
    lines.push(...(asClass ? [''] : ['', '']));
  }
  return { path: `${pkg}/${mod}.py`, source: lines.join('\n').replace(/\n+$/, '\n'), functions };
}
