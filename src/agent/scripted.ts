// The scripted action model (docs/design.md "Action models"): a fixed list of commands played as an
// episode's actions, then `submit`. `turnwise episode` uses it to show what the agent would see
// and how a known fix (or an attack on the reward) scores, through the loop the policy runs in.
import * as path from 'node:path';
import { TurnwiseError } from '../core/errors';
import { readUserTextFile } from '../core/fs';
import { MAX_ACTION_CHARS, splitCommands } from './action';
import { SUBMIT } from './prompt';
import type { ActionFormatKind, ActionModel, ActRequest, ActResult } from './types';

const HINT = 'write one bash command per line (heredocs and `\\` continuations are fine), or a JSON array of command strings';

/**
 * The commands of a commands file: a JSON array of strings (taken verbatim, so a malformed
 * action can be sent on purpose to see its format error), or a bash script cut into actions by
 * its syntax tree (splitCommands). A trailing `submit` is allowed and dropped (the episode submits
 * after the last command anyway); anything after a `submit` could never run and is refused.
 */
export async function parseCommandFile(text: string, file: string): Promise<string[]> {
  const trimmed = text.trim();
  if (trimmed === '') throw new TurnwiseError('invalid-input', `${file} holds no commands`, { hint: HINT });
  const commands: { text: string; line: number | string }[] = (await jsonCommands(trimmed, file)) ?? (await bashCommands(text, file));
  const submitAt = commands.findIndex((c) => c.text.trim() === SUBMIT);
  if (submitAt >= 0 && submitAt < commands.length - 1) {
    const at = commands[submitAt].line;
    throw new TurnwiseError(
      'invalid-input',
      `${typeof at === 'number' ? `${file}:${at}:` : `${file} ${at}:`} \`submit\` ends the episode, so the ${commands.length - 1 - submitAt} command(s) after it would never run`,
      { hint: 'remove them, or the submit' },
    );
  }
  const kept = submitAt >= 0 ? commands.slice(0, submitAt) : commands;
  if (kept.length === 0) throw new TurnwiseError('invalid-input', `${file} holds no commands (only submit)`, { hint: HINT });
  return kept.map((c) => c.text);
}

/** Reads a commands file (see parseCommandFile); missing, binary or folder paths are refused. */
export async function readCommandFile(file: string): Promise<string[]> {
  const abs = path.resolve(file);
  return parseCommandFile(readUserTextFile(abs, 'commands file', { hint: HINT }), abs);
}

async function jsonCommands(trimmed: string, file: string): Promise<{ text: string; line: number | string }[] | undefined> {
  // A bash line may start with `[` too (`[ -f x ] && …`); only text that parses as JSON is JSON.
  let v: unknown;
  try {
    v = JSON.parse(trimmed);
  } catch (e) {
    if (file.endsWith('.json'))
      throw new TurnwiseError('invalid-input', `${file} is not valid JSON (${(e as Error).message})`, { hint: HINT });
    return undefined;
  }
  if (!Array.isArray(v)) throw new TurnwiseError('invalid-input', `${file} is JSON but not an array of command strings`, { hint: HINT });
  if (v.length === 0) throw new TurnwiseError('invalid-input', `${file} holds no commands (an empty array)`, { hint: HINT });
  const bad = v.findIndex((x) => typeof x !== 'string');
  if (bad >= 0)
    throw new TurnwiseError('invalid-input', `${file}: element [${bad}] is ${JSON.stringify(v[bad])}, not a command string`, {
      hint: HINT,
    });
  return (v as string[]).map((text, i) => ({ text, line: `element [${i}]` }));
}

async function bashCommands(text: string, file: string): Promise<{ text: string; line: number }[]> {
  const r = await splitCommands(text);
  if ('error' in r) {
    throw new TurnwiseError('invalid-input', `${file}:${r.error.line}: ${r.error.reason}`, {
      hint: 'fix the line (the whole file must be valid bash to know where each command ends), or give the commands as a JSON array of strings',
    });
  }
  if (r.commands.length === 0) throw new TurnwiseError('invalid-input', `${file} holds no commands (only comments)`, { hint: HINT });
  const long = r.commands.find((c) => c.text.length > MAX_ACTION_CHARS);
  if (long) {
    throw new TurnwiseError(
      'invalid-input',
      `${file}:${long.line}: the command is ${long.text.length} characters, over the ${MAX_ACTION_CHARS} an action may have`,
      {
        hint: 'split it into several commands (write a long file with a few heredocs)',
      },
    );
  }
  return r.commands;
}

/**
 * Plays `commands` as every episode's actions: the k-th request of an episode (k finished turns)
 * gets command k, then `submit`. Token ids are the UTF-8 bytes and log-probs 0 (probability 1):
 * a scripted action is certain, and nothing trains on these episodes.
 */
export class ScriptedActionModel implements ActionModel {
  /**
   * `actionFormat` 'chat': each entry is a whole reply as a chat model would write it (text around one
   * ```bash block, or `submit`); the episode reads the command out of it as it does a model's.
   */
  constructor(
    private readonly commands: readonly string[],
    readonly actionFormat: ActionFormatKind = 'compact',
  ) {}

  async act(requests: readonly ActRequest[]): Promise<ActResult[]> {
    return requests.map((r) => {
      const text = this.commands[r.turns.length] ?? SUBMIT;
      const tokenIds = [...Buffer.from(text, 'utf8')];
      return { text, tokenIds, logprobs: tokenIds.map(() => 0), finishReason: 'stop' as const };
    });
  }

  release(): void {}
}
