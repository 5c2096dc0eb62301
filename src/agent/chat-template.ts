// A chat model's own template (Jinja, from its tokenizer_config.json or chat_template.jinja),
// rendered with @huggingface/jinja the way transformers' apply_chat_template does (trim_blocks,
// lstrip_blocks, `raise_exception`). A template that does not parse, or raises while rendering,
// is an error naming its file.
import { Template } from '@huggingface/jinja';
import { TurnwiseError } from '../core/errors';

export type ChatRole = 'system' | 'user' | 'assistant';

export interface ChatMessage {
  role: ChatRole;
  content: string;
}

/** What a template may read besides the messages (tokenizer_config.json's bos/eos tokens). */
export interface TemplateTokens {
  bos_token?: string;
  eos_token?: string;
}

const FIX = 'use the chat template that came with the model, or put a working one in chat_template.jinja beside tokenizer_config.json (it is read first)';

export class ChatTemplate {
  private readonly compiled: Template;

  /** `source` names the file the template came from, for errors. */
  constructor(
    readonly text: string,
    readonly source: string,
    private readonly tokens: TemplateTokens = {},
  ) {
    try {
      this.compiled = new Template(text);
    } catch (e) {
      throw new TurnwiseError('invalid-file', `the chat template in ${source} does not parse: ${(e as Error).message}`, { hint: FIX });
    }
  }

  /** The template's text for `messages`; with `addGenerationPrompt`, ready for the assistant's reply. */
  render(messages: readonly ChatMessage[], addGenerationPrompt: boolean): string {
    let out: unknown;
    try {
      out = this.compiled.render({
        messages: messages.map((m) => ({ role: m.role, content: m.content })),
        add_generation_prompt: addGenerationPrompt,
        bos_token: this.tokens.bos_token ?? '',
        eos_token: this.tokens.eos_token ?? '',
      });
    } catch (e) {
      throw new TurnwiseError('invalid-file', `the chat template in ${this.source} raised while rendering a conversation of ${messages.length} message(s) (${messages.map((m) => m.role).join(', ')}): ${(e as Error).message}`, { hint: FIX });
    }
    if (typeof out !== 'string') throw new TurnwiseError('invalid-file', `the chat template in ${this.source} rendered no text`, { hint: FIX });
    return out;
  }
}

/** A token of tokenizer_config.json: a string, or an object with its `content`. */
export function configToken(v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (v && typeof v === 'object' && typeof (v as { content?: unknown }).content === 'string') return (v as { content: string }).content;
  return undefined;
}

/** The template variables a tokenizer_config.json gives (bos_token, eos_token). */
export function templateTokens(tokenizerConfig: Record<string, unknown> | undefined): TemplateTokens {
  return { bos_token: configToken(tokenizerConfig?.bos_token), eos_token: configToken(tokenizerConfig?.eos_token) };
}
