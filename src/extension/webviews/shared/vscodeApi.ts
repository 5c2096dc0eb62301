// The webview side of the VS Code bridge (acquireVsCodeApi may be called once per page).
export interface VsCodeApi<S> {
  postMessage(msg: unknown): void;
  getState(): S | undefined;
  setState(s: S): void;
}

declare function acquireVsCodeApi<S>(): VsCodeApi<S>;

let api: VsCodeApi<unknown> | undefined;
export function vscodeApi<S>(): VsCodeApi<S> {
  api ??= acquireVsCodeApi<unknown>();
  return api as VsCodeApi<S>;
}

/** Small DOM builder: h('div', {class: 'x'}, child, 'text'). */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string | number | boolean | undefined | ((e: Event) => void)> = {},
  ...children: Array<Node | string | undefined | null | false>
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    if (typeof v === 'function') el.addEventListener(k.replace(/^on/, ''), v);
    else if (k === 'class') el.className = String(v);
    // Through the CSSOM: a style attribute would be refused by the webview's CSP.
    else if (k === 'style') el.style.cssText = String(v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) if (c !== undefined && c !== null && c !== false) el.append(c);
  return el;
}
