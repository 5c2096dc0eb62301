// The chat action format: a chat model is prompted through its own chat template. A system
// message says what the job is, which helper commands the sandbox has and how to reply; the
// first user message states the task; each reply holds exactly one fenced ```bash block (the
// convention of mini-swe-agent: none or several is a format error, not run) or the word
// `submit`; the observation goes back as the next user message.
//
// Token ids, not text, are the conversation: the ids the model was prompted with and the ids it
// sampled are kept, and each new prompt only appends. To find what to append, the conversation
// is rendered with every message's content replaced by a placeholder (the template's own text,
// a "skeleton"); the skeleton of turn N+1 must begin with the skeleton of turn N (a template
// that is not prefix-stable is refused), and only its new tail is tokenized: the template's text
// with special tokens on, message content (task, tool output, anything from the workspace) with
// them off, so a file holding `<|im_end|>` cannot end a turn; a reply's place is filled with
// the ids it was sampled as, whatever re-tokenizing its text would give. The template is also
// rendered with the real content, and must give the skeleton with the content put in: a
// template that rewrites message text (beyond trimming it) would show the model a prompt other
// than the one its ids hold. Replies are not checked so: their place holds their sampled ids.
//
// Context: a prompt may take the model's context (max_position_embeddings) less the run's
// maxActionTokens. When the next prompt is longer, the oldest turns (a reply and its
// observation each) are dropped until it fits, and the task message says how many are gone;
// the prompt is then built anew from the kept messages (the replies still as sampled), and the
// model's cache starts again from it.
import { TurnwiseError } from '../core/errors';
import type { Language, Task } from '../core/schema';
import { WORKSPACE_DIR } from '../sandbox/types';
import { parseAction, type ParsedAction } from './action';
import { ChatTemplate, type ChatMessage } from './chat-template';
import { capMiddle, omittedMarker, SUBMIT, taskText } from './prompt';

/** What the chat format needs of a tokenizer (policy/'s PolicyTokenizer is one). */
export interface ChatTokenizer {
  encode(text: string, options?: { special?: boolean }): number[];
  decode(ids: readonly number[], skipSpecial?: boolean): string;
  tokenId(token: string): number | undefined;
}

/** Characters of command output an observation message keeps (head 2/3, tail 1/3). */
export const CHAT_OBS_CHARS = 4000;

/** A command the sandbox image provides for the agent. */
export interface SandboxHelper {
  name: string;
  does: string;
}

/** The helper commands of the sandbox image of a language (only the Python image has them). */
export function sandboxHelpers(language: Language): SandboxHelper[] {
  if (language !== 'python') return [];
  return [
    { name: 'tw-test', does: 'runs the tests; prints up to 3 failing test ids, then "N failed, M passed"' },
    {
      name: 'tw-suspects',
      does: 'ranks the source lines most likely at fault (lines the failing tests run, checked by small changes); prints the summary, then up to 5 lines as "path:line: code" (with -n numbered: "[K] path:line: code")',
    },
    { name: 'tw-show K', does: "prints suspect K's file around its line (K: a number from the last tw-suspects, or path:line)" },
    { name: 'tw-tokens K', does: "prints the tokens of suspect K's line" },
    { name: "tw-edit K 'OLD' 'NEW'", does: "replaces OLD, text that occurs once on suspect K's line, by NEW; refuses anything else" },
    { name: 'tw-cands K', does: "lists suspect K's line with one token changed, or two arguments swapped, numbered [J]" },
    { name: 'tw-apply K J', does: 'writes variant J of tw-cands K to that line' },
  ];
}

/** The system message: the job, the sandbox's helper commands (or the test command), the reply format. */
export function chatSystemMessage(
  task: Pick<Task, 'language' | 'testCommand'>,
  helpers: readonly SandboxHelper[] = sandboxHelpers(task.language),
): string {
  const tools = helpers.length
    ? ['Helper commands in the sandbox:', ...helpers.map((h) => `- ${h.name}: ${h.does}`)].join('\n')
    : `Run the tests with: ${task.testCommand.replace(/\s*\{tests\}/g, '')}`;
  const example = helpers[0]?.name ?? 'ls';
  return [
    `You are a software engineer fixing a bug in a repository, in a sandbox at ${WORKSPACE_DIR} (the current directory). Your task: make the failing tests pass by changing the code under test. Test files are restored before scoring, so editing them does not help.`,
    tools,
    `Reply format: every reply holds exactly one bash command in one fenced block, like this:\n\n\`\`\`bash\n${example}\n\`\`\`\n\nThe command runs in bash (heredocs allowed); its exit code and output come back in the next message. A reply with no such block, or more than one, is not run. Text outside the block is fine, and nothing in it runs. When you are done, reply with the single word: ${SUBMIT}`,
  ].join('\n\n');
}

