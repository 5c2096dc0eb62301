#!/usr/bin/env bash
# Everything the tests and the main job need, on a Debian 12 machine (root for the system part):
# system packages + a running Docker engine, npm dependencies, the build, the sandbox base image
# (bootstrapped from Debian packages when no registry has it), and the VS Code test tools
# (code-server, Playwright; cached outside the checkout). Idempotent: reruns reuse what exists.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
stamp() { echo "[setup +$(( $(date +%s) - t0 ))s] $*"; }

if [ "$(id -u)" = 0 ]; then
  stamp "system packages and Docker engine"
  bash scripts/ci/provision-system.sh
else
  stamp "not root: skipping system packages; Docker, debootstrap and Chromium must already be there"
  docker info >/dev/null 2>&1 || { echo "Docker is not reachable: start it, or run this script as root" >&2; exit 1; }
fi

stamp "npm ci"
export ONNXRUNTIME_NODE_INSTALL=skip   # no CUDA provider download (also in .npmrc; see README "CUDA")
npm ci --no-audit --no-fund

stamp "build"
npm run --silent build

stamp "test fixtures' runners (mocha, jest)"
for fx in test/fixtures/js-mocha test/fixtures/js-jest; do
  (cd "$fx" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error)
done

stamp "sandbox images"
bash scripts/bootstrap-base-image.sh      # base from Debian packages when no registry has it
node dist/cli.js images build            # language images on top; skips what exists

stamp "VS Code test tools"
bash scripts/ci/provision-vscode-test.sh
stamp "setup done"
