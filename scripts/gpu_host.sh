#!/usr/bin/env bash
# Builds, tests and benchmarks dtrain on a GPU host whose only PyTorch is pip's CUDA wheel and which has
# no package manager access: Open MPI, yaml-cpp, cxxopts, nlohmann-json and Catch2 come from Debian 12 packages fetched
# elsewhere (scripts/fetch_gpu_host_deps.sh) and unpacked into a private prefix; LibTorch and NCCL come
# from the pip packages (torch, nvidia-nccl-*). See docs/gpu.md.
#
#   bash scripts/gpu_host.sh [build|test|bench|all]    (default: all)
#
#   PYTHON        interpreter with the CUDA torch (default python3)
#   DEPS_DIR      the fetched .deb files (default .deps)
#   DEPS_PREFIX   where they are unpacked (default ${TMPDIR:-/tmp}/dtrain-deps)
#   BUILD_DIR     build directory (default build-gpu)
#   OUT           if set, logs and JSON results are copied there
#   BUILD_TARGETS what `build` builds (default: everything)
#   CTEST_JOBS    tests run at a time by `test` (default 4); CTEST_ARGS: more ctest arguments (e.g. -R NAME)
#   CMAKE_ARGS    more cmake arguments for `build`
#   BENCHES       what `bench` runs (default: mnist allreduce vision epoch checkpoint)
set -euo pipefail
cd "$(dirname "$0")/.."
step=${1:-all}
python=${PYTHON:-python3}
deps_dir=${DEPS_DIR:-.deps}
prefix=${DEPS_PREFIX:-${TMPDIR:-/tmp}/dtrain-deps}
build_dir=${BUILD_DIR:-build-gpu}
results=${OUT:-$build_dir/results}
mkdir -p "$results"

