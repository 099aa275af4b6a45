#!/usr/bin/env bash
# Builds the CPU image with buildah (scripts/build_image.sh: debootstrap base, chroot isolation, vfs
# storage) and runs it: dtrain trains synthetic mnist for a few steps as the image's non-root user and
# as an arbitrary UID in group 0 (OpenShift), and the worker's sshd configuration is valid.
# Usage: image_test.sh   (needs root, as buildah's chroot isolation does on CI machines)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
export STORAGE_DRIVER=vfs
tag=localhost/dtrain:cpu-test
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

start=$(date +%s)
if ! bash "$root/scripts/build_image.sh" cpu --tag "$tag" >"${TMPDIR:-/tmp}/dtrain-image-build.log" 2>&1; then
  tail -n 40 "${TMPDIR:-/tmp}/dtrain-image-build.log"
  echo "FAIL: image build"; exit 1
fi
echo "image built in $(( $(date +%s) - start )) s: $(buildah images --format '{{.Name}}:{{.Tag}} {{.Size}}' "$tag")"

container=$(buildah from "$tag")
trap 'buildah rm "$container" >/dev/null 2>&1; buildah rmi "$tag" >/dev/null 2>&1' EXIT
run() {  # run USER CMD...: inside the image, as USER, through the entry point
  local user=$1; shift
  buildah run --isolation chroot --user "$user" "$container" -- /usr/local/bin/dtrain-entrypoint "$@"
}

[ "$(run 1000 id -un)" = dtrain ] || fail "UID 1000 is not the dtrain user"
[ "$(buildah inspect --format '{{.OCIv1.Config.User}}' "$tag")" = 1000 ] || fail "the image does not default to UID 1000"
if out=$(run 1000 dtrain --workload mnist --synthetic --max-steps 3 --eval-batch-size 2000 --checkpoint=false \
           --log-dir /home/dtrain/logs --progress-bar=false 2>&1) &&
   grep -q "{metricName: accuracy" <<<"$out"; then
  echo "PASS: trains as the image's non-root user"
else
  fail "training as UID 1000:"; echo "$out" | tail -n 20
fi
if out=$(run 1000650000:0 bash -c 'whoami && echo "HOME=$HOME" && dtrain --workload mnist --synthetic --max-steps 2 \
           --eval-batch-size 2000 --checkpoint=false --log-dir "$HOME/logs-uid" --progress-bar=false' 2>&1) &&
   grep -q "^dtrain$" <<<"$out" && grep -q "HOME=/home/dtrain" <<<"$out" && grep -q "{metricName: accuracy" <<<"$out"; then
  echo "PASS: an arbitrary UID in group 0 gets a passwd entry, a writable HOME and trains"
else
  fail "arbitrary UID:"; echo "$out" | tail -n 20
fi
if out=$(buildah run --isolation chroot --user 1000 --env DTRAIN_SSHD_CHECK=1 "$container" -- \
           /usr/local/bin/dtrain-entrypoint worker 2>&1); then
  echo "PASS: the worker's sshd configuration is valid for the non-root user"
else
  fail "sshd configuration:"; echo "$out"
fi
if run 1000 bash -c 'printf "nosuchhost-dtrain.invalid slots=1\n" >/tmp/hosts && DTRAIN_HOSTFILE=/tmp/hosts DTRAIN_WAIT_HOSTS_S=3 \
       dtrain-entrypoint launcher true' >/dev/null 2>&1; then
  fail "the launcher started although a worker host never resolved"
else
  echo "PASS: the launcher waits for worker hosts and gives up with an error"
fi
echo "image_test: $failures failure(s)"
[ "$failures" -eq 0 ]
