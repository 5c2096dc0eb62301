// `turnwise serve`: a Turnwise checkpoint (or a Hugging Face model folder, with a LoRA adapter on
// top) behind the OpenAI-compatible API: GET /v1/models, POST /v1/chat/completions (rendered with
// the model's own chat template) and POST /v1/completions, non-streaming or as server-sent events
// sent as the tokens are sampled, with `logprobs` / `top_logprobs`, `n`, `max_tokens`,
// `temperature`, `top_p`, `stop` and `seed`. Requests (and the n choices of one) that arrive
// together are sampled in one batched run of the KV-cache decode. Bound to 127.0.0.1 unless told
// otherwise; an optional bearer token; request size and queue limits; every malformed request
// gets a 4xx in the API's error shape.
//
// A chat prompt is built as the agent's chat format builds it (agent/chat-format.ts): the
// template's text with special tokens on, message content with them off (a message holding
// `<|im_end|>` cannot end a turn), and an assistant message this server wrote in the ids it was
// sampled as (choices carry `token_ids`, as vLLM's do). So a conversation continued through this
// server is the same ids as the same model continuing it in-process: an evaluation through the
// endpoint gives the episodes of a local one.
import { createHash, timingSafeEqual } from 'node:crypto';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { TurnwiseError } from '../core/errors';
import { ChatFormat, type ChatTokenizer } from '../agent/chat-format';
import { ChatTemplate, templateTokens, type ChatMessage } from '../agent/chat-template';
import { loadCheckpoint } from '../policy/files/checkpoint';
import { chatTemplateOf } from '../policy/files/hf';
import { loadAdapter } from '../policy/files/lora';
import { availableMemory, samplingPacksWeights } from '../policy/model/memory';
import { Policy, type SampleRequest } from '../policy/inference/policy';
import type { TokenLogprob } from '../policy/inference/sampling';
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
  /**
   * Whether CPU decode steps hold the weights packed (a second copy, faster batches): `auto`
   * (default) where a full batch of sequences of twice the token cap fits the memory beside it
   * (samplingPacksWeights). `settings.packDecodeWeights`, when set, wins.
   */
  packDecodeWeights?: 'auto' | 'on' | 'off';
  settings?: SessionSettings;
  /** Where the server logs what a client cannot see: every 5xx answer, with its cause. */
  onLog?: (line: string) => void;
}

/** Whether a host is reachable from other machines (not a loopback address). */
export function listensBeyondLoopback(host: string): boolean {
  return !(host === 'localhost' || host === '::1' || /^127\./.test(host));
}

/** Whether a request's Authorization header carries the token, compared in constant time (sha-256 digests of equal length). */
export function bearerMatches(header: string | undefined, token: string): boolean {
  const digest = (s: string) => createHash('sha256').update(s).digest();
  return timingSafeEqual(digest(header ?? ''), digest(`Bearer ${token}`));
}

export interface RunningServer {
  url: string;
  port: number;
  /** The execution provider the model runs on (the CPU's when the one asked for could not load). */
  provider: Promise<string>;
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

interface Sampled {
  tokenIds: number[];
  logprobs: number[];
  topLogprobs?: TokenLogprob[][];
  finishReason: 'stop' | 'length';
  batch: number;
}

interface Job {
  prompt: number[];
  req: Omit<SampleRequest, 'seq'>;
  /** Called when the job's batch starts sampling, with its size. */
  started?: (batch: number) => void;
  resolve: (r: Sampled) => void;
  reject: (e: unknown) => void;
}

/** Reply texts this server wrote, with the ids they were sampled as (most recent kept). */
class ReplyIds {
  private readonly map = new Map<string, number[]>();
  constructor(private readonly max = 4096) {}
  get(text: string): number[] | undefined {
    return this.map.get(text);
  }
  set(text: string, ids: number[]): void {
    this.map.delete(text);
    this.map.set(text, ids);
    if (this.map.size > this.max) this.map.delete(this.map.keys().next().value!);
  }
}

/** A placeholder for message `i` in a skeleton render: private-use characters no template writes. */
const slot = (i: number) => `\uE000${i}\uE001`;

/**
 * Ids of messages through a template, content as data: the template rendered with a placeholder
 * per message, its own text encoded with special tokens on, each message's content with them off.
 * Undefined when the template changes a message's text (the plain render is used then).
 */
function encodeAsData(template: ChatTemplate, tok: ChatTokenizer, messages: readonly ChatMessage[], now: Date): number[] | undefined {
  const skeleton = template.render(
    messages.map((m, i) => ({ role: m.role, content: slot(i) })),
    true,
    now,
  );
  const filled = skeleton.replace(/\uE000(\d+)\uE001/g, (_, i) => messages[Number(i)].content);
  if (filled !== template.render(messages, true, now)) return undefined;
  const ids: number[] = [];
  let at = 0;
  for (const m of skeleton.matchAll(/\uE000(\d+)\uE001/g)) {
    if (m.index > at) ids.push(...tok.encode(skeleton.slice(at, m.index), { special: true }));
    ids.push(...tok.encode(messages[Number(m[1])].content, { special: false }));
    at = m.index + m[0].length;
  }
  if (at < skeleton.length) ids.push(...tok.encode(skeleton.slice(at), { special: true }));
  return ids;
}

const num = (v: unknown, name: string, lo: number, hi: number, integer = false): number | undefined => {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < lo || v > hi || (integer && !Number.isInteger(v)))
    throw new ApiError(
      400,
      `${name} must be ${integer ? 'an integer' : 'a number'} in [${lo}, ${hi}], got ${JSON.stringify(v)}`,
      'invalid_request_error',
      name,
    );
  return v;
};

