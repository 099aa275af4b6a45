#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: installs what building and running dtrain needs (not the
# test tools), builds the dtrain binary alone, then trains mnist on Fashion-MNIST with 2 ranks for one
# epoch. Installation and build print one line per stage; their output goes to a log file, whose path
# and last lines are printed if a stage fails. Extra arguments go to dtrain (e.g. --epochs 3).
# Environment: BUILD_DIR (default build), BUILD_TYPE (default Release).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
mkdir -p "$build_dir"
log="$build_dir/run_mnist.log"
: >"$log"

started=$SECONDS
# stage TEXT COMMAND...: runs COMMAND with its output in the log, and says how it went in one line.
stage() {
  local text=$1 begin=$SECONDS
  shift
  printf 'run_mnist: %s ... ' "$text"
  if "$@" >>"$log" 2>&1; then
    echo "done ($((SECONDS - begin)) s)"
  else
    local rc=$?
    echo "failed (exit $rc); the last lines of $log:"
    tail -n 25 "$log" | sed 's/^/  | /'
    echo "run_mnist: the whole output of every stage is in $log"
    exit "$rc"
  fi
}

stage "installing the packages dtrain needs (scripts/install_deps.sh run)" bash scripts/install_deps.sh run
# A build directory configured before (by scripts/test.sh, with the tests) is used as it is, not
# configured again: the docs test runs this from a scratch copy whose build/ is the checkout's.
if [ -f "$build_dir/CMakeCache.txt" ]; then
  stage "building $build_dir/dtrain" cmake --build "$build_dir" --target dtrain --parallel "$(nproc)"
else
  stage "configuring and building $build_dir/dtrain" env BUILD_DIR="$build_dir" BUILD_TARGETS=dtrain \
    bash scripts/build.sh -DDTRAIN_BUILD_TESTS=OFF -DDTRAIN_BUILD_BENCH=OFF
fi
echo "run_mnist: ready in $((SECONDS - started)) s; training mnist on Fashion-MNIST with 2 ranks"
# A Train Epoch line every 100 steps: the live progress line shows where the epoch is in between.
exec scripts/mpirun_local.sh -np 2 "$build_dir/dtrain" --workload mnist --epochs 1 --log-interval 100 "$@"
