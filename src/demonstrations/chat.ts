// Demonstrations in a chat model's own format, for the warm start of a chat model: a
// demonstration's turns (a command, or submit, and the observation it got) become a conversation
// through the model's chat template, each reply one fenced bash block (or the word submit), the
// observations user messages. The ids are built the way a rollout builds them (agent/chat-format.ts
// ChatConversation): the template's text with special tokens on, message content with them off,
// each reply's ids in place followed by the end-of-turn token, so the ids of turn N are a prefix
// of those of turn N+1, and one example holds a whole episode with its loss on the replies.
//
// Also: the resolved episodes of evaluation results (an endpoint's, an earlier checkpoint's) as
// demonstrations in the target model's format, the chat one or turnwise-tiny's compact segments.
import { TurnwiseError } from '../core/errors';
import type { Task, Trajectory } from '../core/schema';
import { ChatFormat, chatFormatErrorObservation, chatSystemMessage, chatTaskMessage, CHAT_OBS_CHARS } from '../agent/chat-format';
import { capMiddle, OBS_PROMPT_CHARS, SUBMIT, taskText, type Segment } from '../agent/prompt';

/** A reply in the chat action format for a command: its one bash block, or the word submit. */
export function chatReplyFor(command: string): string {
  return command === SUBMIT ? SUBMIT : `\`\`\`bash\n${command}\n\`\`\``;
}

/** One turn of a demonstration: the reply, its loss weight, and the observation that came back (absent after the last). */
export interface ChatDemonstrationTurn {
  reply: string;
  /** Loss weight of the reply's tokens (its end-of-turn included); 0 keeps it as context only. */
  weight: number;
  observation?: string;
}

export interface ChatDemonstration {
  system: string;
  task: string;
  turns: ChatDemonstrationTurn[];
}

/**
 * Token ids and loss weights of a demonstration in a chat format: prompt tokens at
 * `promptWeight`, each reply at its weight. Stops before a turn whose prompt would no longer
 * extend the ids so far (old turns dropped for room) and after `maxTokens` tokens: what is kept
 * is a prefix of the conversation a rollout would have built.
 */
export function encodeChatDemonstration(
  format: ChatFormat,
  d: ChatDemonstration,
  promptWeight: number,
  maxTokens = Infinity,
): { ids: number[]; weights: number[]; replies: number } {
  const tok = format.o.tokenizer;
  const conv = format.conversation(d.system, d.task);
  const ids: number[] = [];
  const weights: number[] = [];
  let replies = 0;
  for (const [k, turn] of d.turns.entries()) {
    const p = conv.prompt();
    if (p.reset) break;
    // The prompt extends what is there: only its new tail is added.
    const tail = p.ids.slice(ids.length);
    const text = turn.reply.trim();
    const replyIds = [...tok.encode(text, { special: false }), format.endOfTurn.id];
    if (ids.length + tail.length + replyIds.length > maxTokens) break;
    ids.push(...tail, ...replyIds);
    weights.push(...tail.map(() => promptWeight), ...replyIds.map(() => turn.weight));
    replies++;
    conv.addReply({ text, tokenIds: replyIds, stopped: true });
    if (k < d.turns.length - 1) conv.addObservation(turn.observation ?? '');
  }
  return { ids, weights, replies };
}

/** A compact demonstration (segments: task, then agent / obs) in the chat format, with the sandbox's helpers for `language`. */
export function chatDemonstrationFromSegments(segments: readonly Segment[], system: string): ChatDemonstration {
  const task = segments.find((s) => s.role === 'task')?.text ?? '';
  const turns: ChatDemonstrationTurn[] = [];
  for (const s of segments) {
    if (s.role === 'agent') turns.push({ reply: chatReplyFor(s.text), weight: 1 });
    else if (s.role === 'obs' && turns.length) turns[turns.length - 1].observation = s.text;
  }
  return { system, task, turns };
}

/** The system message of the generated demonstrations: a Python sandbox with its helper commands. */
export const PYTHON_SYSTEM = chatSystemMessage({ language: 'python', testCommand: '' });

/** An observation re-capped for another format: `exit N` (or the status) kept, the output capped to `max`. */
function recap(observation: string, max: number): string {
  const nl = observation.indexOf('\n');
  if (nl < 0) return observation;
  return `${observation.slice(0, nl)}\n${capMiddle(observation.slice(nl + 1), max)}`;
}

/** The target format of episode demonstrations. */
export type DemonstrationTarget = 'chat' | 'compact';

