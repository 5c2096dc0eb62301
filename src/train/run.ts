// A training run: tasks from the workspace (split into train and held-out), the held-out tasks
// evaluated at the start, then per iteration: sample tasks → G rollouts each (batched
// generation in the policy worker, sandboxes in parallel) → rewards → per-turn advantages →
// policy update → checkpoint → the iteration's marker (its metrics row). Everything goes to the
// run directory (core/run.ts); an iteration counts once its marker is written, so `resume` redoes
// at most the one an interruption cut, and one process at a time works in a run (its lock). What it leaves out (said plainly): no value model, no reward model; the
// reference policy for KL is the starting checkpoint; one policy on one device.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { TurnwiseError, errorToJson } from '../core/errors';
import { makeEvent, type MetricsRow, type RunEvent, type RunEventBody } from '../core/events';
import { checkpointWeightsFile, RunDir, newRunId, runDisplayState } from '../core/run';
import { writeFileAtomic, writeJsonAtomic } from '../core/fs';
import { seedOf } from '../core/random';
import { SCHEMA, type Task, type Trajectory } from '../core/schema';
import { mean, std } from '../core/stats';
import { Semaphore } from '../core/workers';
import { cachedTurnFraction, ObservationCache } from '../agent/cache';
import { poolProvider } from '../agent/docker';
import { taskText as taskTextOf } from '../agent/prompt';
import { runRollouts, type EpisodeJob, type RolloutResult } from '../agent/scheduler';
import { trajectoryAdvantages } from '../credit/advantages';
import { loadCheckpoint } from '../policy/checkpoint';
import { loadTokenizer } from '../policy/tokenizer';
import { PolicyWorker } from '../policy/worker';
import type { PolicyService } from '../policy/trainable';
import type { StepMetrics, TrainBatch } from '../policy/trainer';
import { SandboxPool, type PoolSnapshot } from '../sandbox';
import { DEFAULT_BASELINE_TIMEOUT_MS, failingTestTasks, synthesizeMutationTasks } from '../tasks/synth';
import { readTaskFile } from '../tasks/taskfile';
import { assertWorkspaceHoldsTasks } from '../tasks/origin';
import { collectOriginals, type ScoringOriginals } from '../tasks/testfiles';
import { detectRunner, type TestRunner } from '../tasks/runners';
import { chatCodec, renderPrompt, type ChatCodec } from './chat';
import { commandSlotCount, connectRunPool, poolSettings, resolveTrainConfig, runConfigRecord, type LossAggregation, type TrainConfig } from './config';
import { embeddedModelDir } from './embedded';
import { splitTasks } from './split';
import { assertWorkspaceNames, planResume, type ResumePlan } from './resume';

export { splitTasks };
import { demonstrationTaskIds } from './warmstart-record';
import { PolicyActionModel } from './model';
import { ChatFormat, chatSystemMessage, chatTaskMessage } from '../agent/chat-format';
import { ChatTemplate, templateTokens } from '../agent/chat-template';
import { EndpointActionModel, EndpointClient, type EndpointOptions } from '../agent/endpoint';
import type { ActionModel } from '../agent/types';
import { ChatActionModel, chatTurnTokenRows } from './chat-model';
import { modelActionFormat, recordActionFormat, type ModelActionFormat } from './action-format';
import { ReplaySource, type ReplayExample } from './replay';
import { assertRunFits, runMemoryPlan } from './memory-plan';
import { sampledPassAtKT, type PassAtKT } from './pass-at-k';

export interface TrainRunOptions {
  config: TrainConfig;
  /** Folder holding run directories. */
  runsRoot: string;
  /** Run id or directory to resume. */
  resume?: string;
  /** With `resume`: train to this many iterations instead of the run's own count (more, never fewer than done). */
  resumeIterations?: number;
  /** Name part of a new run id (default: the workspace folder's name). */
  name?: string;
  signal?: AbortSignal;
  onEvent?: (e: RunEvent) => void;
}

export interface TrainRunResult {
  runDir: string;
  runId: string;
  metrics: MetricsRow[];
  state: 'finished' | 'stopped';
  /** Iterations this call completed (0 for a resume that found nothing to do). */
  newIterations: number;
}


/** Everything one training row needs from one turn. */
export interface TurnRowData {
  ids: number[];
  /** Index in ids where the action starts. */
  actionStart: number;
  logprobs: number[];
  advantage: number;
}

/** One action inside a training row: where its tokens start, their sampling log-probs, its advantage. */
export interface ActionSpan {
  start: number;
  logprobs: number[];
  advantage: number;
  /** Loss weight of each of its tokens (1 unless the update weighs by episode). */
  weight: number;
}

/** A training row: token ids and the actions in it that the loss sees. */
export interface TrainRow {
  ids: number[];
  actions: ActionSpan[];
}

/** The prompt+action token rows of a trajectory's turns, as they were sampled. */
export function turnTokenRows(codec: ChatCodec, task: string, t: Trajectory, promptBudget: number): TurnRowData[] {
  const rows: TurnRowData[] = [];
  const prior: { action: string; observation: string }[] = [];
  for (const turn of t.turns) {
    if (turn.tokenIds?.length && turn.logprobs?.length === turn.tokenIds.length) {
      const { ids } = renderPrompt(codec, task, prior, promptBudget);
      rows.push({ ids: [...ids, ...turn.tokenIds], actionStart: ids.length, logprobs: turn.logprobs, advantage: turn.advantage ?? 0 });
    }
    prior.push({ action: turn.action, observation: turn.observation });
  }
  return rows;
}

/**
 * Mean change of an action's log-probability (summed over its tokens) from the rollout policy
 * (`logprobs` recorded when sampled) to `after` (per-row log-probs aligned with the ids, as
 * PolicyService.logprobs gives them), over actions with positive and with negative advantage
 * (NaN where there are none).
 */
export function actionLogpShift(rows: readonly TrainRow[], after: readonly ArrayLike<number>[]): { positive: number; negative: number } {
  const pos: number[] = [];
  const neg: number[] = [];
  rows.forEach((r, i) => {
    for (const a of r.actions) {
      if (a.advantage === 0) continue;
      let d = 0;
      for (let k = 0; k < a.logprobs.length; k++) d += after[i][a.start + k] - a.logprobs[k];
      (a.advantage > 0 ? pos : neg).push(d);
    }
  });
  return { positive: pos.length ? mean(pos) : NaN, negative: neg.length ? mean(neg) : NaN };
}

/**
 * The share of the advantage mass (sum of |advantage| over turns) that sits in groups whose scored
 * episodes all ended the same way (all resolved or none): there the advantages rank episodes by
 * the reward's small penalties (turns used, format errors) only. grpo with `scale: group` divides
 * those small differences by their own small std and gives them full weight: 49-60% of the mass
 * in grpo runs on the demo workspace (docs/experiments/2026-12-01-held-out-drift.md). NaN when no turn has an advantage.
 */
