#!/usr/bin/env bash
# Installs one PyPI package, pinned, into a cached virtual environment that also sees Debian's Python
# packages (torch, numpy, PIL, pandas), for what Debian 12 does not package: TensorBoard's reader and
# server (scripts/install_tensorboard.sh), and safetensors, the reference reader and writer of the
# checkpoint layout (scripts/install_safetensors.sh). Idempotent; prints nothing else on stdout but the
# environment's Python, so callers can capture it.
#
#   bash scripts/install_pypi_tool.sh PACKAGE VERSION [ENV_DIR]
#
# ENV_DIR defaults to ${XDG_CACHE_HOME:-$HOME/.cache}/dtrain/<package>-<version>.
set -euo pipefail
cd "$(dirname "$0")/.."

package=${1:?package}
version=${2:?version}
env_dir=${3:-${XDG_CACHE_HOME:-$HOME/.cache}/dtrain/$package-$version}
python=/usr/bin/python3  # Debian's interpreter, whose packages the environment shares

if ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
  echo "install_pypi_tool: python3-venv is missing (scripts/install_deps.sh test installs it)" >&2
  exit 1
fi
marker="$env_dir/.dtrain-$package-$version"
if [ -f "$marker" ]; then
  echo "install_pypi_tool: $package $version already in $env_dir" >&2
else
  echo "install_pypi_tool: installing $package $version into $env_dir" >&2
  rm -rf "$env_dir"
  "$python" -m venv --system-site-packages "$env_dir"
  "$env_dir/bin/pip" install --disable-pip-version-check --no-input -q "$package==$version" >&2
  touch "$marker"
fi
echo "$env_dir/bin/python"
