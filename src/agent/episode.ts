// One episode: prepare the sandbox (a mutation task's bug written in, hidden from git), then
// turn by turn ask the model for one bash command or `submit`, run it, record the observation
// and what it changed; at the end score it with the test files restored. A sandbox or runner
// failure fails only this episode: reward NaN, `failure` says why.
import { formatError, TurnwiseError } from '../core/errors';
import { SCHEMA, type FileEdit, type RewardComponents, type Task, type Trajectory, type Turn } from '../core/schema';
import { createBashSigner } from '../ast/bash';
import { createEditSigner } from '../ast/edits';
import { shellQuote } from '../sandbox/shell';
import type { Sandbox } from '../sandbox/types';
import { WORKSPACE_DIR } from '../sandbox/types';
import { repeatedTurns } from '../core/repeats';
import { seedOf } from '../core/random';
import { computeReward, scoreEpisode, type RewardWeights } from '../tasks/reward';
import { HIDE_HISTORY_COMMAND, writeTaskBug } from '../tasks/pose';
import type { ScoringOriginals } from '../tasks/testfiles';
import { parseAction, type ParsedAction } from './action';
import { chatFormatErrorObservation, chatObservation, chatSystemMessage, parseChatReply, type ChatReply } from './chat-format';
import {
  cacheableCommand,
  keepableObservation,
  leavesToolState,
  mayDetach,
  ObservationCache,
  REQUIRED_TESTS_FILE,
  requiredTestsText,
  TOOL_STATE_DIR,
  TOOL_STATE_FILE,
  type CachedObservation,
} from './cache';
import { formatErrorObservation, observationText, taskText, type PromptTurn } from './prompt';
import type { ActionFormatKind, ActRequest, ActResult } from './types';
import type { Semaphore } from '../core/workers';
import { labelTurns, passedSinceLastEdit, turnFailed } from './diagnosis';

export interface EpisodeOptions {
  task: Task;
  sandbox: Sandbox;
  /** Asks the model for this episode's next action (the scheduler batches these). */
  act: (req: ActRequest) => Promise<ActResult>;
  /** The model's action format: what a reply holds and how observations are written (compact by default). */
  format?: ActionFormatKind;
  episodeId: string;
  groupId: string;
  checkpoint: string;
  seed: number;
  /** Test files of the snapshot, restored before scoring. */
  originals: ScoringOriginals;
  maxTurns?: number;
  commandTimeoutMs?: number;
  testTimeoutMs?: number;
  rewardWeights?: Partial<RewardWeights>;
  iteration?: number;
  split?: 'train' | 'heldout';
  signal?: AbortSignal;
  /** Called once the episode will ask for no more actions (before scoring). */
  onActionsDone?: () => void;
  /** Time spent in the sandbox and waiting for the model (for the run's phase timings). */
  timing?: { sandboxMs: number; modelWaitMs: number; rewardMs: number };
  /** Observations of read-only tool commands shared across the run's episodes (agent/cache.ts). */
  observationCache?: ObservationCache;
  /**
   * Slots shared by the episodes of a run: the agent's commands and the scoring test run each hold
   * one while they run. A command waiting for a slot has not started, so neither has its time
   * limit (and its turn's durationMs leaves the wait out): on a machine with fewer cores than
   * episodes, `tw-suspects` then gets the CPU its time guard assumes instead of a third of it.
   */
  commandSlots?: Semaphore;
  /**
   * A branch: the first turns of an earlier episode of the same task and policy, replayed as they
   * were (each command run again in this fresh sandbox, no model call) before the model writes
   * the rest. The inherited turns keep their tokens and log-probs and are marked `inherited`; the
   * trajectory's `branch.shared` counts those whose observation came back as the parent saw it.
   */
  prefix?: BranchPrefix;
  /**
   * Recovery feedback (training only; evaluations never get it): a command that repeats one of
   * the episode's that failed gets a line saying so after its output, and a first `submit` with no
   * passing test since the last edit is answered with a line saying so instead of ending the
   * episode (a second one ends it).
   */
  recoveryFeedback?: boolean;
}

/** The lines of recovery feedback. */
export const FEEDBACK = {
  repeat: (k: number) => `note: the same command as turn ${k + 1}, which failed`,
  submit: 'note: no test has passed since the last edit; run the tests, or submit again to end',
} as const;

