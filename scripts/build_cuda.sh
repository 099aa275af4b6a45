#!/usr/bin/env bash
# Builds dtrain's whole CUDA configuration (GPU training step, NCCL backend, tests and benchmarks)
# against PyPI's CUDA LibTorch, into ${BUILD_DIR:-build-cuda}. Needs a CUDA toolkit (nvcc; found
# through CUDAToolkit_ROOT, PATH or /usr/local/cuda). Runs on machines without a GPU: it proves that
# the GPU code compiles and links. Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."

env_dir=$(bash scripts/install_cuda_torch.sh)
site=$(echo "$env_dir"/lib/python3*/site-packages)
# The torch package root, not its share/cmake: TorchConfig looks for libtorch.so in <prefix>/lib, and
# would otherwise pick up a system LibTorch (Debian's) first.
torch_prefix="$site/torch"

if [ -z "${CUDAToolkit_ROOT:-}" ] && ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDAToolkit_ROOT=/usr/local/cuda
fi
if [ -z "${CUDAToolkit_ROOT:-}" ] && ! command -v nvcc >/dev/null; then
  echo "build_cuda: no CUDA toolkit found (set CUDAToolkit_ROOT, put nvcc on PATH, or install it in /usr/local/cuda)" >&2
  exit 1
fi

# The GPU hosts configure with pip's CMake 4 (and link with g++'s --as-needed default, as Debian's g++
# does too); this build does the same, so that CI links the way they do. Its test build_libstdcxx_first
# then fails if any binary would bind a libstdc++ symbol to LibTorch's copies.
cmake_version=${DTRAIN_CMAKE_VERSION:-4.4.4}
cmake_bin="$env_dir/bin/cmake"
if ! "$cmake_bin" --version 2>/dev/null | grep -q "version $cmake_version\$"; then
  echo "build_cuda: installing CMake $cmake_version from PyPI into $env_dir" >&2
  "$env_dir/bin/pip" install --disable-pip-version-check --no-input -q "cmake==$cmake_version" >&2
fi

build_dir=${BUILD_DIR:-build-cuda}
# NCCL comes from the nvidia-nccl package beside torch, as on the GPU hosts (cmake/FindNCCL.cmake).
"$cmake_bin" -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} \
  -DCMAKE_PREFIX_PATH="$torch_prefix" -DNCCL_ROOT="$site/nvidia/nccl" -DDTRAIN_WITH_NCCL=ON "$@"
if ! grep -q '^DTRAIN_TORCH_HAS_CUDA:INTERNAL=ON' "$build_dir/CMakeCache.txt" \
   || ! grep -q '^DTRAIN_HAVE_NCCL:INTERNAL=ON' "$build_dir/CMakeCache.txt"; then
  echo "build_cuda: $build_dir lacks CUDA LibTorch or NCCL; see the cmake output above" >&2
  exit 1
fi
"$cmake_bin" --build "$build_dir" --parallel "$(nproc)"
