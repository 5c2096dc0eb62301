// `turnwise serve` over real HTTP on loopback, with a generated Qwen2 folder (ChatML template,
// random weights) and real ONNX Runtime: the API's shapes, the prompt rendered by the model's
// template, greedy replies equal to the policy's own greedy continuation, log-probs, stop strings,
// SSE chunks that parse and add up to the text, concurrent requests answered from one batch,
// and the 4xx answers (auth, size, malformed, unknown model or route).
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ChatTemplate, templateTokens } from '../../../src/agent/chat-template';
import { loadCheckpoint } from '../../../src/policy/checkpoint';
import { chatTokenizerFiles, tokenizerJsonSize } from '../../../src/policy/bpe';
import type { ModelConfig } from '../../../src/policy/config';
import { writeModelFolder } from '../../../src/policy/hf';
import { Policy } from '../../../src/policy/policy';
import { initWeights } from '../../../src/policy/weights';
import { startServer, type RunningServer } from '../../../src/train/serve';

describe('train/serve: the OpenAI-compatible server', function () {
  this.timeout(120_000);
  let tmp: string;
  let dir: string;
  let server: RunningServer;
  const files = chatTokenizerFiles('chatml');
  const vocab = Math.ceil(tokenizerJsonSize(files.tokenizerJson) / 64) * 64;
  const config: ModelConfig = {
    model_type: 'qwen2', hidden_size: 32, intermediate_size: 48, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2,
    rms_norm_eps: 1e-6, rope_theta: 1_000_000, vocab_size: vocab, max_position_embeddings: 512, tie_word_embeddings: true,
  };

  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-serve-'));
    dir = path.join(tmp, 'qwen-tiny');
    writeModelFolder(dir, initWeights(config, 31, 0.3), { dtype: 'bfloat16', tokenizerJson: files.tokenizerJson, tokenizerConfig: files.tokenizerConfig });
    server = await startServer({ model: dir, port: 0, token: 'secret', maxRequestBytes: 4096, batchWaitMs: 50, settings: { provider: 'cpu' } });
  });
  after(async () => {
    await server?.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  const post = (route: string, body: unknown, headers: Record<string, string> = { authorization: 'Bearer secret' }) =>
    fetch(`${server.url}${route}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });

  it('listens on loopback only, and lists its one model', async () => {
    assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    const r = await fetch(`${server.url}/v1/models`, { headers: { authorization: 'Bearer secret' } });
    assert.equal(r.status, 200);
    const j = await r.json();
    assert.deepEqual(j.data.map((m: { id: string; object: string }) => [m.id, m.object]), [['qwen-tiny', 'model']]);
  });

  it('a greedy chat completion is the policy\'s own greedy continuation of the template-rendered prompt, with log-probs and usage', async () => {
    const messages = [{ role: 'system', content: 'You fix bugs.' }, { role: 'user', content: 'Hello <|im_end|> there' }];
    const r = await post('/v1/chat/completions', { model: 'qwen-tiny', messages, max_tokens: 12, temperature: 0, logprobs: true });
    assert.equal(r.status, 200);
    const j = await r.json();
    assert.equal(j.object, 'chat.completion');
    assert.equal(j.choices[0].message.role, 'assistant');
    // The same prompt and decode in-process.
    const ck = loadCheckpoint(dir);
    const tmpl = new ChatTemplate(String(files.tokenizerConfig.chat_template), 'test', templateTokens(files.tokenizerConfig));
    const ids = ck.tokenizer.encode(tmpl.render(messages as never, true));
    const p = new Policy(ck.weights, ck.tokenizer, { provider: 'cpu' });
    const [row] = await p.generateIds([ids], { maxNewTokens: 12, temperature: 0 });
    await p.dispose();
    assert.equal(j.usage.prompt_tokens, ids.length);
    assert.equal(j.choices[0].message.content, ck.tokenizer.decode(row.tokenIds, true));
    const lp = j.choices[0].logprobs.content;
    assert.equal(lp.length, j.usage.completion_tokens);
    lp.forEach((t: { logprob: number }, i: number) => assert.ok(Math.abs(t.logprob - row.logprobs[i]) < 1e-4));
  });

  it('a stop string cuts the text and ends with finish_reason stop; /v1/completions answers a raw prompt', async () => {
    const full = await (await post('/v1/completions', { prompt: 'def add(a, b):', max_tokens: 16, temperature: 0 })).json();
    assert.equal(full.object, 'text_completion');
    const text: string = full.choices[0].text;
    assert.ok(text.length >= 4, JSON.stringify(full));
    const stop = text.slice(2, 4);
    const cut = await (await post('/v1/completions', { prompt: 'def add(a, b):', max_tokens: 16, temperature: 0, stop })).json();
    assert.equal(cut.choices[0].text, text.slice(0, text.indexOf(stop)));
    assert.equal(cut.choices[0].finish_reason, 'stop');
  });

  it('streams server-sent events that parse, end with [DONE], and add up to the non-streamed text', async () => {
    const body = { messages: [{ role: 'user', content: 'write code' }], max_tokens: 10, temperature: 0.7, seed: 3 };
    const once = await (await post('/v1/chat/completions', body)).json();
    const r = await post('/v1/chat/completions', { ...body, stream: true });
    assert.equal(r.headers.get('content-type'), 'text/event-stream');
    const raw = await r.text();
    const events = raw.split('\n\n').filter(Boolean);
    assert.equal(events[events.length - 1], 'data: [DONE]');
    const chunks = events.slice(0, -1).map((e) => {
      assert.ok(e.startsWith('data: '), e);
      return JSON.parse(e.slice(6));
    });
    assert.ok(chunks.every((c) => c.object === 'chat.completion.chunk'));
    assert.equal(chunks.map((c) => c.choices[0].delta.content ?? '').join(''), once.choices[0].message.content, 'the same seed gives the same reply, streamed or not');
    assert.equal(chunks[chunks.length - 1].choices[0].finish_reason, once.choices[0].finish_reason);
  });

  it('concurrent requests are answered from batched runs, each as it would be alone', async () => {
    const bodies = [0, 1, 2, 3].map((k) => ({ messages: [{ role: 'user', content: `task ${k}` }], max_tokens: 8, temperature: 1, seed: 10 + k }));
    const alone = [];
    for (const b of bodies) {
      const r = await post('/v1/chat/completions', b);
      assert.equal(r.headers.get('x-turnwise-batch-size'), '1', 'one at a time: a batch of one');
      alone.push((await r.json()).choices[0].message.content);
    }
    const answers = await Promise.all(bodies.map((b) => post('/v1/chat/completions', b)));
    const sizes = answers.map((r) => Number(r.headers.get('x-turnwise-batch-size')));
    assert.ok(sizes.some((n) => n > 1), `sent together, some were sampled in one run (batch sizes ${sizes})`);
    const together = await Promise.all(answers.map(async (r) => (await r.json()).choices[0].message.content));
    assert.deepEqual(together, alone, 'a row\'s draws depend on its own seed only');
  });

  it('refuses what is malformed, too large, unauthorized, of another model or route, in the API\'s error shape', async () => {
    const cases: Array<[Promise<Response>, number, RegExp]> = [
      [post('/v1/chat/completions', '{not json'), 400, /not a JSON object/],
      [post('/v1/chat/completions', { messages: [] }), 400, /messages must be a non-empty list/],
      [post('/v1/chat/completions', { messages: [{ role: 'tool', content: 'x' }] }), 400, /role must be system, user or assistant/],
      [post('/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }], temperature: 7 }), 400, /temperature must be a number in \[0, 2\]/],
      [post('/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }], model: 'gpt-4o' }), 404, /is not served here/],
      [post('/v1/chat/completions', { messages: [{ role: 'user', content: 'x'.repeat(5000) }] }), 413, /larger than 4096 bytes/],
      [post('/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }] }, {}), 401, /bearer token/],
      [post('/v1/embeddings', { input: 'x' }), 404, /no route POST \/v1\/embeddings/],
    ];
    for (const [p, status, message] of cases) {
      const r = await p;
      assert.equal(r.status, status);
      const j = await r.json();
      assert.match(j.error.message, message);
      assert.equal(typeof j.error.type, 'string');
    }
  });
});
