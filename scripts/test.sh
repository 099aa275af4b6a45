#!/usr/bin/env bash
# Installs, builds and runs every test (unit, multi-rank, NCCL, end to end, deploy files). This is what
# CI runs.
# Two builds: the CPU build against Debian's LibTorch, and, where a CUDA toolkit is installed, the
# whole CUDA build against PyPI's CUDA LibTorch (scripts/build_cuda.sh), whose tests run too, the
# [gpu] cases skipping without a GPU. Under CI (CI set) a missing CUDA toolkit is an error.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
cuda_toolkit=""
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || [ -n "${CUDAToolkit_ROOT:-}" ]; then
  cuda_toolkit=yes
  # PyPI's CUDA LibTorch (about 3 GB to download) comes in while the CPU build compiles.
  torch_log=$(mktemp)
  bash scripts/install_cuda_torch.sh >"$torch_log" 2>&1 &
  torch_install=$!
  trap 'kill "$torch_install" 2>/dev/null || true' EXIT  # a failed CPU run stops it too
fi
bash scripts/build.sh -DDTRAIN_BUILD_TESTS=ON -DDTRAIN_BUILD_BENCH=ON
. scripts/mpi_env.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure --timeout 900 "$@"

if [ -n "$cuda_toolkit" ]; then
  if ! wait "$torch_install"; then
    cat "$torch_log" >&2
    echo "test: installing PyPI's CUDA LibTorch failed (scripts/install_cuda_torch.sh)" >&2
    exit 1
  fi
  rm -f "$torch_log"
  BUILD_DIR=${CUDA_BUILD_DIR:-build-cuda} bash scripts/build_cuda.sh
  # The peer benchmark compares against Debian's PyTorch, and the deploy tests do not use this build's
  # binaries beyond what the CPU build's run already covered. The long end-to-end suites (every bad
  # input, every vision workload) run the same code as the CPU build's run did; here, on a machine
  # without a GPU, this build's unit, multi-rank and e2e_dtrain tests check its linking and LibTorch
  # version, and GPU hosts (scripts/gpu_host.sh) run the long suites too. README's commands (docs) are
  # those of the Debian build, which the CPU run checked.
  ctest --test-dir "${CUDA_BUILD_DIR:-build-cuda}" --output-on-failure --timeout 900 -LE 'deploy|peer|long|docs' "$@"
elif [ -n "${CI:-}" ]; then
  echo "test: no CUDA toolkit found; CI must compile and link the CUDA build (install it in /usr/local/cuda)" >&2
  exit 1
else
  echo "test: no CUDA toolkit found; skipped the CUDA build (scripts/build_cuda.sh)"
fi