export function sameOutcomeAdvantageShare(trajs: readonly Trajectory[]): number {
  const groups = new Map<string, Trajectory[]>();
  for (const t of trajs) {
    if (t.failure) continue;
    const g = groups.get(t.groupId);
    if (g) g.push(t);
    else groups.set(t.groupId, [t]);
  }
  let total = 0;
  let same = 0;
  for (const members of groups.values()) {
    const mass = members.reduce((s, t) => s + t.turns.reduce((a, x) => a + Math.abs(x.advantage ?? 0), 0), 0);
    total += mass;
    if (new Set(members.map((t) => t.reward.resolved)).size === 1) same += mass;
  }
  return total > 0 ? same / total : NaN;
}

/** The update's view of the advantages: negative ones times `weight` (config negativeAdvantageWeight). */
export function weightNegativeAdvantages(rows: readonly TurnRowData[], weight: number): readonly TurnRowData[] {
  return weight === 1 ? rows : rows.map((r) => (r.advantage < 0 ? { ...r, advantage: r.advantage * weight } : r));
}

/**
 * An episode's turn rows merged into as few rows as exactness allows: when turn k+1's row begins
 * with all of turn k's row (its prompt re-renders turn k's action to the very tokens sampled,
 * and no turn was dropped for room), turn k's action is scored inside turn k+1's row. A causal
 * model gives those tokens the same logits there (same tokens before them, same positions), so
 * the loss is the same while the update reads each prefix once: on the demo's trajectories, 240
 * turn rows became 58 and the padded tokens 141k became 49k (and the step's activations with them).
 * A row that does not continue the previous one (an action re-encoded differently, a cut
 * action, the oldest turns dropped) starts a new row. Every action gets the loss weight `weight`.
 */
export function episodeRows(turnRows: readonly TurnRowData[], weight = 1): TrainRow[] {
  const out: TrainRow[] = [];
  for (const r of turnRows) {
    const span: ActionSpan = { start: r.actionStart, logprobs: r.logprobs, advantage: r.advantage, weight };
    const last = out[out.length - 1];
    if (last && r.ids.length >= last.ids.length && last.ids.every((x, i) => r.ids[i] === x)) {
      last.ids = r.ids;
      last.actions.push(span);
    } else {
      out.push({ ids: r.ids, actions: [span] });
    }
  }
  return out;
}

/**
 * The rows an update trains on: each trajectory's turns merged (episodeRows), keeping only the
 * actions the loss can move: with no KL or entropy term, an action whose advantage is zero adds
 * nothing but weight to the token mean, so it is left out, as it was when each turn was a row.
 * `aggregation` (config lossAggregation): `token` weighs every action token 1; `episode` gives
 * the tokens of an episode with n action tokens the weight n̄ / n (n̄ the mean n over the
 * update's episodes), so each episode weighs the same in the token mean whatever its length and
 * the weights still average 1.
 */
export function updateRows(trajRows: readonly (readonly TurnRowData[])[], keepZeroAdvantage: boolean, aggregation: LossAggregation = 'token'): TrainRow[] {
  const sizes = trajRows.map((rows) => rows.reduce((s, r) => s + r.logprobs.length, 0));
  const meanSize = mean(sizes.filter((n) => n > 0));
  return trajRows
    .flatMap((rows, e) => episodeRows(rows, aggregation === 'episode' && sizes[e] > 0 ? meanSize / sizes[e] : 1))
    .map((r) => ({ ids: r.ids, actions: keepZeroAdvantage ? r.actions : r.actions.filter((a) => Math.abs(a.advantage) > 1e-9) }))
    .filter((r) => r.actions.length > 0);
}

const BUCKETS = [128, 256, 384, 512, 768, 1024];

/**
 * Replay rows for packMinibatches: `rows` demonstrations per minibatch, `draw(T, k)` giving the
 * k-th minibatch's, each at most T tokens (train/replay.ts).
 */
export interface ReplayRows {
  rows: number;
  draw: (maxTokens: number, minibatch: number) => ReplayExample[];
}

/**
 * Minibatches of training rows, padded to a few fixed shapes (each new shape builds a session).
 * With `replay`, each minibatch ends with replay.rows demonstration rows: their weights in
 * replayMask, nothing in the RL inputs (lossMask, advantages, old and reference log-probs 0).
 */
export function packMinibatches(rows: readonly TrainRow[], minibatches: number, refLogp?: Float32Array[], replay?: ReplayRows): { batch: TrainBatch; B: number; T: number }[] {
  const n = Math.max(1, Math.min(minibatches, rows.length));
  const per = Math.ceil(rows.length / n);
  const out: { batch: TrainBatch; B: number; T: number }[] = [];
  for (let i = 0; i < rows.length; i += per) {
    const part = rows.slice(i, i + per);
    const refs = refLogp?.slice(i, i + per);
    const maxLen = Math.max(...part.map((r) => r.ids.length));
    const T = BUCKETS.find((b) => b >= maxLen) ?? maxLen;
    const demos = replay ? replay.draw(T, out.length) : [];
    const B = per + (replay?.rows ?? 0);
    const ids = new Array<number>(B * T).fill(0);
    const att = new Array<number>(B * T).fill(0);
    const mask = new Array<number>(B * T).fill(0);
    const adv = new Array<number>(B * T).fill(0);
    const old = new Array<number>(B * T).fill(0);
    const act = new Array<number>(B * T).fill(0);
    const ref = refs ? new Array<number>(B * T).fill(0) : undefined;
    const rep = replay ? new Array<number>(B * T).fill(0) : undefined;
    part.forEach((r, b) => {
      for (let j = 0; j < r.ids.length; j++) {
        ids[b * T + j] = r.ids[j];
        att[b * T + j] = 1;
      }
      for (const a of r.actions) {
        for (let k = 0; k < a.logprobs.length; k++) {
          const o = b * T + a.start + k;
          mask[o] = a.weight;
          act[o] = 1;
          adv[o] = a.advantage;
          old[o] = a.logprobs[k];
          if (ref) ref[o] = refs![b][a.start + k];
        }
      }
    });
    demos.forEach((d, k) => {
      const o = (per + k) * T;
      for (let j = 0; j < Math.min(d.ids.length, T); j++) {
        ids[o + j] = d.ids[j];
        att[o + j] = 1;
        rep![o + j] = d.weights[j];
      }
    });
    // Rows of padding only (B is fixed per run: a short last minibatch, fewer demonstrations than
    // replayRows) keep one attended token so every row is valid; real rows start with one.
    for (let b = 0; b < B; b++) att[b * T] = 1;
    out.push({
      batch: { inputIds: ids, attentionMask: att, lossMask: mask, actionMask: act, advantages: adv, oldLogp: old, ...(ref ? { refLogp: ref } : {}), ...(rep ? { replayMask: rep } : {}) },
      B,
      T,
    });
  }
  return out;
}

