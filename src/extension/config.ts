// The extension's settings (`turnwise.*` in package.json): typed getters for the ones the
// extension itself reads, and every training setting as inspect() sees it, for the launch file
// (model/launchConfig.ts maps settings to the CLI's config fields).
import * as vscode from 'vscode';
import type { SettingValue } from './model/launchConfig';
import { ESTIMATOR_NAMES, type EstimatorName } from '../credit/names';

export const ESTIMATORS = ESTIMATOR_NAMES;
export type Estimator = EstimatorName;

function section() {
  return vscode.workspace.getConfiguration('turnwise');
}

export const config = {
  dockerHost: () => section().get<string>('docker.host') || undefined,
  estimator: (): Estimator => {
    const e = section().get<string>('train.estimator');
    return (ESTIMATORS as readonly string[]).includes(e ?? '') ? (e as Estimator) : 'turnwise';
  },
  /** turnwise.train.model as set: a folder (absolute, or relative to the workspace), '' for the embedded turnwise-tiny. */
  model: () => section().get<string>('train.model') ?? '',
  /** turnwise.train.lora: a LoRA block (PEFT fields), or null to train the whole model. */
  lora: (): Record<string, unknown> | null => {
    const v = section().get<unknown>('train.lora');
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  },
  iterations: () => Math.max(1, Math.floor(section().get<number>('train.iterations') ?? 4)),
  /** A setting by its key under `turnwise.`: its default and the value the user set, if any. */
  inspect: (key: string): SettingValue => {
    const i = section().inspect(key);
    // The narrowest scope that holds a value wins, null included (a workspace's null clears a user's block).
    const set = [i?.workspaceFolderValue, i?.workspaceValue, i?.globalValue].find((v) => v !== undefined);
    return { defaultValue: i?.defaultValue, userValue: set };
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
