// `turnwise serve`: a Turnwise checkpoint (or a Hugging Face model folder, with a LoRA adapter on
// top) behind the OpenAI-compatible API: GET /v1/models, POST /v1/chat/completions (rendered with
// the model's own chat template) and POST /v1/completions, non-streaming or as server-sent events,
// with `logprobs`, `max_tokens`, `temperature`, `top_p`, `stop` and `seed`. Requests that arrive
// together are sampled in one batched run of the KV-cache decode. Bound to 127.0.0.1 unless told
// otherwise; an optional bearer token; request size and queue limits; every malformed request
// gets a 4xx in the API's error shape. Generation runs on this process's thread: a request's
// tokens are all sampled before its stream starts.
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { TurnwiseError } from '../core/errors';
import { ChatTemplate, templateTokens, type ChatMessage } from '../agent/chat-template';
import { loadCheckpoint } from '../policy/checkpoint';
import { chatTemplateOf } from '../policy/hf';
import { loadAdapter } from '../policy/lora';
import { Policy, type SampleRequest } from '../policy/policy';
import type { SessionSettings } from '../onnx';

export interface ServeOptions {
  model: string;
  adapter?: string;
  /** Default 127.0.0.1: nothing listens beyond this machine unless asked. */
  host?: string;
  /** Default 8000; 0 picks a free port. */
  port?: number;
  /** When set, every request needs `Authorization: Bearer <token>`. */
  token?: string;
  /** The id /v1/models lists and responses name (default: the model folder's name). */
  name?: string;
  /** Largest request body, in bytes (default 1 MiB). */
  maxRequestBytes?: number;
  /** Requests queued at once beyond which new ones get 429 (default 64). */
  maxQueued?: number;
  /** Most tokens one request may ask for (default 2,048). */
  maxTokensCap?: number;
  /** How long the first request of a batch waits for others (default 5 ms). */
  batchWaitMs?: number;
  /** Largest batch (default 8). */
  maxBatch?: number;
  settings?: SessionSettings;
}

export interface RunningServer {
  url: string;
  port: number;
  close(): Promise<void>;
}

/** An API error: status and the OpenAI error object. */
class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type = 'invalid_request_error',
    readonly param: string | null = null,
  ) {
    super(message);
  }
}

interface Job {
  prompt: number[];
  req: Omit<SampleRequest, 'seq'>;
  resolve: (r: { tokenIds: number[]; logprobs: number[]; finishReason: 'stop' | 'length'; batch: number }) => void;
  reject: (e: unknown) => void;
}

const num = (v: unknown, name: string, lo: number, hi: number, integer = false): number | undefined => {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < lo || v > hi || (integer && !Number.isInteger(v))) throw new ApiError(400, `${name} must be ${integer ? 'an integer' : 'a number'} in [${lo}, ${hi}], got ${JSON.stringify(v)}`, 'invalid_request_error', name);
  return v;
};

