// `turnwise episode`: a task of a task file, played with the given commands as the agent's
// actions in a real sandbox; prints what each turn observed, the reward and the test report
// (--json: the trajectory line itself, as a run's trajectories.jsonl holds it).
import { escapeControlChars } from '../../core/text';
import type { Trajectory } from '../../core/schema';
import { EndpointActionModel, EndpointClient } from '../../agent/endpoint';
import { readCommandFile } from '../../agent/scripted';
import { planScriptedEpisode, runScriptedEpisode } from '../../train/scripted-episode';
import { TRAIN_DEFAULTS } from '../../train/config';
import { numberInRange, requireString, UsageError, valueOptions, type CliCommand } from '../command';

const fmt = (v: number, digits = 3) => (Number.isFinite(v) ? v.toFixed(digits) : '—');
const indent = (text: string, prefix = '    ') =>
  text
    .replace(/\n$/, '')
    .split('\n')
    .map((l) => prefix + l)
    .join('\n');

/** Reward fields printed in the result line; any other field the reward holds is listed after it. */
const SHOWN = new Set([
  'passRate',
  'testScore',
  'resolved',
  'turns',
  'maxTurns',
  'formatError',
  'efficiencyPenalty',
  'formatPenalty',
  'repeats',
  'repeatPenalty',
  'reward',
]);

/** The trajectory as a person reads it; sandbox text has its control characters escaped. */
export function formatEpisode(t: Trajectory, where: { workspace: string; instruction: string }): string {
  const out: string[] = [`task ${t.taskId} in ${where.workspace}`, indent(escapeControlChars(where.instruction), '  ')];
  for (const turn of t.turns) {
    out.push('', `turn ${turn.index + 1}  $ ${escapeControlChars(turn.action).split('\n').join('\n    ')}`);
    if (turn.action === 'submit') continue;
    if (turn.formatError) out.push(`  not run: ${escapeControlChars(turn.formatError)}`);
    else
      out.push(
        `  ${(turn.durationMs / 1000).toFixed(1)} s${turn.cached ? ' (replayed: the same read-only command ran on this workspace before)' : ''}`,
      );
    if (turn.observation) out.push(indent(escapeControlChars(turn.observation), '  │ '));
    if (turn.edits?.length) out.push(`  changed: ${turn.edits.map((e) => escapeControlChars(e.path)).join(', ')}`);
  }
  const r = t.reward;
  out.push(
    '',
    `${t.failure ? 'failed' : r.resolved ? 'resolved' : 'not resolved'}  reward ${fmt(r.reward)}  test score ${fmt(r.testScore ?? NaN)}  pass rate ${fmt(r.passRate)}  turns ${r.turns} of ${r.maxTurns}  (efficiency penalty ${fmt(r.efficiencyPenalty)}, format penalty ${fmt(r.formatPenalty)}${r.repeats ? `, ${r.repeats} repeated turn${r.repeats === 1 ? '' : 's'} ${fmt(r.repeatPenalty ?? 0)}` : ''})`,
  );
  for (const [k, v] of Object.entries(r))
    if (!SHOWN.has(k)) out.push(`  ${k}: ${typeof v === 'string' ? escapeControlChars(v) : JSON.stringify(v)}`);
  if (t.testReport) {
    const { passed, failed, errors } = t.testReport;
    out.push(`tests: ${passed.length} passed, ${failed.length} failed${errors?.length ? `, ${errors.length} errors` : ''}`);
    for (const id of failed) out.push(`  failed: ${escapeControlChars(id)}`);
    for (const id of errors ?? []) out.push(`  error: ${escapeControlChars(id)}`);
  }
  if (t.failure) out.push(`the episode failed: ${escapeControlChars(t.failure)}`);
  return out.join('\n');
}

export const episodeCommand: CliCommand = {
  name: 'episode',
  summary:
    "play one task with the commands of a file as the agent's actions, in a real sandbox: each observation, the reward, the test report",
  usage: `--tasks FILE --id TASK (--commands FILE | --endpoint URL [--endpoint-model NAME] [--endpoint-key-env VAR] [--temperature T] [--max-action-tokens N]) [--workspace DIR] [--max-turns N (default ${TRAIN_DEFAULTS.maxTurns})] [--json]`,
  options: valueOptions(
    'tasks',
    'id',
    'commands',
    'workspace',
    'max-turns',
    'endpoint',
    'endpoint-model',
    'endpoint-key-env',
    'temperature',
    'max-action-tokens',
  ),
  async run(args, io) {
    const tasksFile = requireString(args, 'tasks');
    const taskId = requireString(args, 'id');
    const endpoint = typeof args.values.endpoint === 'string' ? args.values.endpoint : undefined;
    if (endpoint && args.values.commands !== undefined)
      throw new UsageError('give --commands FILE (your actions) or --endpoint URL (a model behind a server), not both');
    for (const k of ['endpoint-model', 'endpoint-key-env', 'temperature', 'max-action-tokens'])
      if (args.values[k] !== undefined && !endpoint) throw new UsageError(`--${k} goes with --endpoint URL`);
    const maxTurns = numberInRange(args, 'max-turns', TRAIN_DEFAULTS.maxTurns, { min: 1, max: 100, integer: true });
    const commands = endpoint ? [] : await readCommandFile(requireString(args, 'commands'));
    let agent: { model: EndpointActionModel; checkpoint: string } | undefined;
    if (endpoint) {
      const model = new EndpointActionModel(
        new EndpointClient({
          url: endpoint,
          ...(typeof args.values['endpoint-model'] === 'string' ? { model: args.values['endpoint-model'] } : {}),
          ...(typeof args.values['endpoint-key-env'] === 'string' ? { keyEnv: args.values['endpoint-key-env'] } : {}),
        }),
        // The reply limit of a run's and an evaluation's episodes (maxActionTokens), unless given.
        {
          temperature: numberInRange(args, 'temperature', 0, { min: 0, max: 2 }),
          maxTokens: numberInRange(args, 'max-action-tokens', TRAIN_DEFAULTS.maxActionTokens, { min: 8, max: 512, integer: true }),
        },
      );
      agent = { model, checkpoint: `${endpoint} (${await model.modelName()})` };
    }
    const options = {
      tasksFile,
      taskId,
      commands,
      maxTurns,
      ...(agent ? { agent } : {}),
      ...(typeof args.values.workspace === 'string' ? { workspace: args.values.workspace } : {}),
      onProgress: (m: string) => !io.json && io.err(m),
    };
    const plan = planScriptedEpisode(options);
    const t = await runScriptedEpisode(options, plan);
    io.out(io.json ? JSON.stringify(t) : formatEpisode(t, { workspace: plan.workspace, instruction: plan.task.instruction }));
    // A failed episode (sandbox or runner trouble) is no result; a scored one is, resolved or not.
    return t.failure ? 1 : 0;
  },
};
