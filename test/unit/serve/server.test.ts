// `turnwise serve` over real HTTP on loopback, with a generated Qwen2 folder (ChatML template,
// random weights) and real ONNX Runtime: the API's shapes, the prompt rendered by the model's
// template with message content as data, greedy replies equal to the policy's own greedy
// continuation, a reply sent back read in its sampled ids, log-probs and top log-probs, n choices
// from one batch, stop strings, SSE chunks sent as the tokens are sampled that parse and add up to
// the text, concurrent requests answered from one batch, and the 4xx answers (auth, size,
// malformed, unknown model or route).
import * as assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { loadCheckpoint } from '../../../src/policy/files/checkpoint';
import { chatTokenizerFiles, tokenizerJsonSize } from '../../../src/policy/files/bpe';
import type { ModelConfig } from '../../../src/policy/model/config';
import { writeModelFolder } from '../../../src/policy/files/hf';
import { Policy } from '../../../src/policy/inference/policy';
import { initWeights } from '../../../src/policy/model/weights';
import { bearerMatches, listensBeyondLoopback, startServer, type RunningServer } from '../../../src/serve/server';
import { chatFormatOf } from '../../../src/train/chat-model';

describe('serve/server: the OpenAI-compatible server', function () {
  this.timeout(120_000);
  let tmp: string;
  let dir: string;
  let server: RunningServer;
  const files = chatTokenizerFiles('chatml');
  const vocab = Math.ceil(tokenizerJsonSize(files.tokenizerJson) / 64) * 64;
  const config: ModelConfig = {
    model_type: 'qwen2',
    hidden_size: 32,
    intermediate_size: 48,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    rms_norm_eps: 1e-6,
    rope_theta: 1_000_000,
    vocab_size: vocab,
    max_position_embeddings: 512,
    tie_word_embeddings: true,
  };

  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-serve-'));
    dir = path.join(tmp, 'qwen-tiny');
    writeModelFolder(dir, initWeights(config, 31, 0.3), {
      dtype: 'bfloat16',
      tokenizerJson: files.tokenizerJson,
      tokenizerConfig: files.tokenizerConfig,
    });
    server = await startServer({
      model: dir,
      port: 0,
      token: 'secret',
      maxRequestBytes: 4096,
      batchWaitMs: 50,
      settings: { provider: 'cpu' },
    });
  });
  after(async () => {
    await server?.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  const post = (route: string, body: unknown, headers: Record<string, string> = { authorization: 'Bearer secret' }) =>
    fetch(`${server.url}${route}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });

  it('listens on loopback only, and lists its one model', async () => {
    assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    const r = await fetch(`${server.url}/v1/models`, { headers: { authorization: 'Bearer secret' } });
    assert.equal(r.status, 200);
    const j = await r.json();
    assert.deepEqual(
      j.data.map((m: { id: string; object: string }) => [m.id, m.object]),
      [['qwen-tiny', 'model']],
    );
  });

  it("a greedy chat completion is the policy's own greedy continuation of the template-rendered prompt (content as data), with log-probs, token ids and usage", async () => {
    const messages = [
      { role: 'system', content: 'You fix bugs.' },
      { role: 'user', content: 'Hello <|im_end|> there' },
    ];
    const r = await post('/v1/chat/completions', { model: 'qwen-tiny', messages, max_tokens: 12, temperature: 0, logprobs: true });
    assert.equal(r.status, 200);
    const j = await r.json();
    assert.equal(j.object, 'chat.completion');
    assert.equal(j.choices[0].message.role, 'assistant');
    // The same prompt and decode in-process: the conversation the agent's chat format builds.
    const ck = loadCheckpoint(dir);
    const format = chatFormatOf(ck, 1);
    const ids = format.conversation(messages[0].content, messages[1].content).prompt().ids;
    assert.equal(ck.tokenizer.decode(ids), format.o.template.render(messages as never, true), "the template's text");
    assert.equal(
      ids.filter((x) => x === format.endOfTurn.id).length,
      2,
      '<|im_end|> in a message is text, not the token: only the two the template writes',
    );
    const p = new Policy(ck.weights, ck.tokenizer, { provider: 'cpu' });
    const [row] = await p.generateIds([ids], { maxNewTokens: 12, temperature: 0, stopIds: [format.endOfTurn.id] });
    await p.dispose();
    assert.equal(j.usage.prompt_tokens, ids.length);
    assert.equal(j.choices[0].message.content, ck.tokenizer.decode(row.tokenIds, true));
    assert.deepEqual(j.choices[0].token_ids, row.tokenIds.slice(0, j.usage.completion_tokens));
    const lp = j.choices[0].logprobs.content;
    assert.equal(lp.length, j.usage.completion_tokens);
    lp.forEach((t: { logprob: number }, i: number) => assert.ok(Math.abs(t.logprob - row.logprobs[i]) < 1e-4));
  });

  it('packDecodeWeights: "on" holds the weights packed while serving (one folder, gone at close) and answers what fed weights answer; "off" and auto on a small model write none', async () => {
    const cache = fs.mkdtempSync(path.join(tmp, 'cache-'));
    const was = process.env.XDG_CACHE_HOME;
    process.env.XDG_CACHE_HOME = cache;
    const packedRoot = path.join(cache, 'turnwise', 'packed');
    const folders = () => (fs.existsSync(packedRoot) ? fs.readdirSync(packedRoot).length : 0);
    const body = { model: 'qwen-tiny', messages: [{ role: 'user', content: 'Fix it' }], max_tokens: 10, temperature: 0, logprobs: true };
    try {
      const replies: Record<string, { text: string; lp: number[]; folders: number }> = {};
      for (const setting of ['on', 'off', 'auto'] as const) {
        const s = await startServer({ model: dir, port: 0, packDecodeWeights: setting, settings: { provider: 'cpu' } });
        try {
          const r = await fetch(`${s.url}/v1/chat/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify(body),
          });
          assert.equal(r.status, 200);
          const j = await r.json();
          replies[setting] = {
            text: j.choices[0].message.content,
            lp: j.choices[0].logprobs.content.map((t: { logprob: number }) => t.logprob),
            folders: folders(),
          };
        } finally {
          await s.close();
        }
        assert.equal(folders(), 0, `${setting}: nothing left after close`);
      }
      assert.equal(replies.on.folders, 1, 'on: the packed weights are held while serving');
      assert.equal(replies.off.folders, 0);
      assert.equal(replies.auto.folders, 0, 'auto: a model far below the size that gains is fed');
      assert.equal(replies.on.text, replies.off.text);
      replies.on.lp.forEach((lp, i) => assert.ok(Math.abs(lp - replies.off.lp[i]) < 1e-4, `token ${i}`));
    } finally {
      if (was === undefined) delete process.env.XDG_CACHE_HOME;
      else process.env.XDG_CACHE_HOME = was;
    }
  });

  it("a reply sent back as an assistant message is read in the ids it was sampled as: the next prompt extends the conversation's ids", async () => {
    const system = 'You fix bugs.';
    const first = [
      { role: 'system', content: system },
      { role: 'user', content: 'task one' },
    ];
    const a = await (await post('/v1/chat/completions', { messages: first, max_tokens: 10, temperature: 1, seed: 5 })).json();
    const reply = a.choices[0].message.content as string;
    const sampled = a.choices[0].token_ids as number[];
    const b = await (
      await post('/v1/chat/completions', {
        messages: [...first, { role: 'assistant', content: reply }, { role: 'user', content: 'exit 0' }],
        max_tokens: 4,
        temperature: 0,
      })
    ).json();
    const ck = loadCheckpoint(dir);
    const format = chatFormatOf(ck, 1);
    const conv = format.conversation(system, 'task one');
    const p1 = conv.prompt().ids;
    conv.addReply({ text: reply, tokenIds: sampled, stopped: sampled[sampled.length - 1] === format.endOfTurn.id });
    conv.addObservation('exit 0');
    const p2 = conv.prompt().ids;
    assert.deepEqual(p2.slice(0, p1.length + sampled.length), [...p1, ...sampled], 'turn 2 begins with turn 1 and the reply as sampled');
    assert.equal(b.usage.prompt_tokens, p2.length);
  });

  it('top_logprobs (chat) and logprobs N (completions): the N most likely tokens, most likely first, the greedy token on top', async () => {
    const j = await (
      await post('/v1/chat/completions', {
        messages: [{ role: 'user', content: 'hi' }],
        max_tokens: 6,
        temperature: 0,
        logprobs: true,
        top_logprobs: 3,
      })
    ).json();
    for (const t of j.choices[0].logprobs.content as {
      token: string;
      logprob: number;
      top_logprobs: { token: string; logprob: number }[];
    }[]) {
      assert.equal(t.top_logprobs.length, 3);
      assert.equal(t.top_logprobs[0].token, t.token, 'greedy: the sampled token is the most likely');
      assert.ok(Math.abs(t.top_logprobs[0].logprob - t.logprob) < 1e-9);
      assert.ok(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob && t.top_logprobs[1].logprob >= t.top_logprobs[2].logprob);
    }
    const c = await (await post('/v1/completions', { prompt: 'def add(a, b):', max_tokens: 5, temperature: 0, logprobs: 2 })).json();
    const lp = c.choices[0].logprobs;
    assert.equal(lp.tokens.length, 5);
    assert.equal(lp.top_logprobs.length, 5);
    lp.top_logprobs.forEach((alt: Record<string, number>, i: number) => {
      assert.ok(Object.keys(alt).length >= 1 && Object.keys(alt).length <= 2);
      assert.ok(Math.abs(Math.max(...Object.values(alt)) - lp.token_logprobs[i]) < 1e-9);
    });
    assert.deepEqual(lp.text_offset.slice(0, 2), [0, lp.tokens[0].length]);
    const bad = await post('/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }], top_logprobs: 2 });
    assert.equal(bad.status, 400);
    assert.match((await bad.json()).error.message, /top_logprobs needs logprobs: true/);
  });

  it('n > 1: n choices from one batch, choice 0 the n = 1 answer, each drawn from its own seed', async () => {
    const body = { messages: [{ role: 'user', content: 'write code' }], max_tokens: 8, temperature: 1, seed: 21 };
    const one = await (await post('/v1/chat/completions', body)).json();
    const r = await post('/v1/chat/completions', { ...body, n: 3 });
    const j = await r.json();
    assert.deepEqual(
      j.choices.map((c: { index: number }) => c.index),
      [0, 1, 2],
    );
    assert.equal(j.choices[0].message.content, one.choices[0].message.content);
    assert.ok(new Set(j.choices.map((c: { token_ids: number[] }) => c.token_ids.join(','))).size > 1, 'the choices differ');
    assert.equal(r.headers.get('x-turnwise-batch-size'), '3', 'sampled in one run');
    assert.equal(
      j.usage.completion_tokens,
      j.choices.reduce((a: number, c: { token_ids: number[] }) => a + c.token_ids.length, 0),
    );
    assert.equal((await post('/v1/chat/completions', { ...body, n: 99 })).status, 400);
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

  it('streams server-sent events as the tokens are sampled; they parse, end with [DONE], and add up to the non-streamed text', async () => {
    const body = { messages: [{ role: 'user', content: 'write code' }], max_tokens: 48, temperature: 0.7, seed: 3, logprobs: true };
    const once = await (await post('/v1/chat/completions', body)).json();
    const r = await post('/v1/chat/completions', { ...body, stream: true });
    assert.equal(r.headers.get('content-type'), 'text/event-stream');
    // Read as it arrives: the chunks come in many reads, spread over the generation.
    const reader = r.body!.getReader();
    const arrivals: number[] = [];
    let raw = '';
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      arrivals.push(Date.now());
      raw += Buffer.from(value).toString('utf8');
    }
    const events = raw.split('\n\n').filter(Boolean);
    assert.equal(events[events.length - 1], 'data: [DONE]');
    const chunks = events.slice(0, -1).map((e) => {
      assert.ok(e.startsWith('data: '), e);
      return JSON.parse(e.slice(6));
    });
    assert.ok(chunks.every((c) => c.object === 'chat.completion.chunk'));
    const choice = chunks.flatMap((c) => c.choices);
    assert.equal(
      choice.map((c) => c.delta.content ?? '').join(''),
      once.choices[0].message.content,
      'the same seed gives the same reply, streamed or not',
    );
    assert.equal(choice[0].delta.role, 'assistant');
    assert.deepEqual(
      choice.flatMap((c) => c.logprobs?.content ?? []).map((t: { logprob: number }) => t.logprob),
      once.choices[0].logprobs.content.map((t: { logprob: number }) => t.logprob),
      "every token's log-prob, once",
    );
    assert.equal(choice.find((c) => c.finish_reason !== null).finish_reason, once.choices[0].finish_reason);
    assert.deepEqual(chunks[chunks.length - 1].choices, [], 'the last chunk carries the usage');
    assert.equal(chunks[chunks.length - 1].usage.completion_tokens, once.usage.completion_tokens);
    if (once.usage.completion_tokens >= 16) assert.ok(arrivals.length >= 3, `tokens were sent as sampled (${arrivals.length} reads)`);
    // With a stop string, nothing past it is ever sent.
    const text: string = once.choices[0].message.content;
    if (text.length > 6) {
      const stop = text.slice(4, 6);
      const cut = await (await post('/v1/chat/completions', { ...body, stream: true, stop })).text();
      const sent = cut
        .split('\n\n')
        .filter((e) => e.startsWith('data: {'))
        .flatMap((e) => JSON.parse(e.slice(6)).choices)
        .map((c: { delta: { content?: string } }) => c.delta.content ?? '')
        .join('');
      assert.equal(sent, text.slice(0, text.indexOf(stop)));
    }
  });

  it('concurrent requests are answered from batched runs, each as it would be alone', async () => {
    const bodies = [0, 1, 2, 3].map((k) => ({
      messages: [{ role: 'user', content: `task ${k}` }],
      max_tokens: 8,
      temperature: 1,
      seed: 10 + k,
    }));
    const alone = [];
    for (const b of bodies) {
      const r = await post('/v1/chat/completions', b);
      assert.equal(r.headers.get('x-turnwise-batch-size'), '1', 'one at a time: a batch of one');
      alone.push((await r.json()).choices[0].message.content);
    }
    const answers = await Promise.all(bodies.map((b) => post('/v1/chat/completions', b)));
    const sizes = answers.map((r) => Number(r.headers.get('x-turnwise-batch-size')));
    assert.ok(
      sizes.some((n) => n > 1),
      `sent together, some were sampled in one run (batch sizes ${sizes})`,
    );
    const together = await Promise.all(answers.map(async (r) => (await r.json()).choices[0].message.content));
    assert.deepEqual(together, alone, "a row's draws depend on its own seed only");
  });

  it("refuses what is malformed, too large, unauthorized, of another model or route, in the API's error shape", async () => {
    const cases: Array<[Promise<Response>, number, RegExp]> = [
      [post('/v1/chat/completions', '{not json'), 400, /not a JSON object/],
      [post('/v1/chat/completions', { messages: [] }), 400, /messages must be a non-empty list/],
      [post('/v1/chat/completions', { messages: [{ role: 'tool', content: 'x' }] }), 400, /role must be system, user or assistant/],
      [
        post('/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }], temperature: 7 }),
        400,
        /temperature must be a number in \[0, 2\]/,
      ],
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

  it('turnwise serve --provider: the start line names the provider the model runs on (the CPU, with a warning, when the one asked for cannot load); an unknown one is refused before the model loads', async () => {
    const cli = path.join(__dirname, '..', '..', '..', 'src', 'cli', 'main.ts');
    // No Vulkan driver for the server (and its provider probe): the machine may have an adapter.
    const env = { ...process.env, VK_ICD_FILENAMES: '/nonexistent/icd.json', VK_DRIVER_FILES: '/nonexistent/icd.json' };
    const bad = spawnSync(process.execPath, ['-r', 'tsx/cjs', cli, 'serve', '--model', path.join(tmp, 'missing'), '--provider', 'tpu'], {
      encoding: 'utf8',
      timeout: 60_000,
      env,
    });
    assert.equal(bad.status, 2, bad.stderr);
    assert.match(bad.stderr, /--provider must be one of auto, cpu, cuda, webgpu, got "tpu"/);
    for (const provider of ['cpu', 'webgpu']) {
      const child = spawn(
        process.execPath,
        ['-r', 'tsx/cjs', cli, 'serve', '--model', dir, '--port', '0', '--provider', provider, '--json'],
        { env },
      );
      let out = '';
      let err = '';
      child.stderr.on('data', (d: Buffer) => (err += d.toString()));
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      const line = await new Promise<string>((resolve, reject) => {
        child.stdout.on('data', (d: Buffer) => {
          out += d.toString();
          if (out.includes('\n')) resolve(out.split('\n')[0]);
        });
        void exited.then((code) => reject(new Error(`serve exited ${code} before its start line: ${err}`)));
      });
      const started = JSON.parse(line) as { ok: boolean; url: string; provider: string };
      assert.equal(started.ok, true);
      assert.doesNotMatch(err, /anyone who reaches port/, 'loopback needs no token');
      assert.equal(started.provider, 'cpu', `--provider ${provider} runs on the CPU on a machine without a Vulkan driver`);
      if (provider === 'webgpu') assert.match(err, /warning: the webgpu execution provider could not be loaded/);
      else assert.doesNotMatch(err, /execution provider could not be loaded/);
      const models = await (await fetch(`${started.url}/v1/models`)).json();
      assert.equal(models.data.length, 1);
      child.kill('SIGTERM');
      assert.equal(await exited, 0, `SIGTERM stops the server cleanly: ${err}`);
    }
  });

  it('--host beyond loopback without a token is warned about; tokens are compared whole, in constant time', async () => {
    const cli = path.join(__dirname, '..', '..', '..', 'src', 'cli', 'main.ts');
    const child = spawn(process.execPath, [
      '-r',
      'tsx/cjs',
      cli,
      'serve',
      '--model',
      dir,
      '--host',
      '0.0.0.0',
      '--port',
      '0',
      '--provider',
      'cpu',
      '--json',
    ]);
    let err = '';
    let out = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('\n')) resolve();
      });
      void exited.then((code) => reject(new Error(`serve exited ${code}: ${err}`)));
    });
    child.kill('SIGTERM');
    await exited;
    assert.match(err, /warning: --host 0\.0\.0\.0 without --token-env: anyone who reaches port 0 of this machine can use the model/);
    assert.equal(listensBeyondLoopback('127.0.0.1'), false);
    assert.equal(listensBeyondLoopback('::1'), false);
    assert.equal(listensBeyondLoopback('192.168.1.5'), true);
    assert.equal(bearerMatches('Bearer secret', 'secret'), true);
    for (const wrong of [undefined, '', 'Bearer secre', 'Bearer secretx', 'bearer secret', 'secret'])
      assert.equal(bearerMatches(wrong, 'secret'), false, String(wrong));
  });

  it("messages the model's chat template refuses (roles out of order) are the client's 400 with the template's words, not a 500", async () => {
    const strict = path.join(tmp, 'qwen-strict');
    const cfg = {
      ...files.tokenizerConfig,
      chat_template:
        "{% for m in messages %}{% if loop.index0 > 0 and m['role'] == messages[loop.index0 - 1]['role'] %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
    };
    writeModelFolder(strict, initWeights(config, 31, 0.3), { dtype: 'bfloat16', tokenizerJson: files.tokenizerJson, tokenizerConfig: cfg });
    const logs: string[] = [];
    const s2 = await startServer({ model: strict, port: 0, settings: { provider: 'cpu' }, onLog: (l) => logs.push(l) });
    try {
      const r = await fetch(`${s2.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          messages: [
            { role: 'user', content: 'a' },
            { role: 'user', content: 'b' },
          ],
          max_tokens: 2,
        }),
      });
      assert.equal(r.status, 400);
      const j = await r.json();
      assert.match(j.error.message, /^the model's chat template refused these messages: Conversation roles must alternate/);
      assert.equal(j.error.param, 'messages');
      const ok = await fetch(`${s2.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'a' }], max_tokens: 2 }),
      });
      assert.equal(ok.status, 200);
      assert.deepEqual(logs, [], 'no 5xx to log');
    } finally {
      await s2.close();
    }
  });

  it('a model whose weights hold NaN answers 500 with the cause, and the server logs it (it served noise with null log-probs)', async () => {
    const broken = path.join(tmp, 'qwen-nan');
    const w = initWeights(config, 31, 0.3);
    for (const t of w.tensors.values()) t.fill(NaN);
    writeModelFolder(broken, w, { dtype: 'float32', tokenizerJson: files.tokenizerJson, tokenizerConfig: files.tokenizerConfig });
    const logs: string[] = [];
    const s2 = await startServer({ model: broken, port: 0, settings: { provider: 'cpu' }, onLog: (l) => logs.push(l) });
    try {
      const r = await fetch(`${s2.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'x' }], max_tokens: 2 }),
      });
      assert.equal(r.status, 500);
      const j = await r.json();
      assert.match(j.error.message, /log-prob of NaN for its sampled token 1: its weights hold NaN or infinite values/);
      assert.equal(logs.length, 1);
      assert.match(logs[0], /^500 on POST \/v1\/chat\/completions: TurnwiseError: the model gave a log-prob of NaN/);
    } finally {
      await s2.close();
    }
  });

  it("a prompt longer than the model's context is a 400 naming its length and the context, on both routes", async () => {
    const words = Array.from({ length: 700 }, (_, i) => `w${i % 50}`).join(' ');
    for (const [route, body, param] of [
      ['/v1/chat/completions', { messages: [{ role: 'user', content: words }], max_tokens: 4 }, 'messages'],
      ['/v1/completions', { prompt: words, max_tokens: 4 }, 'messages'],
    ] as const) {
      const r = await post(route, body);
      assert.equal(r.status, 400, route);
      const j = await r.json();
      assert.match(j.error.message, /^the prompt is \d+ tokens; this model's context is 512$/);
      assert.equal(j.error.param, param);
    }
  });
});
