#!/usr/bin/env bash
# Builds a dtrain image with buildah (scripts/build_image.sh: debootstrap base, chroot isolation, vfs
# storage) and runs it: dtrain trains synthetic mnist for a few steps as the image's non-root user and
# as an arbitrary UID in group 0 (OpenShift), the worker's sshd configuration is valid, and mpirun starts
# ranks through the worker's sshd as the MPI operator's launcher does. For the CUDA image also: dtrain
# has a CUDA LibTorch with the GPU kernels of its configuration (cuda: sm_75 and newer; cuda-volta: sm_60
# and sm_70 too) and the NCCL backend, and every library resolves except the GPU driver's, which the node
# provides. Without a GPU, the CUDA images train on the CPU.
# Usage: image_test.sh [cpu|cuda|cuda-volta]   (needs root, as buildah's chroot isolation does on CI
#        machines; CI runs cpu; the CUDA images download 3-4 GB each: on a 2-core VM the whole test took
#        5 min (cuda) and 7 min (cuda-volta)).
#        DTRAIN_TEST_IMAGE=TAG tests an image built before instead of building one.
#        image_test.sh KIND --build-only TAG builds the image this test would build, tagged TAG, and
#        stops (scripts/test.sh builds it so beside the other tests, then tests it).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
kind=${1:-cpu}
build_only=""
if [ "${2:-}" = --build-only ]; then
  build_only=${3:-}
  [ -n "$build_only" ] || { echo "image_test: --build-only needs the image's TAG" >&2; exit 2; }
fi
case "$kind" in cpu|cuda|cuda-volta) ;; *) echo "image_test: kind must be cpu, cuda or cuda-volta, got '$kind'" >&2; exit 2 ;; esac
export STORAGE_DRIVER=vfs
tag=localhost/dtrain:$kind-test
# shellcheck source=../support/checks.sh
. "$root/test/support/checks.sh"

# build TAG: the image under test, with its build log's end on failure.
build() {
  local start log
  start=$(date +%s)
  log=$(mktemp -t "dtrain-image-build-$kind.XXXXXX")  # kept when the build fails
  # dtrain at -O1: what is tested here does not depend on the optimisation, and the image's compile is
  # most of this test's time (-O3 by default, as users build it).
  if ! bash "$root/scripts/build_image.sh" "$kind" --tag "$1" --cxx-flags "-O1 -DNDEBUG" >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "FAIL: image build (its whole log: $log)"
    return 1
  fi
  rm -f "$log"
  echo "image built in $(( $(date +%s) - start )) s: $(buildah images --format '{{.Name}}:{{.Tag}} {{.Size}}' "$1")"
}
if [ -n "$build_only" ]; then
  build "$build_only"
  exit
fi
if [ -n "${DTRAIN_TEST_IMAGE:-}" ]; then
  tag=$DTRAIN_TEST_IMAGE  # test an image built before, and keep it
  buildah inspect --type image "$tag" >/dev/null || { echo "FAIL: no image '$tag'"; exit 1; }
  echo "testing $(buildah images --format '{{.Name}}:{{.Tag}} {{.Size}}' "$tag")"
  cleanup_image=""
else
  build "$tag" || exit 1
  cleanup_image="buildah rmi $tag"
fi

container=$(buildah from "$tag")
trap 'buildah rm "$container" >/dev/null 2>&1; $cleanup_image >/dev/null 2>&1' EXIT
run() {  # run USER CMD...: inside the image, as USER, through the entry point
  local user=$1; shift
  buildah run --isolation chroot --user "$user" "$container" -- /usr/local/bin/dtrain-entrypoint "$@"
}

