// The Modelfile's chat template (src/agent/ollama-template.ts): the wrapping of each role read
// from the model's Jinja template, written as Ollama's Go template. Ollama itself is not at hand
// offline: the Go template's meaning here is the plain concatenation its `range`/`if eq` actions
// give (renderOllama), checked against the Jinja template's own text.
import * as assert from 'node:assert/strict';
import { ChatTemplate, type ChatMessage } from '../../../src/agent/chat-template';
import { ollamaChat, ollamaChatParts, ollamaGoTemplate, renderOllama, type OllamaChatParts } from '../../../src/agent/ollama-template';
import { CHATML_TEMPLATE, HEADER_TEMPLATE } from '../../../src/policy/files/bpe';

const conversation: ChatMessage[] = [
  { role: 'system', content: 'You fix one bug.' },
  { role: 'user', content: 'Task: tests/test_a.py fails' },
  { role: 'assistant', content: '```bash\ntw-suspects -n\n```' },
  { role: 'user', content: '[1] a.py:3: return x - 1' },
];

function parts(text: string, bos?: string, tokens = {}): OllamaChatParts {
  const p = ollamaChatParts(new ChatTemplate(text, 'test', tokens), bos);
  assert.ok(!('why' in p), 'why' in p ? p.why : '');
  return p as OllamaChatParts;
}

