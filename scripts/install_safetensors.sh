#!/usr/bin/env bash
# Installs PyPI's safetensors, the reference reader and writer of dtrain's checkpoint layout, into a
# cached virtual environment that also sees Debian's torch: the tests open every checkpoint dtrain writes
# with it, load them into PyTorch modules, and write the files `dtrain --init-from` starts from; the
# format-4 converter (scripts/convert_checkpoint.py) writes with it. Debian 12 does not package it.
# Prints the environment's Python on stdout (scripts/install_pypi_tool.sh).
#
#   DTRAIN_SAFETENSORS_VERSION  version to install (default 0.8.0)
set -euo pipefail
exec bash "$(dirname "$0")/install_pypi_tool.sh" safetensors "${DTRAIN_SAFETENSORS_VERSION:-0.8.0}"
