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
# e.g. --sbatch-arg=--partition=gpu), --label KEY=VALUE (repeatable), --wait, --allow-shared-dirs (an --out
# that other users can write, as a project directory often is; passed on to dtrain). After `--`: dtrain's
# flags. Ctrl-C (or SIGTERM, SIGHUP) cancels the jobs this study submitted (scancel: a running job's ranks
# save a checkpoint and exit as dtrain.sbatch arranges) and ends the study; exit 128 + the signal.
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
allow_shared_dirs=0
sbatch_arg=()
label=()
study_parse "dtrain's flags" sizes reps out platform accelerator gpus-per-node ranks-per-node script sbatch-arg+ label+ \
  wait? allow-shared-dirs? -- "$@"
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
study_make_out "$out" "$allow_shared_dirs"
out=$(cd "$out" && pwd)  # the jobs run elsewhere: absolute paths only
shared=()
[ "$allow_shared_dirs" -eq 0 ] || shared=(--allow-shared-dirs)
# A stop cancels what this study submitted: the job running and those waiting for it.
submitted=()
idfile=$(mktemp)
trap 'rm -f "$idfile"' EXIT
study_trap_stops
cancel_submitted() {
  local pending
  pending=$(cat "$idfile" 2>/dev/null || true)
  pending=${pending%%;*}
  [ -z "$pending" ] || submitted+=("$pending")
  if [ ${#submitted[@]} -gt 0 ]; then
    scancel "${submitted[@]}" 2>/dev/null || true
    echo "$STUDY_RUNNER: cancelled job(s) ${submitted[*]} (scancel)" >&2
  fi
}

previous=""
_study_busy=1  # a stop is handled below, between and during submissions, by cancelling what was submitted
for size in $sizes; do
  for rep in $(seq 1 "$reps"); do
    if [ "$_study_stop" -ne 0 ]; then cancel_submitted; study_exit_if_stopped; fi
    dir=$(study_run_dir "$out" "$size" "$rep")
    study_new_run_dir "$dir"
    study_write_labels "$dir" platform="$platform" nodes="$size" ranks=$(( size * ranks_per_node )) \
      gpus_per_node="$gpus_per_node" accelerator="$accelerator" repetition="$rep" runner=slurm \
      ${label[@]+"${label[@]}"}
    dependency=()
    [ -n "$previous" ] && dependency=(--dependency="afterany:$previous")
    command=(sbatch --parsable --nodes="$size" --ntasks-per-node="$ranks_per_node" "${gres[@]}"
             --job-name="dtrain-n$size-r$rep" --output="$dir/launcher.log" "${dependency[@]}"
             ${sbatch_arg[@]+"${sbatch_arg[@]}"} "$script" "$@" --log-dir "$dir/logs" --checkpoint-dir "$dir/checkpoints"
             ${shared[@]+"${shared[@]}"})
    [ "$wait" -eq 1 ] && command=("${command[0]}" --wait "${command[@]:1}")
    { printf '%q ' "${command[@]}"; echo; } | study_write_file "$dir/command.txt"
    # sbatch in the background (with --wait it lasts the job), printing the job's id as it submits it:
    # a stop meanwhile finds it there to cancel.
    : >"$idfile"
    DTRAIN_RUN_DIR=$dir DTRAIN_STUDY_LAYOUT=$here/../study_layout.sh DTRAIN_SLURM_DIR=$here "${command[@]}" >"$idfile" &
    submitter=$!
    set +e
    while :; do
      wait "$submitter"
      code=$?
      kill -0 "$submitter" 2>/dev/null || break
      # Stopped: the jobs are cancelled, and sbatch --wait, which would wait for their end, is not waited for.
      [ "$_study_stop" -eq 0 ] || { cancel_submitted; submitted=(); : >"$idfile"; kill "$submitter" 2>/dev/null; }
    done
    set -e
    job=$(cat "$idfile")
    job=${job%%;*}
    if [ "$_study_stop" -ne 0 ]; then
      cancel_submitted
      study_exit_if_stopped "size $size rep $rep:"
    fi
    if [ "$wait" -eq 1 ]; then
      echo "$STUDY_RUNNER: size $size rep $rep: job $job ended with exit $code -> $dir"
    elif [ "$code" -ne 0 ] || [ -z "$job" ]; then
      echo "$STUDY_RUNNER: sbatch failed for size $size rep $rep (exit $code)" >&2
      exit 1
    else
      echo "$STUDY_RUNNER: size $size rep $rep: job $job -> $dir"
    fi
    previous=$job
    submitted+=("$job")
  done
done
if [ "$_study_stop" -ne 0 ]; then cancel_submitted; study_exit_if_stopped; fi
echo "$STUDY_RUNNER: runs in $out; when the jobs are done: dtrain-report $out --out REPORT_DIR"
