// The extension's settings (`turnwise.*` in package.json), one typed getter each, and how a
// run's settings become the CLI's flags and environment.
import * as vscode from 'vscode';

export const ESTIMATORS = ['grpo', 'rloo', 'gigpo', 'a3', 'turnwise'] as const;
export type Estimator = (typeof ESTIMATORS)[number];

function section() {
  return vscode.workspace.getConfiguration('turnwise');
}

export const config = {
  dockerHost: () => section().get<string>('docker.host') || undefined,
  dockerHosts: () => section().get<string[]>('docker.hosts') ?? [],
  estimator: (): Estimator => {
    const e = section().get<string>('train.estimator');
    return (ESTIMATORS as readonly string[]).includes(e ?? '') ? (e as Estimator) : 'turnwise';
  },
  iterations: () => Math.max(1, Math.floor(section().get<number>('train.iterations') ?? 10)),
  groupSize: () => section().get<number>('train.groupSize') ?? 8,
  maxTurns: () => section().get<number>('train.maxTurns') ?? 8,
  learningRate: () => section().get<number>('train.learningRate') ?? 1e-5,
  loss: () => section().get<string>('train.loss') ?? 'ppo-token',
  executionProvider: () => section().get<string>('executionProvider') ?? 'auto',
  testCommand: () => section().get<string>('tasks.testCommand') || undefined,
};

/**
 * Environment for a CLI child: the Docker engine setting as DOCKER_HOST (which the CLI, like
 * the docker client, honours), the first of `docker.hosts` when `docker.host` is empty.
 */
export function cliEnv(): NodeJS.ProcessEnv {
  const host = config.dockerHost() ?? config.dockerHosts()[0];
  return host ? { DOCKER_HOST: host } : {};
}
