#!/usr/bin/env bash
# What training runs need, on a Debian or Ubuntu machine: a Docker engine, the npm dependencies,
# the build and the sandbox images. Idempotent: reruns reuse what exists.
#   bash scripts/setup.sh           # to train (then: npm run demo)
#   bash scripts/setup.sh --tests   # and the test tools (what `npm test` would install itself)
# As root it installs and starts Docker when no engine answers. Without root it needs an engine
# this user can reach (Docker Desktop, rootless Docker, Podman's socket, the `docker` group);
# the images then build FROM debian:bookworm-slim, which needs a registry. Offline, the base is
# bootstrapped from Debian packages, which needs root once (scripts/bootstrap-base-image.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$(date +%s)
stamp() { echo "[setup +$(( $(date +%s) - t0 ))s] $*"; }
tests=""
for a in "$@"; do
  case "$a" in
    --tests) tests=1 ;;
    *) echo "usage: bash scripts/setup.sh [--tests]" >&2; exit 2 ;;
  esac
done

if [ "$(id -u)" = 0 ]; then
  stamp "Docker engine"
  bash scripts/ci/provision-engine.sh
else
  stamp "not root: using the Docker engine this user can reach (checked when the images build)"
fi

stamp "npm ci"
export ONNXRUNTIME_NODE_INSTALL=skip   # no CUDA provider download (also in .npmrc; see docs/gpus.md)
npm ci --no-audit --no-fund

stamp "build"
npm run --silent build

stamp "sandbox images"
# FROM debian:bookworm-slim when a registry is reachable, else FROM a base bootstrapped from
# Debian packages; skips what exists. `--base IMAGE` (or TURNWISE_BASE_IMAGE) names a mirror.
node dist/cli.js images build

if [ -n "$tests" ]; then
  stamp "test tools"
  bash scripts/setup-test-tools.sh
fi
stamp "setup done"
