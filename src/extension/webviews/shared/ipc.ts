// Typed messages between a webview and the extension host (GitLens-style): each message is a
// named type with a method "scope/name", a maker and an is() guard. Imported by both sides;
// nothing here touches `vscode` or the DOM.

export interface IpcMessage<M extends string, P> {
  method: M;
  params: P;
}

export interface IpcMessageType<M extends string, P> {
  readonly method: M;
  make(params: P): IpcMessage<M, P>;
  is(msg: unknown): msg is IpcMessage<M, P>;
}

/** `message<Params>()('scope/name')`: the params type first, the method inferred. */
export function message<P>() {
  return <M extends string>(method: M): IpcMessageType<M, P> => ({
    method,
    make: (params: P) => ({ method, params }),
    is: (msg: unknown): msg is IpcMessage<M, P> => !!msg && typeof msg === 'object' && (msg as { method?: unknown }).method === method,
  });
}

/** Webview → host, once the page's script runs: the host posts nothing before it. */
export const ReadyCommand = message<Record<string, never>>()('webview/ready');
