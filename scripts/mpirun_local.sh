#!/usr/bin/env bash
# mpirun on this one machine, as it needs to be started here: Open MPI refuses to run as root unless told
# that it is meant (containers and CI machines often are root), and refuses more ranks than the cores it
# counts as slots. This adds --allow-run-as-root for root and --oversubscribe when -np asks for more
# ranks than there are cores; everything else goes to mpirun as given. On a cluster, use mpirun or srun
# themselves.
#   scripts/mpirun_local.sh -np 4 ./build/dtrain --workload mnist
set -euo pipefail
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
exec mpirun "${flags[@]}" "$@"
