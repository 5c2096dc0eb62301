// Trajectory files (JSONL, docs/design.md "On-disk formats"): validation of every line, with its number,
// so a user sees all bad lines at once and nothing is computed from a file that is not valid.
import { readUserTextFile, parseJsonl, summarizeLineErrors, type LineError } from './fs';
import { TurnwiseError } from './errors';
import { SCHEMA, type Trajectory } from './schema';

/** An episode that gives a score: it did not fail in the sandbox and its reward is a number. */
export const isScored = (t: Pick<Trajectory, 'failure' | 'reward'>): boolean =>
  !t.failure && typeof t.reward?.reward === 'number' && Number.isFinite(t.reward.reward);

const isStr = (v: unknown): v is string => typeof v === 'string';
const isStrArray = (v: unknown) => Array.isArray(v) && v.every(isStr);

/** Reasons a parsed line is not a usable trajectory ([] when it is). A null reward means NaN (unscored). */
export function trajectoryProblems(value: unknown): string[] {
  const t = value as Record<string, unknown>;
  const out: string[] = [];
  if (t.schema !== SCHEMA.trajectory) out.push(`schema must be "${SCHEMA.trajectory}", got ${JSON.stringify(t.schema)}`);
  for (const key of ['taskId', 'trajId'] as const) if (!isStr(t[key]) || t[key] === '') out.push(`${key} must be a non-empty string`);
  const reward = t.reward as Record<string, unknown> | undefined;
  if (!reward || typeof reward !== 'object') out.push('reward must be an object with a numeric "reward" (null when unscored)');
  else if (reward.reward !== null && typeof reward.reward !== 'number')
    out.push(`reward.reward must be a number or null, got ${JSON.stringify(reward.reward)}`);
  if (!Array.isArray(t.turns)) {
    out.push('turns must be an array');
    return out;
  }
  const seen = new Set<number>();
  (t.turns as unknown[]).forEach((turn, k) => {
    const u = turn as Record<string, unknown> | null;
    if (!u || typeof u !== 'object') {
      out.push(`turns[${k}] must be an object`);
      return;
    }
    if (!Number.isInteger(u.index) || (u.index as number) < 0) out.push(`turns[${k}].index must be a non-negative integer`);
    else if (seen.has(u.index as number)) out.push(`turns[${k}].index ${u.index} appears twice`);
    else seen.add(u.index as number);
    if (!isStr(u.action)) out.push(`turns[${k}].action must be a string`);
    if (u.observation !== undefined && !isStr(u.observation)) out.push(`turns[${k}].observation must be a string`);
    if (u.intentSignature !== undefined && !isStrArray(u.intentSignature))
      out.push(`turns[${k}].intentSignature must be a list of strings`);
    if (u.editSignature !== undefined && !isStrArray(u.editSignature)) out.push(`turns[${k}].editSignature must be a list of strings`);
  });
  return out;
}

/**
 * An evaluation results file (`turnwise eval --out`) starts with a header line (schema
 * turnwise/eval-results@1) before its episodes: blanked, so line numbers stay those of the file.
 */
function withoutResultsHeader(text: string): string {
  const lines = text.split('\n');
  const i = lines.findIndex((l) => l.trim() !== '');
  if (i < 0 || !lines[i].includes(SCHEMA.evalResults)) return text;
  try {
    if ((JSON.parse(lines[i]) as { schema?: unknown }).schema !== SCHEMA.evalResults) return text;
  } catch {
    return text;
  }
  lines[i] = '';
  return lines.join('\n');
}

/**
 * Parses trajectory JSONL text: every bad line with its number, including a (taskId, trajId)
 * seen before (two episodes under one id would be merged into one and lose a reward).
 */
export function parseTrajectories(text: string): { trajectories: Trajectory[]; errors: LineError[] } {
  const firstLine = new Map<string, number>();
  const { rows, errors } = parseJsonl<Trajectory>(withoutResultsHeader(text), (row, line) => {
    const reasons = trajectoryProblems(row);
    const t = row as { taskId?: unknown; trajId?: unknown };
    if (typeof t.trajId === 'string' && t.trajId !== '' && typeof t.taskId === 'string') {
      const key = `${t.taskId}\u0000${t.trajId}`;
      const prev = firstLine.get(key);
      if (prev !== undefined) {
        reasons.push(
          `duplicate trajId ${JSON.stringify(t.trajId)} of task ${JSON.stringify(t.taskId)}: also on line ${prev} (lines ${prev} and ${line}); each episode needs its own trajId`,
        );
      } else firstLine.set(key, line);
    }
    return reasons;
  });
  return { trajectories: rows, errors };
}

/** Reads and validates a trajectories file; throws one error listing every bad line (summarized). */
export function readTrajectories(file: string): Trajectory[] {
  const text = readUserTextFile(file, 'trajectories file', { hint: 'give a trajectories .jsonl file (one trajectory per line)' });
  const { trajectories, errors } = parseTrajectories(text);
  if (errors.length > 0) {
    const lines = new Set(errors.map((e) => e.line)).size;
    throw new TurnwiseError('invalid-file', `${file} has ${lines} invalid line(s):\n${summarizeLineErrors(file, errors).join('\n')}`, {
      hint: 'fix the lines listed above; nothing was computed',
    });
  }
  if (trajectories.length === 0)
    throw new TurnwiseError('invalid-file', `${file} holds no trajectories`, { hint: 'give a file with one trajectory per line' });
  return trajectories;
}

/**
 * The error a command reports when every one of its episodes failed (sandbox or runner trouble,
 * not a wrong fix): the distinct reasons, most frequent first. Undefined when any episode was
 * scored or there were none. A summary of nothing but failures is no result, so the command
 * exits non-zero instead of printing rates of null.
 */
export function allEpisodesFailed(trajs: readonly Trajectory[], hint: string): TurnwiseError | undefined {
  if (trajs.length === 0 || trajs.some((t) => !t.failure)) return undefined;
  const count = new Map<string, number>();
  for (const t of trajs) count.set(t.failure!, (count.get(t.failure!) ?? 0) + 1);
  const reasons = [...count].sort((a, b) => b[1] - a[1]);
  const shown = reasons.slice(0, 3).map(([why, n]) => `  ${n}× ${why.split('\n')[0].slice(0, 300)}`);
  if (reasons.length > 3) shown.push(`  … and ${reasons.length - 3} other reason(s)`);
  return new TurnwiseError(
    'sandbox-failed',
    `every one of the ${trajs.length} episode(s) failed, so nothing was scored:\n${shown.join('\n')}`,
    { hint },
  );
}
