#!/usr/bin/env bash
# Installs, builds and runs every test (unit, multi-rank, NCCL, end to end, deploy files). This is what
# CI runs.
# Three builds: the CPU build against Debian's LibTorch, then dtrain's two CUDA configurations against
# PyPI's CUDA LibTorch (scripts/build_cuda.sh; no GPU and no system CUDA toolkit needed): `current`
# (LibTorch 2.11, CUDA 13) and `volta` (LibTorch 2.7.1, CUDA 12.6, for P100 and V100). Each runs the
# tests labelled `config`, those that check a build against its LibTorch (unit tests, 2-rank MPI
# training, link order, run log schema, --help, checkpoint replay), the [gpu] cases skipping without a
# GPU. DTRAIN_TEST_CUDA=0 leaves the CUDA builds out (about 8 GB of PyPI packages and 10 minutes of 2
# cores).
# At the end, pass or fail, every test's time (slowest first) and what was skipped are printed
# (scripts/ctest_summary.py, from ctest's JUnit files), and the whole run's time.
# DTRAIN_TEST_JOBS=N runs N tests side by side (ctest counts a test of two busy ranks as two and runs
# those marked RUN_SERIAL alone: test/CMakeLists.txt), with Open MPI's idle ranks yielding their core.
# It is 1 by default: on a 2-core machine the CPU tests keep 1.1 to 1.8 cores busy one at a time, so
# four side by side took as long as one after another, and the CUDA builds compiling at nice 19 beside
# the tests slowed them and failed a Slurm case (docs/architecture.md, "Building and tests").
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
cpu_build=${BUILD_DIR:-build}
cuda_build=${CUDA_BUILD_DIR:-build-cuda}
volta_build=${CUDA_VOLTA_BUILD_DIR:-build-cuda-volta}
junit=ctest-junit.xml  # in each build folder
cuda=${DTRAIN_TEST_CUDA:-1}
jobs=${DTRAIN_TEST_JOBS:-1}
torch_install=""  # the background job installing PyPI's CUDA LibTorches
cuda_ran=""
volta_ran=""
finish() {
  local status=$?
  if [ -n "$torch_install" ]; then kill "$torch_install" 2>/dev/null || true; fi  # a failed CPU run stops it
  /usr/bin/python3 scripts/ctest_summary.py "cpu=$cpu_build/$junit" \
    ${cuda_ran:+"cuda-current=$cuda_build/$junit"} ${volta_ran:+"cuda-volta=$volta_build/$junit"} || true
  echo "test: $(( $(date +%s) - started )) s in all, exit $status"
}
trap finish EXIT

bash scripts/install_deps.sh
rm -f "$cpu_build/$junit" "$cuda_build/$junit" "$volta_build/$junit"
if [ "$cuda" = 1 ]; then
  # PyPI's CUDA LibTorches (about 3 GB each to download) come in while the CPU build compiles and tests.
  torch_log=$(mktemp)
  { bash scripts/install_cuda_torch.sh current && bash scripts/install_cuda_torch.sh volta; } >"$torch_log" 2>&1 &
  torch_install=$!
fi
bash scripts/build.sh -DDTRAIN_BUILD_TESTS=ON -DDTRAIN_BUILD_BENCH=ON
. scripts/mpi_env.sh
# Side by side, ranks waiting in an MPI call yield their core to the other tests' processes.
if [ "$jobs" -gt 1 ]; then export OMPI_MCA_mpi_yield_when_idle=1; fi
# The JUnit file keeps every passed test's whole output, where the summary finds its SKIP: lines.
ctest_args=(--output-on-failure --timeout 900 -j "$jobs" --output-junit "$junit" --test-output-size-passed 1000000)
ctest --test-dir "$cpu_build" "${ctest_args[@]}" "$@"

if [ "$cuda" != 1 ]; then
  echo "test: DTRAIN_TEST_CUDA=$cuda: the CUDA builds (scripts/build_cuda.sh current|volta) were left out"
  exit 0
fi
if ! wait "$torch_install"; then
  torch_install=""
  cat "$torch_log" >&2
  echo "test: installing PyPI's CUDA LibTorch failed (scripts/install_cuda_torch.sh)" >&2
  exit 1
fi
torch_install=""
rm -f "$torch_log"
# The CUDA builds prove that the GPU code compiles and links against each CUDA LibTorch, and their tests
# run on the CPU: here they are optimised at -O1, not -O3, which compiles the whole `current` build in
# 258 s instead of 368 (2 cores, no compile cache; their `config` tests pass either way). GPU hosts
# (scripts/gpu_host.sh) and the images build at -O3.
cuda_flags=(-DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG")
BUILD_DIR=$cuda_build bash scripts/build_cuda.sh current "${cuda_flags[@]}"
# On a machine without a GPU, a CUDA build's `config` tests check its linking and its LibTorch; the rest
# would run the CPU build's code again (e2e_dtrain alone 225 s of the `current` build's tests when it
# ran them all). GPU hosts run them all against the CUDA LibTorch (scripts/gpu_host.sh test).
cuda_ran=1
ctest --test-dir "$cuda_build" "${ctest_args[@]}" -L config "$@"
# The Volta/Pascal configuration differs only in its LibTorch (and CUDA 12): only the executables the
# `config` tests run (its unit tests check the kernel inventory against the real libtorch_cuda.so).
BUILD_DIR=$volta_build BUILD_TARGETS="dtrain dtrain_unit_tests dtrain_mpi_tests dtrain_fuzz_replay" \
  bash scripts/build_cuda.sh volta "${cuda_flags[@]}"
volta_ran=1
ctest --test-dir "$volta_build" "${ctest_args[@]}" -L config "$@"
