// The teacher pass of the estimators that read turns against a reference fix (gear, a2tgpo;
// docs/credit-assignment.md "gear and a2tgpo"). A mutation task knows the line it broke: the
// policy shown that line in its task is a teacher, and the policy's log-probability of the fix
// written as its next command measures how close each history is to it. One scoring pass over
// the iteration's episodes, on the policy that sampled them:
//   teacher rows: each sampled action after the task with the reference fix added (gear);
//   gain rows: the fix as the next action after the history before each turn and after the last (a2tgpo).
// The results go onto the turns (Turn.reference), where rowsFromTrajectories finds them.
import type { Task, Trajectory } from '../core/schema';
import { chatSystemMessage, chatTaskMessage } from '../agent/chat-format';
import { taskText, type PromptTurn } from '../agent/prompt';
import { chatReplyFor } from '../demonstrations/chat';
import { fixCommand, mutatedLineOf } from '../demonstrations/fix-cases';
import { actionIds, renderPrompt } from './compact-codec';
import type { Harness } from './harness';

/** A task's reference fix: the line the teacher is shown, and the fix as a command the agent could run. */
export interface ReferenceFix {
  /** What the teacher's task adds: where the bug is and what the code was. */
  hint: string;
  /** The one-line `sed` that restores the original line; absent where it cannot be written as one (the gain needs it). */
  command?: string;
}

/**
 * The reference fix of a mutation task, read against the workspace file it was made from (the
 * line number and the whole line; only a plain file inside the workspace is read). Undefined for a task with no mutation
 * (a failing-test task). Where the file cannot be read or no longer holds the original text, the
 * hint names the text without its line and there is no command.
 */
export function referenceFix(task: Task, workspace: string): ReferenceFix | undefined {
  const m = task.mutation;
  if (!m) return undefined;
  let at: ReturnType<typeof mutatedLineOf>;
  try {
    // A one-line change only: the teacher is shown one line.
    if (!m.span.text.includes('\n') && !m.replacement.includes('\n')) at = mutatedLineOf(workspace, m);
  } catch {
    // unreadable: the hint without its line, no command
  }
  const where = `${m.file}${at ? ` line ${at.line}` : ''}${m.enclosing ? ` (in ${m.enclosing})` : ''}`;
  const hint = at
    ? `Reference fix: ${where} should read:\n${at.originalLine.trim()}`
    : `Reference fix: in ${where}, \`${m.replacement}\` should be \`${m.span.text}\`.`;
  const command = at ? fixCommand(m.file, at.line, at.mutatedLine, at.originalLine) : undefined;
  return { hint, ...(command ? { command } : {}) };
}

export interface TeacherPassResult {
  /** Scoring rows run and the tokens in them. */
  rows: number;
  tokens: number;
  /** Scored episodes whose task has no reference fix (nothing measured). */
  withoutReference: number;
  seconds: number;
}

interface PendingRow {
  ids: number[];
  /** Where the scored tokens start and how many there are. */
  start: number;
  n: number;
  /** Receives the scored tokens' log-probs. */
  take: (logp: number[]) => void;
}

/**
 * Scores the episodes against their tasks' reference fixes and writes Turn.reference: with
 * `teacher`, the teacher's log-prob of each sampled token; with `gain`, log P(fix as the next
 * action) before and after each turn. One logprobs call at the sampling temperature.
 */
export async function teacherPass(
  harness: Harness,
  trajs: readonly Trajectory[],
  tasks: ReadonlyMap<string, Task>,
  o: { workspace: string; temperature: number; maxActionTokens: number; teacher: boolean; gain: boolean },
): Promise<TeacherPassResult> {
  const t0 = Date.now();
  const fixes = new Map<string, ReferenceFix | undefined>();
  const fixOf = (task: Task) => {
    if (!fixes.has(task.id)) fixes.set(task.id, referenceFix(task, o.workspace));
    return fixes.get(task.id);
  };
  const pending: PendingRow[] = [];
  let withoutReference = 0;
  for (const t of trajs) {
    const task = tasks.get(t.taskId);
    const fix = task && fixOf(task);
    for (const turn of t.turns) delete turn.reference;
    if (!task || !fix) {
      withoutReference++;
      continue;
    }
    pending.push(...(harness.chat ? chatRows(harness, task, t, fix, o) : compactRows(harness, task, t, fix, o)));
  }
  let tokens = 0;
  if (pending.length) {
    const out = await harness.policy.logprobs(
      pending.map((r) => r.ids),
      { temperature: o.temperature },
    );
    pending.forEach((r, i) => {
      tokens += r.ids.length;
      r.take(Array.from(out[i].subarray(r.start, r.start + r.n), (x) => Math.round(x * 1e5) / 1e5));
    });
  }
  return { rows: pending.length, tokens, withoutReference, seconds: (Date.now() - t0) / 1000 };
}

