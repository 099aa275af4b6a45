#!/usr/bin/env bash
# Installs, builds and runs every test (unit, multi-rank, NCCL, end to end, deploy files). This is what
# CI runs.
# Three builds: the CPU build against Debian's LibTorch, then dtrain's two CUDA configurations against
# PyPI's CUDA LibTorch (scripts/build_cuda.sh; no GPU and no system CUDA toolkit needed): `current`
# (LibTorch 2.11, CUDA 13) and `volta` (LibTorch 2.7.1, CUDA 12.6, for P100 and V100). Each runs the
# tests labelled `config`, those that check a build against its LibTorch (unit tests, 2-rank MPI
# training, link order, run log schema, --help, checkpoint replay), the [gpu] cases skipping without a
# GPU. DTRAIN_TEST_CUDA=0 leaves the CUDA builds out (about 8 GB of PyPI packages and two compiles:
# `current` alone took 155 s of 2 cores without a compile cache, `volta` builds fewer targets).
# The CUDA half (downloads, then both compiles) runs beside the CPU build's tests, which leave part of
# the 2 cores idle, in a cpu cgroup of the least weight: it gets the cycles the tests leave and gives
# them back the moment a test wants them (below, at `idle_cgroup`); so does the CPU container image
# that deploy_image tests, which then runs after the others. Once the CPU build's tests are done, the
# `current` build's tests and deploy_image run as soon as what they need is built, beside the rest. The CPU build itself compiles `dtrain`
# first, and the tests that need nothing else (labelled dtrain_built: test/CMakeLists.txt) start while
# the rest of it (test binaries, benchmarks) compiles in that cgroup; the others run after them. Where
# no such cgroup can be made (not root, no cgroup v1 cpu controller), the whole CPU build comes first and
# the CUDA compiles run after the tests, and deploy_image builds its image.
# On a machine that has never compiled dtrain (a fresh clone on CI, the README's command) ccache's
# cache is empty, every compile misses, and ccache only adds its own work: test.sh then compiles without
# it (CCACHE_DISABLE; measured, `dtrain` from clean on 2 cores: 116 s through an empty cache, 100 s
# without). Where the cache holds results (scripts/build.sh has filled it), they are used.
# At the end, pass or fail, every test's time (slowest first) and what was skipped are printed
# (scripts/ctest_summary.py, from ctest's JUnit files), then the time of each phase and of the run.
# DTRAIN_TEST_JOBS=N runs N tests side by side (ctest counts a test of two busy ranks as two and runs
# those marked RUN_SERIAL alone: test/CMakeLists.txt), with Open MPI's idle ranks yielding their core.
# It is 1 by default: on a 2-core machine the CPU tests keep 1.1 to 1.8 cores busy one at a time, so
# four side by side took as long as one after another (docs/architecture.md, "Building and tests").
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
cpu_build=${BUILD_DIR:-build}
cuda_build=${CUDA_BUILD_DIR:-build-cuda}
volta_build=${CUDA_VOLTA_BUILD_DIR:-build-cuda-volta}
junit=ctest-junit.xml  # in each build folder
junit_rest=ctest-junit-rest.xml  # the CPU build's tests that wait for its test binaries, when run apart
junit_image=ctest-junit-image.xml  # the CPU build's deploy_image, when its image is built beside the tests
cuda=${DTRAIN_TEST_CUDA:-1}
jobs=${DTRAIN_TEST_JOBS:-1}
cuda_job=""     # the background job: PyPI's CUDA LibTorches, then (beside the tests) both CUDA builds
rest_job=""     # the rest of the CPU build (all but dtrain), beside the first tests
idle_cgroup=""  # the cpu cgroup they run in, where one could be made
test_image=""   # the CPU image built beside the tests for deploy_image
cuda_ran=""
rest_job_ran=""
volta_ran=""
phases=()
phase() { phases+=("$(printf '%6d s  %s' $(( $(date +%s) - phase_start )) "$1")"); phase_start=$(date +%s); }
phase_start=$started

