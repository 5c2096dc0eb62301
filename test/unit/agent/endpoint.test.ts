// The endpoint action model over real HTTP. Against a small scripted server in this test (the
// one place a fake is right: a real server cannot be made to misbehave on cue): 429 with
// Retry-After, 500 then success, a slow reply past the timeout, malformed JSON, a reply with no
// bash block and one with two, a huge reply, auth failure, a wrong model name, nothing
// listening. And against a real `turnwise serve` with a generated Qwen2 folder: the model is
// found from /v1/models, the reply and its log-probs come back, the key is sent as a bearer token.
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { TurnwiseError } from '../../../src/core/errors';
import { apiBase, EndpointActionModel, EndpointClient, retryAfterMs } from '../../../src/agent/endpoint';
import type { ActRequest } from '../../../src/agent/types';
import { chatTokenizerFiles, tokenizerJsonSize } from '../../../src/policy/files/bpe';
import { writeModelFolder } from '../../../src/policy/files/hf';
import { initWeights } from '../../../src/policy/model/weights';
import { startServer } from '../../../src/serve/server';

type Handler = (req: http.IncomingMessage, body: string, res: http.ServerResponse, n: number) => void;

async function scripted(
  handler: Handler,
): Promise<{ url: string; calls: { route: string; body: string; auth?: string; at: number }[]; close: () => Promise<void> }> {
  const calls: { route: string; body: string; auth?: string; at: number }[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      calls.push({ route: `${req.method} ${req.url}`, body, auth: req.headers.authorization, at: Date.now() });
      handler(req, body, res, calls.length);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    calls,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

const json = (res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
};
const reply = (content: string, finish = 'stop') => ({
  choices: [
    { index: 0, message: { role: 'assistant', content }, finish_reason: finish, logprobs: { content: [{ token: 'x', logprob: -0.5 }] } },
  ],
});
const models = (res: http.ServerResponse) => json(res, 200, { object: 'list', data: [{ id: 'm', object: 'model' }] });
const REQ: ActRequest = { episodeId: 'e', task: 'fix it', turns: [], system: 'You fix bugs.', seed: 7 };

describe('agent/endpoint: an OpenAI-compatible server as the agent', function () {
  this.timeout(60_000);

  it('reads URLs and Retry-After', () => {
    assert.equal(apiBase('http://h:8000'), 'http://h:8000/v1');
    assert.equal(apiBase('http://h:8000/v1/'), 'http://h:8000/v1');
    assert.throws(() => apiBase('ftp://h'), /not http or https/);
    assert.throws(() => apiBase('nonsense'), /not a URL/);
    assert.equal(retryAfterMs('2'), 2000);
    assert.equal(retryAfterMs(new Date(10_000 + 3000).toUTCString(), 10_000), 3000);
    assert.equal(retryAfterMs(null), undefined);
  });

  it('sends the conversation as messages, and reads the reply, its action and log-probs', async () => {
    const s = await scripted((req, _b, res) =>
      req.url === '/v1/models' ? models(res) : json(res, 200, reply('I will look.\n```bash\ncat a.py\n```')),
    );
    try {
      const m = new EndpointActionModel(new EndpointClient({ url: s.url, keyEnv: 'TW_KEY', env: { TW_KEY: 'k-123' } }), {
        maxTokens: 64,
        temperature: 0.5,
      });
      const [r] = await m.act([REQ]);
      assert.deepEqual(r.action, { kind: 'bash', command: 'cat a.py', block: 'cat a.py' });
      assert.deepEqual(r.logprobs, [-0.5]);
      const sent = JSON.parse(s.calls[1].body);
      assert.equal(sent.model, 'm', 'the one model the server lists');
      assert.deepEqual(
        sent.messages.map((x: { role: string }) => x.role),
        ['system', 'user'],
      );
      assert.equal(sent.messages[1].content, 'fix it');
      assert.equal(sent.seed, 7);
      assert.equal(s.calls[1].auth, 'Bearer k-123');
      // The next turn's assistant message is the whole reply, not only its command.
      await m.act([{ ...REQ, turns: [{ action: 'cat a.py', observation: 'exit 0\nX = 1' }] }]);
      assert.equal(JSON.parse(s.calls[2].body).messages[2].content, 'I will look.\n```bash\ncat a.py\n```');
    } finally {
      await s.close();
    }
  });

  it("reads the server's usage: the counts come with the result and add up on the model; a reply without it adds nothing", async () => {
    const bodies = [
      {
        choices: [{ index: 0, message: { role: 'assistant', content: '```bash\nls\n```' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 120, completion_tokens: 9, total_tokens: 129 },
      },
      {
        choices: [{ index: 0, message: { role: 'assistant', content: 'submit' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 150, completion_tokens: 2 },
      },
      {
        choices: [{ index: 0, message: { role: 'assistant', content: 'submit' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: -1, completion_tokens: 'many' },
      },
      { choices: [{ index: 0, message: { role: 'assistant', content: 'submit' }, finish_reason: 'stop' }] },
    ];
    const s = await scripted((req, _b, res, n) => (req.url === '/v1/models' ? models(res) : json(res, 200, bodies[n - 2])));
    try {
      const m = new EndpointActionModel(new EndpointClient({ url: s.url }), { logprobs: false });
      const got = [];
      for (let i = 0; i < 4; i++) got.push((await m.act([REQ]))[0]);
      assert.deepEqual(
        got.map((r) => r.usage),
        [{ promptTokens: 120, completionTokens: 9 }, { promptTokens: 150, completionTokens: 2 }, undefined, undefined],
        'a count that is not a whole number ≥ 0 is not a count',
      );
      assert.deepEqual(got[0].logprobs, []);
      assert.deepEqual([m.promptTokens, m.sampledTokens, m.repliesWithoutUsage], [270, 11, 2]);
    } finally {
      await s.close();
    }
  });

  it('a reply with no bash block, or with two, is a format error, not a command', async () => {
    const texts = ['no code here', '```bash\nls\n```\n```bash\npwd\n```', 'submit'];
    const s = await scripted((req, _b, res, n) => (req.url === '/v1/models' ? models(res) : json(res, 200, reply(texts[(n - 2) % 3]))));
    try {
      const m = new EndpointActionModel(new EndpointClient({ url: s.url }));
      const kinds = [];
      for (let i = 0; i < 3; i++) kinds.push((await m.act([REQ]))[0].action!);
      assert.equal(kinds[0].kind, 'format-error');
      assert.match((kinds[0] as { reason: string }).reason, /no ```bash block/);
      assert.match((kinds[1] as { reason: string }).reason, /2 ```bash blocks/);
      assert.equal(kinds[2].kind, 'submit');
    } finally {
      await s.close();
    }
  });

  it('retries 429 after its Retry-After and 500 with backoff, then succeeds', async () => {
    const s = await scripted((req, _b, res, n) => {
      if (req.url === '/v1/models') return models(res);
      if (n === 2) return json(res, 429, { error: { message: 'slow down' } }, { 'retry-after': '1' });
      if (n === 3) return json(res, 500, { error: { message: 'oops' } });
      json(res, 200, reply('```bash\nls\n```'));
    });
    try {
      const m = new EndpointActionModel(new EndpointClient({ url: s.url, backoffMs: 50 }));
      const [r] = await m.act([REQ]);
      assert.equal(r.action?.kind, 'bash');
      const posts = s.calls.filter((c) => c.route.startsWith('POST'));
      assert.equal(posts.length, 3);
      assert.ok(posts[1].at - posts[0].at >= 950, `Retry-After 1 s honoured (${posts[1].at - posts[0].at} ms)`);
    } finally {
      await s.close();
    }
  });

  it('clear errors: a slow reply past the timeout, malformed JSON, a huge reply, auth, a wrong model, nothing listening, a missing key variable', async () => {
    const s = await scripted((req, body, res) => {
      if (req.url === '/v1/models') return models(res);
      const mode = JSON.parse(body).messages[1].content;
      if (mode === 'slow') return void setTimeout(() => json(res, 200, reply('late')), 3000);
      if (mode === 'bad') return void res.end('{"choices": [');
      if (mode === 'shape') return json(res, 200, { result: 'x' });
      if (mode === 'huge') return json(res, 200, reply('x'.repeat(200_000)));
      if (mode === 'auth') return json(res, 401, { error: { message: 'invalid api key' } });
      json(res, 200, reply('ok'));
    });
    try {
      const client = (o = {}) => new EndpointClient({ url: s.url, retries: 0, ...o });
      const ask = (task: string, o = {}) => new EndpointActionModel(client(o)).act([{ ...REQ, task }]);
      const fails = async (p: Promise<unknown>, re: RegExp, hint?: RegExp) => {
        await assert.rejects(p, (e: unknown) => e instanceof TurnwiseError && re.test(e.message) && (!hint || hint.test(e.hint ?? '')));
      };
      await fails(ask('slow', { timeoutMs: 500 }), /did not answer within 1 s|did not answer within 0 s/);
      await fails(ask('bad'), /not JSON/);
      await fails(ask('shape'), /not a chat completion/);
      await fails(ask('huge', { maxReplyBytes: 100_000 }), /larger than 100000 bytes/);
      await fails(ask('auth'), /answered 401: invalid api key/, /refused the key/);
      await fails(
        new EndpointActionModel(new EndpointClient({ url: s.url, model: 'gpt-x' })).act([REQ]),
        /serves no model "gpt-x"; it lists m/,
      );
      await fails(
        new EndpointActionModel(new EndpointClient({ url: 'http://127.0.0.1:9', retries: 0 })).act([REQ]),
        /cannot reach/,
        /server is running/,
      );
      assert.throws(() => new EndpointClient({ url: s.url, keyEnv: 'TW_NO_SUCH_KEY', env: {} }), /TW_NO_SUCH_KEY is not set/);
    } finally {
      await s.close();
    }
  });

  it('against a real turnwise serve: the model found from /v1/models, a reply and its log-probs, the key as a bearer token', async () => {
    const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-endpoint-'));
    const files = chatTokenizerFiles('chatml');
    const dir = path.join(tmp, 'served');
    writeModelFolder(
      dir,
      initWeights(
        {
          model_type: 'qwen2',
          hidden_size: 32,
          intermediate_size: 48,
          num_hidden_layers: 2,
          num_attention_heads: 4,
          num_key_value_heads: 2,
          rms_norm_eps: 1e-6,
          rope_theta: 1e6,
          vocab_size: Math.ceil(tokenizerJsonSize(files.tokenizerJson) / 64) * 64,
          max_position_embeddings: 512,
          tie_word_embeddings: true,
        },
        5,
        0.3,
      ),
      { dtype: 'float32', tokenizerJson: files.tokenizerJson, tokenizerConfig: files.tokenizerConfig },
    );
    const server = await startServer({ model: dir, port: 0, token: 'tok', settings: { provider: 'cpu' } });
    try {
      const m = new EndpointActionModel(new EndpointClient({ url: server.url, keyEnv: 'K', env: { K: 'tok' } }), {
        maxTokens: 12,
        temperature: 0,
      });
      assert.equal(await m.modelName(), 'served');
      const [r] = await m.act([REQ]);
      assert.ok(r.logprobs.length > 0 && r.logprobs.every((x) => Number.isFinite(x) && x <= 0));
      // Random weights write no bash block: the reply is read as the format error it is.
      assert.ok(r.action && ['format-error', 'bash', 'submit'].includes(r.action.kind));
      await assert.rejects(new EndpointActionModel(new EndpointClient({ url: server.url, retries: 0 })).act([REQ]), /answered 401/);
    } finally {
      await server.close();
      fs.rmSync(tmp, { recursive: true, force: true });
    }
  });
});
