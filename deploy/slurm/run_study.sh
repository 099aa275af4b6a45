#!/usr/bin/env bash
# Runs a scaling study on a Slurm cluster into the study layout of docs/studies.md: for each size (nodes)
# and repetition, one job of dtrain.sbatch (or --script, e.g. satori.sbatch) whose output is the run's
# launcher.log (dtrain's console and bash time's lines), with dtrain's run log in the run's logs/ and
# result.yaml written when the job ends. Jobs are chained (each starts after the previous one ended), so
# runs never share nodes or the network; --wait blocks until the last one is done.
#
#   DTRAIN=$PWD/build-cuda-volta/dtrain deploy/slurm/run_study.sh --sizes "1 2 4 8" --reps 3 --out study-hpc-v100 \
#       --platform hpc --accelerator v100 --gpus-per-node 4 -- --workload mnist --epochs 10
#   dtrain-report study-hpc-v100 --out report
#
# Options: --sizes (nodes), --reps, --out DIR (on a filesystem the compute nodes share), --platform NAME,
# --accelerator NAME, --gpus-per-node G (also the ranks per node; 0 = CPU nodes), --ranks-per-node N (CPU
# nodes; default 1), --script PATH (default dtrain.sbatch beside this file), --sbatch-arg ARG (repeatable,
# e.g. --sbatch-arg=--partition=gpu), --label KEY=VALUE (repeatable), --wait. After `--`: dtrain's flags.
# DTRAIN and DTRAIN_MODULES pass to the jobs as dtrain.sbatch documents (V100 and P100 nodes need the
# volta build, `bash scripts/build_cuda.sh volta` into build-cuda-volta/; T4 and newer the current one).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
STUDY_RUNNER="slurm run_study"
# shellcheck source=../study_layout.sh
. "$here/../study_layout.sh"

sizes="1 2"
reps=1
out=""
platform=slurm
accelerator=""
gpus_per_node=0
ranks_per_node=1
script=$here/dtrain.sbatch
wait=0
sbatch_arg=()
label=()
study_parse "dtrain's flags" sizes reps out platform accelerator gpus-per-node ranks-per-node script sbatch-arg+ label+ \
  wait? -- "$@"
set -- ${study_rest[@]+"${study_rest[@]}"}
study_check_options "$out" "$sizes" "$reps" ${label[@]+"${label[@]}"}
for pair in "gpus-per-node:$gpus_per_node" "ranks-per-node:$ranks_per_node"; do
  case "${pair#*:}" in ''|*[!0-9]*) echo "$STUDY_RUNNER: --${pair%%:*} takes an integer, got '${pair#*:}'" >&2; exit 2 ;; esac
done
[ -f "$script" ] || { echo "$STUDY_RUNNER: job script '$script' not found" >&2; exit 2; }
command -v sbatch >/dev/null || { echo "$STUDY_RUNNER: sbatch not found (run this on a Slurm login node)" >&2; exit 2; }
if [ "$gpus_per_node" -gt 0 ]; then
  ranks_per_node=$gpus_per_node
  gres=(--gres="gpu:$gpus_per_node")
  [ -n "$accelerator" ] || accelerator=gpu
else
  gres=(--gres=none)
  [ -n "$accelerator" ] || accelerator=cpu
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)  # the jobs run elsewhere: absolute paths only

previous=""
for size in $sizes; do
  for rep in $(seq 1 "$reps"); do
    dir=$(study_run_dir "$out" "$size" "$rep")
    rm -rf "$dir"
    mkdir -p "$dir"
    study_write_labels "$dir" platform="$platform" nodes="$size" ranks=$(( size * ranks_per_node )) \
      gpus_per_node="$gpus_per_node" accelerator="$accelerator" repetition="$rep" runner=slurm \
      ${label[@]+"${label[@]}"}
    dependency=()
    [ -n "$previous" ] && dependency=(--dependency="afterany:$previous")
    command=(sbatch --parsable --nodes="$size" --ntasks-per-node="$ranks_per_node" "${gres[@]}"
             --job-name="dtrain-n$size-r$rep" --output="$dir/launcher.log" "${dependency[@]}"
             ${sbatch_arg[@]+"${sbatch_arg[@]}"} "$script" "$@" --log-dir "$dir/logs" --checkpoint-dir "$dir/checkpoints")
    [ "$wait" -eq 1 ] && command=("${command[0]}" --wait "${command[@]:1}")
    printf '%q ' "${command[@]}" >"$dir/command.txt"
    echo >>"$dir/command.txt"
    set +e
    job=$(DTRAIN_RUN_DIR=$dir DTRAIN_STUDY_LAYOUT=$here/../study_layout.sh DTRAIN_SLURM_DIR=$here "${command[@]}")
    code=$?
    set -e
    job=${job%%;*}
    if [ "$wait" -eq 1 ]; then
      echo "$STUDY_RUNNER: size $size rep $rep: job $job ended with exit $code -> $dir"
    elif [ "$code" -ne 0 ] || [ -z "$job" ]; then
      echo "$STUDY_RUNNER: sbatch failed for size $size rep $rep (exit $code)" >&2
      exit 1
    else
      echo "$STUDY_RUNNER: size $size rep $rep: job $job -> $dir"
    fi
    previous=$job
  done
done
echo "$STUDY_RUNNER: runs in $out; when the jobs are done: dtrain-report $out --out REPORT_DIR"
