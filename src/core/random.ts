// Seedable randomness: the same seed gives the same sequence on every platform, so task
// synthesis, benchmarks and sampling are reproducible from `--seed`.
import { createHash } from 'node:crypto';

/**
 * A 32-bit seed derived from parts (a run's seed, an iteration, a task id, …): the first 8 hex
 * digits of the SHA-256 of the parts joined by NUL. Each episode, shuffle and draw of a run gets its
 * own stream, the same on every machine and in every process.
 */
export function seedOf(...parts: (string | number)[]): number {
  return parseInt(createHash('sha256').update(parts.join('\0')).digest('hex').slice(0, 8), 16);
}

/** mulberry32: a tiny 32-bit PRNG returning floats in [0, 1). */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A standard normal sample from two uniforms (Box–Muller). */
export function gaussian(r: () => number): number {
  const u = Math.max(r(), 1e-12);
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * r());
}
