// A small, strict XML reader for test reports (JUnit/xunit). It understands elements,
// attributes, text, CDATA, comments, processing instructions and the five entities plus
// numeric references; anything else (truncation, mismatched tags) throws XmlError.

export interface XmlElement {
  name: string;
  attrs: Record<string, string>;
  children: XmlElement[];
  /** Concatenated text and CDATA directly inside this element. */
  text: string;
}

export class XmlError extends Error {
  override name = 'XmlError';
  constructor(
    message: string,
    readonly offset: number,
  ) {
    super(`${message} at offset ${offset}`);
  }
}

const NAMED: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };

export function decodeEntities(s: string, offset = 0): string {
  if (!s.includes('&')) return s;
  return s.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|[a-zA-Z]+);?/g, (m, body: string) => {
    if (!m.endsWith(';')) throw new XmlError(`unterminated entity ${JSON.stringify(m)}`, offset);
    if (body[0] === '#') {
      const code = body[1] === 'x' || body[1] === 'X' ? parseInt(body.slice(2), 16) : parseInt(body.slice(1), 10);
      try {
        return String.fromCodePoint(code);
      } catch {
        throw new XmlError(`bad character reference ${m}`, offset);
      }
    }
    const v = NAMED[body];
    if (v === undefined) throw new XmlError(`unknown entity ${m}`, offset);
    return v;
  });
}

/** Deepest element nesting accepted (real test reports nest a few levels per describe block). */
export const MAX_DEPTH = 1000;

const NAME = /[A-Za-z_:][-A-Za-z0-9_:.]*/y;
const ATTR = /\s*([A-Za-z_:][-A-Za-z0-9_:.]*)\s*=\s*("([^"]*)"|'([^']*)')/y;

/** Parses one XML document and returns its root element. */
export function parseXml(text: string): XmlElement {
  let i = 0;
  const n = text.length;
  const stack: XmlElement[] = [];
  let root: XmlElement | undefined;

  const expectClose = (marker: string, what: string): number => {
    const j = text.indexOf(marker, i);
    if (j < 0) throw new XmlError(`unterminated ${what}`, i);
    return j;
  };

  if (text.charCodeAt(0) === 0xfeff) i = 1;
  while (i < n) {
    const lt = text.indexOf('<', i);
    const chunkEnd = lt < 0 ? n : lt;
    if (chunkEnd > i) {
      const chunk = text.slice(i, chunkEnd);
      if (stack.length > 0) stack[stack.length - 1].text += decodeEntities(chunk, i);
      else if (chunk.trim() !== '') throw new XmlError('text outside the root element', i);
      i = chunkEnd;
      continue;
    }
    // at '<'
    if (text.startsWith('<!--', i)) {
      i = expectClose('-->', 'comment') + 3;
    } else if (text.startsWith('<![CDATA[', i)) {
      const j = expectClose(']]>', 'CDATA section');
      if (stack.length === 0) throw new XmlError('CDATA outside the root element', i);
      stack[stack.length - 1].text += text.slice(i + 9, j);
      i = j + 3;
    } else if (text.startsWith('<?', i)) {
      i = expectClose('?>', 'processing instruction') + 2;
    } else if (text.startsWith('<!', i)) {
      i = expectClose('>', 'declaration') + 1;
    } else if (text.startsWith('</', i)) {
      NAME.lastIndex = i + 2;
      const m = NAME.exec(text);
      if (!m) throw new XmlError('bad closing tag', i);
      const top = stack.pop();
      if (!top || top.name !== m[0]) throw new XmlError(`closing tag </${m[0]}> does not match <${top?.name ?? '(none)'}>`, i);
      let j = i + 2 + m[0].length;
      while (j < n && /\s/.test(text[j])) j++;
      if (text[j] !== '>') throw new XmlError(`unterminated closing tag </${m[0]}`, i);
      i = j + 1;
      if (stack.length === 0) root = top;
    } else {
      NAME.lastIndex = i + 1;
      const m = NAME.exec(text);
      if (!m) throw new XmlError('bad tag', i);
      const el: XmlElement = { name: m[0], attrs: {}, children: [], text: '' };
      let j = i + 1 + m[0].length;
      for (;;) {
        ATTR.lastIndex = j;
        const a = ATTR.exec(text);
        if (!a) break;
        el.attrs[a[1]] = decodeEntities(a[3] ?? a[4] ?? '', j);
        j = ATTR.lastIndex;
      }
      while (j < n && /\s/.test(text[j])) j++;
      if (root !== undefined && stack.length === 0) throw new XmlError('a second root element', i);
      if (stack.length > 0) stack[stack.length - 1].children.push(el);
      if (text.startsWith('/>', j)) {
        i = j + 2;
        if (stack.length === 0) root = el;
      } else if (text[j] === '>') {
        i = j + 1;
        // Readers of the tree recurse; a report nested deeper than any real one would blow the stack.
        if (stack.length >= MAX_DEPTH) throw new XmlError(`elements nested deeper than ${MAX_DEPTH}`, i);
        stack.push(el);
      } else {
        throw new XmlError(j >= n ? `unterminated tag <${m[0]}` : `unexpected ${JSON.stringify(text[j])} in tag <${m[0]}>`, j);
      }
    }
  }
  if (stack.length > 0) throw new XmlError(`document ends inside <${stack[stack.length - 1].name}> (truncated?)`, n);
  if (!root) throw new XmlError('no root element', n);
  return root;
}

/** All descendants (depth first) named `name`. */
export function descendants(el: XmlElement, name: string): XmlElement[] {
  const out: XmlElement[] = [];
  const walk = (e: XmlElement) => {
    for (const c of e.children) {
      if (c.name === name) out.push(c);
      walk(c);
    }
  };
  walk(el);
  return out;
}
