// Observations of read-only tool commands, shared by the episodes of a run. In RL the G episodes
// of a group start from the same workspace and usually open with the same command (`tw-suspects`,
// up to 24 test runs), and their later states often coincide too (the same one-line fix, then
// `tw-test`). When such a command has already run on the identical workspace (same edit-tracker
// tree id) its recorded observation is replayed instead of running it again; an episode that
// asks while the first run is still going waits for it rather than starting a second. Only
// commands whose output depends on the workspace files alone are eligible (the sandbox's
// deterministic test tools), and an observation is kept only if the run changed no file, did
// not time out and was not cut short by the tool's own time guard. A test suite whose output
// varies between identical runs should turn the cache off (config `cacheObservations`).

import type { Trajectory } from '../core/schema';

/** What a command produced, as the episode records it. */
export interface CachedObservation {
  exitCode: number | null;
  observation: string;
  /** The tool state the command left (TOOL_STATE_FILE), put back in the container of a replay. */
  toolState?: string;
}

/**
 * Where the sandbox's tools keep what a later command reads: `tw-suspects` saves the lines it
 * ranked, which `tw-show K`, `tw-tokens K` and `tw-edit K …` address by number. Outside the
 * workspace and read by no cacheable tool, so a change there does not end the cache (the
 * episode's outside-the-workspace check leaves the folder out); a replayed `tw-suspects` puts
 * the file back, so the numbers mean the same lines as in the episode that ran it.
 */
export const TOOL_STATE_DIR = '/tmp/turnwise-tools';
export const TOOL_STATE_FILE = `${TOOL_STATE_DIR}/suspects.json`;
/**
 * The task's tests, one id per line, written as an episode starts: `tw-test` and `tw-suspects`
 * count only these, so a test the workspace ships broken (failing before the bug too) neither
 * makes `tw-test` fail after the right fix nor points `tw-suspects` at the lines it runs
 * (sandbox-images/python/tools/turnwise_tools.py, REQUIRED_FILE).
 */
export const REQUIRED_TESTS_FILE = `${TOOL_STATE_DIR}/required-tests`;

/** The task's tests as REQUIRED_TESTS_FILE holds them (sorted, one per line), or undefined when the task lists none. */
export function requiredTestsText(task: { fail_to_pass: readonly string[]; pass_to_pass: readonly string[] }): string | undefined {
  const ids = [...new Set([...task.fail_to_pass, ...task.pass_to_pass])].filter((id) => !id.includes('\n')).sort();
  return ids.length ? `${ids.join('\n')}\n` : undefined;
}

/** Whether a cacheable command leaves tool state that its replay must restore. */
export function leavesToolState(command: string): boolean {
  return /^tw-suspects\b/.test(command.trim());
}

/** The sandbox's tools whose output is a function of the workspace files (and their arguments). */
const CACHEABLE = /^(tw-suspects|tw-test)( +[A-Za-z0-9_./:=@-]+)*$/;

/**
 * The last line `tw-suspects` prints when its time guard (80% of the command's limit) stopped the
 * mutation analysis: on a busy machine the ranking is then partial, and depends on the load, not
 * on the files alone (sandbox-images/python/tools/turnwise_tools.py, CUT_SHORT).
 */
export const CUT_SHORT_MARKER = '(ranking cut short by the time limit';

/**
 * Whether an observation may stand for every later run of its command on the same files: not
 * after a timeout, and not when the tool says its answer was cut short by the clock.
 */
export function keepableObservation(observation: string, timedOut: boolean): boolean {
  return !timedOut && !observation.includes(CUT_SHORT_MARKER);
}

/** Whether `command` (as parsed from an action) may be answered from the cache. */
export function cacheableCommand(command: string): boolean {
  return CACHEABLE.test(command.trim());
}

/**
 * Whether `command` may leave a process running after it returns (which could change files
 * between turns, so the tree recorded after the turn would no longer describe the workspace).
 * Conservative: any `&` that is not part of `&&`, `&>`, `>&` or `<&`, or a detaching command.
 */
export function mayDetach(command: string): boolean {
  const stripped = command.replace(/&&|&>|[<>]&/g, '');
  return stripped.includes('&') || /\b(nohup|setsid|disown|daemon)\b/.test(command);
}

/** Claim on a key: a finished or in-flight observation to wait for, or the duty to produce it. */
export type CacheClaim = { wait: Promise<CachedObservation | undefined> } | { settle: (value: CachedObservation | undefined) => void };

export class ObservationCache {
  private readonly entries = new Map<string, Promise<CachedObservation | undefined>>();

  constructor(readonly maxEntries = 4096) {}

  /** The key of `command` run on the workspace whose edit-tracker tree is `tree`. */
  static key(tree: string, command: string, timeoutMs: number): string {
    return `${tree}\u0000${timeoutMs}\u0000${command.trim()}`;
  }

  /**
   * Synchronous, so two episodes cannot both become the producer of one key. The producer must
   * call `settle` exactly once: with the observation to keep, or undefined (not cacheable after
   * all: it changed files, timed out, or failed), which frees the key and wakes any waiters,
   * who then run the command themselves.
   */
  claim(key: string): CacheClaim {
    const have = this.entries.get(key);
    if (have) return { wait: have };
    let resolve!: (v: CachedObservation | undefined) => void;
    const p = new Promise<CachedObservation | undefined>((r) => (resolve = r));
    this.entries.set(key, p);
    // Oldest first out: a Map iterates in insertion order.
    while (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
    let settled = false;
    return {
      settle: (value) => {
        if (settled) return;
        settled = true;
        if (value === undefined && this.entries.get(key) === p) this.entries.delete(key);
        resolve(value);
      },
    };
  }

  get size(): number {
    return this.entries.size;
  }
}

/** Of the commands the episodes ran (format errors and `submit` left out), the fraction replayed from the cache. */
export function cachedTurnFraction(trajs: readonly Trajectory[]): number {
  const commands = trajs.flatMap((t) => t.turns.filter((x) => x.action !== 'submit' && x.formatError === undefined));
  return commands.length ? commands.filter((x) => x.cached).length / commands.length : 0;
}