/** The episode figures of an iteration's metrics row (train/ or eval/ by `prefix`). */
export function episodeMetrics(prefix: string, trajs: readonly Trajectory[]): Record<string, number> {
  const scored = trajs.filter((t) => !t.failure && Number.isFinite(t.reward.reward));
  const turns = trajs.flatMap((t) => t.turns);
  const m: Record<string, number> = {
    [`${prefix}reward/mean`]: mean(scored.map((t) => t.reward.reward)),
    [`${prefix}reward/std`]: scored.length > 1 ? std(scored.map((t) => t.reward.reward)) : 0,
    [`${prefix}pass_rate`]: mean(scored.map((t) => t.reward.passRate)),
    [`${prefix}resolved`]: scored.length ? scored.filter((t) => t.reward.resolved).length / scored.length : NaN,
    [`${prefix}turns/mean`]: mean(trajs.filter((t) => !t.failure).map((t) => t.turns.length)),
    [`${prefix}format_errors`]: turns.length ? turns.filter((t) => t.formatError).length / turns.length : 0,
    [`${prefix}episodes`]: trajs.length,
    [`${prefix}episodes/failed`]: trajs.filter((t) => t.failure).length,
    [`${prefix}episodes/tampered`]: trajs.filter((t) => t.reward.tampered !== undefined).length,
  };
  return m;
}

/** NaN is not JSON: metrics keep null for "no value". */
function jsonSafe(m: Record<string, number>): Record<string, number | null> {
  return Object.fromEntries(Object.entries(m).map(([k, v]) => [k, Number.isFinite(v) ? v : null]));
}

export interface EvalTaskRow {
  taskId: string;
  resolved: boolean;
  passRate: number | null;
  turns: number;
  formatErrors: number;
  failure?: string;
  /** Why the episode counts as tampered with (reward 0). */
  tampered?: string;
}

export interface EvalSummary {
  /** The fraction of tasks whose (greedy) episode passes every selected test: pass@1. */
  resolved: number;
  pass_rate: number;
  'turns/mean': number;
  format_error_rate: number;
  episodes: number;
  failed: number;
  /** Episodes whose reward is 0 because they tampered with the tests (tasks/tamper.ts). */
  tampered: number;
  tasks: EvalTaskRow[];
}

export function summarizeEval(trajs: readonly Trajectory[]): EvalSummary {
  const m = episodeMetrics('', trajs);
  return {
    resolved: m.resolved,
    pass_rate: m.pass_rate,
    'turns/mean': m['turns/mean'],
    format_error_rate: m.format_errors,
    episodes: trajs.length,
    failed: m['episodes/failed'],
    tampered: m['episodes/tampered'],
    tasks: trajs.map((t) => ({
      taskId: t.taskId,
      resolved: t.reward.resolved,
      passRate: Number.isFinite(t.reward.passRate) ? t.reward.passRate : null,
      turns: t.turns.length,
      formatErrors: t.turns.filter((x) => x.formatError).length,
      ...(t.failure ? { failure: t.failure } : {}),
      ...(t.reward.tampered !== undefined ? { tampered: t.reward.tampered } : {}),
    })),
  };
}

/** Sandboxes, snapshot, policy worker and model adapter of a run or an evaluation. */
export interface Rig {
  pool: SandboxPool;
  snapshot: PoolSnapshot;
  originals: ScoringOriginals;
  policy: PolicyService;
  /** The model's action format: compact (turnwise-tiny's segments, `codec`) or its own chat template (`chat`). */
  actionFormat: ModelActionFormat;
  /** The compact format's codec (compact models only). */
  codec?: ChatCodec;
  /** A chat model's format and the ids that end its replies (chat models only). */
  chat?: { format: ChatFormat; stopIds: readonly number[] };
  /** The action model at the run's sampling settings. */
  model: PolicyActionModel | ChatActionModel;
  /** A new action model of this rig's format at other sampling settings (greedy evaluation). */
  actionModel(sampling: { temperature: number; topP: number }): PolicyActionModel | ChatActionModel;
  contextTokens: number;
  /** Replayed tool observations for every rollout and evaluation on this rig (none if turned off). */
  observationCache?: ObservationCache;
  /** Command slots shared by every rollout and evaluation on this rig (none: no limit). */
  commandSlots?: Semaphore;
  close(): Promise<void>;
}

export async function openRig(o: {
  runId: string;
  workspace: string;
  language: string;
  checkpoint: string;
  referenceDir?: string;
  /** Start a LoRA adapter (B = 0) on the checkpoint's model: a new LoRA run's first rig. */
  lora?: { config: NonNullable<TrainConfig['lora']>; seed: number };
  /** Seed of a LoRA run's dropout masks (the run's, on every rig, so a resume drops the same elements). */
  loraDropoutSeed?: number;
  config: Pick<
    TrainConfig,
    'dockerHost' | 'dockerHosts' | 'sandboxMemoryMb' | 'sandboxCpus' | 'sandboxPids' | 'sandboxImage' | 'executionProvider' | 'maxActionTokens' | 'temperature' | 'topP' | 'concurrency' | 'cacheObservations' | 'commandConcurrency'
  >;
  pool?: SandboxPool;
  onLog?: (m: string) => void;
}): Promise<Rig> {
  assertWorkspaceNames(o.workspace);
  // A model that cannot write actions in either format is refused before a sandbox starts.
  const actionFormat = modelActionFormat(o.checkpoint);
  const ps = poolSettings(o.config);
  const pool = o.pool ?? (await connectRunPool(o.runId, o.config));
  const policy = new PolicyWorker({ onWarning: (m) => o.onLog?.(m) });
  try {
    const snapshot = await pool.snapshot(o.workspace, { language: o.language, ...(ps.baseImage ? { baseImage: ps.baseImage } : {}) });
    pool.warm(snapshot, Math.min(o.config.concurrency, 8));
    const info = await (policy as PolicyWorker).loadCheckpoint(o.checkpoint, { provider: o.config.executionProvider }, { ...(o.referenceDir ? { referenceDir: o.referenceDir } : {}), ...(o.lora ? { lora: o.lora } : {}), ...(o.loraDropoutSeed !== undefined ? { loraDropoutSeed: o.loraDropoutSeed } : {}) });
    if (!info.tokenizerJson) throw new TurnwiseError('invalid-file', `${o.checkpoint} has no tokenizer.json`, { hint: 'use a checkpoint written by Turnwise or a Hugging Face model folder' });
    const tokenizer = loadTokenizer(info.tokenizerJson, info.tokenizerConfig);
    const contextTokens = info.config.max_position_embeddings;
    checkActionRoom(contextTokens, o.config.maxActionTokens, o.checkpoint);
    const slots = commandSlotCount(o.config);
    let codec: ChatCodec | undefined;
    let chat: Rig['chat'];
    let actionModel: Rig['actionModel'];
    if (actionFormat.kind === 'chat') {
      const template = new ChatTemplate(actionFormat.template, actionFormat.source, templateTokens(info.tokenizerConfig));
      const format = new ChatFormat({ template, tokenizer, contextTokens, maxActionTokens: o.config.maxActionTokens });
      const eos = info.config.eos_token_ids ?? (info.config.eos_token_id !== undefined ? [info.config.eos_token_id] : []);
      // Episodes bring their task's system message; this one only stands in for a request without one.
      const system = chatSystemMessage({ language: o.language as Task['language'], testCommand: '' });
      actionModel = (s) => new ChatActionModel(policy, format, system, { maxActionTokens: o.config.maxActionTokens, ...s }, eos);
      chat = { format, stopIds: (actionModel({ temperature: 0, topP: 1 }) as ChatActionModel).stopIds };
    } else {
      const c = chatCodec(tokenizer);
      codec = c;
      actionModel = (s) => new PolicyActionModel(policy, c, { contextTokens, maxActionTokens: o.config.maxActionTokens, ...s });
    }
    const model = actionModel({ temperature: o.config.temperature, topP: o.config.topP });
    return {
      pool,
      snapshot,
      originals: collectOriginals(o.workspace),
      policy,
      actionFormat,
      ...(codec ? { codec } : {}),
      ...(chat ? { chat } : {}),
      model,
      actionModel,
      contextTokens,
      // One snapshot per rig, so a tree id names the same workspace for every episode on it.
      ...(o.config.cacheObservations ? { observationCache: new ObservationCache() } : {}),
      ...(slots !== undefined ? { commandSlots: new Semaphore(slots) } : {}),
      close: async () => {
        await policy.dispose().catch(() => undefined);
        if (!o.pool) await pool.close();
      },
    };
  } catch (e) {
    await policy.dispose().catch(() => undefined);
    if (!o.pool) await pool.close().catch(() => undefined);
    throw e;
  }
}

