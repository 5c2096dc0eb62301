// The agent layer: the action language, what the policy sees, one episode in a sandbox, and the
// scheduler that runs many at once with batched generation. Imports core, sandbox, ast, tasks.
export * from './action';
export * from './cache';
export * from './chat-format';
export * from './chat-template';
export * from './docker';
export * from './episode';
export * from './prompt';
export * from './scheduler';
export * from './scripted';
export * from './types';
