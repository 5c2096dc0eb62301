#!/usr/bin/env bash
# Builds the sandbox base image from Debian packages with debootstrap + `docker import`: the
# offline fallback for machines where no container registry can be reached (with a registry,
# `turnwise images build` starts FROM debian:bookworm-slim and needs neither root nor this).
# Needs root and debootstrap, on a Debian host.
# Usage: scripts/bootstrap-base-image.sh [TAG]   (default: the tag printed by --print-tag)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
pkgfile="$here/sandbox-images/base/packages.txt"
pkgs=$(grep -v '^\s*#' "$pkgfile" | grep -v '^\s*$' | paste -sd, -)
hash=$(printf '%s' "$pkgs" | sha256sum | cut -c1-12)
tag="turnwise/base:bookworm-$hash"
if [ "${1:-}" = "--print-tag" ]; then echo "$tag"; exit 0; fi
tag="${1:-$tag}"

if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "base image $tag already present"
  exit 0
fi
command -v debootstrap >/dev/null || { echo "debootstrap is not installed: apt-get install -y debootstrap" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "bootstrapping a base image needs root (debootstrap)" >&2; exit 1; }

# The mirror comes from the machine's own apt sources, never from this repository.
mirror=$( (grep -hoE '^(URIs:|deb) +[a-z]+://[^ ]+' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null || true) \
  | (grep -v security || true) | awk 'NR==1 {print $2}')
[ -n "$mirror" ] || { echo "no Debian mirror found in /etc/apt/sources.list*" >&2; exit 1; }

rootfs=$(mktemp -d /tmp/turnwise-rootfs.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
echo "debootstrap bookworm from $mirror with: $pkgs"
debootstrap --variant=minbase --include="$pkgs" bookworm "$rootfs" "$mirror" >"$rootfs.log" 2>&1 \
  || { tail -30 "$rootfs.log" >&2; echo "debootstrap failed (log above)" >&2; exit 1; }
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["bash"]' - "$tag" >/dev/null
rm -f "$rootfs.log"
echo "imported $tag"
