#!/usr/bin/env bash
# Installs the Debian 12 packages dtrain needs to build, test and benchmark. Idempotent: packages
# already present are left alone and apt-get runs only when something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libtorch-dev                   # LibTorch 1.13 (CPU)
  libgloo-dev                    # the headers of the Gloo that LibTorch links: the gloo backend
  libopenblas0-openmp            # replaces the reference BLAS for LibTorch's matmuls (~30x on fc layers)
  libopenmpi-dev openmpi-bin     # MPI bootstrap and the CPU communicator
  libyaml-cpp-dev libcxxopts-dev zlib1g-dev
  libturbojpeg0-dev libpng-dev   # JPEG and PNG decoding of image datasets
  catch2                         # Catch2 v2
  dataset-fashion-mnist          # the default training data
  python3 python3-torch          # the PyTorch DDP peer for bench/ and the test output checkers
  python3-torchvision python3-pil  # model-zoo and DataLoader peers; test images in real JPEG/PNG files
  python3-yaml python3-jsonschema  # deploy/k8s's generator and the offline MPIJob validation
  python3-pandas python3-matplotlib  # dtrain-report: a study's tables and plots
  slurm-wlm munge                # a local Slurm cluster for deploy/slurm's test
  buildah debootstrap            # container images without a Docker engine or registry (deploy/docker)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "install_deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