# A cpu cgroup (v1) of the least weight, cpu.shares 2 against the 1024 of everything else: the kernel
# runs its processes only on a core nothing else wants. Nice 19 was measured not to do that here
# (docs/architecture.md, "Building and tests"): with the kernel's autogroups, niceness weighs only
# against processes of the same session, and the Slurm daemons and the emulated nodes' ranks run in
# sessions of their own, where a niced compile took a full share against them.
make_idle_cgroup() {
  local dir=/sys/fs/cgroup/cpu/dtrain-test-$$
  [ "$(id -u)" -eq 0 ] && [ -f /sys/fs/cgroup/cpu/cpu.shares ] || return 0
  mkdir "$dir" 2>/dev/null || return 0
  if echo 2 >"$dir/cpu.shares" 2>/dev/null; then idle_cgroup=$dir; else rmdir "$dir"; fi
}
# Ends every process of the background jobs (pip, cmake, ninja, the compilers: a process group each)
# and removes their cgroup once empty.
end_background() {
  local pids job
  for job in $cuda_job $rest_job; do
    kill -- -"$job" 2>/dev/null || true
    sleep 1
    kill -KILL -- -"$job" 2>/dev/null || true
  done
  cuda_job=""
  rest_job=""
  if [ -n "$idle_cgroup" ]; then  # and whatever left the process group stays in the cgroup
    for _ in $(seq 1 50); do
      pids=$(cat "$idle_cgroup/cgroup.procs" 2>/dev/null || true)
      [ -n "$pids" ] || break
      kill -KILL $pids 2>/dev/null || true
      sleep 0.1
    done
    rmdir "$idle_cgroup" 2>/dev/null || echo "test: could not remove the cgroup $idle_cgroup" >&2
    idle_cgroup=""
  fi
}
finish() {
  local status=$?
  end_background  # a failed CPU run ends the CUDA half
  rm -f "${cuda_log:-}" "${rest_log:-}"
  [ -z "${cuda_ready:-}" ] || rm -rf "$cuda_ready"
  if [ -n "$test_image" ]; then STORAGE_DRIVER=vfs buildah rmi "$test_image" >/dev/null 2>&1 || true; fi
  /usr/bin/python3 scripts/ctest_summary.py "cpu=$cpu_build/$junit" ${rest_job_ran:+"cpu=$cpu_build/$junit_rest"} \
    ${test_image:+"cpu=$cpu_build/$junit_image"} \
    ${cuda_ran:+"cuda-current=$cuda_build/$junit"} ${volta_ran:+"cuda-volta=$volta_build/$junit"} || true
  [ ${#phases[@]} -eq 0 ] || printf 'test: %s\n' "${phases[@]}"
  echo "test: $(( $(date +%s) - started )) s in all, exit $status"
}
trap finish EXIT

bash scripts/install_deps.sh
phase "install_deps.sh"
rm -f "$cpu_build/$junit" "$cpu_build/$junit_rest" "$cpu_build/$junit_image" "$cuda_build/$junit" "$volta_build/$junit"
if command -v ccache >/dev/null && [ -z "${CCACHE_DISABLE:-}" ]; then
  ccache_dir=$(ccache -k cache_dir 2>/dev/null || true)
  if [ -z "$(find "${ccache_dir:-/nonexistent}" -type f -name '*[MR]' -print -quit 2>/dev/null)" ]; then
    echo "test: ccache's cache ($ccache_dir) is empty: compiling without it"
    export CCACHE_DISABLE=1
  fi
fi
# The CUDA builds prove that the GPU code compiles and links against each CUDA LibTorch, and their tests
# run on the CPU: here they are optimised at -O1, not -O3, which compiles the whole `current` build in
# 258 s instead of 368 (2 cores, no compile cache; their `config` tests pass either way). GPU hosts
# (scripts/gpu_host.sh) and the images build at -O3. The Volta/Pascal configuration differs only in its
# LibTorch (and CUDA 12): it builds only the executables its `config` tests run (its unit tests check
# the kernel inventory against the real libtorch_cuda.so).
# Their 2-rank MPI tests leave out the large models' equivalence cases, which the CPU build runs
# (test/CMakeLists.txt, DTRAIN_TEST_LARGE_MODELS).
cuda_flags=(-DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" -DDTRAIN_TEST_LARGE_MODELS=OFF)
# `current`'s checkpoint_cross_build test resumes the CPU build's checkpoints and the reverse (LibTorch
# 1.13 and 2.11; 57 s).
cpu_dtrain="$(case "$cpu_build" in /*) echo "$cpu_build" ;; *) echo "$PWD/$cpu_build" ;; esac)/dtrain"
build_cuda_current() {
  BUILD_DIR=$cuda_build bash scripts/build_cuda.sh current "${cuda_flags[@]}" -DDTRAIN_CROSS_BUILD_DTRAIN="$cpu_dtrain"
}
build_cuda_volta() {
  BUILD_DIR=$volta_build BUILD_TARGETS="dtrain dtrain_unit_tests dtrain_mpi_tests dtrain_fuzz_replay" \
    bash scripts/build_cuda.sh volta "${cuda_flags[@]}"
}
# Only for the whole suite (arguments for ctest, -R or -E, choose the tests themselves) or the CUDA half.
if [ "$cuda" = 1 ] || [ $# -eq 0 ]; then make_idle_cgroup; fi
if [ "$cuda" = 1 ]; then
  if [ -n "$idle_cgroup" ] && [ $# -eq 0 ] && command -v buildah >/dev/null; then
    test_image=localhost/dtrain:cpu-test-$$
  fi
  cuda_log=$(mktemp)
  cuda_ready=$(mktemp -d)  # what the background job has finished: `current` (its build), `image`
  # PyPI's CUDA LibTorches (about 3 GB each) download while the CPU build compiles and tests, at the
  # usual priority (a download starved for minutes could lose its connection); with the idle cgroup both
  # CUDA builds then compile there, and the image for deploy_image is built. Its own process group
  # (set -m), for end_background.
  set -m
  {
    bash scripts/install_cuda_torch.sh current
    bash scripts/install_cuda_torch.sh volta
    if [ -n "$idle_cgroup" ]; then
      echo "$BASHPID" >"$idle_cgroup/cgroup.procs"
      ionice -c 3 -p "$BASHPID" 2>/dev/null || true  # the disk too, as far as its I/O scheduler does classes
      # The image builds beside the CUDA compiles: its long stretches of one busy core (apt, dpkg, the
      # storage driver's copies) leave the other to them. A failed image build here is not the end:
      # deploy_image then builds the image itself, and fails there.
      { if [ -n "$test_image" ]; then bash test/deploy/image_test.sh cpu --build-only "$test_image" || true; fi
        touch "$cuda_ready/image"; } &
      build_cuda_current
      touch "$cuda_ready/current"
      build_cuda_volta
      wait  # for the image
    fi
  } >"$cuda_log" 2>&1 &
  cuda_job=$!
  set +m
fi
cpu_flags=(-DDTRAIN_BUILD_TESTS=ON -DDTRAIN_BUILD_BENCH=ON)
if [ -n "$idle_cgroup" ] && [ $# -eq 0 ]; then
  BUILD_TARGETS=dtrain bash scripts/build.sh "${cpu_flags[@]}"
  phase "CPU build of dtrain"
  rest_log=$(mktemp)
  set -m
  {
    echo "$BASHPID" >"$idle_cgroup/cgroup.procs"
    ionice -c 3 -p "$BASHPID" 2>/dev/null || true
    cmake --build "$cpu_build" --parallel "$(nproc)"
  } >"$rest_log" 2>&1 &
  rest_job=$!
  set +m
else
  bash scripts/build.sh "${cpu_flags[@]}"
  phase "CPU build"
fi
. scripts/mpi_env.sh
# Side by side, ranks waiting in an MPI call yield their core to the other tests' processes.
if [ "$jobs" -gt 1 ]; then export OMPI_MCA_mpi_yield_when_idle=1; fi
# The JUnit file keeps every passed test's whole output, where the summary finds its SKIP: lines.
ctest_args=(--output-on-failure --timeout 900 -j "$jobs" --test-output-size-passed 1000000)
# finish_job VAR LOG WHAT: waits for the background job whose PID is in VAR (end_background's until it
# is done); if it failed, prints the end of its LOG and ends the run.
finish_job() {
  local -n job=$1
  local status=0
  wait "$job" || status=$?
  job=""
  if [ "$status" -ne 0 ]; then
    tail -n 60 "$2" >&2
    echo "test: $3 failed (the end of its log above)" >&2
    exit 1
  fi
}
# beside: what compiles beside the tests now, for the phase's name
beside() {
  local what=${rest_job:+the rest of the CPU build}
  [ -z "$cuda_job" ] || what="${what:+$what and }the CUDA half"
  [ -z "$what" ] || echo " ($what beside them, in $idle_cgroup)"
}
if [ -n "$rest_job" ]; then
  # A failure here still lets the other tests run, for a whole picture; the run fails after them.
  first_status=0
  ctest --test-dir "$cpu_build" "${ctest_args[@]}" --output-junit "$junit" -L dtrain_built \
    ${test_image:+-E '^deploy_image$'} || first_status=$?
  phase "CPU build's tests that need only dtrain$(beside)"
  finish_job rest_job "$rest_log" "the rest of the CPU build"
  phase "the rest of the CPU build, alone"
  rest_job_ran=1
  ctest --test-dir "$cpu_build" "${ctest_args[@]}" --output-junit "$junit_rest" -LE dtrain_built
  phase "CPU build's other tests$(beside)"
  [ "$first_status" -eq 0 ] || exit "$first_status"
else
  ctest --test-dir "$cpu_build" "${ctest_args[@]}" --output-junit "$junit" ${test_image:+-E '^deploy_image$'} "$@"
  phase "CPU build's tests$(beside)"
fi

if [ "$cuda" != 1 ]; then
  echo "test: DTRAIN_TEST_CUDA=$cuda: the CUDA builds (scripts/build_cuda.sh current|volta) were left out"
  exit 0
fi
cuda_what="the CUDA half (scripts/install_cuda_torch.sh or scripts/build_cuda.sh)"
# On a machine without a GPU, a CUDA build's `config` tests check its linking and its LibTorch; the rest
# would run the CPU build's code again (e2e_dtrain alone 225 s of the `current` build's tests when it
# ran them all). GPU hosts run them all against the CUDA LibTorch (scripts/gpu_host.sh test).
config_tests() { ctest --test-dir "$1" "${ctest_args[@]}" --output-junit "$junit" -L config "${@:2}"; }
# await_ready WHAT: until the background job has finished WHAT (a file in $cuda_ready), or ended; a job
# that ended without it failed, and finish_job says how.
await_ready() {
  while [ ! -e "$cuda_ready/$1" ] && kill -0 "$cuda_job" 2>/dev/null; do sleep 1; done
  [ -e "$cuda_ready/$1" ] || finish_job cuda_job "$cuda_log" "$cuda_what"
}
if [ -n "$idle_cgroup" ]; then
  # What is ready is tested while the rest compiles beside it in the idle cgroup, as the CPU build's
  # tests were: the `current` build's tests and deploy_image as soon as their build is done, beside the
  # volta build (which otherwise compiled alone, then waited for them).
  await_ready current
  phase "the CUDA current build, after the CPU tests"
  cuda_ran=1
  config_tests "$cuda_build" "$@"
  phase "CUDA current's config tests$(beside)"
  if [ -n "$test_image" ]; then
    await_ready image
    image=()
    if STORAGE_DRIVER=vfs buildah inspect --type image "$test_image" >/dev/null 2>&1; then
      image=(env "DTRAIN_TEST_IMAGE=$test_image")
    fi
    "${image[@]}" ctest --test-dir "$cpu_build" "${ctest_args[@]}" --output-junit "$junit_image" -R '^deploy_image$'
    phase "deploy_image$(beside)"
  fi
  finish_job cuda_job "$cuda_log" "$cuda_what"
  cat "$cuda_log"
  phase "the rest of the CUDA builds, alone"
else
  finish_job cuda_job "$cuda_log" "$cuda_what"
  phase "the rest of the CUDA downloads"
  build_cuda_current
  phase "CUDA current build"
  cuda_ran=1
  config_tests "$cuda_build" "$@"
  phase "CUDA current's config tests"
  build_cuda_volta
  phase "CUDA volta build"
fi
volta_ran=1
config_tests "$volta_build" "$@"
phase "CUDA volta's config tests"
