// The HTML shell of every Turnwise webview: CSP `default-src 'none'`, one nonce'd script and
// stylesheet from dist/webviews (the only local resource root). Plain Node (no vscode).
import { randomBytes } from 'node:crypto';

export function makeNonce(): string {
  return randomBytes(18)
    .toString('base64')
    .replace(/[^A-Za-z0-9]/g, '');
}

export function webviewHtml(o: {
  cspSource: string;
  scriptUri: string;
  styleUris: string[];
  title: string;
  nonce?: string;
  body?: string;
}): string {
  const nonce = o.nonce ?? makeNonce();
  const csp = [
    "default-src 'none'",
    `img-src ${o.cspSource} data:`,
    `style-src ${o.cspSource} 'nonce-${nonce}'`,
    `font-src ${o.cspSource}`,
    `script-src 'nonce-${nonce}'`,
  ].join('; ');
  const esc = (s: string) => s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
${o.styleUris.map((u) => `<link rel="stylesheet" nonce="${nonce}" href="${esc(u)}">`).join('\n')}
<title>${esc(o.title)}</title>
</head>
<body>
${o.body ?? '<main id="app"></main>'}
<script nonce="${nonce}" src="${esc(o.scriptUri)}"></script>
</body>
</html>`;
}