export async function startServer(o: ServeOptions): Promise<RunningServer> {
  const ck = loadCheckpoint(o.model, { optimizer: false });
  const adapter = o.adapter ? loadAdapter(o.adapter, ck.weights.config) : ck.adapter;
  const cap = o.maxTokensCap ?? 2048;
  const settings = o.settings ?? {};
  let pack = settings.packDecodeWeights;
  if (pack === undefined) {
    const d = samplingPacksWeights(
      o.packDecodeWeights ?? 'auto',
      settings.provider ?? 'cpu',
      ck.weights.config,
      { episodes: o.maxBatch ?? 8, context: 2 * cap },
      availableMemory(),
    );
    if (d.note) settings.onWarning?.(d.note);
    pack = d.pack;
  }
  const policy = new Policy(ck.weights, ck.tokenizer, { ...settings, packDecodeWeights: pack }, adapter);
  const tok = ck.tokenizer;
  const found = chatTemplateOf(ck.dir, ck.tokenizerConfig);
  const template = found ? new ChatTemplate(found.template, found.source, templateTokens(ck.tokenizerConfig)) : undefined;
  const context = ck.weights.config.max_position_embeddings;
  // The agent's chat format over the template, when the template allows it (prefix-stable, a
  // special token ending each reply): conversations are then built as the agent builds them.
  let format: ChatFormat | undefined;
  try {
    format =
      template && context > 65 ? new ChatFormat({ template, tokenizer: tok, contextTokens: context, maxActionTokens: 1 }) : undefined;
  } catch {
    format = undefined;
  }
  const eos = ck.weights.config.eos_token_ids ?? (ck.weights.config.eos_token_id !== undefined ? [ck.weights.config.eos_token_id] : []);
  // A chat reply ends at the template's end of turn or an eos id, as the agent's replies do.
  const chatStopIds = format ? [...new Set([format.endOfTurn.id, ...eos])] : undefined;
  const replyIds = new ReplyIds();
  const name =
    o.name ??
    (o.adapter
      ? `${ck.dir.split('/').pop()}+${o.adapter.replace(/\/+$/, '').split('/').pop()}`
      : (ck.adapterDir ?? ck.dir).split('/').pop()!);
  const created = Math.floor(Date.now() / 1000);
  const maxBytes = o.maxRequestBytes ?? 1024 * 1024;
  const maxQueued = o.maxQueued ?? 64;
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
    for (const j of batch) j.started?.(batch.length);
    try {
      const rows = await policy.sample(batch.map((j, i) => ({ ...j.req, seq: seqs[i] })));
      rows.forEach((r, i) => {
        // A sampled token has a finite log-prob under any working model; NaN or infinite ones mean
        // broken weights, whose tokens are noise: the server's fault, answered 500 and logged.
        const bad = r.logprobs.findIndex((x) => !Number.isFinite(x));
        if (bad >= 0)
          batch[i].reject(
            new TurnwiseError(
              'internal',
              `the model gave a log-prob of ${r.logprobs[bad]} for its sampled token ${bad + 1}: its weights hold NaN or infinite values`,
            ),
          );
        else batch[i].resolve({ ...r, batch: batch.length });
      });
    } catch (e) {
      batch.forEach((j) => j.reject(e));
    } finally {
      running = false;
      if (queue.length) setImmediate(() => void drain());
    }
  };
  const submit = (prompt: number[], req: Omit<SampleRequest, 'seq'>, started?: (batch: number) => void) =>
    new Promise<Sampled>((resolve, reject) => {
      if (queue.length >= maxQueued)
        return reject(new ApiError(429, `${maxQueued} requests are waiting already; try again shortly`, 'rate_limit_exceeded'));
      if (prompt.length >= context)
        return reject(
          new ApiError(
            400,
            `the prompt is ${prompt.length} tokens; this model's context is ${context}`,
            'invalid_request_error',
            'messages',
          ),
        );
      queue.push({ prompt, req, resolve, reject, ...(started ? { started } : {}) });
      timer ??= setTimeout(() => void drain(), o.batchWaitMs ?? 5);
    });

  /** Sampling settings common to both endpoints, from a request body. */
  const sampling = (b: Record<string, unknown>) => {
    const n = num(b.n, 'n', 1, 16, true) ?? 1;
    const maxTokens = num(b.max_completion_tokens ?? b.max_tokens, 'max_tokens', 1, cap, true) ?? Math.min(256, cap);
    const temperature = num(b.temperature, 'temperature', 0, 2) ?? 1;
    const topP = num(b.top_p, 'top_p', Number.MIN_VALUE, 1) ?? 1;
    const seed = num(b.seed, 'seed', 0, 2 ** 32 - 1, true) ?? 0;
    const stopRaw = b.stop ?? [];
    const stop =
      typeof stopRaw === 'string'
        ? [stopRaw]
        : Array.isArray(stopRaw) && stopRaw.length <= 4 && stopRaw.every((x) => typeof x === 'string' && x !== '')
          ? (stopRaw as string[])
          : undefined;
    if (!stop) throw new ApiError(400, 'stop must be a string or a list of up to 4 non-empty strings', 'invalid_request_error', 'stop');
    return { n, maxTokens, temperature, topP, seed, stop, stream: b.stream === true };
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

  const tokenEntry = (id: number, logprob: number) => {
    const token = tok.decode([id], false);
    return { token, logprob, bytes: [...Buffer.from(token, 'utf8')] };
  };
  /** Chat logprobs content for sampled tokens, each with its `top` alternatives ([] when none were asked). */
  const logprobContent = (ids: number[], lps: number[], tops?: TokenLogprob[][]) =>
    ids.map((id, i) => ({ ...tokenEntry(id, lps[i]), top_logprobs: (tops?.[i] ?? []).map((t) => tokenEntry(t.id, t.logprob)) }));
  /** Completions logprobs (the legacy shape): tokens, their log-probs, alternatives as {token: logprob}, text offsets. */
  const legacyLogprobs = (ids: number[], lps: number[], tops: TokenLogprob[][] | undefined, offset: number) => {
    const tokens = ids.map((id) => tok.decode([id], false));
    const text_offset: number[] = [];
    let at = offset;
    for (const t of tokens) {
      text_offset.push(at);
      at += t.length;
    }
    return {
      tokens,
      token_logprobs: lps,
      top_logprobs: tops ? tops.map((row) => Object.fromEntries(row.map((t) => [tok.decode([t.id], false), t.logprob]))) : null,
      text_offset,
    };
  };

  /**
   * The prompt ids of a chat request. With the agent's chat format (system message, task, then
   * reply / observation pairs): its conversation, replies this server wrote in their sampled ids;
   * otherwise the template's render with message content encoded as data.
   */
  const chatPrompt = (messages: ChatMessage[]): number[] => {
    const shaped =
      messages.length >= 2 &&
      messages[0].role === 'system' &&
      messages.slice(1).every((m, i) => m.role === (i % 2 === 0 ? 'user' : 'assistant')) &&
      messages[messages.length - 1].role === 'user';
    if (format && shaped) {
      try {
        const conv = format.conversation(messages[0].content, messages[1].content);
        for (let i = 2; i < messages.length; i += 2) {
          const text = messages[i].content;
          const known = replyIds.get(text);
          const ids = known ?? [...tok.encode(text.trim(), { special: false }), format.endOfTurn.id];
          conv.addReply({ text, tokenIds: ids, stopped: chatStopIds!.includes(ids[ids.length - 1]) });
          conv.addObservation(messages[i + 1].content);
        }
        const p = conv.prompt();
        if (p.firstTurn === 0) return p.ids;
      } catch (e) {
        if (!(e instanceof TurnwiseError)) throw e;
      }
    }
    // One date per request for the template's clock (the agent's conversations above keep the one
    // their format pinned when the server started, so every turn's prompt extends the last).
    const now = new Date();
    try {
      return encodeAsData(template!, tok, messages, now) ?? tok.encode(template!.render(messages, true, now));
    } catch (e) {
      // A template that raises on the messages (roles out of the order it accepts) refuses the
      // request, as vLLM answers it: the client's 400, not the server's 500.
      if (e instanceof TurnwiseError && /raised while rendering/.test(e.message))
        throw new ApiError(
          400,
          `the model's chat template refused these messages: ${e.message.replace(/^.*?raised while rendering [^:]*: /, '')}`,
          'invalid_request_error',
          'messages',
        );
      throw e;
    }
  };

  const server = http.createServer((req, res) => {
    const send = (status: number, body: unknown, extra: Record<string, string> = {}) => {
      const text = JSON.stringify(body);
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...extra });
      res.end(text);
    };
    const fail = (e: unknown) => {
      if (e instanceof ApiError) return send(e.status, { error: { message: e.message, type: e.type, param: e.param, code: null } });
      const message = e instanceof TurnwiseError ? e.message : 'the server failed to answer';
      // The client sees a short message; the cause goes to the server's log.
      o.onLog?.(`500 on ${req.method} ${req.url}: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
      send(500, { error: { message, type: 'server_error', param: null, code: null } });
    };
    if (o.token && !bearerMatches(req.headers.authorization, o.token))
      return fail(new ApiError(401, 'missing or wrong bearer token', 'authentication_error'));
    const url = (req.url ?? '').split('?')[0];
    if (req.method === 'GET' && url === '/v1/models')
      return send(200, { object: 'list', data: [{ id: name, object: 'model', created, owned_by: 'turnwise' }] });
    if (req.method !== 'POST' || (url !== '/v1/chat/completions' && url !== '/v1/completions'))
      return fail(
        new ApiError(
          404,
          `no route ${req.method} ${url}; this server answers GET /v1/models, POST /v1/chat/completions and POST /v1/completions`,
          'not_found_error',
        ),
      );
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
          if (body.model !== undefined && body.model !== name)
            throw new ApiError(
              404,
              `model ${JSON.stringify(body.model)} is not served here; this server serves ${JSON.stringify(name)}`,
              'not_found_error',
              'model',
            );
          const s = sampling(body);
          const chat = url === '/v1/chat/completions';
          let prompt: number[];
          if (chat) {
            if (!template)
              throw new ApiError(
                400,
                `${ck.dir} has no chat template, so it answers /v1/completions only`,
                'invalid_request_error',
                'messages',
              );
            const msgs = body.messages;
            if (!Array.isArray(msgs) || msgs.length === 0)
              throw new ApiError(400, 'messages must be a non-empty list', 'invalid_request_error', 'messages');
            const messages: ChatMessage[] = msgs.map((m, i) => {
              const r = m as { role?: unknown; content?: unknown };
              if (!r || (r.role !== 'system' && r.role !== 'user' && r.role !== 'assistant'))
                throw new ApiError(400, `messages[${i}].role must be system, user or assistant`, 'invalid_request_error', 'messages');
              const content =
                typeof r.content === 'string'
                  ? r.content
                  : Array.isArray(r.content)
                    ? r.content
                        .map((p: { type?: unknown; text?: unknown }) => (p?.type === 'text' && typeof p.text === 'string' ? p.text : ''))
                        .join('')
                    : undefined;
              if (content === undefined)
                throw new ApiError(
                  400,
                  `messages[${i}].content must be a string or a list of text parts`,
                  'invalid_request_error',
                  'messages',
                );
              return { role: r.role, content };
            });
            prompt = chatPrompt(messages);
          } else {
            if (typeof body.prompt !== 'string') throw new ApiError(400, 'prompt must be a string', 'invalid_request_error', 'prompt');
            prompt = tok.encode(body.prompt);
          }
          // Log-probs: chat `logprobs: true` (+ `top_logprobs: N`); completions `logprobs: N` (N alternatives, 0 for none).
          let top = 0;
          let wantLogprobs: boolean;
          if (chat) {
            if (body.logprobs !== undefined && body.logprobs !== null && typeof body.logprobs !== 'boolean')
              throw new ApiError(400, 'logprobs must be true or false', 'invalid_request_error', 'logprobs');
            wantLogprobs = body.logprobs === true;
            top = num(body.top_logprobs, 'top_logprobs', 0, 20, true) ?? 0;
            if (top > 0 && !wantLogprobs)
              throw new ApiError(400, 'top_logprobs needs logprobs: true', 'invalid_request_error', 'top_logprobs');
          } else {
            const lp = num(body.logprobs, 'logprobs', 0, 20, true);
            wantLogprobs = lp !== undefined;
            top = lp ?? 0;
          }
          const id = `${chat ? 'chatcmpl' : 'cmpl'}-${created.toString(36)}${Math.random().toString(36).slice(2, 10)}`;
          const object = chat ? 'chat.completion' : 'text_completion';
          const maxStop = Math.max(0, ...s.stop.map((x) => x.length));
          // Each choice is its own row of the batch: choice i draws from its own seed (choice 0 from `seed`).
          const choices = Array.from({ length: s.n }, (_, index) => ({
            index,
            seed: (s.seed + Math.imul(index, 0x9e3779b1)) >>> 0,
            ids: [] as number[],
            lps: [] as number[],
            tops: [] as TokenLogprob[][],
            /** Characters of text after each token, and those already streamed (with their tokens). */
            lengths: [] as number[],
            sentChars: 0,
            sentTokens: 0,
            text: '',
          }));
          let headersSent = false;
          let batchSize = 1;
          const event = (d: unknown) => {
            if (!res.destroyed) res.write(`data: ${JSON.stringify(d)}\n\n`);
          };
          const chunk = (
            index: number,
            text: string,
            lp: ReturnType<typeof logprobContent> | undefined,
            finish: 'stop' | 'length' | null,
            first: boolean,
            extra: Record<string, unknown> = {},
          ) =>
            chat
              ? {
                  id,
                  object: 'chat.completion.chunk',
                  created,
                  model: name,
                  choices: [
                    {
                      index,
                      delta: finish !== null && !text ? {} : first ? { role: 'assistant', content: text } : { content: text },
                      logprobs: lp ? { content: lp } : null,
                      finish_reason: finish,
                    },
                  ],
                  ...extra,
                }
              : {
                  id,
                  object: 'text_completion',
                  created,
                  model: name,
                  choices: [
                    {
                      index,
                      text,
                      logprobs: lp
                        ? legacyLogprobs(
                            lp.map((_, k) => choices[index].ids[choices[index].sentTokens - lp.length + k]),
                            lp.map((x) => x.logprob),
                            top ? choices[index].tops.slice(choices[index].sentTokens - lp.length, choices[index].sentTokens) : undefined,
                            choices[index].sentChars - text.length,
                          )
                        : null,
                      finish_reason: finish,
                    },
                  ],
                  ...extra,
                };
          const startStream = () => {
            if (headersSent) return;
            headersSent = true;
            res.writeHead(200, {
              'content-type': 'text/event-stream',
              'cache-control': 'no-cache',
              connection: 'keep-alive',
              'x-turnwise-batch-size': String(batchSize),
            });
          };
          /** Streams what of a choice's text is final: a stop string may still begin in the last characters, and a character may be half a token. */
          const flush = (c: (typeof choices)[number], upto: number) => {
            if (upto <= c.sentChars) return;
            const delta = c.text.slice(c.sentChars, upto);
            let k = c.sentTokens;
            while (k < c.ids.length && c.lengths[k] <= upto) k++;
            const lp = wantLogprobs
              ? logprobContent(c.ids.slice(c.sentTokens, k), c.lps.slice(c.sentTokens, k), top ? c.tops.slice(c.sentTokens, k) : undefined)
              : undefined;
            const first = c.sentChars === 0;
            c.sentChars = upto;
            c.sentTokens = k;
            startStream();
            event(chunk(c.index, delta, lp, null, first));
          };
          const onToken =
            (c: (typeof choices)[number]) =>
            (t: { id: number; logprob: number; top?: TokenLogprob[] }): void | 'stop' => {
              c.ids.push(t.id);
              c.lps.push(t.logprob);
              if (t.top) c.tops.push(t.top);
              let text = tok.decode(c.ids, true);
              const at = Math.min(...s.stop.map((x) => text.indexOf(x)).filter((i) => i >= 0), Infinity);
              if (at !== Infinity) text = text.slice(0, at);
              c.text = text;
              c.lengths.push(text.length);
              if (s.stream) {
                let safe = at !== Infinity ? text.length : text.length - Math.max(0, maxStop - 1);
                while (safe > c.sentChars && text[safe - 1] === '\uFFFD') safe--;
                flush(c, safe);
              }
              // A client that went away stops its rows; a stop string ends the row where it is written.
              if (at !== Infinity || (s.stream && res.destroyed)) return 'stop';
            };
          const results = await Promise.all(
            choices.map((c) =>
              submit(
                prompt,
                {
                  maxNewTokens: Math.min(s.maxTokens, context - prompt.length),
                  temperature: s.temperature,
                  topP: s.topP,
                  seed: c.seed,
                  ...(top ? { topLogprobs: top } : {}),
                  ...(chat && chatStopIds ? { stopIds: chatStopIds } : {}),
                  onToken: onToken(c),
                },
                (n) => (batchSize = Math.max(batchSize, n)),
              ).then((r) => {
                const f = finish(r, s.stop);
                // A reply that comes back as an assistant message is put back in the ids it was sampled as.
                if (chat && f.kept === r.tokenIds.length) replyIds.set(f.text, r.tokenIds);
                if (s.stream) {
                  flush(c, f.text.length);
                  startStream();
                  event(chunk(c.index, '', undefined, f.reason, false));
                }
                return { r, f };
              }),
            ),
          );
          const usage = {
            prompt_tokens: prompt.length,
            completion_tokens: results.reduce((a, x) => a + x.f.kept, 0),
            total_tokens: prompt.length + results.reduce((a, x) => a + x.f.kept, 0),
          };
          if (s.stream) {
            startStream();
            event(
              chat
                ? { id, object: 'chat.completion.chunk', created, model: name, choices: [], usage }
                : { id, object: 'text_completion', created, model: name, choices: [], usage },
            );
            res.end('data: [DONE]\n\n');
            return;
          }
          const body2 = results.map(({ r, f }, index) => {
            const ids = r.tokenIds.slice(0, f.kept);
            const lps = r.logprobs.slice(0, f.kept);
            const tops = top ? r.topLogprobs?.slice(0, f.kept) : undefined;
            return chat
              ? {
                  index,
                  message: { role: 'assistant', content: f.text },
                  logprobs: wantLogprobs ? { content: logprobContent(ids, lps, tops) } : null,
                  finish_reason: f.reason,
                  token_ids: ids,
                }
              : {
                  index,
                  text: f.text,
                  logprobs: wantLogprobs ? legacyLogprobs(ids, lps, tops, 0) : null,
                  finish_reason: f.reason,
                  token_ids: ids,
                };
          });
          // How many requests shared the run that sampled this one.
          return send(200, { id, object, created, model: name, choices: body2, usage }, { 'x-turnwise-batch-size': String(batchSize) });
        } catch (e) {
          fail(e);
        }
      })();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (e: NodeJS.ErrnoException) =>
      reject(
        new TurnwiseError('invalid-input', `cannot listen on ${o.host ?? '127.0.0.1'}:${o.port ?? 8000}: ${e.code ?? e.message}`, {
          hint: e.code === 'EADDRINUSE' ? 'another program uses that port: give --port N' : 'check --host and --port',
        }),
      ),
    );
    server.listen(o.port ?? 8000, o.host ?? '127.0.0.1', () => resolve());
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return {
    url: `http://${host}:${addr.port}`,
    port: addr.port,
    get provider() {
      return policy.provider;
    },
    close: async () => {
      if (timer) clearTimeout(timer);
      const closed = new Promise<void>((r) => server.close(() => r()));
      server.closeAllConnections();
      await closed;
      await policy.dispose();
    },
  };
}
