// Which workspace tasks a checkpoint saw as demonstrations (the `demonstrationTaskIds` of the
// warmstart.json the warm start writes beside its model): a training run never holds those out.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError } from '../core/errors';
import { readUserTextFile } from '../core/fs';

/**
 * Task ids a checkpoint was warm-started on (its warmstart.json); [] when the checkpoint has no
 * such file or it records no ids. A file that is there but cannot be read is an error: taken as
 * "none", the tasks the policy was trained on would land in the held-out split unnoticed.
 */
export function demonstrationTaskIds(checkpointDir: string): string[] {
  const file = path.resolve(checkpointDir, 'warmstart.json');
  if (!fs.lstatSync(file, { throwIfNoEntry: false })) return [];
  const hint = `restore ${file} from where the checkpoint came from, or delete it if the checkpoint was not warm-started on this workspace's tasks`;
  const text = readUserTextFile(file, 'warm-start record', { hint });
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new TurnwiseError('invalid-file', `the warm-start record ${file} is not valid JSON (${(e as Error).message})`, { hint });
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v))
    throw new TurnwiseError('invalid-file', `the warm-start record ${file} is not a JSON object`, { hint });
  const ids = (v as { demonstrationTaskIds?: unknown }).demonstrationTaskIds;
  if (ids === undefined) return [];
  if (!Array.isArray(ids) || ids.some((x) => typeof x !== 'string'))
    throw new TurnwiseError(
      'invalid-file',
      `the warm-start record ${file}: "demonstrationTaskIds" must be an array of task ids (strings)`,
      { hint },
    );
  return ids as string[];
}
