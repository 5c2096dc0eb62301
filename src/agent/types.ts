// The two interfaces the agent layer owns. agent/ may not import policy/ (docs/design.md "Layers"), so the
// model is an `ActionModel` that train/ implements over the ONNX policy; sandboxes come from a
// `SandboxProvider` (the Docker pool is one, a test fake another, Kubernetes pods later).
import type { TokenUsage } from '../core/schema';
import type { Sandbox } from '../sandbox/types';
import type { ChatReply } from './chat-format';
import type { PromptTurn } from './prompt';

export interface ActRequest {
  /** Stable id of the episode: the model keeps its context (KV cache) under it between turns. */
  episodeId: string;
  /** The task segment's text. */
  task: string;
  /** Finished turns, oldest first, as the prompt shows them. */
  turns: readonly PromptTurn[];
  /** A chat model's system message for this episode (chatSystemMessage of the task); set in the chat format. */
  system?: string;
  /** Seed of this request's sampling: its result must not depend on what it is batched with. */
  seed: number;
}

export interface ActResult {
  /** Decoded action text (without the end-of-turn token). */
  text: string;
  /** Sampled token ids, the end-of-turn token included when it was sampled. */
  tokenIds: number[];
  /** log π of each sampled token under the sampling distribution. */
  logprobs: number[];
  /** 'length': the action did not end within the model's action budget. */
  finishReason: 'stop' | 'length';
  /**
   * The reply read as an action, when the model's format wraps the command (a chat model's one
   * ```bash block): the command, `submit`, or why it is neither. Without it the episode reads
   * the action from `text` in the model's format.
   */
  action?: ChatReply;
  /** The server's count of the request's and the reply's tokens, where a server gave one. */
  usage?: TokenUsage;
}

/**
 * How a model writes its actions: turnwise-tiny's compact segments (the text is the command),
 * or a chat model's own template (one fenced bash block per reply, agent/chat-format.ts).
 */
export type ActionFormatKind = 'compact' | 'chat';

/** A policy that writes actions. Several requests form one batch. */
export interface ActionModel {
  /** The format its replies are in (compact when absent). */
  readonly actionFormat?: ActionFormatKind;
  act(requests: readonly ActRequest[]): Promise<ActResult[]>;
  /** Frees what the model holds for an episode. Idempotent. */
  release(episodeId: string): void;
}

/** Where episodes run: one fresh sandbox per episode, started from a workspace snapshot. */
export interface SandboxProvider {
  acquire(opts: { rollout: string; signal?: AbortSignal }): Promise<Sandbox>;
}
