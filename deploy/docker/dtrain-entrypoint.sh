#!/bin/bash
# Entry point of the dtrain images, following the MPI operator's non-root pattern.
#
#   dtrain-entrypoint worker           sshd as the current user on port 2222 (own config, host keys and
#                                      pid file under $HOME), for the launcher's mpirun to reach
#   dtrain-entrypoint launcher CMD...  waits until every host in the MPI hostfile resolves, then runs CMD
#   dtrain-entrypoint CMD...           runs CMD (e.g. dtrain --help)
#
# Any UID works: OpenShift runs containers with an arbitrary UID in group 0, which has no passwd entry
# (ssh and Open MPI look the user up), so one is added (/etc/passwd is group-writable in the image) and
# HOME is the group-writable /home/dtrain.
set -euo pipefail
export HOME=/home/dtrain
if ! whoami >/dev/null 2>&1 && [ -w /etc/passwd ]; then
  echo "dtrain:x:$(id -u):$(id -g):dtrain:${HOME}:/bin/bash" >>/etc/passwd
fi

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
    exec /usr/sbin/sshd -De -f "$HOME/.sshd_config"
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
    exec "$@"
    ;;
  "")
    exec dtrain --help
    ;;
  *)
    exec "$@"
    ;;
esac
