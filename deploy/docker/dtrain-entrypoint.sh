#!/bin/bash
# Entry point of the dtrain images, following the MPI operator's non-root pattern.
#
#   dtrain-entrypoint worker           sshd as the current user on port 2222 (own config, host keys and
#                                      pid file under $HOME), for the launcher's mpirun to reach
#   dtrain-entrypoint launcher CMD...  waits until every host in the MPI hostfile resolves, then runs CMD
#                                      (mpirun)
#   dtrain-entrypoint CMD...           runs CMD (e.g. dtrain --help, torchrun ... dtrain); for torchrun,
#                                      exits with the status of its first failed dtrain worker
#
# Any UID works: OpenShift runs containers with an arbitrary UID in group 0, which has no passwd entry
# (ssh and Open MPI look the user up), so one is added (/etc/passwd is group-writable in the image) and
# HOME is the group-writable /home/dtrain.
#
# Stopping: Kubernetes sends SIGTERM to a container's PID 1 only, terminationGracePeriodSeconds before
# SIGKILL, and a PID 1 without a handler ignores it (bash running `time ...` does). So this script stays
# PID 1, runs its command as a child, and hands a SIGTERM, SIGINT or SIGHUP on to the process that acts
# on it: in a worker, the dtrain ranks its sshd started; in the launcher, mpirun as SIGUSR2 (which mpirun
# relays to every rank at once, where it would answer SIGTERM with SIGKILL two seconds later); otherwise
# torchrun's agent (it relays to its workers) or, without one, dtrain. The ranks finish their step, save
# a checkpoint and exit 128 + the signal (docs/failures.md).
set -euo pipefail
# OpenBLAS, loaded with dtrain, can spin for ever before dtrain's own check runs when an address-space
# limit (ulimit -v) leaves it no room for its buffers (docs/failures.md, "Memory limits"): refused here.
vmem=$(ulimit -v)
if [ "$vmem" != unlimited ] && [ "$vmem" -lt 2097152 ]; then
  echo "dtrain-entrypoint: the address-space limit (ulimit -v) is $vmem KiB; dtrain needs at least 2097152 KiB (2 GiB)" \
    "to start, and room for its model and data (docs/failures.md, \"Memory limits\")" >&2
  exit 2
fi
export HOME=/home/dtrain
if ! whoami >/dev/null 2>&1 && [ -w /etc/passwd ]; then
  echo "dtrain:x:$(id -u):$(id -g):dtrain:${HOME}:/bin/bash" >>/etc/passwd
fi

# Sends signal $1 to every process of this container whose command name is $2; fails if there is none.
signal_named() {
  local found=1 proc
  for proc in /proc/[0-9]*; do
    [ "$(cat "$proc/comm" 2>/dev/null)" = "$2" ] || continue
    kill -s "$1" "${proc#/proc/}" 2>/dev/null && found=0
  done
  return $found
}
running() { local proc; for proc in /proc/[0-9]*; do [ "$(cat "$proc/comm" 2>/dev/null)" = "$1" ] && return 0; done; return 1; }

# Runs "$@" as a child, calling `relay SIGNAL` for each SIGTERM, SIGINT or SIGHUP; sets child_status to
# its status, or to 128 + the signal when the command stopped for the relayed one.
got=0
child_status=0
run_child() {
  "$@" <&0 &  # stdin stays the container's (a background job's would be /dev/null): `-it ... bash` works
  local child=$!
  trap 'got=15; relay TERM' TERM
  trap 'got=2; relay INT' INT
  trap 'got=1; relay HUP' HUP
  set +e
  while :; do
    wait "$child"
    child_status=$?
    kill -0 "$child" 2>/dev/null || break
  done
  # mpirun relays SIGUSR2 (exit 140), torchrun's agent exits 1 when it was stopped: report the signal
  # the pod was sent.
  if [ "$got" -ne 0 ] && [ "$child_status" -ne 0 ]; then child_status=$((128 + got)); fi
}
run_relaying() { run_child "$@"; exit "$child_status"; }

