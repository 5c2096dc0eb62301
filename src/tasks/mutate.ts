// Mutation operators over tree-sitter syntax trees (Python, JavaScript, TypeScript): each
// operator turns one node into a plausible bug. Candidates that do not re-parse cleanly are
// dropped here; whether a candidate is a *task* is decided by running the tests (synth.ts).
import { createHash } from 'node:crypto';
import type { Language } from '../core/schema';
import { createParser, type Parser, type SyntaxNode } from '../ast/treesitter';
import { seededRandom } from '../core/random';

export const MUTATION_OPERATORS = [
  'flip-comparison',
  'swap-arithmetic',
  'swap-boolean',
  'negate-condition',
  'off-by-one',
  'swap-arguments',
  'delete-statement',
  'delete-return',
  'change-constant',
] as const;
export type MutationOperator = (typeof MUTATION_OPERATORS)[number];

export interface MutationCandidate {
  file: string;
  language: Language;
  operator: MutationOperator;
  /** tree-sitter kind of the node that was changed. */
  nodeKind: string;
  /** UTF-16 offsets into the original source. */
  start: number;
  end: number;
  original: string;
  replacement: string;
  /** Qualified name of the enclosing function or method (Class.method), if any. */
  enclosing?: string;
  /** 1-based line of the change (for humans; never shown to the policy). */
  line: number;
  mutatedSource: string;
  /** Hash of file + mutated text: identical diffs share it. */
  key: string;
}

type Edit = { operator: MutationOperator; node: SyntaxNode; start: number; end: number; replacement: string };

/** An edit of `node` that replaces the text of `at` (default: the node itself) with `replacement`. */
function edit(operator: MutationOperator, node: SyntaxNode, replacement: string, at: SyntaxNode = node): Edit {
  return { operator, node, start: at.startIndex, end: at.endIndex, replacement };
}

/** The operator swaps of the mutation operators flip-comparison, swap-arithmetic and swap-boolean (each its own undo). */
export const COMPARISON_FLIP: Readonly<Record<string, string>> = {
  '<': '<=',
  '<=': '<',
  '>': '>=',
  '>=': '>',
  '==': '!=',
  '!=': '==',
  '===': '!==',
  '!==': '===',
  in: 'not in',
  'not in': 'in',
  is: 'is not',
  'is not': 'is',
};
export const ARITH_SWAP: Readonly<Record<string, string>> = {
  '+': '-',
  '-': '+',
  '*': '/',
  '/': '*',
  '//': '*',
  '%': '*',
  '+=': '-=',
  '-=': '+=',
  '*=': '/=',
  '/=': '*=',
};
export const BOOL_SWAP: Readonly<Record<string, string>> = { and: 'or', or: 'and', '&&': '||', '||': '&&' };

function grammarFor(file: string, language: Language): 'python' | 'javascript' | 'typescript' | 'tsx' | undefined {
  if (language === 'python') return 'python';
  if (language === 'javascript') return 'javascript';
  if (language === 'typescript') return file.endsWith('.tsx') ? 'tsx' : 'typescript';
  return undefined;
}

const parsers = new Map<string, Promise<Parser>>();
function parserFor(grammar: 'python' | 'javascript' | 'typescript' | 'tsx'): Promise<Parser> {
  let p = parsers.get(grammar);
  if (!p) {
    p = createParser(grammar);
    parsers.set(grammar, p);
  }
  return p;
}

/** Inside a type (TS annotations, aliases, interfaces): literals there are not runtime values. */
function inTypePosition(n: SyntaxNode): boolean {
  for (let p: SyntaxNode | null = n.parent; p; p = p.parent) {
    if (
      /^(type_annotation|type_alias_declaration|interface_declaration|type_arguments|type_parameters|enum_declaration|decorator)$/.test(
        p.type,
      )
    )
      return true;
  }
  return false;
}

function isStringLike(n: SyntaxNode | null): boolean {
  return !!n && /^(string|template_string|concatenated_string)$/.test(n.type);
}