describe('agent/ollama-template: the chat template as Ollama’s', () => {
  it('ChatML: each role’s wrapping, the generation prompt and the default system message', () => {
    const p = parts(CHATML_TEMPLATE);
    assert.deepEqual(p.prefix, { system: '<|im_start|>system\n', user: '<|im_start|>user\n', assistant: '<|im_start|>assistant\n' });
    assert.deepEqual(p.suffix, { system: '<|im_end|>\n', user: '<|im_end|>\n', assistant: '<|im_end|>\n' });
    assert.equal(p.generation, '<|im_start|>assistant\n');
    assert.equal(p.defaultSystem, 'You are a helpful coding assistant.');
    assert.equal(
      ollamaGoTemplate(p),
      '{{ $system := false }}{{ range .Messages }}{{ if eq .Role "system" }}{{ $system = true }}{{ end }}{{ end }}' +
        '{{ if not $system }}<|im_start|>system\nYou are a helpful coding assistant.<|im_end|>\n{{ end }}' +
        '{{ range .Messages }}{{ if eq .Role "system" }}<|im_start|>system\n{{ .Content }}<|im_end|>\n' +
        '{{ else if eq .Role "user" }}<|im_start|>user\n{{ .Content }}<|im_end|>\n' +
        '{{ else if eq .Role "assistant" }}<|im_start|>assistant\n{{ .Content }}<|im_end|>\n{{ end }}{{ end }}<|im_start|>assistant\n',
    );
    const t = new ChatTemplate(CHATML_TEMPLATE, 'test');
    // With and without a system message (the Go template writes the default one when none is given).
    assert.equal(renderOllama(p, conversation), t.render(conversation, true));
    assert.equal(renderOllama(p, conversation.slice(1)), t.render(conversation.slice(1), true));
  });

  it('Llama 3 headers: the BOS token the tokenizer adds is left out, no default system message', () => {
    const tokens = { bos_token: '<|begin_of_text|>' };
    const p = parts(HEADER_TEMPLATE, '<|begin_of_text|>', tokens);
    assert.equal(p.prefix.user, '<|start_header_id|>user<|end_header_id|>\n\n');
    assert.equal(p.suffix.assistant, '<|eot_id|>');
    assert.equal(p.generation, '<|start_header_id|>assistant<|end_header_id|>\n\n');
    assert.equal(p.defaultSystem, undefined);
    assert.equal(p.lead, '');
    const t = new ChatTemplate(HEADER_TEMPLATE, 'test', tokens);
    assert.equal('<|begin_of_text|>' + renderOllama(p, conversation), t.render(conversation, true));
    // A tokenizer that does not add it: the template's BOS stays at the front of the text.
    const own = parts(HEADER_TEMPLATE, undefined, tokens);
    assert.equal(renderOllama(own, conversation.slice(1)), t.render(conversation.slice(1), true));
  });

  it('a system header written even without a system message (Llama 3.1’s kind): the default is an empty message, written by the Go template', () => {
    const dated = [
      '{{- bos_token }}',
      "{%- if messages[0].role == 'system' %}{%- set sys = messages[0].content %}{%- set rest = messages[1:] %}",
      "{%- else %}{%- set sys = '' %}{%- set rest = messages %}{%- endif %}",
      "{{- '<|start_header_id|>system<|end_header_id|>\\n\\nToday Date: 01 Jan 2026\\n\\n' + sys + '<|eot_id|>' }}",
      "{%- for m in rest %}{{- '<|start_header_id|>' + m.role + '<|end_header_id|>\\n\\n' + m.content + '<|eot_id|>' }}{%- endfor %}",
      "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}",
    ].join('');
    const tokens = { bos_token: '<|begin_of_text|>' };
    const p = parts(dated, '<|begin_of_text|>', tokens);
    assert.equal(p.defaultSystem, '');
    assert.equal(p.prefix.system, '<|start_header_id|>system<|end_header_id|>\n\nToday Date: 01 Jan 2026\n\n');
    const t = new ChatTemplate(dated, 'test', tokens);
    for (const c of [conversation, conversation.slice(1)]) assert.equal('<|begin_of_text|>' + renderOllama(p, c), t.render(c, true));
    assert.match(
      ollamaGoTemplate(p),
      /\{\{ if not \$system \}\}<\|start_header_id\|>system<\|end_header_id\|>\n\nToday Date: 01 Jan 2026\n\n<\|eot_id\|>\{\{ end \}\}/,
    );
  });

  it('a template whose wrapping depends on more than the role is refused with the reason', () => {
    // The first user message is wrapped differently from the later ones.
    const byPlace = [
      '{%- for m in messages -%}',
      "{%- if loop.index == 2 -%}{{ '[FIRST]' + m.content + '\\n' }}{%- else -%}{{ '<' + m.role + '>' + m.content + '\\n' }}{%- endif -%}",
      '{%- endfor -%}',
      "{%- if add_generation_prompt -%}{{ '<assistant>' }}{%- endif -%}",
    ].join('\n');
    const p = ollamaChatParts(new ChatTemplate(byPlace, 'test'), undefined);
    assert.ok('why' in p && /depends on more than its role/.test(p.why), JSON.stringify(p));
    // A template that drops the system message.
    const noSystem = "{%- for m in messages -%}{%- if m.role != 'system' -%}{{ m.content }}{%- endif -%}{%- endfor -%}";
    const q = ollamaChatParts(new ChatTemplate(noSystem, 'test'), undefined);
    assert.ok('why' in q && /leaves out or reorders/.test(q.why), JSON.stringify(q));
  });

  it('ollamaChat: the Modelfile’s TEMPLATE, or why not (none, """ in the text, `{{` escaped)', () => {
    const c = ollamaChat({ template: CHATML_TEMPLATE, source: 'test' }, undefined, undefined);
    assert.ok(!('why' in c));
    assert.ok(c.template.includes('{{ if not $system }}<|im_start|>system\nYou are a helpful coding assistant.'), c.template);
    assert.deepEqual(ollamaChat(undefined, undefined, undefined), { why: 'the model has no chat template' });
    const quotes = CHATML_TEMPLATE.replace('You are a helpful coding assistant.', 'Say """hi""".');
    assert.match((ollamaChat({ template: quotes, source: 'test' }, undefined, undefined) as { why: string }).why, /"""/);
    const braces = CHATML_TEMPLATE.replaceAll('<|im_start|>', '{{');
    const b = ollamaChat({ template: braces, source: 'test' }, undefined, undefined) as { template: string };
    assert.ok(b.template.includes('{{ "{{" }}user\n{{ .Content }}'), b.template);
  });
});