[ "$(run 1000 id -un)" = dtrain ] || fail "UID 1000 is not the dtrain user"
if [ "$kind" != cpu ]; then
  version=$(run 1000 dtrain --version 2>&1)
  if [ "$kind" = cuda-volta ]; then
    kernels='GPU kernels sm_50, sm_60, sm_70, sm_75'  # P100 and V100 (P4 through sm_60)
  else
    kernels='GPU kernels sm_75, '  # T4 and newer; CUDA 13 builds nothing older
  fi
  if grep -q 'with CUDA' <<<"$version" && grep -q 'backends: mpi, nccl' <<<"$version" && grep -q "$kernels" <<<"$version"; then
    pass "$version"
  else
    fail "the $kind image's dtrain lacks NCCL, CUDA or '$kernels': $version"
  fi
  # libcuda and NVML belong to the driver, which the node mounts or injects.
  unresolved=$(run 1000 bash -c 'for f in /usr/local/bin/dtrain /usr/local/bin/dtrain_allreduce_bench /opt/dtrain/lib/*.so*; do
                                   ldd "$f" | sed "s|^|$f: |"; done' 2>&1 | grep 'not found' | grep -v -e libcuda.so -e libnvidia-ml.so)
  if [ -z "$unresolved" ]; then
    pass "every library of dtrain and /opt/dtrain/lib resolves in the image (the driver's aside)"
  else
    fail "unresolved libraries:"; echo "$unresolved"
  fi
fi
[ "$(buildah inspect --format '{{.OCIv1.Config.User}}' "$tag")" = 1000 ] || fail "the image does not default to UID 1000"
if out=$(run 1000 dtrain --workload mnist --synthetic --max-steps 3 --eval-samples 1000 --checkpoint=false \
           --log-dir /home/dtrain/logs --progress off 2>&1) &&
   grep -q "{metricName: accuracy" <<<"$out"; then
  pass "trains as the image's non-root user"
else
  fail "training as UID 1000:"; echo "$out" | tail -n 20
fi
if out=$(run 1000650000:0 bash -c 'whoami && echo "HOME=$HOME" && dtrain --workload mnist --synthetic --max-steps 2 \
           --eval-samples 1000 --checkpoint=false --log-dir "$HOME/logs-uid" --progress off' 2>&1) &&
   grep -q "^dtrain$" <<<"$out" && grep -q "HOME=/home/dtrain" <<<"$out" && grep -q "{metricName: accuracy" <<<"$out"; then
  pass "an arbitrary UID in group 0 gets a passwd entry, a writable HOME and trains"
else
  fail "arbitrary UID:"; echo "$out" | tail -n 20
fi
if out=$(buildah run --isolation chroot --user 1000 --env DTRAIN_SSHD_CHECK=1 "$container" -- \
           /usr/local/bin/dtrain-entrypoint worker 2>&1); then
  pass "the worker's sshd configuration is valid for the non-root user"
else
  fail "sshd configuration:"; echo "$out"
fi
# The launcher's path as under the MPI operator: mpirun reaches the worker's sshd with a key pair and
# starts the ranks there. 127.0.0.2 is a loopback address Open MPI does not count as this host, so it
# really goes through ssh. The worker's LD_LIBRARY_PATH (GKE's driver libraries) must reach the ranks.
port=$(( 20000 + RANDOM % 20000 ))
if out=$(run 1000 bash -c '
      set -e
      port=$1
      mkdir -p ~/.ssh && ssh-keygen -q -t ed25519 -N "" -f ~/.ssh/id_ed25519 && cp ~/.ssh/id_ed25519.pub ~/.ssh/authorized_keys
      LD_LIBRARY_PATH=/opt/driver-libs DTRAIN_SSH_PORT=$port dtrain-entrypoint worker & sshd=$!
      trap "kill $sshd" EXIT
      printf "127.0.0.2 slots=2\n" >/tmp/hostfile
      DTRAIN_HOSTFILE=/tmp/hostfile DTRAIN_WAIT_HOSTS_S=10 dtrain-entrypoint launcher \
        mpirun --hostfile /tmp/hostfile -np 2 --mca plm_rsh_args "-p $port -o ConnectionAttempts=10" \
        bash -c "echo rank \$OMPI_COMM_WORLD_RANK LD_LIBRARY_PATH=\$LD_LIBRARY_PATH; \
                 exec dtrain --workload mnist --synthetic --max-steps 3 --eval-samples 1000 --checkpoint=false \
                 --log-dir \$HOME/logs-ssh --progress off"' _ "$port" 2>&1) &&
   [ "$(grep -c 'LD_LIBRARY_PATH=/opt/driver-libs' <<<"$out")" = 2 ] && grep -q "{metricName: accuracy" <<<"$out"; then
  pass "mpirun starts 2 ranks through the worker's sshd, which passes LD_LIBRARY_PATH on, and they train"
else
  fail "mpirun over ssh:"; echo "$out" | tail -n 30
fi
# A worker pod deleted mid-epoch: Kubernetes sends SIGTERM to its PID 1, the entrypoint, which hands it to
# the ranks its sshd started and stays up until they are done; the ranks save a checkpoint and stop (143).
port=$(( 20000 + RANDOM % 20000 ))
if out=$(run 1000 bash -c '
      port=$1
      mkdir -p ~/.ssh && ssh-keygen -q -t ed25519 -N "" -f ~/.ssh/id_ed25519 && cp ~/.ssh/id_ed25519.pub ~/.ssh/authorized_keys
      DTRAIN_SSH_PORT=$port dtrain-entrypoint worker & worker=$!
      printf "127.0.0.2 slots=2\n" >/tmp/hostfile
      DTRAIN_HOSTFILE=/tmp/hostfile dtrain-entrypoint launcher \
        mpirun --hostfile /tmp/hostfile -np 2 --mca plm_rsh_args "-p $port -o ConnectionAttempts=10" \
        dtrain --workload mnist --synthetic --epochs 2 --max-steps 300 --log-interval 10 --eval-samples 500 \
        --log-dir $HOME/logs-stop --progress off & launcher=$!
      for _ in $(seq 1 480); do
        cat $HOME/logs-stop/*/events.jsonl 2>/dev/null | grep -q train_progress && break
        sleep 0.25
      done
      kill -TERM $worker
      wait $launcher; echo "launcher exit $?"
      wait $worker; echo "worker exit $?"
      grep "\"event\":\"stopped\"" $HOME/logs-stop/*/events.jsonl' _ "$port" 2>&1) &&
   grep -q "launcher exit 143" <<<"$out" && grep -q "worker exit 0" <<<"$out" &&
   grep -q '"signal":"SIGTERM".*"saved":true' <<<"$out"; then
  pass "SIGTERM to a worker's entrypoint reaches its ranks, which save a checkpoint and stop (143)"
else
  fail "SIGTERM to a worker pod's entrypoint:"; echo "$out" | tail -n 30
fi
if run 1000 bash -c 'printf "nosuchhost-dtrain.invalid slots=1\n" >/tmp/hosts && DTRAIN_HOSTFILE=/tmp/hosts DTRAIN_WAIT_HOSTS_S=3 \
       dtrain-entrypoint launcher true' >/dev/null 2>&1; then
  fail "the launcher started although a worker host never resolved"
else
  pass "the launcher waits for worker hosts and gives up with an error"
fi
# What the PyTorchJobs run (deploy/k8s/render_pytorchjob.py): torchrun's agent with dtrain workers. The CUDA
# image has no gloo backend for CPU training, so there it only has to start. torchrun tells the workers to
# meet at the host's name, which must resolve, as a pod's does: buildah's container ID does not, so the
# container is named localhost.
if [ "$kind" = cpu ]; then
  if out=$(buildah run --isolation chroot --hostname localhost --user 1000 "$container" -- /usr/local/bin/dtrain-entrypoint \
             bash -c 'time torchrun --standalone --nproc_per_node 2 --log_dir $HOME/torchrun-logs --redirects 1 \
             --tee 1 --no_python dtrain --workload mnist --synthetic --max-steps 3 --eval-samples 1000 \
             --checkpoint-dir $HOME/ck-torchrun --log-dir $HOME/logs-torchrun --progress off' 2>&1) &&
     grep -q "world size 2 .*backend gloo" <<<"$out" && grep -q "{metricName: accuracy" <<<"$out" &&
     grep -qE "^real[[:space:]]" <<<"$out"; then
    pass "torchrun in the image starts 2 dtrain workers that train as one world over gloo"
  else
    fail "torchrun in the image:"; echo "$out" | tail -n 30
  fi
  # torchrun itself exits 1 for any failed worker; the entrypoint exits with the worker's status (a
  # configuration error here, 2), which the TrainJob's restart rules read.
  out=$(buildah run --isolation chroot --hostname localhost --user 1000 "$container" -- /usr/local/bin/dtrain-entrypoint \
          bash -c 'time torchrun --standalone --nproc_per_node 2 --log_dir $HOME/torchrun-logs-bad --redirects 1 --tee 1 \
          --no_python dtrain --workload mnist --synthetic --epochs 0 --progress off' 2>&1)
  status=$?
  if [ "$status" -eq 2 ] && grep -q "dtrain-entrypoint: torchrun exited 1; its first failed worker, 2" <<<"$out"; then
    pass "a worker's configuration error under torchrun is the container's exit status 2, not torchrun's 1"
  else
    fail "torchrun's failed worker through the entrypoint: exit $status"; echo "$out" | tail -n 30
  fi
elif out=$(run 1000 torchrun --help 2>&1) && grep -q -- "--no_python" <<<"$out"; then
  pass "the image has torchrun for elastic PyTorchJobs"
else
  fail "no torchrun in the image:"; echo "$out" | tail -n 5
fi
echo "image_test: $failures failure(s)"
[ "$failures" -eq 0 ]
