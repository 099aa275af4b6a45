#!/usr/bin/env bash
# Installs PyPI's CUDA build of torch (a CUDA LibTorch: headers, libraries, TorchConfig.cmake, and NCCL
# from the nvidia-nccl package) into a cached virtual environment, the version our GPU hosts run.
# Idempotent: an environment that already has this version is reused. Prints nothing else on stdout
# but the environment's path, so callers can capture it.
#
#   DTRAIN_TORCH_VERSION   torch version to install (default 2.11.0)
#   DTRAIN_CUDA_TORCH_ENV  where the environment lives
#                          (default ${XDG_CACHE_HOME:-$HOME/.cache}/dtrain/torch-<version>)
set -euo pipefail
cd "$(dirname "$0")/.."

version=${DTRAIN_TORCH_VERSION:-2.11.0}
env_dir=${DTRAIN_CUDA_TORCH_ENV:-${XDG_CACHE_HOME:-$HOME/.cache}/dtrain/torch-$version}
python=/usr/bin/python3  # Debian's interpreter; `python3` on PATH may be another one

if ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "install_cuda_torch: installing python3-venv" >&2
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-venv >&2
fi

marker="$env_dir/.dtrain-torch-$version"
if [ -f "$marker" ]; then
  echo "install_cuda_torch: torch $version already in $env_dir" >&2
else
  echo "install_cuda_torch: installing torch $version (CUDA wheel, ~4.6 GB unpacked) into $env_dir" >&2
  rm -rf "$env_dir"
  "$python" -m venv "$env_dir"
  # The wheel's dependencies (CUDA runtime libraries, cuDNN, NCCL) are what libtorch_cuda.so links to;
  # the linker needs them to link dtrain.
  "$env_dir/bin/pip" install --disable-pip-version-check --no-input -q "torch==$version" >&2
  touch "$marker"
fi
echo "$env_dir"
