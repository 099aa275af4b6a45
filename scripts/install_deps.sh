#!/usr/bin/env bash
# Installs the Debian 12 packages a purpose needs, and only those:
#   run     build the dtrain binary and train with it on Fashion-MNIST under mpirun
#   test    run: plus the test suites, the benchmarks' PyTorch peers and dtrain-report
#   deploy  test: plus a local Slurm cluster, buildah and the emulated cluster's tools, for deploy/'s tests
#   all     everything above (the default; what scripts/test.sh and CI use)
#   sanitize  test: plus clang and its sanitizer and libFuzzer runtimes (scripts/sanitize.sh, scripts/fuzz.sh)
# Idempotent: packages already present are left alone and apt-get runs only when something is missing.
# apt's output goes to stdout; scripts/run_mnist.sh sends it to its log.
set -euo pipefail

run_packages=(
  build-essential cmake ninja-build
  libtorch-dev                   # LibTorch 1.13 (CPU)
  libgloo-dev                    # the headers of the Gloo that LibTorch links: the gloo backend (torchrun)
  libopenblas0-openmp            # replaces the reference BLAS for LibTorch's matmuls (~30x on fc layers)
  libopenmpi-dev openmpi-bin     # MPI bootstrap and the CPU communicator
  libyaml-cpp-dev libcxxopts-dev nlohmann-json3-dev zlib1g-dev
  libturbojpeg0-dev libpng-dev   # JPEG and PNG decoding of image datasets
  libprotobuf-dev protobuf-compiler libboost-dev  # TensorBoard event files (protobuf, Boost.CRC)
  libcurl4-openssl-dev           # progress posts to Kubeflow Trainer's status server (HTTPS)
  dataset-fashion-mnist          # the default training data
)
test_packages=(
  ccache                         # rebuilds of unchanged sources come from its cache
  catch2                         # Catch2 v2
  python3 python3-torch          # the PyTorch DDP peer for bench/, torchrun, the test output checkers
  python3-torchvision python3-pil  # model-zoo and DataLoader peers; test images in real JPEG/PNG files
  python3-yaml python3-jsonschema  # deploy/k8s's generator and the offline MPIJob validation
  python3-pandas python3-matplotlib  # dtrain-report: a study's tables and plots
  openssl                        # the test CA and certificate of the Trainer status server stand-in
  python3-venv                   # TensorBoard's own reader and server for the tests (PyPI, scripts/install_tensorboard.sh)
  chromium chromium-driver python3-selenium  # the report page and TensorBoard's dashboard in a real browser
)
deploy_packages=(
  slurm-wlm munge                # a local Slurm cluster for deploy/slurm's test
  buildah debootstrap            # container images without a Docker engine or registry (deploy/docker)
  iproute2 iptables              # deploy/local/cluster.sh: namespaces, links, shaping, packet loss
)
sanitize_packages=(
  clang libclang-rt-dev          # AddressSanitizer, UndefinedBehaviorSanitizer and libFuzzer with clang
)

purpose=${1:-all}
case "$purpose" in
  run) packages=("${run_packages[@]}") ;;
  test) packages=("${run_packages[@]}" "${test_packages[@]}") ;;
  deploy | all) packages=("${run_packages[@]}" "${test_packages[@]}" "${deploy_packages[@]}") ;;
  sanitize) packages=("${run_packages[@]}" "${test_packages[@]}" "${sanitize_packages[@]}") ;;
  *) echo "install_deps: unknown purpose '$purpose' (expected run, test, deploy, all or sanitize)" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} packages for '$purpose' present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "install_deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
