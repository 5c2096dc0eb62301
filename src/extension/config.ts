// The extension's settings (`turnwise.*` in package.json): typed getters for the ones the
// extension itself reads, and every training setting as inspect() sees it, for the launch file
// (model/launchConfig.ts maps settings to the CLI's config fields).
import * as vscode from 'vscode';
import type { SettingValue } from './model/launchConfig';

export const ESTIMATORS = ['grpo', 'rloo', 'gigpo', 'a3', 'turnwise'] as const;
export type Estimator = (typeof ESTIMATORS)[number];

function section() {
  return vscode.workspace.getConfiguration('turnwise');
}

export const config = {
  dockerHost: () => section().get<string>('docker.host') || undefined,
  estimator: (): Estimator => {
    const e = section().get<string>('train.estimator');
    return (ESTIMATORS as readonly string[]).includes(e ?? '') ? (e as Estimator) : 'turnwise';
  },
  iterations: () => Math.max(1, Math.floor(section().get<number>('train.iterations') ?? 4)),
  /** A setting by its key under `turnwise.`: its default and the value the user set, if any. */
  inspect: (key: string): SettingValue => {
    const i = section().inspect(key);
    return { defaultValue: i?.defaultValue, userValue: i?.workspaceFolderValue ?? i?.workspaceValue ?? i?.globalValue };
  },
};

/**
 * Environment for a CLI child: the Docker engine setting as DOCKER_HOST (which the CLI, like
 * the docker client, honours). A training run also gets it in its launch file (dockerHost).
 */
export function cliEnv(): NodeJS.ProcessEnv {
  const host = config.dockerHost();
  return host ? { DOCKER_HOST: host } : {};
}
