#!/usr/bin/env bash
# Downloads (does not install) the Debian 12 packages that a GPU host with only a pip PyTorch lacks:
# Open MPI and its libraries, yaml-cpp, cxxopts, nlohmann-json, Catch2, zlib, TurboJPEG and libpng headers,
# protobuf (library and compiler) and Boost's headers,
# Debian's Fashion-MNIST and Python's jsonschema (pure Python), into ${DEPS_DIR:-.deps}.
# Run it on a Debian 12 machine with apt access; carry the folder to the GPU host, where
# scripts/gpu_host.sh unpacks it into a private prefix (never into /). About 53 MB.
set -euo pipefail
cd "$(dirname "$0")/.."
deps_dir=${DEPS_DIR:-.deps}
packages=(
  openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev libpmix2 libhwloc15 libhwloc-plugins
  libevent-core-2.1-7 libevent-pthreads-2.1-7 libevent-2.1-7 libfabric1 libucx0 libpsm2-2
  libpsm-infinipath1 libibverbs1 ibverbs-providers librdmacm1 libnl-3-200 libnl-route-3-200
  libnuma1 libltdl7 libmunge2 libcxxopts-dev nlohmann-json3-dev libyaml-cpp0.7 libyaml-cpp-dev catch2 zlib1g-dev
  libturbojpeg0 libturbojpeg0-dev libpng16-16 libpng-dev
  libprotobuf-dev libprotobuf32 libprotobuf-lite32 protobuf-compiler libprotoc32  # TensorBoard's event files
  libboost1.74-dev  # Boost.CRC (header-only)
  dataset-fashion-mnist  # the real training data, for the epoch benchmark
  python3-jsonschema python3-attr python3-pyrsistent  # the tests' check of run logs against their schema
)
mkdir -p "$deps_dir"
(cd "$deps_dir" && apt-get download "${packages[@]}")
echo "fetch_gpu_host_deps: $(ls "$deps_dir"/*.deb | wc -l) packages, $(du -sh "$deps_dir" | cut -f1) in $deps_dir"
