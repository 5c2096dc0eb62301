#!/usr/bin/env bash
# The Docker engine the sandboxes run on, on a Debian machine, as root: installs docker.io when
# there is no engine, and debootstrap (for the offline base image), then starts dockerd without
# a bridge network (sandboxes use NetworkMode none; nothing may leave the machine) when no
# engine answers. Idempotent: reuses a running engine. A user without root needs none of this:
# Docker Desktop, rootless Docker, Podman's socket or membership of the `docker` group will do.
set -euo pipefail
need=()
docker info >/dev/null 2>&1 || command -v dockerd >/dev/null || need+=(docker.io)
command -v debootstrap >/dev/null || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
  echo "apt: installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  echo "starting dockerd"
  mkdir -p /var/log
  setsid dockerd --bridge=none --iptables=false --ip-forward=false --ip-masq=false \
    >/var/log/turnwise-dockerd.log 2>&1 </dev/null &
  echo $! >/run/turnwise-dockerd.pid
  for _ in $(seq 1 120); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || { tail -20 /var/log/turnwise-dockerd.log >&2; echo "dockerd did not start" >&2; exit 1; }
fi
echo "docker engine $(docker version --format '{{.Server.Version}}')"
