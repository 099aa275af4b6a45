#!/usr/bin/env bash
# mpirun on this one machine, as it needs to be started here: Open MPI refuses to run as root unless told
# that it is meant (containers and CI machines often are root), and refuses more ranks than the cores it
# counts as slots. This adds --allow-run-as-root for root and --oversubscribe when -np asks for more
# ranks than there are cores; everything else goes to mpirun as given. On a cluster, use mpirun or srun
# themselves.
#   scripts/mpirun_local.sh -np 4 ./build/dtrain --workload mnist
#
# Stopping: a SIGTERM, SIGINT (Ctrl-C) or SIGHUP for this script reaches every rank at once as SIGUSR2,
# which mpirun relays as it is; the ranks finish their step, save a checkpoint and stop, and the script
# exits 128 + the signal it got (143 for SIGTERM). mpirun itself answers those three signals with SIGCONT
# to the ranks, SIGTERM one second later and SIGKILL one more second later (odls_base_sigkill_timeout),
# too soon for a checkpoint of a large model: so it runs in a process group of its own, where a
# terminal's Ctrl-C does not reach it. A second signal is relayed too: dtrain then exits at once.
# docs/failures.md has every launcher's path.
set -euo pipefail
# OpenBLAS, loaded with dtrain, can spin for ever before dtrain's own check runs when an address-space
# limit (ulimit -v) leaves it no room for its buffers (docs/failures.md, "Memory limits"): refused here.
vmem=$(ulimit -v)
if [ "$vmem" != unlimited ] && [ "$vmem" -lt 2097152 ]; then
  echo "mpirun_local: the address-space limit (ulimit -v) is $vmem KiB; dtrain needs at least 2097152 KiB (2 GiB)" \
    "to start, and room for its model and data (docs/failures.md, \"Memory limits\")" >&2
  exit 2
fi
flags=()
[ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
args=("$@")
for ((i = 0; i + 1 < ${#args[@]}; i++)); do
  case "${args[i]}" in
    -np | -n | --np | -c)
      if [[ "${args[i + 1]}" =~ ^[0-9]+$ ]] && [ "${args[i + 1]}" -gt "$(nproc)" ]; then flags+=(--oversubscribe); fi
      break ;;
  esac
done
got=0
relay() {
  got=$1
  kill -USR2 "$mpirun" 2>/dev/null || true
}
# setsid: a process group (and session) of mpirun's own; stdin stays this script's.
setsid mpirun "${flags[@]}" "$@" <&0 &
mpirun=$!
trap 'relay 15' TERM
trap 'relay 2' INT
trap 'relay 1' HUP
# wait returns early (status > 128) whenever a trapped signal arrives; wait again until mpirun is gone.
set +e
while :; do
  wait "$mpirun"
  status=$?
  kill -0 "$mpirun" 2>/dev/null || break
done
# The ranks stopped for the relayed SIGUSR2 (exit 140): report the signal this script was sent.
if [ "$got" -ne 0 ] && [ "$status" -eq 140 ]; then exit $((128 + got)); fi
exit "$status"
