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
timeout_s=3600
keep_checkpoints=0
accelerator=cpu
extra_labels=()
while [ $# -gt 0 ]; do
  case "$1" in
    --sizes) sizes=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --platform) platform=$2; shift 2 ;;
    --dtrain) dtrain=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --keep-checkpoints) keep_checkpoints=1; shift ;;
    --accelerator) accelerator=$2; shift 2 ;;
    --label) extra_labels+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) echo "$STUDY_RUNNER: unknown option '$1' (expected --sizes, --reps, --out, --platform, --accelerator, --label, --dtrain, --timeout, --keep-checkpoints, then -- and dtrain's flags)" >&2; exit 2 ;;
  esac
done
study_check_options "$out" "$sizes" "$reps" ${extra_labels[@]+"${extra_labels[@]}"}
case "$timeout_s" in ''|*[!0-9]*|0) echo "$STUDY_RUNNER: --timeout takes seconds, got '$timeout_s'" >&2; exit 2 ;; esac
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
      gpus_per_node=0 accelerator="$accelerator" repetition="$rep" runner=local ${extra_labels[@]+"${extra_labels[@]}"}
    command=(timeout "$timeout_s" mpirun -np "$size" --oversubscribe "$dtrain" "$@"
             --log-dir "$dir/logs" --checkpoint-dir "$dir/checkpoints")
    study_launch "$dir" "size $size rep $rep" "${command[@]}" || failed=$((failed + 1))
    [ "$keep_checkpoints" -eq 1 ] || rm -rf "$dir/checkpoints"
  done
done
echo "$STUDY_RUNNER: runs in $out; tables and plots: dtrain-report $out --out REPORT_DIR"
[ "$failed" -eq 0 ]