export const DEFAULT_MAX_TURNS = 8;
export const DEFAULT_COMMAND_TIMEOUT_MS = 20_000;
/** Bytes of a changed file kept in the trajectory (before and after), per side. */
export const EDIT_TEXT_CAP = 64 * 1024;
/** Changed files recorded per turn. */
const EDITS_PER_TURN = 8;

/** A separate git dir tracks what each turn changed, so the agent's own repository stays as it was. */
const TRACK_DIR = '/home/agent/.turnwise-track';
const TRACK = `git --git-dir=${TRACK_DIR} --work-tree=${WORKSPACE_DIR}`;
/** Touched when the episode starts; a file outside the workspace newer than it was written by the agent. */
const START_MARK = `${TRACK_DIR}/episode-start`;
/**
 * Prints a path if anything in the places the sandbox user may write outside the workspace
 * (home, temp folders) changed since the episode started: the workspace's digest then no
 * longer describes all a command can read (a usercustomize.py in ~/.local changes what
 * `tw-test` prints; a rewritten task test list in the tools' folder changes what it counts), so
 * the episode stops using the observation cache. By change time, which no one can set back
 * (`touch -d` moves the modification time only). Left out: the tracker's git folder, and the
 * ranking the tools keep (suspects.json and its temporary copies), which the cache restores
 * itself; the tools' folder itself is searched, its task test list included.
 */
const OUTSIDE_CHANGED = `find /home/agent /tmp /var/tmp /run/lock /dev/shm -mindepth 1 \\( -path ${TRACK_DIR} -prune \\) -o \\( -path ${TOOL_STATE_DIR} -o -path ${TOOL_STATE_FILE} -o -path '${TOOL_STATE_FILE}.*' \\) -o -cnewer ${START_MARK} -print -quit 2>/dev/null`;

/** Files this large or larger enter the workspace digest by size and modification time, not content (a sparse terabyte would take the turn's time limit to read). */
const DIGEST_MAX_BYTES = 32 * 1024 * 1024;

/**
 * The observation cache's key for the workspace: a SHA-256 over every file's path and content
 * (sorted, .git and node_modules left out), read by the shell, not by the edit tracker. The
 * tracker's git folder is the sandbox user's, so its index could be told to overlook a file
 * (`update-index --assume-unchanged`), a failed `add` left its tree as it was, and a clean filter
 * in its config could rewrite what it hashes: a tree id from it could name the task's starting
 * state while the files held a fix, and a `tw-test` answer stored under that name would reach
 * every other episode of the task. A file the command cannot read puts its error in the digest.
 */
const DIGEST_FIND = `find ${WORKSPACE_DIR} -mindepth 1 \\( -name node_modules -o -name .git \\) -prune -o \\( -type f -o -type l \\)`;
const WORKSPACE_DIGEST = `{ ${DIGEST_FIND} -size -${DIGEST_MAX_BYTES}c -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum -z -- 2>&1; ${DIGEST_FIND} -size +${DIGEST_MAX_BYTES - 1}c -printf '%p %s %T@\\0' | LC_ALL=C sort -z; } | sha256sum | cut -c1-64`;

/** Puts a replayed command's tool state back (best effort: a folder the agent broke stays broken, as if the tool had run). */
async function restoreToolState(sb: Sandbox, state: string): Promise<void> {
  const tmp = `${TOOL_STATE_FILE}.replay`;
  await sb.exec(`mkdir -p -m 700 ${TOOL_STATE_DIR} && printf '%s' ${shellQuote(state)} > ${tmp} && mv -f ${tmp} ${TOOL_STATE_FILE}`, {
    timeoutMs: 30_000,
  });
}

/** The tool state a command left, or undefined when it cannot be read. */
async function readToolState(sb: Sandbox): Promise<string | undefined> {
  const r = await sb.exec(`cat ${TOOL_STATE_FILE}`, { timeoutMs: 30_000 });
  return r.exitCode === 0 && !r.truncated ? r.stdout : undefined;
}

let signers: Promise<{ bash: (s: string) => string[]; edit: Awaited<ReturnType<typeof createEditSigner>> }> | undefined;
function getSigners() {
  signers ??= Promise.all([createBashSigner(), createEditSigner()]).then(([bash, edit]) => ({ bash, edit }));
  return signers;
}

