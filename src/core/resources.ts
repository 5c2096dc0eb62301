// Files Turnwise ships beside its code: the embedded model, the tree-sitter grammars, the sandbox
// images' sources, the demo workspace, the PyTorch comparison script. One rule finds them all:
// next to the running bundle (dist/ of the packaged extension or the installed CLI: dist/models,
// dist/grammars), then in the package root, the nearest folder above this code whose package.json
// is Turnwise's (sandbox-images/, examples/, and in a source checkout models/ and scripts/).
import * as fs from 'node:fs';
import * as path from 'node:path';

let root: string | null | undefined;

/** The folder of Turnwise's package.json above this code (null when there is none). */
export function packageRoot(): string | null {
  if (root !== undefined) return root;
  root = null;
  for (let d = __dirname; ; d = path.dirname(d)) {
    const pkg = path.join(d, 'package.json');
    try {
      if ((JSON.parse(fs.readFileSync(pkg, 'utf8')) as { name?: unknown }).name === 'turnwise') return (root = d);
    } catch {
      // no package.json here, or not JSON: look further up
    }
    if (path.dirname(d) === d) return root;
  }
}

/** Where a shipped resource `rel` may be, in the order looked at. */
export function resourceCandidates(rel: string): string[] {
  const here = path.join(__dirname, rel);
  const r = packageRoot();
  return r && path.join(r, rel) !== here ? [here, path.join(r, rel)] : [here];
}

/**
 * The first place `rel` is found, judged by `marker` (a file inside it that must exist, or the
 * path itself when omitted); undefined when none holds it (resourceCandidates says where it looked).
 */
export function findResource(rel: string, marker?: string): string | undefined {
  return resourceCandidates(rel).find((p) => fs.existsSync(marker ? path.join(p, marker) : p));
}