/** Name of the function/method around `n`, qualified with its class: `Inventory.remove`. */
export function enclosingName(n: SyntaxNode): string | undefined {
  const names: string[] = [];
  let fn = false;
  for (let p: SyntaxNode | null = n; p; p = p.parent) {
    const t = p.type;
    if (
      t === 'function_definition' ||
      t === 'function_declaration' ||
      t === 'generator_function_declaration' ||
      t === 'method_definition'
    ) {
      const nm = p.childForFieldName('name')?.text;
      if (nm) names.unshift(nm);
      fn = true;
    } else if ((t === 'arrow_function' || t === 'function_expression' || t === 'function') && p.parent?.type === 'variable_declarator') {
      const nm = p.parent.childForFieldName('name')?.text;
      if (nm) names.unshift(nm);
      fn = true;
    } else if ((t === 'class_definition' || t === 'class_declaration' || t === 'class') && fn) {
      const nm = p.childForFieldName('name')?.text;
      if (nm) names.unshift(nm);
    }
  }
  return names.length ? names.join('.') : undefined;
}

function operatorToken(n: SyntaxNode, table: Record<string, string>): SyntaxNode | undefined {
  const op = n.childForFieldName('operator');
  if (op && table[op.type] !== undefined) return op;
  // Python comparison_operator has no operator field; its operators are unnamed children.
  for (const c of n.children) if (c && !c.isNamed && table[c.type] !== undefined) return c;
  return undefined;
}

/**
 * `bound - 1` for a range or loop bound. A bound that binds looser than `-` (`n >> k`,
 * `a if c else b`, `x or y`) is parenthesized, else the -1 would land on its last operand.
 */
function minusOne(n: SyntaxNode): string {
  const tight =
    /^(identifier|attribute|member_expression|subscript|subscript_expression|call|call_expression|parenthesized_expression|this|property_identifier)$/.test(
      n.type,
    );
  const additive =
    /^binary_(operator|expression)$/.test(n.type) && /^[-+*/%]$|^\/\/$|^\*\*$/.test(n.childForFieldName('operator')?.type ?? '');
  return tight || additive ? `${n.text} - 1` : `(${n.text}) - 1`;
}

/** An integer literal plus `d`, exact past 2^53. */
function plus(text: string, d: number): string {
  return (BigInt(text) + BigInt(d)).toString();
}

function pythonEdits(root: SyntaxNode, src: string): Edit[] {
  const edits: Edit[] = [];
  const walk = (n: SyntaxNode) => {
    const t = n.type;
    if (t === 'comparison_operator') {
      // one edit per operator token (a < b < c has two)
      for (const c of n.children)
        if (c && !c.isNamed && COMPARISON_FLIP[c.type] !== undefined) {
          edits.push(edit('flip-comparison', n, COMPARISON_FLIP[c.type], c));
        }
    } else if (t === 'binary_operator' || t === 'augmented_assignment') {
      const op = operatorToken(n, ARITH_SWAP);
      const l = n.childForFieldName('left');
      const r = n.childForFieldName('right');
      if (op && !(op.type.startsWith('+') && (isStringLike(l) || isStringLike(r)))) {
        edits.push(edit('swap-arithmetic', n, ARITH_SWAP[op.type], op));
      }
    } else if (t === 'boolean_operator') {
      const op = operatorToken(n, BOOL_SWAP);
      if (op) edits.push(edit('swap-boolean', n, BOOL_SWAP[op.type], op));
    } else if (t === 'integer') {
      if (/^\d+$/.test(n.text)) {
        edits.push(edit('off-by-one', n, plus(n.text, 1)));
        if (BigInt(n.text) > 0n) edits.push(edit('off-by-one', n, plus(n.text, -1)));
      }
    } else if (t === 'true' || t === 'false' || t === 'none') {
      const rep = t === 'true' ? 'False' : t === 'false' ? 'True' : 'False';
      edits.push(edit('change-constant', n, rep));
    } else if (t === 'call') {
      const args = n.childForFieldName('arguments');
      if (args?.type === 'argument_list') {
        const pos = args.namedChildren.filter(
          (c): c is SyntaxNode => !!c && !/^(keyword_argument|list_splat|dictionary_splat|comment)$/.test(c.type),
        );
        pushArgumentSwaps(edits, n, pos, src);
        // range bound: range(stop) / range(start, stop[, step]) with a non-literal stop
        if (n.childForFieldName('function')?.text === 'range' && pos.length >= 1 && pos.length <= 3) {
          const stop = pos.length === 1 ? pos[0] : pos[1];
          if (stop.type !== 'integer') edits.push(edit('off-by-one', stop, minusOne(stop)));
        }
      }
    }
    if (t === 'if_statement' || t === 'elif_clause' || t === 'while_statement') {
      const c = n.childForFieldName('condition');
      if (c) edits.push(negation(c, 'python'));
    }
    pushDeletions(edits, n, { block: 'block', raise: 'raise_statement', empty: 'pass' });
    for (const c of n.namedChildren) if (c) walk(c);
  };
  walk(root);
  return edits;
}

