// Edit signatures: what a turn changed in one source file, as tokens the credit layer can
// cluster on (docs/credit-assignment.md, turnwise change 3, "Edit signatures"). The recipe there: one
// edit from the common prefix/suffix, an incremental reparse, changed ranges mapped to the
// nearest enclosing definitions, definitions compared by qualified name and text.
import { Edit } from 'web-tree-sitter';
import type { Parser, SyntaxNode, Tree } from './treesitter';
import { createParser, type GrammarName } from './treesitter';

export type EditLanguage = Extract<GrammarName, 'python' | 'javascript' | 'typescript' | 'tsx'>;

export interface ChangedDefinition {
  /** Qualified name, e.g. `Stack.push` or `outer.inner`. */
  name: string;
  change: 'added' | 'removed' | 'modified';
}

export interface ChangedNode {
  /** Kind of the smallest named node that contains the difference. */
  kind: string;
  old: string;
  new: string;
}

export interface EditSignature {
  path: string;
  language: EditLanguage;
  definitions: ChangedDefinition[];
  /** Smallest differing node; absent when the texts are equal. */
  node?: ChangedNode;
  /** `E:<path>::<qualified definition>` per changed definition, then `N:<kind>:<old>→<new>`. */
  tokens: string[];
}

/** The grammar for a file path, or undefined for languages without edit signatures. */
export function editLanguageOf(path: string): EditLanguage | undefined {
  const m = /\.([A-Za-z0-9]+)$/.exec(path);
  switch (m?.[1].toLowerCase()) {
    case 'py':
    case 'pyi':
      return 'python';
    case 'js':
    case 'mjs':
    case 'cjs':
    case 'jsx':
      return 'javascript';
    case 'ts':
    case 'mts':
    case 'cts':
      return 'typescript';
    case 'tsx':
      return 'tsx';
    default:
      return undefined;
  }
}

const PY_DEFS = new Set(['function_definition', 'class_definition']);
const JS_DEFS = new Set([
  'function_declaration',
  'generator_function_declaration',
  'class_declaration',
  'abstract_class_declaration',
  'method_definition',
  'interface_declaration',
  'type_alias_declaration',
  'enum_declaration',
  'module',
  'internal_module',
]);
const JS_FUNCTION_VALUES = new Set(['arrow_function', 'function_expression', 'function', 'generator_function', 'class']);

/** The definition name of `node` when it is a definition in `lang`, else undefined. */
function definitionName(node: SyntaxNode, lang: EditLanguage): string | undefined {
  if (lang === 'python') return PY_DEFS.has(node.type) ? node.childForFieldName('name')?.text : undefined;
  if (JS_DEFS.has(node.type)) return node.childForFieldName('name')?.text;
  if (node.type === 'variable_declarator') {
    const value = node.childForFieldName('value');
    if (value && JS_FUNCTION_VALUES.has(value.type)) return node.childForFieldName('name')?.text;
  }
  // `{ get: () => … }` / `{ get: function () {…} }`: a method of an object literal.
  if (node.type === 'pair') {
    const value = node.childForFieldName('value');
    if (value && JS_FUNCTION_VALUES.has(value.type)) return propertyKey(node.childForFieldName('key'));
  }
  return undefined;
}

/** The name a JS object-literal key stands for (`get`, `'get'`, `"get"`); computed keys have none. */
function propertyKey(key: SyntaxNode | null): string | undefined {
  if (!key) return undefined;
  if (key.type === 'string') return key.text.slice(1, -1);
  return key.type === 'computed_property_name' ? undefined : key.text;
}

/**
 * A name that prefixes the definitions inside `node` without being one itself: a variable holding
 * an object literal (`const api = { get() {} }` → `api.get`).
 */
function namespaceName(node: SyntaxNode, lang: EditLanguage): string | undefined {
  if (lang === 'python' || node.type !== 'variable_declarator') return undefined;
  return node.childForFieldName('value')?.type === 'object' ? node.childForFieldName('name')?.text : undefined;
}

