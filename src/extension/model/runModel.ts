// Which model a run trained, and whether it trained a LoRA adapter on it, from the run's own
// config.json (`model`: the folder it started from, empty for the embedded turnwise-tiny;
// `lora`: the adapter's PEFT fields, absent when the whole model was trained) and its
// checkpoints (a LoRA run's checkpoints/N are adapter folders holding adapter_config.json).
// Plain Node (no vscode): unit-tested in test/unit/extension/.
import * as fs from 'node:fs';
import * as path from 'node:path';

export const EMBEDDED_MODEL_NAME = 'turnwise-tiny';

/** A model setting's folder: absolute, or relative to the workspace; '' stays '' (embedded). */
export function resolveModelSetting(workspace: string, value: unknown): string {
  return typeof value === 'string' && value.trim() !== '' ? path.resolve(workspace, value.trim()) : '';
}

export interface RunAdapter {
  r: number;
  loraAlpha: number;
  /** The adapted projections, as the run's config lists them. */
  targets: string[];
  rslora: boolean;
  /** The newest checkpoint that is an adapter folder, relative to the run directory. */
  latest?: string;
}

export interface RunModel {
  /** The starting model's folder; '' for the embedded turnwise-tiny. */
  folder: string;
  /** Its name: the folder's name, or turnwise-tiny. */
  name: string;
  embedded: boolean;
  adapter?: RunAdapter;
  /** Short, for a list row: `turnwise-tiny`, `Qwen2.5-0.5B + LoRA r 16`. */
  label: string;
  /** One line each for the model and the adapter, for a tooltip or a header. */
  details: string[];
}

const ALL_LINEAR = 7;

/** The newest checkpoints/N of `runDir` holding adapter_config.json, as `checkpoints/N`. */
export function latestAdapterCheckpoint(runDir: string): string | undefined {
  let names: string[];
  try {
    names = fs.readdirSync(path.join(runDir, 'checkpoints')).filter((n) => /^\d+$/.test(n));
  } catch {
    return undefined;
  }
  for (const n of names.sort((a, b) => Number(b) - Number(a))) {
    if (fs.existsSync(path.join(runDir, 'checkpoints', n, 'adapter_config.json'))) return `checkpoints/${n}`;
  }
  return undefined;
}

/**
 * The model of a run from its config.json (parsed) and its folder; undefined when the config
 * records no `model` (nothing can be said: the view shows no model rather than a guess).
 */
export function runModelOf(runDir: string, config: Record<string, unknown> | undefined): RunModel | undefined {
  if (!config || typeof config.model !== 'string') return undefined;
  const folder = config.model;
  const embedded = folder === '';
  const name = embedded ? EMBEDDED_MODEL_NAME : path.basename(folder.replace(/[\\/]+$/, '')) || folder;
  const l = config.lora;
  let adapter: RunAdapter | undefined;
  if (l && typeof l === 'object' && !Array.isArray(l)) {
    const o = l as Record<string, unknown>;
    const targets =
      o.target_modules === 'all-linear'
        ? ['all-linear']
        : Array.isArray(o.target_modules)
          ? o.target_modules.filter((t): t is string => typeof t === 'string')
          : [];
    const latest = latestAdapterCheckpoint(runDir);
    adapter = {
      r: typeof o.r === 'number' ? o.r : 16,
      loraAlpha: typeof o.lora_alpha === 'number' ? o.lora_alpha : 32,
      targets,
      rslora: o.use_rslora === true,
      ...(latest ? { latest } : {}),
    };
  }
  const modelLine = embedded ? `model: ${EMBEDDED_MODEL_NAME} (embedded)` : `model: ${name} (${folder})`;
  const details = [modelLine];
  if (adapter) {
    const mods =
      adapter.targets.length === 0
        ? ''
        : adapter.targets.length === ALL_LINEAR || adapter.targets[0] === 'all-linear'
          ? ' on all linear projections'
          : ` on ${adapter.targets.join(', ')}`;
    details.push(
      `adapter: LoRA r ${adapter.r}, lora_alpha ${adapter.loraAlpha}${adapter.rslora ? ', rsLoRA' : ''}${mods}; ` +
        (adapter.latest ? `latest ${adapter.latest} (PEFT adapter over the model)` : 'no adapter checkpoint yet'),
    );
  } else details.push('adapter: none (the whole model was trained)');
  return { folder, name, embedded, ...(adapter ? { adapter } : {}), label: adapter ? `${name} + LoRA r ${adapter.r}` : name, details };
}

/** The action formats a checkpoint records (train/action-format.ts). */
export type TrajectoryActionFormat = 'compact' | 'chat';

function formatIn(file: string, key: string): TrajectoryActionFormat | undefined {
  try {
    const v = (JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>)[key];
    return v === 'compact' || v === 'chat' ? v : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The action format the checkpoint of a trajectory wrote in: its action_format.json (a run writes
 * one beside every checkpoint), else the run's config.json (`actionFormat`), else `chat` when the
 * turns carry replies; undefined when nothing says (a run from before formats were recorded).
 */
export function trajectoryActionFormat(
  runDir: string,
  traj: { checkpoint: string; turns: readonly { reply?: string }[] },
): TrajectoryActionFormat | undefined {
  const ck = traj.checkpoint ? path.resolve(runDir, traj.checkpoint) : undefined;
  return (
    (ck ? formatIn(path.join(ck, 'action_format.json'), 'format') : undefined) ??
    formatIn(path.join(runDir, 'config.json'), 'actionFormat') ??
    (traj.turns.some((t) => t.reply !== undefined) ? 'chat' : undefined)
  );
}
