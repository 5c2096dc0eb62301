// What every Turnwise webview panel sets up the same way on the host side: its options (scripts
// on, kept while hidden, dist/webviews the only local resource root) and its page (the icon, and
// webviewHtml around the app's bundled script and stylesheet, dist/webviews/<app>.js and .css).
import * as vscode from 'vscode';
import { webviewHtml } from './webviewHtml';

export function webviewPanelOptions(extensionUri: vscode.Uri): vscode.WebviewPanelOptions & vscode.WebviewOptions {
  return {
    enableScripts: true,
    retainContextWhenHidden: true,
    localResourceRoots: [vscode.Uri.joinPath(extensionUri, 'dist', 'webviews')],
  };
}

/** Gives `panel` the Turnwise icon and the page of the webview app `app` (src/extension/webviews/<app>). */
export function loadWebviewApp(panel: vscode.WebviewPanel, extensionUri: vscode.Uri, app: string, title: string): void {
  const asUri = (f: string) => panel.webview.asWebviewUri(vscode.Uri.joinPath(extensionUri, 'dist', 'webviews', f)).toString();
  panel.iconPath = vscode.Uri.joinPath(extensionUri, 'media', 'turnwise.svg');
  panel.webview.html = webviewHtml({
    cspSource: panel.webview.cspSource,
    scriptUri: asUri(`${app}.js`),
    styleUris: [asUri(`${app}.css`)],
    title,
  });
}
