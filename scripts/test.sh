#!/usr/bin/env bash
# Installs, builds and runs every test (unit, multi-rank, end to end). This is what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_deps.sh
bash scripts/build.sh
. scripts/mpi_env.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure --timeout 900 "$@"