/**
 * Writes the rig's policy as a checkpoint with the action format it writes in (action_format.json),
 * so a resume and `eval --run` prompt it the same way; a chat model's full checkpoint also carries
 * its template as chat_template.jinja (an adapter's is its base's).
 */
async function saveRunCheckpoint(rig: Rig, dir: string): Promise<void> {
  await rig.policy.saveCheckpoint(dir);
  const f = rig.actionFormat;
  if (f.kind === 'chat' && !fs.existsSync(path.join(dir, 'adapter_config.json')) && path.resolve(f.source) !== path.resolve(dir, 'chat_template.jinja')) {
    writeFileAtomic(path.join(dir, 'chat_template.jinja'), f.template);
  }
  recordActionFormat(dir, f.kind);
}

/**
 * Runs `tasks` once each with greedy decoding (held-out evaluation), or `samples` sampled
 * episodes each at the run's temperature. A task's sampling seed does not depend on the
 * iteration: every evaluation of a run draws the same random numbers, so a change in the held-out
 * rate between iterations comes from the policy, not from new sampling noise.
 */
/** What an evaluation needs of a rig: sandboxes, the scoring originals and an action model. */
export type EvalRig = Pick<Rig, 'pool' | 'snapshot' | 'originals' | 'observationCache' | 'commandSlots'> & {
  model: ActionModel;
  actionModel(sampling: { temperature: number; topP: number }): ActionModel;
  close(): Promise<void>;
};

/**
 * An evaluation rig whose agent is an OpenAI-compatible endpoint (agent/endpoint.ts): the same
 * sandboxes and scoring as a local model's, the model behind the server. The server is asked for
 * its model list before any sandbox starts, so a wrong URL, name or key fails first.
 */
export async function openEndpointRig(o: {
  runId: string;
  workspace: string;
  language: string;
  endpoint: Omit<EndpointOptions, 'temperature' | 'topP'>;
  config: Parameters<typeof openRig>[0]['config'];
  onLog?: (m: string) => void;
}): Promise<EvalRig & { modelName: string }> {
  assertWorkspaceNames(o.workspace);
  const client = new EndpointClient(o.endpoint);
  const actionModel = (s: { temperature: number; topP: number }) => new EndpointActionModel(client, { maxTokens: o.endpoint.maxTokens ?? 512, ...s });
  const model = actionModel({ temperature: o.config.temperature, topP: o.config.topP });
  const modelName = await model.modelName();
  const ps = poolSettings(o.config);
  const pool = await connectRunPool(o.runId, o.config);
  try {
    const snapshot = await pool.snapshot(o.workspace, { language: o.language, ...(ps.baseImage ? { baseImage: ps.baseImage } : {}) });
    pool.warm(snapshot, Math.min(o.config.concurrency, 8));
    const slots = commandSlotCount(o.config);
    return {
      pool,
      snapshot,
      originals: collectOriginals(o.workspace),
      modelName,
      // The chosen name for every request, so each model object need not ask the server again.
      model,
      actionModel: (s) => {
        const m = actionModel(s);
        void m.modelName();
        return m;
      },
      ...(o.config.cacheObservations ? { observationCache: new ObservationCache() } : {}),
      ...(slots !== undefined ? { commandSlots: new Semaphore(slots) } : {}),
      close: () => pool.close(),
    };
  } catch (e) {
    await pool.close().catch(() => undefined);
    throw e;
  }
}

export async function evaluateTasks(
  rig: EvalRig,
  tasks: readonly Task[],
  o: { iteration: number; seed: number; config: TrainConfig; checkpoint: string; signal?: AbortSignal; onEpisode?: (t: Trajectory) => void; samples?: number },
): Promise<RolloutResult> {
  const jobs: EpisodeJob[] = o.samples
    ? // k sampled episodes per task, seeded by (task, k) only: every evaluation draws the same numbers.
      tasks.flatMap((task, i) =>
        Array.from({ length: o.samples! }, (_, k) => ({ task, episodeId: `evals-${o.iteration}-${i}-${k}`, groupId: `evals-${o.iteration}-${task.id}`, seed: seedOf(o.seed, 'eval-sample', task.id, k), split: 'heldout' as const })),
      )
    : tasks.map((task, i) => ({ task, episodeId: `eval-${o.iteration}-${i}`, groupId: `eval-${o.iteration}-${task.id}`, seed: seedOf(o.seed, 'eval', task.id), split: 'heldout' }));
  // pass@1 of the policy's best guess: greedy decoding unless sampling is asked for.
  const model = o.samples ? rig.model : rig.actionModel({ temperature: 0, topP: 1 });
  // One row per generation call: ONNX Runtime's kernels round differently across batch shapes,
  // and batches form by timing, so batched evaluations of one checkpoint differed in the last bits
  // of every log-prob and now and then in a greedy argmax (bench learn saw 1/8 vs 2/8 resolved).
  // Episodes still run concurrently; on CPU, batching saved little here (mean batch ~1.1). A
  // batch of one is always full, so the run's batchWaitMs never holds it.
  return runRollouts(jobs, { ...rolloutOptions(rig, o.config, o.checkpoint, o.iteration, o.signal, o.onEpisode), model, maxBatch: 1 });
}

function rolloutOptions(rig: EvalRig, c: TrainConfig, checkpoint: string, iteration: number, signal?: AbortSignal, onEpisode?: (t: Trajectory) => void) {
  return {
    provider: poolProvider(rig.pool, rig.snapshot),
    model: rig.model,
    checkpoint,
    originals: rig.originals,
    concurrency: c.concurrency,
    maxBatch: c.concurrency,
    batchWaitMs: c.batchWaitMs,
    maxTurns: c.maxTurns,
    commandTimeoutMs: c.commandTimeoutMs,
    rewardWeights: c.reward,
    iteration,
    signal,
    onEpisode,
    observationCache: rig.observationCache,
    commandSlots: rig.commandSlots,
  };
}

class Stopped extends Error {}