/** The first user message: which tests fail (never where the bug is). */
export function chatTaskMessage(task: Pick<Task, 'fail_to_pass' | 'source'>): string {
  return taskText(task);
}

/** An observation message: `exit N`, then stdout and stderr, capped. */
export function chatObservation(r: { exitCode: number | null; stdout: string; stderr: string; timedOut?: boolean }): string {
  const status = r.timedOut ? 'timeout' : r.exitCode === null ? 'exit ?' : `exit ${r.exitCode}`;
  const out = [r.stdout.replace(/\s+$/, ''), r.stderr.replace(/\s+$/, '')].filter((s) => s !== '').join('\n');
  return out ? `${status}\n${capMiddle(out, CHAT_OBS_CHARS)}` : status;
}

/** The observation of a reply that was not run. */
export function chatFormatErrorObservation(reason: string): string {
  return `not run: ${reason}. Reply with exactly one \`\`\`bash block holding one command, or the word ${SUBMIT}.`;
}

/** A reply read as an action; `block` is the command text of its one bash block, when it has one. */
export type ChatReply = ParsedAction & { block?: string };

const BASH_BLOCK = /```bash[ \t]*\r?\n([\s\S]*?)\r?\n```/g;

/**
 * The action of a reply: `submit` (the reply, or its one block, is the word), the command of its
 * one ```bash block (checked like any action: it must parse as bash), or a format error saying
 * why. `ended` is false when generation stopped at the action budget: a cut reply is never run.
 */
export async function parseChatReply(text: string, ended = true): Promise<ChatReply> {
  if (!ended) return { kind: 'format-error', reason: 'the reply did not end (no end-of-turn within the action budget)' };
  const blocks = [...text.matchAll(BASH_BLOCK)].map((m) => m[1]);
  if (blocks.length === 0) {
    if (text.trim() === SUBMIT) return { kind: 'submit' };
    return { kind: 'format-error', reason: 'the reply has no ```bash block' };
  }
  if (blocks.length > 1)
    return { kind: 'format-error', reason: `the reply has ${blocks.length} \`\`\`bash blocks; a turn runs exactly one` };
  const block = blocks[0];
  if (block.trim() === SUBMIT) return { kind: 'submit', block };
  return { ...(await parseAction(block)), block };
}

/** A reply as sampled: its text (without the end-of-turn token) and ids (with it, when it was sampled). */
export interface SampledReply {
  text: string;
  tokenIds: readonly number[];
  /** Whether the last id is the stop token that ended the reply. */
  stopped: boolean;
}

export interface ChatFormatOptions {
  template: ChatTemplate;
  tokenizer: ChatTokenizer;
  /** The model's context in tokens (config.json's max_position_embeddings). */
  contextTokens: number;
  /** Tokens a reply may take (the run's maxActionTokens); the prompt gets the rest. */
  maxActionTokens: number;
  /** The date templates print (Llama 3.x's "Today Date"); default: when the format is made. */
  now?: Date;
}

/** A placeholder for message `i` in a skeleton render: private-use characters no template writes. */
const slot = (i: number) => `\uE000${i}\uE001`;
const SLOT = /\uE000(\d+)\uE001/g;

type Piece = { text: string } | { message: number };

function pieces(skeleton: string): Piece[] {
  const out: Piece[] = [];
  let at = 0;
  for (const m of skeleton.matchAll(SLOT)) {
    if (m.index > at) out.push({ text: skeleton.slice(at, m.index) });
    out.push({ message: Number(m[1]) });
    at = m.index + m[0].length;
  }
  if (at < skeleton.length) out.push({ text: skeleton.slice(at) });
  return out;
}

/** A message of the conversation: its text for the template, and for a reply its sampled ids. */
interface Entry {
  message: ChatMessage;
  reply?: SampledReply;
}

const FIX =
  'use a chat template that writes each message once, unchanged, after the messages before it (put it in chat_template.jinja beside tokenizer_config.json, which is read first)';

/** A chat template and tokenizer checked to work as the agent's format, and what ends a reply. */
export class ChatFormat {
  /** The token that ends an assistant message in this template (`<|im_end|>`, `<|eot_id|>`, …). */
  readonly endOfTurn: { id: number; text: string };
  readonly promptBudget: number;
  /** The date every conversation of this format shows where its template prints one (chat-template.ts): pinned when the format is made. */
  readonly now: Date;

