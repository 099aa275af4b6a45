#!/usr/bin/env bash
# Makes the Debian 12 base image that dtrain's images and container tests start from, unless it exists:
# debootstrap (minbase) from the machine's own apt mirror, committed with buildah as
# localhost/dtrain-base:bookworm (no registry needed). Prints the image's name. Needs buildah and
# debootstrap (scripts/install_deps.sh deploy) and root, as debootstrap does.
# Environment: STORAGE_DRIVER (default vfs).
set -euo pipefail
export STORAGE_DRIVER=${STORAGE_DRIVER:-vfs}
base=localhost/dtrain-base:bookworm
if ! buildah inspect --type image "$base" >/dev/null 2>&1; then
  # The first deb.debian.org-style URI of the machine's bookworm sources (deb822 or one-line format).
  mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $3 ~ /^bookworm$/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  mirror=${mirror:-http://deb.debian.org/debian}
  rootfs=$(mktemp -d)
  trap 'rm -rf "$rootfs" "$rootfs.tar"' EXIT
  echo "debian_base_image: debootstrap bookworm from $mirror" >&2
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >/dev/null
  echo "deb $mirror bookworm main" >"$rootfs/etc/apt/sources.list"
  tar -C "$rootfs" -cf "$rootfs.tar" .
  container=$(buildah from scratch)
  buildah add "$container" "$rootfs.tar" / >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd /bin/bash "$container"
  buildah commit --rm "$container" "$base" >/dev/null
fi
echo "$base"