/** Resolves the tasks of a new run from its config (synthesis runs in sandboxes of `pool`). */
async function resolveTasks(c: TrainConfig, pool: SandboxPool, emit: (b: RunEventBody) => void): Promise<Task[]> {
  const override = c.testCommand ? { command: c.testCommand } : undefined;
  if (c.taskSource === 'file') return readTaskFile(c.tasksFile!);
  if (c.taskSource === 'failing-tests') {
    const r = await failingTestTasks({ workspace: c.workspace, pool, seed: c.taskSeed, override });
    return r.tasks;
  }
  const r = await synthesizeMutationTasks({
    workspace: c.workspace,
    pool,
    seed: c.taskSeed,
    max: c.maxTasks,
    override,
    onProgress: (p) =>
      emit({
        type: 'phase',
        iteration: 0,
        phase: 'tasks',
        done: p.kept,
        total: p.total,
        // The baseline can take long (a whole suite, at most DEFAULT_BASELINE_TIMEOUT_MS): say what it waits for.
        detail: p.phase === 'baseline' ? `baseline: running the workspace's test suite once (at most ${DEFAULT_BASELINE_TIMEOUT_MS / 1000} s)` : `${p.phase ?? 'validate'}: ${p.tried} tried, ${p.kept} kept`,
      }),
  });
  return r.tasks;
}

/** A run's own config.json, checked as a turnwise.json is (the fields the run added left out). */
export function readRunConfig(run: RunDir): TrainConfig {
  const raw = run.readConfig<Record<string, unknown>>();
  const file = run.file('config.json');
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw new TurnwiseError('invalid-file', `${file} is not a run configuration (a JSON object)`, { hint: 'restore it from a backup of the run directory; nothing was changed' });
  const { schema: _s, runId, startModel: _m, createdAt: _c, actionFormat: _f, ...given } = raw;
  if (typeof runId === 'string' && runId !== run.runId) {
    throw new TurnwiseError('invalid-file', `${file} is the configuration of run ${runId}, not of ${run.runId}`, { hint: 'restore this run\'s own config.json from a backup; nothing was changed' });
  }
  return resolveTrainConfig(given, file);
}

/**
 * What `turnwise eval --run` evaluates: one split of a run's tasks with one of its checkpoints
 * (default: the last complete iteration's) and the run's own settings (turns, action length,
 * time limits, temperature, seed), so an evaluation of a run's held-out tasks is made as the
 * run's own evaluations were.
 */
export function runEvalTarget(
  ref: string,
  o: { runsRoot?: string; split: 'train' | 'heldout'; iteration?: number },
): { run: RunDir; config: TrainConfig; tasks: Task[]; checkpoint: string; iteration: number; state: ReturnType<typeof runDisplayState> } {
  const run = RunDir.open(ref, o.runsRoot);
  const config = readRunConfig(run);
  const last = run.lastCompleteIteration();
  const iteration = o.iteration ?? last;
  if (last < 0 || iteration > last) {
    throw new TurnwiseError('not-found', `${run.runId} has no complete iteration ${o.iteration ?? ''}`.trimEnd() + (last >= 0 ? ` (the last complete one is ${last})` : ' yet'), { hint: 'give --iteration N of a checkpoint the run has written (0: the starting checkpoint)' });
  }
  const checkpoint = run.checkpointDir(iteration);
  if (!fs.existsSync(checkpointWeightsFile(checkpoint))) throw new TurnwiseError('not-found', `${run.runId}'s checkpoint ${iteration} is missing (${checkpoint})`, { hint: `give --iteration N of a checkpoint under ${run.file('checkpoints')}` });
  const ids = new Set(run.readSplits()[o.split]);
  const tasks = readTaskFile(run.file('tasks.jsonl')).filter((t) => ids.has(t.id));
  if (tasks.length === 0) throw new TurnwiseError('invalid-input', `${run.runId} has no ${o.split} task`, { hint: o.split === 'heldout' ? 'the run held no task out (heldoutFraction 0): give --split train' : 'give --split heldout' });
  return { run, config, tasks, checkpoint, iteration, state: runDisplayState(run.readStatus()) };
}

