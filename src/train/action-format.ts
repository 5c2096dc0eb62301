// Which action format a model writes in (agent/types.ts ActionFormatKind), decided from its
// folder before any sandbox starts, and recorded with every checkpoint a run writes so that a
// resumed run and `eval --run` prompt it the same way:
// - a folder's action_format.json (written beside a run's checkpoints) says it;
// - a warm-started Turnwise checkpoint (warmstart.json) is compact: warm start trains that format;
// - a folder with a chat template (chat_template.jinja, or tokenizer_config.json's) is a chat model;
// - a tokenizer with <|im_start|> / <|im_end|> and no template is in the compact format (turnwise-tiny);
// - anything else is refused.
// An adapter folder is read with its base: the template and tokenizer are the base's.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError } from '../core/errors';
import { readJsonFile, writeFileAtomic } from '../core/fs';
import type { ActionFormatKind } from '../agent/types';
import { adapterBaseDir } from '../policy/files/checkpoint';
import { chatTemplateOf } from '../policy/files/hf';

export const ACTION_FORMAT_FILE = 'action_format.json';
const SCHEMA = 'turnwise/action-format@1';

export type ModelActionFormat = { kind: 'compact' } | { kind: 'chat'; template: string; source: string };

function readJsonIf(file: string): Record<string, unknown> | undefined {
  if (!fs.existsSync(file)) return undefined;
  const hint = 'restore the file from the model folder it came from';
  const v = readJsonFile(file, { unreadable: hint, invalid: hint });
  return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

/** The format recorded in a folder's action_format.json, if it has one. */
export function recordedActionFormat(dir: string): ActionFormatKind | undefined {
  const file = path.join(dir, ACTION_FORMAT_FILE);
  const v = readJsonIf(file);
  if (!v) return undefined;
  if (v.format !== 'compact' && v.format !== 'chat') {
    throw new TurnwiseError('invalid-file', `${file} names the action format ${JSON.stringify(v.format)}; it is "compact" or "chat"`, {
      hint: 'write {"format": "chat"} for a chat model, {"format": "compact"} for turnwise-tiny, or delete the file to let the folder decide',
    });
  }
  return v.format;
}

/** Writes the format a checkpoint's actions are in beside it. */
export function recordActionFormat(dir: string, format: ActionFormatKind): void {
  writeFileAtomic(path.join(dir, ACTION_FORMAT_FILE), JSON.stringify({ schema: SCHEMA, format }, null, 2) + '\n');
}

/** Whether tokenizer.json has the compact format's segment tokens. */
function hasCompactTokens(tokenizerJson: Record<string, unknown> | undefined): boolean {
  const added = Array.isArray(tokenizerJson?.added_tokens) ? (tokenizerJson!.added_tokens as { content?: unknown }[]) : [];
  const names = new Set(added.map((a) => a?.content));
  return names.has('<|im_start|>') && names.has('<|im_end|>');
}

/** The action format of a model folder (or adapter folder), or a refusal naming what to do. */
export function modelActionFormat(dir: string): ModelActionFormat {
  const d = path.resolve(dir);
  const base = adapterBaseDir(d) ?? d;
  const recorded = recordedActionFormat(d) ?? (base !== d ? recordedActionFormat(base) : undefined);
  const tokenizerConfig = readJsonIf(path.join(base, 'tokenizer_config.json'));
  const template = chatTemplateOf(base, tokenizerConfig);
  const warmStarted = fs.existsSync(path.join(d, 'warmstart.json')) || fs.existsSync(path.join(base, 'warmstart.json'));
  const kind: ActionFormatKind | undefined = recorded ?? (warmStarted ? 'compact' : template ? 'chat' : undefined);
  if (kind === 'chat') {
    if (!template) {
      throw new TurnwiseError(
        'invalid-file',
        `${path.join(d, ACTION_FORMAT_FILE)} says the model writes in its chat format, but ${base} has no chat template (neither chat_template.jinja nor a chat_template in tokenizer_config.json)`,
        {
          hint: "put the model's chat template in chat_template.jinja beside tokenizer_config.json",
        },
      );
    }
    return { kind: 'chat', ...template };
  }
  const tokenizerJson = readJsonIf(path.join(base, 'tokenizer.json'));
  if (hasCompactTokens(tokenizerJson)) return { kind: 'compact' };
  if (kind === 'compact') {
    throw new TurnwiseError(
      'invalid-file',
      `${d} is in the compact action format, but ${path.join(base, 'tokenizer.json')} has no <|im_start|> / <|im_end|> tokens`,
      { hint: 'use the tokenizer the checkpoint was trained with' },
    );
  }
  throw new TurnwiseError(
    'invalid-input',
    `${d} cannot write the agent's actions: its tokenizer has neither a chat template (chat_template.jinja or tokenizer_config.json's chat_template) nor the <|im_start|> / <|im_end|> tokens of turnwise-tiny's compact format`,
    {
      hint: 'use the chat (instruct) version of the model, whose folder carries its chat template, or put the template in chat_template.jinja beside tokenizer_config.json',
    },
  );
}