/**
 * delete-statement (an expression or raise/throw statement in a block; never a string alone, a
 * docstring or directive) and delete-return (a return with a value), each replaced by the
 * language's empty statement.
 */
function pushDeletions(edits: Edit[], n: SyntaxNode, syntax: { block: string; raise: string; empty: string }) {
  const t = n.type;
  if ((t === 'expression_statement' || t === syntax.raise) && n.parent?.type === syntax.block) {
    if (!(t === 'expression_statement' && n.namedChildren[0]?.type === 'string')) edits.push(edit('delete-statement', n, syntax.empty));
  }
  if (t === 'return_statement' && n.namedChildCount > 0) {
    edits.push(edit('delete-return', n, syntax.empty));
  }
}

function pushArgumentSwaps(edits: Edit[], call: SyntaxNode, args: SyntaxNode[], src: string) {
  for (let i = 0; i + 1 < args.length; i++) {
    const a = args[i];
    const b = args[i + 1];
    if (a.text === b.text) continue;
    const between = src.slice(a.endIndex, b.startIndex);
    edits.push({
      operator: 'swap-arguments',
      node: call,
      start: a.startIndex,
      end: b.endIndex,
      replacement: `${b.text}${between}${a.text}`,
    });
  }
}

function negation(cond: SyntaxNode, lang: 'python' | 'js'): Edit {
  if (lang === 'python') {
    if (cond.type === 'not_operator') {
      const arg = cond.childForFieldName('argument');
      return edit('negate-condition', cond, arg ? arg.text : cond.text);
    }
    return edit('negate-condition', cond, `not (${cond.text})`);
  }
  // JS: the condition is a parenthesized_expression; negate what is inside.
  const inner = cond.type === 'parenthesized_expression' ? (cond.namedChildren[0] ?? cond) : cond;
  if (inner.type === 'unary_expression' && inner.childForFieldName('operator')?.type === '!') {
    const arg = inner.childForFieldName('argument');
    return edit('negate-condition', inner, arg ? arg.text : inner.text);
  }
  return edit('negate-condition', inner, `!(${inner.text})`);
}

function jsEdits(root: SyntaxNode, src: string): Edit[] {
  const edits: Edit[] = [];
  const walk = (n: SyntaxNode) => {
    if (inTypePosition(n)) return;
    const t = n.type;
    if (t === 'binary_expression') {
      const op = n.childForFieldName('operator');
      const l = n.childForFieldName('left');
      const r = n.childForFieldName('right');
      if (op) {
        if (COMPARISON_FLIP[op.type] !== undefined && op.type !== 'in' && op.type !== 'is') {
          edits.push(edit('flip-comparison', n, COMPARISON_FLIP[op.type], op));
        } else if (ARITH_SWAP[op.type] !== undefined && op.type !== '//' && !(op.type === '+' && (isStringLike(l) || isStringLike(r)))) {
          edits.push(edit('swap-arithmetic', n, ARITH_SWAP[op.type], op));
        } else if (BOOL_SWAP[op.type] !== undefined) {
          edits.push(edit('swap-boolean', n, BOOL_SWAP[op.type], op));
        }
      }
    } else if (t === 'augmented_assignment_expression') {
      const op = n.childForFieldName('operator');
      if (op && ARITH_SWAP[op.type] !== undefined) edits.push(edit('swap-arithmetic', n, ARITH_SWAP[op.type], op));
    } else if (t === 'number') {
      if (/^\d+$/.test(n.text)) {
        edits.push(edit('off-by-one', n, plus(n.text, 1)));
        if (BigInt(n.text) > 0n) edits.push(edit('off-by-one', n, plus(n.text, -1)));
      }
    } else if (t === 'true' || t === 'false' || t === 'null' || t === 'undefined') {
      const rep = t === 'true' ? 'false' : t === 'false' ? 'true' : t === 'null' ? 'undefined' : 'null';
      edits.push(edit('change-constant', n, rep));
    } else if (t === 'call_expression' || t === 'new_expression') {
      const args = n.childForFieldName('arguments');
      if (args?.type === 'arguments') {
        const pos = args.namedChildren.filter((c): c is SyntaxNode => !!c && c.type !== 'spread_element' && c.type !== 'comment');
        pushArgumentSwaps(edits, n, pos, src);
      }
    }
    if (t === 'if_statement' || t === 'while_statement' || t === 'do_statement') {
      const c = n.childForFieldName('condition');
      if (c) edits.push(negation(c, 'js'));
    } else if (t === 'ternary_expression') {
      const c = n.childForFieldName('condition');
      if (c) edits.push(negation(c, 'js'));
    } else if (t === 'for_statement') {
      // range bound: `i < xs.length` → `i < xs.length - 1`
      const c = n.childForFieldName('condition');
      const cmp = c?.type === 'expression_statement' ? c.namedChildren[0] : c;
      if (cmp?.type === 'binary_expression' && /^[<>]=?$/.test(cmp.childForFieldName('operator')?.type ?? '')) {
        const r = cmp.childForFieldName('right');
        if (r && r.type !== 'number') edits.push(edit('off-by-one', r, minusOne(r)));
      }
    }
    pushDeletions(edits, n, { block: 'statement_block', raise: 'throw_statement', empty: ';' });
    for (const c of n.namedChildren) if (c) walk(c);
  };
  walk(root);
  return edits;
}

