#!/usr/bin/env bash
# Installs, builds and runs every test (unit, multi-rank, NCCL, end to end, deploy files). This is what
# CI runs.
# Three builds: the CPU build against Debian's LibTorch, then dtrain's two CUDA configurations against
# PyPI's CUDA LibTorch (scripts/build_cuda.sh; no GPU and no system CUDA toolkit needed): `current`
# (LibTorch 2.11, CUDA 13) and `volta` (LibTorch 2.7.1, CUDA 12.6, for P100 and V100). Their tests
# labelled `config` run too (those that check a build against its LibTorch: unit tests, 2-rank MPI
# training, link order, run log schema, checkpoint replay), the [gpu] cases skipping without a GPU.
# The CUDA half (about 8 GB of PyPI packages and two compiles) runs in the background at the lowest CPU
# and I/O priority while the CPU build's tests run in the foreground: those keep 0.8 to 1.9 of 2 cores
# busy (docs/architecture.md, "Building and tests"), and the compiles take the rest. The tests that
# measure CPU or time (label `serial`) run last, with the compiles stopped. DTRAIN_TEST_CUDA=0 leaves
# the CUDA builds out.
# At the end, pass or fail, every test's time (slowest first) and what was skipped are printed
# (scripts/ctest_summary.py, from ctest's JUnit files), and the whole run's time.
# DTRAIN_TEST_JOBS=N runs N tests side by side (ctest counts a test of two busy ranks as two and runs
# those marked RUN_SERIAL alone: test/CMakeLists.txt), with Open MPI's idle ranks yielding their core.
# It is 1 by default: on a 2-core machine four side by side took as long as one after another.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
cpu_build=${BUILD_DIR:-build}
cuda_build=${CUDA_BUILD_DIR:-build-cuda}
volta_build=${CUDA_VOLTA_BUILD_DIR:-build-cuda-volta}
junit=ctest-junit.xml  # in each build folder
junit_serial=ctest-junit-serial.xml  # the CPU build's tests that run alone
cuda=${DTRAIN_TEST_CUDA:-1}
jobs=${DTRAIN_TEST_JOBS:-1}
cuda_job=""  # the background job: PyPI's CUDA LibTorches, then the two CUDA builds
cuda_ran=""
volta_ran=""
finish() {
  local status=$?
  if [ -n "$cuda_job" ]; then  # a failed CPU run ends it
    kill -- -"$cuda_job" 2>/dev/null || true
    kill -CONT -- -"$cuda_job" 2>/dev/null || true
  fi
  rm -f "$installed"
  /usr/bin/python3 scripts/ctest_summary.py "cpu=$cpu_build/$junit" "cpu-serial=$cpu_build/$junit_serial" \
    ${cuda_ran:+"cuda-current=$cuda_build/$junit"} ${volta_ran:+"cuda-volta=$volta_build/$junit"} || true
  echo "test: $(( $(date +%s) - started )) s in all, exit $status"
}
trap finish EXIT

bash scripts/install_deps.sh
rm -f "$cpu_build/$junit" "$cpu_build/$junit_serial" "$cuda_build/$junit" "$volta_build/$junit"
# The CUDA builds prove that the GPU code compiles and links against each CUDA LibTorch, and their tests
# run on the CPU: here they are optimised at -O1, not -O3, which compiles the whole `current` build in
# 258 s instead of 368 (2 cores, no compile cache; their `config` tests pass either way). GPU hosts
# (scripts/gpu_host.sh) and the images build at -O3. `volta` builds only what its tests run.
cuda_flags=(-DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG")
installed=$(mktemp -u)  # exists once the downloads are done: from then on the CUDA half may be stopped
cuda_half() {
  bash scripts/install_cuda_torch.sh current
  bash scripts/install_cuda_torch.sh volta
  touch "$installed"
  BUILD_DIR=$cuda_build bash scripts/build_cuda.sh current "${cuda_flags[@]}"
  BUILD_DIR=$volta_build BUILD_TARGETS="dtrain dtrain_unit_tests dtrain_mpi_tests dtrain_fuzz_replay" \
    bash scripts/build_cuda.sh volta "${cuda_flags[@]}"
}
if [ "$cuda" = 1 ]; then
  # A process group of its own (set -m), so that it can be stopped and resumed as one, and a failed CPU
  # run ends all of it.
  cuda_log=$(mktemp)
  set -m
  { renice -n 19 -p "$BASHPID" >/dev/null; ionice -c 3 -p "$BASHPID" || true; cuda_half; } >"$cuda_log" 2>&1 &
  cuda_job=$!
  set +m
fi
bash scripts/build.sh -DDTRAIN_BUILD_TESTS=ON -DDTRAIN_BUILD_BENCH=ON
. scripts/mpi_env.sh
# Side by side, ranks waiting in an MPI call yield their core to the other tests' processes.
if [ "$jobs" -gt 1 ]; then export OMPI_MCA_mpi_yield_when_idle=1; fi
# The JUnit files keep every passed test's whole output, where the summary finds its SKIP: lines.
ctest_args=(--output-on-failure --timeout 900 -j "$jobs" --test-output-size-passed 1000000)
cpu_status=0
ctest --test-dir "$cpu_build" "${ctest_args[@]}" --output-junit "$junit" -LE serial "$@" || cpu_status=$?
# A compile beside a test that measures time or CPU bends what it measures. A download is left running:
# stopped for minutes, its connection would be dropped.
paused=""
if [ -n "$cuda_job" ] && [ -e "$installed" ] && kill -STOP -- -"$cuda_job" 2>/dev/null; then paused=1; fi
ctest --test-dir "$cpu_build" "${ctest_args[@]}" --output-junit "$junit_serial" -L serial "$@" || cpu_status=$?
if [ -n "$paused" ]; then kill -CONT -- -"$cuda_job"; fi
if [ "$cpu_status" != 0 ]; then exit "$cpu_status"; fi

if [ "$cuda" != 1 ]; then
  echo "test: DTRAIN_TEST_CUDA=$cuda: the CUDA builds (scripts/build_cuda.sh current|volta) were left out"
  exit 0
fi
started_wait=$(date +%s)
if ! wait "$cuda_job"; then
  cuda_job=""
  tail -n 60 "$cuda_log" >&2
  echo "test: the CUDA half failed (installing PyPI's CUDA LibTorch or scripts/build_cuda.sh; its log's end above)" >&2
  exit 1
fi
cuda_job=""
echo "test: the CUDA builds finished $(( $(date +%s) - started_wait )) s after the CPU tests"
rm -f "$cuda_log"
# On a machine without a GPU, a CUDA build's `config` tests check its linking and its LibTorch; the rest
# run the same code as the CPU build's run did (GPU hosts run them all: scripts/gpu_host.sh).
cuda_ran=1
ctest --test-dir "$cuda_build" "${ctest_args[@]}" --output-junit "$junit" -L config "$@"
volta_ran=1
ctest --test-dir "$volta_build" "${ctest_args[@]}" --output-junit "$junit" -L config "$@"
