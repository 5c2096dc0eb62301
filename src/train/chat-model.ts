// A chat model as the agent's ActionModel, in its own chat format (agent/chat-format.ts): each
// episode keeps one conversation of token ids and one policy sequence (its KV cache). A turn
// appends only the new tail of the prompt (the template's text after the last reply, the
// observation) to the sequence, which already ends with the reply exactly as it was sampled;
// only when old turns are dropped for room is the sequence reset to the rebuilt prompt. The
// reply's text, its ids and log-probs, and the command extracted from its bash block are
// returned together.
import * as path from 'node:path';
import { TurnwiseError } from '../core/errors';
import { ChatFormat, parseChatReply, type ChatConversation, type ChatReply } from '../agent/chat-format';
import { ChatTemplate, templateTokens } from '../agent/chat-template';
import type { ActionFormatKind, ActionModel, ActRequest, ActResult } from '../agent/types';
import { chatTemplateOf } from '../policy/files/hf';
import type { LoadedCheckpoint } from '../policy/files/checkpoint';
import type { PolicyService, SequenceId } from '../policy/trainable';
import { turnCredit, type TurnRowData } from './rows';

export interface ChatSamplingOptions {
  maxActionTokens: number;
  temperature: number;
  topP: number;
}

/**
 * The chat format of a model folder: its chat template (chat_template.jinja, else
 * tokenizer_config.json's), its tokenizer, and a context of config.json's
 * max_position_embeddings, of which a prompt may take all but `maxActionTokens`.
 */
export function chatFormatOf(
  ck: Pick<LoadedCheckpoint, 'dir' | 'tokenizer' | 'tokenizerConfig' | 'weights'>,
  maxActionTokens: number,
): ChatFormat {
  const found = chatTemplateOf(ck.dir, ck.tokenizerConfig);
  if (!found) {
    throw new TurnwiseError(
      'invalid-file',
      `${ck.dir} has no chat template (neither ${path.join(ck.dir, 'chat_template.jinja')} nor a chat_template in tokenizer_config.json)`,
      {
        hint: 'use the chat (instruct) version of the model, whose folder carries its template, or put the template in chat_template.jinja beside tokenizer_config.json',
      },
    );
  }
  const template = new ChatTemplate(found.template, found.source, templateTokens(ck.tokenizerConfig));
  return new ChatFormat({ template, tokenizer: ck.tokenizer, contextTokens: ck.weights.config.max_position_embeddings, maxActionTokens });
}

/** An action with the reply it came from: its text, and what its bash block holds. */
export interface ChatActResult extends ActResult {
  /** The reply read as an action (the command of its one bash block, submit, or why it is neither). */
  action: ChatReply;
  /** Where the prompt of this turn started over (turns dropped for room), and how many turns it no longer shows. */
  reset: boolean;
  firstTurn: number;
}

interface EpisodeState {
  conversation: ChatConversation;
  seq: Promise<SequenceId>;
  /** Ids the sequence holds: the last prompt and the reply sampled after it. */
  seen: number;
  replies: number;
}

export class ChatActionModel implements ActionModel {
  readonly actionFormat: ActionFormatKind = 'chat';
  private readonly episodes = new Map<string, EpisodeState>();
  /** Ids that end a reply: the template's end of turn and the model's eos ids. */
  readonly stopIds: number[];
  /** Prompt tokens fed and tokens generated, for throughput figures. */
  promptTokens = 0;
  sampledTokens = 0;

  /** `system` is the system message of an episode whose request brings none (episodes bring chatSystemMessage of their task); `eosIds` also end a reply. */
  constructor(
    private readonly policy: PolicyService,
    readonly format: ChatFormat,
    private readonly system: string,
    private readonly o: ChatSamplingOptions,
    eosIds: readonly number[] = [],
  ) {
    this.stopIds = [...new Set([format.endOfTurn.id, ...eosIds])];
  }

  /**
   * A conversation that starts with the replies the request's turns bring (a branch's inherited
   * turns; none for a first turn), on `seq` (a new sequence when absent).
   */
  private startEpisode(r: ActRequest, seq = this.policy.newSequence()): EpisodeState {
    const s: EpisodeState = { conversation: this.format.conversation(r.system ?? this.system, r.task), seq, seen: 0, replies: 0 };
    for (const [i, t] of r.turns.entries()) {
      if (!t.inherited?.tokenIds.length)
        throw new TurnwiseError(
          'internal',
          `episode ${r.episodeId} starts at turn ${r.turns.length + 1} without the replies of the turns before`,
        );
      if (i > 0) s.conversation.addObservation(r.turns[i - 1].observation);
      const ids = [...t.inherited.tokenIds];
      s.conversation.addReply({
        text: t.inherited.reply ?? t.action,
        tokenIds: ids,
        stopped: this.stopIds.includes(ids[ids.length - 1]),
      });
      s.replies++;
    }
    this.episodes.set(r.episodeId, s);
    return s;
  }

