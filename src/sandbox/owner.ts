// Who owns a container: the labels every Turnwise container carries, and the test the reaper
// uses to decide that an owner is gone. A pid alone is not enough (pids are reused), so the
// owner label is `pid:starttime`, the start time read from /proc (clock ticks since boot).
import * as fs from 'node:fs';
import * as os from 'node:os';

export const LABEL = {
  /** Present on every Turnwise container: the run it belongs to. */
  run: 'turnwise.run',
  rollout: 'turnwise.rollout',
  /** `pid:starttime` of the owning process. */
  owner: 'turnwise.owner',
  /** Host name of the owning process: owners on other machines cannot be checked from here. */
  host: 'turnwise.host',
  /** Set on snapshot images: the workspace content hash. */
  snapshot: 'turnwise.snapshot',
  workspace: 'turnwise.workspace',
  /** The sandbox pool that started a container (several pools may serve one run in one process). */
  pool: 'turnwise.pool',
} as const;

/** Start time of a process in clock ticks since boot, or undefined where /proc is missing. */
export function processStartTime(pid: number): string | undefined {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'latin1');
    // The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields[19]; // field 22 overall
  } catch {
    return undefined;
  }
}

let selfOwner: string | undefined;

/** The owner label value for this process. */
export function ownerId(): string {
  if (!selfOwner) selfOwner = `${process.pid}:${processStartTime(process.pid) ?? `t${Math.round(Date.now() / 1000 - process.uptime())}`}`;
  return selfOwner;
}

export type OwnerState = 'alive' | 'gone' | 'unknown';

/** Whether the owner named in a label still runs on this host. */
export function ownerState(owner: string | undefined, host: string | undefined, thisHost = os.hostname()): OwnerState {
  if (!owner) return 'gone'; // an unlabelled Turnwise container has no one to come back for it
  if (host && host !== thisHost) return 'unknown';
  const [pidText, start] = owner.split(':');
  const pid = Number(pidText);
  if (!Number.isInteger(pid) || pid <= 0) return 'gone';
  if (start?.startsWith('t')) {
    // No /proc where it was written: only the pid can be checked.
    try {
      process.kill(pid, 0);
      return 'alive';
    } catch (e) {
      return (e as NodeJS.ErrnoException).code === 'EPERM' ? 'alive' : 'gone';
    }
  }
  const now = processStartTime(pid);
  if (now === undefined) return fs.existsSync('/proc/self/stat') ? stateWithoutStat(pid) : 'unknown';
  return now === start ? 'alive' : 'gone';
}

/**
 * /proc has no readable entry for `pid`. With /proc mounted hidepid, another user's live
 * process looks exactly like that, so ask the kernel: no such process is gone; one that exists
 * (EPERM: another user's) cannot be matched to the owner's start time, so it is left alone.
 */
export function stateWithoutStat(pid: number, kill: (pid: number, signal: 0) => void = (p, sig) => void process.kill(p, sig)): OwnerState {
  try {
    kill(pid, 0);
    return 'unknown';
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ESRCH' ? 'gone' : 'unknown';
  }
}
