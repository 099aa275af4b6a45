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
# (default 3600), --keep-checkpoints. Everything after `--` goes to dtrain. Ranks beyond the cores are
# oversubscribed (mpirun --oversubscribe); as root, Open MPI's run-as-root consent is set.
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
accelerator=cpu
label=()
study_parse "dtrain's flags" sizes reps out platform accelerator label+ dtrain timeout keep-checkpoints? -- "$@"
set -- ${study_rest[@]+"${study_rest[@]}"}
study_check_options "$out" "$sizes" "$reps" ${label[@]+"${label[@]}"}
case "$timeout" in ''|*[!0-9]*|0) echo "$STUDY_RUNNER: --timeout takes seconds, got '$timeout'" >&2; exit 2 ;; esac
if [ -z "$dtrain" ]; then
  if [ -x "$root/build/dtrain" ]; then dtrain=$root/build/dtrain; else dtrain=$(command -v dtrain || true); fi
fi
[ -n "$dtrain" ] && [ -x "$dtrain" ] || { echo "$STUDY_RUNNER: no dtrain binary (build it, or give --dtrain PATH)" >&2; exit 2; }
dtrain=$(cd "$(dirname "$dtrain")" && pwd)/$(basename "$dtrain")
command -v mpirun >/dev/null || { echo "$STUDY_RUNNER: mpirun not found (Debian: openmpi-bin)" >&2; exit 2; }

mkdir -p "$out"
failed=0
for size in $sizes; do
  for rep in $(seq 1 "$reps"); do
    dir=$(study_run_dir "$out" "$size" "$rep")
    rm -rf "$dir"
    mkdir -p "$dir"
    study_write_labels "$dir" platform="$platform" nodes="$size" ranks="$size" ranks_per_node=1 \
      gpus_per_node=0 accelerator="$accelerator" repetition="$rep" runner=local ${label[@]+"${label[@]}"}
    command=(timeout "$timeout" mpirun -np "$size" --oversubscribe "$dtrain" "$@"
             --log-dir "$dir/logs" --checkpoint-dir "$dir/checkpoints")
    study_launch "$dir" "size $size rep $rep" "${command[@]}" || failed=$((failed + 1))
    [ "$keep_checkpoints" -eq 1 ] || rm -rf "$dir/checkpoints"
  done
done
echo "$STUDY_RUNNER: runs in $out; tables and plots: dtrain-report $out --out REPORT_DIR"
[ "$failed" -eq 0 ]
