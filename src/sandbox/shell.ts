// The persistent shell: one bash started as the container's main process, attached once, that
// runs each command as a fresh child and marks its end with a sentinel on stdout and stderr.
// An engine-API exec costs ~70 ms (runc sets up a process); this costs ~1-3 ms.
//
// State between commands (tell the agent): NOTHING carries over except the filesystem. Each
// command starts in the workspace (or the cwd asked for) with the login environment; `cd`,
// `export`, shell functions and background processes end with the command (leftover processes
// in the command's process group are killed when it returns). Each command sees its own time
// limit as TW_COMMAND_TIMEOUT_MS, so a tool can fit its work inside it.

/** For the agent's prompt: what carries over between commands. */
export const SHELL_STATE_NOTE =
  'Each command runs in a fresh bash in /workspace: files persist between commands, but cd, exported variables and background processes do not.';

/** Printed on both streams once the shell is ready. */
export const READY_MARKER = '\0TWREADY\0';

/**
 * The server, passed as `bash -lc SERVER` (so it ships with the code, not the image).
 * Protocol, host to container on stdin: `ID TIMEOUT_MS PRELUDE_BYTES COMMAND_BYTES\n`, then
 * the prelude (host-quoted `cd`/`export` lines) and the command, byte counted.
 * Container to host, after the command's output on each stream: `\0TW<ID>:<rc>:<oom>:<timedout>\0`.
 * LC_ALL=C is a shell variable here, not exported: `read -N` counts bytes, children keep LANG.
 *
 * The server runs as root with only the capabilities to change user, to signal and to empty a
 * child's capability bounding set (no file access beyond root's own); every command runs as the
 * sandbox user ($TW_UID:$TW_GID, no capabilities, an empty bounding set, no groups). A command can then neither signal the server nor open its
 * descriptors in /proc: with the server's uid, one command could stop it, read the next
 * requests with their ids from its stdin and answer them itself (scoring's included). Nothing
 * a command can see holds an id: a long command is read from descriptor 3, not from a file
 * named after its id.
 */
export const SHELL_SERVER = String.raw`
LC_ALL=C
# In a sandbox TW_UID and TW_GID are set (container.ts) and every command drops to them; without
# them (the protocol's own tests, run by a user on the host) commands run as the server does.
drop=(); [[ -n $TW_UID ]] && drop=(setpriv --reuid="$TW_UID" --regid="$TW_GID" --clear-groups --inh-caps=-all --bounding-set=-all)
# No command may run with the server's identity: without setpriv the shell does not start.
[[ -n $TW_UID ]] && ! command -v setpriv >/dev/null && { echo 'turnwise: the sandbox image has no setpriv (util-linux)' >&2; exit 3; }
rund=${'$'}{TW_RUN_DIR:-/run/turnwise}
mkdir -p -m 700 "$rund"
cd /workspace 2>/dev/null || cd /
oomf=/sys/fs/cgroup/memory.events
[[ -r $oomf ]] || oomf=/sys/fs/cgroup/memory/memory.oom_control
oomcount() { __oom=0; local k v; [[ -r $oomf ]] || return 0; while read -r k v; do [[ $k == oom_kill ]] && __oom=$v; done < "$oomf"; }
printf '\0TWREADY\0'; printf '\0TWREADY\0' >&2
while IFS=' ' read -r id tmo plen clen; do
  pre=''; cmd=''
  (( plen > 0 )) && IFS= read -r -d '' -N "$plen" pre
  (( clen > 0 )) && IFS= read -r -d '' -N "$clen" cmd
  oomcount; o0=$__oom
  printf -v tsec '%d.%03d' $(( tmo / 1000 )) $(( tmo % 1000 ))
  t0=${'$'}{EPOCHREALTIME/./}
  # One argument may not exceed 128 KiB (MAX_ARG_STRLEN): a longer command goes through a file,
  # in the server's own folder, handed over as an open descriptor (its name holds the id).
  if (( clen > 100000 )); then cf=$rund/cmd-$id; printf '%s' "$cmd" > "$cf"; set -- bash /dev/fd/3; else cf=/dev/null; set -- bash -c "$cmd"; fi
  # The prelude (cd, exports) runs as the sandbox user too: a workspace it made unreadable to
  # others is still its own.
  ( export TW_COMMAND_TIMEOUT_MS=$tmo; exec "${'$'}{drop[@]}" timeout -k 2 "$tsec" bash -c "$pre"$'\n''exec "$@"' tw "$@" ) </dev/null 3<"$cf" &
  pid=$!
  { wait "$pid"; } 2>/dev/null; rc=$?
  kill -KILL -- "-$pid" 2>/dev/null
  [[ $cf != /dev/null ]] && rm -f "$cf"
  t1=${'$'}{EPOCHREALTIME/./}
  oomcount
  to=0
  (( (rc == 124 || rc == 137) && (t1 - t0) / 1000 >= tmo )) && to=1
  printf '\0TW%s:%s:%s:%s\0' "$id" "$rc" "$(( __oom - o0 ))" "$to"
  printf '\0TW%s:%s:%s:%s\0' "$id" "$rc" "$(( __oom - o0 ))" "$to" >&2
done
`;

/** Quotes a word for bash: bare when it has only characters bash never interprets, else single quotes. */
export function shellQuote(s: string): string {
  return /^[A-Za-z0-9_./:=@%+-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The request bytes for one command. Throws on env names bash cannot export. */
export function encodeRequest(id: string, command: string, timeoutMs: number, cwd: string, env: Record<string, string> = {}): Buffer {
  const lines = [`cd -- ${shellQuote(cwd)} || exit 126`];
  for (const [k, v] of Object.entries(env)) {
    if (!ENV_NAME.test(k)) throw new Error(`environment variable name ${JSON.stringify(k)} is not valid`);
    lines.push(`export ${k}=${shellQuote(v.replace(/\0/g, ''))}`);
  }
  const pre = Buffer.from(lines.join('\n'), 'utf8');
  // bash's `read` drops NUL bytes anyway; removing them keeps the byte count honest.
  const cmd = Buffer.from(command.replace(/\0/g, ''), 'utf8');
  const ms = Math.max(1, Math.round(timeoutMs));
  return Buffer.concat([Buffer.from(`${id} ${ms} ${pre.length} ${cmd.length}\n`), pre, cmd]);
}

export interface SentinelFields {
  exitCode: number;
  oomKills: number;
  timedOut: boolean;
}

export function parseSentinelFields(fields: string): SentinelFields {
  const [rc, oom, to] = fields.split(':').map(Number);
  if (![rc, oom, to].every(Number.isFinite)) throw new Error(`malformed sentinel fields ${JSON.stringify(fields)}`);
  return { exitCode: rc, oomKills: oom, timedOut: to === 1 };
}

export function sentinelMarker(id: string): Buffer {
  return Buffer.from(`\0TW${id}:`, 'latin1');
}
