// An OpenAI-compatible endpoint as the agent (docs/design.md "Action models"): vLLM, SGLang,
// llama.cpp's server, Ollama, hosted APIs, or `turnwise serve`. Each turn sends the conversation
// as chat messages to /v1/chat/completions and reads one reply in the chat action format (one
// fenced bash block, or submit). The reply, and its token log-probs when the server gives them,
// are recorded. Requests in flight are bounded; 429 and 5xx answers are retried with backoff that
// honours Retry-After; an unreachable server, a wrong model name, an auth failure or a reply that
// is not the API's shape is a clear error. The server's text is untrusted data like any tool
// output. The API key is read from an environment variable whose name the user gives, and is
// never written anywhere.
import { TurnwiseError } from '../core/errors';
import type { TokenUsage } from '../core/schema';
import { parseChatReply } from './chat-format';
import type { ActionFormatKind, ActionModel, ActRequest, ActResult } from './types';

export interface EndpointOptions {
  /** The server's base URL, e.g. http://127.0.0.1:8000 or http://127.0.0.1:8000/v1. */
  url: string;
  /** The model to ask for; default the one model the server lists. */
  model?: string;
  /** The environment variable holding the API key (sent as a bearer token). */
  keyEnv?: string;
  /** Requests in flight at once (default 4). */
  maxInFlight?: number;
  /** Per request (default 120 s). */
  timeoutMs?: number;
  /** Retries of a 429, 5xx or dropped connection (default 4). */
  retries?: number;
  /** First backoff (default 500 ms), doubled each retry, capped at 30 s. */
  backoffMs?: number;
  /** Largest reply body read (default 4 MiB): a bigger one is refused. */
  maxReplyBytes?: number;
  maxTokens?: number;
  temperature?: number;
  topP?: number;
  /** Ask for per-token log-probs (default true; a server that refuses them is asked again without). */
  logprobs?: boolean;
  /** The environment the key is read from (default process.env). */
  env?: Record<string, string | undefined>;
}

