#!/usr/bin/env bash
# Installs, builds and runs every test (unit, multi-rank, NCCL, end to end, deploy files). This is what
# CI runs.
# Three builds: the CPU build against Debian's LibTorch, then dtrain's two CUDA configurations against
# PyPI's CUDA LibTorch (scripts/build_cuda.sh; no GPU and no system CUDA toolkit needed), whose tests run
# too, the [gpu] cases skipping without a GPU: `current` (LibTorch 2.11, CUDA 13) runs everything but
# the long suites, `volta` (LibTorch 2.7.1, CUDA 12.6, for P100 and V100) the tests labelled `config`,
# those that check a build against its LibTorch. DTRAIN_TEST_CUDA=0 leaves the CUDA builds out (about
# 8 GB of PyPI packages and 15 minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
cuda=${DTRAIN_TEST_CUDA:-1}
if [ "$cuda" = 1 ]; then
  # PyPI's CUDA LibTorches (about 3 GB each to download) come in while the CPU build compiles.
  torch_log=$(mktemp)
  { bash scripts/install_cuda_torch.sh current && bash scripts/install_cuda_torch.sh volta; } >"$torch_log" 2>&1 &
  torch_install=$!
  trap 'kill "$torch_install" 2>/dev/null || true' EXIT  # a failed CPU run stops it too
fi
bash scripts/build.sh -DDTRAIN_BUILD_TESTS=ON -DDTRAIN_BUILD_BENCH=ON
. scripts/mpi_env.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure --timeout 900 "$@"

if [ "$cuda" != 1 ]; then
  echo "test: DTRAIN_TEST_CUDA=$cuda: the CUDA builds (scripts/build_cuda.sh current|volta) were left out"
  exit 0
fi
if ! wait "$torch_install"; then
  cat "$torch_log" >&2
  echo "test: installing PyPI's CUDA LibTorch failed (scripts/install_cuda_torch.sh)" >&2
  exit 1
fi
rm -f "$torch_log"
BUILD_DIR=${CUDA_BUILD_DIR:-build-cuda} bash scripts/build_cuda.sh current
# The peer benchmark compares against Debian's PyTorch, and the deploy tests do not use this build's
# binaries beyond what the CPU build's run already covered. The long end-to-end suites (the main
# end-to-end suite, every bad input, every vision workload, signals) run the same code as the CPU
# build's run did; here, on a machine without a GPU, this build's unit, multi-rank, torchrun, report
# and fuzz-replay tests check its linking and LibTorch version, and GPU hosts (scripts/gpu_host.sh) run
# the long suites too (e2e_dtrain here cost 225 s of CI's 40 minutes and repeated the CPU run's cases).
# README's commands (docs) are those of the Debian build, which the CPU run checked.
ctest --test-dir "${CUDA_BUILD_DIR:-build-cuda}" --output-on-failure --timeout 900 -LE 'deploy|peer|long|docs' "$@"
# The Volta/Pascal configuration differs only in its LibTorch (and CUDA 12): the executables the
# `config` tests run, and those tests: the unit tests (its kernel inventory against the real
# libtorch_cuda.so among them), 2-rank MPI training, the link order and the run log's schema.
BUILD_DIR=${CUDA_VOLTA_BUILD_DIR:-build-cuda-volta} BUILD_TARGETS="dtrain dtrain_unit_tests dtrain_mpi_tests" \
  bash scripts/build_cuda.sh volta
ctest --test-dir "${CUDA_VOLTA_BUILD_DIR:-build-cuda-volta}" --output-on-failure --timeout 900 -L config "$@"
