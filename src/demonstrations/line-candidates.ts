// The one-token variants `tw-cands K` lists for a line, for demonstrations and the warm start's
// simulator: the same function as `line_candidates` in
// sandbox-images/python/tools/turnwise_tools.py (the sandbox has no Node), held to the same lists
// by a docker test over real source lines. Change both or neither.

/** At most this many variants are listed. */
export const CANDS_MAX = 8;
// What tw-cands prints must fit a small model's observation (OBS_PROMPT_CHARS): the line once, cut
// to CANDS_WIDTH, then each variant as its change with CANDS_SIDE characters on either side.
export const CANDS_WIDTH = 60;
export const CANDS_SIDE = 8;

const FLIP: Record<string, string[]> = {
  '<': ['<='],
  '<=': ['<'],
  '>': ['>='],
  '>=': ['>'],
  '==': ['!='],
  '!=': ['=='],
  '+=': ['-='],
  '-=': ['+='],
  '*=': ['/='],
  '/=': ['*='],
  '+': ['-'],
  '-': ['+'],
  '*': ['/', '//', '%'],
  '/': ['*'],
  '//': ['*'],
  '%': ['*'],
  and: ['or'],
  or: ['and'],
  'not in': ['in'],
  in: ['not in'],
  'is not': ['is'],
  is: ['is not'],
  True: ['False'],
  False: ['True', 'None'],
  None: ['False'],
};

const TOKEN = new RegExp(
  String.raw`(?<str>[rbuRBUfF]{0,2}(?:'[^']*'|"[^"]*"))|(?<hash>#)|(?<num>(?<![\w.])\d+(?![\w.]))` +
    String.raw`|(?<op>\/\/=|\+=|-=|\*=|\/=|\*\*=?|<<|>>|->|<=|>=|==|!=|\/\/|[-+*/%<>])` +
    String.raw`|(?<word>\b(?:not[ \t\n\r\f\v]+in|is[ \t\n\r\f\v]+not|and|or|in|is|True|False|None|for)\b)`,
  'g',
);
// Python's `\s` under re.ASCII, spelled out (JavaScript's also matches Unicode spaces).
const COND = /^([ \t\n\r\f\v]*(?:if|elif|while)[ \t\n\r\f\v]+)(.*?)(:[ \t\n\r\f\v]*(?:#.*)?)$/;
const OPERAND_END = /[A-Za-z0-9_)\]'"]/;

/** Python's str.rstrip(" \t") / lstrip(" \t"). */
const rstripSpaces = (s: string) => s.replace(/[ \t]+$/, '');
const lstripSpaces = (s: string) => s.replace(/^[ \t]+/, '');
/** Python's str.strip(" \t"): the line without its indentation. */
const stripSpaces = (s: string) => lstripSpaces(rstripSpaces(s));

/**
 * A line's one-token variants, in a fixed order: its tokens left to right (a string or a comment
 * is left alone; a unary sign, a loop's `in`, `**`, shifts and `->` are not flipped; `+` between
 * strings neither), then each `- 1` before a closing bracket dropped, then the condition of an
 * if/elif/while negated (or its `not` removed), then each pair of adjacent positional arguments
 * of a call swapped (argumentSwaps). At most CANDS_MAX, without repeats.
 */
export function lineCandidates(code: string): string[] {
  const out: string[] = [];
  let afterFor = false;
  for (const m of code.matchAll(TOKEN)) {
    const g = m.groups!;
    const a = m.index!;
    const b = a + m[0].length;
    let tok = m[0];
    if (g.hash !== undefined) break;
    if (g.str !== undefined) continue;
    let alts: string[] | undefined;
    if (g.word !== undefined) {
      tok = tok.split(/[ \t\n\r\f\v]+/).join(' ');
      if (tok === 'for') {
        afterFor = true;
        continue;
      }
      if (tok === 'in' && afterFor) {
        afterFor = false; // the loop's own `in`
        continue;
      }
    }
    if (g.num !== undefined) {
      const n = BigInt(tok);
      alts = [String(n + 1n), ...(n > 0n ? [String(n - 1n)] : [])];
    } else if (tok === '+' || tok === '-') {
      const before = rstripSpaces(code.slice(0, a));
      if (!before || !OPERAND_END.test(before.at(-1)!)) continue; // a unary sign
      if (tok === '+' && (`'"`.includes(before.at(-1)!) || `'"`.includes(lstripSpaces(code.slice(b)).slice(0, 1) || '-'))) continue; // joins strings
      alts = FLIP[tok];
    } else {
      alts = Object.hasOwn(FLIP, tok) ? FLIP[tok] : undefined;
      if (!alts) continue;
    }
    for (const x of alts) out.push(code.slice(0, a) + x + code.slice(b));
  }
  for (const m of code.matchAll(/ - 1(?=[)\]])/g)) {
    if (!code.slice(0, m.index).includes('#')) out.push(code.slice(0, m.index) + code.slice(m.index! + m[0].length));
  }
  const cond = COND.exec(code);
  if (cond) {
    const [, head, expr, tail] = cond;
    const neg = /^not[ \t\n\r\f\v]*\((.*)\)$/.exec(expr) ?? /^not[ \t\n\r\f\v]+(.*)$/.exec(expr);
    if (neg) out.push(head + neg[1] + tail);
    else if (/^[\w.]+(?:\([^()]*\))?$/.test(expr)) out.push(`${head}not ${expr}${tail}`);
    else out.push(`${head}not (${expr})${tail}`);
  }
  out.push(...argumentSwaps(code));
  const seen = new Set<string>();
  return out.filter((x) => x !== code && !seen.has(x) && (seen.add(x), true)).slice(0, CANDS_MAX);
}

