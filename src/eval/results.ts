// Evaluation results files (`turnwise eval --out FILE`): one file per evaluated model, JSONL whose
// first line is a header that describes the evaluation by itself (schema turnwise/eval-results@1:
// which model or endpoint, the tasks and their digests, the seed, the samples and the turn limit,
// one row per episode with its numbers, the summary and PASS@(k,T)), followed by the episodes, one
// trajectory a line. Trajectory readers skip the header, so the file is also an ordinary episodes
// file. An endpoint is named by its base URL (no user, password or query) and its model; an API
// key never appears, only the name of the variable that held it.
import { createHash } from 'node:crypto';
import * as path from 'node:path';
import { TurnwiseError } from '../core/errors';
import { parseJsonl, readUserTextFile, summarizeLineErrors, toJsonl, writeFileAtomic } from '../core/fs';
import { SCHEMA, type Task, type Trajectory } from '../core/schema';
import { mean } from '../core/stats';
import { parseTrajectories } from '../core/trajectory';
import { apiBase } from '../agent/endpoint';
import { episodeKind, type EpisodeKind } from './compare';
import { actionsOf, passAtKT, type PassAtKT } from './pass-at-k';

/** What was evaluated: a local checkpoint (or model folder) or a model behind an endpoint. */
export type EvalModel =
  { kind: 'checkpoint'; path: string; label: string } | { kind: 'endpoint'; url: string; model: string; keyEnv?: string; label: string };

/** One episode's numbers, as the header lists them. */
export interface EvalEpisodeRow {
  trajId: string;
  taskId: string;
  kind: EpisodeKind;
  seed: number | null;
  resolved: boolean;
  /** null: unscored (failed, or the report was unusable). */
  passRate: number | null;
  turns: number;
  /** Actions taken (turns less a final submit): what PASS@(k,T)'s T counts. */
  actions: number;
  formatErrors: number;
  /** Tokens the model wrote over the episode; null where the model did not say (an endpoint without log-probs). */
  tokens: number | null;
  /** Wall time of the episode in seconds; null when not recorded. */
  wallS: number | null;
  failure?: string;
  tampered?: string;
}

/** Means over one kind of episode (failed ones are counted, not averaged). */
export interface EvalKindSummary {
  episodes: number;
  failed: number;
  /** Share of scored episodes resolved. */
  resolved: number | null;
  pass_rate: number | null;
  'turns/mean': number | null;
  /** Share of turns that were format errors. */
  format_error_rate: number | null;
  'format_errors/mean': number | null;
  'tokens/mean': number | null;
  'wall_s/mean': number | null;
}

export interface EvalResultsHeader {
  schema: typeof SCHEMA.evalResults;
  createdAt: string;
  model: EvalModel;
  tasks: {
    /** The task file (or run) the tasks came from. */
    source: string;
    ids: string[];
    /** A digest of each task's content by id: two files with the same ids and other tasks do not compare. */
    digests: Record<string, string>;
  };
  seed: number;
  /** Sampled episodes per task besides the greedy one. */
  samples: number;
  maxTurns: number;
  /** Tokens a reply could take, the same limit for a local model and an endpoint (absent in older files). */
  maxActionTokens?: number;
  /** Sampling of the sampled episodes (greedy ones decode at temperature 0). */
  sampling: { temperature: number; topP: number };
  /** False for an evaluation stopped before every episode finished. */
  complete: boolean;
  summary: { greedy: EvalKindSummary; sampled: (EvalKindSummary & { pass_at_k_t: PassAtKT }) | null };
  episodes: EvalEpisodeRow[];
}

/** An endpoint's identity: base URL without credentials or query, the model the server served. */
export function endpointModel(url: string, model: string, keyEnv?: string): EvalModel {
  const base = apiBase(url);
  return { kind: 'endpoint', url: base, model, ...(keyEnv ? { keyEnv } : {}), label: `${model} @ ${new URL(base).host}` };
}