/** Every mutation of one source file that still parses. Deterministic: same source, same list. */
export async function mutationCandidates(file: string, source: string, language: Language): Promise<MutationCandidate[]> {
  const grammar = grammarFor(file, language);
  if (!grammar) return [];
  const parser = await parserFor(grammar);
  const tree = parser.parse(source);
  if (!tree) return [];
  try {
    if (tree.rootNode.hasError) return []; // do not mutate what we cannot read
    const edits = grammar === 'python' ? pythonEdits(tree.rootNode, source) : jsEdits(tree.rootNode, source);
    const out: MutationCandidate[] = [];
    for (const e of edits) {
      const original = source.slice(e.start, e.end);
      if (original === e.replacement) continue;
      const mutatedSource = source.slice(0, e.start) + e.replacement + source.slice(e.end);
      const check = parser.parse(mutatedSource);
      const ok = !!check && !check.rootNode.hasError;
      check?.delete();
      if (!ok) continue;
      out.push({
        file,
        language,
        operator: e.operator,
        nodeKind: e.node.type,
        start: e.start,
        end: e.end,
        original,
        replacement: e.replacement,
        enclosing: enclosingName(e.node),
        line: e.node.startPosition.row + 1,
        mutatedSource,
        key: createHash('sha256').update(file).update('\0').update(mutatedSource).digest('hex').slice(0, 16),
      });
    }
    return out;
  } finally {
    tree.delete();
  }
}

/** Drops candidates whose diff is identical to an earlier one; returns the kept list and the count dropped. */
export function dedupeCandidates(cands: MutationCandidate[]): { kept: MutationCandidate[]; duplicates: number } {
  const seen = new Set<string>();
  const kept: MutationCandidate[] = [];
  for (const c of cands) {
    if (seen.has(c.key)) continue;
    seen.add(c.key);
    kept.push(c);
  }
  return { kept, duplicates: cands.length - kept.length };
}

export function shuffle<T>(xs: T[], rand: () => number): T[] {
  const a = xs.slice();
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}

/**
 * Seeded order in which candidates are tried: shuffled, then interleaved by operator so every
 * operator is tried early (a run with --max 10 does not come back with ten off-by-ones).
 */
export function orderCandidates(cands: MutationCandidate[], seed: number): MutationCandidate[] {
  const rand = seededRandom(seed);
  const byOp = new Map<string, MutationCandidate[]>();
  for (const c of shuffle(cands, rand)) {
    const l = byOp.get(c.operator) ?? [];
    l.push(c);
    byOp.set(c.operator, l);
  }
  const ops = shuffle([...byOp.keys()].sort(), rand);
  const out: MutationCandidate[] = [];
  for (let i = 0; out.length < cands.length; i++)
    for (const op of ops) {
      const l = byOp.get(op)!;
      if (i < l.length) out.push(l[i]);
    }
  return out;
}

/** A unified-diff-like view of one candidate (for logs and task metadata, never the policy). */
export function candidateDiff(c: MutationCandidate): string {
  return `--- a/${c.file}\n+++ b/${c.file}\n@@ line ${c.line} @@\n-${c.original}\n+${c.replacement}`;
}