async function must(sb: Sandbox, command: string, what: string, timeoutMs = 60_000): Promise<string> {
  const r = await sb.exec(command, { timeoutMs });
  if (r.exitCode !== 0)
    throw new TurnwiseError(
      'sandbox-failed',
      `${what} failed in the sandbox (exit ${r.exitCode}${r.timedOut ? ', timed out' : ''}): ${(r.stderr || r.stdout).trim().slice(-300)}`,
    );
  return r.stdout;
}

/**
 * Poses the task in the sandbox (tasks/pose.ts: a mutation task's bug written in, the history
 * hidden) and starts the edit tracker, in one exec for both.
 */
export async function prepareSandbox(sb: Sandbox, task: Task): Promise<{ tree: string }> {
  await writeTaskBug(sb, task);
  // The task's tests for the tools, in place before the start mark (part of the sandbox as the
  // episode found it). Written by the shell: /tmp is a tmpfs the archive API does not see.
  const required = requiredTestsText(task);
  const place =
    required !== undefined ? `mkdir -p -m 700 ${TOOL_STATE_DIR} && printf '%s' ${shellQuote(required)} > ${REQUIRED_TESTS_FILE} && ` : '';
  const track = `${place}${TRACK} init -q && ${TRACK} add -A -f . && ${TRACK} commit -q --no-verify --allow-empty -m base && touch ${START_MARK} && ${WORKSPACE_DIGEST}`;
  const out = await must(
    sb,
    task.mutation ? `${HIDE_HISTORY_COMMAND} && ${track}` : track,
    task.mutation ? 'hiding the task from git and starting the edit tracker' : 'starting the edit tracker',
  );
  return { tree: treeId(out) };
}

function treeId(out: string): string {
  const id = out.trim().split('\n').pop() ?? '';
  if (!/^[0-9a-f]{40,64}$/.test(id))
    throw new TurnwiseError('sandbox-failed', `the edit tracker gave no tree id: ${JSON.stringify(out.slice(-200))}`);
  return id;
}

/**
 * Files changed since the last call, with their text before and after (from the edit tracker);
 * the workspace's digest now (WORKSPACE_DIGEST, the observation cache's key), and whether
 * anything outside the workspace the agent can write changed since the episode started; commits
 * the new state.
 */
export async function collectEdits(sb: Sandbox): Promise<{ edits: FileEdit[]; tree: string; outsideChanged: boolean }> {
  const state = await must(
    sb,
    // Without find (a custom image) the answer is "changed": the cache is never used on a guess.
    `command -v find >/dev/null && test -z "$(${OUTSIDE_CHANGED})" && echo inside-only || echo outside-changed; ${WORKSPACE_DIGEST}`,
    'reading the workspace state',
    30_000,
  );
  const [flag, treeLine] = state.split('\n', 2);
  const outsideChanged = flag !== 'inside-only';
  const tree = treeId(treeLine ?? '');
  // The tracker is the agent's to break (its git folder is in the agent's home): then the turn
  // records no edits, and the episode goes on.
  const listing = await sb.exec(`${TRACK} add -A -f . >/dev/null 2>&1; ${TRACK} diff --cached --name-status --no-renames -z HEAD`, {
    timeoutMs: 30_000,
  });
  if (listing.exitCode !== 0 || listing.truncated) return { edits: [], tree, outsideChanged };
  const rest = listing.stdout;
  const parts = rest.split('\0').filter((p) => p !== '');
  const changes: { status: string; path: string }[] = [];
  for (let i = 0; i + 1 < parts.length; i += 2) changes.push({ status: parts[i], path: parts[i + 1] });
  if (changes.length === 0) return { edits: [], tree, outsideChanged };
  const edits: FileEdit[] = [];
  const readCapped = async (cmd: string): Promise<{ text: string; truncated: boolean }> => {
    const r = await sb.exec(`${cmd} | head -c ${EDIT_TEXT_CAP + 1}`, { timeoutMs: 30_000, maxOutputBytes: EDIT_TEXT_CAP + 1024 });
    const truncated = Buffer.byteLength(r.stdout) > EDIT_TEXT_CAP || r.truncated;
    return { text: truncated ? '' : r.stdout, truncated };
  };
  for (const c of changes.slice(0, EDITS_PER_TURN)) {
    const q = shellQuote(c.path);
    const before = c.status === 'A' ? undefined : await readCapped(`${TRACK} show HEAD:${q}`);
    const after = c.status === 'D' ? undefined : await readCapped(`cat -- ${q}`);
    const truncated = !!before?.truncated || !!after?.truncated;
    edits.push({
      path: c.path,
      before: before ? (truncated ? null : before.text) : null,
      after: after ? (truncated ? null : after.text) : null,
      ...(truncated ? { truncated } : {}),
    });
  }
  await sb.exec(`${TRACK} commit -q --no-verify -m turn`, { timeoutMs: 30_000 });
  return { edits, tree, outsideChanged };
}

