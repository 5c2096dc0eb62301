// A chat model's own template (Jinja, from its tokenizer_config.json or chat_template.jinja),
// rendered with @huggingface/jinja the way transformers' apply_chat_template does (trim_blocks,
// lstrip_blocks, `raise_exception`). A template that does not parse, or raises while rendering,
// is an error naming its file.
//
// A template's clock is Turnwise's: Llama 3.x templates print `strftime_now("%d %b %Y")` in the
// system message, and the library's own function reads the clock on every render in the system
// locale ("Dez" under de_DE). A conversation's prompt must be the same at every turn, so the
// template's `strftime_now` is given a date the caller pins (once per chat format: a run, an
// evaluation, a server request) and formats it as Python does in the C locale.
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

const FIX =
  'use the chat template that came with the model, or put a working one in chat_template.jinja beside tokenizer_config.json (it is read first)';

export class ChatTemplate {
  private readonly compiled: Template;

  /** `source` names the file the template came from, for errors. */
  constructor(
    readonly text: string,
    readonly source: string,
    private readonly tokens: TemplateTokens = {},
  ) {
    try {
      this.compiled = new Template(text.replace(/\bstrftime_now\b/g, CLOCK));
    } catch (e) {
      throw new TurnwiseError('invalid-file', `the chat template in ${source} does not parse: ${(e as Error).message}`, { hint: FIX });
    }
  }

  /**
   * The template's text for `messages`; with `addGenerationPrompt`, ready for the assistant's
   * reply. `now` is the date the template's `strftime_now` tells (default: this moment).
   */
  render(messages: readonly ChatMessage[], addGenerationPrompt: boolean, now: Date = new Date()): string {
    let out: unknown;
    try {
      out = this.compiled.render({
        [CLOCK]: (format: string) => strftime(now, format),
        messages: messages.map((m) => ({ role: m.role, content: m.content })),
        add_generation_prompt: addGenerationPrompt,
        bos_token: this.tokens.bos_token ?? '',
        eos_token: this.tokens.eos_token ?? '',
      });
    } catch (e) {
      throw new TurnwiseError(
        'invalid-file',
        `the chat template in ${this.source} raised while rendering a conversation of ${messages.length} message(s) (${messages.map((m) => m.role).join(', ')}): ${(e as Error).message}`,
        { hint: FIX },
      );
    }
    if (typeof out !== 'string')
      throw new TurnwiseError('invalid-file', `the chat template in ${this.source} rendered no text`, { hint: FIX });
    return out;
  }
}

/** The name the template's `strftime_now` is bound under (the library's own cannot be replaced). */
const CLOCK = '__turnwise_strftime_now';

const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];
const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];

/**
 * Python's `time.strftime` in the C locale (what transformers' templates get): %Y %y %m %d %H %I
 * %M %S %p %b %B %a %A %j %%, in local time; other directives are left as written.
 */
export function strftime(date: Date, format: string): string {
  const pad = (n: number, w = 2) => String(n).padStart(w, '0');
  const start = new Date(date.getFullYear(), 0, 1);
  const dayOfYear =
    Math.round((new Date(date.getFullYear(), date.getMonth(), date.getDate()).getTime() - start.getTime()) / 86_400_000) + 1;
  const h = date.getHours();
  return format.replace(/%([A-Za-z%])/g, (whole, d: string) => {
    switch (d) {
      case 'Y':
        return String(date.getFullYear());
      case 'y':
        return pad(date.getFullYear() % 100);
      case 'm':
        return pad(date.getMonth() + 1);
      case 'd':
        return pad(date.getDate());
      case 'H':
        return pad(h);
      case 'I':
        return pad(h % 12 === 0 ? 12 : h % 12);
      case 'M':
        return pad(date.getMinutes());
      case 'S':
        return pad(date.getSeconds());
      case 'p':
        return h < 12 ? 'AM' : 'PM';
      case 'b':
        return MONTHS[date.getMonth()].slice(0, 3);
      case 'B':
        return MONTHS[date.getMonth()];
      case 'a':
        return DAYS[date.getDay()].slice(0, 3);
      case 'A':
        return DAYS[date.getDay()];
      case 'j':
        return pad(dayOfYear, 3);
      case '%':
        return '%';
      default:
        return whole;
    }
  });
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
