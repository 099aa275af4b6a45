#!/usr/bin/env bash
# Builds dtrain's whole CUDA configuration (GPU training step, NCCL backend, tests and benchmarks)
# against PyPI's CUDA LibTorch, CUDA headers and NCCL (scripts/install_cuda_torch.sh: no system CUDA
# toolkit needed). Runs on machines without a GPU: it proves that the GPU code compiles and links.
#
#   bash scripts/build_cuda.sh [current|volta] [CMAKE_ARGS...]
#
# current (default) into ${BUILD_DIR:-build-cuda}, volta (P100, V100: docs/gpu.md) into
# ${BUILD_DIR:-build-cuda-volta}. Extra arguments go to cmake; BUILD_TARGETS (space-separated) builds
# only those targets.
set -euo pipefail
cd "$(dirname "$0")/.."

config=current
case "${1:-}" in
  current | volta) config=$1; shift ;;
  -*|"") ;;
  *) echo "build_cuda: unknown CUDA configuration '$1' (expected current or volta)" >&2; exit 2 ;;
esac
env_dir=$(bash scripts/install_cuda_torch.sh "$config")
site=$(echo "$env_dir"/lib/python3*/site-packages)
# The torch package root, not its share/cmake: TorchConfig looks for libtorch.so in <prefix>/lib, and
# would otherwise pick up a system LibTorch (Debian's) first.
torch_prefix="$site/torch"

# The GPU hosts configure with pip's CMake 4 (and link with g++'s --as-needed default, as Debian's g++
# does too); this build does the same, so that CI links the way they do. Its test build_libstdcxx_first
# then fails if any binary would bind a libstdc++ symbol to LibTorch's copies.
cmake_version=${DTRAIN_CMAKE_VERSION:-4.4.4}
cmake_bin="$env_dir/bin/cmake"
if ! "$cmake_bin" --version 2>/dev/null | grep -q "version $cmake_version\$"; then
  echo "build_cuda: installing CMake $cmake_version from PyPI into $env_dir" >&2
  "$env_dir/bin/pip" install --disable-pip-version-check --no-input -q "cmake==$cmake_version" >&2
fi

default_dir=build-cuda
[ "$config" = current ] || default_dir=build-cuda-$config
build_dir=${BUILD_DIR:-$default_dir}
# NCCL comes from the nvidia-nccl package beside torch, as on the GPU hosts (cmake/FindNCCL.cmake), the
# CUDA headers and runtime from the toolkit laid out beside them.
# The cache must name a CUDA LibTorch and NCCL before anything is compiled against it.
"$cmake_bin" -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" \
  -DCMAKE_PREFIX_PATH="$torch_prefix" -DCUDAToolkit_ROOT="$env_dir/cuda-toolkit" -DNCCL_ROOT="$site/nvidia/nccl" \
  -DDTRAIN_WITH_NCCL=ON "$@"
if ! grep -q '^DTRAIN_TORCH_HAS_CUDA:INTERNAL=ON' "$build_dir/CMakeCache.txt" \
   || ! grep -q '^DTRAIN_HAVE_NCCL:INTERNAL=ON' "$build_dir/CMakeCache.txt"; then
  echo "build_cuda: $build_dir lacks CUDA LibTorch or NCCL; see the cmake output above" >&2
  exit 1
fi
# Configured above: build.sh builds what BUILD_TARGETS names (default all) with the same CMake.
CMAKE=$cmake_bin BUILD_DIR=$build_dir bash scripts/build.sh
# Every CUDA header must be the configuration's own: a machine's CUDA toolkit on the compiler's default
# search path (CI machines link CUDA 13's headers into /usr/local/include) would fill in any header the
# environment lacks, silently mixing two CUDA versions into one build.
leaked=$(ninja -C "$build_dir" -t deps | grep -E '^\s+/usr/local/(include|cuda[^/]*)/' | sort -u | head -n 5 || true)
if [ -n "$leaked" ]; then
  echo "build_cuda: $build_dir compiled CUDA headers from outside $env_dir/cuda-toolkit, e.g.:" >&2
  echo "$leaked" >&2
  exit 1
fi