/** A local model's identity; a run's checkpoint is labelled by its run and iteration. */
export function checkpointModel(dir: string): EvalModel {
  const abs = path.resolve(dir);
  const parts = abs.split(path.sep);
  const i = parts.lastIndexOf('checkpoints');
  const label =
    i > 0 && i === parts.length - 2 && /^\d+$/.test(parts[i + 1]) ? `${parts[i - 1]} · checkpoint ${parts[i + 1]}` : path.basename(abs);
  return { kind: 'checkpoint', path: abs, label };
}

/** Keys in sorted order, so a digest does not depend on how a file ordered a task's fields. */
function stableJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stableJson).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stableJson((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

export function taskDigest(t: Task): string {
  return createHash('sha256').update(stableJson(t)).digest('hex').slice(0, 16);
}

/**
 * Tokens the model wrote in a turn: its token ids, else its log-probs, else the server's count of
 * the reply; undefined when none was recorded.
 */
function turnTokens(u: Trajectory['turns'][number]): number | undefined {
  if (u.tokenIds?.length) return u.tokenIds.length;
  if (u.logprobs?.length) return u.logprobs.length;
  if (u.usage) return u.usage.completionTokens;
  return undefined;
}

export function episodeRow(t: Trajectory): EvalEpisodeRow {
  const counts = t.turns.map(turnTokens);
  const known = counts.length > 0 && counts.every((c) => c !== undefined);
  return {
    trajId: t.trajId,
    taskId: t.taskId,
    kind: episodeKind(t),
    seed: typeof t.seed === 'number' ? t.seed : null,
    resolved: !t.failure && t.reward.resolved,
    passRate: !t.failure && Number.isFinite(t.reward.passRate) ? t.reward.passRate : null,
    turns: t.turns.length,
    actions: actionsOf(t),
    formatErrors: t.turns.filter((u) => u.formatError).length,
    tokens: known ? counts.reduce((a: number, c) => a + c!, 0) : null,
    wallS: typeof t.durationMs === 'number' ? t.durationMs / 1000 : null,
    ...(t.failure ? { failure: t.failure } : {}),
    ...(t.reward.tampered !== undefined ? { tampered: t.reward.tampered } : {}),
  };
}

const finite = (x: number): number | null => (Number.isFinite(x) ? x : null);

export function summarizeRows(rows: readonly EvalEpisodeRow[]): EvalKindSummary {
  const ok = rows.filter((r) => !r.failure);
  const scored = ok.filter((r) => r.passRate !== null);
  const turns = ok.reduce((a, r) => a + r.turns, 0);
  const known = (xs: (number | null)[]) => xs.filter((x): x is number => x !== null);
  return {
    episodes: rows.length,
    failed: rows.length - ok.length,
    resolved: scored.length ? scored.filter((r) => r.resolved).length / scored.length : null,
    pass_rate: finite(mean(scored.map((r) => r.passRate!))),
    'turns/mean': finite(mean(ok.map((r) => r.turns))),
    format_error_rate: turns ? ok.reduce((a, r) => a + r.formatErrors, 0) / turns : ok.length ? 0 : null,
    'format_errors/mean': finite(mean(ok.map((r) => r.formatErrors))),
    'tokens/mean': finite(mean(known(ok.map((r) => r.tokens)))),
    'wall_s/mean': finite(mean(known(ok.map((r) => r.wallS)))),
  };
}

/** The turn limit the episodes ran under (the largest any of them records). */
export const maxTurnsOf = (ts: readonly Trajectory[]): number =>
  Math.max(0, ...ts.map((t) => t.reward.maxTurns).filter((x) => Number.isFinite(x)));

export function evalResultsHeader(o: {
  model: EvalModel;
  tasks: readonly Task[];
  tasksSource: string;
  seed: number;
  samples: number;
  maxTurns: number;
  maxActionTokens?: number;
  sampling: { temperature: number; topP: number };
  trajectories: readonly Trajectory[];
  complete: boolean;
  now?: Date;
}): EvalResultsHeader {
  const rows = o.trajectories.map(episodeRow);
  const sampledTrajs = o.trajectories.filter((t) => episodeKind(t) === 'sampled');
  const sampledRows = rows.filter((r) => r.kind === 'sampled');
  return {
    schema: SCHEMA.evalResults,
    createdAt: (o.now ?? new Date()).toISOString(),
    model: o.model,
    tasks: { source: o.tasksSource, ids: o.tasks.map((t) => t.id), digests: Object.fromEntries(o.tasks.map((t) => [t.id, taskDigest(t)])) },
    seed: o.seed,
    samples: o.samples,
    maxTurns: o.maxTurns,
    ...(o.maxActionTokens !== undefined ? { maxActionTokens: o.maxActionTokens } : {}),
    sampling: o.sampling,
    complete: o.complete,
    summary: {
      greedy: summarizeRows(rows.filter((r) => r.kind === 'greedy')),
      sampled: sampledRows.length ? { ...summarizeRows(sampledRows), pass_at_k_t: passAtKT(sampledTrajs, o.maxTurns) } : null,
    },
    episodes: rows,
  };
}

/** Writes a results file: the header line, then one episode a line (atomically). */
export function writeEvalResults(file: string, header: EvalResultsHeader, trajectories: readonly Trajectory[]): void {
  writeFileAtomic(file, toJsonl([header, ...trajectories]));
}

/** A results file read back: its header (absent in an episodes file written before headers) and its episodes. */
export interface EvalResultsFile {
  file: string;
  header?: EvalResultsHeader;
  trajectories: Trajectory[];
  /** The header's model, or for a file without one, what its episodes name. */
  model: EvalModel;
}

function headerProblems(h: Record<string, unknown>): string[] {
  const out: string[] = [];
  const m = h.model as Record<string, unknown> | undefined;
  if (!m || (m.kind !== 'checkpoint' && m.kind !== 'endpoint') || typeof m.label !== 'string')
    out.push('model must name a checkpoint or an endpoint, with a label');
  const t = h.tasks as Record<string, unknown> | undefined;
  if (!t || !Array.isArray(t.ids) || !t.ids.every((x) => typeof x === 'string') || !t.digests || typeof t.digests !== 'object')
    out.push('tasks must hold ids[] and digests');
  for (const k of ['seed', 'samples', 'maxTurns'] as const) if (typeof h[k] !== 'number') out.push(`${k} must be a number`);
  return out;
}

/** Reads a results file (or a plain episodes file); throws naming the file and the bad lines. */
export function readEvalResults(file: string): EvalResultsFile {
  const text = readUserTextFile(file, 'evaluation results file', { hint: 'give a file written by `turnwise eval --out FILE`' });
  const first = text.split('\n').find((l) => l.trim() !== '') ?? '';
  let header: EvalResultsHeader | undefined;
  const { rows } = parseJsonl<Record<string, unknown>>(first);
  if (rows[0]?.schema === SCHEMA.evalResults) {
    const problems = headerProblems(rows[0]);
    if (problems.length)
      throw new TurnwiseError('invalid-file', `${file}: its header line is not a usable evaluation header: ${problems.join('; ')}`, {
        hint: 'evaluate again with `turnwise eval --out FILE`',
      });
    header = rows[0] as unknown as EvalResultsHeader;
  } else if (typeof rows[0]?.schema === 'string' && rows[0].schema !== SCHEMA.trajectory) {
    throw new TurnwiseError('invalid-file', `${file} is a ${JSON.stringify(rows[0].schema)} file, not evaluation results`, {
      hint: 'give a file written by `turnwise eval --out FILE`',
    });
  }
  const { trajectories, errors } = parseTrajectories(text);
  if (errors.length) {
    throw new TurnwiseError(
      'invalid-file',
      `${file} has ${new Set(errors.map((e) => e.line)).size} invalid line(s):\n${summarizeLineErrors(file, errors).join('\n')}`,
      { hint: 'fix the lines listed above; nothing was computed' },
    );
  }
  if (trajectories.length === 0)
    throw new TurnwiseError('invalid-file', `${file} holds no episodes`, { hint: 'give a file written by `turnwise eval --out FILE`' });
  const named = [...new Set(trajectories.map((t) => t.checkpoint))].join(', ');
  return {
    file,
    ...(header ? { header } : {}),
    trajectories,
    model: header?.model ?? { kind: 'checkpoint', path: named, label: named ? path.basename(named) : path.basename(file) },
  };
}
