// The ast layer's part of `turnwise doctor`: every tree-sitter grammar loads and parses.
import type { Check } from '../core/doctor';
import { GRAMMARS, createParser, type GrammarName } from './treesitter';

/** Loads each grammar (the WASM runtime first) and parses a one-character program with it. */
export async function grammarCheck(grammars: readonly GrammarName[] = GRAMMARS): Promise<Check> {
  const failed: string[] = [];
  for (const g of grammars) {
    try {
      const parser = await createParser(g);
      const tree = parser.parse('x');
      if (!tree) throw new Error('parse returned nothing');
      tree.delete();
      parser.delete();
    } catch (e) {
      failed.push(`${g} (${(e as Error).message || 'load failed'})`);
    }
  }
  return failed.length === 0
    ? { name: 'tree-sitter grammars', status: 'ok', detail: grammars.join(', ') }
    : {
        name: 'tree-sitter grammars',
        status: 'fail',
        detail: `cannot load: ${failed.join(', ')}`,
        fix: 'run `npm run build`, or reinstall the extension',
      };
}