role=${1:-}
case "$role" in
  worker)
    port=${DTRAIN_SSH_PORT:-2222}
    keys=$HOME/.sshd
    mkdir -p "$keys"
    [ -f "$keys/ssh_host_ed25519_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$keys/ssh_host_ed25519_key"
    # StrictModes off: the operator's key secret is mounted group-readable, which sshd would refuse.
    cat >"$HOME/.sshd_config" <<CONFIG
Port $port
HostKey $keys/ssh_host_ed25519_key
PidFile $keys/sshd.pid
AuthorizedKeysFile $HOME/.ssh/authorized_keys
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PermitRootLogin no
AcceptEnv NCCL_* OMPI_* DTRAIN_*
CONFIG
    # Ranks start in ssh sessions, which do not inherit the image's environment. The library path matters:
    # on GKE the GPU driver's libraries (libcuda) are mounted at /usr/local/nvidia/lib64, outside ld.so's
    # cache, and reach dtrain only through LD_LIBRARY_PATH.
    if [ -n "${LD_LIBRARY_PATH:-}" ]; then
      echo "SetEnv LD_LIBRARY_PATH=$LD_LIBRARY_PATH" >>"$HOME/.sshd_config"
    fi
    if [ "${DTRAIN_SSHD_CHECK:-0}" = 1 ]; then
      exec /usr/sbin/sshd -t -f "$HOME/.sshd_config"  # validate the configuration only
    fi
    # The ranks run in sshd's sessions: when this PID 1 exits, the kernel kills them. So on a signal the
    # ranks get it, and the pod lives until they are done (or the grace period ends).
    /usr/sbin/sshd -De -f "$HOME/.sshd_config" &
    sshd=$!
    stopping=0
    trap 'stopping=1; signal_named TERM dtrain || true' TERM INT HUP
    set +e
    while :; do
      wait "$sshd"
      status=$?
      [ "$stopping" = 1 ] && break
      kill -0 "$sshd" 2>/dev/null || exit "$status"
    done
    while running dtrain; do sleep 0.2; done
    kill "$sshd" 2>/dev/null
    exit 0
    ;;
  launcher)
    shift
    hostfile=${DTRAIN_HOSTFILE:-/etc/mpi/hostfile}
    wait_s=${DTRAIN_WAIT_HOSTS_S:-600}
    if [ -f "$hostfile" ]; then
      # Worker pods are Ready before their DNS records always are; mpirun fails on the first miss.
      deadline=$(( $(date +%s) + wait_s ))
      for host in $(awk '!/^#/ && NF {print $1}' "$hostfile"); do
        case "$host" in *[!0-9.]*) ;; *) continue ;; esac  # an IPv4 address needs no resolving
        case "$host" in *:*) continue ;; esac             # nor does an IPv6 one
        until getent hosts "$host" >/dev/null; do
          if [ "$(date +%s)" -ge "$deadline" ]; then
            echo "dtrain-entrypoint: worker host '$host' from $hostfile did not resolve within ${wait_s} s" >&2
            exit 1
          fi
          sleep 2
        done
      done
      echo "dtrain-entrypoint: all $(awk '!/^#/ && NF' "$hostfile" | wc -l) hosts in $hostfile resolve"
    fi
    [ $# -gt 0 ] || { echo "dtrain-entrypoint: launcher needs a command" >&2; exit 2; }
    relay() { signal_named USR2 mpirun || signal_named "$1" dtrain || true; }
    run_relaying "$@"
    ;;
  "")
    exec dtrain --help
    ;;
  *)
    relay() { signal_named "$1" torchrun || signal_named "$1" dtrain || true; }
    error_dir=""
    # torchrun (also inside `bash -c "time torchrun ..."`, as the renders run it) exits 1 whatever its
    # workers did; its agent copies the first failed worker's error file, which dtrain writes with its exit
    # status, to TORCHELASTIC_ERROR_FILE (torch.distributed.elastic's record). The container then exits
    # with dtrain's status (docs/failures.md), which restart rules act on.
    # A read-only /tmp only costs this: the status stays torchrun's.
    if error_dir=$(mktemp -d -t dtrain-entrypoint.XXXXXX 2>/dev/null); then  # this user's alone (0700)
      export TORCHELASTIC_ERROR_FILE=$error_dir/error.json  # written only when a worker failed
    fi
    run_child "$@"
    code=""
    if [ "$child_status" -ne 0 ] && [ "$got" -eq 0 ] && [ -n "$error_dir" ] && [ -s "$TORCHELASTIC_ERROR_FILE" ]; then
      code=$(python3 -c 'import json, sys; print(int(json.load(open(sys.argv[1]))["message"]["errorCode"]))' \
               "$TORCHELASTIC_ERROR_FILE" 2>/dev/null || true)
    fi
    [ -z "$error_dir" ] || rm -rf "$error_dir"
    if [[ "$code" =~ ^[0-9]+$ ]] && [ "$code" -gt 0 ] && [ "$code" -lt 256 ] && [ "$code" -ne "$child_status" ]; then
      echo "dtrain-entrypoint: torchrun exited $child_status; its first failed worker, $code" >&2
      child_status=$code
    fi
    exit "$child_status"
    ;;
esac
