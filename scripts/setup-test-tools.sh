#!/usr/bin/env bash
# The test tiers' own tools, installed by `npm test` (scripts/test.mjs) before the tiers run:
#   unit tier: llama.cpp (node-llama-cpp and its prebuilt CPU binary) and a GGUF reader, which
#     check the GGUF export (test/tools/llama-cpp, from its lockfile, optional GPU builds left out)
#   docker tier: the Node test fixtures' runners (mocha, jest: npm ci in each fixture)
#   webgpu tier: a WebGPU adapter (Mesa's lavapipe without a GPU)
#   vscode tier: Chromium, code-server and Playwright (cached outside the checkout)
#   bash scripts/setup-test-tools.sh [unit|webgpu|docker|vscode ...]   (default: all tiers)
# As root it installs the system packages (scripts/ci/provision-system.sh, also the Docker
# engine). Without root it says which packages are missing; the tier that needs one then fails
# with the reason. Idempotent and quick when everything is there.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
stamp() { echo "[test-tools +$(( $(date +%s) - t0 ))s] $*"; }
tiers=" ${*:-unit webgpu docker vscode} "
want() { [[ "$tiers" == *" $1 "* ]]; }

if want webgpu || want vscode || want docker; then
  if [ "$(id -u)" = 0 ]; then
    stamp "system packages (Chromium, build tools, lavapipe) and the Docker engine"
    bash scripts/ci/provision-system.sh
  else
    missing=()
    for p in chromium build-essential pkg-config libkrb5-dev mesa-vulkan-drivers; do
      dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] || stamp "not root: not installing ${missing[*]} (sudo bash scripts/ci/provision-system.sh installs them)"
  fi
fi

# npm writes node_modules/.package-lock.json on install: newer than the lockfile means done.
installed() { [ -f "$1/node_modules/.package-lock.json" ] && [ "$1/node_modules/.package-lock.json" -nt "$1/package-lock.json" ]; }

if want unit; then
  stamp "llama.cpp for the GGUF export's tests (node-llama-cpp, CPU binary)"
  # Only the registry's packages: --ignore-scripts keeps node-llama-cpp from building or
  # downloading anything, --omit=optional leaves out its CUDA and Vulkan builds (~350 MB).
  # `npm install --no-save` from the lockfile rather than `npm ci`: node-llama-cpp names optional
  # builds for platforms of which the registry has no 3.22.1, which `npm ci` counts as a lockfile
  # out of sync; the lockfile pins every package that is installed all the same.
  installed test/tools/llama-cpp ||
    (cd test/tools/llama-cpp && npm install --no-save --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error)
fi

if want docker; then
  stamp "test fixtures' runners (mocha, jest)"
  for fx in test/fixtures/js-mocha test/fixtures/js-jest; do
    if installed "$fx"; then continue; fi
    (cd "$fx" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
  done
fi

if want vscode; then
  stamp "VS Code test tools (code-server, Playwright)"
  bash scripts/ci/provision-vscode-test.sh || stamp "the VS Code test tools could not be installed (above); the vscode tier will say what is missing"
fi
stamp "test tools ready"
