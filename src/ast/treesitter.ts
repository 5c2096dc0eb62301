// Loads the tree-sitter WASM runtime and grammars once per process. The .wasm files live in
// dist/grammars/ in the bundle, and in node_modules when running from source (tests).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Language, Parser } from 'web-tree-sitter';
import { TurnwiseError } from '../core/errors';
import { resourceCandidates } from '../core/resources';

/** Grammars Turnwise uses; names match `tree-sitter-<name>.wasm` in @vscode/tree-sitter-wasm. */
export const GRAMMARS = ['bash', 'python', 'javascript', 'typescript', 'tsx', 'go'] as const;
export type GrammarName = (typeof GRAMMARS)[number];

function candidateDirs(): string[] {
  const dirs = resourceCandidates('grammars');
  const override = process.env.TURNWISE_GRAMMARS_DIR;
  if (override) dirs.unshift(override);
  try {
    dirs.push(path.join(path.dirname(require.resolve('@vscode/tree-sitter-wasm/package.json')), 'wasm'));
  } catch {
    // not installed: only the bundle's copy can be used
  }
  try {
    dirs.push(path.dirname(require.resolve('web-tree-sitter/web-tree-sitter.wasm')));
  } catch {
    // same
  }
  return dirs;
}

function locate(file: string): string {
  for (const dir of candidateDirs()) {
    const p = path.join(dir, file);
    if (fs.existsSync(p)) return p;
  }
  throw new TurnwiseError('runtime-unavailable', `tree-sitter file ${file} not found (looked in ${candidateDirs().join(', ')})`, {
    hint: 'run `npm run build` (it copies the grammars into dist/grammars) or reinstall the extension',
  });
}

let initPromise: Promise<void> | undefined;
const languages = new Map<GrammarName, Promise<Language>>();

export function initTreeSitter(): Promise<void> {
  initPromise ??= Parser.init({ locateFile: (name: string) => locate(name) });
  return initPromise;
}

export async function loadLanguage(name: GrammarName): Promise<Language> {
  await initTreeSitter();
  let p = languages.get(name);
  if (!p) {
    p = Language.load(locate(`tree-sitter-${name}.wasm`));
    languages.set(name, p);
    p.catch(() => languages.delete(name));
  }
  return p;
}

/** A parser set to `name`. Parsers are cheap; callers that parse often should keep theirs. */
export async function createParser(name: GrammarName): Promise<Parser> {
  const lang = await loadLanguage(name);
  const parser = new Parser();
  parser.setLanguage(lang);
  return parser;
}

export { Parser, Language };
export type { Node as SyntaxNode, Tree } from 'web-tree-sitter';
