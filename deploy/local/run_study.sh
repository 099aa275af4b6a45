#!/usr/bin/env bash
# Runs a scaling study on this machine: for each size (number of ranks, each standing in for a node) and
# repetition, one mpirun of dtrain into the study layout of docs/studies.md, timed by bash's `time` as on
# a cluster. For trying a study and its report before a cluster is at hand:
#
#   deploy/local/run_study.sh --sizes "1 2" --reps 2 --out study-local -- --workload mnist --synthetic --epochs 2
#   dtrain-report study-local --out report-local
#
# Options: --sizes "1 2 4" (ranks), --reps N, --out DIR, --platform NAME (label, default local),
# --accelerator NAME (label, default cpu), --label KEY=VALUE (more labels, repeatable),
# --dtrain PATH (default build/dtrain of this checkout, else dtrain on PATH), --timeout SECONDS per run
# (default 3600; the ranks are then stopped with a checkpoint), --keep-checkpoints, --oversubscribe (sizes
# above this machine's cores, which are refused without it: their times measure ranks sharing cores, not
# scaling), --allow-shared-dirs (an --out other users can write; passed on to dtrain). Everything after
# `--` goes to dtrain. As root, Open MPI's run-as-root consent is set.
# Ctrl-C (or SIGTERM, SIGHUP) stops the run in progress as mpirun_local.sh does (the ranks save a
# checkpoint and exit; a second one ends them at once), records it as stopped and ends the study, leaving
# no process behind; exit 128 + the signal.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
STUDY_RUNNER="local run_study"
# shellcheck source=../study_layout.sh
. "$here/../study_layout.sh"
# shellcheck source=../../scripts/mpi_env.sh
. "$root/scripts/mpi_env.sh"

sizes="1 2"
reps=1
out=""
platform=local
dtrain=""
timeout=3600
keep_checkpoints=0
oversubscribe=0
allow_shared_dirs=0
accelerator=cpu
label=()
study_parse "dtrain's flags" sizes reps out platform accelerator label+ dtrain timeout keep-checkpoints? oversubscribe? \
  allow-shared-dirs? -- "$@"
set -- ${study_rest[@]+"${study_rest[@]}"}
study_check_options "$out" "$sizes" "$reps" ${label[@]+"${label[@]}"}
case "$timeout" in ''|*[!0-9]*|0) echo "$STUDY_RUNNER: --timeout takes seconds, got '$timeout'" >&2; exit 2 ;; esac
if [ -z "$dtrain" ]; then
  if [ -x "$root/build/dtrain" ]; then dtrain=$root/build/dtrain; else dtrain=$(command -v dtrain || true); fi
fi
[ -n "$dtrain" ] && [ -x "$dtrain" ] || { echo "$STUDY_RUNNER: no dtrain binary (build it, or give --dtrain PATH)" >&2; exit 2; }
dtrain=$(cd "$(dirname "$dtrain")" && pwd)/$(basename "$dtrain")
command -v mpirun >/dev/null || { echo "$STUDY_RUNNER: mpirun not found (Debian: openmpi-bin)" >&2; exit 2; }
study_check_cores "$sizes" 1 "$oversubscribe"
study_make_out "$out" "$allow_shared_dirs"
shared=()
[ "$allow_shared_dirs" -eq 0 ] || shared=(--allow-shared-dirs)
study_trap_stops

failed=0
for size in $sizes; do
  for rep in $(seq 1 "$reps"); do
    dir=$(study_run_dir "$out" "$size" "$rep")
    study_new_run_dir "$dir"
    study_write_labels "$dir" platform="$platform" nodes="$size" ranks="$size" ranks_per_node=1 \
      gpus_per_node=0 accelerator="$accelerator" repetition="$rep" runner=local ${label[@]+"${label[@]}"}
    command=(mpirun -np "$size" --oversubscribe "$dtrain" "$@" --log-dir "$dir/logs" --checkpoint-dir "$dir/checkpoints"
             ${shared[@]+"${shared[@]}"})
    study_launch "$dir" "size $size rep $rep" "$timeout" "${command[@]}" || failed=$((failed + 1))
    [ "$keep_checkpoints" -eq 1 ] || rm -rf "$dir/checkpoints"
  done
done
echo "$STUDY_RUNNER: runs in $out; tables and plots: dtrain-report $out --out REPORT_DIR"
[ "$failed" -eq 0 ]