/** Starts or resumes a run and drives it to the end (or until `signal` aborts it). */
export async function trainRun(o: TrainRunOptions): Promise<TrainRunResult> {
  let run: RunDir;
  let c: TrainConfig;
  let runner: TestRunner | undefined;
  let pool: SandboxPool | undefined;
  let lock: ReturnType<RunDir['lock']>;
  let plan: ResumePlan | undefined;
  if (o.resume) {
    run = RunDir.open(o.resume, o.runsRoot);
    // Nothing is read for work or written before the lock: a second trainer is refused here.
    lock = run.lock();
    try {
      c = readRunConfig(run);
      plan = planResume(run, c, { iterations: o.resumeIterations });
    } catch (e) {
      lock.release();
      throw e;
    }
  } else {
    c = o.config;
    const runId = newRunId({ name: o.name ?? path.basename(path.resolve(c.workspace)), estimator: c.estimator, seed: c.seed });
    // Mistakes found before any work (no test suite, an unreadable starting model, a context too
    // short for an action, Docker down) are refused here, so they leave no run directory behind.
    // The pool stays for the run.
    runner = detectRunner(c.workspace, c.testCommand ? { command: c.testCommand } : undefined);
    assertWorkspaceNames(c.workspace);
    if (c.taskSource === 'file') assertWorkspaceHoldsTasks(readTaskFile(c.tasksFile!), c.workspace, c.tasksFile!);
    const start = loadCheckpoint(c.model || embeddedModelDir(), { optimizer: false });
    checkActionRoom(start.weights.config.max_position_embeddings, c.maxActionTokens, start.dir);
    // A run whose memory plan exceeds the machine's memory is refused before any sandbox starts.
    assertRunFits(c, start.weights.config);
    const format = modelActionFormat(c.model || embeddedModelDir());
    if (format.kind === 'chat' && c.replayCoef > 0) {
      throw new TurnwiseError('invalid-input', `replayCoef ${c.replayCoef} replays turnwise-tiny's warm-start demonstrations, which are in the compact format; ${start.dir} writes in its chat format`, { hint: 'set "replayCoef" to 0 in turnwise.json for a chat model' });
    }
    pool = await connectRunPool(runId, c);
    try {
      fs.mkdirSync(o.runsRoot, { recursive: true });
      run = RunDir.create(o.runsRoot, runId, runConfigRecord(c, { runId, startModel: c.model || embeddedModelDir(), actionFormat: format.kind, createdAt: new Date().toISOString() }));
      lock = run.lock();
    } catch (e) {
      await pool.close();
      throw e;
    }
  }
  const runId = run.runId;
  const emit = (b: RunEventBody) => o.onEvent?.(makeEvent(runId, b));
  const log = (message: string, level: 'info' | 'warn' = 'info') => emit({ type: 'log', level, message });
  if (lock.tookOverFrom) log(`took over the lock of process ${lock.tookOverFrom.pid}, which is gone (it was killed or crashed)`);
  if (plan) {
    for (const w of plan.inventory.warnings) log(`${w.file}: ${w.problem}; ${w.fix}`, 'warn');
    // The log of a finished run is repaired too: it is rebuilt from the iterations' own markers.
    run.repairLog(plan.inventory);
    if (plan.nothingToDo) {
      lock.release();
      log(plan.nothingToDo);
      return { runDir: run.dir, runId, metrics: run.readMetrics(), state: 'finished', newIterations: 0 };
    }
  }
  const check = () => {
    if (o.signal?.aborted) throw new Stopped('stopped');
  };
  let last = run.lastCompleteIteration();
  const startedAt = last;
  // What a resume that fails before it completes an iteration puts back: it did no work, so the
  // run's status (and its iteration count) stay as they were.
  const before = o.resume ? { status: readIfFile(run.file('status.json')), config: readIfFile(run.file('config.json')) } : undefined;
  if (plan && plan.iterations !== c.iterations) {
    log(`the run now goes to iteration ${plan.iterations} (its config.json said ${c.iterations})`);
    c = { ...c, iterations: plan.iterations };
    writeJsonAtomic(run.file('config.json'), { ...run.readConfig<Record<string, unknown>>(), iterations: plan.iterations });
  }
  const removed = run.discardAfter(last);
  if (removed.length) log(`discarded the incomplete iteration${removed.length > 1 ? 's' : ''} ${removed.join(', ')} left by an interrupted run`);
  run.writeStatus({ state: 'running', pid: process.pid, iterations: c.iterations, lastCompleteIteration: last });
  // However the process ends while the run is going (a second Ctrl-C, an uncaught error, the
  // editor closing), the run directory says stopped and holds no half iteration: synchronous,
  // so it happens even on process.exit().
  let settled = false;
  const onExit = () => {
    if (settled) return;
    try {
      run.discardAfter(last);
      run.writeStatus({ state: 'stopped', iterations: c.iterations, lastCompleteIteration: last });
    } catch {
      // nothing more can be done while exiting
    }
  };
  process.on('exit', onExit);

  let rig: Rig | undefined;
  try {
    runner ??= detectRunner(c.workspace, c.testCommand ? { command: c.testCommand } : undefined);
    pool ??= await connectRunPool(runId, c);
    let tasks: Task[];
    let splits: { train: string[]; heldout: string[] };
    if (fs.existsSync(run.file('splits.json'))) {
      // A resume poses the run's tasks again: refused if the workspace no longer holds their files.
      tasks = readTaskFile(run.file('tasks.jsonl'));
      assertWorkspaceHoldsTasks(tasks, c.workspace, run.file('tasks.jsonl'));
      splits = run.readSplits(tasks);
    } else {
      emit({ type: 'phase', iteration: 0, phase: 'tasks', detail: `${c.taskSource} tasks from ${c.workspace}` });
      tasks = await resolveTasks(c, pool, emit);
      check();
      if (tasks.length === 0) {
        throw c.taskSource === 'failing-tests'
          ? new TurnwiseError('invalid-input', `no test of ${c.workspace} fails, so taskSource "failing-tests" finds no task`, {
              hint: 'use taskSource "mutation" (the default: bugs made from the workspace\'s own code) or "file" with a task file (`turnwise tasks synth --out`)',
            })
          : new TurnwiseError('invalid-input', `no task survived validation in ${c.workspace}: no mutation of its source made one of its passing tests fail`, {
              hint: 'check that the tests exercise the code (`turnwise tasks synth --workspace … --json` shows why candidates were dropped), or use taskSource "failing-tests" / "file"',
            });
      }
      const seen = new Set(demonstrationTaskIds(c.model || embeddedModelDir()));
      splits = splitTasks(tasks, c.heldoutFraction, c.taskSeed, seen);
      const kept = tasks.filter((t) => seen.has(t.id)).length;
      if (kept) log(`${kept} task(s) were demonstrations of the starting model's warm start: they stay in the train split`);
      run.writeTasks(tasks, splits);
    }
    const byId = new Map(tasks.map((t) => [t.id, t]));
    const train = splits.train.map((id) => byId.get(id)!).filter(Boolean);
    const heldout = splits.heldout.map((id) => byId.get(id)!).filter(Boolean);
    if (train.length === 0) {
      throw plan
        ? new TurnwiseError('invalid-file', `${run.file('splits.json')} holds no train task`, { hint: 'restore it from a backup of the run directory; nothing was changed' })
        : new TurnwiseError('invalid-input', `all ${tasks.length} task(s) are held out; none is left to train on`, { hint: 'lower heldoutFraction or add tasks' });
    }
    emit({ type: 'run-started', runDir: run.dir, iterations: c.iterations, trainTasks: train.length, heldoutTasks: heldout.length, ...(last >= 0 ? { resumedFrom: last } : {}) });

    const startModel = (run.readConfig<{ startModel?: string }>().startModel as string) || c.model || embeddedModelDir();
    const from = last >= 0 ? run.checkpointDir(last) : startModel;
    emit({ type: 'phase', iteration: Math.max(0, last), phase: 'snapshot', detail: 'workspace snapshot and policy' });
    // A LoRA run starts a fresh adapter on its model; once checkpoint 0 exists, every checkpoint
    // is an adapter that names its base.
    const lora = last < 0 && c.lora ? { config: c.lora, seed: seedOf(c.seed, 'lora-init') } : undefined;
    rig = await openRig({ runId, workspace: c.workspace, language: runner.language, checkpoint: from, referenceDir: last >= 0 ? run.checkpointDir(0) : undefined, ...(lora ? { lora } : {}), ...(c.lora ? { loraDropoutSeed: seedOf(c.seed, 'lora-dropout') } : {}), config: c, pool, onLog: (m) => log(m, 'warn') });
    if (last < 0 && rig.actionFormat.kind === 'chat') log(`the model writes its actions in its own chat format (template: ${rig.actionFormat.source})`);
    // The update's token cap: the config's, or the largest the memory plan fits (0).
    const memory = runMemoryPlan(c, (await rig.policy.info()).config);
    for (const line of memory.lines) log(line);
    check();
    // Generated demonstrations for the replay term (the same pool on a resume: seeded by the run).
    const replaySource = c.replayCoef > 0 && rig.codec ? await ReplaySource.create(rig.codec, seedOf(c.seed, 'replay-pool')) : undefined;

    const evalDue = (n: number) => n === 0 || n === c.iterations || (c.evalEvery > 0 && n % c.evalEvery === 0);
    const runEval = async (n: number): Promise<{ m: Record<string, number>; trajs: Trajectory[]; passAtKT?: PassAtKT }> => {
      if (!heldout.length || !evalDue(n)) return { m: {}, trajs: [] };
      const total = heldout.length * (1 + c.evalSamples);
      emit({ type: 'phase', iteration: n, phase: 'eval', done: 0, total });
      const t0 = Date.now();
      let done = 0;
      const base = {
        iteration: n,
        seed: c.seed,
        config: c,
        checkpoint: run.checkpointDir(n),
        signal: o.signal,
        onEpisode: (t: Trajectory) => {
          done++;
          emit({ type: 'phase', iteration: n, phase: 'eval', done, total });
          emitEpisode(emit, n, t);
        },
      };
      // Held-out episodes decode greedily: pass@1 of the policy's best guess.
      const res = await evaluateTasks(rig!, heldout, base);
      check();
      let m = episodeMetrics('heldout/', res.trajectories);
      let trajs = res.trajectories;
      if (c.evalSamples > 0) {
        // Sampled ones estimate the success rate of the policy RL actually changes.
        const s = await evaluateTasks(rig!, heldout, { ...base, samples: c.evalSamples });
        check();
        m = { ...m, ...episodeMetrics('heldout/sampled/', s.trajectories) };
        trajs = [...trajs, ...s.trajectories];
      }
      const failedEval = trajs.filter(unscored);
      if (failedEval.length && n > 0) log(`${failedEval.length} of ${trajs.length} held-out episodes of iteration ${n} failed or could not be scored and are left out of its held-out metrics (first: ${whyUnscored(failedEval[0])})`, 'warn');
      // PASS@(k,T) of the sampled episodes: in the iteration's event (metrics rows stay flat numbers).
      const passKT = sampledPassAtKT(trajs);
      return { m: { ...m, 'time/eval_s': (Date.now() - t0) / 1000 }, trajs, ...(passKT ? { passAtKT: passKT } : {}) };
    };

    if (last < 0) {
      // Iteration 0: the starting checkpoint, evaluated on the held-out tasks.
      const ev = await runEval(0);
      const failedEval = ev.trajs.filter(unscored);
      if (ev.trajs.length && failedEval.length === ev.trajs.length) {
        // An evaluation that cannot run would make every later one a row of "—": stop with its reason.
        throw new TurnwiseError('sandbox-failed', `every one of the ${ev.trajs.length} held-out episodes of the starting evaluation failed; the first: ${whyUnscored(failedEval[0])}`, {
          hint: 'run one of the held-out tasks with `turnwise episode` or check the workspace and Docker with `turnwise doctor`; nothing of the run was kept',
        });
      }
      run.writeTrajectories(0, 'heldout', ev.trajs);
      await saveRunCheckpoint(rig, run.checkpointDir(0));
      const row: MetricsRow = { schema: SCHEMA.metrics, iteration: 0, ...jsonSafe(ev.m) } as MetricsRow;
      run.commitIteration(row);
      emit({ type: 'checkpoint-written', iteration: 0, path: run.checkpointDir(0) });
      emit({ type: 'iteration-finished', iteration: 0, metrics: row, ...(ev.passAtKT ? { pass_at_k_t: ev.passAtKT } : {}) });
      last = 0;
      run.writeStatus({ state: 'running', pid: process.pid, iterations: c.iterations, lastCompleteIteration: last });
    }

    for (let n = last + 1; n <= c.iterations; n++) {
      check();
      const it0 = Date.now();
      // Tasks of this iteration: a seeded shuffle of the train split, cycled.
      const order = [...train].sort((a, b) => seedOf(c.seed, n, a.id) - seedOf(c.seed, n, b.id));
      const picked = Array.from({ length: Math.min(c.tasksPerIteration, Math.max(train.length, c.tasksPerIteration)) }, (_, i) => order[i % order.length]);
      const jobs: EpisodeJob[] = [];
      picked.forEach((task, ti) => {
        for (let g = 0; g < c.groupSize; g++) jobs.push({ task, episodeId: `it${n}-t${ti}-g${g}`, groupId: `it${n}-t${ti}`, seed: seedOf(c.seed, n, ti, g), split: 'train' });
      });
      let done = 0;
      emit({ type: 'phase', iteration: n, phase: 'rollout', done: 0, total: jobs.length });
      const ro = await runRollouts(jobs, {
        ...rolloutOptions(rig, c, run.checkpointDir(n - 1), n, o.signal, (t) => {
          done++;
          emit({ type: 'phase', iteration: n, phase: 'rollout', done, total: jobs.length });
          emitEpisode(emit, n, t);
        }),
      });
      check();
      const trajs = ro.trajectories;
      const failed = trajs.filter((t) => t.failure);
      if (failed.length === trajs.length) {
        throw new TurnwiseError('sandbox-failed', `every episode of iteration ${n} failed; the first: ${failed[0]?.failure}`, { hint: 'check Docker (`turnwise doctor`) and the workspace\'s tests' });
      }
      if (failed.length) log(`${failed.length} of ${trajs.length} episodes failed and are left out of the update (first: ${failed[0].failure})`, 'warn');

      // Advantages: the run's estimator over the scored episodes; failed ones get 0.
      emit({ type: 'phase', iteration: n, phase: 'advantages' });
      const tA = Date.now();
      const scored = trajs.filter((t) => !t.failure);
      // A group is one picked task slot (the same task may be picked twice in one iteration).
      const report = await trajectoryAdvantages(
        scored.map((t) => ({ ...t, taskId: t.groupId })),
        c.estimator,
        c.estimatorParams,
      );
      const byTraj = new Map(scored.map((t) => [t.trajId, t]));
      for (const r of report.rows) {
        const turn = byTraj.get(r.trajId)?.turns.find((x) => x.index === r.turn);
        if (turn) {
          turn.advantage = r.advantage;
          turn.advantageComponents = r.components;
        }
      }
      const advS = (Date.now() - tA) / 1000;

      // Update.
      emit({ type: 'phase', iteration: n, phase: 'update' });
      const tU = Date.now();
      const budget = rig.contextTokens - c.maxActionTokens;
      const taskText = (t: Trajectory) => taskTextOf(byId.get(t.taskId)!);
      const turnRows = scored.map((t) => {
        const task = byId.get(t.taskId)!;
        // A chat episode's rows are its conversation built again from the trajectory's ids.
        return rig!.chat ? chatTurnTokenRows(rig!.chat.format, chatSystemMessage(task), chatTaskMessage(task), t, rig!.chat.stopIds) : turnTokenRows(rig!.codec!, taskText(t), t, budget);
      });
      const rows = updateRows(
        turnRows.map((r) => weightNegativeAdvantages(r, c.negativeAdvantageWeight)),
        c.klCoef > 0 || c.entCoef > 0,
        c.lossAggregation,
      );
      const stepMetrics: StepMetrics[] = [];
      if (rows.length) {
        for (let epoch = 0; epoch < c.epochs; epoch++) {
          // A seeded order: one hash per row, not two per comparison.
          const shuffled = rows
            .map((r) => ({ r, key: seedOf(c.seed, n, epoch, r.ids.length, r.actions[0].advantage, r.actions.length) }))
            .sort((a, b) => a.key - b.key)
            .map((x) => x.r);
          const ref = c.klCoef > 0 ? await rig.policy.logprobs(shuffled.map((r) => r.ids), { temperature: c.temperature, model: 'reference' }) : undefined;
          const replay: ReplayRows | undefined = replaySource && { rows: c.replayRows, draw: (T, k) => replaySource!.draw(c.replayRows, T, seedOf(c.seed, 'replay', n, epoch, k)) };
          for (const mb of packMinibatches(shuffled, c.minibatches, ref, replay)) {
            check();
            const ms = await rig.policy.train({ loss: c.loss, batch: mb.B, seq: mb.T, microBatchTokens: memory.updateTokens }, [mb.batch], {
              lr: c.lr,
              klCoef: c.klCoef,
              entCoef: c.entCoef,
              replayCoef: c.replayCoef,
              clipLow: c.clipLow,
              clipHigh: c.clipHigh,
              temperature: c.temperature,
            });
            stepMetrics.push(...ms);
          }
        }
      }
      // Where the update moved the log-probability of the actions it learned from, by the sign of
      // their advantage (one forward pass, counted in the update's time; the rollout log-probs are
      // the "before"). A drop of the positive ones as well means the negative ones dominate and
      // push probability elsewhere.
      const learned = updateRows(turnRows, false);
      const moved = stepMetrics.length && learned.length ? actionLogpShift(learned, await rig.policy.logprobs(learned.map((r) => r.ids), { temperature: c.temperature })) : undefined;
      const updS = (Date.now() - tU) / 1000;
      check();

      // Checkpoint, evaluation, then the marker that commits the iteration.
      await saveRunCheckpoint(rig, run.checkpointDir(n));
      emit({ type: 'checkpoint-written', iteration: n, path: run.checkpointDir(n) });
      const ev = await runEval(n);
      run.writeTrajectories(n, 'train', trajs);
      if (ev.trajs.length) run.writeTrajectories(n, 'heldout', ev.trajs);
      const advs = scored.flatMap((t) => t.turns.map((x) => x.advantage ?? 0));
      // The train pass rate's key is tests/pass_rate (docs/run-directory.md) (held-out ones keep their prefix).
      const { pass_rate: trainPassRate, ...trainEpisodes } = episodeMetrics('', trajs);
      const sm = (k: keyof StepMetrics) => (stepMetrics.length ? mean(stepMetrics.map((s) => s[k])) : NaN);
      const row: MetricsRow = {
        schema: SCHEMA.metrics,
        iteration: n,
        ...jsonSafe({
          ...trainEpisodes,
          'tests/pass_rate': trainPassRate,
          frac_reward_zero_std: report.diagnostics.frac_reward_zero_std,
          'adv/mean': mean(advs),
          'adv/std': advs.length > 1 ? std(advs) : 0,
          'adv/abs_mean': mean(advs.map(Math.abs)),
          'adv/same_outcome_share': sameOutcomeAdvantageShare(scored),
          'loss/policy': sm('pg_loss'),
          'loss/total': sm('loss'),
          kl: sm('kl'),
          approx_kl: sm('approx_kl'),
          clip_frac: sm('clip_frac'),
          entropy: sm('entropy'),
          grad_norm: sm('grad_norm'),
          'update/steps': stepMetrics.length,
          'update/rows': rows.length,
          'update/actions': rows.reduce((a, r) => a + r.actions.length, 0),
          'update/dlogp_pos': moved?.positive ?? NaN,
          'update/dlogp_neg': moved?.negative ?? NaN,
          'update/replay_loss': c.replayCoef > 0 ? sm('replay_loss') : NaN,
          'time/rollout_s': ro.wallMs / 1000,
          'time/generation_s': ro.generateMs / 1000,
          'time/sandbox_s': ro.sandboxMs / 1000,
          'time/reward_s': ro.rewardMs / 1000,
          'time/advantages_s': advS,
          'time/update_s': updS,
          'time/iteration_s': (Date.now() - it0) / 1000,
          'rollout/mean_batch': ro.meanBatch,
          'rollout/cached_turns': cachedTurnFraction(trajs),
          ...ev.m,
        }),
      } as MetricsRow;
      run.commitIteration(row);
      last = n;
      run.writeStatus({ state: 'running', pid: process.pid, iterations: c.iterations, lastCompleteIteration: last });
      emit({ type: 'iteration-finished', iteration: n, metrics: row, ...(ev.passAtKT ? { pass_at_k_t: ev.passAtKT } : {}) });
    }
    run.writeStatus({ state: 'finished', iterations: c.iterations, lastCompleteIteration: last });
    emit({ type: 'run-finished', iterations: c.iterations, runDir: run.dir });
    return { runDir: run.dir, runId, metrics: run.readMetrics(), state: 'finished', newIterations: last - startedAt };
  } catch (e) {
    if (e instanceof Stopped || o.signal?.aborted) {
      run.discardAfter(last);
      run.writeStatus({ state: 'stopped', iterations: c.iterations, lastCompleteIteration: last });
      emit({ type: 'run-stopped', lastCompleteIteration: last, reason: 'stopped by the user' });
      return { runDir: run.dir, runId, metrics: run.readMetrics(), state: 'stopped', newIterations: last - startedAt };
    }
    settled = true;
    await rig?.close().catch(() => undefined);
    rig = undefined;
    if (!o.resume && last < 0) {
      // A new run that failed before its first iteration holds nothing complete: it leaves nothing.
      lock.release();
      fs.rmSync(run.dir, { recursive: true, force: true });
    } else if (before && last === startedAt) {
      // A resume that completed nothing leaves the run's files as they were.
      run.discardAfter(last);
      restoreFile(run.file('status.json'), before.status);
      restoreFile(run.file('config.json'), before.config);
    } else {
      run.writeStatus({ state: 'failed', iterations: c.iterations, lastCompleteIteration: last, error: errorToJson(e) });
    }
    emit({ type: 'run-failed', error: errorToJson(e) });
    throw e;
  } finally {
    settled = true;
    process.off('exit', onExit);
    await rig?.close().catch(() => undefined);
    await pool?.close().catch(() => undefined);
    lock.release();
  }
}

