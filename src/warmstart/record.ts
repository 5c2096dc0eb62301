// A warm start's history beside its model: warmstart.json (each phase's recipe and figures, and
// the workspace tasks used as demonstrations) and the folder a phase starts from.
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { WarmstartOptions } from './config';

/**
 * What warmstart.json records: this phase's numbers appended to the earlier phases' (a warm start
 * continued with --from keeps its history), and every workspace task used as a demonstration:
 * a training run never holds one of those out (splitTasks' `neverHeldOut`).
 */
export function warmstartRecord(
  o: Pick<WarmstartOptions, 'from' | 'model' | 'adapter' | 'workspaceCases' | 'episodes'>,
  phase: Record<string, unknown>,
): Record<string, unknown> {
  const prev = priorRecord(o);
  const ids = new Set([
    ...(prev.demonstrationTaskIds ?? []),
    ...(o.workspaceCases ?? []).map((c) => c.taskId).filter((x): x is string => !!x),
    ...(o.episodes ?? []).map((e) => e.task.id),
  ]);
  return { phases: [...(prev.phases ?? []), phase], demonstrationTaskIds: [...ids].sort() };
}

/**
 * The folder a warm start starts from: the adapter it continues, else the checkpoint (--from),
 * else the model (--model); undefined for a fresh turnwise-tiny.
 */
export function startDir(o: Pick<WarmstartOptions, 'from' | 'model' | 'adapter'>): string | undefined {
  return o.adapter ?? o.from ?? o.model;
}

/**
 * The warmstart.json of the folder a phase starts from ({} for a fresh start or none recorded):
 * its phases continue, and the tasks it was warm-started on stay demonstrations.
 */
export function priorRecord(o: Pick<WarmstartOptions, 'from' | 'model' | 'adapter'>): {
  phases?: unknown[];
  demonstrationTaskIds?: string[];
} {
  const dir = startDir(o);
  if (!dir) return {};
  try {
    const v = JSON.parse(fs.readFileSync(path.join(path.resolve(dir), 'warmstart.json'), 'utf8'));
    return v && typeof v === 'object' && !Array.isArray(v) ? v : {};
  } catch {
    return {};
  }
}

/** The warmstart-log.jsonl of the checkpoint a phase continues ('' when none), newline-terminated. */
export function priorLog(o: Pick<WarmstartOptions, 'from' | 'model' | 'adapter'>): string {
  const dir = startDir(o);
  if (!dir) return '';
  try {
    const text = fs.readFileSync(path.join(path.resolve(dir), 'warmstart-log.jsonl'), 'utf8');
    return text && !text.endsWith('\n') ? `${text}\n` : text;
  } catch {
    return '';
  }
}
