// One episode of a task file's task with scripted actions, in a real sandbox and through the
// loop the policy runs in (agent/episode.ts): what `turnwise episode` runs to show what the agent
// would see, and how a known fix or an attack on the reward scores. Every input is checked
// before Docker is asked for anything.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError } from '../core/errors';
import type { Task, Trajectory } from '../core/schema';
import { runEpisode } from '../agent/episode';
import { ScriptedActionModel } from '../agent/scripted';
import type { ActionModel } from '../agent/types';
import { assertWorkspaceHoldsTasks } from '../tasks/origin';
import { readTaskFile } from '../tasks/taskfile';
import { collectOriginals } from '../tasks/testfiles';
import { connectRunPool, poolSettings, TRAIN_DEFAULTS, type SandboxSettings, type TrainConfig } from './config';

export interface ScriptedEpisodeOptions {
  tasksFile: string;
  taskId: string;
  commands: readonly string[];
  /** Another agent instead of the commands (an OpenAI-compatible endpoint), and how the trajectory names it. */
  agent?: { model: ActionModel; checkpoint: string };
  /** Default: the workspace the task records (its origin). */
  workspace?: string;
  /** Default: a training run's (TRAIN_DEFAULTS.maxTurns), so the efficiency penalty is the one RL sees. */
  maxTurns?: number;
  /** Sandbox and reward settings; default TRAIN_DEFAULTS. */
  config?: Partial<SandboxSettings & Pick<TrainConfig, 'commandTimeoutMs' | 'testTimeoutMs' | 'reward'>>;
  onProgress?: (message: string) => void;
}

export interface ScriptedEpisodePlan {
  task: Task;
  workspace: string;
  maxTurns: number;
}

/** How many ids an unknown-id error lists. */
const IDS_SHOWN = 5;

/**
 * Everything about a scripted episode that can be wrong without Docker: the task file, the id,
 * the workspace (and whether it holds the task's files), the number of commands.
 */
export function planScriptedEpisode(o: ScriptedEpisodeOptions): ScriptedEpisodePlan {
  const tasksFile = path.resolve(o.tasksFile);
  const tasks = readTaskFile(tasksFile);
  const task = tasks.find((t) => t.id === o.taskId);
  if (!task) {
    const shown = tasks.slice(0, IDS_SHOWN).map((t) => t.id);
    throw new TurnwiseError(
      'invalid-input',
      `${tasksFile} has no task ${JSON.stringify(o.taskId)}; its ${tasks.length} task(s) include ${shown.join(', ')}${tasks.length > IDS_SHOWN ? ', …' : ''}`,
      {
        hint: 'give --id one of the ids in the file (each line\'s "id" field)',
      },
    );
  }
  const recorded = task.origin?.workspace;
  if (o.workspace === undefined && !recorded) {
    throw new TurnwiseError(
      'invalid-input',
      `${tasksFile} does not record the workspace its tasks were made from (it was written by an older Turnwise)`,
      { hint: 'give --workspace DIR, the folder the tasks were made from' },
    );
  }
  const workspace = path.resolve(o.workspace ?? recorded!);
  const st = fs.statSync(workspace, { throwIfNoEntry: false });
  if (!st?.isDirectory()) {
    throw new TurnwiseError(
      'not-found',
      `workspace ${workspace}${o.workspace === undefined ? ` (recorded in ${tasksFile})` : ''} ${st ? 'is a file, not a folder' : 'does not exist'}`,
      {
        hint: 'give --workspace DIR, the folder the tasks were made from',
      },
    );
  }
  assertWorkspaceHoldsTasks([task], workspace, tasksFile);
  const maxTurns = o.maxTurns ?? TRAIN_DEFAULTS.maxTurns;
  if (!o.agent && o.commands.length === 0)
    throw new TurnwiseError('invalid-input', 'no commands to run', { hint: 'give --commands FILE with one command per line' });
  if (!o.agent && o.commands.length > maxTurns) {
    throw new TurnwiseError(
      'invalid-input',
      `${o.commands.length} commands do not fit in ${maxTurns} turns: the episode would end before the last ${o.commands.length - maxTurns}`,
      {
        hint: `give --max-turns ${o.commands.length} or more (the reward's efficiency penalty is turns / max turns), or fewer commands`,
      },
    );
  }
  return { task, workspace, maxTurns };
}

/** Runs the episode `plan` describes and returns its trajectory (a sandbox failure is in `failure`). */
export async function runScriptedEpisode(
  o: ScriptedEpisodeOptions,
  plan: ScriptedEpisodePlan = planScriptedEpisode(o),
): Promise<Trajectory> {
  const c = { ...TRAIN_DEFAULTS, ...o.config };
  const runId = `episode-${process.pid}`;
  const pool = await connectRunPool(runId, c);
  try {
    o.onProgress?.(`building the snapshot of ${plan.workspace}…`);
    const ps = poolSettings(c);
    const snapshot = await pool.snapshot(plan.workspace, {
      language: plan.task.language,
      ...(ps.baseImage ? { baseImage: ps.baseImage } : {}),
    });
    const sandbox = await pool.acquire(snapshot, { rollout: `episode-${plan.task.id}` });
    try {
      const model = o.agent?.model ?? new ScriptedActionModel(o.commands);
      o.onProgress?.(
        o.agent
          ? `playing task ${plan.task.id} with ${o.agent.checkpoint}…`
          : `running ${o.commands.length} command(s) on task ${plan.task.id}…`,
      );
      return await runEpisode({
        task: plan.task,
        sandbox,
        act: async (req) => (await model.act([req]))[0],
        ...(model.actionFormat ? { format: model.actionFormat } : {}),
        episodeId: `episode-${plan.task.id}`,
        groupId: `episode-${plan.task.id}`,
        checkpoint: o.agent?.checkpoint ?? 'scripted',
        seed: 0,
        originals: collectOriginals(plan.workspace),
        maxTurns: plan.maxTurns,
        commandTimeoutMs: c.commandTimeoutMs,
        testTimeoutMs: c.testTimeoutMs,
        rewardWeights: c.reward,
      });
    } finally {
      await sandbox.dispose().catch(() => undefined);
    }
  } finally {
    await pool.close();
  }
}
