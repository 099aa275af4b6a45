#!/usr/bin/env bash
# Installs PyPI's TensorBoard into a cached virtual environment that also sees Debian's Python packages
# (numpy, PIL, pandas): its event reader and server are what the tests check dtrain's event files and
# dashboard with, and what dtrain-report reads a study's TensorBoard directories with. Debian 12 does
# not package TensorBoard. Idempotent; prints nothing else on stdout but the environment's Python, so
# callers can capture it.
#
#   DTRAIN_TENSORBOARD_VERSION  version to install (default 2.21.0)
#   DTRAIN_TENSORBOARD_ENV      where the environment lives
#                               (default ${XDG_CACHE_HOME:-$HOME/.cache}/dtrain/tensorboard-<version>)
set -euo pipefail
cd "$(dirname "$0")/.."

version=${DTRAIN_TENSORBOARD_VERSION:-2.21.0}
env_dir=${DTRAIN_TENSORBOARD_ENV:-${XDG_CACHE_HOME:-$HOME/.cache}/dtrain/tensorboard-$version}
python=/usr/bin/python3  # Debian's interpreter, whose packages the environment shares

if ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
  echo "install_tensorboard: python3-venv is missing (scripts/install_deps.sh test installs it)" >&2
  exit 1
fi
marker="$env_dir/.dtrain-tensorboard-$version"
if [ -f "$marker" ]; then
  echo "install_tensorboard: tensorboard $version already in $env_dir" >&2
else
  echo "install_tensorboard: installing tensorboard $version into $env_dir" >&2
  rm -rf "$env_dir"
  "$python" -m venv --system-site-packages "$env_dir"
  "$env_dir/bin/pip" install --disable-pip-version-check --no-input -q "tensorboard==$version" >&2
  touch "$marker"
fi
echo "$env_dir/bin/python"
