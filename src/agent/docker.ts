// The Docker implementation of SandboxProvider: containers from one workspace snapshot of a
// SandboxPool (warm containers started ahead of need; each used once, then removed).
import type { PoolSnapshot, SandboxPool } from '../sandbox';
import type { SandboxProvider } from './types';

export function poolProvider(pool: SandboxPool, snapshot: PoolSnapshot): SandboxProvider {
  return { acquire: ({ rollout }) => pool.acquire(snapshot, { rollout }) };
}
