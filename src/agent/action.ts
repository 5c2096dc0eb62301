// The agent's action language (docs/agent.md "Format errors"): one bash command (heredocs allowed) or the word
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
    if (!c || (!c.hasError && !c.isMissing)) continue;
    const p = firstProblem(c);
    if (p) return p;
  }
  return undefined;
}

/** The first syntax error of a parsed text: its 1-based line and what the agent is told. */
function syntaxError(text: string, root: SyntaxNode): { line: number; reason: string } {
  const p = firstProblem(root);
  const where = p
    ? ` near ${JSON.stringify(text.slice(p.startIndex, Math.min(p.endIndex, p.startIndex + 20)) || text.slice(Math.max(0, p.startIndex - 10), p.startIndex + 10))} (column ${p.startPosition.column + 1})`
    : '';
  return { line: (p?.startPosition.row ?? 0) + 1, reason: `bash syntax error${p?.isMissing ? ` (missing ${p.type})` : ''}${where}` };
}

/** One action of a script that splitCommands cut, with the line it starts on (1-based). */
export interface ScriptCommand {
  text: string;
  line: number;
}

/**
 * Cuts a bash script into the actions an agent would send one per turn, by its syntax tree
 * rather than its newlines: a command per line, a heredoc with its body, a line continued with
 * `\`, `&&` or `|` kept whole, `a; b` on one line one action. Comments and blank lines are
 * skipped. A script that does not parse gives the line and reason of its first error, since
 * where one command ends is then unknown.
 */
export async function splitCommands(text: string): Promise<{ commands: ScriptCommand[] } | { error: { line: number; reason: string } }> {
  parser ??= createParser('bash');
  const tree = (await parser).parse(text);
  if (!tree) return { error: { line: 1, reason: 'the script could not be parsed' } };
  try {
    const root = tree.rootNode;
    if (root.hasError) return { error: syntaxError(text, root) };
    const commands: ScriptCommand[] = [];
    let start = -1;
    let end = -1;
    let endRow = -1;
    let line = 0;
    const flush = () => {
      if (start >= 0) commands.push({ text: text.slice(start, end), line });
      start = -1;
    };
    for (const c of root.namedChildren) {
      if (!c || c.type === 'comment') continue;
      // A statement that starts on the line where the last one ended belongs to its action.
      if (start >= 0 && c.startPosition.row > endRow) flush();
      if (start < 0) {
        start = c.startIndex;
        line = c.startPosition.row + 1;
      }
      end = c.endIndex;
      endRow = c.endPosition.row;
    }
    flush();
    return { commands };
  } finally {
    tree.delete();
  }
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
  if (command.length > MAX_ACTION_CHARS)
    return { kind: 'format-error', reason: `the command is ${command.length} characters, over the ${MAX_ACTION_CHARS} limit` };
  if (command.includes('\0')) return { kind: 'format-error', reason: 'the command contains a NUL byte' };
  parser ??= createParser('bash');
  const tree = (await parser).parse(command);
  if (!tree) return { kind: 'format-error', reason: 'the command could not be parsed' };
  try {
    const root = tree.rootNode;
    if (root.hasError) return { kind: 'format-error', reason: syntaxError(command, root).reason };
    if (root.namedChildren.every((c) => !c || c.type === 'comment'))
      return { kind: 'format-error', reason: 'no command (only a comment or whitespace)' };
    return { kind: 'bash', command };
  } finally {
    tree.delete();
  }
}
