#!/usr/bin/env bash
# Installs PyPI's TensorBoard into a cached virtual environment that also sees Debian's Python packages
# (numpy, PIL, pandas): its event reader and server are what the tests check dtrain's event files and
# dashboard with, and what dtrain-report reads a study's TensorBoard directories with. Debian 12 does
# not package TensorBoard. Prints the environment's Python on stdout (scripts/install_pypi_tool.sh).
#
#   DTRAIN_TENSORBOARD_VERSION  version to install (default 2.21.0)
#   DTRAIN_TENSORBOARD_ENV      where the environment lives
#                               (default ${XDG_CACHE_HOME:-$HOME/.cache}/dtrain/tensorboard-<version>)
set -euo pipefail
exec bash "$(dirname "$0")/install_pypi_tool.sh" tensorboard "${DTRAIN_TENSORBOARD_VERSION:-2.21.0}" ${DTRAIN_TENSORBOARD_ENV:+"$DTRAIN_TENSORBOARD_ENV"}