  constructor(readonly o: ChatFormatOptions) {
    this.now = o.now ?? new Date();
    if (
      !Number.isInteger(o.contextTokens) ||
      !Number.isInteger(o.maxActionTokens) ||
      o.maxActionTokens < 1 ||
      o.contextTokens - o.maxActionTokens < 64
    ) {
      throw new TurnwiseError(
        'invalid-input',
        `a context of ${o.contextTokens} tokens cannot hold a prompt beside maxActionTokens ${o.maxActionTokens}`,
        { hint: 'lower maxActionTokens, or use a model with a longer context (max_position_embeddings in config.json)' },
      );
    }
    this.promptBudget = o.contextTokens - o.maxActionTokens;
    // A probe conversation: the generation prompt must end where the reply starts, and the
    // template's text after the reply must begin with one special token that ends it.
    const probe = new ChatConversation(this, 'probe system', 'probe task', { probe: true });
    const first = probe.skeleton(0);
    probe.addReply({ text: 'probe reply', tokenIds: [], stopped: false });
    probe.addObservation('probe observation');
    const second = probe.skeleton(0);
    this.checkExtends(first, second, 1, 2);
    const after = second.slice(first.length + slot(2).length).split(SLOT)[0];
    const ids = after ? o.tokenizer.encode(after, { special: true }) : [];
    const id = ids[0];
    if (id === undefined || o.tokenizer.decode([id], true) !== '') {
      throw new TurnwiseError(
        'invalid-file',
        `the chat template in ${o.template.source} does not end an assistant message with a special token (after the reply it writes ${JSON.stringify(after.slice(0, 40))})`,
        { hint: FIX },
      );
    }
    this.endOfTurn = { id, text: o.tokenizer.decode([id]) };
  }

  /** A new conversation: the system message and the task. */
  conversation(system: string, task: string): ChatConversation {
    return new ChatConversation(this, system, task);
  }

  /** Throws unless `next` (the skeleton of turn `turn`) begins with `prev` and then the reply, message `replySlot` of the render. */
  checkExtends(prev: string, next: string, turn: number, replySlot: number): void {
    const show = (s: string) => JSON.stringify(s.replace(SLOT, (_, i) => `«message ${i}»`));
    if (!next.startsWith(prev)) {
      let i = 0;
      while (i < prev.length && prev[i] === next[i]) i++;
      throw new TurnwiseError(
        'invalid-file',
        `the chat template in ${this.o.template.source} is not prefix-stable: the prompt of turn ${turn + 1} does not begin with the prompt of turn ${turn} (at character ${i}, ${show(prev.slice(i, i + 40))} became ${show(next.slice(i, i + 40))}), so the conversation's token ids could not be kept`,
        { hint: FIX },
      );
    }
    if (!next.startsWith(slot(replySlot), prev.length)) {
      throw new TurnwiseError(
        'invalid-file',
        `the chat template in ${this.o.template.source} writes ${show(next.slice(prev.length, prev.length + 40))} between the generation prompt and the reply of turn ${turn}, text the model did not see before its reply`,
        { hint: FIX },
      );
    }
  }
}

/** One episode's conversation as token ids. */
export class ChatConversation {
  private readonly entries: Entry[] = [];
  /** The ids of the last prompt, and the skeleton it was built from. */
  private promptIds: number[] = [];
  private promptSkeleton: string | undefined;
  /** Turns dropped for room (never shown again). */
  private dropped = 0;
  private readonly contentIds = new Map<string, number[]>();

  constructor(
    private readonly format: ChatFormat,
    system: string,
    private readonly task: string,
    private readonly opts: { probe?: boolean } = {},
  ) {
    this.entries.push({ message: { role: 'system', content: system.trim() } }, { message: { role: 'user', content: task.trim() } });
  }

  /** Finished turns: replies whose observation came back. */
  get turns(): number {
    return (this.entries.length - 2) >> 1;
  }

  /** Turns dropped from the start for room. */
  get firstTurn(): number {
    return this.dropped;
  }

  /** The ids the model has seen: the last prompt, then the last reply as sampled (if any). */
  get ids(): number[] {
    const last = this.entries[this.entries.length - 1];
    return last.reply ? [...this.promptIds, ...last.reply.tokenIds] : [...this.promptIds];
  }

  addReply(reply: SampledReply): void {
    if (this.entries[this.entries.length - 1].message.role === 'assistant')
      throw new Error('a reply needs an observation before the next reply');
    this.entries.push({
      message: { role: 'assistant', content: reply.text.trim() },
      reply: { text: reply.text, tokenIds: [...reply.tokenIds], stopped: reply.stopped },
    });
  }

  addObservation(text: string): void {
    if (this.entries[this.entries.length - 1].message.role !== 'assistant') throw new Error('an observation follows a reply');
    this.entries.push({ message: { role: 'user', content: text.trim() } });
  }

