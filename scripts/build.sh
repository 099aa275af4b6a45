#!/usr/bin/env bash
# Configures and builds dtrain with CMake and Ninja: the one way the scripts configure a build (test.sh,
# build_cuda.sh, fuzz.sh, and run_mnist.sh for a fresh folder). Extra arguments go to cmake's configure
# step; a folder configured before keeps its cache, and the arguments given now change it.
#   BUILD_DIR      the build folder (default build)
#   BUILD_TYPE     CMAKE_BUILD_TYPE (default Release)
#   BUILD_TARGETS  the targets to build, space-separated (default all)
#   CMAKE          the cmake to run (default cmake; build_cuda.sh gives PyPI's CMake 4, as GPU hosts have)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
cmake=${CMAKE:-cmake}
"$cmake" -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" "$@"
# shellcheck disable=SC2086  # BUILD_TARGETS is a list of names
"$cmake" --build "$build_dir" --parallel "$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS}