/** The base URL without a trailing slash, ending in /v1. */
export function apiBase(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new TurnwiseError('invalid-input', `--endpoint ${JSON.stringify(url)} is not a URL`, {
      hint: "give the server's address, e.g. http://127.0.0.1:8000/v1",
    });
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:')
    throw new TurnwiseError('invalid-input', `--endpoint ${url} is not http or https`, { hint: "give the server's http(s) address" });
  const base = `${u.origin}${u.pathname.replace(/\/+$/, '')}`;
  return base.endsWith('/v1') ? base : `${base}/v1`;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Retry-After as milliseconds (seconds or an HTTP date), undefined when absent or unreadable. */
export function retryAfterMs(v: string | null, now = Date.now()): number | undefined {
  if (!v) return undefined;
  if (/^\d+(\.\d+)?$/.test(v.trim())) return Math.round(Number(v) * 1000);
  const t = Date.parse(v);
  return Number.isFinite(t) ? Math.max(0, t - now) : undefined;
}

export class EndpointClient {
  readonly base: string;
  private readonly key: string | undefined;
  private inFlight = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(readonly o: EndpointOptions) {
    this.base = apiBase(o.url);
    if (o.keyEnv !== undefined) {
      const k = (o.env ?? process.env)[o.keyEnv];
      if (!k)
        throw new TurnwiseError('invalid-input', `the API key variable ${o.keyEnv} is not set`, {
          hint: `export ${o.keyEnv}=… before running, or leave out the key variable for a server that needs none`,
        });
      this.key = k;
    }
  }

  private async slot<T>(f: () => Promise<T>): Promise<T> {
    const max = this.o.maxInFlight ?? 4;
    while (this.inFlight >= max) await new Promise<void>((r) => this.waiting.push(r));
    this.inFlight++;
    try {
      return await f();
    } finally {
      this.inFlight--;
      this.waiting.shift()?.();
    }
  }

  /** One API call with retries; returns the parsed JSON body of a 2xx answer. */
  async request(method: 'GET' | 'POST', route: string, body?: unknown): Promise<unknown> {
    return this.slot(async () => {
      const retries = this.o.retries ?? 4;
      let backoff = this.o.backoffMs ?? 500;
      for (let attempt = 0; ; attempt++) {
        let res: Response;
        const ctrl = new AbortController();
        const timeout = this.o.timeoutMs ?? 120_000;
        const timer = setTimeout(() => ctrl.abort(), timeout);
        try {
          res = await fetch(`${this.base}${route}`, {
            method,
            headers: { 'content-type': 'application/json', ...(this.key ? { authorization: `Bearer ${this.key}` } : {}) },
            ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
            signal: ctrl.signal,
          });
        } catch (e) {
          clearTimeout(timer);
          const timedOut = ctrl.signal.aborted;
          if (attempt < retries && !timedOut) {
            await sleep(backoff);
            backoff = Math.min(30_000, backoff * 2);
            continue;
          }
          throw new TurnwiseError(
            'sandbox-failed',
            timedOut
              ? `${this.base}${route} did not answer within ${Math.round(timeout / 1000)} s`
              : `cannot reach ${this.base}${route}: ${((e as Error).cause as Error | undefined)?.message ?? (e as Error).message}`,
            {
              hint: timedOut
                ? 'give a longer timeout, or a smaller max_tokens'
                : 'check that the server is running and the URL (host, port, /v1) is right',
            },
          );
        }
        let text: string;
        try {
          text = await readCapped(res, this.o.maxReplyBytes ?? 4 * 1024 * 1024);
        } catch (e) {
          clearTimeout(timer);
          if (e instanceof TurnwiseError) throw e;
          throw new TurnwiseError('sandbox-failed', `${this.base}${route}: the answer broke off (${(e as Error).message})`, {
            hint: "check the server's log",
          });
        } finally {
          clearTimeout(timer);
        }
        if ((res.status === 429 || res.status >= 500) && attempt < retries) {
          await sleep(Math.min(60_000, retryAfterMs(res.headers.get('retry-after')) ?? backoff));
          backoff = Math.min(30_000, backoff * 2);
          continue;
        }
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          throw new TurnwiseError(
            'invalid-file',
            `${this.base}${route} answered ${res.status} with a body that is not JSON: ${JSON.stringify(text.slice(0, 200))}`,
            { hint: 'the URL may point at something that is not an OpenAI-compatible server' },
          );
        }
        if (!res.ok) {
          const msg = (json as { error?: { message?: unknown } })?.error?.message;
          const detail = typeof msg === 'string' ? msg.slice(0, 300) : text.slice(0, 200);
          const hint =
            res.status === 401 || res.status === 403
              ? `the server refused the key${this.o.keyEnv ? ` in ${this.o.keyEnv}` : ' (none was sent: give the variable that holds it)'}`
              : res.status === 404
                ? 'check the model name (the server lists its models at /v1/models) and the URL'
                : res.status === 429 || res.status >= 500
                  ? `the server still answered ${res.status} after ${retries} retries; try later or send fewer requests at once`
                  : 'the server refused the request as sent';
          throw new TurnwiseError(
            res.status === 401 || res.status === 403 ? 'invalid-input' : 'sandbox-failed',
            `${this.base}${route} answered ${res.status}: ${detail}`,
            { hint },
          );
        }
        return json;
      }
    });
  }

  /** The model to use: the one asked for (checked against the server's list), else the only one it lists. */
  async resolveModel(): Promise<string> {
    const j = (await this.request('GET', '/models')) as { data?: { id?: unknown }[] };
    const ids = Array.isArray(j?.data) ? j.data.map((m) => m?.id).filter((x): x is string => typeof x === 'string') : undefined;
    if (!ids)
      throw new TurnwiseError('invalid-file', `${this.base}/models did not answer with a model list`, {
        hint: 'the URL may point at something that is not an OpenAI-compatible server',
      });
    if (this.o.model) {
      if (ids.length && !ids.includes(this.o.model))
        throw new TurnwiseError(
          'invalid-input',
          `${this.base} serves no model ${JSON.stringify(this.o.model)}; it lists ${ids.slice(0, 10).join(', ')}`,
          { hint: 'give one of the listed names' },
        );
      return this.o.model;
    }
    if (ids.length !== 1)
      throw new TurnwiseError(
        'invalid-input',
        `${this.base} lists ${ids.length} models (${ids.slice(0, 10).join(', ')}); say which one to use`,
        { hint: 'give the model name' },
      );
    return ids[0];
  }
}

async function readCapped(res: Response, max: number): Promise<string> {
  const reader = res.body?.getReader();
  if (!reader) return '';
  const parts: Uint8Array[] = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.length;
    if (n > max) {
      await reader.cancel();
      throw new TurnwiseError('invalid-file', `the server's answer is larger than ${max} bytes`, {
        hint: 'ask for fewer tokens (max_tokens)',
      });
    }
    parts.push(value);
  }
  return Buffer.concat(parts).toString('utf8');
}