export async function startServer(o: ServeOptions): Promise<RunningServer> {
  const ck = loadCheckpoint(o.model, { optimizer: false });
  const adapter = o.adapter ? loadAdapter(o.adapter, ck.weights.config) : ck.adapter;
  const policy = new Policy(ck.weights, ck.tokenizer, o.settings ?? {}, adapter);
  const tok = ck.tokenizer;
  const found = chatTemplateOf(ck.dir, ck.tokenizerConfig);
  const template = found ? new ChatTemplate(found.template, found.source, templateTokens(ck.tokenizerConfig)) : undefined;
  const name = o.name ?? (o.adapter ? `${ck.dir.split('/').pop()}+${o.adapter.replace(/\/+$/, '').split('/').pop()}` : (ck.adapterDir ?? ck.dir).split('/').pop()!);
  const created = Math.floor(Date.now() / 1000);
  const maxBytes = o.maxRequestBytes ?? 1024 * 1024;
  const maxQueued = o.maxQueued ?? 64;
  const cap = o.maxTokensCap ?? 2048;
  const context = ck.weights.config.max_position_embeddings;
  let queue: Job[] = [];
  let running = false;
  let timer: NodeJS.Timeout | undefined;

  const drain = async () => {
    timer = undefined;
    if (running || queue.length === 0) return;
    running = true;
    const batch = queue.slice(0, o.maxBatch ?? 8);
    queue = queue.slice(batch.length);
    const seqs = batch.map((j) => policy.newSequence(j.prompt));
    try {
      const rows = await policy.sample(batch.map((j, i) => ({ ...j.req, seq: seqs[i] })));
      rows.forEach((r, i) => batch[i].resolve({ ...r, batch: batch.length }));
    } catch (e) {
      batch.forEach((j) => j.reject(e));
    } finally {
      running = false;
      if (queue.length) setImmediate(() => void drain());
    }
  };
  const submit = (prompt: number[], req: Omit<SampleRequest, 'seq'>) =>
    new Promise<{ tokenIds: number[]; logprobs: number[]; finishReason: 'stop' | 'length'; batch: number }>((resolve, reject) => {
      if (queue.length >= maxQueued) return reject(new ApiError(429, `${maxQueued} requests are waiting already; try again shortly`, 'rate_limit_exceeded'));
      if (prompt.length >= context) return reject(new ApiError(400, `the prompt is ${prompt.length} tokens; this model's context is ${context}`, 'invalid_request_error', 'messages'));
      queue.push({ prompt, req, resolve, reject });
      timer ??= setTimeout(() => void drain(), o.batchWaitMs ?? 5);
    });

  /** Sampling settings common to both endpoints, from a request body. */
  const sampling = (b: Record<string, unknown>) => {
    if (b.n !== undefined && b.n !== 1) throw new ApiError(400, 'n must be 1 (one choice per request)', 'invalid_request_error', 'n');
    const maxTokens = num(b.max_completion_tokens ?? b.max_tokens, 'max_tokens', 1, cap, true) ?? Math.min(256, cap);
    const temperature = num(b.temperature, 'temperature', 0, 2) ?? 1;
    const topP = num(b.top_p, 'top_p', Number.MIN_VALUE, 1) ?? 1;
    const seed = num(b.seed, 'seed', 0, 2 ** 32 - 1, true) ?? 0;
    const stopRaw = b.stop ?? [];
    const stop = typeof stopRaw === 'string' ? [stopRaw] : Array.isArray(stopRaw) && stopRaw.length <= 4 && stopRaw.every((x) => typeof x === 'string' && x !== '') ? (stopRaw as string[]) : undefined;
    if (!stop) throw new ApiError(400, 'stop must be a string or a list of up to 4 non-empty strings', 'invalid_request_error', 'stop');
    return { maxTokens, temperature, topP, seed, stop, stream: b.stream === true };
  };

  /** The completion's text, cut at the first stop string (then finish_reason is "stop"), and its token count. */
  const finish = (r: { tokenIds: number[]; logprobs: number[]; finishReason: 'stop' | 'length' }, stop: string[]) => {
    const ids = r.tokenIds;
    let text = tok.decode(ids, true);
    let reason: 'stop' | 'length' = r.finishReason;
    let kept = ids.length;
    const at = Math.min(...stop.map((s) => text.indexOf(s)).filter((i) => i >= 0), Infinity);
    if (at !== Infinity) {
      text = text.slice(0, at);
      reason = 'stop';
      // The tokens whose text lies before the stop string.
      kept = 0;
      while (kept < ids.length && tok.decode(ids.slice(0, kept + 1), true).length <= at) kept++;
    }
    return { text, reason, kept };
  };

  const logprobContent = (ids: number[], lps: number[]) =>
    ids.map((id, i) => {
      const token = tok.decode([id], false);
      return { token, logprob: lps[i], bytes: [...Buffer.from(token, 'utf8')], top_logprobs: [] as unknown[] };
    });

  const server = http.createServer((req, res) => {
    const send = (status: number, body: unknown, extra: Record<string, string> = {}) => {
      const text = JSON.stringify(body);
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...extra });
      res.end(text);
    };
    const fail = (e: unknown) => {
      if (e instanceof ApiError) return send(e.status, { error: { message: e.message, type: e.type, param: e.param, code: null } });
      const message = e instanceof TurnwiseError ? e.message : 'the server failed to answer';
      send(500, { error: { message, type: 'server_error', param: null, code: null } });
    };
    if (o.token && req.headers.authorization !== `Bearer ${o.token}`) return fail(new ApiError(401, 'missing or wrong bearer token', 'authentication_error'));
    const url = (req.url ?? '').split('?')[0];
    if (req.method === 'GET' && url === '/v1/models') return send(200, { object: 'list', data: [{ id: name, object: 'model', created, owned_by: 'turnwise' }] });
    if (req.method !== 'POST' || (url !== '/v1/chat/completions' && url !== '/v1/completions')) return fail(new ApiError(404, `no route ${req.method} ${url}; this server answers GET /v1/models, POST /v1/chat/completions and POST /v1/completions`, 'not_found_error'));
    const chunks: Buffer[] = [];
    let size = 0;
    let refused = false;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > maxBytes && !refused) {
        refused = true;
        fail(new ApiError(413, `the request is larger than ${maxBytes} bytes`));
        req.destroy();
      } else if (!refused) chunks.push(c);
    });
    req.on('end', () => {
      if (refused) return;
      void (async () => {
        let body: Record<string, unknown>;
        try {
          const parsed: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
          if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not an object');
          body = parsed as Record<string, unknown>;
        } catch {
          return fail(new ApiError(400, 'the request body is not a JSON object'));
        }
        try {
          if (body.model !== undefined && body.model !== name) throw new ApiError(404, `model ${JSON.stringify(body.model)} is not served here; this server serves ${JSON.stringify(name)}`, 'not_found_error', 'model');
          const s = sampling(body);
          const chat = url === '/v1/chat/completions';
          let prompt: number[];
          if (chat) {
            if (!template) throw new ApiError(400, `${ck.dir} has no chat template, so it answers /v1/completions only`, 'invalid_request_error', 'messages');
            const msgs = body.messages;
            if (!Array.isArray(msgs) || msgs.length === 0) throw new ApiError(400, 'messages must be a non-empty list', 'invalid_request_error', 'messages');
            const messages: ChatMessage[] = msgs.map((m, i) => {
              const r = m as { role?: unknown; content?: unknown };
              if (!r || (r.role !== 'system' && r.role !== 'user' && r.role !== 'assistant')) throw new ApiError(400, `messages[${i}].role must be system, user or assistant`, 'invalid_request_error', 'messages');
              const content = typeof r.content === 'string' ? r.content : Array.isArray(r.content) ? r.content.map((p: { type?: unknown; text?: unknown }) => (p?.type === 'text' && typeof p.text === 'string' ? p.text : '')).join('') : undefined;
              if (content === undefined) throw new ApiError(400, `messages[${i}].content must be a string or a list of text parts`, 'invalid_request_error', 'messages');
              return { role: r.role, content };
            });
            prompt = tok.encode(template.render(messages, true));
          } else {
            if (typeof body.prompt !== 'string') throw new ApiError(400, 'prompt must be a string', 'invalid_request_error', 'prompt');
            prompt = tok.encode(body.prompt);
          }
          if (chat && body.top_logprobs !== undefined && body.top_logprobs !== 0) throw new ApiError(400, 'top_logprobs above 0 is not supported; logprobs: true gives each sampled token\'s log-prob', 'invalid_request_error', 'top_logprobs');
          if (!chat && typeof body.logprobs === 'number' && body.logprobs > 0) throw new ApiError(400, 'logprobs above 0 (alternatives per token) is not supported; give logprobs 0 for each sampled token\'s log-prob', 'invalid_request_error', 'logprobs');
          const wantLogprobs = chat ? body.logprobs === true : body.logprobs === 0;
          const r = await submit(prompt, { maxNewTokens: Math.min(s.maxTokens, context - prompt.length), temperature: s.temperature, topP: s.topP, seed: s.seed });
          const f = finish(r, s.stop);
          const id = `${chat ? 'chatcmpl' : 'cmpl'}-${created.toString(36)}${Math.random().toString(36).slice(2, 10)}`;
          const usage = { prompt_tokens: prompt.length, completion_tokens: f.kept, total_tokens: prompt.length + f.kept };
          const lp = wantLogprobs ? logprobContent(r.tokenIds.slice(0, f.kept), r.logprobs.slice(0, f.kept)) : undefined;
          const object = chat ? 'chat.completion' : 'text_completion';
          const choice = chat
            ? { index: 0, message: { role: 'assistant', content: f.text }, logprobs: lp ? { content: lp } : null, finish_reason: f.reason }
            : { index: 0, text: f.text, logprobs: lp ? { tokens: lp.map((x) => x.token), token_logprobs: lp.map((x) => x.logprob), top_logprobs: null, text_offset: null } : null, finish_reason: f.reason };
          // How many requests shared the run that sampled this one.
          const batchHeader = { 'x-turnwise-batch-size': String(r.batch) };
          if (!s.stream) return send(200, { id, object, created, model: name, choices: [choice], usage }, batchHeader);
          // Server-sent events: one chunk per token (all sampled already), then the end.
          res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive', ...batchHeader });
          const event = (d: unknown) => res.write(`data: ${JSON.stringify(d)}\n\n`);
          const pieces = r.tokenIds.slice(0, f.kept);
          let sent = '';
          pieces.forEach((_, i) => {
            const text = i === pieces.length - 1 ? f.text : tok.decode(pieces.slice(0, i + 1), true).slice(0, f.text.length);
            const delta = text.slice(sent.length);
            sent = text;
            const lpc = lp ? [lp[i]] : undefined;
            event(chat
              ? { id, object: 'chat.completion.chunk', created, model: name, choices: [{ index: 0, delta: i === 0 ? { role: 'assistant', content: delta } : { content: delta }, logprobs: lpc ? { content: lpc } : null, finish_reason: null }] }
              : { id, object: 'text_completion', created, model: name, choices: [{ index: 0, text: delta, logprobs: null, finish_reason: null }] });
          });
          event(chat ? { id, object: 'chat.completion.chunk', created, model: name, choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: f.reason }], usage } : { id, object: 'text_completion', created, model: name, choices: [{ index: 0, text: '', logprobs: null, finish_reason: f.reason }], usage });
          res.end('data: [DONE]\n\n');
        } catch (e) {
          fail(e);
        }
      })();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (e: NodeJS.ErrnoException) => reject(new TurnwiseError('invalid-input', `cannot listen on ${o.host ?? '127.0.0.1'}:${o.port ?? 8000}: ${e.code ?? e.message}`, { hint: e.code === 'EADDRINUSE' ? 'another program uses that port: give --port N' : 'check --host and --port' })));
    server.listen(o.port ?? 8000, o.host ?? '127.0.0.1', () => resolve());
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return {
    url: `http://${host}:${addr.port}`,
    port: addr.port,
    close: async () => {
      if (timer) clearTimeout(timer);
      const closed = new Promise<void>((r) => server.close(() => r()));
      server.closeAllConnections();
      await closed;
      await policy.dispose();
    },
  };
}
