// Reads trajectories (design.md "Trajectory" JSONL) for the advantages command, listing every bad
// line with its number instead of failing on the first.
import { readJsonlStrict } from '../core/fs';
import { SCHEMA, type Trajectory } from '../core/schema';

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
  else if (reward.reward !== null && typeof reward.reward !== 'number') out.push(`reward.reward must be a number or null, got ${JSON.stringify(reward.reward)}`);
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
    if (u.intentSignature !== undefined && !isStrArray(u.intentSignature)) out.push(`turns[${k}].intentSignature must be a list of strings`);
    if (u.editSignature !== undefined && !isStrArray(u.editSignature)) out.push(`turns[${k}].editSignature must be a list of strings`);
  });
  return out;
}

export function readTrajectories(file: string): Trajectory[] {
  return readJsonlStrict<Trajectory>(file, (row) => trajectoryProblems(row));
}