/**
 * A resolved episode as a demonstration in the target's format. Chat: the recorded replies as
 * the assistant messages (a compact episode's commands as bash blocks), the observations as user
 * messages. Compact: the commands as agent segments. A format error's reply stays as context
 * (weight 0) and its observation is the one the target format gives.
 */
export function episodeDemonstration(t: Trajectory, task: Task, target: 'chat'): ChatDemonstration;
export function episodeDemonstration(t: Trajectory, task: Task, target: 'compact'): Segment[];
export function episodeDemonstration(t: Trajectory, task: Task, target: DemonstrationTarget): ChatDemonstration | Segment[] {
  const turns = [...t.turns].sort((a, b) => a.index - b.index);
  if (target === 'chat') {
    return {
      system: chatSystemMessage(task),
      task: chatTaskMessage(task),
      turns: turns.map((u) => ({
        reply: u.reply ?? chatReplyFor(u.action),
        weight: u.formatError ? 0 : 1,
        observation: u.formatError ? chatFormatErrorObservation(u.formatError) : recap(u.observation, CHAT_OBS_CHARS),
      })),
    };
  }
  const segs: Segment[] = [{ role: 'task', text: taskText(task) }];
  for (const [k, u] of turns.entries()) {
    // A format error's text is no action to learn: the compact format has no weight per segment, so it is left out with its observation.
    if (u.formatError) continue;
    segs.push({ role: 'agent', text: u.action });
    if (k < turns.length - 1 && u.action !== SUBMIT) segs.push({ role: 'obs', text: recap(u.observation, OBS_PROMPT_CHARS) });
  }
  return segs;
}

/** What `episodeDemonstrations` found in results files. */
export interface EpisodeSelection {
  /** The resolved episodes kept, with their tasks. */
  kept: { trajectory: Trajectory; task: Task }[];
  /** Episodes read, resolved ones, and resolved ones left out because their task is held out. */
  read: number;
  resolved: number;
  heldOut: number;
  heldOutTasks: string[];
}

/**
 * The resolved episodes of results files that may be demonstrations: their task is known (in
 * `tasks`) and not held out. An episode of a task `tasks` lacks is refused (its conversation
 * cannot be rebuilt without the task); none left is an error saying why.
 */
export function selectEpisodes(
  files: { file: string; trajectories: readonly Trajectory[] }[],
  tasks: readonly Task[],
  heldout: ReadonlySet<string>,
  tasksSource: string,
): EpisodeSelection {
  const byId = new Map(tasks.map((t) => [t.id, t]));
  const kept: EpisodeSelection['kept'] = [];
  let read = 0;
  let resolved = 0;
  let heldOut = 0;
  const heldOutTasks = new Set<string>();
  const unknown = new Map<string, string>();
  for (const f of files) {
    for (const t of f.trajectories) {
      read++;
      if (t.failure || !t.reward.resolved || t.reward.tampered) continue;
      resolved++;
      const task = byId.get(t.taskId);
      if (!task) {
        unknown.set(t.taskId, f.file);
        continue;
      }
      if (heldout.has(t.taskId)) {
        heldOut++;
        heldOutTasks.add(t.taskId);
        continue;
      }
      kept.push({ trajectory: t, task });
    }
  }
  if (unknown.size) {
    const [[id, file]] = unknown;
    throw new TurnwiseError(
      'invalid-input',
      `${unknown.size} task(s) of the resolved episodes are not in ${tasksSource} (e.g. ${JSON.stringify(id)} in ${file}), so their conversations cannot be rebuilt`,
      {
        hint: 'give the task file the evaluation ran on (--tasks FILE), or the run it evaluated (--run RUN)',
      },
    );
  }
  if (resolved === 0) {
    throw new TurnwiseError(
      'invalid-input',
      `none of the ${read} episode(s) in ${files.map((f) => f.file).join(', ')} resolved its task: there is nothing to learn from`,
      {
        hint: 'evaluate a stronger model (turnwise eval --endpoint URL, or --samples K for more tries per task) and warm-start on its results',
      },
    );
  }
  if (kept.length === 0) {
    throw new TurnwiseError(
      'invalid-input',
      `all ${resolved} resolved episode(s) are of task(s) held out for evaluation (${[...heldOutTasks].slice(0, 5).join(', ')}): held-out tasks never become demonstrations`,
      {
        hint: 'evaluate the model on the train split (turnwise eval --run RUN --split train, or a task file of train tasks) and warm-start on those results',
      },
    );
  }
  return { kept, read, resolved, heldOut, heldOutTasks: [...heldOutTasks].sort() };
}
