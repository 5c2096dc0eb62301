// GNU sed's `s` command, in JavaScript: what the warm start's evaluation and its simulated
// episodes do with a policy's `sed -i 'Ns/old/new/' FILE`. A policy's text is never handed to a
// program on the host: GNU sed's `e` flag runs the pattern space as a shell command and `w FILE`
// writes a file, so running the real sed on generated scripts would let a policy run code here.
//
// Supported (GNU sed 4.9, default basic regular expressions, one line of input):
//   s<d>PATTERN<d>REPLACEMENT<d>FLAGS  with any delimiter d other than newline and backslash;
//   pattern: literals, `.`, `*`, `\+`, `\?`, `\{m,n\}`, `\(…\)`, `\1`–`\9`, `^`, `$`, bracket
//     expressions with POSIX classes, `\n`, `\t`, `\w`, `\W`, `\s`, `\S`, `\b`, `\B`, `\<`, `\>`,
//     and escaped specials;
//   replacement: `&`, `\1`–`\9`, `\n`, `\t`, escaped characters;
//   flags: `g`, a number N, `i`/`I`, `p`.
// Anything else (alternation `\|`, whose POSIX longest-match rule JavaScript does not share; a back
// reference to a repeated group; case conversion `\U`…; the `e`, `w`, `m` flags; a second command
// after `;`) is refused: the caller
// treats the script as one sed would not run, which costs at most a missed equivalent fix.

/** A parsed `s` command. */
export interface SedSubstitution {
  regex: RegExp;
  /** Replacement parts: literal text, or a group number (0 = the whole match). */
  replacement: Array<string | number>;
  global: boolean;
  /** Replace from the Nth match on (1-based). */
  occurrence: number;
  /** The `p` flag: the line is printed once more after a successful substitution. */
  print: boolean;
}

const CLASS_NAMES = new Set(['alpha', 'digit', 'alnum', 'upper', 'lower', 'space', 'blank', 'punct', 'print', 'graph', 'cntrl', 'xdigit']);
const CLASS_JS: Record<string, string> = {
  alpha: 'A-Za-z',
  digit: '0-9',
  alnum: 'A-Za-z0-9',
  upper: 'A-Z',
  lower: 'a-z',
  space: ' \\t\\n\\r\\f\\v',
  blank: ' \\t',
  punct: '!-\\/:-@\\[-`{-~',
  print: ' -~',
  graph: '!-~',
  cntrl: '\\x00-\\x1f\\x7f',
  xdigit: '0-9A-Fa-f',
};

/** Escapes one character for a JavaScript regex (u flag), outside a class. */
function lit(ch: string): string {
  return /[\\^$.*+?()[\]{}|/]/.test(ch) ? `\\${ch}` : ch === '\n' ? '\\n' : ch === '\t' ? '\\t' : ch;
}

/** Escapes one character for a JavaScript character class (u flag). */
function classLit(ch: string): string {
  return /[\\\][^-]/.test(ch) ? `\\${ch}` : ch === '\n' ? '\\n' : ch === '\t' ? '\\t' : ch;
}

/**
 * Splits `s<d>A<d>B<d>FLAGS` into its parts, unescaping `\<d>` to a literal delimiter (GNU sed
 * does this before the regex is compiled). Undefined when the command is not complete.
 */
function splitCommand(script: string): { pattern: string; replacement: string; flags: string } | undefined {
  if (script[0] !== 's' || script.length < 2) return undefined;
  const d = script[1];
  if (d === '\\' || d === '\n') return undefined;
  const parts: string[] = [];
  let cur = '';
  let i = 2;
  while (i < script.length && parts.length < 2) {
    const ch = script[i];
    if (ch === '\\' && i + 1 < script.length) {
      const next = script[i + 1];
      // An escaped delimiter is the delimiter itself, as a literal; `\n` keeps its meaning.
      cur += next === d && d !== 'n' ? `\\${d === '&' || /[\\^$.*[\]]/.test(d) ? d : `=${d}`}` : `\\${next}`;
      i += 2;
      continue;
    }
    if (ch === d) {
      parts.push(cur);
      cur = '';
      i++;
      continue;
    }
    if (ch === '\n') return undefined;
    cur += ch;
    i++;
  }
  if (parts.length < 2) return undefined;
  return { pattern: parts[0], replacement: parts[1], flags: script.slice(i) };
}