const sum = (xs: readonly number[]) => xs.reduce((s, x) => s + x, 0);

/**
 * The fix's ids where the policy could write them as one action (within maxActionTokens), else
 * undefined: a fix longer than an action is not a next action the policy can take, and its row
 * would not fit the context. Such a task's episodes get no gain (a2tgpo falls back to GRPO).
 */
function writable(ids: number[] | undefined, maxActionTokens: number): number[] | undefined {
  return ids && ids.length <= maxActionTokens ? ids : undefined;
}

/** The teacher's row of a turn: its sampled tokens after the teacher's prompt; their log-probs go to Turn.reference. */
function teacherRow(prompt: readonly number[], turn: Trajectory['turns'][number]): PendingRow {
  const tokenIds = turn.tokenIds!;
  return {
    ids: [...prompt, ...tokenIds],
    start: prompt.length,
    n: tokenIds.length,
    take: (logp) => ((turn.reference ??= {}).teacherLogprobs = logp),
  };
}

/** Receivers for the gain rows of one episode: P(fix) after turn k's history is refBefore of k and refAfter of k − 1. */
function gainTaker(t: Trajectory, k: number): (logp: number[]) => void {
  return (logp) => {
    const v = Math.round(sum(logp) * 1e4) / 1e4;
    if (k < t.turns.length) (t.turns[k].reference ??= {}).refBefore = v;
    if (k > 0) (t.turns[k - 1].reference ??= {}).refAfter = v;
  };
}

/** Which rows the pass wants, and the action cap a fix must fit to be a next action. */
interface RowOptions {
  maxActionTokens: number;
  teacher: boolean;
  gain: boolean;
}

function compactRows(harness: Harness, task: Task, t: Trajectory, fix: ReferenceFix, o: RowOptions): PendingRow[] {
  const codec = harness.codec!;
  const budget = harness.contextTokens - o.maxActionTokens;
  const plain = taskText(task);
  const shown = `${plain}\n${fix.hint}`;
  const refIds = writable(fix.command ? actionIds(codec, fix.command) : undefined, o.maxActionTokens);
  const rows: PendingRow[] = [];
  const prior: PromptTurn[] = [];
  const gainRow = (k: number) => {
    const { ids } = renderPrompt(codec, plain, prior, budget);
    rows.push({ ids: [...ids, ...refIds!], start: ids.length, n: refIds!.length, take: gainTaker(t, k) });
  };
  for (const [k, turn] of t.turns.entries()) {
    const tokenIds = turn.tokenIds ?? [];
    if (o.teacher && tokenIds.length) rows.push(teacherRow(renderPrompt(codec, shown, prior, budget).ids, turn));
    if (o.gain && refIds) gainRow(k);
    prior.push({ action: turn.action, observation: turn.observation });
  }
  if (o.gain && refIds && t.turns.length) gainRow(t.turns.length);
  return rows;
}

function chatRows(harness: Harness, task: Task, t: Trajectory, fix: ReferenceFix, o: RowOptions): PendingRow[] {
  const { format, stopIds } = harness.chat!;
  const system = chatSystemMessage(task);
  const plain = chatTaskMessage(task);
  const teacherConv = format.conversation(system, `${plain}\n\n${fix.hint}`);
  const conv = format.conversation(system, plain);
  const tok = format.o.tokenizer;
  const refIds = writable(
    fix.command ? [...tok.encode(chatReplyFor(fix.command).trim(), { special: false }), format.endOfTurn.id] : undefined,
    o.maxActionTokens,
  );
  const rows: PendingRow[] = [];
  const gainRow = (k: number) => {
    const { ids } = conv.prompt();
    rows.push({ ids: [...ids, ...refIds!], start: ids.length, n: refIds!.length, take: gainTaker(t, k) });
  };
  for (const [k, turn] of t.turns.entries()) {
    const tokenIds = turn.tokenIds ?? [];
    // A turn without its ids cannot be placed, nor anything after it (as the update's rows).
    if (!tokenIds.length) break;
    if (o.teacher) rows.push(teacherRow(teacherConv.prompt().ids, turn));
    if (o.gain && refIds) gainRow(k);
    const reply = { text: turn.reply ?? turn.action, tokenIds, stopped: stopIds.includes(tokenIds[tokenIds.length - 1]) };
    teacherConv.addReply(reply);
    conv.addReply(reply);
    teacherConv.addObservation(turn.observation);
    conv.addObservation(turn.observation);
  }
  if (o.gain && refIds && t.turns.length && t.turns.every((u) => u.tokenIds?.length)) gainRow(t.turns.length);
  return rows;
}
