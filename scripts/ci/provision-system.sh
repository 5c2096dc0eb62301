#!/usr/bin/env bash
# The system packages the test tiers need on a Debian 12 machine, as root: Chromium and the
# build tools code-server's native modules need (vscode tier), a WebGPU adapter without a GPU
# (Mesa's lavapipe, a Vulkan driver on the CPU, for the webgpu tier), and the Docker engine
# (scripts/ci/provision-engine.sh). Called by scripts/setup-test-tools.sh. Idempotent.
set -euo pipefail
need=()
for p in chromium build-essential pkg-config libkrb5-dev python3 git; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "apt: installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# WebGPU adapter: ONNX Runtime's WebGPU provider (Dawn) needs a Vulkan driver. Without a GPU,
# Mesa's lavapipe is one; Dawn refuses the lavapipe of Mesa 22 (bookworm: it lacks
# shaderUniformBufferArrayDynamicIndexing) and takes Mesa >= 24's, which bookworm has in backports.
mesa_major=$(dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null | cut -d. -f1 || true)
if [ "${mesa_major:-0}" -lt 24 ]; then
  . /etc/os-release
  from=()
  if [ "${VERSION_CODENAME:-}" = bookworm ]; then
    if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
      printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        >/etc/apt/sources.list.d/turnwise-backports.sources
    fi
    from=(-t bookworm-backports)
  fi
  echo "apt: installing mesa-vulkan-drivers (lavapipe) ${from[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${from[@]}" mesa-vulkan-drivers libvulkan1 >/dev/null
fi
echo "vulkan: mesa-vulkan-drivers $(dpkg-query -W -f='${Version}' mesa-vulkan-drivers)"

bash "$(dirname "$0")/provision-engine.sh"