interface Definition {
  name: string;
  start: number;
  end: number;
  text: string;
}

function collectDefinitions(root: SyntaxNode, lang: EditLanguage): Definition[] {
  const out: Definition[] = [];
  const visit = (node: SyntaxNode, prefix: string) => {
    const own = definitionName(node, lang);
    const space = own === undefined ? namespaceName(node, lang) : undefined;
    const local = own ?? space;
    const qualified = local !== undefined ? (prefix ? `${prefix}.${local}` : local) : prefix;
    if (own !== undefined) {
      // A Python decorator belongs to its definition: `@app.route("/a")` → `("/b")` changes `f`.
      const span = lang === 'python' && node.parent?.type === 'decorated_definition' ? node.parent : node;
      out.push({ name: qualified, start: span.startIndex, end: span.endIndex, text: span.text });
    }
    for (const child of node.namedChildren) if (child) visit(child, qualified);
  };
  visit(root, '');
  return out;
}

function pointAt(text: string, index: number): { row: number; column: number } {
  let row = 0;
  let lineStart = 0;
  for (let i = text.indexOf('\n'); i !== -1 && i < index; i = text.indexOf('\n', i + 1)) {
    row++;
    lineStart = i + 1;
  }
  return { row, column: index - lineStart };
}

/** Definitions overlapping [a, b) (or strictly containing a when a === b), innermost only. */
function touched(defs: Definition[], a: number, b: number): Definition[] {
  const hit = defs.filter((d) => (a === b ? d.start < a && a < d.end : d.start < b && a < d.end));
  return hit.filter((d) => !hit.some((o) => o !== d && o.start >= d.start && o.end <= d.end && (o.start > d.start || o.end < d.end)));
}

const squash = (s: string) => {
  const t = s.replace(/\s+/g, ' ').trim();
  return t.length > 96 ? Array.from(t).slice(0, 96).join('') : t;
};

/** Smallest pair of differing nodes, descending while exactly one child differs. */
function smallestChange(o: SyntaxNode, n: SyntaxNode, before: string, after: string, namedKind: string): ChangedNode {
  const here = o.type === n.type && o.isNamed ? o.type : namedKind;
  if (o.type !== n.type) return { kind: namedKind, old: o.text, new: n.text };
  const oc = o.children.filter((c): c is SyntaxNode => !!c);
  const nc = n.children.filter((c): c is SyntaxNode => !!c);
  const same = (x: SyntaxNode, y: SyntaxNode) => x.type === y.type && x.text === y.text;
  let lo = 0;
  while (lo < oc.length && lo < nc.length && same(oc[lo], nc[lo])) lo++;
  let hiO = oc.length;
  let hiN = nc.length;
  while (hiO > lo && hiN > lo && same(oc[hiO - 1], nc[hiN - 1])) {
    hiO--;
    hiN--;
  }
  const os = oc.slice(lo, hiO);
  const ns = nc.slice(lo, hiN);
  if (os.length === 1 && ns.length === 1) return smallestChange(os[0], ns[0], before, after, here);
  if (os.length === 1 && ns.length === 0) return { kind: os[0].isNamed ? os[0].type : here, old: os[0].text, new: '' };
  if (os.length === 0 && ns.length === 1) return { kind: ns[0].isNamed ? ns[0].type : here, old: '', new: ns[0].text };
  if (os.length === 0 && ns.length === 0) return { kind: here, old: o.text, new: n.text };
  return {
    kind: here,
    old: os.length ? before.slice(os[0].startIndex, os[os.length - 1].endIndex) : '',
    new: ns.length ? after.slice(ns[0].startIndex, ns[ns.length - 1].endIndex) : '',
  };
}