/** An episode that gives no score: it failed, or its tests gave no usable report (reward NaN). */
const unscored = (t: Trajectory) => !!t.failure || !Number.isFinite(t.reward.reward);
const whyUnscored = (t: Trajectory) => t.failure ?? t.reward.error ?? 'its tests gave no usable report';

function readIfFile(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

/** Puts a file's earlier content back (atomically), or removes it when there was none. */
function restoreFile(file: string, text: string | undefined): void {
  if (text === undefined) fs.rmSync(file, { force: true });
  else if (readIfFile(file) !== text) writeFileAtomic(file, text);
}

/**
 * Refuses a model whose context leaves too little room for a prompt beside an action of
 * maxActionTokens: half the context at most (the prompt gets the rest).
 */
export function checkActionRoom(contextTokens: number, maxActionTokens: number, modelDir: string): void {
  if (maxActionTokens <= contextTokens / 2) return;
  throw new TurnwiseError('invalid-input', `maxActionTokens ${maxActionTokens} leaves no room for the prompt: ${modelDir} has a context of ${contextTokens} tokens (max_position_embeddings)`, {
    hint: `set "maxActionTokens" to at most ${Math.floor(contextTokens / 2)} in turnwise.json (it is the longest action the policy writes), or use a model with a longer context`,
  });
}

function emitEpisode(emit: (b: RunEventBody) => void, iteration: number, t: Trajectory): void {
  emit({
    type: 'episode-finished',
    iteration,
    split: t.split ?? 'train',
    taskId: t.taskId,
    trajId: t.trajId,
    reward: Number.isFinite(t.reward.reward) ? t.reward.reward : null,
    passRate: Number.isFinite(t.reward.passRate) ? t.reward.passRate : null,
    resolved: t.reward.resolved,
    turns: t.turns.length,
    formatErrors: t.turns.filter((x) => x.formatError).length,
    ...(t.failure ? { failure: t.failure } : {}),
  });
}
