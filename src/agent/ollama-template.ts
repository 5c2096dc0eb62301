// The chat template of an Ollama Modelfile, derived from the model's own Jinja chat template.
// Ollama formats a conversation with a Go template over `.Messages`; it reads a GGUF file's
// Jinja template only when it recognises it as one of its library's. Rendering the Jinja
// template on conversations of marker strings gives the text each role's message is wrapped in,
// the generation prompt, and the system message the template adds when none is given; the Go
// template then wraps each message the same way, and writes the default system message when the
// conversation has none. A template whose wrapping depends on more than the role (the message's
// position, its content) cannot be written so: the derivation renders both on further
// conversations and gives up unless every one comes out the same.
import { ChatTemplate, templateTokens, type ChatMessage, type ChatRole } from './chat-template';

/** What a message of each role is wrapped in, and what follows the last one before the reply. */
export interface OllamaChatParts {
  prefix: Record<ChatRole, string>;
  suffix: Record<ChatRole, string>;
  generation: string;
  /** The system message the template puts in when the conversation has none. */
  defaultSystem?: string;
  /** Text before the first message, when the tokenizer does not add it (not the BOS token). */
  lead: string;
}

const mark = (k: string) => `\u0001${k}\u0001`;

/** `text` split at `markers` (each once, in order), or undefined when one is missing or out of order. */
function splitAt(text: string, markers: readonly string[]): string[] | undefined {
  const parts: string[] = [];
  let rest = text;
  for (const m of markers) {
    const i = rest.indexOf(m);
    if (i < 0) return undefined;
    parts.push(rest.slice(0, i));
    rest = rest.slice(i + m.length);
  }
  parts.push(rest);
  return parts;
}

/** `a` without its leading `b`, or undefined when it does not start with it. */
const after = (a: string, b: string) => (a.startsWith(b) ? a.slice(b.length) : undefined);
/** `a` without its trailing `b`, or undefined when it does not end with it. */
const before = (a: string, b: string) => (a.endsWith(b) ? a.slice(0, a.length - b.length) : undefined);

/** Renders `messages` as the Go template of the derived parts does (ollamaGoTemplate). */
export function renderOllama(p: OllamaChatParts, messages: readonly ChatMessage[]): string {
  const all: ChatMessage[] =
    messages[0]?.role !== 'system' && p.defaultSystem !== undefined
      ? [{ role: 'system', content: p.defaultSystem }, ...messages]
      : [...messages];
  return p.lead + all.map((m) => p.prefix[m.role] + m.content + p.suffix[m.role]).join('') + p.generation;
}

/**
 * The wrapping of `template`'s messages, or a reason it has none: `bos` is the tokenizer's BOS
 * token text when the tokenizer adds it itself (a template that writes it too would double it).
 */