/** Edit signature of one file's change, with a caller-held parser for `lang` (synchronous). */
export function editSignatureWith(parser: Parser, lang: EditLanguage, path: string, before: string, after: string): EditSignature {
  const result: EditSignature = { path, language: lang, definitions: [], tokens: [] };
  if (before === after) return result;
  // 1. one edit: trim the common prefix and suffix
  let p = 0;
  const min = Math.min(before.length, after.length);
  while (p < min && before.charCodeAt(p) === after.charCodeAt(p)) p++;
  let s = 0;
  while (s < min - p && before.charCodeAt(before.length - 1 - s) === after.charCodeAt(after.length - 1 - s)) s++;
  const oldEnd = before.length - s;
  const newEnd = after.length - s;
  const oldTree = parser.parse(before) as Tree;
  const edited = oldTree.copy();
  let newTree: Tree | null = null;
  try {
    // 2. incremental reparse on the edited copy
    edited.edit(
      new Edit({
        startIndex: p,
        oldEndIndex: oldEnd,
        newEndIndex: newEnd,
        startPosition: pointAt(before, p),
        oldEndPosition: pointAt(before, oldEnd),
        newEndPosition: pointAt(after, newEnd),
      }),
    );
    newTree = parser.parse(after, edited) as Tree;
    // 3. changed ranges ∪ the edit range, mapped to the innermost enclosing definitions
    const oldDefs = collectDefinitions(oldTree.rootNode, lang);
    const newDefs = collectDefinitions(newTree.rootNode, lang);
    const names = new Set<string>();
    for (const d of touched(newDefs, p, newEnd)) names.add(d.name);
    for (const r of edited.getChangedRanges(newTree)) for (const d of touched(newDefs, r.startIndex, r.endIndex)) names.add(d.name);
    for (const d of touched(oldDefs, p, oldEnd)) names.add(d.name);
    // 4. compare by qualified name and text
    const textsOf = (defs: Definition[]) => {
      const m = new Map<string, string>();
      for (const d of defs) m.set(d.name, m.has(d.name) ? `${m.get(d.name)}\u0000${d.text}` : d.text);
      return m;
    };
    const oldTexts = textsOf(oldDefs);
    const newTexts = textsOf(newDefs);
    for (const name of [...names].sort()) {
      const o = oldTexts.get(name);
      const n = newTexts.get(name);
      if (o === undefined && n !== undefined) result.definitions.push({ name, change: 'added' });
      else if (o !== undefined && n === undefined) result.definitions.push({ name, change: 'removed' });
      else if (o !== n) result.definitions.push({ name, change: 'modified' });
    }
    result.node = smallestChange(oldTree.rootNode, newTree.rootNode, before, after, oldTree.rootNode.type);
  } finally {
    oldTree.delete();
    edited.delete();
    newTree?.delete();
  }
  for (const d of result.definitions) result.tokens.push(`E:${path}::${d.name}`);
  if (result.node) result.tokens.push(`N:${result.node.kind}:${squash(result.node.old)}→${squash(result.node.new)}`);
  return result;
}

/** A reusable signer: loads grammars on first use per language; undefined for unsupported files. */
export async function createEditSigner(
  languages: readonly EditLanguage[] = ['python', 'javascript', 'typescript', 'tsx'],
): Promise<(path: string, before: string, after: string) => EditSignature | undefined> {
  const parsers = new Map<EditLanguage, Parser>();
  for (const lang of languages) parsers.set(lang, await createParser(lang));
  return (path, before, after) => {
    const lang = editLanguageOf(path);
    const parser = lang && parsers.get(lang);
    return lang && parser ? editSignatureWith(parser, lang, path, before, after) : undefined;
  };
}

/** Edit signature of one file change; undefined when the file's language has no grammar here. */
export async function editSignature(path: string, before: string, after: string): Promise<EditSignature | undefined> {
  const lang = editLanguageOf(path);
  if (!lang) return undefined;
  const parser = await createParser(lang);
  try {
    return editSignatureWith(parser, lang, path, before, after);
  } finally {
    parser.delete();
  }
}
