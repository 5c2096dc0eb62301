// The agent's action language (design.md): one bash command (heredocs allowed) or the word
// `submit`. Anything else is a format error: it is not run, and the observation says why.
import { createParser, type Parser, type SyntaxNode } from '../ast/treesitter';
import { SUBMIT } from './prompt';

/** Longest action run, in characters. */
export const MAX_ACTION_CHARS = 2000;

export type ParsedAction = { kind: 'submit' } | { kind: 'bash'; command: string } | { kind: 'format-error'; reason: string };

let parser: Promise<Parser> | undefined;

/** The first ERROR or MISSING node, for the message. */
function firstProblem(n: SyntaxNode): SyntaxNode | undefined {
  if (n.isError || n.isMissing) return n;
  for (const c of n.children) {
    if (!c || !c.hasError && !c.isMissing) continue;
    const p = firstProblem(c);
    if (p) return p;
  }
  return undefined;
}

/**
 * Classifies an action. `ended` is false when generation stopped at the length limit without
 * an end-of-turn token: a cut command is never run, even when what came out parses.
 */
export async function parseAction(text: string, ended = true): Promise<ParsedAction> {
  const command = text.trim();
  if (!ended) return { kind: 'format-error', reason: 'the command did not end (no end-of-turn within the action budget)' };
  if (command === '') return { kind: 'format-error', reason: 'empty action' };
  if (command === SUBMIT) return { kind: 'submit' };
  if (command.length > MAX_ACTION_CHARS) return { kind: 'format-error', reason: `the command is ${command.length} characters, over the ${MAX_ACTION_CHARS} limit` };
  if (command.includes('\0')) return { kind: 'format-error', reason: 'the command contains a NUL byte' };
  parser ??= createParser('bash');
  const tree = (await parser).parse(command);
  if (!tree) return { kind: 'format-error', reason: 'the command could not be parsed' };
  try {
    const root = tree.rootNode;
    if (root.hasError) {
      const p = firstProblem(root);
      const where = p ? ` near ${JSON.stringify(command.slice(p.startIndex, Math.min(p.endIndex, p.startIndex + 20)) || command.slice(Math.max(0, p.startIndex - 10), p.startIndex + 10))} (column ${p.startPosition.column + 1})` : '';
      return { kind: 'format-error', reason: `bash syntax error${p?.isMissing ? ` (missing ${p.type})` : ''}${where}` };
    }
    if (root.namedChildren.every((c) => !c || c.type === 'comment')) return { kind: 'format-error', reason: 'no command (only a comment or whitespace)' };
    return { kind: 'bash', command };
  } finally {
    tree.delete();
  }
}
