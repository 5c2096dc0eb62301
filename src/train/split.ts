// The train / held-out split of a run's tasks: a seeded hash order, so the same tasks and seed
// always give the same split whatever order the tasks came in.
import { createHash } from 'node:crypto';
import type { Task } from '../core/schema';

/** Stable split: held-out = the tasks whose seeded hash is smallest (at least one when there are two or more). */
export function splitTasks(
  tasks: readonly Task[],
  fraction: number,
  seed: number,
  neverHeldOut: ReadonlySet<string> = new Set(),
): { train: string[]; heldout: string[] } {
  const h = (id: string) => createHash('sha256').update(`${seed}\0${id}`).digest('hex');
  // Tasks the starting model saw as demonstrations can only be trained on, never held out.
  const order = [...tasks]
    .map((t) => t.id)
    .filter((id) => !neverHeldOut.has(id))
    .sort((a, b) => (h(a) < h(b) ? -1 : 1));
  let k = Math.round(tasks.length * fraction);
  if (fraction > 0 && k === 0 && tasks.length >= 2) k = 1;
  if (k >= tasks.length) k = tasks.length - 1;
  const held = new Set(order.slice(0, k));
  return { train: tasks.filter((t) => !held.has(t.id)).map((t) => t.id), heldout: tasks.filter((t) => held.has(t.id)).map((t) => t.id) };
}