/** A model's reply as a turn's action: what runs (or why nothing does) and the turn's `action` text. */
export interface TurnAction {
  parsed: ParsedAction;
  /** The turn's action: the command (or `submit`) for the credit and the views. */
  action: string;
  /** A chat model's whole reply, kept beside the command extracted from it. */
  reply?: string;
}

/**
 * Reads a reply in the model's format. Compact: the text is the command. Chat: the action the
 * model read from its reply when it gave one, else the reply parsed here; the turn's action is
 * the command of its bash block (or `submit`), for a format error the block (or the reply) as written.
 */
export async function readTurnAction(res: ActResult, format: ActionFormatKind = 'compact'): Promise<TurnAction> {
  const ended = res.finishReason === 'stop';
  if (format === 'compact') return { parsed: await parseAction(res.text, ended), action: res.text.trim() };
  const parsed: ChatReply = res.action ?? (await parseChatReply(res.text, ended));
  const action = parsed.kind === 'submit' ? 'submit' : parsed.kind === 'bash' ? parsed.command : (parsed.block ?? res.text).trim();
  return { parsed, action, reply: res.text };
}

/** An inherited turn's action as the parent read it: its command, or the format error it was. */
function inheritedAction(t: Turn): TurnAction {
  const parsed: ParsedAction = t.formatError
    ? { kind: 'format-error', reason: t.formatError }
    : t.action === 'submit'
      ? { kind: 'submit' }
      : { kind: 'bash', command: t.action };
  return { parsed, action: t.action, ...(t.reply !== undefined ? { reply: t.reply } : {}) };
}

/** Where a branch starts (EpisodeOptions.prefix). */
export interface BranchPrefix {
  /** The episode whose first turns are replayed. */
  parent: string;
  turns: readonly Turn[];
  /**
   * Actions the branch's first own turn should not repeat: those its group's episodes already
   * wrote in that state. A draw that repeats one is drawn again with another seed, up to
   * `redraws` times (the last draw stands even if it repeats); the trajectory's `branch.redrawn`
   * counts the draws set aside. A branch that writes what its parent wrote there replays the
   * parent's state and mostly its outcome, so it teaches the update nothing new.
   */
  avoid?: readonly string[];
  redraws?: number;
}

/** The seed of turn `k`'s draw number `draw` (0: the turn's first draw) of an episode seeded `seed`. */
export function turnSeed(seed: number, k: number, draw = 0): number {
  return (seed + Math.imul(k, 0x9e3779b1) + Math.imul(draw, 0x85ebca6b)) >>> 0;
}

