#!/usr/bin/env bash
# Builds a dtrain container image with buildah, without a Docker engine or registry access: the Debian 12
# base image is made with debootstrap from the machine's own apt mirror, then deploy/docker/Dockerfile.<kind>
# is built on it (chroot isolation, vfs storage: works unprivileged-container-in-VM as on CI machines).
#
#   bash scripts/build_image.sh cpu|cuda|cuda-volta [--with-data] [--tag dtrain:cpu] [--cxx-flags FLAGS]
#
# --cxx-flags: the compiler flags of dtrain's Release build (default "-O3 -DNDEBUG").
# cuda is dtrain's current CUDA configuration (T4 and newer GPUs), cuda-volta its Volta/Pascal one (P4,
# P100, V100): deploy/docker/Dockerfile.cuda with CUDA_CONFIG=volta (docs/deploy.md).
# Prints the image's size at the end. Environment: STORAGE_DRIVER (default vfs), BASE_IMAGE (skip debootstrap
# and build on this image instead, e.g. docker.io/library/debian:bookworm where a registry is reachable),
# PIP_CERT (the CA bundle pip trusts inside the build; default: the host's system bundle).
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-cpu}
shift || true
with_data=0
tag=""
cxx_flags=()
while [ $# -gt 0 ]; do
  case "$1" in
    --with-data) with_data=1; shift ;;
    --tag) tag=$2; shift 2 ;;
    --cxx-flags) cxx_flags=(--build-arg "CXX_FLAGS_RELEASE=$2"); shift 2 ;;
    *) echo "build_image: unknown option '$1' (expected --with-data, --tag TAG, --cxx-flags FLAGS)" >&2; exit 2 ;;
  esac
done
config_arg=()
case "$kind" in
  cpu | cuda) dockerfile=deploy/docker/Dockerfile.$kind ;;
  cuda-volta) dockerfile=deploy/docker/Dockerfile.cuda; config_arg=(--build-arg CUDA_CONFIG=volta) ;;
  *) echo "build_image: unknown kind '$kind' (kinds: cpu, cuda, cuda-volta)" >&2; exit 2 ;;
esac
tag=${tag:-dtrain:$kind}
export STORAGE_DRIVER=${STORAGE_DRIVER:-vfs}

need=()
command -v buildah >/dev/null || need+=(buildah)
command -v debootstrap >/dev/null || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

base=${BASE_IMAGE:-$(bash scripts/debian_base_image.sh)}

# The CA bundle the host trusts, for steps that download (pip in the CUDA image): a build secret, never a layer.
ca=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}
secret=()
[ -s "$ca" ] && secret=(--secret "id=pip-ca,src=$ca")
buildah bud --isolation chroot --layers=false --build-arg BASE="$base" --build-arg WITH_DATA="$with_data" \
  "${config_arg[@]}" "${cxx_flags[@]}" "${secret[@]}" -f "$dockerfile" -t "$tag" .
buildah images --format '{{.Name}}:{{.Tag}} {{.Size}}' "$tag"
