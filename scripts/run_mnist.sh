#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install, build, then train mnist on Fashion-MNIST with
# 2 ranks for one epoch. Extra arguments go to dtrain (e.g. --epochs 3).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
. scripts/mpi_env.sh
mpirun -np 2 ./build/dtrain --workload mnist --epochs 1 "$@"