export function ollamaChatParts(template: ChatTemplate, bos?: string): OllamaChatParts | { why: string } {
  const S = mark('S');
  const U1 = mark('U1');
  const A1 = mark('A1');
  const U2 = mark('U2');
  // A template that writes today's date (Llama 3.1's system header) keeps the export's.
  const at = new Date();
  const msgs = (...m: [ChatRole, string][]) => m.map(([role, content]) => ({ role, content }));
  let full: string, noGen: string, oneUser: string, oneUserGen: string, noSystem: string;
  try {
    full = template.render(msgs(['system', S], ['user', U1], ['assistant', A1], ['user', U2]), true, at);
    noGen = template.render(msgs(['system', S], ['user', U1], ['assistant', A1]), false, at);
    oneUser = template.render(msgs(['system', S], ['user', U1]), false, at);
    oneUserGen = template.render(msgs(['system', S], ['user', U1]), true, at);
    noSystem = template.render(msgs(['user', U1]), false, at);
  } catch (e) {
    return { why: `the chat template does not render a plain conversation: ${(e as Error).message}` };
  }
  const f = splitAt(full, [S, U1, A1, U2]);
  const n = splitAt(noGen, [S, U1, A1]);
  const o = splitAt(oneUser, [S, U1]);
  const og = splitAt(oneUserGen, [S, U1]);
  const ns = splitAt(noSystem, [U1]);
  if (!f || !n || !o || !og || !ns) return { why: 'the chat template leaves out or reorders messages' };
  const userSuffix = o[2];
  const generation = after(og[2], userSuffix);
  const assistantSuffix = n[3];
  const assistantPrefix = generation !== undefined ? after(f[2], userSuffix) : undefined;
  const userPrefix = after(f[3], assistantSuffix);
  const systemSuffix = userPrefix !== undefined ? before(f[1], userPrefix) : undefined;
  if (generation === undefined || assistantPrefix === undefined || userPrefix === undefined || systemSuffix === undefined)
    return { why: "the chat template's text around a message depends on more than its role" };
  // The BOS token the tokenizer adds: not part of the template's text.
  const unBos = (text: string) => (bos && text.startsWith(bos) ? text.slice(bos.length) : text);
  const systemPrefix = unBos(f[0]);
  const parts: OllamaChatParts = {
    prefix: { system: systemPrefix, user: userPrefix, assistant: assistantPrefix },
    suffix: { system: systemSuffix, user: userSuffix, assistant: assistantSuffix },
    generation,
    lead: '',
  };
  // Without a system message: the template's own, when it writes one in the same wrapping.
  const bare = unBos(ns[0]);
  if (bare !== userPrefix) {
    const inner = after(bare, systemPrefix);
    const sys = inner !== undefined ? before(inner, systemSuffix + userPrefix) : undefined;
    if (sys === undefined) {
      // Text before the first message that is not a system message: kept as a lead when it is the same with one.
      const l = before(bare, userPrefix);
      if (l === undefined || !systemPrefix.startsWith(l))
        return { why: 'the chat template writes something else before a conversation without a system message' };
      parts.lead = l;
      parts.prefix.system = systemPrefix.slice(l.length);
    } else parts.defaultSystem = sys;
  }
  // The parts must give the template's own text on conversations they were not read from.
  const checks: ChatMessage[][] = [
    msgs(
      ['system', 'You fix bugs.'],
      ['user', 'Task one'],
      ['assistant', '```bash\nls\n```'],
      ['user', 'a.py\nb.py'],
      ['assistant', 'submit'],
      ['user', 'ok'],
    ),
    msgs(['user', 'Task two'], ['assistant', 'submit'], ['user', 'done']),
    msgs(['user', 'Only a question']),
  ];
  for (const c of checks) {
    let want: string;
    try {
      want = unBos(template.render(c, true, at));
    } catch {
      continue;
    }
    if (renderOllama(parts, c) !== want) return { why: "the chat template's text around a message depends on more than its role" };
  }
  return parts;
}

/** Go template literal text: `{{` written as a template action that prints it. */
const goText = (s: string) => s.replace(/\{\{/g, '{{ "{{" }}');

/**
 * The Modelfile TEMPLATE body for the parts (Ollama's Go template over `.Messages`). The
 * template's default system message is part of it, written when no message is a system one
 * (a Modelfile SYSTEM would not stand in for an empty one, as Llama 3's date header is).
 */
export function ollamaGoTemplate(p: OllamaChatParts): string {
  const role = (r: ChatRole) => `${goText(p.prefix[r])}{{ .Content }}${goText(p.suffix[r])}`;
  const fallback =
    p.defaultSystem === undefined
      ? ''
      : '{{ $system := false }}{{ range .Messages }}{{ if eq .Role "system" }}{{ $system = true }}{{ end }}{{ end }}' +
        `{{ if not $system }}${goText(p.prefix.system + p.defaultSystem + p.suffix.system)}{{ end }}`;
  const messages =
    `{{ range .Messages }}{{ if eq .Role "system" }}${role('system')}` +
    `{{ else if eq .Role "user" }}${role('user')}{{ else if eq .Role "assistant" }}${role('assistant')}{{ end }}{{ end }}`;
  return goText(p.lead) + fallback + messages + goText(p.generation);
}

/**
 * The Modelfile's TEMPLATE for a model's chat template (`found`, as hf.ts's chatTemplateOf gives
 * it), or why there is none. `bos`: the BOS token's text when the tokenizer adds it itself.
 */
export function ollamaChat(
  found: { template: string; source: string } | undefined,
  tokenizerConfig: Record<string, unknown> | undefined,
  bos: string | undefined,
): { template: string } | { why: string } {
  if (!found) return { why: 'the model has no chat template' };
  let parts: OllamaChatParts | { why: string };
  try {
    parts = ollamaChatParts(new ChatTemplate(found.template, found.source, templateTokens(tokenizerConfig)), bos);
  } catch (e) {
    return { why: (e as Error).message };
  }
  if ('why' in parts) return parts;
  const template = ollamaGoTemplate(parts);
  // A Modelfile string ends at the first """: such text cannot be written in one.
  return template.includes('"""') ? { why: 'the chat template holds """, which ends a Modelfile string' } : { template };
}