/** Translates a GNU basic regular expression into a JavaScript one; undefined when unsupported. */
function translatePattern(bre: string): { source: string; groups: number } | undefined {
  let out = '';
  let groups = 0;
  // Where each open group starts in `out`.
  const opens: number[] = [];
  // Where the last atom (with its quantifiers) starts in `out`; undefined where a quantifier has
  // nothing to repeat (the start, after `\(`, `^` or an assertion), so it is a literal there.
  let atom: number | undefined;
  let quantified = false;
  // The group number of the last atom when it is a group, and the groups that got a quantifier.
  let atomGroup: number | undefined;
  const repeated = new Set<number>();
  const emitAtom = (src: string) => {
    atom = out.length;
    atomGroup = undefined;
    quantified = false;
    out += src;
  };
  /**
   * A quantifier. glibc lets `\+` and `\?` follow another quantifier (`a*\+`) and refuses `*` or
   * `\{…\}` there; JavaScript repeats only a group, so the quantified atom becomes one.
   */
  let invalid = false;
  const quantify = (q: string) => {
    if (atom === undefined) return emitAtom(lit(q));
    if (atomGroup !== undefined) repeated.add(atomGroup);
    if (quantified) {
      if (q === '*' || q[0] === '{') invalid = true;
      out = `${out.slice(0, atom)}(?:${out.slice(atom)})`;
    }
    out += q;
    quantified = true;
  };
  const anchor = (src: string) => {
    out += src;
    atom = undefined;
    atomGroup = undefined;
    quantified = false;
  };
  const groupOf: number[] = [];
  let i = 0;
  while (i < bre.length) {
    const ch = bre[i];
    if (ch === '\\') {
      if (i + 1 >= bre.length) return undefined; // trailing backslash
      const n = bre[i + 1];
      i += 2;
      if (n === '=') {
        // An escaped delimiter that is not special: a literal (see splitCommand).
        emitAtom(lit(bre[i]));
        i++;
      } else if (n === '(') {
        opens.push(out.length);
        groupOf.push(++groups);
        anchor('(');
      } else if (n === ')') {
        const start = opens.pop();
        if (start === undefined) return undefined;
        out += ')';
        atom = start;
        atomGroup = groupOf.pop();
        quantified = false;
      } else if (n === '{') {
        const m = /^(\d+)(,(\d*))?\\\}/.exec(bre.slice(i));
        if (!m || atom === undefined) return undefined;
        if (m[3] !== undefined && m[3] !== '' && Number(m[3]) < Number(m[1])) return undefined;
        quantify(`{${m[1]}${m[2] ?? ''}}`);
        i += m[0].length;
      } else if (n === '+' || n === '?') quantify(n);
      else if (/[1-9]/.test(n)) {
        if (Number(n) > groups) return undefined; // invalid back reference
        // What a repeated group holds for a back reference differs between glibc and JavaScript.
        if (repeated.has(Number(n))) return undefined;
        emitAtom(`\\${n}`);
      } else if (n === 'n') emitAtom('\\n');
      else if (n === 't') emitAtom('\\t');
      else if ('wWsS'.includes(n)) emitAtom(`\\${n}`);
      else if ('bB<>'.includes(n)) anchor(n === '<' ? '\\b(?=\\w)' : n === '>' ? '\\b(?<=\\w)' : `\\${n}`);
      else if ('.*[]^$\\/&'.includes(n)) emitAtom(lit(n));
      else if (/[A-Za-z0-9|`']/.test(n))
        return undefined; // \| alternation, \U…, \d, \o, \x, \c, \`, \'
      else emitAtom(lit(n));
      continue;
    }
    if (ch === '[') {
      const cls = translateBracket(bre, i);
      if (!cls) return undefined;
      emitAtom(cls.source);
      i = cls.end;
      continue;
    }
    const first = i === 0 || bre.startsWith('\\(', i - 2);
    i++;
    if (ch === '.') emitAtom('.');
    else if (ch === '*') quantify('*');
    // `^` anchors at the start (or after `\(`), `$` at the end (or before `\)`); literals elsewhere.
    else if (ch === '^') {
      if (first) anchor('^');
      else emitAtom('\\^');
    } else if (ch === '$') {
      if (i === bre.length || bre.startsWith('\\)', i)) anchor('$');
      else emitAtom('\\$');
    } else emitAtom(lit(ch));
  }
  if (opens.length !== 0 || invalid) return undefined;
  return { source: out, groups };
}

/** A bracket expression starting at `bre[start] === '['`: its JavaScript class and where it ends. */
function translateBracket(bre: string, start: number): { source: string; end: number } | undefined {
  let i = start + 1;
  let negate = false;
  if (bre[i] === '^') {
    negate = true;
    i++;
  }
  let body = '';
  let first = true;
  while (i < bre.length) {
    const ch = bre[i];
    if (ch === ']' && !first) return { source: `[${negate ? '^' : ''}${body}]`, end: i + 1 };
    first = false;
    if (ch === '[' && (bre[i + 1] === ':' || bre[i + 1] === '.' || bre[i + 1] === '=')) {
      const kind = bre[i + 1];
      const close = bre.indexOf(`${kind}]`, i + 2);
      if (close < 0) return undefined;
      const name = bre.slice(i + 2, close);
      if (kind !== ':' || !CLASS_NAMES.has(name)) return undefined; // collating symbols, equivalence classes
      body += CLASS_JS[name];
      i = close + 2;
      continue;
    }
    if (ch === '\\') {
      // GNU sed turns \n, \t and \\ into their characters before the regex sees them; any other
      // backslash in a bracket expression is a literal backslash.
      const n = bre[i + 1];
      if (n === 'n' || n === 't' || n === '\\') {
        body += n === 'n' ? '\\n' : n === 't' ? '\\t' : '\\\\';
        i += 2;
      } else if (n === '=') {
        body += classLit(bre[i + 2] ?? '');
        i += 3;
      } else {
        body += '\\\\';
        i++;
      }
      continue;
    }
    // A range `a-z` keeps its dash; a dash first or last is literal.
    if (ch === '-' && body !== '' && bre[i + 1] !== ']') body += '-';
    else body += classLit(ch);
    i++;
  }
  return undefined; // unterminated
}

function parseReplacement(rep: string, groups: number): Array<string | number> | undefined {
  const parts: Array<string | number> = [];
  let text = '';
  const flush = () => {
    if (text) parts.push(text);
    text = '';
  };
  for (let i = 0; i < rep.length; i++) {
    const ch = rep[i];
    if (ch === '&') {
      flush();
      parts.push(0);
      continue;
    }
    if (ch !== '\\') {
      text += ch;
      continue;
    }
    const n = rep[++i];
    if (n === undefined) return undefined;
    if (n === '=') text += rep[++i] ?? '';
    else if (/[0-9]/.test(n)) {
      if (Number(n) > groups) return undefined; // invalid reference on the s command's RHS
      flush();
      parts.push(Number(n));
    } else if (n === 'n') text += '\n';
    else if (n === 't') text += '\t';
    else if (/[A-Za-z]/.test(n))
      return undefined; // case conversion (\U, \L…) and numeric escapes (\d, \o, \x, \c)
    else text += n;
  }
  flush();
  return parts;
}

/** Parses one `s` command; undefined when GNU sed would reject it or it is outside the subset above. */
export function parseSubstitution(script: string): SedSubstitution | undefined {
  const cmd = splitCommand(script);
  if (!cmd) return undefined;
  const m = /^([gpiI]|[1-9][0-9]*)*\s*$/.exec(cmd.flags);
  if (!m) return undefined;
  const flagText = cmd.flags.trim();
  let global = false;
  let print = false;
  let ignoreCase = false;
  let occurrence = 1;
  let sawNumber = false;
  for (const t of flagText.match(/[1-9][0-9]*|./g) ?? []) {
    if (t === 'g') {
      if (global) return undefined; // multiple `g' options
      global = true;
    } else if (t === 'p') {
      if (print) return undefined;
      print = true;
    } else if (t === 'i' || t === 'I') ignoreCase = true;
    else {
      if (sawNumber) return undefined;
      sawNumber = true;
      occurrence = Number(t);
    }
  }
  if (cmd.pattern === '') return undefined; // `s//…/` reuses the previous regex: there is none
  const pat = translatePattern(cmd.pattern);
  if (!pat) return undefined;
  const replacement = parseReplacement(cmd.replacement, pat.groups);
  if (!replacement) return undefined;
  let regex: RegExp;
  try {
    regex = new RegExp(pat.source, `gu${ignoreCase ? 'i' : ''}`);
  } catch {
    return undefined;
  }
  return { regex, replacement, global, occurrence, print };
}