/** Runs one episode to the end and returns its trajectory. Never throws for sandbox trouble. */
export async function runEpisode(o: EpisodeOptions): Promise<Trajectory> {
  const started = Date.now();
  const maxTurns = o.maxTurns ?? DEFAULT_MAX_TURNS;
  const timing = o.timing ?? { sandboxMs: 0, modelWaitMs: 0, rewardMs: 0 };
  const turns: Turn[] = [];
  const promptTurns: PromptTurn[] = [];
  const task = taskText(o.task);
  const { bash: signBash, edit: signEdit } = await getSigners();
  let anyFormatError = false;
  // A chat model reads observations of its own cap (CHAT_OBS_CHARS) and format errors that name its reply format.
  const chat = o.format === 'chat';
  const system = chat ? chatSystemMessage(o.task) : undefined;
  let failure: string | undefined;
  let reward: RewardComponents | undefined;
  let testReport: Trajectory['testReport'];
  const timed = async <T>(key: 'sandboxMs' | 'modelWaitMs' | 'rewardMs', f: () => Promise<T>): Promise<T> => {
    const t = Date.now();
    try {
      return await f();
    } finally {
      timing[key] += Date.now() - t;
    }
  };
  const timeoutMs = o.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS;
  // Runs f in a command slot (if the run has them); the time spent waiting for it, in ms, goes to `waited`.
  const inSlot = async <T>(f: () => Promise<T>, waited?: { ms: number }): Promise<T> => {
    if (!o.commandSlots) return f();
    const asked = Date.now();
    return o.commandSlots.use(() => {
      if (waited) waited.ms += Date.now() - asked;
      return f();
    });
  };
  // The workspace's tree id after the last turn; undefined once a command may have left a
  // process running (files could change behind the tracker's back) or changed files outside the
  // workspace (which the tree does not cover), either of which ends caching for the episode.
  let tree: string | undefined;
  const prefix = o.prefix?.turns ?? [];
  const testsKey = seedOf(requiredTestsText(o.task) ?? '').toString(16);
  // Replayed turns whose observation matched the parent's, counted from the first turn.
  let shared = 0;
  // Draws of the branch's first own turn set aside for repeating an avoided action.
  let redrawn = 0;
  let warnedSubmit = false;
  try {
    tree = (await timed('sandboxMs', () => prepareSandbox(o.sandbox, o.task))).tree;
    for (let k = 0; k < maxTurns; k++) {
      if (o.signal?.aborted) throw new TurnwiseError('internal', 'stopped');
      const forced = k < prefix.length ? prefix[k] : undefined;
      let res: Pick<ActResult, 'tokenIds' | 'logprobs' | 'usage'>;
      let read: TurnAction;
      if (forced) {
        res = { tokenIds: forced.tokenIds ?? [], logprobs: forced.logprobs ?? [] };
        read = inheritedAction(forced);
      } else {
        // A branch's first own turn is drawn again while it repeats what its group already wrote there.
        const avoid = k === prefix.length ? o.prefix?.avoid : undefined;
        const redraws = avoid?.length ? (o.prefix?.redraws ?? 0) : 0;
        for (let draw = 0; ; draw++) {
          const got = await timed('modelWaitMs', () =>
            o.act({
              episodeId: o.episodeId,
              task,
              turns: promptTurns,
              ...(system !== undefined ? { system } : {}),
              seed: turnSeed(o.seed, k, draw),
            }),
          );
          res = got;
          read = await readTurnAction(got, o.format);
          if (draw >= redraws || !avoid!.includes(read.action)) break;
          redrawn++;
        }
      }
      const parsed = read.parsed;
      const t0 = Date.now();
      const waited = { ms: 0 };
      const turn: Turn = {
        index: k,
        action: read.action,
        ...(read.reply !== undefined ? { reply: read.reply } : {}),
        observation: '',
        exitCode: null,
        durationMs: 0,
        tokenIds: res.tokenIds,
        logprobs: res.logprobs,
        ...(res.usage ? { usage: res.usage } : {}),
        ...(forced ? { inherited: true } : {}),
      };
      if (parsed.kind === 'submit') {
        if (!o.recoveryFeedback || warnedSubmit || passedSinceLastEdit(turns)) {
          turns.push(turn);
          break;
        }
        // Answered, not ended: the turn counts as any other, and the model reads why.
        warnedSubmit = true;
        turn.feedback = FEEDBACK.submit;
        turn.observation = FEEDBACK.submit;
      } else if (parsed.kind === 'format-error') {
        anyFormatError = true;
        turn.formatError = parsed.reason;
        turn.observation = chat ? chatFormatErrorObservation(parsed.reason) : formatErrorObservation(parsed.reason);
      } else {
        turn.intentSignature = signBash(parsed.command);
        const cache = o.observationCache && tree !== undefined && cacheableCommand(parsed.command) ? o.observationCache : undefined;
        // The task's tests are in the key: tw-test counts only those (REQUIRED_TESTS_FILE).
        const claim = cache?.claim(ObservationCache.key(`${tree!}:${testsKey}`, parsed.command, timeoutMs));
        const replay = claim && 'wait' in claim ? await timed('sandboxMs', () => claim.wait) : undefined;
        let edits: FileEdit[] = [];
        if (replay) {
          turn.exitCode = replay.exitCode;
          turn.observation = replay.observation;
          turn.cached = true;
          if (replay.toolState !== undefined) await timed('sandboxMs', () => restoreToolState(o.sandbox, replay.toolState!));
        } else {
          const before = tree;
          let kept: CachedObservation | undefined;
          try {
            const r = await timed('sandboxMs', () => inSlot(() => o.sandbox.exec(parsed.command, { timeoutMs }), waited));
            turn.exitCode = r.exitCode;
            turn.observation = chat ? chatObservation(r) : observationText(r);
            const after = await timed('sandboxMs', () => collectEdits(o.sandbox));
            edits = after.edits;
            tree = tree === undefined || mayDetach(parsed.command) || after.outsideChanged ? undefined : after.tree;
            if (keepableObservation(turn.observation, r.timedOut) && tree !== undefined && after.tree === before) {
              kept = { exitCode: turn.exitCode, observation: turn.observation };
              if (claim && 'settle' in claim && leavesToolState(parsed.command)) {
                // A replay without the state would leave the numbers of an earlier ranking.
                const state = await timed('sandboxMs', () => readToolState(o.sandbox));
                kept = state === undefined ? undefined : { ...kept, toolState: state };
              }
            }
          } finally {
            if (claim && 'settle' in claim) claim.settle(kept);
          }
        }
        if (edits.length) {
          turn.edits = edits;
          const sig: string[] = [];
          for (const e of edits) {
            if (e.before === null || e.after === null) {
              sig.push(`E:${e.path}::${e.before === null ? '+' : e.after === null ? '-' : '?'}`);
              continue;
            }
            const s = signEdit(e.path, e.before, e.after);
            sig.push(...(s ? s.tokens : [`E:${e.path}::?`]));
          }
          turn.editSignature = sig;
        }
      }
      if (o.recoveryFeedback) {
        const k = turns.findIndex((u) => u.action === turn.action && u.action !== 'submit' && turnFailed(u));
        if (k >= 0) {
          turn.feedback = FEEDBACK.repeat(k);
          turn.observation = `${turn.observation}\n${turn.feedback}`;
        }
      }
      turn.durationMs = Date.now() - t0 - waited.ms;
      if (forced && shared === k && turn.observation === forced.observation && turn.exitCode === forced.exitCode) shared++;
      turns.push(turn);
      promptTurns.push({
        action: turn.action,
        observation: turn.observation,
        ...(forced ? { inherited: { ...(turn.reply !== undefined ? { reply: turn.reply } : {}), tokenIds: turn.tokenIds ?? [] } } : {}),
      });
    }
    o.onActionsDone?.();
    const actions = turns.filter((t) => t.action !== 'submit').length;
    const repeats = repeatedTurns(turns);
    const score = await timed('rewardMs', () =>
      inSlot(() =>
        scoreEpisode(o.sandbox, o.task, {
          originals: o.originals,
          turns: actions,
          maxTurns,
          formatError: anyFormatError,
          repeats,
          weights: o.rewardWeights,
          timeoutMs: o.testTimeoutMs,
        }),
      ),
    );
    reward = score.reward;
    testReport = score.testReport;
  } catch (e) {
    failure = formatError(e);
  }
  if (!reward || failure) {
    const actions = turns.filter((t) => t.action !== 'submit').length;
    reward = computeReward({
      outcomes: undefined,
      failToPass: o.task.fail_to_pass,
      passToPass: o.task.pass_to_pass,
      turns: actions,
      maxTurns,
      formatError: anyFormatError,
      weights: o.rewardWeights,
      error: failure ?? 'no reward',
    });
  }
  const trajectory: Trajectory = {
    schema: SCHEMA.trajectory,
    taskId: o.task.id,
    groupId: o.groupId,
    trajId: o.episodeId,
    checkpoint: o.checkpoint,
    turns,
    ...(testReport ? { testReport } : {}),
    reward,
    ...(o.iteration !== undefined ? { iteration: o.iteration } : {}),
    ...(o.split ? { split: o.split } : {}),
    seed: o.seed,
    startedAt: new Date(started).toISOString(),
    durationMs: Date.now() - started,
    ...(o.prefix ? { branch: { parent: o.prefix.parent, at: prefix.length, shared, ...(redrawn ? { redrawn } : {}) } } : {}),
    ...(failure ? { failure } : {}),
  };
  labelTurns(trajectory, o.task);
  return trajectory;
}
