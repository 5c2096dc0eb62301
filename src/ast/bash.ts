// Bash intent signatures (docs/credit-assignment.md "Intent signature"): the token sequence A³ and
// turnwise cluster turns by. A pre-order walk over the named nodes of the tree-sitter-bash parse.
import type { Parser, SyntaxNode } from './treesitter';
import { createParser } from './treesitter';

const CONTROL_KINDS = new Set([
  'pipeline',
  'subshell',
  'compound_statement',
  'list',
  'function_definition',
  'do_group',
  'negated_command',
  'case_item',
  'elif_clause',
  'else_clause',
]);
const LITERAL_KINDS = new Set(['word', 'string_content', 'variable_name', 'number']);
const NOOP_VERBS = new Set(['true', 'false', ':', '']);

export function isControlKind(kind: string): boolean {
  return kind.endsWith('_statement') || CONTROL_KINDS.has(kind);
}

/**
 * Surface normalization of verbs and literals: trim, strip leading/trailing `'` and `"`,
 * lowercase, first 96 characters (code points, as a Python slice counts them).
 */
export function normalizeSurface(text: string): string {
  let s = text.trim();
  let a = 0;
  let b = s.length;
  while (a < b && (s[a] === "'" || s[a] === '"')) a++;
  while (b > a && (s[b - 1] === "'" || s[b - 1] === '"')) b--;
  s = s.slice(a, b).toLowerCase();
  if (s.length > 96) s = Array.from(s).slice(0, 96).join('');
  return s;
}

function normalizeVerb(text: string): string {
  const v = normalizeSurface(text);
  return NOOP_VERBS.has(v) ? ':noop' : v;
}

/**
 * The command name's node when it is a literal (word, string_content, number, …): the release
 * never emits it as a `W:` token, whichever literal it is.
 */
function nameLiteral(command: SyntaxNode): SyntaxNode | null {
  const name = command.childForFieldName('name');
  const first = name?.firstNamedChild ?? null;
  return first && LITERAL_KINDS.has(first.type) ? first : null;
}

/** The node whose text is the verb (the name literal when a word or string_content; a number is no verb: `V:?`). */
function verbNode(nameLit: SyntaxNode | null): SyntaxNode | null {
  return nameLit && (nameLit.type === 'word' || nameLit.type === 'string_content') ? nameLit : null;
}

// Both walks use an explicit stack: an agent's command can nest thousands of levels deep
// (`$($($(…)))`), which overflowed the JS call stack when they recursed.

/**
 * Pre-order literals below a command, not entering nested commands or arithmetic, and not
 * descending into a literal (`16#${x}` is one number: `W:16#${x}`, no `W:x`), as the release.
 */
function pushLiterals(node: SyntaxNode, nameLit: SyntaxNode | null, out: string[]): void {
  const stack: SyntaxNode[] = [];
  const pushChildren = (n: SyntaxNode) => {
    const kids = n.namedChildren;
    for (let i = kids.length - 1; i >= 0; i--) {
      const c = kids[i];
      if (c && c.type !== 'command' && c.type !== 'arithmetic_expansion') stack.push(c);
    }
  };
  pushChildren(node);
  while (stack.length) {
    const child = stack.pop()!;
    if (LITERAL_KINDS.has(child.type)) {
      if (!(nameLit && child.id === nameLit.id)) out.push(`W:${normalizeSurface(child.text)}`);
      continue;
    }
    pushChildren(child);
  }
}

function walk(root: SyntaxNode, out: string[]): void {
  const stack: SyntaxNode[] = [root];
  while (stack.length) {
    const node = stack.pop()!;
    if (node.type === 'command') {
      const nameLit = nameLiteral(node);
      const verb = verbNode(nameLit);
      out.push(`V:${verb ? normalizeVerb(verb.text) : '?'}`);
      pushLiterals(node, nameLit, out);
    } else if (isControlKind(node.type)) {
      out.push(`K:${node.type}`);
    }
    const kids = node.namedChildren;
    for (let i = kids.length - 1; i >= 0; i--) {
      const c = kids[i];
      if (c) stack.push(c);
    }
  }
}

/** Intent signature of a parsed bash tree's root (or any node). */
export function intentSignatureOfNode(root: SyntaxNode): string[] {
  const out: string[] = [];
  walk(root, out);
  return out;
}

/** Intent signature of `bash` with a caller-held bash parser (synchronous; ~0.1 ms per command). */
export function intentSignatureWith(parser: Parser, bash: string): string[] {
  const tree = parser.parse(bash);
  if (!tree) return [];
  try {
    return intentSignatureOfNode(tree.rootNode);
  } finally {
    tree.delete();
  }
}

/** A reusable signer: loads tree-sitter-bash once, then signs synchronously. */
export async function createBashSigner(): Promise<(bash: string) => string[]> {
  const parser = await createParser('bash');
  return (bash) => intentSignatureWith(parser, bash);
}

/** Intent signature of one bash string. Callers that sign many strings should use createBashSigner. */
export async function intentSignature(bash: string): Promise<string[]> {
  return (await createBashSigner())(bash);
}

/**
 * Signs `commands.join("\n")` (A³'s multi-command scope snippets). Joining programs
 * concatenates their signatures unless a command reaches into the next line (a heredoc, a
 * trailing backslash, or a parse error such as an unclosed quote); only then is the joined
 * text parsed. Per-command results are memoized, so signing all snippets of a batch is cheap.
 */
export async function createJoinedSigner(): Promise<(commands: readonly string[]) => string[]> {
  const parser = await createParser('bash');
  const memo = new Map<string, { sig: string[]; selfContained: boolean }>();
  const one = (bash: string) => {
    let e = memo.get(bash);
    if (!e) {
      const tree = parser.parse(bash);
      if (!tree) e = { sig: [], selfContained: false };
      else {
        try {
          e = {
            sig: intentSignatureOfNode(tree.rootNode),
            selfContained: !tree.rootNode.hasError && !bash.includes('<<') && !/\\\s*$/.test(bash),
          };
        } finally {
          tree.delete();
        }
      }
      if (memo.size > 50_000) memo.clear();
      memo.set(bash, e);
    }
    return e;
  };
  return (commands) => {
    if (commands.length === 1) return one(commands[0]).sig.slice();
    const parts = commands.map(one);
    if (parts.every((x) => x.selfContained)) return parts.flatMap((x) => x.sig);
    return intentSignatureWith(parser, commands.join('\n'));
  };
}