/**
 * Applies a substitution to one line the way GNU sed does: matches are found left to right, an
 * empty match right after the previous match is skipped, the Nth match (and with `g` every later
 * one) is replaced. Returns the output lines (two with `p` after a substitution).
 */
export function substitute(s: SedSubstitution, line: string): string[] {
  const re = new RegExp(s.regex.source, s.regex.flags);
  let out = '';
  let pos = 0; // where the unreplaced text starts
  let count = 0;
  let replaced = false;
  let prevEnd = -1;
  let at = 0;
  while (at <= line.length) {
    re.lastIndex = at;
    const m = re.exec(line);
    if (!m) break;
    const start = m.index;
    const end = start + m[0].length;
    if (m[0] === '' && start === prevEnd) {
      // GNU sed does not allow an empty match where the previous match ended.
      if (start >= line.length) break;
      at = start + (line.codePointAt(start)! > 0xffff ? 2 : 1);
      continue;
    }
    count++;
    if (count >= s.occurrence) {
      out += line.slice(pos, start) + s.replacement.map((p) => (typeof p === 'number' ? (m[p] ?? '') : p)).join('');
      pos = end;
      replaced = true;
      if (!s.global) break;
    }
    prevEnd = end;
    at = end > start ? end : start + (start < line.length && line.codePointAt(start)! > 0xffff ? 2 : 1);
    if (m[0] === '' && start >= line.length) break;
  }
  if (!replaced) return [line];
  const result = out + line.slice(pos);
  // A newline in the replacement splits the line, as it does in the file sed writes.
  return s.print ? [result, result] : [result];
}

/** One line through a sed `s` script: the resulting text (lines joined by '\n'), undefined when the script is refused. */
export function sedLine(script: string, line: string): string | undefined {
  const s = parseSubstitution(script);
  return s ? substitute(s, line).join('\n') : undefined;
}