  private episode(r: ActRequest): EpisodeState {
    let s = this.episodes.get(r.episodeId);
    // A branch's first request brings the replies its parent sampled: the conversation starts with them.
    if (!s) s = this.startEpisode(r);
    // The turn just drawn asked for again (a branch's first own turn drawn again, agent/episode.ts
    // BranchPrefix): the conversation starts over from the inherited replies on the same sequence,
    // whose cache of the prompt is kept by the reset of the next sample.
    else if (r.turns.length === s.replies - 1 && r.turns.every((t) => t.inherited)) s = this.startEpisode(r, s.seq);
    // The request's turns are this model's replies with their observations, one per reply.
    if (r.turns.length !== s.replies) {
      throw new TurnwiseError(
        'internal',
        `episode ${r.episodeId} asks for turn ${r.turns.length + 1} but ${s.replies} repl${s.replies === 1 ? 'y was' : 'ies were'} sampled for it`,
      );
    }
    if (s.replies > 0) s.conversation.addObservation(r.turns[r.turns.length - 1].observation);
    return s;
  }

  async act(requests: readonly ActRequest[]): Promise<ActResult[]> {
    const rows: { seq: SequenceId; ids: number[]; state: EpisodeState; reset: boolean; firstTurn: number }[] = [];
    for (const r of requests) {
      const state = this.episode(r);
      const prompt = state.conversation.prompt();
      const seq = await state.seq;
      let ids: number[];
      if (state.seen === 0 || prompt.reset) {
        // The first prompt, or one rebuilt after dropping turns: the sequence starts over from it
        // (keeping the cache of what it shares with the old one).
        await this.policy.reset(seq, prompt.ids);
        ids = [];
      } else {
        ids = prompt.ids.slice(state.seen);
      }
      this.promptTokens += state.seen === 0 || prompt.reset ? prompt.ids.length : ids.length;
      rows.push({ seq, ids, state, reset: prompt.reset, firstTurn: prompt.firstTurn });
    }
    const out = await this.policy.sample(
      rows.map((row, i) => ({
        seq: row.seq,
        ids: row.ids,
        seed: requests[i].seed,
        maxNewTokens: this.o.maxActionTokens,
        temperature: this.o.temperature,
        topP: this.o.topP,
        stopIds: this.stopIds,
      })),
    );
    const results: ChatActResult[] = [];
    for (const [i, g] of out.entries()) {
      const { state } = rows[i];
      this.sampledTokens += g.tokenIds.length;
      const stopped = g.finishReason === 'stop';
      const body = stopped ? g.tokenIds.slice(0, -1) : g.tokenIds;
      const text = this.format.o.tokenizer.decode(body, true);
      state.conversation.addReply({ text, tokenIds: g.tokenIds, stopped });
      state.seen = state.conversation.ids.length;
      state.replies++;
      const action = await parseChatReply(text, stopped);
      results.push({
        text,
        tokenIds: g.tokenIds,
        logprobs: g.logprobs,
        finishReason: g.finishReason,
        action,
        reset: rows[i].reset,
        firstTurn: rows[i].firstTurn,
      });
    }
    return results;
  }

  /** The ids of an episode's conversation so far (its last prompt and reply). */
  conversationIds(episodeId: string): number[] | undefined {
    return this.episodes.get(episodeId)?.conversation.ids;
  }

  release(episodeId: string): void {
    const s = this.episodes.get(episodeId);
    if (!s) return;
    this.episodes.delete(episodeId);
    void s.seq.then((id) => this.policy.release(id)).catch(() => undefined);
  }
}

/**
 * The prompt+reply token rows of a chat episode's turns, as they were sampled: the episode's
 * conversation built again from its trajectory (the same system message and task, each reply's
 * sampled ids, each observation as the model read it), so each row's prompt is the exact ids the
 * model was prompted with, dropped turns included. `stopIds` are those that ended a reply.
 */
export function chatTurnTokenRows(
  format: ChatFormat,
  system: string,
  task: string,
  t: {
    turns: readonly {
      reply?: string;
      action: string;
      observation: string;
      tokenIds?: number[];
      logprobs?: number[];
      advantage?: number;
      tokenAdvantages?: number[];
      clipScale?: number;
      inherited?: boolean;
    }[];
  },
  stopIds: readonly number[],
): TurnRowData[] {
  const conversation = format.conversation(system, task);
  const rows: TurnRowData[] = [];
  for (const [k, turn] of t.turns.entries()) {
    const tokenIds = turn.tokenIds ?? [];
    // A turn without its ids cannot be placed, nor anything after it.
    if (!tokenIds.length) break;
    const { ids } = conversation.prompt();
    // A branch's inherited turns are its parent's to train on.
    if (!turn.inherited && turn.logprobs?.length === tokenIds.length)
      rows.push({ ids: [...ids, ...tokenIds], actionStart: ids.length, logprobs: turn.logprobs, ...turnCredit(turn) });
    const last = tokenIds[tokenIds.length - 1];
    conversation.addReply({ text: turn.reply ?? turn.action, tokenIds, stopped: stopIds.includes(last) });
    if (k < t.turns.length - 1) conversation.addObservation(turn.observation);
  }
  return rows;
}