// Words after which `(` opens a tuple or a condition, not a call's arguments.
const NOT_CALLEE = new Set([
  'if',
  'elif',
  'while',
  'and',
  'or',
  'not',
  'in',
  'is',
  'return',
  'yield',
  'assert',
  'del',
  'for',
  'with',
  'except',
  'lambda',
  'else',
  'await',
  'import',
  'from',
  'as',
  'raise',
]);
const OPENS: Record<string, string> = { '(': ')', '[': ']', '{': '}' };
const KEYWORD_OR_SPLAT = /^(?:\*|\w+[ \t]*=(?!=))/;
const DEFINES = /^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]/;

/**
 * The variants of a line with two adjacent positional arguments of one call swapped, calls left
 * to right by their `(`: `f(a, b)` gives `f(b, a)`. Only a call whose arguments close on this
 * line; keyword and `*` arguments stay; a definition's parameters are no call. Strings are
 * skipped (a backslash escapes the next character); the line ends at a `#` outside a string.
 */
export function argumentSwaps(code: string): string[] {
  if (DEFINES.test(code)) return [];
  // Where each character is: in a string (or escaped), or code; a `#` in code ends the line.
  const inCode: boolean[] = [];
  let quote = '';
  let end = code.length;
  for (let i = 0; i < code.length; i++) {
    const ch = code[i];
    if (quote) {
      inCode.push(false);
      if (ch === '\\') {
        inCode.push(false);
        i++;
      } else if (ch === quote) quote = '';
    } else if (ch === "'" || ch === '"') {
      quote = ch;
      inCode.push(false);
    } else if (ch === '#') {
      end = i;
      break;
    } else inCode.push(true);
  }
  const out: string[] = [];
  for (let open = 0; open < end; open++) {
    if (!inCode[open] || code[open] !== '(') continue;
    const callee = /([\w)\]])[ \t]*$/.exec(code.slice(0, open));
    if (!callee) continue;
    const word = /(\w+)[ \t]*$/.exec(code.slice(0, open));
    if (word && NOT_CALLEE.has(word[1])) continue;
    // The top-level commas up to the matching `)`.
    const stack: string[] = [')'];
    const commas: number[] = [];
    let close = -1;
    for (let i = open + 1; i < end && close < 0; i++) {
      if (!inCode[i]) continue;
      const ch = code[i];
      if (OPENS[ch]) stack.push(OPENS[ch]);
      else if (ch === ')' || ch === ']' || ch === '}') {
        if (stack.pop() !== ch) break;
        if (!stack.length) close = i;
      } else if (ch === ',' && stack.length === 1) commas.push(i);
    }
    if (close < 0) continue;
    const bounds = [open, ...commas, close];
    const args: { a: number; b: number; text: string }[] = [];
    for (let k = 0; k + 1 < bounds.length; k++) {
      const raw = code.slice(bounds[k] + 1, bounds[k + 1]);
      const a = bounds[k] + 1 + (raw.length - lstripSpaces(raw).length);
      const text = stripSpaces(raw);
      args.push({ a, b: a + text.length, text });
    }
    for (let k = 0; k + 1 < args.length; k++) {
      const x = args[k];
      const y = args[k + 1];
      if (!x.text || !y.text || x.text === y.text || KEYWORD_OR_SPLAT.test(x.text) || KEYWORD_OR_SPLAT.test(y.text)) continue;
      out.push(code.slice(0, x.a) + y.text + code.slice(x.b, y.a) + x.text + code.slice(y.b));
    }
  }
  return out;
}

/** A line as `tw-cands` prints it: without its indentation, cut to CANDS_WIDTH. */
export function candsWindow(code: string, width = CANDS_WIDTH): string {
  const c = stripSpaces(code);
  return c.length <= width ? c : `${c.slice(0, width - 3)}...`;
}

/** Variant `variant` of line `code` as tw-cands prints it: the changed text with `side` characters of the variant on either side, "..." where the line goes on. */
export function variantView(code: string, variant: string, side = CANDS_SIDE): string {
  const a = stripSpaces(code);
  const b = stripSpaces(variant);
  const n = Math.min(a.length, b.length);
  let p = 0;
  while (p < n && a[p] === b[p]) p++;
  let q = 0;
  while (q < n - p && a[a.length - 1 - q] === b[b.length - 1 - q]) q++;
  const lo = Math.max(0, p - side);
  const hi = Math.min(b.length, b.length - q + side);
  let mid = b.slice(lo, hi);
  if (mid.length > 3 * side) mid = `${mid.slice(0, 3 * side)}...`;
  return `${lo > 0 ? '...' : ''}${mid}${hi < b.length && !mid.endsWith('...') ? '...' : ''}`;
}

/** What `tw-cands K` prints for suspect K at `path:line` whose code is `code`. */
export function twCandsOutput(path: string, line: number, code: string): string {
  const cands = lineCandidates(code);
  return [
    `${path}:${line}: ${candsWindow(code)}`,
    ...(cands.length ? cands.map((c, j) => `[${j + 1}] ${variantView(code, c)}`) : ['no one-token variants of this line']),
  ].join('\n');
}
