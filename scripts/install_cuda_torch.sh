#!/usr/bin/env bash
# Installs one of dtrain's CUDA configurations from PyPI into a cached virtual environment: the CUDA
# build of torch (a CUDA LibTorch: headers, libraries, TorchConfig.cmake, NCCL from the nvidia-nccl
# package, and CUDA's runtime libraries with their headers), laid out as a CUDA toolkit in
# <env>/cuda-toolkit for CMake. No system CUDA toolkit is needed (dtrain compiles no CUDA code: no nvcc),
# and the CUDA that dtrain compiles against is always the one LibTorch was built with. Idempotent: an
# environment that already has this configuration is reused. Prints nothing else on stdout but the
# environment's path, so callers can capture it.
#
#   bash scripts/install_cuda_torch.sh [current|volta]      (default: current, or DTRAIN_CUDA_CONFIG)
#
# The configurations (docs/gpu.md, "Two CUDA configurations"; runtime/device/cuda_configs.cpp), each the
# LibTorch whose kernels dtrain's own inventory (runtime/device/cuda_kernel_inventory.h) found for them:
#   current  torch 2.11.0, CUDA 13.0: sm_75 to sm_120 (T4, L4, A10, A100, H100, H200, Blackwell)
#   volta    torch 2.7.1, CUDA 12.6: sm_50 to sm_90 (P4, P100, V100, T4, L4, A100, H100), the newest
#            torch on PyPI with sm_60 and sm_70 kernels (2.8 to 2.10 have sm_70 but no sm_60; 2.11 and
#            later neither)
#
#   DTRAIN_TORCH_VERSION   another torch version than the configuration's
#   DTRAIN_CUDA_PACKAGES   pip requirements for CUDA headers the wheel's dependencies lack
#   DTRAIN_CUDA_TORCH_ENV  where the environment lives
#                          (default ${XDG_CACHE_HOME:-$HOME/.cache}/dtrain/torch-<version>)
set -euo pipefail
cd "$(dirname "$0")/.."

config=${1:-${DTRAIN_CUDA_CONFIG:-current}}
case "$config" in
  current)
    version=2.11.0
    # CUDA 13.0's crt headers (cuda_runtime.h includes them) and CCCL (its headers include that too).
    cuda_packages="nvidia-cuda-crt==13.0.88 nvidia-cuda-cccl==13.0.85"
    ;;
  volta)
    version=2.7.1
    # CUDA 12.6's crt headers (in its nvcc package, which holds no nvcc) and CCCL (cuda_fp16.hpp includes
    # nv/target).
    cuda_packages="nvidia-cuda-nvcc-cu12==12.6.77 nvidia-cuda-cccl-cu12==12.6.77"
    ;;
  *)
    echo "install_cuda_torch: unknown CUDA configuration '$config' (expected current or volta)" >&2
    exit 2
    ;;
esac
version=${DTRAIN_TORCH_VERSION:-$version}
cuda_packages=${DTRAIN_CUDA_PACKAGES:-$cuda_packages}
env_dir=${DTRAIN_CUDA_TORCH_ENV:-${XDG_CACHE_HOME:-$HOME/.cache}/dtrain/torch-$version}
python=/usr/bin/python3  # Debian's interpreter; `python3` on PATH may be another one

if ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "install_cuda_torch: installing python3-venv" >&2
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-venv >&2
fi

# The marker names everything installed: another package list completes the environment.
marker="$env_dir/.dtrain-torch-$version-$(echo "$cuda_packages" | md5sum | cut -c1-8)"
if [ -f "$marker" ]; then
  echo "install_cuda_torch: torch $version ($config) already in $env_dir" >&2
  echo "$env_dir"
  exit 0
fi
echo "install_cuda_torch: installing torch $version ($config; CUDA wheels, 4-5 GB unpacked) into $env_dir" >&2
# An environment of another package list is completed in place: pip keeps what it already has.
[ -x "$env_dir/bin/pip" ] || "$python" -m venv "$env_dir"
rm -f "$env_dir"/.dtrain-torch-*
# The wheel's dependencies (CUDA runtime libraries, cuDNN, NCCL) are what libtorch_cuda.so links to;
# the linker needs them to link dtrain. --no-compile: the builds need LibTorch's C++ files, not the
# bytecode of torch's 5,464 Python files (11 CPU-s per environment); Python writes it on first import.
# shellcheck disable=SC2086  # one word per requirement
"$env_dir/bin/pip" install --disable-pip-version-check --no-input --no-compile -q "torch==$version" $cuda_packages >&2

# The wheels lay CUDA out differently from a toolkit install: one folder per package (CUDA 12) or all in
# nvidia/cu13 (CUDA 13), only versioned libraries (libcudart.so.12) where CMake's CUDA modules look for the
# linker names (libcudart.so), and no version file. cuda-toolkit/ is that toolkit for CMake's
# FindCUDAToolkit: links to every package's headers and libraries, the linker names, and a version.txt
# saying the CUDA runtime's version.
site=$(echo "$env_dir"/lib/python3*/site-packages)
toolkit="$env_dir/cuda-toolkit"
rm -rf "$toolkit"
mkdir -p "$toolkit/include" "$toolkit/lib64"
for pkg in "$site"/nvidia/*/; do
  pkg=${pkg%/}
  if [ -d "$pkg/include" ]; then cp -rsn "$pkg/include/." "$toolkit/include/"; fi
  if [ -d "$pkg/lib" ]; then cp -rsn "$pkg/lib/." "$toolkit/lib64/"; fi
done
for lib in "$toolkit"/lib64/lib*.so.[0-9]*; do
  [ -e "${lib%%.so.*}.so" ] || ln -s "${lib##*/}" "${lib%%.so.*}.so"
done
cudart=$("$env_dir/bin/python" -c '
import importlib.metadata as m
print(*[d.version for d in m.distributions() if d.metadata["Name"].startswith("nvidia-cuda-runtime")][:1])')
for file in include/cuda_runtime.h include/crt/host_config.h lib64/libcudart.so; do
  [ -n "$cudart" ] && [ -e "$toolkit/$file" ] || {
    echo "install_cuda_torch: torch $version and '$cuda_packages' brought no $file (CUDA runtime $cudart)" >&2
    exit 1
  }
done
echo "CUDA Version $cudart" >"$toolkit/version.txt"
touch "$marker"
echo "$env_dir"