/** A chat completion's reply as the API shapes it, checked field by field. */
export function readChatCompletion(j: unknown): {
  text: string;
  finishReason: 'stop' | 'length';
  logprobs?: number[];
  tokenIds?: number[];
  usage?: TokenUsage;
} {
  const c = (j as { choices?: unknown[] })?.choices?.[0] as
    | {
        message?: { content?: unknown };
        finish_reason?: unknown;
        logprobs?: { content?: { logprob?: unknown }[] } | null;
        token_ids?: unknown;
      }
    | undefined;
  if (!c || typeof c.message?.content !== 'string') {
    throw new TurnwiseError(
      'invalid-file',
      `the server's reply is not a chat completion (no choices[0].message.content): ${JSON.stringify(j).slice(0, 200)}`,
      { hint: 'the server is not OpenAI-compatible, or the model returned no text' },
    );
  }
  const lp = c.logprobs?.content;
  const logprobs = Array.isArray(lp) && lp.every((t) => typeof t?.logprob === 'number') ? lp.map((t) => t.logprob as number) : undefined;
  const tokenIds = Array.isArray(c.token_ids) && c.token_ids.every((x) => Number.isInteger(x)) ? (c.token_ids as number[]) : undefined;
  const u = (j as { usage?: { prompt_tokens?: unknown; completion_tokens?: unknown } }).usage;
  const count = (x: unknown): x is number => Number.isInteger(x) && (x as number) >= 0;
  const usage =
    u && count(u.prompt_tokens) && count(u.completion_tokens)
      ? { promptTokens: u.prompt_tokens, completionTokens: u.completion_tokens }
      : undefined;
  return {
    text: c.message.content,
    finishReason: c.finish_reason === 'length' ? 'length' : 'stop',
    ...(logprobs ? { logprobs } : {}),
    ...(tokenIds ? { tokenIds } : {}),
    ...(usage ? { usage } : {}),
  };
}

/**
 * The endpoint as an ActionModel in the chat format: the messages are the system message, the
 * task, then each turn's reply and observation; the reply is read for its one bash block.
 */
export class EndpointActionModel implements ActionModel {
  readonly actionFormat: ActionFormatKind = 'chat';
  private model: Promise<string> | undefined;
  private logprobsRefused = false;
  /** Each episode's replies as the server wrote them: the assistant messages of later turns (a turn's action is only its command). */
  private readonly replies = new Map<string, string[]>();
  /** Tokens of the requests and replies so far, as the server's `usage` counted them (replies without it add nothing). */
  promptTokens = 0;
  sampledTokens = 0;
  /** Replies that came without a `usage` count. */
  repliesWithoutUsage = 0;

  constructor(
    readonly client: EndpointClient,
    private readonly o: Pick<EndpointOptions, 'maxTokens' | 'temperature' | 'topP' | 'logprobs'> = {},
  ) {}

  modelName(): Promise<string> {
    this.model ??= this.client.resolveModel();
    return this.model;
  }

  async act(requests: readonly ActRequest[]): Promise<ActResult[]> {
    const model = await this.modelName();
    return Promise.all(requests.map((r) => this.one(model, r)));
  }

  private async one(model: string, r: ActRequest): Promise<ActResult> {
    const past = this.replies.get(r.episodeId) ?? [];
    const messages = [
      ...(r.system ? [{ role: 'system', content: r.system }] : []),
      { role: 'user', content: r.task },
      ...r.turns.flatMap((t, i) => [
        { role: 'assistant', content: past[i] ?? t.action },
        { role: 'user', content: t.observation },
      ]),
    ];
    const wantLp = (this.o.logprobs ?? true) && !this.logprobsRefused;
    const body = {
      model,
      messages,
      max_tokens: this.o.maxTokens ?? 512,
      temperature: this.o.temperature ?? 1,
      top_p: this.o.topP ?? 1,
      seed: r.seed,
      ...(wantLp ? { logprobs: true } : {}),
    };
    let j: unknown;
    try {
      j = await this.client.request('POST', '/chat/completions', body);
    } catch (e) {
      // A server that cannot give log-probs refuses the field: ask once more without it.
      if (!wantLp || !(e instanceof TurnwiseError) || !/answered 400/.test(e.message) || !/logprob/i.test(e.message)) throw e;
      this.logprobsRefused = true;
      const { logprobs: _drop, ...rest } = body;
      void _drop;
      j = await this.client.request('POST', '/chat/completions', rest);
    }
    const c = readChatCompletion(j);
    this.replies.set(r.episodeId, [...past.slice(0, r.turns.length), c.text]);
    if (c.usage) {
      this.promptTokens += c.usage.promptTokens;
      this.sampledTokens += c.usage.completionTokens;
    } else this.repliesWithoutUsage++;
    return {
      text: c.text,
      tokenIds: c.tokenIds ?? [],
      logprobs: c.logprobs ?? [],
      finishReason: c.finishReason,
      action: await parseChatReply(c.text, c.finishReason === 'stop'),
      ...(c.usage ? { usage: c.usage } : {}),
    };
  }

  release(episodeId: string): void {
    this.replies.delete(episodeId);
  }
}
