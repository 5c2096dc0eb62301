// The compact action format's codec (turnwise-tiny's format; a chat model uses its own template,
// chat-model.ts): segments (agent/prompt.ts) to token ids: `<|im_start|>role\n` text `<|im_end|>\n` per segment,
// then `<|im_start|>agent\n` where the next action goes. Text from the task, the workspace and
// tool output is data: it is encoded with special tokens off, so a file that contains
// `<|im_end|>` cannot end a turn. Context handling: the task stays, the oldest turns go first.
import { TurnwiseError } from '../core/errors';
import { omittedMarker, type PromptTurn, type Segment } from '../agent/prompt';
import type { PolicyTokenizer } from '../policy/files/tokenizer';

export interface CompactCodec {
  imStart: number;
  imEnd: number;
  /** Ids of untrusted text: special-token strings stay plain text. */
  text(s: string): number[];
  decode(ids: readonly number[]): string;
}

/**
 * The codec of a tokenizer. turnwise-tiny's byte-level vocabulary (id = byte) is encoded
 * directly from UTF-8; other tokenizers go through their own encoder with any special-token
 * string broken up first (a zero-width joiner after `<|`), so it cannot match.
 */
export function compactCodec(tok: PolicyTokenizer): CompactCodec {
  const imStart = tok.tokenId('<|im_start|>');
  const imEnd = tok.tokenId('<|im_end|>');
  if (imStart === undefined || imEnd === undefined) {
    throw new TurnwiseError(
      'invalid-input',
      "the model's tokenizer has no <|im_start|> / <|im_end|> tokens, which the agent's chat format needs",
      {
        hint: 'use a Qwen2-family tokenizer, or turnwise-tiny (`turnwise policy init`)',
      },
    );
  }
  const byteLevel =
    tok.size <= 300 && tok.encode('A').length === 1 && tok.encode('A')[0] === 65 && tok.encode('\u00e9').join(',') === '195,169';
  const text = byteLevel ? (s: string) => Array.from(Buffer.from(s, 'utf8')) : (s: string) => tok.encode(s.replace(/<\|/g, '<\u200d|'));
  return { imStart, imEnd, text, decode: (ids) => tok.decode(ids, true) };
}

export function segmentIds(c: CompactCodec, seg: Segment): number[] {
  return [c.imStart, ...c.text(`${seg.role}\n`), ...c.text(seg.text), c.imEnd, ...c.text('\n')];
}

/** `<|im_start|>agent\n`: what the model continues from. */
export function actionPrefix(c: CompactCodec): number[] {
  return [c.imStart, ...c.text('agent\n')];
}

/** An action as trained: its text then `<|im_end|>`. */
export function actionIds(c: CompactCodec, action: string): number[] {
  return [...c.text(action), c.imEnd];
}

/**
 * The prompt ids for the next action: task + as many of the latest turns as fit in `budget`
 * tokens (oldest dropped first, with a marker). Returns the ids and the first turn kept.
 */
export function renderPrompt(
  c: CompactCodec,
  task: string,
  turns: readonly PromptTurn[],
  budget: number,
): { ids: number[]; firstTurn: number } {
  const taskIds = segmentIds(c, { role: 'task', text: task });
  const prefix = actionPrefix(c);
  const turnIds = turns.map((t) => [
    ...segmentIds(c, { role: 'agent', text: t.action }),
    ...segmentIds(c, { role: 'obs', text: t.observation }),
  ]);
  let first = 0;
  const markerIds = (k: number) => (k > 0 ? segmentIds(c, omittedMarker(k)) : []);
  let total = taskIds.length + prefix.length + turnIds.reduce((s, t) => s + t.length, 0);
  while (first < turns.length && total + markerIds(first).length > budget) total -= turnIds[first++].length;
  // The segments of promptSegments(task, turns, first), from the ids already encoded.
  let ids = [...taskIds, ...markerIds(first), ...turnIds.slice(first).flat(), ...prefix];
  if (ids.length > budget) {
    // Even the task alone is too long: keep its head and the action prefix.
    const taskCut = taskIds.slice(0, Math.max(8, budget - prefix.length - 1));
    ids = [...taskCut.slice(0, -1), c.imEnd, ...prefix].slice(-budget);
  }
  return { ids, firstTurn: first };
}

/** Token ids and per-token loss weights of a demonstration: actions at 1, the rest at `promptWeight`. */
export function encodeDemonstration(
  c: CompactCodec,
  segments: readonly Segment[],
  promptWeight: number,
): { ids: number[]; weights: number[] } {
  const ids: number[] = [];
  const weights: number[] = [];
  for (const seg of segments) {
    if (seg.role === 'agent') {
      const pre = actionPrefix(c);
      ids.push(...pre);
      weights.push(...pre.map(() => promptWeight));
      const act = [...actionIds(c, seg.text), ...c.text('\n')];
      ids.push(...act);
      // The trailing newline after <|im_end|> is format, not action.
      weights.push(...act.map((_, i) => (i < act.length - 1 ? 1 : promptWeight)));
    } else {
      const s = segmentIds(c, seg);
      ids.push(...s);
      weights.push(...s.map(() => promptWeight));
    }
  }
  return { ids, weights };
}

/**
 * The training examples of a demonstration as the policy meets its turns: the whole episode as one
 * example (encodeDemonstration) while every action's prompt fits in `promptBudget` tokens; past
 * that, each later action in an example of its own, after the prompt the episode loop would give
 * it then (renderPrompt: the task, a marker for the turns dropped, the latest turns that fit),
 * its prompt at weight 0 (already trained on in the first example). A long episode is so trained
 * whole, and in the truncated context it runs in, instead of being left out for its length.
 */
export function encodeDemonstrationTurns(
  c: CompactCodec,
  segments: readonly Segment[],
  promptWeight: number,
  promptBudget: number,
): { ids: number[]; weights: number[] }[] {
  const whole = encodeDemonstration(c, segments, promptWeight);
  if (segments[0]?.role !== 'task') return [whole];
  const task = segments[0].text;
  // The whole encoding is its segments' encodings end to end: where each segment starts in it.
  const starts: number[] = [];
  let at = 0;
  for (const seg of segments) {
    starts.push(at);
    at += encodeDemonstration(c, [seg], promptWeight).ids.length;
  }
  const turns: PromptTurn[] = [];
  const actions: { index: number; turn: number }[] = [];
  for (let i = 1; i < segments.length; i++) {
    const seg = segments[i];
    if (seg.role !== 'agent') continue;
    actions.push({ index: i, turn: turns.length });
    const next = segments[i + 1];
    turns.push({ action: seg.text, observation: next?.role === 'obs' ? next.text : '' });
  }
  // The first action whose prompt (everything before it, and the action prefix) is over budget.
  const prefix = actionPrefix(c).length;
  const cut = actions.findIndex((a) => starts[a.index] + prefix > promptBudget);
  if (cut < 0) return [whole];
  const head = starts[actions[cut].index];
  const out = cut > 0 ? [{ ids: whole.ids.slice(0, head), weights: whole.weights.slice(0, head) }] : [];
  for (const a of actions.slice(cut)) {
    const { ids: prompt } = renderPrompt(c, task, turns.slice(0, a.turn), promptBudget);
    const act = [...actionIds(c, segments[a.index].text), ...c.text('\n')];
    out.push({
      ids: [...prompt, ...act],
      // The trailing newline after <|im_end|> is format, not action.
      weights: [...prompt.map(() => 0), ...act.map((_, i) => (i < act.length - 1 ? 1 : 0))],
    });
  }
  return out;
}
