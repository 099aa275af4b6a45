#!/usr/bin/env bash
# Which signals an mpirun relays to its ranks. Job systems stop a job by signalling the launcher (Slurm's
# --signal, a batch system's pre-emption notice, a pod's SIGTERM), and dtrain saves a checkpoint on
# SIGTERM, SIGUSR1 and SIGUSR2 only if a rank receives one: which of them reach the ranks is the MPI's
# choice, and it differs between builds and versions (docs/failures.md).
#
#   bash scripts/mpi_signal_probe.sh [MPIEXEC] [SIGNALS...]     (default: mpirun; USR1 USR2 TERM INT HUP)
#
# For each signal: two ranks of a small bash program that record every signal they catch, the signal
# sent to mpirun once both are ready, 3 s to arrive. One line per signal:
#   SIGUSR1: ranks 0 1 got SIGUSR1; mpirun kept running
# and at the end the relayed ones, e.g. `relayed: USR1 USR2 TERM`. Runs as root where Open MPI allows it
# (OMPI_ALLOW_RUN_AS_ROOT), with --oversubscribe.
set -uo pipefail
mpiexec=${1:-mpirun}
shift || true
signals=("$@")
[ "${#signals[@]}" -gt 0 ] || signals=(USR1 USR2 TERM INT HUP)
command -v "$mpiexec" >/dev/null || { echo "mpi_signal_probe: no $mpiexec on PATH" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
echo "mpi_signal_probe: $("$mpiexec" --version 2>&1 | head -n 1)"

# The rank: records each signal in $dir/rank-R (R from Open MPI's, Slurm's or PMI's variable), then
# keeps running, so that what follows a relay (mpirun ending the job) shows apart from the relay.
cat >"$work/rank.sh" <<'RANK'
dir=$1
rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${SLURM_PROCID:-x}}}
for s in USR1 USR2 TERM INT HUP CONT TSTP QUIT; do trap "echo SIG$s >>$dir/rank-$rank" "$s"; done
touch "$dir/ready-$rank"
for _ in $(seq 1 200); do sleep 0.1; done
RANK

relayed=()
for sig in "${signals[@]}"; do
  dir="$work/$sig"
  mkdir -p "$dir"
  "$mpiexec" -np 2 --oversubscribe bash "$work/rank.sh" "$dir" >"$dir/mpirun.out" 2>&1 &
  launcher=$!
  for _ in $(seq 1 100); do
    [ -e "$dir/ready-0" ] && [ -e "$dir/ready-1" ] && break
    sleep 0.1
  done
  if ! { [ -e "$dir/ready-0" ] && [ -e "$dir/ready-1" ]; }; then
    echo "SIG$sig: the ranks did not start within 10 s"; cat "$dir/mpirun.out"
    kill -9 "$launcher" 2>/dev/null
    continue
  fi
  kill -s "$sig" "$launcher"
  sleep 3
  if kill -0 "$launcher" 2>/dev/null; then after="mpirun kept running"; else after="mpirun ended"; fi
  got=()
  for r in 0 1; do grep -qx "SIG$sig" "$dir/rank-$r" 2>/dev/null && got+=("$r"); done
  others=$(cat "$dir"/rank-* 2>/dev/null | grep -vx "SIG$sig" | sort -u | tr '\n' ' ')
  if [ "${#got[@]}" -gt 0 ]; then
    echo "SIG$sig: ranks ${got[*]} got SIG$sig${others:+ (and ${others% })}; $after"
    [ "${#got[@]}" -eq 2 ] && relayed+=("$sig")
  else
    echo "SIG$sig: no rank got it${others:+ (they got ${others% })}; $after"
  fi
  pkill -9 -f "$work/rank.sh" 2>/dev/null
  kill -9 "$launcher" 2>/dev/null
  wait "$launcher" 2>/dev/null
done
echo "relayed: ${relayed[*]:-none}"