  /** The messages shown with the first `first` turns dropped (the task then says how many). */
  messages(first: number): Entry[] {
    const task: Entry =
      first > 0 ? { message: { role: 'user', content: `${this.task.trim()}\n\n${omittedMarker(first).text}` } } : this.entries[1];
    return [this.entries[0], task, ...this.entries.slice(2 + 2 * first)];
  }

  /** The template's text for the shown messages with a placeholder for each content, ready for a reply. */
  skeleton(first: number): string {
    const shown = this.messages(first);
    const template = this.format.o.template;
    const now = this.format.now;
    const skeleton = template.render(
      shown.map((e, i) => ({ role: e.message.role, content: slot(i) })),
      true,
      now,
    );
    // Replies keep their placeholder: their ids are kept as sampled, whatever the template would
    // make of their text (an empty reply, say, that a template writes without its newline).
    const real = template.render(
      shown.map((e, i) => (e.reply ? { role: e.message.role, content: slot(i) } : e.message)),
      true,
      now,
    );
    const filled = skeleton.replace(SLOT, (whole, i) => (shown[Number(i)].reply ? whole : shown[Number(i)].message.content));
    if (real !== filled) {
      let i = 0;
      while (real[i] === filled[i]) i++;
      throw new TurnwiseError(
        'invalid-file',
        `the chat template in ${template.source} changes the text of a message (at character ${i} of the prompt, ${JSON.stringify(filled.slice(i, i + 40))} became ${JSON.stringify(real.slice(i, i + 40))}), so the model would be shown text its token ids do not hold`,
        { hint: FIX },
      );
    }
    return skeleton;
  }

  private encodeContent(text: string): number[] {
    let ids = this.contentIds.get(text);
    if (!ids) this.contentIds.set(text, (ids = this.format.o.tokenizer.encode(text, { special: false })));
    return ids;
  }

  /** Ids of a part of a skeleton: template text with special tokens on, content off, replies as sampled. */
  private build(part: string, shown: readonly Entry[]): number[] {
    const tok = this.format.o.tokenizer;
    const out: number[] = [];
    let strip: string | undefined;
    for (const p of pieces(part)) {
      if ('text' in p) {
        // A reply sampled its end-of-turn token: the template's copy of it is already in the ids.
        const text = strip !== undefined && p.text.startsWith(strip) ? p.text.slice(strip.length) : p.text;
        if (text) out.push(...tok.encode(text, { special: true }));
      } else {
        const e = shown[p.message];
        if (e.reply) out.push(...e.reply.tokenIds);
        else out.push(...this.encodeContent(e.message.content));
      }
      const r = 'message' in p ? shown[p.message].reply : undefined;
      strip = r?.stopped && r.tokenIds[r.tokenIds.length - 1] === this.format.endOfTurn.id ? this.format.endOfTurn.text : undefined;
    }
    return out;
  }

  /**
   * The ids of the next prompt (every reply so far has its observation). `reset` is true when
   * they do not extend the ids the model has seen (turns were dropped for room); otherwise they
   * are `ids` followed by the new tail.
   */
  prompt(): { ids: number[]; reset: boolean; firstTurn: number } {
    if (this.entries[this.entries.length - 1].message.role === 'assistant') throw new Error('the last reply has no observation yet');
    const budget = this.format.promptBudget;
    let skeleton = this.skeleton(this.dropped);
    let ids: number[];
    let reset = false;
    if (this.promptSkeleton === undefined) {
      ids = this.build(skeleton, this.messages(this.dropped));
    } else {
      this.format.checkExtends(this.promptSkeleton, skeleton, this.turns, 2 + 2 * (this.turns - 1 - this.dropped));
      ids = [...this.promptIds, ...this.build(skeleton.slice(this.promptSkeleton.length), this.messages(this.dropped))];
    }
    while (ids.length > budget && !this.opts.probe) {
      if (this.dropped >= this.turns) {
        throw new TurnwiseError(
          'invalid-input',
          `the system message and the task take ${ids.length} tokens, more than the ${budget} a prompt may have (the model's context of ${this.format.o.contextTokens} tokens less maxActionTokens ${this.format.o.maxActionTokens})`,
          {
            hint: 'lower maxActionTokens, or use a model with a longer context',
          },
        );
      }
      this.dropped++;
      reset = true;
      skeleton = this.skeleton(this.dropped);
      ids = this.build(skeleton, this.messages(this.dropped));
    }
    this.promptSkeleton = skeleton;
    this.promptIds = ids;
    return { ids: [...ids], reset, firstTurn: this.dropped };
  }

  /** The prompt's text as the model sees it (its ids decoded, special tokens shown). */
  text(): string {
    return this.format.o.tokenizer.decode(this.ids);
  }
}