# --- the unpacked Debian packages ----------------------------------------------------------------
# The host's own packages are used where it has them, Debian's for what it lacks: two copies of one
# library in a build (headers of one, the shared library of the other) link or run wrongly, as an
# nlohmann-json ABI mismatch and Open MPI loading another PMIx's plugins once showed. Each .deb belongs
# to a group, and a group is unpacked only when the host lacks it.
host_has() {
  case "$1" in
    mpi) command -v mpicxx >/dev/null && command -v mpirun >/dev/null ;;
    yaml) [ -f /usr/include/yaml-cpp/yaml.h ] ;;
    cxxopts) [ -f /usr/include/cxxopts.hpp ] ;;
    json) [ -f /usr/include/nlohmann/json.hpp ] ;;
    catch2) [ -f /usr/include/catch2/catch.hpp ] ;;  # version 2's single header (version 3 has none)
    zlib) [ -f /usr/include/zlib.h ] ;;
    png) [ -f /usr/include/png.h ] ;;
    turbojpeg) [ -f /usr/include/turbojpeg.h ] ;;
    protobuf) command -v protoc >/dev/null && [ -f /usr/include/google/protobuf/message_lite.h ] ;;
    boost) [ -f /usr/include/boost/crc.hpp ] ;;
    data) [ -d /usr/share/datasets/fashion-mnist ] ;;
    jsonschema) "$python" -c 'import jsonschema' 2>/dev/null && /usr/bin/python3 -c 'import jsonschema' 2>/dev/null ;;
    *) return 1 ;;
  esac
}
deb_group() {
  case "$1" in
    libyaml-cpp*) echo yaml ;;
    libcxxopts-dev) echo cxxopts ;;
    nlohmann-json3-dev) echo json ;;
    catch2) echo catch2 ;;
    zlib1g-dev) echo zlib ;;
    libpng*) echo png ;;
    libturbojpeg*) echo turbojpeg ;;
    libprotobuf* | libprotoc* | protobuf-compiler) echo protobuf ;;
    libboost*) echo boost ;;
    dataset-fashion-mnist) echo data ;;
    python3-*) echo jsonschema ;;
    *) echo mpi ;;  # Open MPI and the libraries it links
  esac
}
mpi_args=()
extra_prefix=""
mpirun_bin=$(command -v mpirun || true)
if ls "$deps_dir"/*.deb >/dev/null 2>&1; then
  missing=()
  for f in "$deps_dir"/*.deb; do
    group=$(deb_group "$(dpkg-deb -f "$f" Package)")
    host_has "$group" || missing+=("$f:$group")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(cat "$prefix/.unpacked" 2>/dev/null)" != "$(printf '%s\n' "${missing[@]}")" ]; then
      rm -rf "$prefix"
      mkdir -p "$prefix"
      for entry in "${missing[@]}"; do dpkg-deb -x "${entry%:*}" "$prefix"; done
      printf '%s\n' "${missing[@]}" >"$prefix/.unpacked"
    fi
    echo "gpu_host: from $deps_dir (the host lacks them): $(printf '%s\n' "${missing[@]##*:}" | sort -u | tr '\n' ' ')"
    arch_lib=$prefix/usr/lib/x86_64-linux-gnu
    extra_prefix="$prefix/usr"
    export PATH=$prefix/usr/bin:$PATH
    export LD_LIBRARY_PATH=$arch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    # Debian's pure-Python jsonschema (and attr, pyrsistent) for the tests' run-log checks.
    export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$prefix/usr/lib/python3/dist-packages
    if [ -x "$prefix/usr/bin/mpirun.openmpi" ]; then
      export LD_LIBRARY_PATH=$arch_lib/openmpi/lib:$LD_LIBRARY_PATH
      # Open MPI finds its help files, plugins and wrapper data through these once relocated.
      export OPAL_PREFIX=$prefix/usr OPAL_LIBDIR=$arch_lib/openmpi/lib OPAL_DATADIR=$prefix/usr/share/openmpi
      export OPAL_PKGDATADIR=$prefix/usr/share/openmpi OPAL_SYSCONFDIR=$prefix/etc/openmpi
      mpi_args=(-DMPI_CXX_COMPILER="$prefix/usr/bin/mpicxx.openmpi" -DMPIEXEC_EXECUTABLE="$prefix/usr/bin/mpirun.openmpi")
      mpirun_bin=$prefix/usr/bin/mpirun.openmpi
    fi
  else
    echo "gpu_host: the host has every package of $deps_dir; none unpacked"
  fi
elif ! host_has mpi; then
  echo "gpu_host: no Open MPI on this host and no .deb files in $deps_dir; run scripts/fetch_gpu_host_deps.sh on a Debian 12 machine and copy $deps_dir here" >&2
  exit 1
fi
. scripts/mpi_env.sh

# --- LibTorch and NCCL from pip ------------------------------------------------------------------
site=$("$python" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
nccl_root=$("$python" -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null || true)
# pip's libnccl.so.2 and the CUDA libraries beside torch must be found at run time as well.
export LD_LIBRARY_PATH=$site/torch/lib${nccl_root:+:$nccl_root/lib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# torchrun: the console script beside the interpreter's torch (pip puts it there), for the torchrun cases
# of e2e_torchrun and e2e_signals (they look for TORCHRUN, by default Debian's /usr/bin/torchrun).
if [ -z "${TORCHRUN:-}" ]; then
  for candidate in "$(dirname "$(command -v "$python")")/torchrun" "$(command -v torchrun || true)"; do
    if [ -n "$candidate" ] && [ -x "$candidate" ]; then
      export TORCHRUN=$candidate
      break
    fi
  done
fi

build() {
  # One source per compiler run (no unity batches): with 16 cores the build takes 49 s either way, and
  # one GPU host's GCC (/opt/gcc) crashed (internal compiler error) on a unity batch that Debian's g++ 12
  # compiles.
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDTRAIN_UNITY_BUILD=OFF \
    -DCMAKE_PREFIX_PATH="$site/torch${extra_prefix:+;$extra_prefix}" ${nccl_root:+-DNCCL_ROOT="$nccl_root"} \
    -DDTRAIN_WITH_NCCL=ON -DDTRAIN_TEST_LARGE_MODELS=ON -DDTRAIN_TEST_PYTHON="$(command -v "$python")" "${mpi_args[@]}" ${CMAKE_ARGS:-} 2>&1 | tee "$results/configure.log"
  cmake --build "$build_dir" --parallel "$(nproc)" ${BUILD_TARGETS:+--target $BUILD_TARGETS} 2>&1 | tail -n 20 | tee "$results/build.log"
}

run_tests() {
  nvidia-smi 2>&1 | tee "$results/nvidia-smi.txt" || true
  # Everything but the deploy files' tests (Slurm, buildah: not on these hosts), the peer benchmark
  # (Debian's PyTorch), README's commands (a fresh Debian machine's) and the tests that open pages in
  # Debian's Chromium (and install PyPI's tensorboard); the [gpu] cases run for real. ctest's log keeps
  # each test's output. The report's tests need pandas, matplotlib, PyYAML and PIL beside the CUDA torch.
  local exclude='deploy|peer|docs|browser'
  if "$python" -c 'import pandas, matplotlib, yaml, PIL' 2>/dev/null; then
    export DTRAIN_REPORT_PYTHON=$(command -v "$python")
  else
    echo "gpu_host: $python lacks pandas, matplotlib, PyYAML or PIL: the report's tests are left out" | tee "$results/ctest-skipped.txt"
    exclude="$exclude|report"
  fi
  # CTEST_JOBS tests at a time (default 4; the host has cores to spare), then whatever failed once more
  # on its own, so that a test that only fails under load is told apart from a broken one.
  local status=0
  (cd "$build_dir" && ctest --output-on-failure --timeout 900 -j "${CTEST_JOBS:-4}" -LE "$exclude" ${CTEST_ARGS:-} 2>&1) \
    | tee "$results/ctest.log" || status=$?
  if [ "$status" -ne 0 ]; then
    status=0
    (cd "$build_dir" && ctest --output-on-failure --timeout 900 --rerun-failed 2>&1) | tee "$results/ctest-rerun.log" \
      || status=$?
  fi
  # Which signals this host's mpirun relays to the ranks (dtrain stops with a checkpoint on SIGTERM,
  # SIGUSR1 and SIGUSR2 only if a rank receives one; docs/failures.md).
  bash scripts/mpi_signal_probe.sh "$mpirun_bin" 2>&1 | tee "$results/mpi_signals.txt" || true
  if [ -x "$build_dir/test/dtrain_nccl_tests" ]; then
    "$build_dir/test/dtrain_nccl_tests" --success --reporter compact 2>&1 | tail -n 5 | tee "$results/nccl_tests.log"
  fi
  # A checkpoint written on the GPU resumes there (restores once crashed on Ubuntu-linked builds).
  local ck="$results/resume-checkpoints"
  rm -rf "$ck"
  "$build_dir/dtrain" --workload mnist --synthetic --device cuda --backend nccl --max-steps 20 --epochs 1 \
    --checkpoint-dir "$ck" --log-dir "$results/dtrain-logs" --progress off 2>&1 | tee "$results/resume.log"
  "$build_dir/dtrain" --workload mnist --synthetic --device cuda --backend nccl --max-steps 20 --epochs 2 --resume \
    --checkpoint-dir "$ck" --log-dir "$results/dtrain-logs" --progress off 2>&1 | tee -a "$results/resume.log"
  grep -q "resumed at epoch 2 from" "$results/resume.log" && grep -q "^epoch 2/2" "$results/resume.log" || {
    echo "gpu_host: dtrain --resume did not continue at epoch 2 on the GPU (see $results/resume.log)" >&2
    return 1
  }
  return "$status"
}

# The benchmarks, each its own function; BENCHES picks some (default: all, in this order).
bench_mnist() {
  # The main job on the GPU: NCCL at world size 1, then 2 ranks sharing the GPU over MPI.
  "$build_dir/dtrain" --workload mnist --device cuda --backend nccl --epochs 2 --checkpoint=false \
    --progress off --log-dir "$results/dtrain-logs" "${data[@]}" 2>&1 | tee "$results/mnist_nccl_1rank.log"
  "$mpirun_bin" -np 2 --oversubscribe "$build_dir/dtrain" --workload mnist --device cuda --backend mpi --epochs 1 \
    --checkpoint=false --progress off --log-dir "$results/dtrain-logs" "${data[@]}" 2>&1 \
    | tee "$results/mnist_mpi_2ranks_1gpu.log"
}

bench_allreduce() {
  # At world size 1 a call costs a microsecond or two: 200 timed calls per size, so that a size's time
  # is not one scheduler hiccup; --breakdown times the raw call with dtrain's stream ordering added.
  "$build_dir/dtrain_allreduce_bench" --backend nccl --warmup 20 --iters 200 --breakdown --json "$results/allreduce_nccl_1rank.json" \
    2>&1 | tee "$results/allreduce_nccl_1rank.txt"
  "$mpirun_bin" -np 2 --oversubscribe "$build_dir/dtrain_allreduce_bench" --backend mpi --max-bytes 64M \
    --json "$results/allreduce_mpi_2ranks.json" 2>&1 | tee "$results/allreduce_mpi_2ranks.txt"
}

bench_vision() {
  # The vision models' training step against PyTorch eager on this GPU: bf16, then fp32, channels_last.
  local precision
  for precision in bf16 fp32; do
    "$python" bench/vision_step_bench.py --dtrain "$build_dir/dtrain" --device cuda --precision "$precision" \
      --channels-last --reps 3 --out "$results/vision_step_cuda_$precision.json" 2>&1 \
      | tee "$results/vision_step_cuda_$precision.txt"
  done
}

bench_epoch() {
  if [ "${data[0]}" = --data-dir ]; then
    "$python" bench/gpu_epoch_bench.py --dtrain "$build_dir/dtrain" --python "$python" --epochs 2 --reps 2 \
      --data-dir "${data[1]}" --out "$results/gpu_epoch.json" 2>&1 | tee "$results/gpu_epoch.txt"
  else
    echo "gpu_host: no Fashion-MNIST files on this host; the epoch comparison needs real data (see docs/gpu.md)" \
      | tee "$results/gpu_epoch.txt"
  fi
}

bench_checkpoint() {
  # What a checkpoint blocks on the GPU (the snapshot into pinned memory) and costs a ResNet-50 run.
  "$python" bench/checkpoint_cost_bench.py --dtrain "$build_dir/dtrain" --device cuda --reps 2 \
    --workloads resnet50 --out "$results/checkpoint_cost_cuda.json" 2>&1 | tee "$results/checkpoint_cost_cuda.txt"
}

run_bench() {
  # Fashion-MNIST from Debian's dataset package: installed, or unpacked with the other packages.
  data=(--synthetic)
  for dir in /usr/share/datasets/fashion-mnist "$prefix/usr/share/datasets/fashion-mnist"; do
    if [ -d "$dir" ]; then data=(--data-dir "$dir"); break; fi
  done
  local bench
  for bench in ${BENCHES:-mnist allreduce vision epoch checkpoint}; do
    case "$bench" in
      mnist | allreduce | vision | epoch | checkpoint) "bench_$bench" ;;
      *) echo "gpu_host: unknown benchmark '$bench' in BENCHES (mnist, allreduce, vision, epoch, checkpoint)" >&2; return 2 ;;
    esac
  done
}

case "$step" in
  build) build ;;
  test) run_tests ;;
  bench) run_bench ;;
  all) build; run_tests; run_bench ;;
  *) echo "usage: gpu_host.sh [build|test|bench|all]" >&2; exit 2 ;;
esac
